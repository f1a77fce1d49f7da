// Builds Llama GGUF files with random weights, for tests that need a model
// but not a real one (shapes, batching, error paths): tiny ones by default,
// and the full shapes of real models (NamedLlamaShape) for the GPU benchmarks
// and checks. Deterministic for a given seed.
#ifndef BRAID_MODEL_TESTING_RANDOM_LLAMA_H_
#define BRAID_MODEL_TESTING_RANDOM_LLAMA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/gguf.h"

namespace braid::model::testing {

struct RandomLlamaSpec {
  int n_vocab = 96;
  int n_embd = 64;
  int n_ff = 96;
  int n_layer = 2;
  int n_head = 4;
  int n_head_kv = 2;
  int n_ctx_train = 128;
  float rope_base = 10000.0f;
  GgmlType matrix_type = GgmlType::kQ4_1;     // Attention and FFN weights.
  GgmlType embedding_type = GgmlType::kQ8_0;  // token_embd (and output).
  bool tied_embeddings = true;  // false: write a separate output.weight.
  uint32_t seed = 1;
  // Multi-stream metadata (docs/MULTISTREAM.md): n_streams > 0 writes
  // braid.streams.count; the roles (when not empty), layout (when not empty)
  // and silence token (when >= 0) keys are written when set (also without a
  // count, to test that error). stream_embedding writes a random
  // stream_embd.weight [stream_embd_rows (0: max(n_streams, 1)), n_embd] of
  // stream_embd_type.
  int n_streams = 0;
  std::vector<std::string> stream_roles;
  std::string stream_layout;
  int silence_token_id = -1;
  bool stream_embedding = false;
  int stream_embd_rows = 0;
  GgmlType stream_embd_type = GgmlType::kF32;
  // When set, the tokenizer.* keys of this file (a real model's) are copied,
  // so that braidd can serve the random model; n_vocab should then be its
  // token count (TokenizerVocabSize).
  const GgufFile* tokenizer_from = nullptr;
  // The weights' generator. false: normal draws from one std::mt19937,
  // tensor by tensor, on the calling thread (the values the tests were
  // written against; ~22 s per billion weights on one core). true: uniform
  // draws of the same mean and variance from a counter-based generator, in
  // chunks of rows that `threads` threads (0: one per hardware thread) draw
  // and quantize in parallel (~3 s per billion weights and thread), for the
  // billions of weights of a benchmark. Both deterministic for a seed, the
  // fast one whatever the thread count.
  bool fast_weights = false;
  int threads = 0;
};

// The full-depth shape of a model that the GPU benchmarks and checks stand
// in for, by name: "smollm2-135m" (SmolLM2-135M), "llama-1b" (Llama-3.2-1B,
// tied embeddings) or "llama-8b" (Llama-3.1-8B, untied), with their GGUFs'
// llama.* values; types, seed and the rest as RandomLlamaSpec's defaults.
// InvalidArgument naming the known shapes for any other name.
absl::StatusOr<RandomLlamaSpec> NamedLlamaShape(absl::string_view name);

// The tensor type named `name` as GgmlTypeName writes it ("Q8_0", "F16";
// any case), among those GgufFile reads; InvalidArgument otherwise.
absl::StatusOr<GgmlType> GgmlTypeFromName(absl::string_view name);

// The number of tokenizer.ggml.tokens of `file`, or 0 without them.
int TokenizerVocabSize(const GgufFile& file);

// The serialized GGUF (v3) image.
std::string MakeRandomLlamaGguf(const RandomLlamaSpec& spec);

}  // namespace braid::model::testing

#endif  // BRAID_MODEL_TESTING_RANDOM_LLAMA_H_
