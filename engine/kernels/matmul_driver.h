// Internal to engine/kernels: the ISA-independent half of a matmul. RunMatmul quantizes the
// activations once (quantize_act.h), splits the weight rows into contiguous chunks that the
// pool's threads take from a shared counter, and walks each chunk in register tiles of
// (rows x tokens) that an ISA-specific TileFn computes over the full row length. Per weight type an ISA supplies one TileFn; types
// without one fall back to the scalar twin tile (ref/vec_dot_ref.h), and types without a twin
// to ReferenceKernels() (dequantize + f32).
//
// Loop order per chunk of rows: token chunks sized to stay in L2, then row tiles, then token
// tiles, so each weight tile (a few KiB) is read from memory once per token chunk and reused
// from L1 for every token tile of it. At n_tokens == 1 this degenerates to streaming the rows
// once, several rows per pass.
//
// Ownership: tables are immutable after construction; RunMatmul allocates the per-call
// activation scratch and borrows everything else. Thread-safety: RunMatmul is called from the
// pool owner's thread (ComputePool::Run rules).
#pragma once

#include <cstdint>

#include "engine/kernels/ggml_type.h"
#include "engine/kernels/interleave.h"
#include "engine/kernels/kernel_table.h"
#include "engine/kernels/quantize_act.h"

namespace lifeline {
namespace kernels {

// One tile: for r < nr, t < nt: y[t * ldy + r] = dot(weight row r, activation row t0 + t).
// w points at the tile's first weight row; rows are row_bytes apart and hold acts.cols()
// values. 1 <= nr <= max_rows, 1 <= nt <= max_tokens of the TileKernel.
using TileFn = void (*)(const uint8_t* w, uint64_t row_bytes, int nr, const QuantizedActs& acts,
                        int64_t t0, int nt, float* y, int64_t ldy);

struct TileKernel {
  TileFn fn = nullptr;
  int max_rows = 1;
  int max_tokens = 1;
  // fn also takes nr > max_rows (walking it in max_rows tiles itself): the driver then hands
  // a single-token-tile call a whole chunk of rows, saving the per-tile call overhead.
  bool any_rows = false;
};

// The TileFn of a row-interleaved SIMD layout L (x86/interleaved_avx2.h, interleaved_avx512.h):
// nr / 16 whole groups (the driver guarantees nr % 16 == 0) and 1 <= nt <= kMaxTokens tokens,
// each token count its own L::Run<NT> so that its accumulators stay in registers. L provides
// kBlockElems and template <int NT> Run(w, row_bytes, n_groups, a, nb, y, ldy). Instantiated
// only by the ISA files, with their own (internal-linkage) layouts.
template <typename L, int kMaxTokens>
void InterleavedGroupsTile(const uint8_t* w, uint64_t rb, int nr, const QuantizedActs& acts,
                           int64_t t0, int nt, float* y, int64_t ldy) {
  static_assert(kMaxTokens >= 1 && kMaxTokens <= 8, "Run<NT> is dispatched for NT <= 8");
  ActRow a[kMaxTokens];
  for (int t = 0; t < nt; ++t) a[t] = acts.Row(t0 + t);
  const int64_t nb = acts.cols() / L::kBlockElems;
  const int64_t n_groups = nr / kInterleaveRows;
  switch (nt) {
    case 1: L::template Run<1>(w, rb, n_groups, a, nb, y, ldy); break;
    case 2: if constexpr (kMaxTokens >= 2) L::template Run<2>(w, rb, n_groups, a, nb, y, ldy); break;
    case 3: if constexpr (kMaxTokens >= 3) L::template Run<3>(w, rb, n_groups, a, nb, y, ldy); break;
    case 4: if constexpr (kMaxTokens >= 4) L::template Run<4>(w, rb, n_groups, a, nb, y, ldy); break;
    case 5: if constexpr (kMaxTokens >= 5) L::template Run<5>(w, rb, n_groups, a, nb, y, ldy); break;
    case 6: if constexpr (kMaxTokens >= 6) L::template Run<6>(w, rb, n_groups, a, nb, y, ldy); break;
    case 7: if constexpr (kMaxTokens >= 7) L::template Run<7>(w, rb, n_groups, a, nb, y, ldy); break;
    case 8: if constexpr (kMaxTokens >= 8) L::template Run<8>(w, rb, n_groups, a, nb, y, ldy); break;
    default: break;
  }
}

// Packed-weight GEMM for many tokens: weights are repacked, kGemmRows rows at a time, into a
// scratch layout where SIMD lanes hold rows; the kernel then streams every token past the
// packed tile, so per-block scaling costs one vector op per (token, block) for all rows at
// once instead of one per (row, token, block).
inline constexpr int kGemmRows = 16;

struct GemmKernel {
  // Scratch bytes one packed tile of kGemmRows rows of `cols` values needs.
  uint64_t (*packed_bytes)(int64_t cols) = nullptr;
  // Packs rows [0, nr) of w (nr <= kGemmRows) into packed; rows nr.. are zero.
  void (*pack)(const uint8_t* w, uint64_t row_bytes, int nr, int64_t cols,
               uint8_t* packed) = nullptr;
  // Optional: the same packed tile from one 16-row group of a WeightLayout::kInterleaved16
  // matrix (w points at the group; nr == kGemmRows). Without it, interleaved matrices take
  // the tiles at every batch size.
  void (*pack_interleaved)(const uint8_t* w, uint64_t row_bytes, int64_t cols,
                           uint8_t* packed) = nullptr;
  // y[t * ldy + r] = dot(row r, activation row t) for r < nr, t in [t0, t1).
  void (*run)(const uint8_t* packed, int nr, const QuantizedActs& acts, int64_t t0, int64_t t1,
              float* y, int64_t ldy) = nullptr;
  // The packed path is used from this many tokens on (below it, the tiles).
  int64_t min_tokens = 16;

