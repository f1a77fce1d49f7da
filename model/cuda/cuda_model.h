// The CUDA implementation of model::Model (model/model.h): the shared
// Llama-family forward pass (the architectures of model/model_config.h) on
// one GPU, through the same engine, scheduler, sessions and API as the CPU
// model. Nothing above the seam names it but the composition root.
//
// Loading uploads each weight tensor's GGUF bytes as they are and
// dequantizes them on the GPU, in one pass, into BF16 device matrices
// (kernels/cuda/dequant.h; no f32 copy anywhere, on the host or the device);
// Q/K/V and gate/up become one matrix each (cuda_plan.h). cuBLASLt's plans,
// its workspace and the activation arena are made at load for steps of up to
// max_tokens tokens; a step allocates nothing.
//
// A step (Forward): the batch's host metadata (tokens, tags, KV slots,
// sequences, block tables, visible streams, logits rows) goes to the device
// in one copy; then per layer RMSNorm -> Q/K/V product -> the fused Q/K/V
// epilogue (per-head norms, RoPE, the K/V cache write) -> paged attention
// under the visibility rule -> O product adding into the residual stream ->
// RMSNorm -> gate/up product -> gated activation -> down product adding
// into the residual stream; the final norm and the vocabulary product run
// on the logits rows only, which alone come back to the host (ForwardTop:
// only their top k entries and log-sum-exp, reduced on the device).
//
// Decode steps (one token per sequence, up to 256 sequences) replay a CUDA
// graph of the whole step instead (CudaLoadOptions::cuda_graphs): one per
// bucket of batch size (GemmBuckets: the products' own buckets) and of
// longest context (powers of two from 256; attention's split count follows
// it), captured the first time a bucket is met. The batch is padded to its
// bucket with one-token sequences that see nothing and write the KV
// cache's scratch slot; the graph reads the step's metadata from fixed
// device buffers that one copy fills before each replay.
//
// Lookahead (SetLookahead, cuda_model_lookahead.cc): told the next greedy
// step, ForwardTop enqueues it, its tokens copied on the device from this
// step's top-1 ids, before waiting for this step's reduction; the next
// ForwardTop collects it when its batch matches.
//
// Thread-safety: Forward from one thread at a time (the engine thread).
#ifndef BRAID_MODEL_CUDA_CUDA_MODEL_H_
#define BRAID_MODEL_CUDA_CUDA_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/model_config.h"

namespace braid::model {

struct CudaLoadOptions {
  int device = 0;  // CUDA device ordinal (--device=cuda:N)
  // The most tokens one step carries (the engine's max_batch_tokens).
  int max_tokens = 2048;
  // Decode steps (one token per sequence) replay a CUDA graph captured once
  // per batch-size bucket instead of launching every kernel.
  bool cuda_graphs = true;
  // Programmatic dependent launch between the step's kernels (compute
  // capability 9.0 and up; ignored below): each kernel is scheduled while
  // the one before it finishes (kernels/cuda/launch.h). One setting per
  // process: the last load's holds.
  bool dependent_launch = false;
};

class CudaModel : public Model {
 public:
  // Validates the file as the CPU model does (model_config.h), then loads.
  // Errors: those of the config, UNIMPLEMENTED for a tensor type without a
  // device dequantization, FAILED_PRECONDITION without a usable device,
  // RESOURCE_EXHAUSTED when the weights do not fit (naming asked and free).
  static absl::StatusOr<std::unique_ptr<CudaModel>> Load(
      std::unique_ptr<GgufFile> file, const CudaLoadOptions& opts);
  ~CudaModel() override;

  const ModelInfo& info() const override;
  int64_t KvBlockBytes(int block_size) const override;
  // Device K/V of num_blocks blocks. Should the allocation fail (the engine
  // sizes the pool with KvBlocksForFreeMemory first), the cache holds the
  // error and every Forward on it returns it.
  std::unique_ptr<KvCache> NewKvCache(int block_size,
                                      int num_blocks) const override;
  absl::Status Forward(const Batch& batch, KvCache& kv,
                       std::vector<float>* logits) override;
  // The rows reduced on the device; only the reduction is copied back.
  absl::Status ForwardTop(const Batch& batch, KvCache& kv,
                          const TopRequest& req, TopLogits* out) override;
  // Decode lookahead steps through the graphs (cuda_model_lookahead.cc).
  void SetLookahead(const Batch* ahead) override;
  bool ReducesOnDevice() const override { return true; }
  // ForwardTop calls answered by a lookahead step so far.
  int64_t LookaheadHits() const;

  const LlamaConfig& config() const;
  // Blocks of block_size that fit in `fraction` of the device memory free
  // now (after the weights and the arena).
  absl::StatusOr<int> KvBlocksForFreeMemory(int block_size,
                                            double fraction) const;
  // Bytes of BF16 weights on the device.
  int64_t WeightBytes() const;
  // The cudaStream_t every step runs on (benchmarks record events on it).
  void* stream() const;

  // Internal to model/cuda (cuda_model_state.h).
  struct State;

 private:
  explicit CudaModel(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace braid::model

#endif  // BRAID_MODEL_CUDA_CUDA_MODEL_H_
