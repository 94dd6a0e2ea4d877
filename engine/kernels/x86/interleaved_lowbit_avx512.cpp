// AVX-512 VNNI decode tiles for Q2_K / Q3_K matrices in the row-interleaved layout
// (interleave.h): the low-bit K-quants of llama.cpp's Q2_K and Q3_K_* mixes. Before these,
// both types ran the scalar twin (a tenth of the memory bandwidth).
//
// Both types have 16 sub-blocks of 16 values per 256-value super-block; element
// 128h + 32g + l of a super-block has its two low bits at bits 2g..2g+1 of qs byte 32h + l,
// so qs quad p (bytes 4p..4p+3, h = p / 8) holds four sub-blocks' worth of levels, one per g:
// values 128h + 32g + 4(p % 8).., sub-block s = 8h + 2g + (p % 8 >= 4). Per unit (super-block
// i of a 16-row group) and sub-block, the integer dot of all 16 rows is a chain of 4
// vpdpbusd (levels as unsigned bytes, the token's 4 activation bytes broadcast) into a fresh
// accumulator; one vpmulld applies the 16 lanes' sub-block scales and the super-block sum
// stays exact in int32. Per super-block and token one conversion and one FMA with d x d_y
// apply the float scales. No horizontal sums, no per-row gathers; the integer sums equal the
// scalar twin's (ref/vec_dot_ref.cpp) exactly.
//
// Q2_K unit: the d and dmin f16 arrays, then 4 quads of the 16 scale bytes (low nibble: the
// sub-block scale, high nibble: its min) and 16 qs quads. The levels are masked in place,
// never shifted: g = 1, 2, 3 give level x 4, x 16, x 64 (q & 0x0c, 0x30, 0xc0, at most 192,
// a valid unsigned byte), g = 0 is shifted up once to x 4. The scales make up the rest (x 16
// for g = 0, 1, x 4 for g = 2, x 1 for g = 3, applied to the scale bytes before they are
// widened: at most 240), so every sub-block sum comes out x 64 and 1/64 goes into d
// (|sum| < 64 * 15 * 3 * 127 * 256 < 2^27). Mins: vpdpwssd of (m_2p, m_2p+1) int16 pairs
// with the token's 16-value sums.
// Q3_K unit: the d array, then 8 hmask quads (bit 4h + g of byte l: the third bit of value
// 128h + 32g + l), 16 qs quads and 3 quads of the 12 packed 6-bit scales. Levels are
// u = low2 | hbit << 2 (0..7, one shift and one vpternlogd to join the bit); the value is
// u - 4, so 4 * sum_s sc_s * bsum_s is subtracted once per super-block (a vpdpwssd of signed
// (sc_2p, sc_2p+1) pairs with the bsums, as Q6_K's offset).
#include "engine/kernels/interleave.h"
#include "engine/kernels/x86/avx512_kernels.h"
#include "engine/kernels/x86/gemm_avx512.h"
#include "engine/kernels/x86/interleaved_avx512.h"

namespace lifeline::kernels::avx512 {
namespace {

constexpr int64_t kQK = 256;

// vpshufb control: bytes b and b + 1 of every int32 lane as its two zero-extended int16.
static inline __m512i TwoBytes16(int b) {
  return _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(0x80008000u | ((b + 1) << 16) | b)),
                          _mm512_set4_epi32(0x000c000c, 0x00080008, 0x00040004, 0));
}

// Bits of every byte shifted by kShift (left when positive): epi16 shifts, whatever crosses
// into the neighbour byte is masked off by the caller.
template <int kShift>
static inline __m512i Shift16(__m512i v) {
  if constexpr (kShift > 0) return _mm512_slli_epi16(v, kShift);
  else if constexpr (kShift < 0) return _mm512_srli_epi16(v, -kShift);
  else return v;
}

