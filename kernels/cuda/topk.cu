// The top-k kernel behind kernels/cuda/topk.h (its design note says how it
// works). No absl here (nvcc): the launcher returns a cudaError_t and
// topk.cc turns it into an absl::Status after checking the arguments.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/launch.cuh"

namespace braid::kernels::cuda {
namespace internal {

// Declared in topk.cc.
cudaError_t LaunchTopKLogits(const float* logits, int n_rows, int n_vocab,
                             int k, int32_t* ids, float* values, float* log_z,
                             cudaStream_t stream);

}  // namespace internal

namespace {

constexpr int kMaxThreads = 1024;
constexpr unsigned kFullMask = 0xffffffffu;
// The radix select's digit: 8 bits, four passes over a 32-bit key.
constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;

// A key whose unsigned order is the float order (no NaN): -0.0 is +0.0's
// key, negative floats flip all bits, the rest flip the sign bit.
__device__ __forceinline__ uint32_t OrderKey(float v) {
  const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// op over the block (blockDim.x a multiple of 32, <= 1024), identity for
// the missing warps; every thread gets the result.
template <typename T, typename Op>
__device__ T BlockReduce(T v, T identity, Op op) {
  __shared__ T partial[32];
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFullMask, v, o));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < blockDim.x / 32 ? partial[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// How many threads before this one (in thread order) have `flag` set;
// *total gets the block's count. Every thread of the block calls it.
__device__ int BlockExclusiveCount(bool flag, int* total) {
  __shared__ int warp_counts[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned ballot = __ballot_sync(kFullMask, flag);
  __syncthreads();  // warp_counts[] may still be read by a previous call
  if (lane == 0) warp_counts[warp] = __popc(ballot);
  __syncthreads();
  int before = 0, sum = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) {
    if (w == warp) before = sum;
    sum += warp_counts[w];
  }
  *total = sum;
  return before + __popc(ballot & ((1u << lane) - 1u));
}

// Warp 0, after a histogram pass: the digit d with above(d) < need <=
// above(d) + hist[d], above(d) the count in the bins over d, into *digit;
// need - above(d) (how many of bin d still to take) into *rest. Lane l
// holds bins 255 - 8l down to 248 - 8l.
__device__ void PickDigit(const int* hist, int need, uint32_t* digit,
                          int* rest) {
  constexpr int kPerLane = kBins / 32;
  const int lane = threadIdx.x;
  int count[kPerLane], local = 0;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    count[j] = hist[kBins - 1 - kPerLane * lane - j];
    local += count[j];
  }
  int inclusive = local;
  for (int o = 1; o < 32; o <<= 1) {
    const int t = __shfl_up_sync(kFullMask, inclusive, o);
    if (lane >= o) inclusive += t;
  }
  int above = inclusive - local;
  if (above >= need || need > inclusive) return;  // not this lane's bins
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    if (need <= above + count[j]) {
      *digit = kBins - 1 - kPerLane * lane - j;
      *rest = need - above;
      return;
    }
    above += count[j];
  }
}

// The radix select: the k-th largest key of row x[0, n) into *threshold,
// how many entries with that key are among the row's k largest into
// *n_ties (>= 1); the row's max into *row_max (read by the first pass).
// Lanes aggregate their histogram increments by bin (__match_any_sync):
// a pass's entries often share a few bins (logits' exponents do).
__device__ void SelectThreshold(const float* x, uint32_t n, int k,
                                uint32_t* threshold, int* n_ties,
                                float* row_max) {
  __shared__ int hist[kBins];
  __shared__ uint32_t s_digit;
  __shared__ int s_need;
  const int lane = threadIdx.x % 32;
  uint32_t prefix = 0, mask = 0;
  int need = k;
  float m = -INFINITY;
  for (int shift = 32 - kDigitBits; shift >= 0; shift -= kDigitBits) {
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    for (uint32_t base = 0; base < n; base += blockDim.x) {
      const uint32_t i = base + threadIdx.x;
      uint32_t bin = kBins;  // none
      if (i < n) {
        const float v = x[i];
        if (mask == 0) m = fmaxf(m, v);
        const uint32_t key = OrderKey(v);
        if ((key & mask) == prefix) bin = (key >> shift) & (kBins - 1);
      }
      const unsigned peers = __match_any_sync(kFullMask, bin);
      if (bin < kBins && lane == __ffs(peers) - 1) {
        atomicAdd(&hist[bin], __popc(peers));
      }
    }
    __syncthreads();
    if (threadIdx.x < 32) PickDigit(hist, need, &s_digit, &s_need);
    __syncthreads();
    prefix |= s_digit << shift;
    mask |= static_cast<uint32_t>(kBins - 1) << shift;
    need = s_need;
  }
  *threshold = prefix;
  *n_ties = need;
  *row_max = BlockReduce(m, -INFINITY, MaxOp());
}

// The entries of x[0, n) with key > threshold into s_values/s_ids, in any
// order (there are k - n_ties of them); returns the block's sum of exp(x -
// row_max) (row_max finite; 0 otherwise).
__device__ double GatherAbove(const float* x, uint32_t n, uint32_t threshold,
                              float row_max, float* s_values, int32_t* s_ids) {
  __shared__ int s_count;
  if (threadIdx.x == 0) s_count = 0;
  __syncthreads();
  const bool finite_max = isfinite(row_max);
  float sum = 0.0f, lost = 0.0f;  // Kahan: sum - lost is the exact sum
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = x[i];
    if (OrderKey(v) > threshold) {
      const int pos = atomicAdd(&s_count, 1);
      s_values[pos] = v;
      s_ids[pos] = static_cast<int32_t>(i);
    }
    if (finite_max) {
      const float y = expf(v - row_max) - lost;
      const float t = sum + y;
      lost = (t - sum) - y;
      sum = t;
    }
  }
  return BlockReduce(double{sum} - lost, 0.0, SumOp());
}

