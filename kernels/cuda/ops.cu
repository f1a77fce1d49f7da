#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/ops.h"

namespace braid::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint16_t ToBf16(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
__device__ __forceinline__ float FromBf16(uint16_t v) {
  return __bfloat162float(__ushort_as_bfloat16(v));
}

// Sum of v over the block (blockDim.x a multiple of 32, <= 1024); every
// thread gets the total.
__device__ float BlockSum(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = lane < warps ? partial[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float RowRmsScale(const float* x, int d, float eps) {
  float ss = 0.0f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) ss += x[i] * x[i];
  ss = BlockSum(ss);
  return 1.0f / sqrtf(ss / d + eps);
}

__global__ void EmbedKernel(const uint16_t* table, const int32_t* tokens,
                            const CudaEntryMeta* meta, const float* stream_embd,
                            int d, float scale, float* x) {
  AwaitPrerequisiteGrids();
  const int t = blockIdx.x;
  const uint16_t* row = table + int64_t{tokens[t]} * d;
  const float* se = stream_embd != nullptr
                        ? stream_embd + int64_t{meta[t].stream} * d
                        : nullptr;
  float* out = x + int64_t{t} * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float v = FromBf16(row[i]);
    if (scale != 1.0f) v *= scale;
    if (se != nullptr) v += se[i];
    out[i] = v;
  }
}

template <typename Out>
__device__ __forceinline__ void Store(Out* p, float v);
template <>
__device__ __forceinline__ void Store<float>(float* p, float v) {
  *p = v;
}
template <>
__device__ __forceinline__ void Store<uint16_t>(uint16_t* p, float v) {
  *p = ToBf16(v);
}

template <typename Out>
__global__ void RmsNormKernel(const float* x, int ld_x, const int32_t* rows,
                              int d, const float* w, float eps, Out* out) {
  AwaitPrerequisiteGrids();
  const int i = blockIdx.x;
  const int r = rows != nullptr ? rows[i] : i;
  const float* xr = x + int64_t{r} * ld_x;
  const float scale = RowRmsScale(xr, d, eps);
  Out* o = out + int64_t{i} * d;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    Store(o + j, xr[j] * scale * w[j]);
  }
}

__global__ void PostNormAddKernel(const float* o, const float* w, float eps,
                                  int d, float* x) {
  AwaitPrerequisiteGrids();
  const int64_t t = blockIdx.x;
  const float* orow = o + t * d;
  const float scale = RowRmsScale(orow, d, eps);
  float* xr = x + t * d;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    xr[j] += orow[j] * scale * w[j];
  }
}

// ggml's GELU, tanh approximation, on an fp16 input, rounded to fp16 (its
// CPU backend's table).
__device__ float GeluTanhFp16(float v) {
  if (v <= -10.0f) return 0.0f;
  if (v >= 10.0f) return v;
  const float h = __half2float(__float2half_rn(v));
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  const float g =
      0.5f * h * (1.0f + tanhf(kSqrt2OverPi * h * (1.0f + kCoef * h * h)));
  return __half2float(__float2half_rn(g));
}

__global__ void GatedActKernel(const float* gu, int ff, GatedAct act,
                               uint16_t* out) {
  AwaitPrerequisiteGrids();
  const int64_t t = blockIdx.y;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= ff) return;
  const float g = gu[t * 2 * ff + i];
  const float u = gu[t * 2 * ff + ff + i];
  const float a =
      act == GatedAct::kSilu ? g / (1.0f + expf(-g)) : GeluTanhFp16(g);
  out[t * ff + i] = ToBf16(a * u);
}

// One head of one token: per-head norm (w null: none), the rotation by its
// token's table row cs, scale; into `out` (f32) or the fp16 pool row
// `pool_out`.
__device__ void HeadEpilogue(const float* in, int head_dim, const float* w,
                             float eps, const RopeRotation& rope,
                             const float* cs, float scale, float* smem,
                             float* out, uint16_t* pool_out) {
  // Load (and norm) the head into shared memory.
  float ss = 0.0f;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    smem[i] = in[i];
    ss += in[i] * in[i];
  }
  if (w != nullptr) {
    ss = BlockSum(ss);
    const float s = 1.0f / sqrtf(ss / head_dim + eps);
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
      smem[i] = smem[i] * s * w[i];
    }
  }
  __syncthreads();
  const int pairs = rope.n_rot / 2;
  for (int p = threadIdx.x; p < head_dim; p += blockDim.x) {
    float v;
    if (p < rope.n_rot) {
      // Pair index i and the partner element of p.
      const int i = rope.neox ? p % pairs : p / 2;
      const int a = rope.neox ? i : 2 * i;
      const int b = rope.neox ? i + pairs : 2 * i + 1;
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const float x0 = smem[a], x1 = smem[b];
      v = p == a ? fmaf(x0, c, -(x1 * s)) : fmaf(x0, s, x1 * c);
    } else {
      v = smem[p];
    }
    if (scale != 1.0f) v *= scale;
    if (out != nullptr) {
      out[p] = v;
    } else {
      pool_out[p] = __half_as_ushort(__float2half_rn(v));
    }
  }
  __syncthreads();
}

