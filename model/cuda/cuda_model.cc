// CudaModel's step (the forward pass over a batch) and its KV cache: the
// eager path, which every step can take; decode steps replay graphs
// (cuda_model_graphs.cc). Loading is cuda_model_load.cc.
#include "model/cuda/cuda_model.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/status.h"
#include "kernels/cuda/topk.h"
#include "model/batch_check.h"
#include "model/cuda/cuda_model_state.h"
#include "model/cuda/cuda_model_step.h"
#include "util/status_macros.h"

namespace braid::model {
namespace cuda_step {

CudaKvCache::CudaKvCache(const CudaModel::State* owner, int block_size,
                         int num_blocks)
    : owner_(owner), block_size_(block_size), num_blocks_(num_blocks) {
  const int64_t entries = scratch_slot() + 1;
  const int64_t kv = entries * owner->config.kv_dim() * owner->config.n_layer *
                     sizeof(uint16_t);
  status_ = Allocate(kv, entries * sizeof(kc::CudaEntryMeta));
}

absl::Status CudaKvCache::Allocate(int64_t kv_bytes, int64_t meta_bytes) {
  BRAID_ASSIGN_OR_RETURN(k_, kc::DeviceBuffer::Allocate(kv_bytes, "KV pool K"));
  BRAID_ASSIGN_OR_RETURN(v_, kc::DeviceBuffer::Allocate(kv_bytes, "KV pool V"));
  BRAID_ASSIGN_OR_RETURN(meta_,
                         kc::DeviceBuffer::Allocate(meta_bytes, "KV tags"));
  // Attention weighs masked entries by 0: they must hold finite values.
  BRAID_CUDA_RETURN_IF_ERROR(cudaMemset(k_.data(), 0, kv_bytes));
  BRAID_CUDA_RETURN_IF_ERROR(cudaMemset(v_.data(), 0, kv_bytes));
  BRAID_CUDA_RETURN_IF_ERROR(cudaMemset(meta_.data(), 0, meta_bytes));
  return absl::OkStatus();
}

namespace {

size_t Align(size_t v) { return (v + 255) / 256 * 256; }

// Consecutive 256-byte aligned arrays of n_tokens tokens, n_seqs sequences,
// n_visible visible-stream and n_tables block-table entries.
StepLayout Layout(size_t n_tokens, size_t n_seqs, size_t n_visible,
                  size_t n_tables) {
  StepLayout l;
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t off = at;
    at = Align(at + bytes);
    return off;
  };
  l.tokens = take(n_tokens * sizeof(int32_t));
  l.meta = take(n_tokens * sizeof(kc::CudaEntryMeta));
  l.slots = take(n_tokens * sizeof(int64_t));
  l.seqs = take(n_seqs * sizeof(kc::CudaAttentionSeq));
  l.visible = take(std::max<size_t>(n_visible, 1) * sizeof(int32_t));
  l.out_rows = take(n_tokens * sizeof(int32_t));
  l.tables = take(std::max<size_t>(n_tables, 1) * sizeof(int32_t));
  l.bytes = at;
  return l;
}

}  // namespace

StepLayout LayoutFor(const Batch& b) {
  size_t n_tables = 0, n_visible = 0;
  for (const BatchSequence& q : b.sequences) {
    n_tables += q.block_table.size();
    n_visible += q.visible_streams.size();
  }
  return Layout(b.tokens.size(), b.sequences.size(), n_visible, n_tables);
}

StepLayout GraphLayout(int max_seqs, int max_visible, int64_t table_entries) {
  return Layout(max_seqs, max_seqs, max_visible, table_entries);
}

StepShape FillStepMeta(const Batch& b, const StepLayout& l, int block_size,
                       uint8_t* host) {
  StepShape sh;
  sh.n = static_cast<int>(b.tokens.size());
  std::memcpy(host + l.tokens, b.tokens.data(), sh.n * sizeof(int32_t));
  auto* meta = reinterpret_cast<kc::CudaEntryMeta*>(host + l.meta);
  for (int t = 0; t < sh.n; ++t) meta[t] = {b.meta[t].stream, b.meta[t].y};
  auto* slots = reinterpret_cast<int64_t*>(host + l.slots);
  auto* seqs = reinterpret_cast<kc::CudaAttentionSeq*>(host + l.seqs);
  auto* tables = reinterpret_cast<int32_t*>(host + l.tables);
  auto* visible = reinterpret_cast<int32_t*>(host + l.visible);
  auto* out_rows = reinterpret_cast<int32_t*>(host + l.out_rows);
  int32_t table_at = 0, visible_at = 0;
  for (size_t i = 0; i < b.sequences.size(); ++i) {
    const BatchSequence& q = b.sequences[i];
    const int num_ctx = q.num_cached + q.num_tokens;
    seqs[i] = {q.first_token, q.num_tokens,
               num_ctx,       table_at,
               visible_at,    static_cast<int32_t>(q.visible_streams.size())};
    std::copy(q.block_table.begin(), q.block_table.end(), tables + table_at);
    std::copy(q.visible_streams.begin(), q.visible_streams.end(),
              visible + visible_at);
    table_at += static_cast<int32_t>(q.block_table.size());
    visible_at += static_cast<int32_t>(q.visible_streams.size());
    for (int j = 0; j < q.num_tokens; ++j) {
      const int64_t e = int64_t{q.num_cached} + j;
      slots[q.first_token + j] =
          int64_t{q.block_table[e / block_size]} * block_size + e % block_size;
      const bool wanted =
          q.logits == BatchSequence::Logits::kAll ||
          (q.logits == BatchSequence::Logits::kLast && j == q.num_tokens - 1);
      if (wanted) out_rows[sh.n_out++] = q.first_token + j;
    }
    sh.max_ctx = std::max(sh.max_ctx, num_ctx);
    sh.max_seq_tokens = std::max(sh.max_seq_tokens, q.num_tokens);
  }
  sh.table_entries = table_at;
  return sh;
}

absl::Status EnsureMeta(CudaModel::State& s, CudaModel::State::MetaBuffers& m,
                        size_t bytes, const char* what) {
  if (bytes <= m.capacity) return absl::OkStatus();
  // Nothing in the stream may still read the buffers.
  BRAID_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s.stream));
  const size_t capacity = std::max(bytes, 2 * m.capacity);
  m.capacity = 0;
  for (uint8_t*& host : m.host) {
    if (host != nullptr) cudaFreeHost(host);
    host = nullptr;
  }
  for (uint8_t*& host : m.host) {
    BRAID_CUDA_RETURN_IF_ERROR(cudaHostAlloc(reinterpret_cast<void**>(&host),
                                             capacity, cudaHostAllocDefault));
  }
  BRAID_ASSIGN_OR_RETURN(m.device, kc::DeviceBuffer::Allocate(capacity, what));
  m.capacity = capacity;
  return absl::OkStatus();
}

