// The naive reference of docs/MULTISTREAM.md ("What proves it"): one forward
// pass of a Llama model over every entry of a multi-stream context at once,
// in double precision over dequantized weights, with the explicit visibility
// mask. Plain loops, no paging, no fp16: slow (use tiny models) and
// independent of braid's kernels, so incremental decoding can be checked
// against it (model/multistream_test, batching/multistream_session_test).
//
// Free functions; thread-safe (reads the model's file only).
#ifndef BRAID_MODEL_TESTING_MASKED_REFERENCE_H_
#define BRAID_MODEL_TESTING_MASKED_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "model/cpu/llama.h"

namespace braid::model::testing {

// One entry of the context: its token and its (stream, y) tag. The stream
// selects the stream_embd.weight row when the model has one.
struct MaskedEntry {
  int32_t token;
  int32_t stream;
  int32_t y;
};

// MULTISTREAM.md's rule: entry `b` is visible to query `a` iff b.stream is in
// sees[a.stream] (which lists a.stream itself) and (b.y < a.y, or the same
// stream and b.y <= a.y).
bool MaskedVisible(const std::vector<std::vector<int32_t>>& sees,
                   const MaskedEntry& a, const MaskedEntry& b);

// The logits [n_vocab] of every entry, in the order of `entries` (the order
// does not matter to the result: visibility depends on the tags only).
std::vector<std::vector<float>> MaskedFullForward(
    const LlamaModel& model, const std::vector<MaskedEntry>& entries,
    const std::vector<std::vector<int32_t>>& sees);

// max |a - b| / max |b| over a row.
double RelErr(const std::vector<float>& a, const std::vector<float>& b);

// Worst RelErr over all rows.
double MaxRelErr(const std::vector<std::vector<float>>& a,
                 const std::vector<std::vector<float>>& b);

}  // namespace braid::model::testing

#endif  // BRAID_MODEL_TESTING_MASKED_REFERENCE_H_
