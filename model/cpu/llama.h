// Llama-family forward pass on the CPU kernels, reading weights straight from a
// GGUF mapping.
//
// LlamaModel owns the GgufFile; weight matrices stay quantized in the mmap
// (only the small norm vectors are copied to f32). Forward runs one engine
// step: any number of sequences over a paged KV pool (one sequence alone is a
// batch of one; model/testing/sequence_runner.h wraps that for tests).
// Scratch buffers are sized for the largest batch seen and reused, so
// steady-state decoding allocates nothing. A step runs row-parallel (each
// section split over the pool) or, for large batches of independent
// decode-sized sequences, data-parallel (data_parallel_steps()). Thread-safety:
// Forward mutates scratch state and must be called from one thread at a time
// (the engine thread); config()/file()/NewPagedKvPool() are safe from any
// thread.
#ifndef BRAID_MODEL_CPU_LLAMA_H_
#define BRAID_MODEL_CPU_LLAMA_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/aligned_vector.h"
#include "kernels/cpu/gemm/matmul.h"
#include "kernels/cpu/thread_pool.h"
#include "model/batch.h"
#include "model/cpu/paged_kv.h"
#include "model/cpu/split_chooser.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/model_config.h"

namespace braid::model {

struct LoadOptions {
  int num_threads = 0;  // 0 = std::thread::hardware_concurrency().
  // How long idle pool workers spin before sleeping (kernels::cpu::ThreadPool).
  int spin_us = 200;
  // Matrix products on weights repacked at load
  // (kernels/cpu/gemm/packed_gemm.h) where the CPU has AVX-512 + VNNI: prompts
  // ~1.6-1.8x and batched decoding ~1.3-1.7x faster end to end
  // (docs/PERFORMANCE.md), the same
  // determinism and batch invariance, but not ggml's float rounding, so
  // logits are not bit-identical to llama.cpp's (see docs/ARCHITECTURE.md).
  // Off: every product has ggml's arithmetic bit for bit.
  bool packed_matmul = false;
};

// The CPU implementation of model::Model (model/model.h).
class LlamaModel : public Model {
 public:
  // Validates the config and every tensor's presence, type and shape
  // (stream_embd.weight, optional, must be [n_streams, n_embd]).
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(
      std::unique_ptr<GgufFile> file, const LoadOptions& opts);

  const LlamaConfig& config() const { return config_; }
  const GgufFile& file() const { return *file_; }

  // Model: the description, a PagedKvPool, Forward (below).
  const ModelInfo& info() const override { return info_; }
  int64_t KvBlockBytes(int block_size) const override;
  std::unique_ptr<KvCache> NewKvCache(int block_size,
                                      int num_blocks) const override;

  // Bytes of the weight matrices one decode step reads (every linear layer
  // and the output projection).
  int64_t WeightBytes() const;

  // What loading made of the file, for the load log: the tensors' types with
  // their counts ("Q5_0 x166, Q8_0 x15, F32 x61"), and the file's tensors
  // the forward pass does not read (none for the architectures braid knows;
  // a file with more, e.g. a vision tower, is served without them).
  std::string DescribeTensorTypes() const;
  std::vector<std::string> UnusedTensors() const;
  // A pool shaped for this model.
  PagedKvPool NewPagedKvPool(int block_size, int num_blocks) const;

  // One step for every sequence of `batch`: writes each token's K/V and
  // metadata into its sequence's slot of `kv` (context index num_cached + i),
  // attends under the visibility rule of docs/MULTISTREAM.md, and writes
  // logits rows [n_rows, n_vocab] in batch order: for each sequence none, its
  // last or all of its tokens (BatchSequence::logits). RoPE uses meta[t].y.
  // A sequence's logits depend only on its own tokens and context, never on
  // the rest of the batch, bit for bit; and they are deterministic.
  // The sequences must partition the tokens in order (sequence i starts where
  // i-1 ended) and must not write the same slot twice.
  // With a stream_embd.weight tensor, row meta[t].stream of it is added to
  // token t's embedding (docs/MULTISTREAM.md).
  // Errors: InvalidArgument (empty batch, sizes that disagree, token id out of
  // range, stream id outside [0, n_streams) when the model has stream_embd,
  // negative y or num_cached, block table too short or with ids
  // outside the pool, pool shaped for another model or a cache that is not
  // a PagedKvPool). On error neither kv nor logits are changed.
  absl::Status Forward(const Batch& batch, KvCache& kv,
                       std::vector<float>* logits) override;

