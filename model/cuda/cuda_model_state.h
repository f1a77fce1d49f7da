// CudaModel's state, shared by its loading (cuda_model_load.cc) and its step
// (cuda_model.cc). Internal to model/cuda.
#ifndef BRAID_MODEL_CUDA_CUDA_MODEL_STATE_H_
#define BRAID_MODEL_CUDA_CUDA_MODEL_STATE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/ops.h"
#include "model/cuda/cuda_model.h"
#include "model/cuda/cuda_plan.h"
#include "model/top_logits.h"

namespace braid::model {

struct CudaModel::State {
  // One layer's device weights: BF16 matrices (pointers into `weights`) and
  // f32 vectors (null when the architecture has none).
  struct Layer {
    const uint16_t* qkv = nullptr;      // [q_dim + 2 kv_dim, n_embd]
    const uint16_t* out = nullptr;      // [n_embd, q_dim]
    const uint16_t* gate_up = nullptr;  // [2 n_ff, n_embd]
    const uint16_t* down = nullptr;     // [n_embd, n_ff]
    const float* attn_norm = nullptr;
    const float* ffn_norm = nullptr;
    const float* qkv_bias = nullptr;  // [q_dim + 2 kv_dim]
    const float* q_norm = nullptr;    // [head_dim]
    const float* k_norm = nullptr;
    const float* post_attn_norm = nullptr;  // [n_embd] (gemma)
    const float* post_ffn_norm = nullptr;
  };

  ~State();

  std::unique_ptr<GgufFile> file;
  LlamaConfig config;
  ModelInfo info;
  CudaPlan plan;
  int device = 0;
  cudaStream_t stream = nullptr;
  kernels::cuda::DeviceBuffer weights;               // every BF16 matrix
  std::vector<kernels::cuda::DeviceBuffer> vectors;  // the f32 vectors
  std::vector<Layer> layers;
  const uint16_t* embd = nullptr;    // [n_vocab, n_embd]
  const uint16_t* output = nullptr;  // [n_vocab, n_embd] (embd when tied)
  const float* output_norm = nullptr;
  const float* rope_freqs = nullptr;   // [n_rot / 2] or null
  const float* stream_embd = nullptr;  // [n_streams, n_embd] or null
  std::unique_ptr<kernels::cuda::GemmPlans> gemm;
  kernels::cuda::DeviceBuffer arena;  // plan.arena_bytes

  // A step's metadata: written on the host into one of two pinned buffers
  // taken in turn, each free once the copy out of it (its event) has run (a
  // lookahead step fills one while the copy of the step before may still
  // wait in the stream), and copied to the device in one transfer. Grown
  // (after the stream has drained) when a step needs more.
  struct MetaBuffers {
    uint8_t* host[2] = {nullptr, nullptr};
    cudaEvent_t copied[2] = {nullptr, nullptr};
    int turn = 0;
    size_t capacity = 0;  // bytes of each
    kernels::cuda::DeviceBuffer device;
  };
  MetaBuffers step_meta;   // eager steps
  MetaBuffers graph_meta;  // decode graphs (they hold its device address)
  // Attention's split partials, sized at load for the device's
  // multiprocessors (kernels/cuda/attention.h).
  kernels::cuda::DeviceBuffer attention_workspace;
  std::vector<int> m_buckets;  // kernels::cuda::GemmBuckets(plan.max_tokens)

  // Decode graphs (cuda_model_graphs.cc): one per (batch bucket, context
  // bucket), captured on first use over the KV cache graphs_kv and
  // graph_meta, whose addresses they hold: dropped when either changes.
  // use_graphs turns false, for good, should a capture fail (graphs_off says
  // why).
  bool use_graphs = false;
  std::string graphs_off;
  std::map<std::pair<int, int>, cudaGraphExec_t> graphs;
  const void* graphs_kv = nullptr;
  int64_t graph_table_capacity = 0;  // block-table entries it holds
  void DropGraphs();

  // Lookahead (SetLookahead): the batch set for the next ForwardTop, and
  // the step started early, with its request, rows and where its
  // reduction lands (staging[pending_staging]).
  std::optional<Batch> ahead;
  struct Pending {
    Batch batch;  // tokens resolved
    TopRequest req;
    int n_rows = 0;
    int staging = 0;
    const void* kv = nullptr;  // the cache it wrote
  };
  std::optional<Pending> pending;
  int64_t lookahead_hits = 0;  // ForwardTop calls a lookahead step answered
  // Pinned host copies of reductions, two taken in turn, each with the
  // event recorded after the copy into it.
  struct Staging {
    int32_t* ids = nullptr;
    float* values = nullptr;
    float* log_z = nullptr;
    int32_t* drawn = nullptr;
    float* drawn_logit = nullptr;
    double* sums = nullptr;
    int64_t entries = 0;  // rows x k they hold
    int64_t rows = 0;
    cudaEvent_t copied = nullptr;
  };
  Staging staging[2];
  // ForwardTop's penalties: the step's rows and entries, here and on the
  // device (grown as needed).
  std::vector<kernels::cuda::CudaRowPenalties> penalty_rows;
  std::vector<kernels::cuda::CudaPenaltyEntry> penalty_entries;
  kernels::cuda::DeviceBuffer penalties;
  int staging_turn = 0;

  template <typename T>
  T* Buffer(CudaBuffer b) const {
    return reinterpret_cast<T*>(arena.as<uint8_t>() + plan.buffer_offset[b]);
  }
};

}  // namespace braid::model

#endif  // BRAID_MODEL_CUDA_CUDA_MODEL_STATE_H_
