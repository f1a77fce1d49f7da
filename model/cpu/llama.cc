#include "model/cpu/llama.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/attention/attention.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant/quant.h"
#include "model/batch_check.h"

namespace braid::model {
namespace {

namespace k = ::braid::kernels::cpu;

// A pool thread's own inputs of a layer's first products (LocalInputsFor):
// slot 0 Q/K/V, slot 1 gate/up. id: the section they were made for (ids
// come from next_local_id, unique across models).
struct LocalInputs {
  uint64_t id = 0;
  k::QuantizedActivations q[3];
  std::vector<uint8_t> bufs[3];
  std::vector<float> h;
};
thread_local LocalInputs local_inputs[2];
std::atomic<uint64_t> next_local_id{0};

}  // namespace

size_t LlamaModel::MatMulScratchBytes(int n) const {
  size_t mm = k::MatMulScratchBytes(output_, n);
  for (const Layer& l : layers_) {
    for (const k::WeightMatrix* w :
         {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      mm = std::max(mm, k::MatMulScratchBytes(*w, n));
    }
  }
  return mm;
}

void LlamaModel::EnsureScratch(Scratch& s, int n) {
  if (n <= s.capacity) return;
  const LlamaConfig& c = config_;
  const size_t q_dim = static_cast<size_t>(c.n_head) * c.head_dim;
  s.capacity = n;
  s.x.resize(n * c.n_embd);
  s.h.resize(n * c.n_embd);
  s.q.resize(n * q_dim);
  s.k.resize(n * c.kv_dim());
  s.v.resize(n * c.kv_dim());
  s.attn.resize(n * q_dim);
  s.gate.resize(static_cast<size_t>(n) * c.n_ff);
  s.up.resize(static_cast<size_t>(n) * c.n_ff);
  s.pos.resize(n);
  s.tok_seq.resize(n);
  s.out_rows.resize(n);
  s.seqs.resize(n);  // At most one sequence per token.
  s.rope_cs.resize(static_cast<size_t>(n) * c.n_rot);
  if (c.SwaRopeDiffers()) s.rope_cs_swa.resize(s.rope_cs.size());
  s.slot.resize(n);
  const size_t mm = MatMulScratchBytes(n);
  s.matmul.resize(mm);
  s.matmul2.resize(mm);
  s.matmul3.resize(mm);
}

void LlamaModel::NormQuantizeFor(const float* x, const float* weight, int n,
                                 const k::WeightMatrix* const* ws, int count,
                                 k::QuantizedActivations* out,
                                 const Exec& exec) {
  Scratch& scratch = *exec.scratch;
  std::vector<uint8_t>* bufs[] = {&scratch.matmul, &scratch.matmul2,
                                  &scratch.matmul3};
  NormQuantizeInto(x, weight, n, ws, count, out, scratch.h.data(), bufs,
                   exec.pool);
}

void LlamaModel::NormQuantizeInto(const float* x, const float* weight, int n,
                                  const k::WeightMatrix* const* ws, int count,
                                  k::QuantizedActivations* out, float* h,
                                  std::vector<uint8_t>* const* bufs,
                                  k::ThreadPool* pool) const {
  const LlamaConfig& c = config_;
  auto norm = [&](int64_t t0, int64_t t1) {
    k::RmsNorm(x + t0 * c.n_embd, weight, t1 - t0, c.n_embd, c.rms_eps,
               h + t0 * c.n_embd);
  };
  for (int i = 0; i < count; ++i) {
    const k::DType act = k::ActivationDType(ws[i]->type);
    int same = -1;
    for (int j = 0; j < i && same < 0; ++j) {
      if (out[j].type == act &&
          (out[j].packed_tables != nullptr) == (ws[i]->packed != nullptr) &&
          (ws[j]->quads != nullptr) == (ws[i]->quads != nullptr)) {
        same = j;
      }
    }
    if (same >= 0) {
      out[i] = out[same];
    } else if (i == 0) {  // The norm runs in the first one's tasks.
      out[i] = k::QuantizeActivations(*ws[i], h, n, bufs[i], pool, norm);
    } else {
      out[i] = k::QuantizeActivations(*ws[i], h, n, bufs[i], pool);
    }
  }
}

const k::QuantizedActivations* LlamaModel::LocalInputsFor(
    int slot, uint64_t id, const float* x, const float* weight, int n,
    const k::WeightMatrix* const* ws, int count) const {
  LocalInputs& li = local_inputs[slot];
  if (li.id != id) {
    li.id = id;
    const size_t need = static_cast<size_t>(n) * config_.n_embd;
    if (li.h.size() < need) li.h.resize(need);
    std::vector<uint8_t>* bufs[] = {&li.bufs[0], &li.bufs[1], &li.bufs[2]};
    NormQuantizeInto(x, weight, n, ws, count, li.q, li.h.data(), bufs, nullptr);
  }
  return li.q;
}

void LlamaModel::ReserveLocalInputs() const {
  const size_t mm = MatMulScratchBytes(kLocalInputTokens);
  const size_t h = static_cast<size_t>(kLocalInputTokens) * config_.n_embd;
  for (LocalInputs& li : local_inputs) {
    if (li.h.size() < h) li.h.resize(h);
    for (std::vector<uint8_t>& b : li.bufs) {
      if (b.size() < mm) b.resize(mm);
    }
  }
}

// One transformer block over the batch's n tokens:
//   x += Wo * Attn(RoPE(Wq h), RoPE(Wk h), Wv h),  h = RmsNorm(x) * attn_norm
//   x += Wdown * (SiLU(Wgate h) * Wup h),          h = RmsNorm(x) * ffn_norm
// Every linear layer is a GEMM with a fused epilogue, one parallel section
// each: Q, K and V together (tasks of contiguous heads: RoPE on Q and K,
// and K/V rounded to fp16 into their pool slots, while the rows are in
// cache); Wo and Wdown add into the residual; gate and up together
// (SiLU(gate) * up per run). Each thread takes its rows in runs from an
// equal share, then from the back of the other's (k::kMatMulRunRows,
// ThreadPool::ParallelRanges). The batch shares each weight fetch; attention
// runs per sequence over the paged cache. Five parallel sections per layer.
void LlamaModel::RunLayer(int il, const KvEntryMeta* meta, int n,
                          const KvView& kv, const Exec& exec) {
  SectionClock clock(exec.profile);
  RunQkv(il, n, kv, exec, clock);
  RunAttentionOut(il, meta, n, kv, exec, clock);
  RunFfn(il, n, exec, clock);
}

LlamaModel::SectionClock::SectionClock(SectionProfile* profile)
    : profile_(profile),
      last_(profile != nullptr ? std::chrono::steady_clock::now()
                               : std::chrono::steady_clock::time_point{}) {}

void LlamaModel::SectionClock::Mark(Section part) {
  if (profile_ == nullptr) return;
  const auto now = std::chrono::steady_clock::now();
  profile_->seconds[part] += std::chrono::duration<double>(now - last_).count();
  last_ = now;
}

// x += w * input for the n tokens: the input quantized already (`in`, set
// by the tasks that wrote it) or quantized here from `input`. With a
// post-norm (Gemma) the product goes to h, is normed there and then added.
void LlamaModel::AddToResidual(const k::WeightMatrix& w,
                               const k::QuantizedActivations* in,
                               const float* input,
                               const std::vector<float>& post_norm, int n,
                               const Exec& exec) {
  const LlamaConfig& c = config_;
  Scratch& s = *exec.scratch;
  float* const out = post_norm.empty() ? s.x.data() : s.h.data();
  const bool accumulate = post_norm.empty();
  if (in != nullptr) {
    k::MatMulQuantized(w, *in, out, accumulate, exec.pool);
  } else {
    k::MatMul(w, input, n, out, accumulate, exec.pool, &s.matmul);
  }
  if (post_norm.empty()) return;
  exec.pool->ParallelFor(n, [&](int64_t t) {
    float* h = s.h.data() + t * c.n_embd;
    k::RmsNorm(h, post_norm.data(), 1, c.n_embd, c.rms_eps, h);
    k::AddInPlace(s.x.data() + t * c.n_embd, h, c.n_embd);
  });
}

// Q, K and V: the norm and quantization of the layer's input, the products
// with their epilogues, K and V into the pool.
void LlamaModel::RunQkv(int il, int n, const KvView& kv, const Exec& exec,
                        SectionClock& clock) {
  const LlamaConfig& c = config_;
  const Layer& l = layers_[il];
  Scratch& s = *exec.scratch;
  k::ThreadPool& pool = *exec.pool;
  const int64_t hd = c.head_dim;
  const int64_t q_dim = c.n_head * hd;
  const int64_t kv_dim = c.kv_dim();

  const k::WeightMatrix* qkv[3] = {&l.wq, &l.wk, &l.wv};
  // The products' inputs: see LocalInputsFor.
  const bool local = n <= kLocalInputTokens && pool.num_threads() > 1;
  k::QuantizedActivations qkv_in[3];
  uint64_t qkv_id = 0;
  if (local) {
    qkv_id = ++next_local_id;
  } else {
    NormQuantizeFor(s.x.data(), l.attn_norm.data(), n, qkv, 3, qkv_in, exec);
  }
  clock.Mark(kNormQkv);
  uint16_t* k_layer = kv.k + il * kv.layer_stride;
  uint16_t* v_layer = kv.v + il * kv.layer_stride;
  // The rows of Q, then K, then V, in units of 16 (of a head when the
  // sizes are not multiples of 16), shared as a product's rows (head-sized
  // units left the shares unequal): per run, one product per matrix it
  // touches, RoPE on its Q and K rows, and its K and V rows rounded to fp16
  // into their pool slots.
  // Neox RoPE pairs elements half a head apart and the per-head Q/K norms
  // need whole heads: whole heads then.
  const bool whole_heads =
      c.traits.rope == ArchTraits::Rope::kNeox || c.traits.qk_norm;
  const int64_t unit =
      !whole_heads && q_dim % 16 == 0 && kv_dim % 16 == 0 ? 16 : hd;
  const bool slides = c.Slides(il);
  const float* rope_cs = slides && !s.rope_cs_swa.empty() ? s.rope_cs_swa.data()
                                                          : s.rope_cs.data();
  const int64_t units = (q_dim + 2 * kv_dim) / unit;
  auto qkv_rows = [&](int64_t u0, int64_t u1, int64_t share_end) {
    const int64_t r0 = u0 * unit, r1 = u1 * unit, r_end = share_end * unit;
    const k::QuantizedActivations* in =
        local ? LocalInputsFor(0, qkv_id, s.x.data(), l.attn_norm.data(), n,
                               qkv, 3)
              : qkv_in;
    // The run's rows of the matrix whose rows start at `base`, and how far
    // into it this thread's share goes (for prefetch).
    auto part = [&](int64_t base, int64_t rows) {
      return std::tuple<int64_t, int64_t, int64_t>{
          std::clamp(r0 - base, int64_t{0}, rows),
          std::clamp(r1 - base, int64_t{0}, rows),
          std::clamp(r_end - base, int64_t{0}, rows)};
    };
    if (const auto [a, b, e] = part(0, q_dim); a < b) {
      k::MatMulRows(l.wq, in[0], a, b, s.q.data(), q_dim, false, e);
      QkEpilogue(s.q.data(), q_dim, n, a, b, l.bq, l.q_norm, c.q_scale,
                 rope_cs);
    }
    for (const bool is_k : {true, false}) {
      const auto [a, b, e] = part(is_k ? q_dim : q_dim + kv_dim, kv_dim);
      if (a >= b) continue;
      float* out = is_k ? s.k.data() : s.v.data();
      k::MatMulRows(is_k ? l.wk : l.wv, in[is_k ? 1 : 2], a, b, out, kv_dim,
                    false, e);
      if (is_k) {
        QkEpilogue(out, kv_dim, n, a, b, l.bk, l.k_norm, 0.0f, rope_cs);
      } else if (!l.bv.empty()) {
        for (int t = 0; t < n; ++t) {
          k::AddInPlace(out + t * kv_dim + a, l.bv.data() + a, b - a);
        }
      }
      uint16_t* cache = is_k ? k_layer : v_layer;
      for (int t = 0; t < n; ++t) {
        k::Fp32ToFp16Row(out + t * kv_dim + a, cache + s.slot[t] * kv_dim + a,
                         b - a);
      }
    }
  };
  pool.ParallelRanges(units, k::kMatMulRunRows / unit, qkv_rows);
  clock.Mark(kQkv);
}

void LlamaModel::QkEpilogue(float* out, int64_t ld, int n, int64_t a, int64_t b,
                            const std::vector<float>& bias,
                            const std::vector<float>& norm, float scale,
                            const float* rope_cs) const {
  const LlamaConfig& c = config_;
  const int64_t hd = c.head_dim;
  for (int t = 0; t < n; ++t) {
    float* row = out + t * ld;
    if (!bias.empty()) k::AddInPlace(row + a, bias.data() + a, b - a);
    if (!norm.empty()) {
      k::RmsNorm(row + a, norm.data(), (b - a) / hd, hd, c.rms_eps, row + a);
    }
  }
  if (c.traits.rope == ArchTraits::Rope::kNeox) {
    k::RopeApplyNeox(out, n, ld, a, b, hd, c.n_rot, rope_cs);
  } else {
    k::RopeApply(out, n, ld, a, b, hd, c.n_rot, rope_cs);
  }
  if (scale > 0) {
    for (int t = 0; t < n; ++t) {
      float* row = out + t * ld;
      for (int64_t i = a; i < b; ++i) row[i] *= scale;
    }
  }
}

// Attention over the paged cache, then the O projection into the residual.
void LlamaModel::RunAttentionOut(int il, const KvEntryMeta* meta, int n,
                                 const KvView& kv, const Exec& exec,
                                 SectionClock& clock) {
  const LlamaConfig& c = config_;
  const Layer& l = layers_[il];
  Scratch& s = *exec.scratch;
  k::ThreadPool& pool = *exec.pool;
  const int64_t hd = c.head_dim;
  const int64_t q_dim = c.n_head * hd;
  const bool slides = c.Slides(il);
  uint16_t* k_layer = kv.k + il * kv.layer_stride;
  uint16_t* v_layer = kv.v + il * kv.layer_stride;
  k::AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim};
  shape.scale = c.q_scale > 0 ? 1.0f : 0.0f;  // (Q is scaled: Gemma)
  shape.softcap = c.attn_softcap;
  shape.window = slides ? c.sliding_window : 0;
  // (A sliding layer's views differ from the pass's: built per call.)
  const k::PagedKvLayer layer{k_layer, v_layer, kv.meta, kv.block_size,
                              slides ? 0 : s.view_pass};
  // The O projection's input quantized by the attention tasks that write it
  // (whole heads; in s.matmul, free once Q/K/V are done), as the down
  // projection's below.
  k::QuantizedActivations o_in;
  const bool fuse_o =
      hd % k::kQK == 0 && k::StartActivations(l.wo, n, &s.matmul, &o_in);
  k::PagedAttention(shape, layer, s.q.data(), meta, s.seqs.data(),
                    s.tok_seq.data(), n, s.attn.data(), &pool,
                    [&](int64_t t0, int64_t t1, int64_t c0, int64_t c1) {
                      if (fuse_o) {
                        k::QuantizeActivationColumns(l.wo, s.attn.data(), q_dim,
                                                     o_in, c0, c1, t0, t1);
                      }
                    });
  clock.Mark(kAttention);
  AddToResidual(l.wo, fuse_o ? &o_in : nullptr, s.attn.data(), l.post_attn_norm,
                n, exec);
  clock.Mark(kOut);
}

// The gated FFN: norm and quantization, gate and up with the activation,
// the down projection into the residual.
void LlamaModel::RunFfn(int il, int n, const Exec& exec, SectionClock& clock) {
  const LlamaConfig& c = config_;
  const Layer& l = layers_[il];
  Scratch& s = *exec.scratch;
  k::ThreadPool& pool = *exec.pool;
  const bool local = n <= kLocalInputTokens && pool.num_threads() > 1;
  const k::WeightMatrix* gate_up[2] = {&l.w_gate, &l.w_up};
  k::QuantizedActivations ffn_in[2];
  uint64_t ffn_id = 0;
  if (local) {
    ffn_id = ++next_local_id;
  } else {
    NormQuantizeFor(s.x.data(), l.ffn_norm.data(), n, gate_up, 2, ffn_in, exec);
  }
  clock.Mark(kNormFfn);
  // The down projection's input is quantized by the runs that write it,
  // each its own blocks (k::StartActivations; in s.matmul3, which the FFN's
  // two inputs leave unused), not in a pass after the section: no parallel
  // section of its own, and no thread reads the other's SwiGLU rows.
  k::QuantizedActivations down_in;
  const bool fused = k::StartActivations(l.w_down, n, &s.matmul3, &down_in);
  // Multiples of 64 rows keep SwiGlu's 16-element groups aligned with
  // ggml's rows.
  const int64_t ffn_units = (c.n_ff + 63) / 64;
  auto ffn_rows = [&](int64_t u0, int64_t u1, int64_t share_end) {
    const int64_t r0 = u0 * 64;
    const int64_t r1 = std::min<int64_t>(c.n_ff, u1 * 64);
    const int64_t e = std::min<int64_t>(c.n_ff, share_end * 64);
    const k::QuantizedActivations* in =
        local ? LocalInputsFor(1, ffn_id, s.x.data(), l.ffn_norm.data(), n,
                               gate_up, 2)
              : ffn_in;
    k::MatMulRows(l.w_gate, in[0], r0, r1, s.gate.data(), c.n_ff, false, e);
    k::MatMulRows(l.w_up, in[1], r0, r1, s.up.data(), c.n_ff, false, e);
    for (int t = 0; t < n; ++t) {
      float* g = s.gate.data() + int64_t{t} * c.n_ff + r0;
      const float* u = s.up.data() + int64_t{t} * c.n_ff + r0;
      if (c.traits.ffn == ArchTraits::Ffn::kGeluTanh) {
        k::GeluTanhMul(g, u, r1 - r0);
      } else {
        k::SiluMul(g, u, r1 - r0);
      }
    }
    if (fused) {
      k::QuantizeActivationColumns(l.w_down, s.gate.data(), c.n_ff, down_in, r0,
                                   r1);
    }
  };
  pool.ParallelRanges(ffn_units, k::kMatMulRunRows / 64, ffn_rows);
  clock.Mark(kGateUp);
  AddToResidual(l.w_down, fused ? &down_in : nullptr, s.gate.data(),
                l.post_ffn_norm, n, exec);
  clock.Mark(kDown);
}

const char* LlamaModel::SectionName(Section s) {
  static constexpr const char* kNames[kNumSections] = {
      "norm_qkv", "qkv",     "attention", "out",
      "norm_ffn", "gate_up", "down",      "vocab"};
  return kNames[s];
}

absl::Status LlamaModel::ValidateBatch(const Batch& b, const KvView& kv) const {
  return CheckBatch(b, BatchLimits{config_.n_vocab,
                                   stream_embd_.empty() ? 0 : config_.n_streams,
                                   kv.block_size, kv.num_blocks});
}

absl::Status LlamaModel::Forward(const Batch& batch, KvCache& cache,
                                 std::vector<float>* logits) {
  const LlamaConfig& c = config_;
  auto* pool = dynamic_cast<PagedKvPool*>(&cache);
  if (pool == nullptr) {
    return absl::InvalidArgumentError(
        "Forward: the KV cache was not made by a CPU model");
  }
  PagedKvPool& kv = *pool;
  if (kv.n_layer() != c.n_layer || kv.kv_dim() != c.kv_dim()) {
    return absl::InvalidArgumentError(
        "Forward: KV pool shaped for another model");
  }
  const KvView view{kv.k(0, 0),
                    kv.v(0, 0),
                    int64_t{kv.num_blocks()} * kv.block_size() * kv.kv_dim(),
                    kv.block_size(),
                    kv.num_blocks(),
                    kv.meta(0)};
  if (absl::Status st = ValidateBatch(batch, view); !st.ok()) return st;
  ForwardBatch(batch, view, logits);
  return absl::OkStatus();
}

}  // namespace braid::model
