#include "kernels/cpu/matmul.h"

#include <algorithm>

#include "kernels/cpu/dot.h"

namespace braid::kernels::cpu {
namespace {

constexpr int64_t kRowGroup = 8;  // Rows dotted against all tokens together.

}  // namespace

size_t MatMulScratchBytes(const WeightMatrix& w, int64_t n_tok) {
  const DType act = ActivationDType(w.type);
  if (act == DType::kF32) return 0;
  return DTypeRowBytes(act, w.cols) * n_tok;
}

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tok, float* y,
            bool accumulate, ThreadPool* pool, std::vector<uint8_t>* scratch) {
  const DType act = ActivationDType(w.type);
  const void* xq = x;
  size_t x_row_bytes = w.cols * sizeof(float);
  if (act != DType::kF32) {
    x_row_bytes = DTypeRowBytes(act, w.cols);
    const size_t need = x_row_bytes * n_tok;
    if (scratch->size() < need) scratch->resize(need);
    for (int64_t t = 0; t < n_tok; ++t) {
      QuantizeRow(act, x + t * w.cols, scratch->data() + t * x_row_bytes,
                  w.cols);
    }
    xq = scratch->data();
  }
  const auto* xbytes = static_cast<const uint8_t*>(xq);
  const int64_t n_out = w.rows;
  const int64_t n_groups = (n_out + kRowGroup - 1) / kRowGroup;
  const int num_threads = pool != nullptr ? pool->num_threads() : 1;
  // A few chunks per thread balance load when a thread is descheduled.
  const int64_t n_chunks = std::min<int64_t>(n_groups, num_threads * 4);
  auto run_chunk = [&](int64_t chunk) {
    const int64_t g0 = n_groups * chunk / n_chunks;
    const int64_t g1 = n_groups * (chunk + 1) / n_chunks;
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t r0 = g * kRowGroup;
      const int64_t r1 = std::min(n_out, r0 + kRowGroup);
      for (int64_t t = 0; t < n_tok; ++t) {
        const uint8_t* xt = xbytes + t * x_row_bytes;
        float* yt = y + t * n_out;
        for (int64_t r = r0; r < r1; ++r) {
          const float v = DotRow(w.type, w.Row(r), xt, w.cols);
          yt[r] = accumulate ? yt[r] + v : v;
        }
      }
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(n_chunks, run_chunk);
  } else {
    for (int64_t c = 0; c < n_chunks; ++c) run_chunk(c);
  }
}

}  // namespace braid::kernels::cpu
