// AVX-512 VNNI kernels for the 32-value block types (Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, IQ4_NL) in
// the row-interleaved layout (interleave.h).
//
// Decode tile: one unit (block b of a 16-row group) is the 16 rows' f16 d, then the block's
// quads, each a 512-bit vector with row r in lane r. Per unit and token: the int32 block sums
// of all 16 rows start at -offset * sum(y of the block) (the activation's isum; offset 8 for
// Q4_0 nibbles, 128 for Q8_0 levels stored xor 0x80) and take one vpdpbusd per quad-vector
// against the token's 4 activation bytes broadcast from memory; then one conversion and one
// FMA with d_w (16 lanes, one vcvtph2ps) x d_y. No horizontal sums, no per-row scale gather:
// ~33 instructions per 288 bytes of Q4_0 where the row-layout tile needs ~60 per 144. The
// block sums use two independent vpdpbusd chains so consecutive quads do not wait on each
// other's latency. Consecutive groups are contiguous, so a call streams one run of memory.
//
// GEMM packing: the packed tile of gemm_legacy_avx512.cpp (8 quads of unsigned levels + 16
// d as f32 per block) is a mask / shift / copy of the unit, one vector op per quad.
#include <vector>

#include "engine/kernels/interleave.h"
#include "engine/kernels/x86/avx512_kernels.h"
#include "engine/kernels/x86/gemm_avx512.h"
#include "engine/kernels/x86/interleaved_avx512.h"


