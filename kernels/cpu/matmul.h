// Y = X * W^T for a weight matrix in any supported type and f32 activations.
//
// Design: decode is bound by streaming weights from memory, prefill by
// arithmetic. X is quantized once per call to the weight type's partner
// (Q8_0/Q8_1) into a caller-owned scratch buffer; then each thread takes a
// contiguous run of output rows and, for each small group of rows, dots them
// against every token row, so a weight row is fetched from memory once per call
// whatever the number of tokens. Thread-safety: stateless; the scratch buffer
// and outputs belong to the caller.
#ifndef BRAID_KERNELS_CPU_MATMUL_H_
#define BRAID_KERNELS_CPU_MATMUL_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu/quant.h"
#include "kernels/cpu/thread_pool.h"

namespace braid::kernels::cpu {

// A read-only row-major weight matrix [rows, cols] (ggml ne = {cols, rows}).
struct WeightMatrix {
  DType type = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  const uint8_t* Row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + r * DTypeRowBytes(type, cols);
  }
};

// Bytes of scratch MatMul needs for n_tok rows against `w`.
size_t MatMulScratchBytes(const WeightMatrix& w, int64_t n_tok);

// y [n_tok, w.rows] (= or +=, see accumulate) from x [n_tok, w.cols].
// Preconditions (checked by callers at model load): w.cols is a multiple of the
// block size of w.type; w.type is not Q8_1. `scratch` grows if too small (so a
// caller that reuses it allocates only on the first, largest call). pool may be
// null.
void MatMul(const WeightMatrix& w, const float* x, int64_t n_tok, float* y,
            bool accumulate, ThreadPool* pool, std::vector<uint8_t>* scratch);

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_MATMUL_H_
