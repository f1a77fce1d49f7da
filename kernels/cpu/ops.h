// Elementwise and row-wise ops of a Llama block, all in f32.
// Pure functions; thread-safe. Shapes are given per function.
#ifndef BRAID_KERNELS_CPU_OPS_H_
#define BRAID_KERNELS_CPU_OPS_H_

#include <cstdint>

namespace braid::kernels::cpu {

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight for each of n_rows rows,
// rounded like ggml's rms_norm followed by mul.
// x, y: [n_rows, n]; weight: [n]. y may alias x.
void RmsNorm(const float* x, const float* weight, int64_t n_rows, int64_t n,
             float eps, float* y);

namespace internal {
// The sums of squares of g <= 8 rows as RmsNorm forms them (ggml's: the
// float squares added in double, in element order). x: [g, n]; sums: [g].
void SquareSums(const float* x, int g, int64_t n, double* sums);
}  // namespace internal

// In-place rotary embedding, GGUF/ggml "normal" mode: within each head the
// adjacent pairs (x[2i], x[2i+1]) for 2i < n_rot rotate by
// theta = pos * base^(-2i / n_rot), with theta, cos and sin computed in
// float as ggml does (successive products by base^(-2 / n_rot)).
// x: [n_tok, n_head, head_dim]; positions: [n_tok].
void RopeNormal(float* x, const int32_t* positions, int64_t n_tok,
                int64_t n_head, int64_t head_dim, int64_t n_rot, float base);

// The rotation RopeNormal applies, tabulated once per token for all heads and
// layers: cs[t * n_rot + i] = cos(theta_i), cs[t * n_rot + i + 1] =
// sin(theta_i) for even i < n_rot, theta computed exactly as RopeNormal does.
// With freq_factors ([n_rot / 2], Llama 3's rope_freqs) or a freq_scale
// (linear scaling) theta_i is freq_scale * (theta_i / freq_factors[i / 2]),
// as ggml's rope cache forms it. positions: [n_tok]; cs: [n_tok, n_rot].
void RopeTable(const int32_t* positions, int64_t n_tok, int64_t n_rot,
               float base, float* cs, const float* freq_factors = nullptr,
               float freq_scale = 1.0f);

// RopeNormal with a table, on elements [e0, e1) of x's rows (e0 and e1
// even; any part of any head): row t starts at x + t * row_stride and holds
// heads of head_dim. Bit-identical to RopeNormal.
void RopeApply(float* x, int64_t n_tok, int64_t row_stride, int64_t e0,
               int64_t e1, int64_t head_dim, int64_t n_rot, const float* cs);

// RopeApply in ggml's "neox" mode: within each head the pairs (x[i],
// x[i + n_rot / 2]) for i < n_rot / 2 rotate by table entry 2i (qwen2,
// qwen3, gemma). [e0, e1) must be whole heads.
void RopeApplyNeox(float* x, int64_t n_tok, int64_t row_stride, int64_t e0,
                   int64_t e1, int64_t head_dim, int64_t n_rot,
                   const float* cs);

// gate[i] = silu(gate[i]) * up[i]; silu(v) = v / (1 + exp(-v)), with ggml's
// exp (vec_math.h SwiGlu; its 16-element groups run over the flat array, so
// rows match ggml's per-row grouping when their length is a multiple of 16).
void SiluMul(float* gate, const float* up, int64_t n);

// x[i] = cap * tanh(x[i] / cap) for i < n (soft-capping: Gemma 2's
// attention scores and final logits), in ggml's float steps: scale by
// 1 / cap, tanh, scale by cap.
void SoftcapInPlace(float* x, int64_t n, float cap);

// gate[i] = GELU(gate[i]) * up[i] (GeGLU), GELU in the tanh approximation
// as ggml's CPU backend evaluates it: for |x| < 10 the fp16 value of
// GELU(fp16(x)) (its lookup table), 0 at or below -10, x at or above 10.
void GeluTanhMul(float* gate, const float* up, int64_t n);

// The index of the first largest element of x[0..n) (n >= 1), as
// std::max_element gives it; 8 lanes at a time where the CPU has AVX2.
int64_t ArgMax(const float* x, int64_t n);

// In-place softmax over x[0..n).
void Softmax(float* x, int64_t n);

// y[i] += x[i].
void AddInPlace(float* y, const float* x, int64_t n);

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_OPS_H_