  // Wall time of each part of a step, summed over the steps since profiling
  // was turned on (SetSectionProfile), in seconds: per layer the norm and
  // quantization before Q/K/V, the Q/K/V product (with RoPE and the K/V
  // writes), attention, the O product, the norm and quantization before the
  // FFN, gate/up, down; then the vocabulary projection (with its norm).
  enum Section {
    kNormQkv,
    kQkv,
    kAttention,
    kOut,
    kNormFfn,
    kGateUp,
    kDown,
    kVocab,
    kNumSections
  };
  struct SectionProfile {
    double seconds[kNumSections] = {};
    int64_t steps = 0;
  };
  // Times the parts of every Forward into *profile (null: off, the default;
  // off costs one test per part). For benchmarks (llama_bench --sections).
  void SetSectionProfile(SectionProfile* profile) { profile_ = profile; }
  static const char* SectionName(Section s);

  // Steps run data-parallel so far (for tests and benchmarks). A batch of
  // at least 8 tokens a pool thread, of decode-sized sequences, runs as one
  // part a thread (sequences that see a block another writes in the step,
  // such as a session's streams, in the same part): each thread runs the
  // whole forward pass of its sequences alone, so no data crosses between
  // threads inside the step. At 2-7 tokens a thread it runs so when that has
  // been the faster way lately (SplitChooser). Otherwise every section of
  // the pass is split over the pool (row-parallel). The logits are the same
  // bits either way.
  int64_t data_parallel_steps() const { return data_parallel_steps_; }

 private:
  struct Layer {
    std::vector<float> attn_norm;  // [n_embd]
    std::vector<float> ffn_norm;   // [n_embd]
    // The architecture's optional parts (ArchTraits), empty when absent.
    std::vector<float> bq, bk, bv;                     // [q_dim], [kv_dim] x 2
    std::vector<float> q_norm, k_norm;                 // [head_dim]
    std::vector<float> post_attn_norm, post_ffn_norm;  // [n_embd] (gemma)
    kernels::cpu::WeightMatrix wq, wk, wv, wo;         // [n_out, n_in] each
    kernels::cpu::WeightMatrix w_gate, w_up;           // [n_ff, n_embd]
    kernels::cpu::WeightMatrix w_down;                 // [n_embd, n_ff]
  };

  // Where one Forward reads and writes K/V: layer l's block b starts at
  // k + l * layer_stride + b * block_size * kv_dim (V alike).
  struct KvView {
    uint16_t* k = nullptr;
    uint16_t* v = nullptr;
    int64_t layer_stride = 0;
    int64_t block_size = 0;
    int64_t num_blocks = 0;
    KvEntryMeta* meta = nullptr;
  };

  // Activation buffers for up to `capacity` tokens.
  struct Scratch {
    int capacity = 0;
    // Context entries every pool thread's attention scratch holds
    // (k::ReserveAttentionScratch).
    int64_t attention_ctx = 0;
    // Every pool thread's ReserveLocalInputs has run.
    bool local_inputs_reserved = false;
    // This forward pass's k::PagedKvLayer::view_pass (RunPart).
    uint64_t view_pass = 0;
    kernels::cpu::AlignedVector<float> x;     // [n, n_embd] residual stream
    kernels::cpu::AlignedVector<float> h;     // [n, n_embd] normed input
    kernels::cpu::AlignedVector<float> q;     // [n, n_head * head_dim]
    kernels::cpu::AlignedVector<float> k;     // [n, kv_dim]
    kernels::cpu::AlignedVector<float> v;     // [n, kv_dim]
    kernels::cpu::AlignedVector<float> attn;  // [n, n_head * head_dim]
    kernels::cpu::AlignedVector<float> gate;  // [n, n_ff]
    kernels::cpu::AlignedVector<float> up;    // [n, n_ff]
    std::vector<int32_t> pos;                 // [n]
    std::vector<int32_t> tok_seq;             // [n] sequence of each token
    std::vector<int32_t> out_rows;  // [n] tokens whose logits are wanted
    int n_out = 0;                  // of out_rows (RunPart)
    std::vector<kernels::cpu::PagedAttentionSeq> seqs;  // [n_seq]
    std::vector<float> rope_cs;  // [n, n_rot] RoPE cos/sin per token
    // The sliding layers' table when their RoPE differs (gemma3), or empty.
    std::vector<float> rope_cs_swa;
    std::vector<int64_t> slot;  // [n] pool slot of each token's entry
    // Quantized activations: one buffer per distinct activation type among
    // the matrices that read the same input (Q, K, V; gate, up).
    std::vector<uint8_t> matmul, matmul2, matmul3;
  };

