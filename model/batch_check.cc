#include "model/batch_check.h"

#include "absl/strings/str_cat.h"

namespace braid::model {

absl::Status CheckBatch(const Batch& b, const BatchLimits& limits) {
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  if (n == 0) return absl::InvalidArgumentError("Forward: no tokens");
  if (b.meta.size() != b.tokens.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Forward: ", n, " tokens but ", b.meta.size(), " metas"));
  }
  for (int64_t t = 0; t < n; ++t) {
    if (b.tokens[t] < 0 || b.tokens[t] >= limits.n_vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("Forward: token id ", b.tokens[t], " at index ", t,
                       " is outside [0, ", limits.n_vocab, ")"));
    }
    if (limits.n_streams > 0 &&
        (b.meta[t].stream < 0 || b.meta[t].stream >= limits.n_streams)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Forward: stream id ", b.meta[t].stream, " at index ", t,
          " is outside [0, ", limits.n_streams, ") (the model's stream_embd)"));
    }
    if (b.meta[t].y < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Forward: negative y at index ", t));
    }
  }
  int64_t next = 0;
  for (size_t i = 0; i < b.sequences.size(); ++i) {
    const BatchSequence& seq = b.sequences[i];
    if (seq.first_token != next || seq.num_tokens <= 0 ||
        seq.num_tokens > n - next) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Forward: sequence ", i, " covers tokens [", seq.first_token, ", +",
          seq.num_tokens, "); sequences must partition the ", n,
          " tokens in order"));
    }
    if (seq.kernel_tokens < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Forward: sequence ", i, " has kernel_tokens ", seq.kernel_tokens));
    }
    next += seq.num_tokens;
    if (seq.num_cached < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Forward: sequence ", i, " has num_cached < 0"));
    }
    const int64_t n_ctx = int64_t{seq.num_cached} + seq.num_tokens;
    const int64_t need = (n_ctx + limits.block_size - 1) / limits.block_size;
    if (static_cast<int64_t>(seq.block_table.size()) < need) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Forward: sequence ", i, " needs ", need, " blocks for ", n_ctx,
          " entries, its table has ", seq.block_table.size()));
    }
    for (int32_t block : seq.block_table) {
      if (block < 0 || block >= limits.num_blocks) {
        return absl::InvalidArgumentError(
            absl::StrCat("Forward: sequence ", i, " has block id ", block,
                         " outside [0, ", limits.num_blocks, ")"));
      }
    }
  }
  if (next != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("Forward: sequences cover ", next, " of ", n, " tokens"));
  }
  return absl::OkStatus();
}

}  // namespace braid::model