// grid: (n_head + 2 * n_kv_head, n). Head h < n_head is a Q head, then the
// K heads, then the V heads.
__global__ void QkvEpilogueKernel(const float* qkv, QkvShape shape,
                                  const float* q_norm, const float* k_norm,
                                  RopeRotation rope, float q_scale,
                                  const int64_t* slots, float* q,
                                  uint16_t* k_pool, uint16_t* v_pool) {
  AwaitPrerequisiteGrids();
  extern __shared__ float smem[];
  const int h = blockIdx.x;
  const int64_t t = blockIdx.y;
  const int hd = shape.head_dim;
  const int q_dim = shape.n_head * hd, kv_dim = shape.n_kv_head * hd;
  const float* row = qkv + t * (q_dim + 2 * kv_dim);
  const float* cs = rope.cs + t * rope.n_rot;
  if (h < shape.n_head) {
    HeadEpilogue(row + h * hd, hd, q_norm, shape.norm_eps, rope, cs, q_scale,
                 smem, q + t * q_dim + h * hd, nullptr);
    return;
  }
  const int64_t slot = slots[t];
  const int kh = h - shape.n_head;
  if (kh < shape.n_kv_head) {
    HeadEpilogue(row + q_dim + kh * hd, hd, k_norm, shape.norm_eps, rope, cs,
                 1.0f, smem, nullptr, k_pool + slot * kv_dim + kh * hd);
    return;
  }
  const int vh = kh - shape.n_kv_head;
  const float* v = row + q_dim + kv_dim + vh * hd;
  uint16_t* dst = v_pool + slot * kv_dim + vh * hd;
  for (int i = threadIdx.x; i < hd; i += blockDim.x) {
    dst[i] = __half_as_ushort(__float2half_rn(v[i]));
  }
}

// One thread a (token, pair): the angle by successive products, as ggml.
__global__ void RopeTableKernel(const CudaEntryMeta* meta, int n,
                                RopeParams rope, float* cs) {
  AwaitPrerequisiteGrids();
  const int pairs = rope.n_rot / 2;
  const int64_t k = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (k >= int64_t{n} * pairs) return;
  const int64_t t = k / pairs;
  const int i = static_cast<int>(k % pairs);
  const float theta_scale = powf(rope.base, -2.0f / rope.n_rot);
  float theta = static_cast<float>(meta[t].y);
  for (int j = 0; j < i; ++j) theta *= theta_scale;
  if (rope.freq_factors != nullptr) theta = theta / rope.freq_factors[i];
  if (rope.freq_scale != 1.0f) theta = rope.freq_scale * theta;
  cs[t * rope.n_rot + 2 * i] = cosf(theta);
  cs[t * rope.n_rot + 2 * i + 1] = sinf(theta);
}

__global__ void WriteKvMetaKernel(const CudaEntryMeta* meta,
                                  const int64_t* slots, int n,
                                  CudaEntryMeta* kv_meta) {
  AwaitPrerequisiteGrids();
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) kv_meta[slots[t]] = meta[t];
}

__global__ void SoftcapKernel(float* x, int64_t n, float cap) {
  AwaitPrerequisiteGrids();
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) x[i] = cap * tanhf(x[i] * (1.0f / cap));
}

__global__ void PenaltiesKernel(float* logits, int n_vocab,
                                const CudaRowPenalties* rows,
                                const CudaPenaltyEntry* entries) {
  AwaitPrerequisiteGrids();
  const CudaRowPenalties p = rows[blockIdx.x];
  float* row = logits + int64_t{blockIdx.x} * n_vocab;
  const bool repetition = p.repetition != 1.0f;
  const bool output = p.frequency != 0.0f || p.presence != 0.0f;
  for (int i = p.begin + threadIdx.x; i < p.end; i += blockDim.x) {
    const CudaPenaltyEntry e = entries[i];
    if (e.id < 0 || e.id >= n_vocab) continue;
    float l = row[e.id];
    if (repetition) {
      l = l > 0.0f ? __fdiv_rn(l, p.repetition) : __fmul_rn(l, p.repetition);
    }
    if (output && e.output_count > 0) {
      const float by =
          __fadd_rn(__fmul_rn(p.frequency, static_cast<float>(e.output_count)),
                    p.presence);
      l = __fsub_rn(l, by);
    }
    row[e.id] = l;
  }
}

