// CudaModel::ForwardTop and its lookahead (model/model.h's SetLookahead):
// the step's rows reduced on the device and copied into pinned staging;
// when the caller told the next step, that step is enqueued (through its
// decode graph, or eagerly), its tokens copied on the device from this
// step's top-1 ids, before the host waits for this step's reduction, so the
// device goes from one step to the next without waiting for the host.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/cuda/draw.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/status.h"
#include "kernels/cuda/topk.h"
#include "model/batch_check.h"
#include "model/cuda/cuda_model.h"
#include "model/cuda/cuda_model_state.h"
#include "model/cuda/cuda_model_step.h"
#include "model/lookahead.h"
#include "util/status_macros.h"

namespace braid::model {
namespace cuda_step {
namespace {

using Staging = CudaModel::State::Staging;

// Pinned room for rows x k entries (and rows log-sum-exps and draws), once
// the last copy into it is done.
absl::Status EnsureStaging(Staging& g, int64_t rows, int k) {
  BRAID_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(g.copied));
  const int64_t entries = rows * k;
  if (entries <= g.entries && rows <= g.rows) return absl::OkStatus();
  const int64_t new_entries = std::max(entries, 2 * g.entries);
  const int64_t new_rows = std::max(rows, 2 * g.rows);
  for (void* p :
       {static_cast<void*>(g.ids), static_cast<void*>(g.values),
        static_cast<void*>(g.log_z), static_cast<void*>(g.drawn),
        static_cast<void*>(g.drawn_logit), static_cast<void*>(g.sums)}) {
    if (p != nullptr) cudaFreeHost(p);
  }
  const cudaEvent_t copied = g.copied;
  g = Staging();
  g.copied = copied;
  auto alloc = [](auto** p, int64_t n) {
    return cudaHostAlloc(reinterpret_cast<void**>(p), n * sizeof(**p),
                         cudaHostAllocDefault);
  };
  BRAID_CUDA_RETURN_IF_ERROR(alloc(&g.ids, new_entries));
  BRAID_CUDA_RETURN_IF_ERROR(alloc(&g.values, new_entries));
  BRAID_CUDA_RETURN_IF_ERROR(alloc(&g.log_z, new_rows));
  BRAID_CUDA_RETURN_IF_ERROR(alloc(&g.drawn, new_rows));
  BRAID_CUDA_RETURN_IF_ERROR(alloc(&g.drawn_logit, new_rows));
  BRAID_CUDA_RETURN_IF_ERROR(alloc(&g.sums, new_rows));
  g.entries = new_entries;
  g.rows = new_rows;
  return absl::OkStatus();
}

// The rows' draws (req.draws, one per row) on the device into kDrawn,
// kDrawnLogit and kDrawSums, copied into g.
absl::Status DrawIntoStaging(CudaModel::State& s, int n_rows,
                             const TopRequest& req, Staging& g) {
  static_assert(sizeof(RowDraw) == sizeof(kernels::cuda::CudaRowDraw) &&
                offsetof(RowDraw, u) ==
                    offsetof(kernels::cuda::CudaRowDraw, u));
  auto* draws = s.Buffer<kernels::cuda::CudaRowDraw>(kDraws);
  int32_t* drawn = s.Buffer<int32_t>(kDrawn);
  float* drawn_logit = s.Buffer<float>(kDrawnLogit);
  double* sums = s.Buffer<double>(kDrawSums);
  // From pageable memory: the copy has read it when the call returns.
  BRAID_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(draws, req.draws.data(),
                                             n_rows * sizeof(RowDraw),
                                             cudaMemcpyHostToDevice, s.stream));
  BRAID_RETURN_IF_ERROR(kernels::cuda::DrawRows(
      s.Buffer<float>(kLogits), n_rows, s.config.n_vocab, draws, drawn,
      drawn_logit, sums, s.stream));
  BRAID_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(g.drawn, drawn,
                                             n_rows * sizeof(int32_t),
                                             cudaMemcpyDeviceToHost, s.stream));
  BRAID_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(g.drawn_logit, drawn_logit,
                                             n_rows * sizeof(float),
                                             cudaMemcpyDeviceToHost, s.stream));
  BRAID_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      g.sums, sums, n_rows * sizeof(double), cudaMemcpyDeviceToHost, s.stream));
  return absl::OkStatus();
}

