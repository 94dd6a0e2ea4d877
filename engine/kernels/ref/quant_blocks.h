// On-disk block layouts of the GGUF quantized types (ggml's block_q4_0 ... block_q8_K), as
// plain structs so code can name fields instead of byte offsets. The field order and sizes are
// the file format: every struct is static_assert'ed to its ggml_type.h block_bytes.
//
// Half-precision scales are stored as raw IEEE binary16 bits (uint16_t); convert with
// Fp16ToFp32 (engine/kernels/fp16.h). All multi-byte fields are little-endian on disk, which is
// also the in-memory order on every target we build for.
//
// These are views over bytes the caller owns (a file mapping, a row buffer); they own nothing.
// Blocks are byte-aligned in files (alignment 2 at most), so read them through memcpy or from
// buffers that are suitably aligned.
// Thread-safety: types only.
#pragma once

#include <cstdint>

#include "engine/kernels/ggml_type.h"

namespace lifeline::ref {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK8_1 = 32;
inline constexpr int kQK = static_cast<int>(kQK_K);  // K-quant super-block, 256 values
// The K-quants' 6-bit scale/min pairs are packed into this many bytes (Q4_K, Q5_K), and
// Q3_K's sixteen 6-bit scales likewise.
inline constexpr int kKScaleBytes = 12;

// value = d * (q - 8); q in [0, 15]. qs[j] low nibble is element j, high nibble element j+16.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 2 + 16);

// IQ4_NL: value = d * kIq4nlValues[q]; q in [0, 15], nibble order as Q4_0 (same bytes as
// BlockQ4_0, other meaning). The table is ggml's kvalues_iq4nl: a non-linear grid denser
// near zero, where most weights lie.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == 2 + 16);
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// value = d * q + m; q in [0, 15]. Nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 2 + 2 + 16);

// value = d * (q - 16); q in [0, 31]: low 4 bits in qs (nibble order as Q4_0), the fifth bit
// of element j is bit j of the little-endian uint32 qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 2 + 4 + 16);

// value = d * q + m; q in [0, 31]; bit packing as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 2 + 2 + 4 + 16);

// value = d * q; q in [-127, 127] (the quantizer never writes -128).
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 2 + 32);

// Activation type for the Q4_1/Q5_1 dot products: as Q8_0 plus s = d * sum(qs), so the
// weight's min term costs one multiply per block.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK8_1];
};
static_assert(sizeof(BlockQ8_1) == 2 + 2 + 32);

// 16 sub-blocks of 16. scales[i]: low nibble = 4-bit scale, high nibble = 4-bit min of
// sub-block i; value = d * sc * q - dmin * m, q in [0, 3]. qs holds 2-bit values; see
// DequantizeRowQ2K for the element order.
struct BlockQ2K {
  uint8_t scales[kQK / 16];
  uint8_t qs[kQK / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2K) == 16 + 64 + 2 + 2);

// 16 sub-blocks of 16 with signed 6-bit scales (stored +32) packed into 12 bytes; value =
// d * (sc - 32) * (q - 4), q in [0, 7]: two low bits in qs (as Q2_K), the third in hmask.
struct BlockQ3K {
  uint8_t hmask[kQK / 8];
  uint8_t qs[kQK / 4];
  uint8_t scales[kKScaleBytes];
  uint16_t d;
};
static_assert(sizeof(BlockQ3K) == 32 + 64 + 12 + 2);

// 8 sub-blocks of 32 with 6-bit scale and min each, packed into 12 bytes (see
// UnpackScaleMinK4); value = d * sc * q - dmin * m, q in [0, 15].
struct BlockQ4K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4K) == 2 + 2 + 12 + 128);

// As Q4_K with a fifth bit per value in qh; q in [0, 31].
struct BlockQ5K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK / 8];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5K) == 2 + 2 + 12 + 32 + 128);

// 16 sub-blocks of 16 with signed 8-bit scales; value = d * sc * (q - 32), q in [0, 63]:
// low 4 bits in ql, high 2 bits in qh.
struct BlockQ6K {
  uint8_t ql[kQK / 2];
  uint8_t qh[kQK / 4];
  int8_t scales[kQK / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6K) == 128 + 64 + 16 + 2);

// Activation type for the K-quant dot products: f32 scale, 8-bit values, and the sums of
// each group of 16 values (for the K-quants' min terms).
struct BlockQ8K {
  float d;
  int8_t qs[kQK];
  int16_t bsums[kQK / 16];
};
static_assert(sizeof(BlockQ8K) == 4 + 256 + 32);

// Q4_K / Q5_K scale packing: sub-blocks 0..3 keep their 6-bit scale in the low bits of
// bytes 0..3 and their min in bytes 4..7; sub-blocks 4..7 keep the low 4 bits of scale and
// min in the nibbles of bytes 8..11 and their top 2 bits in bits 6..7 of bytes 0..3 (scale)
// and 4..7 (min).
inline void UnpackScaleMinK4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q3_K scale packing: the 16 six-bit values (stored +32, i.e. as unsigned 0..63) keep their
// low 4 bits in the nibbles of bytes 0..7 (sub-block j < 8 in the low nibble of byte j,
// j >= 8 in the high nibble of byte j-8) and their top 2 bits in bytes 8..11 (sub-block j in
// bits 2*(j/4).. of byte 8 + j%4). Returns the signed scale (-32..31).
inline int UnpackScaleQ3K(int j, const uint8_t* q) {
  const int low = j < 8 ? (q[j] & 0x0f) : (q[j - 8] >> 4);
  const int high = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace lifeline::ref
