#include "kernels/cpu/matmul.h"

#include <algorithm>

#include "kernels/cpu/gemm_tile.h"

namespace braid::kernels::cpu {

size_t MatMulScratchBytes(const WeightMatrix& w, int64_t n_tok) {
  const DType act = ActivationDType(w.type);
  if (act == DType::kF32) return 0;
  return DTypeRowBytes(act, w.cols) * n_tok +
         GemmTileActivationsBytes(w.type, w.cols, n_tok);
}

QuantizedActivations QuantizeActivations(DType weight_type, const float* x,
                                         int64_t n_tok, int64_t cols,
                                         std::vector<uint8_t>* scratch,
                                         ThreadPool* pool) {
  const DType act = ActivationDType(weight_type);
  QuantizedActivations q{act, reinterpret_cast<const uint8_t*>(x),
                         cols * sizeof(float), n_tok, cols};
  if (act == DType::kF32) return q;
  q.row_bytes = DTypeRowBytes(act, cols);
  const size_t rows_bytes = q.row_bytes * n_tok;
  const size_t need =
      rows_bytes + GemmTileActivationsBytes(weight_type, cols, n_tok);
  if (scratch->size() < need) scratch->resize(need);
  uint8_t* out = scratch->data();
  auto rows = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      QuantizeRow(act, x + t * cols, out + t * q.row_bytes, cols);
    }
  };
  constexpr int64_t kRowsPerTask = 16;
  if (pool == nullptr || n_tok < 2 * kRowsPerTask) {
    rows(0, n_tok);
  } else {
    pool->ParallelFor(
        (n_tok + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t i) {
          rows(i * kRowsPerTask, std::min(n_tok, (i + 1) * kRowsPerTask));
        });
  }
  q.data = out;
  q.has_tiles = PrepareGemmTileActivations(weight_type, out, q.row_bytes, cols,
                                           n_tok, out + rows_bytes, &q.tiles);
  return q;
}

void MatMulRows(const WeightMatrix& w, const QuantizedActivations& xq,
                int64_t r0, int64_t r1, float* y, int64_t ld_y,
                bool accumulate) {
  GemmTile(w.type, static_cast<const uint8_t*>(w.data),
           DTypeRowBytes(w.type, w.cols), xq.data, xq.row_bytes, w.cols, r0, r1,
           xq.n_tok, y, ld_y, accumulate, xq.has_tiles ? &xq.tiles : nullptr);
}

int64_t RowsPerTask(int64_t rows, int num_threads, int64_t align) {
  const int64_t tasks =
      std::max<int64_t>(1, int64_t{num_threads} * kMatMulTasksPerThread);
  int64_t per = (rows + tasks - 1) / tasks;
  per = (per + align - 1) / align * align;
  return std::max<int64_t>(per, align);
}

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tok, float* y,
            bool accumulate, ThreadPool* pool, std::vector<uint8_t>* scratch) {
  const QuantizedActivations xq =
      QuantizeActivations(w.type, x, n_tok, w.cols, scratch, pool);
  const int num_threads = pool != nullptr ? pool->num_threads() : 1;
  const int64_t per = RowsPerTask(w.rows, num_threads, 4);
  const int64_t n_tasks = (w.rows + per - 1) / per;
  auto task = [&](int64_t i) {
    MatMulRows(w, xq, i * per, std::min(w.rows, (i + 1) * per), y, w.rows,
               accumulate);
  };
  if (pool != nullptr) {
    pool->ParallelFor(n_tasks, task);
  } else {
    for (int64_t i = 0; i < n_tasks; ++i) task(i);
  }
}

}  // namespace braid::kernels::cpu
