// The pieces of CudaModel's step shared by its eager path (cuda_model.cc)
// and its decode graphs (cuda_model_graphs.cc): the device KV cache, the
// step's metadata layout and arrays, and the passes over the layers.
// Internal to model/cuda.
#ifndef BRAID_MODEL_CUDA_CUDA_MODEL_STEP_H_
#define BRAID_MODEL_CUDA_CUDA_MODEL_STEP_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/attention_launch.h"
#include "kernels/cuda/attention_rule.h"
#include "kernels/cuda/device_memory.h"
#include "model/batch.h"
#include "model/cuda/cuda_model_state.h"
#include "model/model.h"

namespace braid::model::cuda_step {

namespace kc = ::braid::kernels::cuda;

// The device KV pool: per layer K and V [entries + 1, kv_dim] fp16
// (model/cpu/paged_kv.h's layout, entries = num_blocks * block_size), the
// entries' tags [entries + 1]. The last entry, outside every block, is the
// scratch slot where a decode graph's padding rows write.
class CudaKvCache : public KvCache {
 public:
  CudaKvCache(const CudaModel::State* owner, int block_size, int num_blocks);

  int block_size() const override { return block_size_; }
  int num_blocks() const override { return num_blocks_; }
  int64_t bytes() const override {
    return k_.bytes() + v_.bytes() + meta_.bytes();
  }

  const CudaModel::State* owner() const { return owner_; }
  const absl::Status& status() const { return status_; }
  int64_t scratch_slot() const { return int64_t{block_size_} * num_blocks_; }
  // Layer il's K and V.
  uint16_t* k(int il) const { return k_.as<uint16_t>() + il * layer_elems(); }
  uint16_t* v(int il) const { return v_.as<uint16_t>() + il * layer_elems(); }
  kc::CudaEntryMeta* meta() const { return meta_.as<kc::CudaEntryMeta>(); }

 private:
  int64_t layer_elems() const {
    return (scratch_slot() + 1) * owner_->config.kv_dim();
  }
  absl::Status Allocate(int64_t kv_bytes, int64_t meta_bytes);

  const CudaModel::State* owner_;
  int block_size_, num_blocks_;
  kc::DeviceBuffer k_, v_, meta_;
  absl::Status status_;
};

// Byte offsets of a step's metadata arrays in one host (pinned) and one
// device buffer; the block tables come last.
struct StepLayout {
  size_t tokens = 0, meta = 0, slots = 0, seqs = 0, visible = 0, out_rows = 0,
         tables = 0, bytes = 0;
};

// The compact layout of batch `b`.
StepLayout LayoutFor(const Batch& b);
// The fixed layout of the decode graphs: max_seqs tokens and sequences, up
// to max_visible visible-stream entries and table_entries block-table
// entries.
StepLayout GraphLayout(int max_seqs, int max_visible, int64_t table_entries);

// What one step's host side worked out: rows of logits wanted, the longest
// context and query run (attention's launch bounds) and the block-table
// entries written.
struct StepShape {
  int n = 0, n_out = 0, max_ctx = 0, max_seq_tokens = 0;
  int64_t table_entries = 0;
};

// Fills the host metadata of batch `b` at layout l (slots in a pool of
// block_size blocks) and returns its shape.
StepShape FillStepMeta(const Batch& b, const StepLayout& l, int block_size,
                       uint8_t* host);

// The step's device arrays and bounds.
struct StepArrays {
  const int32_t* tokens = nullptr;             // [n]
  const kc::CudaEntryMeta* meta = nullptr;     // [n]
  const int64_t* slots = nullptr;              // [n] pool slot of each entry
  const kc::CudaAttentionSeq* seqs = nullptr;  // [n_seq]
  const int32_t* tables = nullptr;
  const int32_t* visible = nullptr;
  const int32_t* out_rows = nullptr;  // [n_out] rows whose logits are wanted
  int n = 0, n_seq = 0, max_ctx = 0, max_seq_tokens = 0;
};

// The arrays of layout l in the device buffer at `device`.
StepArrays ArraysAt(const uint8_t* device, const StepLayout& l);

// Buffers m of at least `bytes` each (grown once the stream has drained).
absl::Status EnsureMeta(CudaModel::State& s, CudaModel::State::MetaBuffers& m,
                        size_t bytes, const char* what);
// m's next host buffer, once the copy out of it has run: fill it, then
// UploadMeta copies `bytes` of it to m.device on `stream`.
absl::StatusOr<uint8_t*> NextHostMeta(CudaModel::State::MetaBuffers& m);
absl::Status UploadMeta(CudaModel::State::MetaBuffers& m, size_t bytes,
                        cudaStream_t stream);
// With device_tokens: a.tokens[i] = device_tokens[i * token_stride] for
// i < n, on the device (a lookahead step's tokens: the step before's top-1
// ids, never seen by the host).
absl::Status TokensFromDevice(const StepArrays& a, int n,
                              const int32_t* device_tokens, int token_stride,
                              cudaStream_t stream);

// Embeddings, then every layer: the residual stream of the step in kX.
absl::Status RunLayers(CudaModel::State& s, const StepArrays& a,
                       const CudaKvCache& kv);
// The final norm and the vocabulary product of n_out rows (a.out_rows) into
// kLogits [n_out, n_vocab].
absl::Status ProjectVocab(CudaModel::State& s, const StepArrays& a, int n_out);

// The CUDA cache of this model behind `cache`, or InvalidArgument.
absl::StatusOr<CudaKvCache*> KvOf(const CudaModel::State& s, KvCache& cache);
// Checks and runs one step (eager or through a graph): returns its logits
// rows, in kLogits.
absl::StatusOr<int> RunStep(CudaModel::State& s, const Batch& batch,
                            KvCache& cache);
// An eager step (every kernel launched), checks done; tokens as
// TokensFromDevice says. Returns its logits rows, in kLogits.
absl::StatusOr<int> RunEager(CudaModel::State& s, const Batch& batch,
                             const CudaKvCache& kv,
                             const int32_t* device_tokens = nullptr,
                             int token_stride = 0);
// Forgets the lookahead set and any lookahead step started, once that step
// has finished on the device.
absl::Status DropLookahead(CudaModel::State& s);

// A decode step (one token per sequence) through a graph of its bucket
// (cuda_model_graphs.cc): returns its logits rows in kLogits, or nullopt
// when the step does not suit a graph or a capture failed (graphs are then
// off for good) and the eager path must run it. With device_tokens, token
// i is device_tokens[i * token_stride] instead of b's (a lookahead step's
// tokens, the step before's top-1 ids, never seen by the host).
absl::StatusOr<std::optional<int>> RunDecodeGraph(
    CudaModel::State& s, const Batch& b, const CudaKvCache& kv,
    const int32_t* device_tokens = nullptr, int token_stride = 0);

}  // namespace braid::model::cuda_step

#endif  // BRAID_MODEL_CUDA_CUDA_MODEL_STEP_H_