absl::StatusOr<uint8_t*> NextHostMeta(CudaModel::State::MetaBuffers& m) {
  BRAID_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(m.copied[m.turn]));
  return m.host[m.turn];
}

absl::Status UploadMeta(CudaModel::State::MetaBuffers& m, size_t bytes,
                        cudaStream_t stream) {
  BRAID_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      m.device.data(), m.host[m.turn], bytes, cudaMemcpyHostToDevice, stream));
  BRAID_CUDA_RETURN_IF_ERROR(cudaEventRecord(m.copied[m.turn], stream));
  m.turn ^= 1;
  return absl::OkStatus();
}

absl::Status TokensFromDevice(const StepArrays& a, int n,
                              const int32_t* device_tokens, int token_stride,
                              cudaStream_t stream) {
  if (device_tokens == nullptr || n == 0) return absl::OkStatus();
  BRAID_CUDA_RETURN_IF_ERROR(
      cudaMemcpy2DAsync(const_cast<int32_t*>(a.tokens), sizeof(int32_t),
                        device_tokens, token_stride * sizeof(int32_t),
                        sizeof(int32_t), n, cudaMemcpyDeviceToDevice, stream));
  return absl::OkStatus();
}

StepArrays ArraysAt(const uint8_t* dev, const StepLayout& l) {
  StepArrays a;
  a.tokens = reinterpret_cast<const int32_t*>(dev + l.tokens);
  a.meta = reinterpret_cast<const kc::CudaEntryMeta*>(dev + l.meta);
  a.slots = reinterpret_cast<const int64_t*>(dev + l.slots);
  a.seqs = reinterpret_cast<const kc::CudaAttentionSeq*>(dev + l.seqs);
  a.tables = reinterpret_cast<const int32_t*>(dev + l.tables);
  a.visible = reinterpret_cast<const int32_t*>(dev + l.visible);
  a.out_rows = reinterpret_cast<const int32_t*>(dev + l.out_rows);
  return a;
}