// Software prefetch of a unit kAhead bytes ahead, lines [first, first + count) from its start.
template <int64_t kAhead>
static inline void PrefetchAheadLines(const uint8_t* unit, int first, int count) {
  const uint8_t* ahead = unit + kAhead;
  for (int l = first; l < first + count; ++l) {
    _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * l), _MM_HINT_T0);
  }
}

// One 128-value half h of a unit and the four qs quads 4hl..4hl+3 of it (p % 8 in that
// range): sub-blocks s = 8h + 2g + hl for g = 0..3. L::Level<g, h>(unit, p8) gives the level
// vector of quad p8 for that g; sc32[s] the sub-block's scale per lane (int32).
template <typename L, int kH, int kHl, int NT>
static inline void HalfQuads(const uint8_t* unit, const ActRow* a, int64_t i,
                             const __m512i* sc32, __m512i (&isum)[NT]) {
  __m512i d[NT][4];
  for (int t = 0; t < NT; ++t) d[t][0] = d[t][1] = d[t][2] = d[t][3] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int p8 = 4 * kHl; p8 < 4 * kHl + 4; ++p8) {
    __m512i v[4];
    L::template Levels<kH>(unit, p8, v);
    for (int t = 0; t < NT; ++t) {
      const uint8_t* yq = reinterpret_cast<const uint8_t*>(a[t].qs + kQK * i + 128 * kH + 4 * p8);
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) d[t][g] = DpbusdBcast(d[t][g], v[g], yq + 32 * g);
    }
  }
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m512i s = sc32[8 * kH + 2 * g + kHl];
    for (int t = 0; t < NT; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(d[t][g], s));
  }
}

template <typename L, int NT>
static inline void AllQuads(const uint8_t* unit, const ActRow* a, int64_t i, const __m512i* sc32,
                            __m512i (&isum)[NT]) {
  HalfQuads<L, 0, 0, NT>(unit, a, i, sc32, isum);
  HalfQuads<L, 0, 1, NT>(unit, a, i, sc32, isum);
  HalfQuads<L, 1, 0, NT>(unit, a, i, sc32, isum);
  HalfQuads<L, 1, 1, NT>(unit, a, i, sc32, isum);
}

struct Q2KI {
  static constexpr int64_t kBlockElems = kQK;
  static constexpr int64_t kUnit = 16 * 84;   // 21 lines
  static constexpr int64_t kAhead = 4 * kUnit;  // 5.25 KiB (Q4_0 / Q8_0 tiles: ~6 KiB)
  static constexpr int64_t kQuads = 64;       // after the d and dmin arrays
  static constexpr int kSc = 0, kQs = 4;      // quad indices

