#include "model/model_config.h"

#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace braid::model {
namespace {

// Every architecture braid reads, with its traits: a new one that fits the
// shared block is one line here (and its tensors in LlamaModel::BindWeights
// when it has optional ones).
struct ArchEntry {
  const char* name;
  ArchTraits traits;
};
constexpr ArchTraits Llama() {
  ArchTraits t;
  t.sliding_window = true;  // Mistral
  return t;
}
constexpr ArchTraits Qwen(bool qwen3) {
  ArchTraits t;
  t.rope = ArchTraits::Rope::kNeox;
  t.qkv_bias = !qwen3;
  t.qk_norm = qwen3;
  return t;
}
constexpr ArchTraits Gemma(bool gemma3) {
  ArchTraits t;
  t.rope = ArchTraits::Rope::kNeox;
  t.qk_norm = gemma3;
  t.ffn = ArchTraits::Ffn::kGeluTanh;
  t.gemma = true;
  t.sliding_window = true;
  t.swa_pattern = gemma3 ? 6 : 2;
  t.default_window = gemma3 ? 0 : 4096;
  t.swa_rope_base = gemma3 ? 10000.0f : 0.0f;
  t.attn_softcap = gemma3 ? 0.0f : 50.0f;
  t.final_softcap = gemma3 ? 0.0f : 30.0f;
  t.gemma_wide_scale_layers = gemma3 ? 62 : 46;
  return t;
}
constexpr ArchEntry kArchs[] = {
    {"llama", Llama()},       {"qwen2", Qwen(false)},  {"qwen3", Qwen(true)},
    {"gemma2", Gemma(false)}, {"gemma3", Gemma(true)},
};

// A positive float key into *out, when the file has it.
absl::Status ReadOptionalPositive(const GgufFile& f, const std::string& key,
                                  float* out) {
  if (!f.Has(key)) return absl::OkStatus();
  absl::StatusOr<double> v = f.GetFloat(key);
  if (!v.ok() || !(*v >= 0) || *v > 1e6) {
    return absl::InvalidArgumentError(absl::StrCat("model config: bad ", key));
  }
  *out = static_cast<float>(*v);
  return absl::OkStatus();
}

absl::StatusOr<int> ReadPositive(const GgufFile& f, const std::string& key) {
  absl::StatusOr<int64_t> v = f.GetInt(key);
  if (!v.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: ", v.status().message()));
  }
  if (*v <= 0 || *v > (1 << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: ", key, " = ", *v, " is out of range"));
  }
  return static_cast<int>(*v);
}

// braid.streams.*; c->n_vocab must be set.
absl::Status ReadStreams(const GgufFile& f, LlamaConfig* c) {
  constexpr const char* kCount = "braid.streams.count";
  constexpr const char* kRoles = "braid.streams.roles";
  constexpr const char* kLayout = "braid.streams.layout";
  constexpr const char* kSilence = "braid.streams.silence_token_id";
  if (!f.Has(kCount)) {
    for (const char* key : {kRoles, kLayout, kSilence}) {
      if (f.Has(key)) {
        return absl::InvalidArgumentError(
            absl::StrCat("model config: ", key, " is given without ", kCount));
      }
    }
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> count = f.GetInt(kCount);
  if (!count.ok() || *count < 1 || *count > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: ", kCount, " must be an integer in [1, 1024]"));
  }
  c->n_streams = static_cast<int>(*count);
  if (f.Has(kRoles)) {
    absl::StatusOr<std::vector<std::string>> roles = f.GetStringArray(kRoles);
    if (!roles.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model config: ", kRoles, " must be a string array"));
    }
    if (static_cast<int64_t>(roles->size()) != *count) {
      return absl::InvalidArgumentError(
          absl::StrCat("model config: ", kRoles, " has ", roles->size(),
                       " entries, ", kCount, " is ", *count));
    }
    c->stream_roles = *std::move(roles);
  }
  if (f.Has(kLayout)) {
    absl::StatusOr<std::string> layout = f.GetString(kLayout);
    if (layout.ok() && *layout == "aligned") {
      c->stream_layout = LlamaConfig::StreamLayout::kAligned;
    } else if (layout.ok() && *layout == "rows") {
      c->stream_layout = LlamaConfig::StreamLayout::kRows;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "model config: ", kLayout, " must be \"aligned\" or \"rows\""));
    }
  }
  if (f.Has(kSilence)) {
    absl::StatusOr<int64_t> silence = f.GetInt(kSilence);
    if (!silence.ok() || *silence < 0 || *silence >= c->n_vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("model config: ", kSilence,
                       " must be a token id in [0, ", c->n_vocab, ")"));
    }
    c->silence_token_id = static_cast<int>(*silence);
  } else if (c->stream_layout == LlamaConfig::StreamLayout::kRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: the rows layout needs ", kSilence));
  }
  return absl::OkStatus();
}

