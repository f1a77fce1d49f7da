#include "model/testing/random_llama.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/testing/gguf_writer.h"

namespace braid::model::testing {
namespace {

// The keys model/tokenizer/gguf_loader reads (and the chat template).
void CopyTokenizer(const GgufFile& from, GgufWriter& w) {
  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.pre",
                          "tokenizer.chat_template"}) {
    if (auto v = from.GetString(key); v.ok()) w.AddString(key, *v);
  }
  for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.merges"}) {
    if (auto v = from.GetStringArray(key); v.ok()) w.AddStringArray(key, *v);
  }
  if (auto v = from.GetIntArray("tokenizer.ggml.token_type"); v.ok()) {
    w.AddInt32Array("tokenizer.ggml.token_type",
                    std::vector<int32_t>(v->begin(), v->end()));
  }
  for (const char* name : {"bos", "eos", "unknown", "padding", "eot"}) {
    const std::string key = absl::StrCat("tokenizer.ggml.", name, "_token_id");
    if (auto v = from.GetInt(key); v.ok()) {
      w.AddUint32(key, static_cast<uint32_t>(*v));
    }
  }
  for (const char* key :
       {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"}) {
    if (auto v = from.GetBool(key); v.ok()) w.AddBool(key, *v);
  }
}

}  // namespace

int TokenizerVocabSize(const GgufFile& file) {
  auto tokens = file.GetStringArray("tokenizer.ggml.tokens");
  return tokens.ok() ? static_cast<int>(tokens->size()) : 0;
}

std::string MakeRandomLlamaGguf(const RandomLlamaSpec& s) {
  std::mt19937 rng(s.seed);
  auto random = [&](int64_t n, float stddev, float mean = 0.0f) {
    std::normal_distribution<float> dist(mean, stddev);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
  };
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.context_length", s.n_ctx_train);
  w.AddUint32("llama.embedding_length", s.n_embd);
  w.AddUint32("llama.block_count", s.n_layer);
  w.AddUint32("llama.feed_forward_length", s.n_ff);
  w.AddUint32("llama.attention.head_count", s.n_head);
  w.AddUint32("llama.attention.head_count_kv", s.n_head_kv);
  w.AddFloat32("llama.rope.freq_base", s.rope_base);
  w.AddFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  if (s.n_streams > 0) w.AddUint32("braid.streams.count", s.n_streams);
  if (!s.stream_roles.empty()) {
    w.AddStringArray("braid.streams.roles", s.stream_roles);
  }
  if (!s.stream_layout.empty()) {
    w.AddString("braid.streams.layout", s.stream_layout);
  }
  if (s.silence_token_id >= 0) {
    w.AddInt32("braid.streams.silence_token_id", s.silence_token_id);
  }
  if (s.tokenizer_from != nullptr) CopyTokenizer(*s.tokenizer_from, w);
  const int64_t e = s.n_embd;
  const int64_t kv = static_cast<int64_t>(s.n_head_kv) * (e / s.n_head);
  const float scale = 1.0f / std::sqrt(static_cast<float>(e));
  w.AddTensorFromFloats("token_embd.weight", s.embedding_type, {e, s.n_vocab},
                        random(e * s.n_vocab, 1.0f));
  w.AddTensorFromFloats("output_norm.weight", GgmlType::kF32, {e},
                        random(e, 0.1f, 1.0f));
  if (!s.tied_embeddings) {
    w.AddTensorFromFloats("output.weight", s.embedding_type, {e, s.n_vocab},
                          random(e * s.n_vocab, scale));
  }
  if (s.stream_embedding) {
    // Its own generator, so the other weights do not depend on it.
    std::mt19937 srng(s.seed ^ 0x5eed);
    std::normal_distribution<float> dist(0.0f, 0.5f);
    const int n =
        s.stream_embd_rows > 0 ? s.stream_embd_rows : std::max(s.n_streams, 1);
    std::vector<float> v(e * n);
    for (float& x : v) x = dist(srng);
    w.AddTensorFromFloats("stream_embd.weight", s.stream_embd_type, {e, n}, v);
  }
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = absl::StrCat("blk.", il, ".");
    const GgmlType t = s.matrix_type;
    w.AddTensorFromFloats(p + "attn_norm.weight", GgmlType::kF32, {e},
                          random(e, 0.1f, 1.0f));
    w.AddTensorFromFloats(p + "ffn_norm.weight", GgmlType::kF32, {e},
                          random(e, 0.1f, 1.0f));
    w.AddTensorFromFloats(p + "attn_q.weight", t, {e, e}, random(e * e, scale));
    w.AddTensorFromFloats(p + "attn_k.weight", t, {e, kv},
                          random(e * kv, scale));
    w.AddTensorFromFloats(p + "attn_v.weight", t, {e, kv},
                          random(e * kv, scale));
    w.AddTensorFromFloats(p + "attn_output.weight", t, {e, e},
                          random(e * e, scale));
    w.AddTensorFromFloats(p + "ffn_gate.weight", t, {e, s.n_ff},
                          random(e * s.n_ff, scale));
    w.AddTensorFromFloats(p + "ffn_up.weight", t, {e, s.n_ff},
                          random(e * s.n_ff, scale));
    w.AddTensorFromFloats(p + "ffn_down.weight", t, {s.n_ff, e},
                          random(e * s.n_ff, scale));
  }
  return w.Serialize();
}

}  // namespace braid::model::testing