// req.penalties (one per row) applied to kLogits' n_rows rows in place.
absl::Status PenalizeRows(CudaModel::State& s, int n_rows,
                          const TopRequest& req) {
  namespace kc = kernels::cuda;
  s.penalty_rows.clear();
  s.penalty_entries.clear();
  for (int r = 0; r < n_rows; ++r) {
    const RowPenalties& p = req.penalties[r];
    const int32_t begin = static_cast<int32_t>(s.penalty_entries.size());
    for (size_t i = 0; i < p.ids.size(); ++i) {
      s.penalty_entries.push_back({p.ids[i], p.output_counts[i]});
    }
    s.penalty_rows.push_back({p.repetition, p.frequency, p.presence, begin,
                              static_cast<int32_t>(s.penalty_entries.size())});
  }
  const size_t row_bytes =
      (n_rows * sizeof(kc::CudaRowPenalties) + 255) / 256 * 256;
  const size_t bytes =
      row_bytes + s.penalty_entries.size() * sizeof(kc::CudaPenaltyEntry);
  if (bytes > s.penalties.bytes()) {
    const size_t grown = std::max(bytes, 2 * s.penalties.bytes());
    // Freeing the old buffer waits for the steps that read it.
    s.penalties = kc::DeviceBuffer();
    BRAID_ASSIGN_OR_RETURN(s.penalties,
                           kc::DeviceBuffer::Allocate(grown, "penalties"));
  }
  auto* rows = s.penalties.as<kc::CudaRowPenalties>();
  auto* entries = reinterpret_cast<kc::CudaPenaltyEntry*>(
      static_cast<char*>(s.penalties.data()) + row_bytes);
  // From pageable memory: the copies have read it when the calls return.
  BRAID_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      rows, s.penalty_rows.data(), n_rows * sizeof(kc::CudaRowPenalties),
      cudaMemcpyHostToDevice, s.stream));
  BRAID_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(entries, s.penalty_entries.data(),
                      s.penalty_entries.size() * sizeof(kc::CudaPenaltyEntry),
                      cudaMemcpyHostToDevice, s.stream));
  BRAID_CUDA_RETURN_IF_ERROR(kc::ApplyPenalties(s.Buffer<float>(kLogits),
                                                n_rows, s.config.n_vocab, rows,
                                                entries, s.stream));
  return absl::OkStatus();
}

// Enqueues the reduction of kLogits' n_rows rows and its copy into the
// next staging buffer; returns which.
absl::StatusOr<int> ReduceIntoStaging(CudaModel::State& s, int n_rows,
                                      const TopRequest& req) {
  const int turn = s.staging_turn;
  s.staging_turn ^= 1;
  Staging& g = s.staging[turn];
  BRAID_RETURN_IF_ERROR(EnsureStaging(g, std::max(n_rows, 1), req.k));
  if (n_rows == 0) {
    // Collect still waits for the step: its metadata's pinned buffer is
    // free to fill again only once the step's copy out of it has run.
    BRAID_CUDA_RETURN_IF_ERROR(cudaEventRecord(g.copied, s.stream));
    return turn;
  }
  if (!req.penalties.empty()) {
    BRAID_RETURN_IF_ERROR(PenalizeRows(s, n_rows, req));
  }
  int32_t* ids = s.Buffer<int32_t>(kTopIds);
  float* values = s.Buffer<float>(kTopValues);
  float* log_z = s.Buffer<float>(kLogZ);
  BRAID_RETURN_IF_ERROR(kernels::cuda::TopKLogits(
      s.Buffer<float>(kLogits), n_rows, s.config.n_vocab, req.k, ids, values,
      log_z, s.stream));
  const size_t entries = static_cast<size_t>(n_rows) * req.k;
  auto copy = [&s](void* dst, const void* src, size_t bytes) {
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s.stream);
  };
  BRAID_CUDA_RETURN_IF_ERROR(copy(g.ids, ids, entries * sizeof(int32_t)));
  BRAID_CUDA_RETURN_IF_ERROR(copy(g.values, values, entries * sizeof(float)));
  if (req.log_z) {
    BRAID_CUDA_RETURN_IF_ERROR(copy(g.log_z, log_z, n_rows * sizeof(float)));
  }
  if (!req.draws.empty()) {
    BRAID_RETURN_IF_ERROR(DrawIntoStaging(s, n_rows, req, g));
  }
  BRAID_CUDA_RETURN_IF_ERROR(cudaEventRecord(g.copied, s.stream));
  return turn;
}

// Waits for staging buffer `turn` (n_rows rows of req) and puts its rows
// `rows` (all when null) into *out.
absl::Status Collect(CudaModel::State& s, int turn, int n_rows,
                     const TopRequest& req, const std::vector<int>* rows,
                     TopLogits* out) {
  const Staging& g = s.staging[turn];
  BRAID_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(g.copied));
  const size_t entries = static_cast<size_t>(n_rows) * req.k;
  if (rows == nullptr) {
    const int n_drawn = req.draws.empty() ? 0 : n_rows;
    out->k = req.k;
    out->ids.assign(g.ids, g.ids + entries);
    out->values.assign(g.values, g.values + entries);
    out->log_z.assign(g.log_z, g.log_z + (req.log_z ? n_rows : 0));
    out->drawn.assign(g.drawn, g.drawn + n_drawn);
    out->drawn_logit.assign(g.drawn_logit, g.drawn_logit + n_drawn);
    out->sums.assign(g.sums, g.sums + n_drawn);
    return absl::OkStatus();
  }
  TopLogits all;
  all.k = req.k;
  all.ids.assign(g.ids, g.ids + entries);
  all.values.assign(g.values, g.values + entries);
  all.log_z.assign(g.log_z, g.log_z + (req.log_z ? n_rows : 0));
  SelectRows(all, *rows, out);
  return absl::OkStatus();
}