// The n_ties entries with key == threshold and the lowest ids into
// s_values/s_ids[first, first + n_ties): x walked in id order, blockDim
// entries at a time, until n_ties are found.
__device__ void GatherTies(const float* x, uint32_t n, uint32_t threshold,
                           int n_ties, int first, float* s_values,
                           int32_t* s_ids) {
  int taken = 0;  // the same in every thread
  for (uint32_t base = 0; base < n && taken < n_ties; base += blockDim.x) {
    const uint32_t i = base + threadIdx.x;
    const float v = i < n ? x[i] : 0.0f;
    const bool tie = i < n && OrderKey(v) == threshold;
    int found;
    const int pos = taken + BlockExclusiveCount(tie, &found);
    if (tie && pos < n_ties) {
      s_values[first + pos] = v;
      s_ids[first + pos] = static_cast<int32_t>(i);
    }
    taken += found;
  }
}

// The k gathered entries to out_ids/out_values[0, k) by rank: value
// descending, then id ascending (ids are distinct, so ranks are too).
__device__ void WriteRanked(const float* s_values, const int32_t* s_ids, int k,
                            int32_t* out_ids, float* out_values) {
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const float v = s_values[j];
    const int32_t id = s_ids[j];
    int rank = 0;
    for (int m = 0; m < k; ++m) {
      const float w = s_values[m];
      rank += w > v || (w == v && s_ids[m] < id);
    }
    out_ids[rank] = id;
    out_values[rank] = v;
  }
}

// One block a row. Dynamic shared memory: k floats (values), k int32 (ids).
__global__ void __launch_bounds__(kMaxThreads)
    TopKLogitsKernel(const float* logits, uint32_t n_vocab, int k, int32_t* ids,
                     float* values, float* log_z) {
  AwaitPrerequisiteGrids();
  extern __shared__ float s_values[];
  int32_t* s_ids = reinterpret_cast<int32_t*>(s_values + k);
  const int64_t row = blockIdx.x;
  const float* x = logits + row * n_vocab;
  uint32_t threshold;
  int n_ties;
  float row_max;
  SelectThreshold(x, n_vocab, k, &threshold, &n_ties, &row_max);
  const double sum =
      GatherAbove(x, n_vocab, threshold, row_max, s_values, s_ids);
  GatherTies(x, n_vocab, threshold, n_ties, k - n_ties, s_values, s_ids);
  __syncthreads();
  WriteRanked(s_values, s_ids, k, ids + row * k, values + row * k);
  if (threadIdx.x == 0) {
    log_z[row] = isfinite(row_max)
                     ? static_cast<float>(double{row_max} + log(sum))
                     : row_max;
  }
}

// Threads for a row of n: a multiple of 32 (PickDigit needs a full warp
// 0), at most kMaxThreads.
int RowThreads(int n) {
  return n >= kMaxThreads ? kMaxThreads : ((n + 31) / 32) * 32;
}

}  // namespace

cudaError_t internal::LaunchTopKLogits(const float* logits, int n_rows,
                                       int n_vocab, int k, int32_t* ids,
                                       float* values, float* log_z,
                                       cudaStream_t stream) {
  if (n_rows <= 0) return cudaSuccess;
  // k <= kMaxTopK (1024): 8 KiB, under the 48 KiB needing no opt-in.
  const size_t smem = 2 * static_cast<size_t>(k) * sizeof(float);
  return Launch(TopKLogitsKernel, n_rows, RowThreads(n_vocab), smem, stream,
                logits, static_cast<uint32_t>(n_vocab), k, ids, values, log_z);
}

}  // namespace braid::kernels::cuda
