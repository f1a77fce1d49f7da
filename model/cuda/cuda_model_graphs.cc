// CudaModel's decode graphs (cuda_model.h has the design): the step's
// metadata in fixed buffers, padded to its bucket, then one graph launch.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "kernels/cuda/gemm_buckets.h"
#include "kernels/cuda/status.h"
#include "model/cuda/cuda_model_state.h"
#include "model/cuda/cuda_model_step.h"
#include "util/status_macros.h"

namespace braid::model {

void CudaModel::State::DropGraphs() {
  for (const auto& [bucket, exec] : graphs) cudaGraphExecDestroy(exec);
  graphs.clear();
  graphs_kv = nullptr;
}

namespace cuda_step {
namespace {

// Larger decode batches gain little from a graph (their launches are a
// small part of the step) and would need as many more captures.
constexpr int kMaxGraphSeqs = 256;
constexpr int kMinGraphContext = 256;

int ContextBucket(int max_ctx) {
  int c = kMinGraphContext;
  while (c < max_ctx) c *= 2;
  return c;
}

// Visible-stream entries a sequence of a graph step may list.
int VisiblePerSeq(const CudaModel::State& s) {
  return std::max(s.config.n_streams, 16);
}

// One token per sequence, few enough sequences, none seeing more streams
// than the layout holds.
bool SuitsGraph(const CudaModel::State& s, const Batch& b) {
  const size_t n = b.tokens.size();
  if (n == 0 || n != b.sequences.size() ||
      n > static_cast<size_t>(std::min(kMaxGraphSeqs, s.plan.max_tokens))) {
    return false;
  }
  for (const BatchSequence& q : b.sequences) {
    if (q.visible_streams.size() > static_cast<size_t>(VisiblePerSeq(s))) {
      return false;
    }
  }
  return true;
}

// The graphs' fixed layout for block tables of up to table_entries.
StepLayout GraphLayoutOf(const CudaModel::State& s, int64_t table_entries) {
  const int max_seqs = std::min(kMaxGraphSeqs, s.plan.max_tokens);
  return GraphLayout(max_seqs, max_seqs * VisiblePerSeq(s), table_entries);
}

// Buffers holding table_entries block-table entries; growing them moves
// them, which drops every graph.
absl::Status EnsureGraphBuffers(CudaModel::State& s, int64_t table_entries) {
  if (s.graph_meta.capacity > 0 && table_entries <= s.graph_table_capacity) {
    return absl::OkStatus();
  }
  s.DropGraphs();
  const int64_t capacity = std::max<int64_t>(
      {table_entries, 2 * s.graph_table_capacity, int64_t{1} << 14});
  BRAID_RETURN_IF_ERROR(EnsureMeta(s, s.graph_meta,
                                   GraphLayoutOf(s, capacity).bytes,
                                   "decode graph metadata"));
  s.graph_table_capacity = capacity;
  return absl::OkStatus();
}

// Rows [n, bucket) of the step: token 0 of stream 0 at y 0, written to the
// scratch slot, in sequences of one token that see nothing; the logits rows
// past the n_out wanted repeat row 0.
void PadToBucket(const StepLayout& l, int n, int n_out, int bucket,
                 int64_t scratch_slot, uint8_t* host) {
  auto* tokens = reinterpret_cast<int32_t*>(host + l.tokens);
  auto* meta = reinterpret_cast<kc::CudaEntryMeta*>(host + l.meta);
  auto* slots = reinterpret_cast<int64_t*>(host + l.slots);
  auto* seqs = reinterpret_cast<kc::CudaAttentionSeq*>(host + l.seqs);
  auto* out_rows = reinterpret_cast<int32_t*>(host + l.out_rows);
  for (int i = n; i < bucket; ++i) {
    tokens[i] = 0;
    meta[i] = {0, 0};
    slots[i] = scratch_slot;
    seqs[i] = {i, 0, 0, 0, 0, 0};
  }
  for (int i = n_out; i < bucket; ++i) out_rows[i] = 0;
}

// Records the step's work (the layers, the vocabulary product of every
// row) into an executable graph.
absl::StatusOr<cudaGraphExec_t> Capture(CudaModel::State& s,
                                        const StepArrays& a,
                                        const CudaKvCache& kv) {
  BRAID_CUDA_RETURN_IF_ERROR(
      cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
  absl::Status st = RunLayers(s, a, kv);
  if (st.ok()) st = ProjectVocab(s, a, a.n);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(s.stream, &graph);
  if (st.ok() && ended != cudaSuccess) {
    st = kernels::cuda::CudaStatus(ended, "cudaStreamEndCapture");
  }
  if (!st.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // a failed capture's error is not the next call's
    return st;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  BRAID_CUDA_RETURN_IF_ERROR(made);
  return exec;
}

}  // namespace

absl::StatusOr<std::optional<int>> RunDecodeGraph(CudaModel::State& s,
                                                  const Batch& b,
                                                  const CudaKvCache& kv,
                                                  const int32_t* device_tokens,
                                                  int token_stride) {
  if (!s.use_graphs || !SuitsGraph(s, b)) return std::nullopt;
  int64_t n_tables = 0;
  for (const BatchSequence& q : b.sequences) n_tables += q.block_table.size();
  BRAID_RETURN_IF_ERROR(EnsureGraphBuffers(s, n_tables));
  if (s.graphs_kv != &kv) {
    s.DropGraphs();
    s.graphs_kv = &kv;
  }
  const StepLayout l = GraphLayoutOf(s, s.graph_table_capacity);
  BRAID_ASSIGN_OR_RETURN(uint8_t * host, NextHostMeta(s.graph_meta));
  const StepShape sh = FillStepMeta(b, l, kv.block_size(), host);
  const int bucket =
      s.m_buckets[kernels::cuda::GemmBucketIndex(sh.n, s.plan.max_tokens)];
  PadToBucket(l, sh.n, sh.n_out, bucket, kv.scratch_slot(), host);
  BRAID_RETURN_IF_ERROR(UploadMeta(
      s.graph_meta,
      l.tables + std::max<int64_t>(sh.table_entries, 1) * sizeof(int32_t),
      s.stream));
  StepArrays a = ArraysAt(s.graph_meta.device.as<uint8_t>(), l);
  BRAID_RETURN_IF_ERROR(
      TokensFromDevice(a, sh.n, device_tokens, token_stride, s.stream));
  a.n = bucket;
  a.n_seq = bucket;
  a.max_seq_tokens = 1;
  a.max_ctx = ContextBucket(sh.max_ctx);
  const std::pair<int, int> key{bucket, a.max_ctx};
  auto it = s.graphs.find(key);
  if (it == s.graphs.end()) {
    absl::StatusOr<cudaGraphExec_t> exec = Capture(s, a, kv);
    if (!exec.ok()) {
      // Eager steps from now on; this one too (its metadata copy is
      // harmless: the eager path has its own buffers).
      s.use_graphs = false;
      s.graphs_off = std::string(exec.status().message());
      s.DropGraphs();
      std::fprintf(stderr,
                   "braidd: CUDA graphs off (decode steps run eagerly): %s\n",
                   s.graphs_off.c_str());
      return std::nullopt;
    }
    it = s.graphs.emplace(key, *exec).first;
  }
  BRAID_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(it->second, s.stream));
  return sh.n_out;
}

}  // namespace cuda_step
}  // namespace braid::model