// The sliding window, soft-capping and Gemma's scales; c's sizes and RoPE
// must be read.
absl::Status ReadWindowAndCaps(const GgufFile& f, const std::string& p,
                               LlamaConfig* c) {
  const ArchTraits& t = c->traits;
  c->swa_rope_base = t.swa_rope_base > 0 ? t.swa_rope_base : c->rope_base;
  c->swa_rope_freq_scale = t.swa_rope_base > 0 ? 1.0f : c->rope_freq_scale;
  if (t.sliding_window) {
    c->sliding_window = t.default_window;
    if (f.Has(p + "attention.sliding_window")) {
      absl::StatusOr<int64_t> w = f.GetInt(p + "attention.sliding_window");
      if (!w.ok() || *w < 0 || *w > (1 << 30)) {
        return absl::InvalidArgumentError(
            "model config: bad attention.sliding_window");
      }
      c->sliding_window = static_cast<int>(*w);
    }
  }
  c->attn_softcap = t.attn_softcap;
  c->final_softcap = t.final_softcap;
  if (t.attn_softcap > 0) {  // (llama.cpp reads it where it caps by default)
    BRAID_RETURN_IF_ERROR(ReadOptionalPositive(f, p + "attn_logit_softcapping",
                                               &c->attn_softcap));
  }
  if (t.gemma) {
    BRAID_RETURN_IF_ERROR(ReadOptionalPositive(f, p + "final_logit_softcapping",
                                               &c->final_softcap));
    const int scalar = c->n_layer == t.gemma_wide_scale_layers
                           ? c->n_embd / c->n_head
                           : c->head_dim;
    c->q_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
  }
  return absl::OkStatus();
}

// The heads: <arch>.attention.head_count_kv (default n_head) and a head
// size of its own (attention.key_length, equal to value_length), else
// n_embd / n_head.
absl::Status ReadHeads(const GgufFile& f, const std::string& p,
                       LlamaConfig* c) {
  c->n_head_kv = c->n_head;
  if (f.Has(p + "attention.head_count_kv")) {
    BRAID_ASSIGN_OR_RETURN(c->n_head_kv,
                           ReadPositive(f, p + "attention.head_count_kv"));
  }
  if (c->n_head % c->n_head_kv != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: n_head ", c->n_head,
                     " not divisible by n_head_kv ", c->n_head_kv));
  }
  if (f.Has(p + "attention.key_length")) {
    // A head size of its own (qwen3: 128 with n_embd / n_head = 64).
    BRAID_ASSIGN_OR_RETURN(c->head_dim,
                           ReadPositive(f, p + "attention.key_length"));
    int value_length = c->head_dim;
    if (f.Has(p + "attention.value_length")) {
      BRAID_ASSIGN_OR_RETURN(value_length,
                             ReadPositive(f, p + "attention.value_length"));
    }
    if (value_length != c->head_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model config: attention.value_length ", value_length,
          " != attention.key_length ", c->head_dim, " is not supported"));
    }
  } else {
    if (c->n_embd % c->n_head != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model config: n_embd ", c->n_embd,
                       " not divisible by n_head ", c->n_head));
    }
    c->head_dim = c->n_embd / c->n_head;
  }
  return absl::OkStatus();
}

