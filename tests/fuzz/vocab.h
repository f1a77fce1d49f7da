// The fuzzers' tokenizer: the SentencePiece vocabulary of
// model/tokenizer/testdata (or $BRAID_FUZZ_VOCAB), and the ChatML template.
#ifndef BRAID_TESTS_FUZZ_VOCAB_H_
#define BRAID_TESTS_FUZZ_VOCAB_H_

#include <cstdlib>
#include <memory>
#include <utility>

#include "model/gguf.h"
#include "model/tokenizer/gguf_loader.h"
#include "model/tokenizer/tokenizer.h"

namespace braid::fuzz {

inline constexpr char kChatMl[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + "
    "'\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
    "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Aborts when the vocabulary cannot be read (a broken fuzz setup).
inline std::unique_ptr<model::Tokenizer> LoadTokenizer() {
  const char* vocab = std::getenv("BRAID_FUZZ_VOCAB");
  if (vocab == nullptr) vocab = "model/tokenizer/testdata/spm_vocab.gguf";
  auto file = model::GgufFile::Open(vocab);
  if (!file.ok()) std::abort();
  auto data = model::TokenizerDataFromGguf(**file);
  if (!data.ok()) std::abort();
  auto tokenizer = model::Tokenizer::Create(*std::move(data));
  if (!tokenizer.ok()) std::abort();
  return *std::move(tokenizer);
}

}  // namespace braid::fuzz

#endif  // BRAID_TESTS_FUZZ_VOCAB_H_