  // Levels of qs quad 8h + p8 for g = 0..3, x 4, x 4, x 16, x 64.
  template <int kH>
  static inline void Levels(const uint8_t* unit, int p8, __m512i (&v)[4]) {
    const __m512i q = LoadOnce(unit + kQuads + 64 * (kQs + 8 * kH + p8));
    v[0] = _mm512_and_si512(_mm512_slli_epi16(q, 2), _mm512_set1_epi8(0x0c));
    v[1] = _mm512_and_si512(q, _mm512_set1_epi8(0x0c));
    v[2] = _mm512_and_si512(q, _mm512_set1_epi8(0x30));
    v[3] = _mm512_and_si512(q, _mm512_set1_epi8(static_cast<char>(0xc0)));
  }

  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    // Scale quads m = 1, 3 hold sub-blocks with g = 2, 2, 3, 3: x 4 for bytes 0, 1.
    const __m512i by_word = _mm512_set1_epi32(0x00000002);
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
      __m512 acc[NT];
      for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
      for (int64_t i = 0; i < nb; ++i, unit += kUnit) {
        PrefetchAheadLines<kAhead>(unit, 0, 21);
        __m512i raw[4], sc32[16];
        for (int m = 0; m < 4; ++m) {
          raw[m] = LoadQuad(unit + kQuads + 64 * (kSc + m));
          // m = 0, 2: sub-blocks with g = 0, 0, 1, 1: scale x 16 (nibble moved up in place).
          const __m512i s = m % 2 == 0
                                ? _mm512_and_si512(_mm512_slli_epi16(raw[m], 4), _mm512_set1_epi8(static_cast<char>(0xf0)))
                                : _mm512_sllv_epi16(_mm512_and_si512(raw[m], lo4), by_word);
          for (int b = 0; b < 4; ++b) sc32[4 * m + b] = _mm512_shuffle_epi8(s, ByteOfLane(b));
        }
        __m512i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
        AllQuads<Q2KI, NT>(unit, a, i, sc32, isum);
        __m512i mp[8];  // (m_2p, m_2p+1) as int16
        for (int p = 0; p < 8; ++p) {
          mp[p] = _mm512_srli_epi16(_mm512_shuffle_epi8(raw[p / 2], TwoBytes16(2 * (p % 2))), 4);
        }
        const __m512 d64 = _mm512_mul_ps(LoadF16x16(unit), _mm512_set1_ps(1.0f / 64.0f));
        const __m512 dmin = LoadF16x16(unit + 32);
        for (int t = 0; t < NT; ++t) {
          const uint8_t* bs = reinterpret_cast<const uint8_t*>(a[t].bsums + 16 * i);
          __m512i m0 = _mm512_setzero_si512(), m1 = _mm512_setzero_si512();
          for (int p = 0; p < 8; p += 2) {
            m0 = _mm512_dpwssd_epi32(m0, mp[p], Bcast4(reinterpret_cast<const int8_t*>(bs + 4 * p)));
            m1 = _mm512_dpwssd_epi32(m1, mp[p + 1], Bcast4(reinterpret_cast<const int8_t*>(bs + 4 * p + 4)));
          }
          const __m512 msum = _mm512_cvtepi32_ps(_mm512_add_epi32(m0, m1));
          const __m512 part = _mm512_fmsub_ps(_mm512_cvtepi32_ps(isum[t]), d64, _mm512_mul_ps(msum, dmin));
          acc[t] = _mm512_fmadd_ps(part, _mm512_set1_ps(a[t].d[i]), acc[t]);
        }
      }
      for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy + 16 * g, acc[t]);
    }
  }
};

struct Q3KI {
  static constexpr int64_t kBlockElems = kQK;
  static constexpr int64_t kUnit = 16 * 110;  // 27.5 lines: units alternate 0 / 32 mod 64
  static constexpr int64_t kAhead = 3 * kUnit;  // 5.2 KiB
  static constexpr int64_t kQuads = 32;       // after the d array
  static constexpr int kHm = 0, kQs = 8, kSc = 24;  // quad indices

  // Levels u = low2 | hbit << 2 of qs quad 8h + p8 for g = 0..3.
  template <int kH>
  static inline void Levels(const uint8_t* unit, int p8, __m512i (&v)[4]) {
    const __m512i m3 = _mm512_set1_epi8(0x03);
    const __m512i b2 = _mm512_set1_epi8(0x04);
    const __m512i q = LoadOnce(unit + kQuads + 64 * (kQs + 8 * kH + p8));
    const __m512i hm = LoadOnce(unit + kQuads + 64 * (kHm + p8));
    // ternlog 0xca: a ? b : c (a = m3: the two low bits; above them the third bit alone).
    v[0] = _mm512_ternarylogic_epi32(m3, q, _mm512_and_si512(Shift16<2 - 4 * kH>(hm), b2), 0xca);
    v[1] = _mm512_ternarylogic_epi32(m3, _mm512_srli_epi16(q, 2), _mm512_and_si512(Shift16<1 - 4 * kH>(hm), b2), 0xca);
    v[2] = _mm512_ternarylogic_epi32(m3, _mm512_srli_epi16(q, 4), _mm512_and_si512(Shift16<0 - 4 * kH>(hm), b2), 0xca);
    v[3] = _mm512_ternarylogic_epi32(m3, _mm512_srli_epi16(q, 6), _mm512_and_si512(Shift16<-1 - 4 * kH>(hm), b2), 0xca);
  }

