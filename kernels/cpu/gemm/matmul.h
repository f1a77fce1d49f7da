// Y = X * W^T for a weight matrix in any supported type and f32 activations.
//
// Design: decode is bound by streaming weights from memory, prefill by
// arithmetic. X is quantized once per call to the weight type's partner
// (Q8_0/Q8_1) into a caller-owned scratch buffer (in parallel over rows when
// there are many); then each task takes a run of output rows and computes
// them for every token with register tiles (gemm_tile.h), so a weight block
// is fetched from memory and unpacked once per call whatever the number of
// tokens. Every output element has the arithmetic of the row dot product
// (dot.h), so results never depend on the batch or the tiling.
//
// Fused epilogues: callers that want one (add residual, SiLU(gate)*up, RoPE)
// run MatMulRows for a run of rows inside their own parallel task and apply
// the epilogue to that tile while it is in cache (see model/llama.cc); MatMul
// itself offers the plain store and the residual add (accumulate).
// Thread-safety: stateless; the scratch buffers and outputs belong to the
// caller.
#ifndef BRAID_KERNELS_CPU_GEMM_MATMUL_H_
#define BRAID_KERNELS_CPU_GEMM_MATMUL_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "kernels/cpu/gemm/gemm_tile.h"
#include "kernels/cpu/gemm/packed_gemm.h"
#include "kernels/cpu/quant/quant.h"
#include "kernels/cpu/thread_pool.h"

namespace braid::kernels::cpu {

// A read-only row-major weight matrix [rows, cols] (ggml ne = {cols, rows}).
struct WeightMatrix {
  DType type = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  // The same weights repacked for the packed kernels (packed_gemm.h) when
  // this CPU and shape allow it (PackWeightMatrix); products then use them.
  std::shared_ptr<const PackedWeights> packed;
  // Or in the quad layout (RepackQuadMatrix, gemm_tile.h): the same
  // arithmetic as the GGUF rows, faster tiles.
  std::shared_ptr<const QuadWeights> quads;

  const uint8_t* Row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + r * DTypeRowBytes(type, cols);
  }
};

// Activations [n_tok, cols] in the type a weight type is dotted against.
struct QuantizedActivations {
  DType type = DType::kF32;  // ActivationDType(weight type)
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;
  int64_t n_tok = 0;
  int64_t cols = 0;
  // The GEMM tiles' tables of these activations, laid out once for every
  // MatMulRows call on them (when has_tiles).
  GemmTileActivations tiles;
  bool has_tiles = false;
  // The packed kernels' tables (packed_gemm.h), when the weight type uses
  // them on this CPU.
  const float* packed_tables = nullptr;
};

// Adds the packed copy of w's weights (w->packed) when CanPackWeights; true
// if it did. The products of w then follow packed_gemm.h's arithmetic.
bool PackWeightMatrix(WeightMatrix* w);

// Adds w's quad layout (w->quads) when CanRepackQuads, on the threads of
// `pool` when given; true if it did.
bool RepackQuadMatrix(WeightMatrix* w, ThreadPool* pool = nullptr);

// Bytes of scratch MatMul needs for n_tok rows against `w`.
size_t MatMulScratchBytes(const WeightMatrix& w, int64_t n_tok);

// Quantizes x [n_tok, w.cols] for w's weight type into *scratch (grown if
// too small), with the tables w's kernels take (packed or tiled); float
// weight types use x in place. pool may be null. The result serves any
// matrix of the same type, packed or repacked the same way (w.packed,
// w.quads or neither).
// Batches of 8+ tokens are split into parallel tasks of token ranges;
// before(t0, t1) runs first in each task (e.g. to compute those rows of x).
QuantizedActivations QuantizeActivations(
    const WeightMatrix& w, const float* x, int64_t n_tok,
    std::vector<uint8_t>* scratch, ThreadPool* pool,
    absl::FunctionRef<void(int64_t, int64_t)> before = [](int64_t, int64_t) {});

// Activations quantized a range of columns at a time by the tasks that
// produce them (each run of an FFN's rows quantizing the blocks it wrote),
// instead of in a pass of their own after them: StartActivations sets *q up
// in *scratch (grown if too small) for n_tok rows against w, writing
// nothing, or returns false where w's kernels need whole rows at once (the
// packed kernels' tables, float weights, Q8_K activations); then
// QuantizeActivationColumns
// for (row and) column ranges that together cover x exactly once, from any
// threads, all finished before a MatMulRows reads *q. The result is
// QuantizeActivations' byte for byte.
bool StartActivations(const WeightMatrix& w, int64_t n_tok,
                      std::vector<uint8_t>* scratch, QuantizedActivations* q);
// Columns [c0, c1) (multiples of 32) of rows [t0, t1) (t1 < 0: q.n_tok) of
// x [q.n_tok, ld_x floats a row] into *q (from StartActivations for w).
void QuantizeActivationColumns(const WeightMatrix& w, const float* x,
                               int64_t ld_x, const QuantizedActivations& q,
                               int64_t c0, int64_t c1, int64_t t0 = 0,
                               int64_t t1 = -1);

// y[t * ld_y + r] (= or +=) for rows [r0, r1) of w and every token of xq
// (xq.type must be ActivationDType(w.type), xq.cols == w.cols). Rows below
// prefetch_end (<= w.rows; when past r1) may be prefetched: the rows this
// thread takes next (GemmTile).
void MatMulRows(const WeightMatrix& w, const QuantizedActivations& xq,
                int64_t r0, int64_t r1, float* y, int64_t ld_y, bool accumulate,
                int64_t prefetch_end = 0);

// How a matrix product's rows are shared by the pool's threads
// (ThreadPool::ParallelRanges): each thread an equal, contiguous share, taken
// in runs of kMatMulRunRows rows from its front with the weights prefetched
// across runs to the share's end, then runs from the back of the others'
// shares. The weight stream restarts only where a thread takes from another
// share, and a thread the OS or the memory system holds back costs only the
// run it holds. Against the previous split (2 tasks a thread: a large one
// each, 80% of the rows together, then the small rest, the stream restarting
// at every task), step-interleaved in process, 3 runs: one stream 1-5%
// faster a step, 4 sequences 3-6%, 8 sequences 2-4%; in braidd (sessions,
// the Python client sharing the 2 cores) 4.0% at 1 token, 4.5% at 4. Runs of
// 512 rows measured the same, 128 rows less for one stream (+-2%), 32 and 64
// rows less again (more restarts).
inline constexpr int64_t kMatMulRunRows = 256;

// y [n_tok, w.rows] (= or +=, see accumulate) from x [n_tok, w.cols].
// Preconditions (checked by callers at model load): w.cols is a multiple of the
// block size of w.type; w.type is not Q8_1. `scratch` grows if too small (so a
// caller that reuses it allocates only on the first, largest call). pool may be
// null. before: as for QuantizeActivations.
void MatMul(
    const WeightMatrix& w, const float* x, int64_t n_tok, float* y,
    bool accumulate, ThreadPool* pool, std::vector<uint8_t>* scratch,
    absl::FunctionRef<void(int64_t, int64_t)> before = [](int64_t, int64_t) {});

// The same on activations already quantized for w (QuantizeActivations or
// StartActivations and QuantizeActivationColumns).
void MatMulQuantized(const WeightMatrix& w, const QuantizedActivations& xq,
                     float* y, bool accumulate, ThreadPool* pool);

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_GEMM_MATMUL_H_
