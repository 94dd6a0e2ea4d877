#include "engine/kernels/dispatch.h"

#include <cstdint>

#include "engine/kernels/compute_pool.h"
#include "engine/kernels/matmul_driver.h"

#if defined(LIFELINE_X86)
#include <cpuid.h>
#endif

namespace lifeline {
namespace {

#if defined(LIFELINE_X86)
// XGETBV through inline asm: the intrinsic needs -mxsave, which this baseline file lacks.
uint64_t ReadXcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}
#endif

// Each table's matmul is a plain function pointer, so every level gets its own entry point
// bound to its immutable MatmulImpl.
const kernels::MatmulImpl& ScalarImpl() {
  static const kernels::MatmulImpl impl = kernels::MakeScalarImpl();
  return impl;
}
void MatMulScalar(const WeightMatrix& w, const float* x, int64_t n, float* y, ComputePool& p) {
  kernels::RunMatmul(ScalarImpl(), w, x, n, y, p);
}
void GroupScalar(const MatmulGroup& g, const float* x, int64_t n, ComputePool& p) {
  kernels::RunMatmulGroup(ScalarImpl(), g, x, n, p);
}

#if defined(LIFELINE_X86)
const kernels::MatmulImpl& Avx2Impl() {
  static const kernels::MatmulImpl impl = [] {
    kernels::MatmulImpl m = kernels::MakeScalarImpl();
    kernels::FillAvx2(&m);
    return m;
  }();
  return impl;
}
void MatMulAvx2(const WeightMatrix& w, const float* x, int64_t n, float* y, ComputePool& p) {
  kernels::RunMatmul(Avx2Impl(), w, x, n, y, p);
}
void GroupAvx2(const MatmulGroup& g, const float* x, int64_t n, ComputePool& p) {
  kernels::RunMatmulGroup(Avx2Impl(), g, x, n, p);
}

const kernels::MatmulImpl& Avx512Impl() {
  static const kernels::MatmulImpl impl = [] {
    kernels::MatmulImpl m = kernels::MakeScalarImpl();
    kernels::FillAvx512(&m, DetectCpuFeatures().avx512bf16);
    return m;
  }();
  return impl;
}
void MatMulAvx512(const WeightMatrix& w, const float* x, int64_t n, float* y, ComputePool& p) {
  kernels::RunMatmul(Avx512Impl(), w, x, n, y, p);
}
void GroupAvx512(const MatmulGroup& g, const float* x, int64_t n, ComputePool& p) {
  kernels::RunMatmulGroup(Avx512Impl(), g, x, n, p);
}
#endif

KernelTable MakeTable(IsaLevel isa, void (*matmul)(const WeightMatrix&, const float*, int64_t,
                                                    float*, ComputePool&),
                      void (*group)(const MatmulGroup&, const float*, int64_t, ComputePool&),
                      const kernels::MatmulImpl& impl) {
  KernelTable t;
  t.isa = isa;
  t.interleaved_types = kernels::InterleavedTypes(impl);
  t.matmul = matmul;
  t.matmul_group = group;
  t.silu_glu = impl.silu_glu;
  t.gelu_glu = impl.gelu_glu;
  return t;
}

}  // namespace

CpuFeatures DetectCpuFeatures() {
  CpuFeatures f;
#if defined(LIFELINE_X86)
  uint32_t eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = (ecx >> 27) & 1;
  f.fma = (ecx >> 12) & 1;
  f.f16c = (ecx >> 29) & 1;
  const bool avx = (ecx >> 28) & 1;
  if (osxsave && avx) {
    const uint64_t xcr0 = ReadXcr0();
    f.os_ymm = (xcr0 & 0x6) == 0x6;
    f.os_zmm = f.os_ymm && (xcr0 & 0xe0) == 0xe0;
  }
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
    f.avx2 = (ebx >> 5) & 1;
    f.avx512f = (ebx >> 16) & 1;
    f.avx512dq = (ebx >> 17) & 1;
    f.avx512bw = (ebx >> 30) & 1;
    f.avx512vl = (ebx >> 31) & 1;
    f.avx512vnni = (ecx >> 11) & 1;
    const uint32_t max_subleaf = eax;
    if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) {
      f.avx512bf16 = (eax >> 5) & 1;
    }
  }
  // Without OS support the instructions fault; report them as absent.
  if (!f.os_ymm) f.avx2 = f.fma = f.f16c = false;
  if (!f.os_zmm) {
    f.avx512f = f.avx512bw = f.avx512dq = f.avx512vl = f.avx512vnni = f.avx512bf16 = false;
  }
#endif
  return f;
}

IsaLevel IsaFromFeatures(const CpuFeatures& f) {
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  if (avx2 && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.avx512vnni) {
    return IsaLevel::kAvx512;
  }
  return avx2 ? IsaLevel::kAvx2 : IsaLevel::kScalar;
}

IsaLevel DetectIsa() {
  static const IsaLevel level = IsaFromFeatures(DetectCpuFeatures());
  return level;
}

const KernelTable& KernelsFor(IsaLevel requested) {
  const IsaLevel level = requested < DetectIsa() ? requested : DetectIsa();
  // Each level's table is built on first use only: building the AVX-512 one runs code
  // compiled for AVX-512, which must never happen on a CPU without it.
#if defined(LIFELINE_X86)
  if (level == IsaLevel::kAvx512) {
    static const KernelTable avx512 =
        MakeTable(IsaLevel::kAvx512, &MatMulAvx512, &GroupAvx512, Avx512Impl());
    return avx512;
  }
  if (level == IsaLevel::kAvx2) {
    static const KernelTable avx2 = MakeTable(IsaLevel::kAvx2, &MatMulAvx2, &GroupAvx2, Avx2Impl());
    return avx2;
  }
#endif
  static const KernelTable scalar =
      MakeTable(IsaLevel::kScalar, &MatMulScalar, &GroupScalar, ScalarImpl());
  (void)level;  // non-x86 builds: scalar only
  return scalar;
}

const KernelTable& BestKernels() { return KernelsFor(DetectIsa()); }

namespace kernels {
const MatmulImpl& MatmulImplFor(IsaLevel level) {
  const IsaLevel clamped = level < DetectIsa() ? level : DetectIsa();
#if defined(LIFELINE_X86)
  if (clamped == IsaLevel::kAvx512) return Avx512Impl();
  if (clamped == IsaLevel::kAvx2) return Avx2Impl();
#endif
  (void)clamped;
  return ScalarImpl();
}
}  // namespace kernels

std::optional<IsaLevel> ParseIsaLevel(std::string_view name) {
  for (IsaLevel l : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    if (name == IsaLevelName(l)) return l;
  }
  return std::nullopt;
}

}  // namespace lifeline