__global__ void F32ToBf16Kernel(const float* x, int64_t n, uint16_t* out) {
  AwaitPrerequisiteGrids();
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) out[i] = ToBf16(x[i]);
}

int Blocks(int64_t n) {
  return static_cast<int>((n + kThreads - 1) / kThreads);
}

// Threads for a row op over d elements: a multiple of 32, at most 1024.
int RowThreads(int d) {
  int t = ((d + 31) / 32) * 32;
  return t < 1024 ? t : 1024;
}

}  // namespace

cudaError_t EmbedRows(const uint16_t* table, const int32_t* tokens,
                      const CudaEntryMeta* meta, const float* stream_embd,
                      int n, int d, float scale, float* x,
                      cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Launch(EmbedKernel, n, RowThreads(d), 0, stream, table, tokens, meta,
                stream_embd, d, scale, x);
}

cudaError_t RmsNormToBf16(const float* x, int ld_x, const int32_t* rows, int n,
                          int d, const float* w, float eps, uint16_t* out,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Launch(RmsNormKernel<uint16_t>, n, RowThreads(d), 0, stream, x, ld_x,
                rows, d, w, eps, out);
}

cudaError_t RmsNormF32(const float* x, int ld_x, const int32_t* rows, int n,
                       int d, const float* w, float eps, float* out,
                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Launch(RmsNormKernel<float>, n, RowThreads(d), 0, stream, x, ld_x,
                rows, d, w, eps, out);
}

cudaError_t PostNormAdd(const float* o, const float* w, float eps, int n, int d,
                        float* x, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Launch(PostNormAddKernel, n, RowThreads(d), 0, stream, o, w, eps, d,
                x);
}

cudaError_t GatedActToBf16(const float* gu, int n, int ff, GatedAct act,
                           uint16_t* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Launch(GatedActKernel, dim3(Blocks(ff), n), kThreads, 0, stream, gu,
                ff, act, out);
}

cudaError_t RopeTable(const CudaEntryMeta* meta, int n, const RopeParams& rope,
                      float* cs, cudaStream_t stream) {
  if (n == 0 || rope.n_rot == 0) return cudaSuccess;
  if (rope.n_rot < 0 || rope.n_rot % 2 != 0) return cudaErrorInvalidValue;
  return Launch(RopeTableKernel, Blocks(int64_t{n} * (rope.n_rot / 2)),
                kThreads, 0, stream, meta, n, rope, cs);
}

cudaError_t QkvEpilogue(const float* qkv, int n, const QkvShape& shape,
                        const float* q_norm, const float* k_norm,
                        const RopeRotation& rope, float q_scale,
                        const int64_t* slots, float* q, uint16_t* k_pool,
                        uint16_t* v_pool, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (shape.head_dim <= 0 || shape.head_dim > 1024 || rope.n_rot < 0 ||
      rope.n_rot > shape.head_dim || rope.n_rot % 2 != 0) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid(shape.n_head + 2 * shape.n_kv_head, n);
  return Launch(QkvEpilogueKernel, grid, RowThreads(shape.head_dim),
                shape.head_dim * sizeof(float), stream, qkv, shape, q_norm,
                k_norm, rope, q_scale, slots, q, k_pool, v_pool);
}

cudaError_t WriteKvMeta(const CudaEntryMeta* meta, const int64_t* slots, int n,
                        CudaEntryMeta* kv_meta, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Launch(WriteKvMetaKernel, Blocks(n), kThreads, 0, stream, meta, slots,
                n, kv_meta);
}

cudaError_t Softcap(float* x, int64_t n, float cap, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Launch(SoftcapKernel, Blocks(n), kThreads, 0, stream, x, n, cap);
}

cudaError_t ApplyPenalties(float* logits, int n_rows, int n_vocab,
                           const CudaRowPenalties* rows,
                           const CudaPenaltyEntry* entries,
                           cudaStream_t stream) {
  if (n_rows == 0) return cudaSuccess;
  return Launch(PenaltiesKernel, n_rows, kThreads, 0, stream, logits, n_vocab,
                rows, entries);
}

cudaError_t F32ToBf16(const float* x, int64_t n, uint16_t* out,
                      cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Launch(F32ToBf16Kernel, Blocks(n), kThreads, 0, stream, x, n, out);
}

}  // namespace braid::kernels::cuda