  // Where one forward pass runs: the pool its sections split over, its
  // scratch, and where its sections are timed (null: not timed).
  struct Exec {
    kernels::cpu::ThreadPool* pool = nullptr;
    Scratch* scratch = nullptr;
    SectionProfile* profile = nullptr;
  };
  // The batch's sequences [s0, s1), whose tokens are [t0, t1) and whose
  // logits rows start at row `row`.
  struct Part {
    int s0 = 0, s1 = 0, t0 = 0, t1 = 0, row = 0;
  };
  // One part of a data-parallel step (SplitBatch): run by one pool thread
  // alone, on its own scratch.
  struct PartExec {
    std::unique_ptr<kernels::cpu::ThreadPool> serial;  // one thread: inline
    Scratch scratch;
    SectionProfile profile;
  };

  LlamaModel(std::unique_ptr<GgufFile> file, LlamaConfig config,
             const LoadOptions& opts);
  absl::Status BindWeights();
  absl::Status BindLayer(int il);  // layers_[il]'s tensors, repacked
  // Fills info_ from the config and the file.
  void DescribeInfo();
  void EnsureScratch(Scratch& s, int n);
  absl::Status ValidateBatch(const Batch& batch, const KvView& kv) const;
  // Runs a validated batch: row-parallel (every section split over the
  // pool), or data-parallel where SplitBatch finds parts.
  void ForwardBatch(const Batch& batch, const KvView& kv,
                    std::vector<float>* logits);
  // Parts for a data-parallel step, one per pool thread, into parts_: false
  // when the batch should run row-parallel. *measured: the parts' tokens are
  // too few to say which way is faster (split_chooser_ decides).
  bool SplitBatch(const Batch& batch, const KvView& kv, bool* measured);
  // Runs parts_ (SplitBatch) side by side, one a pool thread.
  void RunParts(const Batch& batch, const KvView& kv, float* logits);
  // Fills reach_ for SplitBatch (llama_step.cc).
  void MarkMeetings(const Batch& batch, const KvView& kv);
  // The forward pass of one part of the batch, its logits rows into logits;
  // with logits null, up to the final residual stream (exec.scratch's x, the
  // wanted rows in its out_rows[0, n_out)).
  void RunPart(const Batch& batch, const Part& part, const KvView& kv,
               const Exec& exec, float* logits);
  // RunPart's parts before the layers: the part's sequences into the
  // scratch's attention table, token slots and logits rows (returns how
  // many; *max_ctx the longest context); each token's embedding; the
  // attention scratch for max_ctx on the threads that will run it.
  int IndexPart(const Batch& batch, const Part& part, const KvView& kv,
                Scratch& s, int64_t* max_ctx) const;
  void EmbedPart(const Batch& batch, const Part& part, Scratch& s) const;
  void ReserveForPart(const Exec& exec, int64_t max_ctx);
  // The final norm and vocabulary projection of n_out rows of the residual
  // stream x (rows[i], or row i with rows null) into logits [n_out, n_vocab].
  void ProjectVocab(const float* x, const int32_t* rows, int n_out,
                    const Exec& exec, float* logits);
  void RunLayer(int il, const KvEntryMeta* meta, int n, const KvView& kv,
                const Exec& exec);
  // Section timing (SetSectionProfile): Mark(part) adds the time since the
  // last mark to `part`.
  class SectionClock {
   public:
    explicit SectionClock(SectionProfile* profile);
    void Mark(Section part);

