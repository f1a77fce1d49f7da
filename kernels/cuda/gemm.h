// The linear layers' matrix products on cuBLASLt, planned once at load.
//
// Every product is Y[m, n] = X[m, k] . W[n, k]^T in BF16 with f32
// accumulation and an f32 result, followed by a named epilogue (the CODA
// idea: the product's output is touched once, by the epilogue that needs it):
//   kNone      Y = X W^T
//   kBias      Y = X W^T + bias[n]              (cuBLASLt's BIAS epilogue)
//   kResidual  Y += X W^T  (beta = 1, C = D = Y: the residual add in place)
// Row-major X and W as the GGUF rows lie (W is [n, k], one output a row), so
// in cuBLASLt's column-major terms this is the "TN" product D^T = W . X^T,
// the layout its BF16 kernels serve best.
//
// m (the step's token count) varies per step; cuBLASLt's layouts and its
// algorithm choice are per m, so GemmPlans makes one plan per (shape, m
// bucket) at load (GemmBuckets), and a product of m rows runs the plan of
// the smallest bucket >= m, padded: it computes the bucket's rows, so x and
// y hold max_m rows (rows past m are don't-care in, garbage out; each output
// row depends only on its own input row). Handles, descriptors, workspace and
// algorithms are made in Create; Run only launches. Not thread-safe (one
// engine thread; Run sets the bias pointer on the shared descriptor).
#ifndef BRAID_KERNELS_CUDA_GEMM_H_
#define BRAID_KERNELS_CUDA_GEMM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/gemm_buckets.h"

namespace braid::kernels::cuda {

enum class GemmEpilogue { kNone, kBias, kResidual };

// A product's shape without its m: W is [n, k].
struct GemmShape {
  int n = 0;
  int k = 0;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
};

class GemmPlans {
 public:
  // One plan per shape and bucket of GemmBuckets(max_m), with a workspace of
  // workspace_bytes on the current device. Errors: InvalidArgument for a
  // shape with n or k <= 0 or k not a multiple of 8 (BF16 rows must be
  // 16-byte aligned), FailedPrecondition when cuBLASLt has no algorithm for
  // one (named), and CUDA/cuBLAS errors.
  static absl::StatusOr<std::unique_ptr<GemmPlans>> Create(
      const std::vector<GemmShape>& shapes, int max_m, size_t workspace_bytes);
  ~GemmPlans();

  // y[m, n] (f32, row-major; read too with kResidual) = the product of
  // shapes[shape] on x [m, k] (BF16 bits, row-major) and w [n, k], computed
  // for the m's bucket's rows (x and y hold at least that many); bias
  // [n] f32 with kBias, else ignored. All device pointers; asynchronous on
  // `stream` (a cudaStream_t). InvalidArgument for m outside [1, max_m] or
  // an unknown shape.
  absl::Status Run(int shape, int m, const uint16_t* x, const uint16_t* w,
                   const float* bias, float* y, void* stream) const;

  int max_m() const { return max_m_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  struct Impl;
  explicit GemmPlans(std::unique_ptr<Impl> impl, int max_m, size_t ws);
  std::unique_ptr<Impl> impl_;
  int max_m_;
  size_t workspace_bytes_;
};

}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_GEMM_H_