namespace {

// The RoPE angles of the global layers or (swa) of the sliding ones (their
// own base, gemma3).
kc::RopeParams RopeParamsOf(const CudaModel::State& s, bool swa) {
  const LlamaConfig& c = s.config;
  kc::RopeParams r;
  r.n_rot = c.n_rot;
  r.base = swa ? c.swa_rope_base : c.rope_base;
  r.freq_scale = swa ? c.swa_rope_freq_scale : c.rope_freq_scale;
  r.freq_factors = s.rope_freqs;
  return r;
}

// The step's RoPE tables (kRope, and kRopeSwa where the sliding layers'
// differs), once for all layers.
absl::Status FillRopeTables(CudaModel::State& s, const StepArrays& a) {
  BRAID_CUDA_RETURN_IF_ERROR(kc::RopeTable(a.meta, a.n, RopeParamsOf(s, false),
                                           s.Buffer<float>(kRope), s.stream));
  if (s.config.SwaRopeDiffers()) {
    BRAID_CUDA_RETURN_IF_ERROR(kc::RopeTable(a.meta, a.n, RopeParamsOf(s, true),
                                             s.Buffer<float>(kRopeSwa),
                                             s.stream));
  }
  return absl::OkStatus();
}

// Layer il's rotation: the step's table of its kind of layer.
kc::RopeRotation RotationOf(const CudaModel::State& s, int il) {
  const LlamaConfig& c = s.config;
  const bool swa = c.Slides(il) && c.SwaRopeDiffers();
  return kc::RopeRotation{c.traits.rope == ArchTraits::Rope::kNeox, c.n_rot,
                          s.Buffer<float>(swa ? kRopeSwa : kRope)};
}

// x += product(input) for the O and down products: in the product's
// residual epilogue, or (a post-norm between, gemma) through kO and
// PostNormAdd.
absl::Status ResidualProduct(CudaModel::State& s, CudaProduct product, int n,
                             const uint16_t* input, const uint16_t* w,
                             const float* post_norm) {
  float* x = s.Buffer<float>(kX);
  if (post_norm == nullptr) {
    return s.gemm->Run(product, n, input, w, nullptr, x, s.stream);
  }
  float* o = s.Buffer<float>(kO);
  BRAID_RETURN_IF_ERROR(
      s.gemm->Run(product, n, input, w, nullptr, o, s.stream));
  BRAID_CUDA_RETURN_IF_ERROR(kc::PostNormAdd(o, post_norm, s.config.rms_eps, n,
                                             s.config.n_embd, x, s.stream));
  return absl::OkStatus();
}

// The attention half of layer il: x += O(attention(RoPE(QKV(norm(x))))).
absl::Status RunAttentionHalf(CudaModel::State& s, const StepArrays& a,
                              const CudaKvCache& kv, int il) {
  const LlamaConfig& c = s.config;
  const CudaModel::State::Layer& l = s.layers[il];
  cudaStream_t st = s.stream;
  float* x = s.Buffer<float>(kX);
  uint16_t* h = s.Buffer<uint16_t>(kH);
  float* qkv = s.Buffer<float>(kQkv);
  float* q = s.Buffer<float>(kQ);
  float* attn = s.Buffer<float>(kAttn);
  BRAID_CUDA_RETURN_IF_ERROR(kc::RmsNormToBf16(
      x, c.n_embd, nullptr, a.n, c.n_embd, l.attn_norm, c.rms_eps, h, st));
  BRAID_RETURN_IF_ERROR(
      s.gemm->Run(kQkvProduct, a.n, h, l.qkv, l.qkv_bias, qkv, st));
  const kc::QkvShape qs{c.n_head, c.n_head_kv, c.head_dim, c.rms_eps};
  BRAID_CUDA_RETURN_IF_ERROR(kc::QkvEpilogue(
      qkv, a.n, qs, l.q_norm, l.k_norm, RotationOf(s, il),
      c.q_scale > 0 ? c.q_scale : 1.0f, a.slots, q, kv.k(il), kv.v(il), st));
  if (il == 0) {
    BRAID_CUDA_RETURN_IF_ERROR(
        kc::WriteKvMeta(a.meta, a.slots, a.n, kv.meta(), st));
  }
  kc::CudaAttentionShape shape;
  shape.n_head = c.n_head;
  shape.n_kv_head = c.n_head_kv;
  shape.head_dim = c.head_dim;
  shape.block_size = kv.block_size();
  shape.scale = c.q_scale > 0 ? 1.0f : 0.0f;  // (Q is scaled: Gemma)
  shape.window = c.Slides(il) ? c.sliding_window : 0;
  shape.softcap = c.attn_softcap;
  kc::CudaAttentionBatch batch;
  batch.seqs = a.seqs;
  batch.block_tables = a.tables;
  batch.visible = a.visible;
  batch.q_meta = a.meta;
  batch.n_seq = a.n_seq;
  batch.max_seq_tokens = a.max_seq_tokens;
  batch.max_ctx = a.max_ctx;
  const kc::CudaPagedKvLayer layer{kv.k(il), kv.v(il), kv.meta()};
  BRAID_RETURN_IF_ERROR(kc::PagedAttention(shape, layer, batch, q, attn,
                                           s.attention_workspace.data(),
                                           s.attention_workspace.bytes(), st));
  uint16_t* attn_bf16 = s.Buffer<uint16_t>(kAttnBf16);
  BRAID_CUDA_RETURN_IF_ERROR(
      kc::F32ToBf16(attn, int64_t{a.n} * s.plan.q_dim, attn_bf16, st));
  return ResidualProduct(s, kOutProduct, a.n, attn_bf16, l.out,
                         l.post_attn_norm);
}

// The FFN half of layer il: x += down(act(gate_up(norm(x)))).
absl::Status RunFfnHalf(CudaModel::State& s, const StepArrays& a, int il) {
  const LlamaConfig& c = s.config;
  const CudaModel::State::Layer& l = s.layers[il];
  cudaStream_t st = s.stream;
  uint16_t* h = s.Buffer<uint16_t>(kH);
  float* gu = s.Buffer<float>(kGateUp);
  uint16_t* act = s.Buffer<uint16_t>(kAct);
  BRAID_CUDA_RETURN_IF_ERROR(kc::RmsNormToBf16(s.Buffer<float>(kX), c.n_embd,
                                               nullptr, a.n, c.n_embd,
                                               l.ffn_norm, c.rms_eps, h, st));
  BRAID_RETURN_IF_ERROR(
      s.gemm->Run(kGateUpProduct, a.n, h, l.gate_up, nullptr, gu, st));
  const kc::GatedAct fn = c.traits.ffn == ArchTraits::Ffn::kSilu
                              ? kc::GatedAct::kSilu
                              : kc::GatedAct::kGeluTanh;
  BRAID_CUDA_RETURN_IF_ERROR(kc::GatedActToBf16(gu, a.n, c.n_ff, fn, act, st));
  return ResidualProduct(s, kDownProduct, a.n, act, l.down, l.post_ffn_norm);
}

}  // namespace

