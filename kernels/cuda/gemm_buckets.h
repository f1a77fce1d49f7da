// The m sizes GemmPlans (gemm.h) plans a product for, and the bucket an m
// runs in. Host only, no CUDA: unit-tested in the default build.
//
// Powers of two up to 64 (decode batches, where cuBLASLt's choice changes
// most with m), then multiples of 64 up to max_m (prefill chunks): at most
// 1/64 of a large product is padding, and a plan set for max_m = 8192 is
// 7 + 127 plans a shape.
#ifndef BRAID_KERNELS_CUDA_GEMM_BUCKETS_H_
#define BRAID_KERNELS_CUDA_GEMM_BUCKETS_H_

#include <vector>

namespace braid::kernels::cuda {

// Ascending; the last is max_m (>= 1).
std::vector<int> GemmBuckets(int max_m);
// Index into GemmBuckets(max_m) of the smallest bucket >= m (1 <= m <= max_m).
int GemmBucketIndex(int m, int max_m);

}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_GEMM_BUCKETS_H_
