// The row-interleaved weight layout (WeightLayout::kInterleaved16), shared by the repacker,
// the scalar twins and the SIMD kernels that read it.
//
// Rows are taken in groups of 16. A group's blocks are stored in order (block b of all 16
// rows, then block b + 1, ...), each as one unit of 16 * block_bytes bytes:
//   [f16 field 0 of rows 0..15][f16 field 1 of rows 0..15]...   (the block's scales, 32 B each)
//   [quad 0 of rows 0..15][quad 1 of rows 0..15]...             (64 B each)
// where quad q of a row is bytes [body_begin + 4q, body_begin + 4q + 4) of its block: the
// block's packed levels and sub-block scales, moved as 4-byte groups, never re-encoded, except
// that Q8_0 levels are stored xor 0x80 (level + 128 as an unsigned byte, what vpdpbusd takes).
// A 512-bit load of a quad puts row r in lane r: one integer dot instruction then advances all
// 16 rows, and a block's 16 scales convert with one instruction, where the GGUF layout needs
// a horizontal reduction and a gather of scales per row. Sizes are unchanged (16 * row_bytes
// per group) so group g still starts at data + 16 * g * row_bytes.
//
// Thread-safety: pure functions. Failure: callers check HasInterleavedLayout and rows % 16.
#pragma once

#include <cstdint>

#include "engine/kernels/ggml_type.h"
#include "engine/kernels/kernel_table.h"

namespace lifeline::kernels {

inline constexpr int kInterleaveRows = 16;

struct InterleaveDesc {
  int n_f16 = 0;         // scale fields moved as 16-row f16 arrays
  int f16_offset[2] = {};  // their byte offsets in the block
  int body_begin = 0;    // the rest: [body_begin, body_begin + 4 * n_quads) in quads
  int n_quads = 0;
  uint8_t body_xor = 0;  // applied to every body byte (Q8_0: 0x80)
  int block_elems = 0;   // values per block (the type's block; 32 for F16 / BF16)
};

// Bytes per block of a layout: its f16 fields and its quads.
inline constexpr int64_t InterleaveBlockBytes(const InterleaveDesc& d) {
  return 2 * d.n_f16 + 4 * d.n_quads;
}

// The layout of `type`, or nullptr when it has none (F32).
const InterleaveDesc* InterleaveDescFor(GgmlType type);
inline bool HasInterleavedLayout(GgmlType type) { return InterleaveDescFor(type) != nullptr; }

// Byte offsets inside one unit (block b of a 16-row group).
inline constexpr int64_t InterleaveF16Offset(int field) { return 32 * field; }
inline int64_t InterleaveQuadOffset(const InterleaveDesc& d, int q) { return 32 * d.n_f16 + 64 * q; }

// Whether a loader may repack w: a type with a layout, rows a multiple of 16, whole blocks of
// the layout per row (for F16 / BF16: cols a multiple of 32), row layout.
bool CanInterleave(const WeightMatrix& w);

// Writes w (kRows) in the interleaved layout to dst (w.rows * w.row_bytes bytes). Requires
// CanInterleave(w). The second form writes only groups [g0, g1) (rows 16 * g0 ..), so
// callers can split a large matrix over threads.
void InterleaveRows(const WeightMatrix& w, uint8_t* dst);
void InterleaveRows(const WeightMatrix& w, uint8_t* dst, int64_t g0, int64_t g1);
// Groups [g0, g1) with group g at dst + g * group_stride_bytes (>= 16 * row_bytes): a stride
// of twice a group leaves every other group's place free for a second matrix of the same
// shape (the fused gate/up matrix of llama_model.cpp).
void InterleaveRows(const WeightMatrix& w, uint8_t* dst, int64_t g0, int64_t g1,
                    uint64_t group_stride_bytes);

// Writes row r of an interleaved matrix back in GGUF block layout (w.row_bytes bytes).
void DeinterleaveRow(const WeightMatrix& w, int64_t r, uint8_t* out);

// A pointer to row r in GGUF block layout: into w.data for kRows, else tmp (row_bytes bytes)
// after DeinterleaveRow.
const uint8_t* GgufRow(const WeightMatrix& w, int64_t r, uint8_t* tmp);

}  // namespace lifeline::kernels
