#include "engine/kernels/quantize_act.h"

#include <cmath>
#include <cstring>

#include "base/check.h"
#include "engine/kernels/fp16.h"

namespace lifeline {
namespace {

// Round to nearest, ties to even, for |x| < 2^22: adding 1.5 * 2^23 leaves the rounded
// integer in the low mantissa bits. The kernels library is built with -ffp-contract=off, so
// x * id is rounded before the add exactly as in ggml's separate multiply and round steps.
inline int32_t RoundHalfEven(float x) {
  const float shifted = x + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

inline float RoundToF16(float x) { return Fp16ToFp32(Fp32ToFp16(x)); }

// Q8_0 and Q8_1 (with_sum): 32-value blocks.
void QuantizeQ8Blocks32(const float* x, int64_t n_blocks, bool with_sum, int8_t* qs, float* d,
                        int32_t* isum, float* s) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* xb = x + b * 32;
    int8_t* qb = qs + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float ax = std::fabs(xb[j]);
      amax = ax > amax ? ax : amax;
    }
    const float dv = amax / 127.0f;
    const float d16 = RoundToF16(dv);
    int32_t sum = 0;
    if (d16 == 0.0f) {
      std::memset(qb, 0, 32);
    } else {
      const float id = 127.0f / amax;
      for (int j = 0; j < 32; ++j) {
        const int32_t q = RoundHalfEven(xb[j] * id);
        qb[j] = static_cast<int8_t>(q);
        sum += q;
      }
    }
    d[b] = d16;
    isum[b] = sum;
    if (with_sum) {
      const float sv = d16 == 0.0f ? 0.0f : RoundToF16(dv * static_cast<float>(sum));
      s[b] = sv;
    }
  }
}

void QuantizeQ8K(const float* x, int64_t n_blocks, int8_t* qs, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* xb = x + b * kQK_K;
    int8_t* qb = qs + b * kQK_K;
    float max = 0.0f;
    float amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(xb[j]);
      if (ax > amax) {
        amax = ax;
        max = xb[j];
      }
    }
    const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
    if (amax == 0.0f || !std::isfinite(iscale)) {
      d[b] = 0.0f;
      std::memset(qb, 0, kQK_K);
      for (int j = 0; j < 16; ++j) bsums[b * 16 + j] = 0;
      continue;
    }
    for (int j = 0; j < kQK_K; ++j) {
      const int32_t v = RoundHalfEven(iscale * xb[j]);
      qb[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int j = 0; j < 16; ++j) {
      int32_t sum = 0;
      for (int i = 0; i < 16; ++i) sum += qb[j * 16 + i];
      bsums[b * 16 + j] = static_cast<int16_t>(sum);
    }
    d[b] = 1.0f / iscale;
  }
}

}  // namespace

int64_t ActBlockElems(ActFormat format) {
  switch (format) {
    case ActFormat::kQ8_0:
    case ActFormat::kQ8_1: return 32;
    case ActFormat::kQ8_K: return kQK_K;
    default: return 1;
  }
}

ActFormat ActFormatFor(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ8_0:
    case GgmlType::kIQ4_NL: return ActFormat::kQ8_0;
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1: return ActFormat::kQ8_1;
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K: return ActFormat::kQ8_K;
    case GgmlType::kF16: return ActFormat::kF16;
    case GgmlType::kBF16: return ActFormat::kBf16;
    default: return ActFormat::kF32;
  }
}

void QuantizedActs::Reset(ActFormat format, int64_t n_tokens, int64_t cols, const float* x) {
  const int64_t block = ActBlockElems(format);
  LL_CHECK(n_tokens >= 0 && cols >= 0 && cols % block == 0);
  format_ = format;
  n_tokens_ = n_tokens;
  cols_ = cols;
  n_blocks_ = cols / block;
  x_ = x;
  const auto rows = static_cast<size_t>(n_tokens);
  const auto nb = static_cast<size_t>(n_blocks_);
  const auto nc = static_cast<size_t>(cols);
  // Buffers only grow: a reused QuantizedActs alternates between shapes (a decode step's
  // products have n_embd, n_ff and head-dim inputs), and shrinking then growing a vector
  // value-initializes the regrown part on every call.
  auto grow = [](auto& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  switch (format) {
    case ActFormat::kF32: LL_CHECK(x != nullptr || n_tokens == 0); break;
    case ActFormat::kF16: grow(f_, rows * nc); break;
    case ActFormat::kBf16: grow(bf_, rows * nc); break;
    case ActFormat::kQ8_1:
      grow(s_, rows * nb);
      [[fallthrough]];
    case ActFormat::kQ8_0:
      grow(qs_, rows * nc);
      grow(d_, rows * nb);
      grow(isum_, rows * nb);
      break;
    case ActFormat::kQ8_K:
      grow(qs_, rows * nc);
      grow(d_, rows * nb);
      grow(bsums_, rows * nb * 16);
      break;
  }
}

ActRow QuantizedActs::Row(int64_t t) const {
  ActRow r;
  switch (format_) {
    case ActFormat::kF32: r.f = x_ + t * cols_; break;
    case ActFormat::kF16: r.f = f_.data() + t * cols_; break;
    case ActFormat::kBf16: r.bf = bf_.data() + t * cols_; break;
    case ActFormat::kQ8_1:
      r.s = s_.data() + t * n_blocks_;
      [[fallthrough]];
    case ActFormat::kQ8_0:
      r.qs = qs_.data() + t * cols_;
      r.d = d_.data() + t * n_blocks_;
      r.isum = isum_.data() + t * n_blocks_;
      break;
    case ActFormat::kQ8_K:
      r.qs = qs_.data() + t * cols_;
      r.d = d_.data() + t * n_blocks_;
      r.bsums = bsums_.data() + t * n_blocks_ * 16;
      break;
  }
  return r;
}

ActRowMut QuantizedActs::MutRow(int64_t t) {
  const ActRow r = Row(t);
  ActRowMut m;
  m.qs = const_cast<int8_t*>(r.qs);
  m.d = const_cast<float*>(r.d);
  m.s = const_cast<float*>(r.s);
  m.isum = const_cast<int32_t*>(r.isum);
  m.bsums = const_cast<int16_t*>(r.bsums);
  m.f = format_ == ActFormat::kF32 ? nullptr : const_cast<float*>(r.f);
  m.bf = const_cast<uint16_t*>(r.bf);
  return m;
}

namespace ref {

void QuantizeToken(const float* x_row, QuantizedActs& acts, int64_t t) {
  const int64_t cols = acts.cols();
  const ActRowMut m = acts.MutRow(t);
  switch (acts.format()) {
    case ActFormat::kF32: break;  // borrowed
    case ActFormat::kF16:
      for (int64_t i = 0; i < cols; ++i) m.f[i] = RoundToF16(x_row[i]);
      break;
    case ActFormat::kBf16:
      for (int64_t i = 0; i < cols; ++i) m.bf[i] = Fp32ToBf16(x_row[i]);
      break;
    case ActFormat::kQ8_0:
      QuantizeQ8Blocks32(x_row, acts.n_blocks(), false, m.qs, m.d, m.isum, nullptr);
      break;
    case ActFormat::kQ8_1:
      QuantizeQ8Blocks32(x_row, acts.n_blocks(), true, m.qs, m.d, m.isum, m.s);
      break;
    case ActFormat::kQ8_K:
      QuantizeQ8K(x_row, acts.n_blocks(), m.qs, m.d, m.bsums);
      break;
  }
}

}  // namespace ref
}  // namespace lifeline
