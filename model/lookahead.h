// Lookahead for greedy decoding (Model::SetLookahead, model/model.h): the
// step the caller expects next, written before this step's tokens are
// known, and how a later step is matched against it. Shared by every model
// that starts the lookahead step early (model/cuda, batching/testing's toy
// model); plain host code.
#ifndef BRAID_MODEL_LOOKAHEAD_H_
#define BRAID_MODEL_LOOKAHEAD_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "model/batch.h"
#include "model/top_logits.h"

namespace braid::model {

// A lookahead batch's token < 0 stands for the top-1 id of the current
// step's logits row AheadRow(token).
inline int AheadRow(int32_t token) { return -1 - token; }
inline int32_t AheadToken(int row) { return -1 - row; }

// InvalidArgument unless every sequence of `ahead` is one token whose
// logits are wanted (kLast) and every token >= 0 or names a row < n_rows.
absl::Status CheckAhead(const Batch& ahead, int n_rows);

// `ahead` with each placeholder replaced by the top-1 id of its row in
// `top` (the current step's reduction).
Batch ResolveAhead(const Batch& ahead, const TopLogits& top);

// When `next` is `resolved` (a resolved lookahead batch) or the sequences
// of it that remain, in order (finished ones dropped), each unchanged (its
// block table may have grown past the lookahead's):
// the index in `resolved` of each sequence (= logits row) of `next`.
std::optional<std::vector<int>> MatchAhead(const Batch& resolved,
                                           const Batch& next);

// out = the rows `rows` of `from`, in that order.
void SelectRows(const TopLogits& from, const std::vector<int>& rows,
                TopLogits* out);

}  // namespace braid::model

#endif  // BRAID_MODEL_LOOKAHEAD_H_
