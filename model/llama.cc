#include "model/llama.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"

namespace braid::model {
namespace {

namespace k = ::braid::kernels::cpu;

k::DType ToDType(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
      return k::DType::kF32;
    case GgmlType::kF16:
      return k::DType::kF16;
    case GgmlType::kBF16:
      return k::DType::kBF16;
    case GgmlType::kQ4_0:
      return k::DType::kQ4_0;
    case GgmlType::kQ4_1:
      return k::DType::kQ4_1;
    case GgmlType::kQ8_0:
      return k::DType::kQ8_0;
  }
  return k::DType::kF32;
}

// A 2-D weight [rows, cols] (ggml ne = {cols, rows}).
absl::StatusOr<k::WeightMatrix> Matrix(const GgufFile& f,
                                       const std::string& name, int64_t rows,
                                       int64_t cols) {
  const GgufTensor* t = f.FindTensor(name);
  if (t == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("missing tensor ", name));
  }
  if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", name, " has shape [", absl::StrJoin(t->dims, ","),
        "], want [", cols, ",", rows, "]"));
  }
  return k::WeightMatrix{ToDType(t->type), t->data, rows, cols};
}

// A 1-D vector [n] in any float type, copied to f32.
absl::StatusOr<std::vector<float>> Vector(const GgufFile& f,
                                          const std::string& name, int64_t n) {
  const GgufTensor* t = f.FindTensor(name);
  if (t == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("missing tensor ", name));
  }
  if (t->dims.size() != 1 || t->dims[0] != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, " must have shape [", n, "]"));
  }
  std::vector<float> out(n);
  k::DequantizeRow(ToDType(t->type), t->data, out.data(), n);
  return out;
}

}  // namespace

LlamaModel::LlamaModel(std::unique_ptr<GgufFile> file, LlamaConfig config,
                       int num_threads)
    : file_(std::move(file)), config_(std::move(config)), pool_(num_threads) {}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(
    std::unique_ptr<GgufFile> file, const LoadOptions& opts) {
  if (file == nullptr) return absl::InvalidArgumentError("null GgufFile");
  absl::StatusOr<LlamaConfig> config = LlamaConfig::FromGguf(*file);
  if (!config.ok()) return config.status();
  std::unique_ptr<LlamaModel> model(
      new LlamaModel(std::move(file), *std::move(config), opts.num_threads));
  if (absl::Status s = model->BindWeights(); !s.ok()) return s;
  return model;
}

absl::Status LlamaModel::BindWeights() {
  const GgufFile& f = *file_;
  const LlamaConfig& c = config_;
  const int q_dim = c.n_head * c.head_dim;
#define BRAID_ASSIGN(lhs, expr)               \
  {                                           \
    auto result = (expr);                     \
    if (!result.ok()) return result.status(); \
    lhs = *std::move(result);                 \
  }
  BRAID_ASSIGN(token_embd_,
               Matrix(f, "token_embd.weight", c.n_vocab, c.n_embd));
  BRAID_ASSIGN(output_norm_, Vector(f, "output_norm.weight", c.n_embd));
  if (f.FindTensor("output.weight") != nullptr) {
    BRAID_ASSIGN(output_, Matrix(f, "output.weight", c.n_vocab, c.n_embd));
  } else {
    output_ = token_embd_;  // Tied embeddings.
  }
  layers_.resize(c.n_layer);
  for (int il = 0; il < c.n_layer; ++il) {
    Layer& l = layers_[il];
    const std::string p = absl::StrCat("blk.", il, ".");
    BRAID_ASSIGN(l.attn_norm, Vector(f, p + "attn_norm.weight", c.n_embd));
    BRAID_ASSIGN(l.ffn_norm, Vector(f, p + "ffn_norm.weight", c.n_embd));
    BRAID_ASSIGN(l.wq, Matrix(f, p + "attn_q.weight", q_dim, c.n_embd));
    BRAID_ASSIGN(l.wk, Matrix(f, p + "attn_k.weight", c.kv_dim(), c.n_embd));
    BRAID_ASSIGN(l.wv, Matrix(f, p + "attn_v.weight", c.kv_dim(), c.n_embd));
    BRAID_ASSIGN(l.wo, Matrix(f, p + "attn_output.weight", c.n_embd, q_dim));
    BRAID_ASSIGN(l.w_gate, Matrix(f, p + "ffn_gate.weight", c.n_ff, c.n_embd));
    BRAID_ASSIGN(l.w_up, Matrix(f, p + "ffn_up.weight", c.n_ff, c.n_embd));
    BRAID_ASSIGN(l.w_down, Matrix(f, p + "ffn_down.weight", c.n_embd, c.n_ff));
  }
#undef BRAID_ASSIGN
  return absl::OkStatus();
}

KvCache LlamaModel::NewKvCache(int max_tokens) const {
  return KvCache(config_.n_layer, max_tokens, config_.kv_dim());
}

