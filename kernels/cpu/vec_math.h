// Exponential-based row kernels with llama.cpp's CPU arithmetic.
//
// ggml evaluates exp with a polynomial (ggml_v_expf, "adapted from arm limited
// optimized routine", max error 1.5 ulp) rather than libm, 16 lanes at a time
// in its AVX-512 build. This model family amplifies 1-ulp differences through
// its layers, so to reproduce llama.cpp's logits we mirror that arithmetic lane
// for lane: ExpGgml is the AVX-512 flavour (j = 1 + p(b), result scalef(j, n)),
// computed here with AVX-512 as ggml does (ExpShiftedSum), AVX2 (8 lanes,
// identical per-lane operations, scalef emulated) or scalar fmaf; every path
// gives bit-identical results. Rows are processed in groups of
// 16 like ggml, with ggml's libm tail for the last n % 16 elements.
// Pure functions; thread-safe.
#ifndef BRAID_KERNELS_CPU_VEC_MATH_H_
#define BRAID_KERNELS_CPU_VEC_MATH_H_

#include <cstdint>

namespace braid::kernels::cpu {

// e^x as ggml_v_expf computes one lane: overflow -> inf, below ~-103.97 -> 0.
float ExpGgml(float x);

// y[i] = e^(x[i] - max) and returns their sum, as ggml_vec_soft_max_f32 does:
// each group of 16 is summed in float (tree order of _mm512_reduce_add_ps) and
// added to a double; the n % 16 tail uses libm expf. x: [n], y: [n].
double ExpShiftedSum(const float* x, float max, float* y, int64_t n);

// y[i] = x[i] / (1 + e^-x[i]) * g[i] (ggml_vec_swiglu_f32). y may alias x.
void SwiGlu(const float* x, const float* g, float* y, int64_t n);

namespace internal {
double ExpShiftedSumScalar(const float* x, float max, float* y, int64_t n);
void SwiGluScalar(const float* x, const float* g, float* y, int64_t n);
double ExpShiftedSumAvx2(const float* x, float max, float* y, int64_t n);
double ExpShiftedSumAvx512(const float* x, float max, float* y, int64_t n);
void SwiGluAvx2(const float* x, const float* g, float* y, int64_t n);
void SwiGluAvx512(const float* x, const float* g, float* y, int64_t n);
// Lanes of one ggml vector in its AVX-512 build.
inline constexpr int64_t kGgmlLanes = 16;
}  // namespace internal

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_VEC_MATH_H_
