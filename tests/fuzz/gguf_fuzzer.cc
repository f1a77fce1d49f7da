// libFuzzer target: arbitrary bytes as a GGUF file (the reader's own
// validation, docs/ARCHITECTURE.md), then as a tokenizer's vocabulary when
// the file parses. Errors are fine; crashes, hangs, leaks and out-of-bounds
// reads are not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/gguf.h"
#include "model/tokenizer/gguf_loader.h"
#include "model/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = braid::model::GgufFile::FromBytes(
      std::string(reinterpret_cast<const char*>(data), size));
  if (!file.ok()) return 0;
  auto vocab = braid::model::TokenizerDataFromGguf(**file);
  if (!vocab.ok()) return 0;
  auto tokenizer = braid::model::Tokenizer::Create(*std::move(vocab));
  if (tokenizer.ok()) {
    (void)(*tokenizer)
        ->Encode("Hello, world! 123", /*add_special=*/true,
                 /*parse_special=*/true);
  }
  return 0;
}