namespace lifeline::kernels::avx512 {
namespace {

struct Q4_0I {
  static constexpr int kBlockBytes = 18, kOffset = 8;
  static constexpr bool kMin = false;
  static constexpr int64_t kUnit = 16 * kBlockBytes;
  // The 8 level vectors of a unit; v[j] pairs with activation bytes 4j..4j+3. Quad k < 4
  // holds values 4k..4k+3 in its low nibbles and 16 + 4k.. in its high ones, so v[k] = q & 0x0f
  // and v[k + 4] = q & 0xf0: the high nibbles stay in place, worth 16x (one op instead of a
  // shift and a mask); their block sum is exact in int32 and High() divides it back.
  static inline void Levels(const uint8_t* unit, __m512i (&v)[8]) {
    const __m512i lo = _mm512_set1_epi8(0x0f);
    const __m512i hi = _mm512_set1_epi8(static_cast<char>(0xf0));
    for (int k = 0; k < 4; ++k) {
      __m512i q = _mm512_loadu_si512(unit + 32 + 64 * k);
      // Keep q in a register: otherwise the compiler folds the load into both ANDs and every
      // quad is read from L1 twice, and the loads, not the arithmetic, bound the tile
      // (standalone loop in L1: 4.3 -> 3.05 ns per unit).
      __asm__("" : "+v"(q));
      v[k] = _mm512_and_si512(q, lo);
      v[k + 4] = _mm512_and_si512(q, hi);
    }
  }
  static inline __m512i High(__m512i s) { return _mm512_srai_epi32(s, 4); }
  // Plain levels for the GEMM packing.
  static inline void PlainLevels(const uint8_t* unit, __m512i (&v)[8]) {
    Levels(unit, v);
    for (int k = 4; k < 8; ++k) v[k] = _mm512_srli_epi16(v[k], 4);
  }
};

struct Q8_0I {
  static constexpr int kBlockBytes = 34, kOffset = 128;
  static constexpr bool kMin = false;
  static constexpr int64_t kUnit = 16 * kBlockBytes;
  static inline void Levels(const uint8_t* unit, __m512i (&v)[8]) {
    for (int k = 0; k < 8; ++k) v[k] = _mm512_loadu_si512(unit + 32 + 64 * k);
  }
  static inline __m512i High(__m512i s) { return s; }
  static inline void PlainLevels(const uint8_t* unit, __m512i (&v)[8]) { Levels(unit, v); }
};

// Q4_1: the d and m arrays, then Q4_0's four nibble quads; levels 0..15, no offset; the
// min term m_w * s_y is one FMA per unit and token.
struct Q4_1I {
  static constexpr int kBlockBytes = 20, kOffset = 0;
  static constexpr int64_t kUnit = 16 * kBlockBytes;
  static constexpr bool kMin = true;
  static inline void Levels(const uint8_t* unit, __m512i (&v)[8]) {
    const __m512i lo = _mm512_set1_epi8(0x0f);
    const __m512i hi = _mm512_set1_epi8(static_cast<char>(0xf0));
    for (int k = 0; k < 4; ++k) {
      __m512i q = _mm512_loadu_si512(unit + 64 + 64 * k);
      __asm__("" : "+v"(q));  // one load per quad (see Q4_0I)
      v[k] = _mm512_and_si512(q, lo);
      v[k + 4] = _mm512_and_si512(q, hi);
    }
  }
  static inline __m512i High(__m512i s) { return _mm512_srai_epi32(s, 4); }
  static inline void PlainLevels(const uint8_t* unit, __m512i (&v)[8]) {
    Levels(unit, v);
    for (int k = 4; k < 8; ++k) v[k] = _mm512_srli_epi16(v[k], 4);
  }
};

// Q5_0 / Q5_1: after the f16 arrays, the qh quad (bit e of row r's 32-bit word: the fifth
// bit of value e) and four nibble quads. The high nibbles are shifted down (a fifth bit
// above an in-place nibble would not fit the byte); each quad's four fifth bits come from
// one qh byte per lane, copied to the lane's four bytes (vpshufb), tested against one bit
// per byte (vptestmb) and added as 16 under that mask. Levels 0..31; offset 16 for Q5_0,
// the min term for Q5_1.
template <int kQh, int kOffsetV, bool kMinV>
struct Q5I {
  static constexpr int kBlockBytes = kMinV ? 24 : 22, kOffset = kOffsetV;
  static constexpr int64_t kUnit = 16 * kBlockBytes;
  static constexpr bool kMin = kMinV;
  // vpshufb control: byte b of every int32 lane in all four of its bytes.
  static inline __m512i Replicate(int b) {
    return _mm512_add_epi32(_mm512_set1_epi32(0x01010101 * b),
                            _mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0));
  }
  // Bit s + i in byte i of every int32 lane.
  static inline __m512i BitPerByte(int s) {
    return _mm512_set1_epi32(static_cast<int>((1u << s) | (2u << s) << 8 | (4u << s) << 16 | (8u << s) << 24));
  }
  static inline void Levels(const uint8_t* unit, __m512i (&v)[8]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i k16 = _mm512_set1_epi8(16);
    const __m512i qh = _mm512_loadu_si512(unit + kQh);
    for (int k = 0; k < 4; ++k) {
      __m512i q = _mm512_loadu_si512(unit + kQh + 64 + 64 * k);
      __asm__("" : "+v"(q));
      const __m512i lo = _mm512_and_si512(q, m4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
      // Values 4k.. take qh bits 4k..4k+3 (byte k / 2), values 16 + 4k.. bits 16 + 4k.. .
      const __mmask64 h_lo = _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, Replicate(k / 2)), BitPerByte(4 * (k % 2)));
      const __mmask64 h_hi = _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, Replicate(2 + k / 2)), BitPerByte(4 * (k % 2)));
      v[k] = _mm512_mask_add_epi8(lo, h_lo, lo, k16);
      v[k + 4] = _mm512_mask_add_epi8(hi, h_hi, hi, k16);
    }
  }
  static inline __m512i High(__m512i s) { return s; }
  static inline void PlainLevels(const uint8_t* unit, __m512i (&v)[8]) { Levels(unit, v); }
};
using Q5_0I = Q5I<32, 16, false>;
using Q5_1I = Q5I<64, 0, true>;

