#include "kernels/cpu/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace braid::kernels::cpu {
namespace {

std::atomic<bool> force_scalar{false};
std::atomic<bool> disable_vnni{false};
std::atomic<bool> disable_avx512{false};

CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  // GCC 12 has no "f16c" name for __builtin_cpu_supports; every AVX2 CPU has
  // F16C.
  f.f16c = f.avx2;
#if defined(__clang__)
  // clang 14 has no "avxvnni" name: CPUID.(EAX=7, ECX=1):EAX bit 4.
  unsigned a = 0, b = 0, c = 0, d = 0;
  f.avx_vnni =
      __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) && f.avx2;
#else
  f.avx_vnni = __builtin_cpu_supports("avxvnni");
#endif
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512_vnni = __builtin_cpu_supports("avx512vnni");
#endif
  IsaLevel level = IsaLevel::kNative;
  const char* env = std::getenv("BRAID_CPU_ISA");
  if (env != nullptr && !ParseIsaLevel(env, &level)) {
    std::fprintf(stderr,
                 "braid: BRAID_CPU_ISA=%s is not a level braid knows (scalar, "
                 "avx2, native)\n",
                 env);
    std::exit(2);
  }
  const bool has_avx512 =
      f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_vnni;
  if (env != nullptr && std::strcmp(env, "avx512") == 0 && !has_avx512) {
    std::fprintf(stderr,
                 "braid: BRAID_CPU_ISA=avx512, but this CPU lacks AVX-512 "
                 "F/BW/VL/DQ/VNNI\n");
    std::exit(2);
  }
  return LimitToIsaLevel(f, level);
}

}  // namespace

bool ParseIsaLevel(const char* value, IsaLevel* level) {
  if (std::strcmp(value, "scalar") == 0) {
    *level = IsaLevel::kScalar;
  } else if (std::strcmp(value, "avx2") == 0) {
    *level = IsaLevel::kAvx2;
  } else if (std::strcmp(value, "native") == 0 ||
             std::strcmp(value, "avx512") == 0 || value[0] == '\0') {
    *level = IsaLevel::kNative;
  } else {
    return false;
  }
  return true;
}

CpuFeatures LimitToIsaLevel(CpuFeatures f, IsaLevel level) {
  if (level == IsaLevel::kNative) return f;
  f.avx_vnni = f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq =
      f.avx512_vnni = false;
  if (level == IsaLevel::kScalar) f.avx2 = f.fma = f.f16c = false;
  return f;
}

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

bool UseAvx2() {
  static const bool has_avx2 =
      GetCpuFeatures().avx2 && GetCpuFeatures().fma && GetCpuFeatures().f16c;
  return has_avx2 && !force_scalar.load(std::memory_order_relaxed);
}

bool UseAvxVnni() {
  static const bool has_vnni = GetCpuFeatures().avx_vnni;
  return has_vnni && UseAvx2() && !disable_vnni.load(std::memory_order_relaxed);
}

bool UseAvx512() {
  static const bool has_avx512 = [] {
    const CpuFeatures& f = GetCpuFeatures();
    return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_vnni;
  }();
  return has_avx512 && UseAvx2() &&
         !disable_avx512.load(std::memory_order_relaxed);
}

const char* CpuIsaName() {
  if (UseAvx512()) return "avx512";
  if (UseAvxVnni()) return "avx2+vnni";
  if (UseAvx2()) return "avx2";
  return "scalar";
}

void SetDisableAvx512ForTesting(bool value) {
  disable_avx512.store(value, std::memory_order_relaxed);
}

void SetDisableVnniForTesting(bool value) {
  disable_vnni.store(value, std::memory_order_relaxed);
}

void SetForceScalarForTesting(bool value) {
  force_scalar.store(value, std::memory_order_relaxed);
}

}  // namespace braid::kernels::cpu
