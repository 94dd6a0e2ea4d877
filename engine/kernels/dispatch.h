// Run-time CPU dispatch: detects the instruction sets the CPU and the OS support and hands
// out the matching KernelTable. The binary is built for baseline x86-64 (or any other
// target); only files under x86/ carry AVX2 / AVX-512 flags, and their code runs only after
// detection said so.
//
// Levels (each implies the one before):
//   kScalar  portable C++ (the only level on non-x86 builds)
//   kAvx2    AVX2 + FMA + F16C, with the OS saving YMM state (XCR0 bits 1-2)
//   kAvx512  AVX-512 F/BW/DQ/VL + VNNI, with the OS saving opmask/ZMM state (XCR0 bits 5-7).
//            AVX512_BF16 is reported separately: with it, BF16 weights use vdpbf16ps,
//            without it they are widened to f32 first.
//
// Thread-safety: all functions may be called from any thread; the returned tables are
// immutable and live for the whole process. Failure: none; a requested level above what the
// CPU supports is clamped down (callers can compare table.isa with what they asked for).
#pragma once

#include <optional>
#include <string_view>

#include "engine/kernels/kernel_table.h"

namespace lifeline {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool os_ymm = false;  // XCR0 enables SSE + AVX state
  bool os_zmm = false;  // XCR0 enables opmask + ZMM_Hi256 + Hi16_ZMM state
};

// All false on non-x86 builds.
CpuFeatures DetectCpuFeatures();
// The best level the features allow.
IsaLevel IsaFromFeatures(const CpuFeatures& f);
// IsaFromFeatures(DetectCpuFeatures()), computed once.
IsaLevel DetectIsa();

// The table for min(requested, DetectIsa()).
const KernelTable& KernelsFor(IsaLevel requested);
// KernelsFor(DetectIsa()).
const KernelTable& BestKernels();

// "scalar", "avx2", "avx512" (case-sensitive, as IsaLevelName spells them); nullopt otherwise.
// For a command-line flag or environment variable read once at start-up by app/.
std::optional<IsaLevel> ParseIsaLevel(std::string_view name);

}  // namespace lifeline
