// Copies of a GGUF for tests. ConvertMatrices: its quantized matrices (Q4_0,
// Q4_1, Q8_0) as F16, BF16 or F32, for tests of the float weight paths on a
// real model: the same values as tools/gguf_convert.py writes (each
// dequantized value is exact in f32, then rounded to nearest even), the
// other tensors and the metadata copied (integer arrays as int32, other
// arrays as strings or f32). TokenizerOnly: its tokenizer without the
// weights.
#ifndef BRAID_MODEL_TESTING_CONVERT_GGUF_H_
#define BRAID_MODEL_TESTING_CONVERT_GGUF_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/gguf.h"

namespace braid::model::testing {

// The serialized GGUF (v3) image. Errors: InvalidArgument for a target type
// other than F16, BF16 or F32, or a metadata value it cannot copy.
absl::StatusOr<std::string> ConvertMatrices(const GgufFile& src, GgmlType to);

// The serialized GGUF (v3) image of the general.* and tokenizer.* metadata
// of `src`, copied as ConvertMatrices copies it, and no tensor: a file that
// write_random_llama --tokenizer_from reads (a GPU machine without models
// gets this instead of the model). Errors: InvalidArgument for a metadata
// value it cannot copy.
absl::StatusOr<std::string> TokenizerOnly(const GgufFile& src);

}  // namespace braid::model::testing

#endif  // BRAID_MODEL_TESTING_CONVERT_GGUF_H_