   private:
    SectionProfile* const profile_;
    std::chrono::steady_clock::time_point last_;
  };
  // RunLayer's three sections, in order.
  void RunQkv(int il, int n, const KvView& kv, const Exec& exec,
              SectionClock& clock);
  // The epilogue of n tokens' Q or K rows [a, b) (whole heads where the
  // rope or the per-head norms need them) in `out` (row stride ld): bias,
  // per-head norm, RoPE with `rope_cs`, and the scale when > 0 (Q).
  void QkEpilogue(float* out, int64_t ld, int n, int64_t a, int64_t b,
                  const std::vector<float>& bias,
                  const std::vector<float>& norm, float scale,
                  const float* rope_cs) const;
  void RunAttentionOut(int il, const KvEntryMeta* meta, int n, const KvView& kv,
                       const Exec& exec, SectionClock& clock);
  void RunFfn(int il, int n, const Exec& exec, SectionClock& clock);
  // x += w * input (RunAttentionOut's O projection, RunFfn's down
  // projection), through RmsNorm(.) * post_norm when the layer has one.
  void AddToResidual(const kernels::cpu::WeightMatrix& w,
                     const kernels::cpu::QuantizedActivations* in,
                     const float* input, const std::vector<float>& post_norm,
                     int n, const Exec& exec);
  // Quantizes h = RmsNorm(x) * weight [n, ws[i]->cols] (into scratch h)
  // once per distinct activation type (and packing) of ws into out[i] for
  // ws[i]; the norm runs in the first quantization's parallel tasks.
  void NormQuantizeFor(const float* x, const float* weight, int n,
                       const kernels::cpu::WeightMatrix* const* ws, int count,
                       kernels::cpu::QuantizedActivations* out,
                       const Exec& exec);
  // The most scratch any product of the model needs for n tokens
  // (k::MatMulScratchBytes).
  size_t MatMulScratchBytes(int n) const;
  // NormQuantizeFor's work into h and bufs[0..count) on `pool` (or the
  // calling thread when null).
  void NormQuantizeInto(const float* x, const float* weight, int n,
                        const kernels::cpu::WeightMatrix* const* ws, int count,
                        kernels::cpu::QuantizedActivations* out, float* h,
                        std::vector<uint8_t>* const* bufs,
                        kernels::cpu::ThreadPool* pool) const;
  // Steps of up to kLocalInputTokens tokens on two or more threads: the
  // inputs of a layer's Q/K/V (slot 0) and gate/up (slot 1) products are
  // normed and quantized by every thread for itself, into its own buffers,
  // on its first run of section `id` (each section a new id), instead of
  // by one thread in a serial section before the product: the other
  // threads no longer wait, and no thread writes lines another holds.
  // Same operations, same bits, a little less time a step
  // (docs/perf-log/code-notes.md).
  static constexpr int kLocalInputTokens = 4;
  const kernels::cpu::QuantizedActivations* LocalInputsFor(
      int slot, uint64_t id, const float* x, const float* weight, int n,
      const kernels::cpu::WeightMatrix* const* ws, int count) const;
  // Sizes the calling thread's LocalInputsFor buffers for
  // kLocalInputTokens tokens (run on every pool thread before the steps
  // use them, so the step loop allocates nothing).
  void ReserveLocalInputs() const;

  std::unique_ptr<GgufFile> file_;
  LlamaConfig config_;
  ModelInfo info_;
  SectionProfile* profile_ = nullptr;
  kernels::cpu::ThreadPool pool_;
  const bool packed_matmul_;               // LoadOptions::packed_matmul
  kernels::cpu::WeightMatrix token_embd_;  // [n_vocab, n_embd]
  kernels::cpu::WeightMatrix output_;      // [n_vocab, n_embd]
  std::vector<float> output_norm_;         // [n_embd]
  // rope_freqs.weight (Llama 3.x): [n_rot / 2] or empty.
  std::vector<float> rope_freqs_;
  // The tensors BindWeights read (UnusedTensors).
  absl::flat_hash_set<std::string> read_tensors_;
  // Optional stream_embd.weight, dequantized: [n_streams, n_embd] or empty.
  std::vector<float> stream_embd_;
  std::vector<Layer> layers_;
  Scratch scratch_;
  // Data-parallel steps: per pool thread its part's execution, the parts of
  // the current step, per pool block the head of its list of the sequences
  // writing it this step (an index into writes_; -1: none), and per
  // sequence how far the sequences it meets reach (SplitBatch).
  struct Write {
    int32_t seq;
    int32_t next;  // the block's next writer in writes_, or -1
  };
  std::vector<PartExec> part_execs_;
  std::vector<Part> parts_;
  std::vector<int32_t> block_writer_;
  std::vector<Write> writes_;
  std::vector<int32_t> reach_;
  // The batch's entry tags in the pool's type (ForwardBatch).
  std::vector<KvEntryMeta> metas_;
  int64_t data_parallel_steps_ = 0;
  SplitChooser split_chooser_;
};

}  // namespace braid::model

#endif  // BRAID_MODEL_CPU_LLAMA_H_