void LlamaModel::EnsureScratch(int n) {
  if (n <= scratch_.capacity) return;
  const LlamaConfig& c = config_;
  const size_t q_dim = static_cast<size_t>(c.n_head) * c.head_dim;
  Scratch& s = scratch_;
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
  size_t mm = 0;
  for (const Layer& l : layers_) {
    for (const k::WeightMatrix* w :
         {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      mm = std::max(mm, k::MatMulScratchBytes(*w, n));
    }
  }
  mm = std::max(mm, k::MatMulScratchBytes(output_, n));
  s.matmul.resize(mm);
}

// One transformer block over n tokens whose positions are in scratch_.pos:
//   x += Wo * Attn(RoPE(Wq h), RoPE(Wk h), Wv h),  h = RmsNorm(x) * attn_norm
//   x += Wdown * (SiLU(Wgate h) * Wup h),          h = RmsNorm(x) * ffn_norm
void LlamaModel::RunLayer(int il, int n, KvCache& kv) {
  const LlamaConfig& c = config_;
  const Layer& l = layers_[il];
  Scratch& s = scratch_;
  k::RmsNorm(s.x.data(), l.attn_norm.data(), n, c.n_embd, c.rms_eps,
             s.h.data());
  k::MatMul(l.wq, s.h.data(), n, s.q.data(), false, &pool_, &s.matmul);
  k::MatMul(l.wk, s.h.data(), n, s.k.data(), false, &pool_, &s.matmul);
  k::MatMul(l.wv, s.h.data(), n, s.v.data(), false, &pool_, &s.matmul);
  k::RopeNormal(s.q.data(), s.pos.data(), n, c.n_head, c.head_dim, c.n_rot,
                c.rope_base);
  k::RopeNormal(s.k.data(), s.pos.data(), n, c.n_head_kv, c.head_dim, c.n_rot,
                c.rope_base);
  // K/V rows for positions pos[0].. go into the cache as fp16.
  const size_t kv_dim = c.kv_dim();
  k::Fp32ToFp16Row(s.k.data(), kv.k(il) + s.pos[0] * kv_dim, n * kv_dim);
  k::Fp32ToFp16Row(s.v.data(), kv.v(il) + s.pos[0] * kv_dim, n * kv_dim);
  const k::AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim};
  k::Attention(shape, s.q.data(), s.pos.data(), n, kv.k(il), kv.v(il),
               s.attn.data(), &pool_);
  k::MatMul(l.wo, s.attn.data(), n, s.x.data(), /*accumulate=*/true, &pool_,
            &s.matmul);

  k::RmsNorm(s.x.data(), l.ffn_norm.data(), n, c.n_embd, c.rms_eps, s.h.data());
  k::MatMul(l.w_gate, s.h.data(), n, s.gate.data(), false, &pool_, &s.matmul);
  k::MatMul(l.w_up, s.h.data(), n, s.up.data(), false, &pool_, &s.matmul);
  k::SiluMul(s.gate.data(), s.up.data(), static_cast<int64_t>(n) * c.n_ff);
  k::MatMul(l.w_down, s.gate.data(), n, s.x.data(), /*accumulate=*/true, &pool_,
            &s.matmul);
}

absl::Status LlamaModel::Forward(absl::Span<const int32_t> tokens, KvCache& kv,
                                 bool all_logits, std::vector<float>* logits) {
  const LlamaConfig& c = config_;
  const int n = static_cast<int>(tokens.size());
  if (n == 0) return absl::InvalidArgumentError("Forward: no tokens");
  if (kv.n_layer() != c.n_layer || kv.kv_dim() != c.kv_dim()) {
    return absl::InvalidArgumentError(
        "Forward: KV cache shaped for another model");
  }
  if (kv.size() + static_cast<int64_t>(n) > kv.capacity()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("Forward: KV cache holds ", kv.size(), " of ",
                     kv.capacity(), " positions; ", n, " more do not fit"));
  }
  for (int t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= c.n_vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("Forward: token id ", tokens[t], " at index ", t,
                       " is outside [0, ", c.n_vocab, ")"));
    }
  }
  EnsureScratch(n);
  Scratch& s = scratch_;
  const int pos0 = kv.size();
  for (int t = 0; t < n; ++t) {
    s.pos[t] = pos0 + t;
    k::DequantizeRow(token_embd_.type, token_embd_.Row(tokens[t]),
                     s.x.data() + static_cast<size_t>(t) * c.n_embd, c.n_embd);
  }
  for (int il = 0; il < c.n_layer; ++il) RunLayer(il, n, kv);
  kv.set_size(pos0 + n);

  // Final norm and vocabulary projection, for every row or only the last.
  const int first = all_logits ? 0 : n - 1;
  const int n_out = n - first;
  const float* x_out = s.x.data() + static_cast<size_t>(first) * c.n_embd;
  k::RmsNorm(x_out, output_norm_.data(), n_out, c.n_embd, c.rms_eps,
             s.h.data());
  logits->resize(static_cast<size_t>(n_out) * c.n_vocab);
  k::MatMul(output_, s.h.data(), n_out, logits->data(), false, &pool_,
            &s.matmul);
  return absl::OkStatus();
}

}  // namespace braid::model