absl::Status RunLayers(CudaModel::State& s, const StepArrays& a,
                       const CudaKvCache& kv) {
  const LlamaConfig& c = s.config;
  // ggml_scale by sqrtf(n_embd) for Gemma, as the CPU model.
  const float scale =
      c.traits.gemma ? std::sqrt(static_cast<float>(c.n_embd)) : 1.0f;
  BRAID_CUDA_RETURN_IF_ERROR(kc::EmbedRows(s.embd, a.tokens, a.meta,
                                           s.stream_embd, a.n, c.n_embd, scale,
                                           s.Buffer<float>(kX), s.stream));
  BRAID_RETURN_IF_ERROR(FillRopeTables(s, a));
  for (int il = 0; il < c.n_layer; ++il) {
    BRAID_RETURN_IF_ERROR(RunAttentionHalf(s, a, kv, il));
    BRAID_RETURN_IF_ERROR(RunFfnHalf(s, a, il));
  }
  return absl::OkStatus();
}

absl::Status ProjectVocab(CudaModel::State& s, const StepArrays& a, int n_out) {
  if (n_out == 0) return absl::OkStatus();
  const LlamaConfig& c = s.config;
  uint16_t* h = s.Buffer<uint16_t>(kH);
  float* logits = s.Buffer<float>(kLogits);
  BRAID_CUDA_RETURN_IF_ERROR(
      kc::RmsNormToBf16(s.Buffer<float>(kX), c.n_embd, a.out_rows, n_out,
                        c.n_embd, s.output_norm, c.rms_eps, h, s.stream));
  BRAID_RETURN_IF_ERROR(s.gemm->Run(kVocabProduct, n_out, h, s.output, nullptr,
                                    logits, s.stream));
  if (c.final_softcap > 0.0f) {
    BRAID_CUDA_RETURN_IF_ERROR(kc::Softcap(logits, int64_t{n_out} * c.n_vocab,
                                           c.final_softcap, s.stream));
  }
  return absl::OkStatus();
}

