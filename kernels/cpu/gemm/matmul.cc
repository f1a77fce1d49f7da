#include "kernels/cpu/gemm/matmul.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/gemm/gemm_tile.h"

namespace braid::kernels::cpu {

namespace {

// Bytes of the tables QuantizeActivations lays out after the rows.
size_t TableBytes(const WeightMatrix& w, int64_t n_tok) {
  if (w.packed != nullptr) {
    return PackedActivationFloats(w.cols, n_tok) * sizeof(float) + 64;
  }
  return GemmTileActivationsBytes(w.type, w.cols, n_tok);
}

}  // namespace

bool PackWeightMatrix(WeightMatrix* w) {
  if (!CanPackWeights(w->type, w->rows, w->cols)) return false;
  w->packed = std::make_shared<const PackedWeights>(
      PackWeights(w->type, w->data, w->rows, w->cols));
  return true;
}

bool RepackQuadMatrix(WeightMatrix* w, ThreadPool* pool) {
  if (!CanRepackQuads(w->type, w->rows, w->cols)) return false;
  w->quads = std::make_shared<const QuadWeights>(
      RepackQuads(w->type, w->data, w->rows, w->cols, pool));
  return true;
}

size_t MatMulScratchBytes(const WeightMatrix& w, int64_t n_tok) {
  const DType act = ActivationDType(w.type);
  if (act == DType::kF32) return 0;
  return DTypeRowBytes(act, w.cols) * n_tok + TableBytes(w, n_tok);
}

namespace {

// q's rows and tables in *scratch (grown if too small) for n_tok rows of
// w's activation type (not f32): the views, nothing written.
void SetUpActivations(const WeightMatrix& w, int64_t n_tok,
                      std::vector<uint8_t>* scratch, QuantizedActivations* q) {
  q->type = ActivationDType(w.type);
  q->row_bytes = DTypeRowBytes(q->type, w.cols);
  q->n_tok = n_tok;
  q->cols = w.cols;
  q->packed_tables = nullptr;
  const size_t rows_bytes = q->row_bytes * n_tok;
  const size_t need = rows_bytes + TableBytes(w, n_tok);
  if (scratch->size() < need) scratch->resize(need);
  q->data = scratch->data();
  q->has_tiles = w.packed == nullptr &&
                 GemmTileActivationsBytes(w.type, w.cols, n_tok) > 0;
  q->tiles = GemmTileActivations{};
  if (q->has_tiles) {
    // Only the views: no block, no token.
    PrepareGemmTileActivations(w.type, q->data, q->row_bytes, w.cols, n_tok,
                               scratch->data() + rows_bytes, &q->tiles, 0, 0,
                               /*quad_layout=*/w.quads != nullptr, 0, 0);
  }
}

}  // namespace

QuantizedActivations QuantizeActivations(
    const WeightMatrix& w, const float* x, int64_t n_tok,
    std::vector<uint8_t>* scratch, ThreadPool* pool,
    absl::FunctionRef<void(int64_t, int64_t)> before) {
  const int64_t cols = w.cols;
  const bool f32 = ActivationDType(w.type) == DType::kF32;
  QuantizedActivations q{DType::kF32, reinterpret_cast<const uint8_t*>(x),
                         cols * sizeof(float), n_tok, cols};
  if (!f32) SetUpActivations(w, n_tok, scratch, &q);
  // Each task: its tokens' `before`, then their rows and their part of the
  // tiles' tables.
  auto rows = [&](int64_t t0, int64_t t1) {
    before(t0, t1);
    if (!f32) QuantizeActivationColumns(w, x, cols, q, 0, cols, t0, t1);
  };
  // Tasks of at least 4 tokens, at most 16, and at least one per thread
  // when there are 8+ tokens (a decode step's batch: serial, this work
  // would leave the other threads waiting).
  const int num_threads = pool == nullptr ? 1 : pool->num_threads();
  const int64_t n_tasks = std::min<int64_t>(
      (n_tok + 3) / 4, std::max<int64_t>(num_threads, (n_tok + 15) / 16));
  if (pool == nullptr || n_tasks <= 1) {
    rows(0, n_tok);
  } else {
    pool->ParallelFor(n_tasks, [&](int64_t i) {
      rows(i * n_tok / n_tasks, (i + 1) * n_tok / n_tasks);
    });
  }
  if (w.packed != nullptr && !f32) {
    // After the rows, 64-byte aligned (the rows' bytes need not be).
    uint8_t* out = scratch->data();
    float* tables = reinterpret_cast<float*>(
        (reinterpret_cast<uintptr_t>(out + q.row_bytes * n_tok) + 63) &
        ~uintptr_t{63});
    PreparePackedActivations(w.type, out, q.row_bytes, cols, n_tok, tables);
    q.packed_tables = tables;
  }
  return q;
}

bool StartActivations(const WeightMatrix& w, int64_t n_tok,
                      std::vector<uint8_t>* scratch, QuantizedActivations* q) {
  // Column ranges come in multiples of 32 (a head, a run of FFN rows): not
  // whole Q8_K super-blocks.
  if (ActivationDType(w.type) == DType::kF32 || w.packed != nullptr ||
      DTypeBlockSize(ActivationDType(w.type)) != kQK) {
    return false;
  }
  SetUpActivations(w, n_tok, scratch, q);
  return true;
}

void QuantizeActivationColumns(const WeightMatrix& w, const float* x,
                               int64_t ld_x, const QuantizedActivations& q,
                               int64_t c0, int64_t c1, int64_t t0, int64_t t1) {
  if (t1 < 0) t1 = q.n_tok;
  // The rows' bytes, the tables after them (StartActivations' scratch).
  uint8_t* data = const_cast<uint8_t*>(q.data);
  const size_t c0_bytes = DTypeRowBytes(q.type, c0);
  for (int64_t t = t0; t < t1; ++t) {
    QuantizeRow(q.type, x + t * ld_x + c0, data + t * q.row_bytes + c0_bytes,
                c1 - c0);
  }
  if (q.has_tiles) {
    GemmTileActivations unused;
    PrepareGemmTileActivations(w.type, q.data, q.row_bytes, w.cols, q.n_tok,
                               data + q.row_bytes * q.n_tok, &unused, t0, t1,
                               /*quad_layout=*/w.quads != nullptr, c0 / kQK,
                               c1 / kQK);
  }
}

void MatMulRows(const WeightMatrix& w, const QuantizedActivations& xq,
                int64_t r0, int64_t r1, float* y, int64_t ld_y, bool accumulate,
                int64_t prefetch_end) {
  if (w.packed != nullptr && xq.packed_tables != nullptr) {
    PackedGemm(*w.packed, xq.data, xq.row_bytes, xq.packed_tables, xq.n_tok, r0,
               r1, y, ld_y, accumulate);
    return;
  }
  if (w.quads != nullptr) {
    GemmTileQuads(*w.quads, xq.data, xq.row_bytes, r0, r1, xq.n_tok, y, ld_y,
                  accumulate, xq.has_tiles ? &xq.tiles : nullptr, prefetch_end);
    return;
  }
  GemmTile(w.type, static_cast<const uint8_t*>(w.data),
           DTypeRowBytes(w.type, w.cols), xq.data, xq.row_bytes, w.cols, r0, r1,
           xq.n_tok, y, ld_y, accumulate, xq.has_tiles ? &xq.tiles : nullptr,
           prefetch_end);
}

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tok, float* y,
            bool accumulate, ThreadPool* pool, std::vector<uint8_t>* scratch,
            absl::FunctionRef<void(int64_t, int64_t)> before) {
  MatMulQuantized(w, QuantizeActivations(w, x, n_tok, scratch, pool, before), y,
                  accumulate, pool);
}

void MatMulQuantized(const WeightMatrix& w, const QuantizedActivations& xq,
                     float* y, bool accumulate, ThreadPool* pool) {
  // Runs of kPackRows (the packed layout's row groups).
  const int64_t units = (w.rows + kPackRows - 1) / kPackRows;
  auto rows = [&](int64_t u0, int64_t u1, int64_t share_end) {
    MatMulRows(w, xq, u0 * kPackRows, std::min(w.rows, u1 * kPackRows), y,
               w.rows, accumulate, std::min(w.rows, share_end * kPackRows));
  };
  if (pool != nullptr) {
    pool->ParallelRanges(units, kMatMulRunRows / kPackRows, rows);
  } else {
    rows(0, units, units);
  }
}

}  // namespace braid::kernels::cpu
