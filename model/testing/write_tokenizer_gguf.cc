// Writes the tokenizer of a GGUF model without its weights (TokenizerOnly in
// model/testing/convert_gguf.h): the general.* and tokenizer.* metadata, no
// tensor. tools/gpu/prepare.sh carries it to the GPU machine, which has no
// model, for write_random_llama --tokenizer_from.
//
//   write_tokenizer_gguf --from=$BRAID_MODEL --out=.gpu/tokenizer.gguf
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "model/gguf.h"
#include "model/testing/convert_gguf.h"

ABSL_FLAG(std::string, from, "", "the GGUF model to read (required)");
ABSL_FLAG(std::string, out, "", "path of the GGUF to write (required)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "writes a GGUF model's tokenizer (general.* and tokenizer.* keys) "
      "without its tensors");
  absl::ParseCommandLine(argc, argv);
  const std::string from = absl::GetFlag(FLAGS_from);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (from.empty() || out.empty()) {
    std::fprintf(stderr,
                 "write_tokenizer_gguf: --from and --out are "
                 "required\n");
    return 2;
  }
  auto source = braid::model::GgufFile::Open(from);
  if (!source.ok()) {
    std::fprintf(stderr, "write_tokenizer_gguf: %s: %s\n", from.c_str(),
                 source.status().ToString().c_str());
    return 1;
  }
  auto image = braid::model::testing::TokenizerOnly(**source);
  if (!image.ok()) {
    std::fprintf(stderr, "write_tokenizer_gguf: %s\n",
                 image.status().ToString().c_str());
    return 1;
  }
  std::FILE* f = std::fopen(out.c_str(), "wb");
  bool ok = f != nullptr;
  if (ok) {
    ok = std::fwrite(image->data(), 1, image->size(), f) == image->size();
    ok = std::fclose(f) == 0 && ok;
  }
  if (!ok) {
    std::fprintf(stderr, "write_tokenizer_gguf: cannot write %s\n",
                 out.c_str());
    return 1;
  }
  return 0;
}