// Checks and runs one step: its logits rows in kLogits (their count). The
// caller has dealt with any lookahead step.
absl::StatusOr<CudaKvCache*> KvOf(const CudaModel::State& s, KvCache& cache) {
  auto* kv = dynamic_cast<CudaKvCache*>(&cache);
  if (kv == nullptr || kv->owner() != &s) {
    return absl::InvalidArgumentError(
        "Forward: the KV cache was not made by this CUDA model");
  }
  BRAID_RETURN_IF_ERROR(kv->status());
  return kv;
}

absl::Status DropLookahead(CudaModel::State& s) {
  s.ahead.reset();
  if (!s.pending.has_value()) return absl::OkStatus();
  s.pending.reset();
  // The unused step finishes before anything reuses its buffers.
  BRAID_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s.stream));
  return absl::OkStatus();
}

absl::StatusOr<int> RunStep(CudaModel::State& s, const Batch& batch,
                            KvCache& cache) {
  const LlamaConfig& c = s.config;
  BRAID_ASSIGN_OR_RETURN(CudaKvCache * kv, KvOf(s, cache));
  BRAID_RETURN_IF_ERROR(CheckBatch(
      batch, BatchLimits{c.n_vocab, s.stream_embd != nullptr ? c.n_streams : 0,
                         kv->block_size(), kv->num_blocks()}));
  if (static_cast<int>(batch.tokens.size()) > s.plan.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Forward: ", batch.tokens.size(), " tokens, more than the ",
        s.plan.max_tokens, " a step of this model was loaded for"));
  }
  BRAID_CUDA_RETURN_IF_ERROR(cudaSetDevice(s.device));
  BRAID_ASSIGN_OR_RETURN(std::optional<int> graph_rows,
                         RunDecodeGraph(s, batch, *kv));
  if (graph_rows.has_value()) return *graph_rows;
  return RunEager(s, batch, *kv);
}

absl::StatusOr<int> RunEager(CudaModel::State& s, const Batch& batch,
                             const CudaKvCache& kv,
                             const int32_t* device_tokens, int token_stride) {
  const StepLayout layout = LayoutFor(batch);
  BRAID_RETURN_IF_ERROR(
      EnsureMeta(s, s.step_meta, layout.bytes, "step metadata"));
  BRAID_ASSIGN_OR_RETURN(uint8_t * host, NextHostMeta(s.step_meta));
  const StepShape shape = FillStepMeta(batch, layout, kv.block_size(), host);
  BRAID_RETURN_IF_ERROR(UploadMeta(s.step_meta, layout.bytes, s.stream));
  StepArrays a = ArraysAt(s.step_meta.device.as<uint8_t>(), layout);
  BRAID_RETURN_IF_ERROR(
      TokensFromDevice(a, shape.n, device_tokens, token_stride, s.stream));
  a.n = shape.n;
  a.n_seq = static_cast<int>(batch.sequences.size());
  a.max_ctx = shape.max_ctx;
  a.max_seq_tokens = shape.max_seq_tokens;
  BRAID_RETURN_IF_ERROR(RunLayers(s, a, kv));
  BRAID_RETURN_IF_ERROR(ProjectVocab(s, a, shape.n_out));
  return shape.n_out;
}

}  // namespace cuda_step

std::unique_ptr<KvCache> CudaModel::NewKvCache(int block_size,
                                               int num_blocks) const {
  return std::make_unique<cuda_step::CudaKvCache>(s_.get(), block_size,
                                                  num_blocks);
}

absl::Status CudaModel::Forward(const Batch& batch, KvCache& cache,
                                std::vector<float>* logits) {
  State& s = *s_;
  BRAID_RETURN_IF_ERROR(cuda_step::DropLookahead(s));
  BRAID_ASSIGN_OR_RETURN(const int n_out, cuda_step::RunStep(s, batch, cache));
  logits->resize(static_cast<size_t>(n_out) * s.config.n_vocab);
  BRAID_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      logits->data(), s.Buffer<float>(kLogits), logits->size() * sizeof(float),
      cudaMemcpyDeviceToHost, s.stream));
  BRAID_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s.stream));
  return absl::OkStatus();
}

}  // namespace braid::model
