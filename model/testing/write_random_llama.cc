// Writes a random-weight Llama GGUF (model/testing/random_llama) with the
// tokenizer of a real model, so that braidd can load and serve it: the
// end-to-end tests of multi-stream serving use it (tests/e2e), and the GPU
// check a full-size one (tools/gpu/e2e.sh).
//
//   write_random_llama --out=/tmp/m.gguf --tokenizer_from=$BRAID_MODEL
//       --roles=system,user,reasoning,output [--layout=aligned]
//   write_random_llama --out=/tmp/m.gguf --tokenizer_from=tokenizer.gguf
//       --shape=smollm2-135m --matrix_type=Q8_0 --fast_weights
//
// --roles sets braid.streams.count (one stream per role) and .roles, and adds
// a stream_embd.weight table; without it the model is single-stream. --shape
// picks a real model's dimensions (NamedLlamaShape), else the model is tiny;
// the vocabulary always follows the tokenizer.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "model/gguf.h"
#include "model/testing/random_llama.h"

ABSL_FLAG(std::string, out, "", "path of the GGUF to write (required)");
ABSL_FLAG(std::string, tokenizer_from, "",
          "GGUF whose tokenizer.* keys are copied (required); the vocabulary "
          "size follows it");
ABSL_FLAG(std::string, roles, "",
          "comma-separated stream roles (braid.streams.roles); empty: a "
          "single-stream model");
ABSL_FLAG(std::string, layout, "aligned",
          "braid.streams.layout: aligned | rows");
ABSL_FLAG(int, silence_token_id, 0,
          "braid.streams.silence_token_id (written for --layout=rows)");
ABSL_FLAG(int, context_length, 2048, "llama.context_length");
ABSL_FLAG(int, seed, 1, "weights' random seed");
ABSL_FLAG(std::string, shape, "",
          "a real model's dimensions: smollm2-135m, llama-1b or llama-8b; "
          "empty: a tiny model");
ABSL_FLAG(std::string, matrix_type, "",
          "GGML type of the attention and FFN matrices (Q4_1, Q8_0, F16, "
          "...); empty: random_llama's default");
ABSL_FLAG(bool, untied_embeddings, false,
          "write a separate output.weight (a random model with tied "
          "embeddings tends to repeat its input token greedily)");
ABSL_FLAG(bool, fast_weights, false,
          "draw the weights with RandomLlamaSpec::fast_weights (all "
          "hardware threads; for the large shapes)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "writes a random-weight Llama GGUF with a real model's tokenizer");
  absl::ParseCommandLine(argc, argv);
  const std::string out = absl::GetFlag(FLAGS_out);
  const std::string from = absl::GetFlag(FLAGS_tokenizer_from);
  if (out.empty() || from.empty()) {
    std::fprintf(stderr,
                 "write_random_llama: --out and --tokenizer_from are "
                 "required\n");
    return 2;
  }
  auto source = braid::model::GgufFile::Open(from);
  if (!source.ok()) {
    std::fprintf(stderr, "write_random_llama: %s: %s\n", from.c_str(),
                 source.status().ToString().c_str());
    return 1;
  }
  braid::model::testing::RandomLlamaSpec spec;
  if (const std::string shape = absl::GetFlag(FLAGS_shape); !shape.empty()) {
    auto named = braid::model::testing::NamedLlamaShape(shape);
    if (!named.ok()) {
      std::fprintf(stderr, "write_random_llama: --shape: %s\n",
                   std::string(named.status().message()).c_str());
      return 2;
    }
    spec = *named;
  }
  if (const std::string t = absl::GetFlag(FLAGS_matrix_type); !t.empty()) {
    auto type = braid::model::testing::GgmlTypeFromName(t);
    if (!type.ok()) {
      std::fprintf(stderr, "write_random_llama: --matrix_type: %s\n",
                   std::string(type.status().message()).c_str());
      return 2;
    }
    spec.matrix_type = *type;
  }
  spec.fast_weights = absl::GetFlag(FLAGS_fast_weights);
  if (absl::GetFlag(FLAGS_untied_embeddings)) spec.tied_embeddings = false;
  spec.tokenizer_from = source->get();
  spec.n_vocab = braid::model::testing::TokenizerVocabSize(**source);
  if (spec.n_vocab <= 0) {
    std::fprintf(stderr, "write_random_llama: %s has no tokenizer\n",
                 from.c_str());
    return 1;
  }
  spec.n_ctx_train = absl::GetFlag(FLAGS_context_length);
  spec.seed = static_cast<uint32_t>(absl::GetFlag(FLAGS_seed));
  const std::string roles = absl::GetFlag(FLAGS_roles);
  if (!roles.empty()) {
    spec.stream_roles = absl::StrSplit(roles, ',');
    spec.n_streams = static_cast<int>(spec.stream_roles.size());
    spec.stream_layout = absl::GetFlag(FLAGS_layout);
    if (spec.stream_layout == "rows") {
      spec.silence_token_id = absl::GetFlag(FLAGS_silence_token_id);
    }
    spec.stream_embedding = true;
  }
  const std::string bytes = braid::model::testing::MakeRandomLlamaGguf(spec);
  std::FILE* f = std::fopen(out.c_str(), "wb");
  bool ok = f != nullptr;
  if (ok) {
    ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    ok = std::fclose(f) == 0 && ok;
  }
  if (!ok) {
    std::fprintf(stderr, "write_random_llama: cannot write %s\n", out.c_str());
    return 1;
  }
  return 0;
}
