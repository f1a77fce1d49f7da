// Test helper: reads the plain-text vocabulary dumps in testdata/ (written by
// testdata/dump_vocab.py) into a TokenizerData, so tokenizer tests run on the
// real SmolLM2 vocabulary without the GGUF reader.
//
// Thread-safety: pure functions.

#ifndef BRAID_MODEL_TOKENIZER_TESTING_VOCAB_FILE_H_
#define BRAID_MODEL_TOKENIZER_TESTING_VOCAB_FILE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/tokenizer_data.h"

namespace braid::model::testing {

absl::StatusOr<TokenizerData> ReadVocabFile(const std::string& path);

// Path of a file under model/tokenizer/testdata/ inside the test runfiles.
std::string TestDataPath(const std::string& name);

// The SmolLM2-135M tokenizer from testdata/smollm2_vocab.txt (cached; the
// returned pointer lives for the whole test). Fails the test on error.
const Tokenizer& SmolLm2Tokenizer();

}  // namespace braid::model::testing

#endif  // BRAID_MODEL_TOKENIZER_TESTING_VOCAB_FILE_H_
