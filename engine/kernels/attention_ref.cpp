// Scalar reference twin of the attention kernels, and the per-level tables.
//
// The reference walks one query token at a time (the tile only groups calls): for each KV
// block it converts the visible K/V rows of this head to f32 once for the token's n_group
// query heads, then folds the block into each head's online softmax with std::exp. It is the
// algorithm the engine ran before the SIMD kernels, kept as the twin they are tested against.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "engine/kernels/attention_kernels.h"
#include "engine/kernels/dispatch.h"
#include "engine/kernels/fp16.h"
#include "engine/kernels/fp16_row.h"

namespace lifeline {

#if defined(LIFELINE_X86)
namespace kernels {
void AttendAvx2(const AttnKvView&, const AttnShape&, const AttnTile&, AttnScratch&);
void ExpRowAvx2(const float*, float*, int64_t);
void AttendAvx512(const AttnKvView&, const AttnShape&, const AttnTile&, AttnScratch&);
void ExpRowAvx512(const float*, float*, int64_t);
}  // namespace kernels
#endif

float* AttnScratch::Grow(size_t n_floats) {
  if (buf.size() < n_floats) buf.resize(n_floats);
  return buf.data();
}

int64_t AttnKvHeadBytes(AttnKvType type, int64_t head_dim) {
  switch (type) {
    case AttnKvType::kF32: return head_dim * 4;
    case AttnKvType::kF16: return head_dim * 2;
    case AttnKvType::kQ8_0:
      return (head_dim + kAttnQ8BlockElems - 1) / kAttnQ8BlockElems * kAttnQ8BlockBytes;
  }
  return 0;
}

namespace {

// One head's row in the storage type -> n f32 values.
void LoadHeadRow(AttnKvType type, const uint8_t* src, float* dst, int64_t n) {
  switch (type) {
    case AttnKvType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case AttnKvType::kF16:
      // Note: rows are 2-byte aligned (head offsets and strides are whole halves). The row
      // converter uses F16C where the CPU has it, as the engine did before the SIMD kernels;
      // half -> float is exact either way.
      Fp16ToFp32Row(reinterpret_cast<const uint16_t*>(src), dst, n);
      return;
    case AttnKvType::kQ8_0:
      for (int64_t b = 0; b * kAttnQ8BlockElems < n; ++b) {
        const uint8_t* blk = src + b * kAttnQ8BlockBytes;
        uint16_t dh;
        std::memcpy(&dh, blk, 2);
        const float d = Fp16ToFp32(dh);
        const int64_t m = std::min<int64_t>(kAttnQ8BlockElems, n - b * kAttnQ8BlockElems);
        for (int64_t i = 0; i < m; ++i) {
          dst[b * kAttnQ8BlockElems + i] = d * static_cast<float>(static_cast<int8_t>(blk[2 + i]));
        }
      }
      return;
  }
}

float Dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void AttendScalar(const AttnKvView& kv, const AttnShape& s, const AttnTile& tile,
                  AttnScratch& scratch) {
  LL_CHECK(kv.block_tokens >= 1 && kv.block_tokens <= kAttnMaxBlockTokens);
  LL_CHECK(s.n_group >= 1 && s.head_dim_k >= 1 && s.head_dim_v >= 1);
  LL_CHECK(tile.n_tokens >= 0 && tile.pos0 >= 0 && s.window >= 0);
  const int64_t bt = kv.block_tokens;
  // Scratch: K rows [bt][hdk], V rows [bt][hdv], scores [bt], max/denom [n_group].
  float* k_rows = scratch.Grow(static_cast<size_t>(bt * (s.head_dim_k + s.head_dim_v + 1) +
                                                   2 * s.n_group));
  float* v_rows = k_rows + bt * s.head_dim_k;
  float* scores = v_rows + bt * s.head_dim_v;
  float* run_max = scores + bt;
  float* run_denom = run_max + s.n_group;
  for (int64_t i = 0; i < tile.n_tokens; ++i) {
    const int64_t pos = tile.pos0 + i;
    const int64_t first_pos = AttnFirstVisible(pos, s.window);
    const float* q = tile.q + i * tile.q_token_stride;
    float* out = tile.out + i * tile.out_token_stride;
    for (int64_t j = 0; j < s.n_group; ++j) {
      run_max[j] = -std::numeric_limits<float>::infinity();
      run_denom[j] = 0.0f;
    }
    std::fill(out, out + s.n_group * s.head_dim_v, 0.0f);
    for (int64_t b = first_pos / bt; b * bt <= pos; ++b) {
      // Visible slots of this block: [slot0, n_slots).
      const int64_t slot0 = std::max<int64_t>(0, first_pos - b * bt);
      const int64_t n_slots = std::min<int64_t>(bt, pos + 1 - b * bt);
      const uint64_t block = static_cast<uint64_t>(kv.blocks[b]);
      for (int64_t slot = slot0; slot < n_slots; ++slot) {
        const uint64_t us = static_cast<uint64_t>(slot);
        LoadHeadRow(kv.type, kv.k_head + block * kv.k_block_bytes + us * kv.k_row_bytes,
                    k_rows + slot * s.head_dim_k, s.head_dim_k);
        LoadHeadRow(kv.type, kv.v_head + block * kv.v_block_bytes + us * kv.v_row_bytes,
                    v_rows + slot * s.head_dim_v, s.head_dim_v);
      }
      for (int64_t j = 0; j < s.n_group; ++j) {
        const float* qj = q + j * s.head_dim_k;
        float* oj = out + j * s.head_dim_v;
        float block_max = -std::numeric_limits<float>::infinity();
        for (int64_t slot = slot0; slot < n_slots; ++slot) {
          float score = Dot(qj, k_rows + slot * s.head_dim_k, s.head_dim_k) * s.scale;
          if (s.softcap > 0.0f) score = s.softcap * std::tanh(score / s.softcap);
          scores[slot] = score;
          block_max = std::max(block_max, scores[slot]);
        }
        const float new_max = std::max(run_max[j], block_max);
        // exp(-inf) == 0 clears the (empty) state on the first block.
        const float correction = std::exp(run_max[j] - new_max);
        float denom = run_denom[j] * correction;
        for (int64_t d = 0; d < s.head_dim_v; ++d) oj[d] *= correction;
        for (int64_t slot = slot0; slot < n_slots; ++slot) {
          const float p = std::exp(scores[slot] - new_max);
          denom += p;
          const float* v = v_rows + slot * s.head_dim_v;
          for (int64_t d = 0; d < s.head_dim_v; ++d) oj[d] += p * v[d];
        }
        run_max[j] = new_max;
        run_denom[j] = denom;
      }
    }
    for (int64_t j = 0; j < s.n_group; ++j) {
      const float inv = 1.0f / run_denom[j];
      float* oj = out + j * s.head_dim_v;
      for (int64_t d = 0; d < s.head_dim_v; ++d) oj[d] *= inv;
    }
  }
}

void ExpRowScalar(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

}  // namespace

const AttentionKernels& AttentionKernelsFor(IsaLevel requested) {
  const IsaLevel level = requested < DetectIsa() ? requested : DetectIsa();
  static const AttentionKernels scalar{IsaLevel::kScalar, &AttendScalar, &ExpRowScalar};
#if defined(LIFELINE_X86)
  static const AttentionKernels avx2{IsaLevel::kAvx2, &kernels::AttendAvx2,
                                     &kernels::ExpRowAvx2};
  static const AttentionKernels avx512{IsaLevel::kAvx512, &kernels::AttendAvx512,
                                       &kernels::ExpRowAvx512};
  if (level == IsaLevel::kAvx512) return avx512;
  if (level == IsaLevel::kAvx2) return avx2;
#endif
  (void)level;
  return scalar;
}

}  // namespace lifeline