// IQ4_NL: Q4_0's unit; the nibbles index the 16-entry grid held + 128 (unsigned levels
// 1..241, offset 128) in every 128-bit lane, one vpshufb per level vector.
struct IQ4_NLI {
  static constexpr int kBlockBytes = 18, kOffset = 128;
  static constexpr int64_t kUnit = 16 * kBlockBytes;
  static constexpr bool kMin = false;
  static inline void Levels(const uint8_t* unit, __m512i (&v)[8]) {
    const __m512i grid = _mm512_broadcast_i32x4(_mm_setr_epi8(
        1, 24, 45, 63, 79, 93, 106, 118, static_cast<char>(129), static_cast<char>(141),
        static_cast<char>(153), static_cast<char>(166), static_cast<char>(181),
        static_cast<char>(197), static_cast<char>(217), static_cast<char>(241)));
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int k = 0; k < 4; ++k) {
      __m512i q = _mm512_loadu_si512(unit + 32 + 64 * k);
      __asm__("" : "+v"(q));
      v[k] = _mm512_shuffle_epi8(grid, _mm512_and_si512(q, m4));
      v[k + 4] = _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
    }
  }
  static inline __m512i High(__m512i s) { return s; }
  static inline void PlainLevels(const uint8_t* unit, __m512i (&v)[8]) { Levels(unit, v); }
};

// One unit (block b of a 16-row group) for NT tokens.
template <typename L, int NT>
__attribute__((always_inline)) inline void Unit(const uint8_t* unit, int64_t b, const ActRow* a,
                                                const int32_t* const* init, __m512 (&acc)[NT]) {
  __m512i v[8];
  L::Levels(unit, v);
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit)));
  for (int t = 0; t < NT; ++t) {
    const uint8_t* yq = reinterpret_cast<const uint8_t*>(a[t].qs + 32 * b);
    __m512i s0 = _mm512_set1_epi32(init[t][b]);
    __m512i s1 = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {  // two independent chains: values 0..15 and 16..31
      s0 = DpbusdBcast(s0, v[j], yq + 4 * j);
      s1 = DpbusdBcast(s1, v[j + 4], yq + 16 + 4 * j);
    }
    s0 = _mm512_add_epi32(s0, L::High(s1));
    const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(a[t].d[b]));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), scale, acc[t]);
  }
  if constexpr (L::kMin) {  // + m_w * s_y
    const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit + 32)));
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a[t].s[b]), acc[t]);
  }
}

// Prefetch of lines [first, last) from the line holding p.
static inline void PrefetchLineRange(const uint8_t* p, int first, int last) {
  const uint8_t* line = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63});
  for (int l = first; l < last; ++l) _mm_prefetch(reinterpret_cast<const char*>(line + 64 * l), _MM_HINT_T0);
}

// The loop walks chunks of kChunkUnits units, unrolled, and prefetches the lines of the chunk
// kAheadBytes further on in two bursts (at its first and middle unit), the shape of the
// K-quant tiles (one 2304-byte Q4_K unit per iteration, interleaved_avx512.h). One unit per
// iteration (with the next two units' lines prefetched 6 KiB ahead, and again 32 KiB ahead
// into L2) streamed Q4_0 from DRAM no faster than a plain read loop, while the K-quant tiles
// ran 20-30 % past it. The burst schedule alone, issued from the one-unit loop, was slower
// still (1.1B Q8_0 tg64 36-38 against 57-58 tok/s for the chunk); the unrolled chunk is what
// streams.
// `kernels_bench --types=q4_0 --rows=5632 --cols=2048`: one thread 22-24 -> 29-33 GB/s, two
// 42-44 -> 60-65. End to end (1.1B tg64, two threads, the same binary alternated): Q4_0
// 73 -> 96-100 tok/s, Q8_0 41 -> 58, Q4_1 66 -> 85, Q5_1 58 -> 80, IQ4_NL 72 -> 83-86.
// Verification passes (`bench-model --verify-k K`, 1.1B Q4_0): k = 2 and 4 10-25 % faster,
// 6 and 8 within the noise (a loop without the unroll for more than 4 tokens was no better).
// 4.5 KiB ahead read like 9 KiB and better than 2 KiB.
constexpr int kChunkUnits = 8;
constexpr int64_t kAheadBytes = 4608;

