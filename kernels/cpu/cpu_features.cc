#include "kernels/cpu/cpu_features.h"

#include <atomic>

namespace braid::kernels::cpu {
namespace {

std::atomic<bool> force_scalar{false};

CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  // GCC 12 has no "f16c" name for __builtin_cpu_supports; every AVX2 CPU has
  // F16C.
  f.f16c = f.avx2;
#endif
  return f;
}

}  // namespace

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

bool UseAvx2() {
  static const bool has_avx2 =
      GetCpuFeatures().avx2 && GetCpuFeatures().fma && GetCpuFeatures().f16c;
  return has_avx2 && !force_scalar.load(std::memory_order_relaxed);
}

void SetForceScalarForTesting(bool value) {
  force_scalar.store(value, std::memory_order_relaxed);
}

}  // namespace braid::kernels::cpu