  // Optional token-interleaved path (preferred over `run` when set): the driver first packs
  // the quantized activations in groups of group_tokens tokens into the kernel's own layout
  // (for every block, each quad of 4 values of the group's tokens side by side), once per
  // call; run_group then streams one group past one packed weight tile with all of the
  // group's accumulators in registers. Tokens nt.. of the last group are zero padding.
  int group_tokens = 0;
  // Bytes of one packed group of `cols` values per token.
  uint64_t (*act_group_bytes)(int64_t cols) = nullptr;
  // Packs tokens [t0, t0 + nt) of acts (1 <= nt <= group_tokens) into out.
  void (*pack_acts)(const QuantizedActs& acts, int64_t t0, int nt, uint8_t* out) = nullptr;
  // y[t * ldy + r] = dot(row r, token t of the group) for r < nr, t < nt.
  void (*run_group)(const uint8_t* packed_w, int nr, const uint8_t* packed_acts, int nt,
                    int64_t cols, float* y, int64_t ldy) = nullptr;
  // Optional: two tiles at once (packed_w0 full, packed_w1 with nr1 rows, stored at y and
  // y + kGemmRows), so each activation quad loaded serves both.
  void (*run_group2)(const uint8_t* packed_w0, const uint8_t* packed_w1, int nr1,
                     const uint8_t* packed_acts, int nt, int64_t cols, float* y,
                     int64_t ldy) = nullptr;
};

inline constexpr int kMaxTypeId = 31;  // GgmlType ids are < 32
inline constexpr int kNumActFormats = 6;

struct MatmulImpl {
  IsaLevel isa = IsaLevel::kScalar;
  TileKernel tiles[kMaxTypeId + 1];          // indexed by GgmlType id
  // For WeightLayout::kInterleaved16 matrices (interleave.h), indexed by GgmlType id; fn
  // takes w at a 16-row group and nr a multiple of 16. Empty entries fall back to
  // ScalarInterleavedTile. A filled entry makes the table ask loaders to repack that type.
  TileKernel tiles_interleaved[kMaxTypeId + 1];
  GemmKernel gemm[kMaxTypeId + 1];           // indexed by GgmlType id; optional
  QuantizeTokenFn quantize[kNumActFormats];  // indexed by ActFormat
  // Gated units (glu.h), copied into KernelTable::silu_glu / gelu_glu.
  void (*silu_glu)(float* gate, const float* up, int64_t n) = nullptr;
  void (*gelu_glu)(float* gate, const float* up, int64_t n) = nullptr;
};

void RunMatmul(const MatmulImpl& impl, const WeightMatrix& w, const float* x, int64_t n_tokens,
               float* y, ComputePool& pool);

// A group of products of one input (kernel_table.h): one activation quantization, and when
// every matrix has a tile kernel for the same activation format, one pool round trip with
// the epilogue run per finished chunk of rows. Otherwise each matrix runs on its own.
void RunMatmulGroup(const MatmulImpl& impl, const MatmulGroup& g, const float* x,
                    int64_t n_tokens, ComputePool& pool);

using MatmulFn = void (*)(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
                          ComputePool& pool);

// matmul (a KernelTable::matmul, contiguous output) writing rows ldy floats apart: through a
// dense per-thread buffer when ldy != w.rows (the fallbacks of MatmulGroup::ldy).
void MatmulWithStride(MatmulFn matmul, const WeightMatrix& w, const float* x, int64_t n_tokens,
                      float* y, int64_t ldy, ComputePool& pool);

// Optional per-token hook run just before a token row is quantized (MatmulGroup::prologue).
struct Prologue {
  void (*fn)(const void* ctx, int64_t t0, int64_t t1) = nullptr;
  const void* ctx = nullptr;
};

// Quantizes all n_tokens rows of x ([n_tokens, cols]) into acts with impl's quantizers,
// splitting the tokens over the pool when there are enough of them. With a prologue, each
// row is first written by it (on the thread that then quantizes the row).
void QuantizeActs(const MatmulImpl& impl, ActFormat format, const float* x, int64_t n_tokens,
                  int64_t cols, QuantizedActs& acts, ComputePool& pool,
                  const Prologue& prologue = {});

// Scalar table: twin tiles for every type with ref::HasVecDot, scalar quantizers.
MatmulImpl MakeScalarImpl();

// The scalar twin tile for one type (what the SIMD tables use for types they do not cover).
TileKernel ScalarTile(GgmlType type);
// The scalar twin for interleaved matrices: each row back to GGUF layout, then ScalarTile's
// dot. Empty for types without an interleaved layout.
TileKernel ScalarInterleavedTile(GgmlType type);

// Bit i set when impl has a SIMD interleaved tile for type id i (KernelTable::interleaved_types).
uint32_t InterleavedTypes(const MatmulImpl& impl);

// The immutable table behind KernelsFor(level) (dispatch.cpp), for tests that call the
// quantizers or tiles of one level directly. level must be <= DetectIsa().
const MatmulImpl& MatmulImplFor(IsaLevel level);

#if defined(LIFELINE_X86)
// Implemented in x86/*_avx2.cpp and x86/*_avx512.cpp; each overrides the entries it
// accelerates in a table that starts as MakeScalarImpl(). Call only when the CPU supports the
// ISA (dispatch.cpp checks).
void FillAvx2(MatmulImpl* impl);
void FillAvx512(MatmulImpl* impl, bool use_bf16_dot);
#endif

}  // namespace kernels
}  // namespace lifeline
