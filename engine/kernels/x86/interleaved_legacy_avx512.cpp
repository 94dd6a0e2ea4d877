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

// Software prefetch distance: whole units, a little over 6 KiB ahead, each line of a pair of
// units prefetched once. Measured on the 1.1B models (decode, two threads): without prefetch
// decode ran 20-40 % slower. 4 KiB vs 8 KiB, per-product GB/s from `bench-model
// --profile-ops`, six alternating rounds: 1.1B Q4_0 down projection 63-70 -> 70-74 GB/s, QKV
// 59-68 -> 65-70, tg 104-118 -> 114-120 tok/s; 1.1B Q8_0 tg 58-61 -> 61-62; 110M Q4_0 tg
// 891-907 -> 921-948. 12 and 16 KiB were no better than 8 (16 KiB worse); bursts of four
// units every four units 6.5 KiB ahead were worse (tg 109-112). 6 KiB vs 8 KiB, two binaries
// alternated as processes with the order flipped each round (`bench-model -p 0 -n 64 -r 3`,
// median of 8-12 rounds per set): 1.1B Q8_0 +1.4 / +6.7 / +4.1 % (the last set: every one
// of 12 rounds faster), 1.1B Q4_0 +7.6 / +0.6 / +4.2 %, 110M Q8_0 +4.5 %, 110M Q4_0 +1.0 %.
template <typename L>
constexpr int64_t kAheadBytes = (6144 / L::kUnit + 1) * L::kUnit;
// A second prefetch of the same lines 32 KiB further ahead, into L2 (T1): the 6 KiB T0
// prefetch keeps L1 fed, the far one keeps more of the stream in flight from DRAM than the
// L1 misses alone allow. 1.1B tg64 (`bench-model -p 0 -n 64 -r 3 --no-bandwidth`), old and
// new binaries alternated: Q4_0 +5.8 % median of nine rounds (one -8 %, eight 0..+11 %; 64
// KiB no better than 32, 16 KiB less), Q4_1 +1..+7 %, Q5_1 +4..+8 %, IQ4_NL +4..+9 %, Q8_0
// +1..+8 % (three rounds each). The K-quant tiles (interleaved_avx512.h) read 20-30 % slower
// with the same far prefetch, so they keep theirs.
constexpr int64_t kFarAheadBytes = 32768;

// n_groups consecutive 16-row groups, NT tokens.
// init[t][b] = -offset * isum of token t's block b: each unit's block sums start from it with
// one broadcast load (computing it in the loop took a multiply and a move from a general
// register per unit and token).
template <typename L, int NT>
void RunGroups(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
               const int32_t* const* init, float* y, int64_t ldy) {
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, unit += L::kUnit) {
      if ((b & 1) == 0) {  // every line of the next two units once: 2 * kUnit is a multiple of 64
        const uint8_t* ahead = unit + kAheadBytes<L>;
        const uint8_t* line = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(ahead) & ~uintptr_t{63});
        for (int64_t off = 0; off < 2 * L::kUnit; off += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(line + off), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(line + off + kFarAheadBytes), _MM_HINT_T1);
        }
      }
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
