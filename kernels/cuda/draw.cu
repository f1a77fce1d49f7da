// The kernel behind kernels/cuda/draw.h. No absl here (nvcc): draw.cc
// checks the arguments and maps the launch's error.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/launch.cuh"

namespace braid::kernels::cuda {

// Mirrors draw.h's (that header includes absl, which nvcc does not take).
struct CudaRowDraw {
  float inv_temperature;
  double u;
};

namespace internal {
cudaError_t LaunchDrawRows(const float* logits, int n_rows, int n_vocab,
                           const CudaRowDraw* draws, int32_t* drawn,
                           float* drawn_logit, double* sums,
                           cudaStream_t stream);
}  // namespace internal

namespace {

constexpr int kThreads = 1024;
constexpr unsigned kFullMask = 0xffffffffu;

// The block's max (float) or sum (double); every thread gets it.
template <typename T, bool kMax>
__device__ T BlockReduce(T v) {
  __shared__ T partial[32];
  for (int o = 16; o > 0; o >>= 1) {
    const T w = __shfl_xor_sync(kFullMask, v, o);
    v = kMax ? (w > v ? w : v) : v + w;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = partial[0];
  for (int w = 1; w < kThreads / 32; ++w) {
    v = kMax ? (partial[w] > v ? partial[w] : v) : v + partial[w];
  }
  return v;
}

// The sum of the values of the threads before this one (thread order),
// double; every thread calls it.
__device__ double BlockExclusiveSum(double v) {
  __shared__ double warp_sums[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  double inclusive = v;
  for (int o = 1; o < 32; o <<= 1) {
    const double t = __shfl_up_sync(kFullMask, inclusive, o);
    if (lane >= o) inclusive += t;
  }
  __syncthreads();
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  double before = 0.0;
  for (int w = 0; w < warp; ++w) before += warp_sums[w];
  return before + inclusive - v;
}

// One block a row; thread t owns the ids [t * chunk, (t + 1) * chunk), so
// thread order is id order. The row is read four times.
__global__ void __launch_bounds__(kThreads)
    DrawRowsKernel(const float* logits, int n_vocab, const CudaRowDraw* draws,
                   int32_t* drawn, float* drawn_logit, double* sums) {
  AwaitPrerequisiteGrids();
  __shared__ int s_found;
  const int64_t row = blockIdx.x;
  const CudaRowDraw d = draws[row];
  if (d.inv_temperature <= 0.0f) {
    if (threadIdx.x == 0) {
      drawn[row] = -1;
      drawn_logit[row] = 0.0f;
      sums[row] = 0.0;
    }
    return;
  }
  const float* x = logits + row * n_vocab;
  const int chunk = (n_vocab + kThreads - 1) / kThreads;
  const int begin = min(n_vocab, threadIdx.x * chunk);
  const int end = min(n_vocab, begin + chunk);
  float m = -INFINITY;
  for (int i = begin; i < end; ++i) m = fmaxf(m, x[i] * d.inv_temperature);
  m = BlockReduce<float, true>(m);
  double e_sum = 0.0;
  for (int i = begin; i < end; ++i) {
    e_sum += static_cast<double>(expf(x[i] * d.inv_temperature - m));
  }
  const double sum = BlockReduce<double, false>(e_sum);
  if (d.u < 0.0) {  // the denominator alone
    if (threadIdx.x == 0) {
      drawn[row] = -1;
      drawn_logit[row] = 0.0f;
      sums[row] = sum;
    }
    return;
  }
  // The probabilities as the host rounds them (float of e / sum), summed.
  double mass = 0.0;
  for (int i = begin; i < end; ++i) {
    mass += static_cast<float>(expf(x[i] * d.inv_temperature - m) / sum);
  }
  const double before = BlockExclusiveSum(mass);
  const double total = BlockReduce<double, false>(mass);
  const double target = d.u * total;
  if (threadIdx.x == 0) s_found = n_vocab - 1;  // rounding past the end
  __syncthreads();
  // Each thread finds the first of its ids where the running sum passes
  // the target; the smallest such id is the draw (robust to the block's
  // prefix sums rounding otherwise than a walk would).
  double cum = before;
  for (int i = begin; i < end; ++i) {
    cum += static_cast<float>(expf(x[i] * d.inv_temperature - m) / sum);
    if (target < cum) {
      atomicMin(&s_found, i);
      break;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    drawn[row] = s_found;
    drawn_logit[row] = x[s_found];
    sums[row] = sum;
  }
}

}  // namespace

cudaError_t internal::LaunchDrawRows(const float* logits, int n_rows,
                                     int n_vocab, const CudaRowDraw* draws,
                                     int32_t* drawn, float* drawn_logit,
                                     double* sums, cudaStream_t stream) {
  return Launch(DrawRowsKernel, n_rows, kThreads, 0, stream, logits, n_vocab,
                draws, drawn, drawn_logit, sums);
}

}  // namespace braid::kernels::cuda
