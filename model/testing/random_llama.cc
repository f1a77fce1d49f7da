#include "model/testing/random_llama.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/quant/quant.h"
#include "kernels/cpu/thread_pool.h"
#include "model/testing/gguf_writer.h"

namespace braid::model::testing {
namespace {

namespace k = ::braid::kernels::cpu;

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

// Random weight tensors for one file, drawn as RandomLlamaSpec::fast_weights
// says (the slow draws in exactly the order the tests were written against).
class Weights {
 public:
  explicit Weights(const RandomLlamaSpec& s)
      : rng_(s.seed), fast_(s.fast_weights), seed_(s.seed) {
    if (fast_) pool_ = std::make_unique<k::ThreadPool>(s.threads);
  }

  // Tensor `name` [dims] of `type`, values of mean `mean` and standard
  // deviation `stddev`.
  void Add(GgufWriter& w, const std::string& name, GgmlType type,
           const std::vector<int64_t>& dims, float stddev, float mean = 0.0f) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    if (!fast_) {
      std::normal_distribution<float> dist(mean, stddev);
      std::vector<float> v(n);
      for (float& x : v) x = dist(rng_);
      w.AddTensorFromFloats(name, type, dims, v);
      return;
    }
    w.AddTensor(
        name, type, dims,
        FastTensor(type, dims[0], n / dims[0], stddev, mean, tensor_index_++));
  }

 private:
  // Rows are drawn in chunks of about kChunkValues values, each chunk from
  // its own SplitMix64 stream (seed, tensor, chunk), quantized as drawn.
  std::string FastTensor(GgmlType type, int64_t row, int64_t n_rows,
                         float stddev, float mean, uint64_t tensor) {
    constexpr int64_t kChunkValues = 1 << 16;
    const auto dtype = static_cast<k::DType>(type);
    const size_t row_bytes = k::DTypeRowBytes(dtype, row);
    const int64_t chunk_rows = std::max<int64_t>(1, kChunkValues / row);
    const int64_t n_chunks = (n_rows + chunk_rows - 1) / chunk_rows;
    // Uniform on [mean - a, mean + a) has variance a^2 / 3.
    const float a = stddev * std::sqrt(3.0f);
    std::string data(row_bytes * n_rows, '\0');
    pool_->ParallelFor(n_chunks, [&](int64_t c) {
      uint64_t state = Mix(Mix(seed_ ^ (tensor << 32)) ^ c);
      std::vector<float> v(row);
      const int64_t end = std::min(n_rows, (c + 1) * chunk_rows);
      for (int64_t r = c * chunk_rows; r < end; ++r) {
        for (float& x : v) {
          state += 0x9e3779b97f4a7c15ull;
          const float u = static_cast<float>(Mix(state) >> 40) * 0x1p-24f;
          x = mean + a * (2.0f * u - 1.0f);
        }
        k::QuantizeRow(dtype, v.data(), &data[r * row_bytes], row);
      }
    });
    return data;
  }

  // SplitMix64's output function.
  static uint64_t Mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  std::mt19937 rng_;
  const bool fast_;
  const uint64_t seed_;
  uint64_t tensor_index_ = 0;
  std::unique_ptr<k::ThreadPool> pool_;
};

}  // namespace

int TokenizerVocabSize(const GgufFile& file) {
  auto tokens = file.GetStringArray("tokenizer.ggml.tokens");
  return tokens.ok() ? static_cast<int>(tokens->size()) : 0;
}

absl::StatusOr<RandomLlamaSpec> NamedLlamaShape(absl::string_view name) {
  RandomLlamaSpec s;
  if (name == "smollm2-135m") {
    s.n_vocab = 49152;
    s.n_embd = 576;
    s.n_ff = 1536;
    s.n_layer = 30;
    s.n_head = 9;
    s.n_head_kv = 3;
    s.n_ctx_train = 8192;
    s.rope_base = 100000.0f;
    return s;
  }
  if (name == "llama-1b" || name == "llama-8b") {
    const bool big = name == "llama-8b";
    s.n_vocab = 128256;
    s.n_embd = big ? 4096 : 2048;
    s.n_ff = big ? 14336 : 8192;
    s.n_layer = big ? 32 : 16;
    s.n_head = 32;
    s.n_head_kv = 8;
    s.n_ctx_train = 131072;
    s.rope_base = 500000.0f;
    s.tied_embeddings = !big;
    return s;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown shape \"", name, "\": smollm2-135m, llama-1b or llama-8b"));
}

absl::StatusOr<GgmlType> GgmlTypeFromName(absl::string_view name) {
  for (GgmlType t :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ4_0,
        GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
        GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
        GgmlType::kQ6_K, GgmlType::kIQ4_NL}) {
    if (absl::EqualsIgnoreCase(name, GgmlTypeName(static_cast<uint32_t>(t)))) {
      return t;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown tensor type \"", name, "\""));
}

std::string MakeRandomLlamaGguf(const RandomLlamaSpec& s) {
  Weights weights(s);
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
  weights.Add(w, "token_embd.weight", s.embedding_type, {e, s.n_vocab}, 1.0f);
  weights.Add(w, "output_norm.weight", GgmlType::kF32, {e}, 0.1f, 1.0f);
  if (!s.tied_embeddings) {
    weights.Add(w, "output.weight", s.embedding_type, {e, s.n_vocab}, scale);
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
    weights.Add(w, p + "attn_norm.weight", GgmlType::kF32, {e}, 0.1f, 1.0f);
    weights.Add(w, p + "ffn_norm.weight", GgmlType::kF32, {e}, 0.1f, 1.0f);
    weights.Add(w, p + "attn_q.weight", t, {e, e}, scale);
    weights.Add(w, p + "attn_k.weight", t, {e, kv}, scale);
    weights.Add(w, p + "attn_v.weight", t, {e, kv}, scale);
    weights.Add(w, p + "attn_output.weight", t, {e, e}, scale);
    weights.Add(w, p + "ffn_gate.weight", t, {e, s.n_ff}, scale);
    weights.Add(w, p + "ffn_up.weight", t, {e, s.n_ff}, scale);
    weights.Add(w, p + "ffn_down.weight", t, {s.n_ff, e}, scale);
  }
  return w.Serialize();
}

}  // namespace braid::model::testing