  // The 16 signed scales as bytes: sc[m] byte j of every lane = scale 4m + j (-32..31), from
  // the packing of ref/quant_blocks.h UnpackScaleQ3K.
  static inline void Scales(const uint8_t* unit, __m512i (&sc)[4]) {
    const __m512i a = LoadQuad(unit + kQuads + 64 * kSc);
    const __m512i b = LoadQuad(unit + kQuads + 64 * (kSc + 1));
    const __m512i c = LoadQuad(unit + kQuads + 64 * (kSc + 2));
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    const __m512i top = _mm512_set1_epi8(0x30);
    const __m512i k32 = _mm512_set1_epi8(32);
    // ternlog 0xca with a = lo4: the low nibble from b, bits 4..5 from c (masked to top).
    const auto join = [&](__m512i low, __m512i high) {
      return _mm512_sub_epi8(_mm512_ternarylogic_epi32(lo4, low, _mm512_and_si512(high, top), 0xca), k32);
    };
    sc[0] = join(a, _mm512_slli_epi16(c, 4));
    sc[1] = join(b, _mm512_slli_epi16(c, 2));
    sc[2] = join(_mm512_srli_epi16(a, 4), c);
    sc[3] = join(_mm512_srli_epi16(b, 4), _mm512_srli_epi16(c, 2));
  }

  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
      __m512 acc[NT];
      for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
      for (int64_t i = 0; i < nb; ++i, unit += kUnit) {
        // 28 lines from the unit's start cover its 1760 bytes at either alignment.
        PrefetchAheadLines<kAhead>(unit, 0, 28);
        __m512i sc[4], sc32[16];
        Scales(unit, sc);
        for (int s = 0; s < 16; ++s) {
          sc32[s] = _mm512_srai_epi32(_mm512_shuffle_epi8(sc[s / 4], ByteToTop(s % 4)), 24);
        }
        __m512i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
        AllQuads<Q3KI, NT>(unit, a, i, sc32, isum);
        __m512i sp[8];  // (sc_2p, sc_2p+1) as int16
        for (int p = 0; p < 8; ++p) {
          sp[p] = _mm512_srai_epi16(_mm512_shuffle_epi8(sc[p / 2], BytesToHigh16(2 * (p % 2))), 8);
        }
        const __m512 d = LoadF16x16(unit);
        for (int t = 0; t < NT; ++t) {
          const uint8_t* bs = reinterpret_cast<const uint8_t*>(a[t].bsums + 16 * i);
          __m512i c0 = _mm512_setzero_si512(), c1 = _mm512_setzero_si512();
          for (int p = 0; p < 8; p += 2) {
            c0 = _mm512_dpwssd_epi32(c0, sp[p], Bcast4(reinterpret_cast<const int8_t*>(bs + 4 * p)));
            c1 = _mm512_dpwssd_epi32(c1, sp[p + 1], Bcast4(reinterpret_cast<const int8_t*>(bs + 4 * p + 4)));
          }
          const __m512i corr = _mm512_slli_epi32(_mm512_add_epi32(c0, c1), 2);
          const __m512 s = _mm512_cvtepi32_ps(_mm512_sub_epi32(isum[t], corr));
          acc[t] = _mm512_fmadd_ps(s, _mm512_mul_ps(d, _mm512_set1_ps(a[t].d[i])), acc[t]);
        }
      }
      for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy + 16 * g, acc[t]);
    }
  }
};

}  // namespace

void FillInterleavedLowBit(MatmulImpl* impl) {
  RegisterInterleaved<Q2KI, kKQuantTileTokens>(impl, GgmlType::kQ2_K);
  RegisterInterleaved<Q3KI, kKQuantTileTokens>(impl, GgmlType::kQ3_K);
}

}  // namespace lifeline::kernels::avx512