// RoPE: the rotated dims, the base and the scaling type (none or linear;
// Llama 3's per-dim factors are the rope_freqs.weight tensor).
absl::Status ReadRope(const GgufFile& f, const std::string& p, LlamaConfig* c) {
  c->n_rot = c->head_dim;
  if (f.Has(p + "rope.dimension_count")) {
    BRAID_ASSIGN_OR_RETURN(c->n_rot,
                           ReadPositive(f, p + "rope.dimension_count"));
    if (c->n_rot > c->head_dim || c->n_rot % 2 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model config: rope.dimension_count ", c->n_rot,
                       " must be even and <= head_dim ", c->head_dim));
    }
  }
  if (f.Has(p + "rope.freq_base")) {
    absl::StatusOr<double> v = f.GetFloat(p + "rope.freq_base");
    if (!v.ok() || !(*v > 0)) {
      return absl::InvalidArgumentError("model config: bad rope.freq_base");
    }
    c->rope_base = static_cast<float>(*v);
  }
  if (f.Has(p + "rope.scaling.type")) {
    absl::StatusOr<std::string> t = f.GetString(p + "rope.scaling.type");
    if (t.ok() && *t == "linear") {
      absl::StatusOr<double> factor = f.GetFloat(p + "rope.scaling.factor");
      if (!factor.ok() || !(*factor >= 1)) {
        return absl::InvalidArgumentError(
            "model config: rope.scaling.type linear needs rope.scaling.factor "
            ">= 1");
      }
      c->rope_freq_scale = static_cast<float>(1.0 / *factor);
    } else if (!t.ok() || *t != "none") {
      return absl::UnimplementedError(absl::StrCat(
          "model config: rope.scaling.type '", t.ok() ? *t : "?",
          "' is not supported (braid reads none and linear, and Llama 3's "
          "rope_freqs.weight)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const ArchTraits* FindArch(const std::string& arch) {
  for (const ArchEntry& e : kArchs) {
    if (arch == e.name) return &e.traits;
  }
  return nullptr;
}

const char* SupportedArchs() {
  static const std::string* const names = [] {
    auto* out = new std::string;
    for (const ArchEntry& e : kArchs) {
      absl::StrAppend(out, out->empty() ? "" : ", ", e.name);
    }
    return out;
  }();
  return names->c_str();
}

absl::StatusOr<LlamaConfig> LlamaConfig::FromGguf(const GgufFile& f) {
  LlamaConfig c;
  absl::StatusOr<std::string> arch = f.GetString("general.architecture");
  if (!arch.ok()) {
    return absl::InvalidArgumentError(
        "model config: missing general.architecture");
  }
  const ArchTraits* traits = FindArch(*arch);
  if (traits == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: unsupported architecture '", *arch,
                     "' (braid reads ", SupportedArchs(), ")"));
  }
  c.arch = *arch;
  c.traits = *traits;
  const std::string p = c.arch + ".";
  for (auto [key, field] : {std::pair{"context_length", &c.n_ctx_train},
                            {"embedding_length", &c.n_embd},
                            {"block_count", &c.n_layer},
                            {"feed_forward_length", &c.n_ff},
                            {"attention.head_count", &c.n_head}}) {
    BRAID_ASSIGN_OR_RETURN(*field, ReadPositive(f, p + key));
  }
  BRAID_RETURN_IF_ERROR(ReadHeads(f, p, &c));
  BRAID_RETURN_IF_ERROR(ReadRope(f, p, &c));
  absl::StatusOr<double> eps =
      f.GetFloat(p + "attention.layer_norm_rms_epsilon");
  if (!eps.ok() || !(*eps > 0) || *eps > 1) {
    return absl::InvalidArgumentError(
        "model config: missing or bad attention.layer_norm_rms_epsilon");
  }
  c.rms_eps = static_cast<float>(*eps);
  BRAID_RETURN_IF_ERROR(ReadWindowAndCaps(f, p, &c));
  const GgufTensor* emb = f.FindTensor("token_embd.weight");
  if (emb == nullptr || emb->dims.size() != 2) {
    return absl::InvalidArgumentError(
        "model config: missing 2-D tensor token_embd.weight");
  }
  if (emb->dims[0] != c.n_embd || emb->dims[1] > (1 << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: token_embd.weight row length ",
                     emb->dims[0], " != n_embd ", c.n_embd));
  }
  c.n_vocab = static_cast<int>(emb->dims[1]);
  BRAID_RETURN_IF_ERROR(ReadStreams(f, &c));
  return c;
}

ModelInfo DescribeModel(const LlamaConfig& c, const GgufFile& file,
                        const std::string& backend) {
  ModelInfo i;
  i.name = file.GetString("general.name").value_or("");
  i.architecture = c.arch;
  i.n_vocab = c.n_vocab;
  i.n_ctx_train = c.n_ctx_train;
  i.n_layer = c.n_layer;
  i.n_embd = c.n_embd;
  i.n_head = c.n_head;
  i.n_head_kv = c.n_head_kv;
  std::set<std::string> types;
  for (const GgufTensor& t : file.tensors()) {
    types.insert(GgmlTypeName(static_cast<uint32_t>(t.type)));
  }
  i.tensor_types.assign(types.begin(), types.end());
  i.backend = backend;
  i.n_streams = c.n_streams;
  i.stream_roles = c.stream_roles;
  i.stream_layout = c.stream_layout;
  i.silence_token_id = c.silence_token_id;
  return i;
}

}  // namespace braid::model
