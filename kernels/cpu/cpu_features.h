// Run-time CPU feature detection and the ISA switch used by the CPU kernels.
//
// Kernels with an AVX2 path call UseAvx2() to choose between it and the
// portable scalar path. Detection runs once (thread-safe static init). The
// environment variable BRAID_CPU_ISA pins a lower level than the CPU has:
// "scalar" (no SIMD kernels), "avx2" (AVX2 + FMA + F16C, without AVX-VNNI
// and AVX-512, like llama.cpp built with GGML_AVX2 alone), "avx512" (the
// CPU's AVX-512 kernels; the process stops if it has none) or "native" /
// unset (everything the CPU has); so the AVX2 paths can be measured and
// tested on an AVX-512 machine. Any other value stops the process at
// detection with a message naming the accepted ones. Tests
// may force the scalar path with SetForceScalarForTesting(); that override is
// not synchronized with concurrently running kernels, so set it only between
// kernel calls.
#ifndef BRAID_KERNELS_CPU_CPU_FEATURES_H_
#define BRAID_KERNELS_CPU_CPU_FEATURES_H_

namespace braid::kernels::cpu {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx_vnni = false;  // 256-bit VNNI (dpbusd on ymm).
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_vnni = false;
};

// Features of the running CPU, detected once, less what BRAID_CPU_ISA pins.
const CpuFeatures& GetCpuFeatures();

// The levels BRAID_CPU_ISA names.
enum class IsaLevel { kScalar, kAvx2, kNative };
// "scalar", "avx2", "avx512", "native" or "" (avx512 and "" as native);
// false for anything else.
bool ParseIsaLevel(const char* value, IsaLevel* level);
// The features a CPU with `f` offers at `level`.
CpuFeatures LimitToIsaLevel(CpuFeatures f, IsaLevel level);
// The kernels' level in use, for logs and benchmarks: "scalar", "avx2",
// "avx2+vnni" or "avx512".
const char* CpuIsaName();

// True when the AVX2+FMA+F16C kernels may run (and are not disabled for
// testing).
bool UseAvx2();

// True when the AVX-VNNI variants of the integer dot products may run (AVX2
// plus AVX-VNNI, not disabled for testing). They give the same integers.
bool UseAvxVnni();

// True when the AVX-512 kernels may run: AVX2 (above) plus AVX-512 F, BW, VL,
// DQ and VNNI, not disabled for testing. They give the same bits as the AVX2
// kernels.
bool UseAvx512();

// Disables the AVX-512 kernels (true) or restores detection. Testing only.
void SetDisableAvx512ForTesting(bool disable);

// Disables the VNNI variants (true) or restores detection. Testing only.
void SetDisableVnniForTesting(bool disable);

// Forces the scalar kernels (true) or restores detection (false). Testing only.
void SetForceScalarForTesting(bool force_scalar);

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_CPU_FEATURES_H_
