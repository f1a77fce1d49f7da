#include "kernels/cuda/gemm_buckets.h"

#include <algorithm>

namespace braid::kernels::cuda {

namespace {
constexpr int kStep = 64;
}  // namespace

std::vector<int> GemmBuckets(int max_m) {
  std::vector<int> out;
  for (int m = 1; m < std::min(max_m, kStep); m *= 2) out.push_back(m);
  for (int m = kStep; m < max_m; m += kStep) out.push_back(m);
  out.push_back(max_m);
  return out;
}

int GemmBucketIndex(int m, int max_m) {
  int pow2 = 0;
  for (int b = 1; b < std::min(max_m, kStep); b *= 2, ++pow2) {
    if (m <= b) return pow2;
  }
  // Past the powers of two: the multiples of kStep, then max_m.
  // (no allocation: Run calls this every product)
  const int i = pow2 + (m + kStep - 1) / kStep - 1;
  const int last = pow2 + (max_m - 1) / kStep;
  return std::min(i, last);
}

}  // namespace braid::kernels::cuda