// Starts `ahead` (its tokens row i's top-1 ids of the n_rows rows just
// reduced into kTopIds): through its decode graph, or eagerly when it does
// not suit one; when its placeholders name rows 0, 1, ... in order and the
// model accepts it once resolved. Returns whether it started.
absl::StatusOr<bool> StartAhead(CudaModel::State& s, const Batch& ahead,
                                int n_rows, const TopRequest& req,
                                const CudaKvCache& kv) {
  if (!req.draws.empty() || !req.penalties.empty() ||
      !CheckAhead(ahead, n_rows).ok() ||
      static_cast<int>(ahead.tokens.size()) > s.plan.max_tokens) {
    return false;
  }
  Batch check = ahead;
  for (size_t i = 0; i < check.tokens.size(); ++i) {
    if (check.tokens[i] != AheadToken(static_cast<int>(i))) return false;
    check.tokens[i] = 0;
  }
  const LlamaConfig& c = s.config;
  if (!CheckBatch(check, BatchLimits{c.n_vocab,
                                     s.stream_embd != nullptr ? c.n_streams : 0,
                                     kv.block_size(), kv.num_blocks()})
           .ok()) {
    return false;
  }
  const int32_t* top1 = s.Buffer<int32_t>(kTopIds);
  BRAID_ASSIGN_OR_RETURN(std::optional<int> rows,
                         RunDecodeGraph(s, check, kv, top1, req.k));
  if (!rows.has_value()) {
    BRAID_ASSIGN_OR_RETURN(rows, RunEager(s, check, kv, top1, req.k));
  }
  BRAID_ASSIGN_OR_RETURN(const int turn, ReduceIntoStaging(s, *rows, req));
  s.pending = CudaModel::State::Pending{Batch(), req, *rows, turn, &kv};
  return true;
}

bool Identity(const std::vector<int>& rows, int n) {
  if (static_cast<int>(rows.size()) != n) return false;
  for (int i = 0; i < n; ++i) {
    if (rows[i] != i) return false;
  }
  return true;
}

}  // namespace
}  // namespace cuda_step

void CudaModel::SetLookahead(const Batch* ahead) {
  s_->ahead.reset();
  if (ahead != nullptr) s_->ahead = *ahead;
}

int64_t CudaModel::LookaheadHits() const { return s_->lookahead_hits; }

absl::Status CudaModel::ForwardTop(const Batch& batch, KvCache& cache,
                                   const TopRequest& req, TopLogits* out) {
  namespace cs = cuda_step;
  State& s = *s_;
  BRAID_RETURN_IF_ERROR(CheckTopRequest(req, s.config.n_vocab));
  BRAID_ASSIGN_OR_RETURN(cs::CudaKvCache * kv, cs::KvOf(s, cache));
  std::optional<Batch> ahead = std::move(s.ahead);
  s.ahead.reset();
  // This step may be the lookahead step already running.
  std::optional<std::vector<int>> rows;
  int turn = 0, n_rows = 0;
  if (s.pending.has_value() && s.pending->kv == kv && req.draws.empty() &&
      req.penalties.empty() && s.pending->req.k == req.k &&
      s.pending->req.log_z == req.log_z) {
    rows = MatchAhead(s.pending->batch, batch);
  }
  if (rows.has_value()) {
    turn = s.pending->staging;
    n_rows = s.pending->n_rows;
    s.pending.reset();
    ++s.lookahead_hits;
  } else {
    BRAID_RETURN_IF_ERROR(cs::DropLookahead(s));
    BRAID_ASSIGN_OR_RETURN(n_rows, cs::RunStep(s, batch, cache));
    BRAID_RETURN_IF_ERROR(CheckTopRequest(req, s.config.n_vocab, n_rows));
    BRAID_ASSIGN_OR_RETURN(turn, cs::ReduceIntoStaging(s, n_rows, req));
  }
  // The next step goes into the stream before the host waits for this
  // one's rows (when every row of this step is an output row: a lookahead
  // step's placeholders name output rows, its tokens device rows).
  bool started = false;
  if (ahead.has_value() && (!rows.has_value() || cs::Identity(*rows, n_rows))) {
    BRAID_ASSIGN_OR_RETURN(started,
                           cs::StartAhead(s, *ahead, n_rows, req, *kv));
  }
  BRAID_RETURN_IF_ERROR(cs::Collect(s, turn, n_rows, req,
                                    rows.has_value() ? &*rows : nullptr, out));
  if (started) s.pending->batch = ResolveAhead(*ahead, *out);
  return absl::OkStatus();
}

}  // namespace braid::model