// n_groups consecutive 16-row groups, NT tokens.
// init[t][b] = -offset * isum of token t's block b: each unit's block sums start from it with
// one broadcast load (computing it in the loop took a multiply and a move from a general
// register per unit and token).
template <typename L, int NT>
void RunGroups(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
               const int32_t* const* init, float* y, int64_t ldy) {
  // Lines of one chunk (8 units are a whole number of lines) plus one for the burst start's
  // rounding down.
  constexpr int kLines = static_cast<int>(kChunkUnits * L::kUnit / 64) + 1;
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + kChunkUnits <= nb; b += kChunkUnits, unit += kChunkUnits * L::kUnit) {
#pragma GCC unroll 8
      for (int u = 0; u < kChunkUnits; ++u) {
        if (u == 0) PrefetchLineRange(unit + kAheadBytes, 0, kLines / 2);
        if (u == kChunkUnits / 2) PrefetchLineRange(unit + kAheadBytes, kLines / 2, kLines);
        Unit<L, NT>(unit + u * L::kUnit, b + u, a, init, acc);
      }
    }
    if (b < nb) {  // the group's last nb % 8 units
      // Every line the tail's bytes touch: rounded up, plus one for the start's rounding down.
      PrefetchLineRange(unit + kAheadBytes, 0, static_cast<int>(((nb - b) * L::kUnit + 63) / 64) + 1);
      for (; b < nb; ++b, unit += L::kUnit) Unit<L, NT>(unit, b, a, init, acc);
    }
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy + 16 * g, acc[t]);
  }
}

// The packed GEMM tile (gemm_legacy_avx512.cpp: per block 8 level quads of 64 bytes, then
// the 16 rows' d as f32, and for Q4_1 / Q5_1 their m as f32; kStride = 576 / 640 bytes) from
// one interleaved group.
template <typename L>
void PackInterleaved(const uint8_t* w, uint64_t, int64_t cols, uint8_t* packed) {
  constexpr int64_t kStride = L::kMin ? 640 : 576;
  const int64_t nb = cols / 32;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* unit = w + b * L::kUnit;
    uint8_t* out = packed + b * kStride;
    __m512i v[8];
    L::PlainLevels(unit, v);
    for (int j = 0; j < 8; ++j) _mm512_store_si512(out + 64 * j, v[j]);
    _mm512_store_ps(out + 512, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit))));
    if constexpr (L::kMin) {
      _mm512_store_ps(out + 576, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit + 32))));
    }
  }
}

// The layout struct RegisterInterleaved (interleaved_avx512.h) takes.
template <typename L>
struct Kernels {
  static constexpr int64_t kBlockElems = 32;
  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    thread_local std::vector<int32_t> init_buf;
    if (init_buf.size() < static_cast<size_t>(NT * nb)) init_buf.resize(static_cast<size_t>(NT * nb));
    const int32_t* init[NT];
    for (int t = 0; t < NT; ++t) {
      int32_t* row = init_buf.data() + t * nb;
      for (int64_t b = 0; b < nb; ++b) row[b] = -L::kOffset * a[t].isum[b];
      init[t] = row;
    }
    RunGroups<L, NT>(w, rb, n_groups, a, nb, init, y, ldy);
  }
  static void Pack(const uint8_t* w, uint64_t rb, int64_t cols, uint8_t* packed) {
    PackInterleaved<L>(w, rb, cols, packed);
  }
};

}  // namespace

void FillInterleavedLegacy(MatmulImpl* impl) {
  RegisterInterleaved<Kernels<Q4_0I>>(impl, GgmlType::kQ4_0);
  RegisterInterleaved<Kernels<Q8_0I>>(impl, GgmlType::kQ8_0);
  RegisterInterleaved<Kernels<Q4_1I>>(impl, GgmlType::kQ4_1);
  RegisterInterleaved<Kernels<Q5_0I>>(impl, GgmlType::kQ5_0);
  RegisterInterleaved<Kernels<Q5_1I>>(impl, GgmlType::kQ5_1);
  RegisterInterleaved<Kernels<IQ4_NLI>>(impl, GgmlType::kIQ4_NL);
}

}  // namespace lifeline::kernels::avx512
