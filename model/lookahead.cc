#include "model/lookahead.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace braid::model {
namespace {

bool SameSequence(const Batch& a, size_t i, const Batch& b, size_t j) {
  const BatchSequence& p = a.sequences[i];
  const BatchSequence& q = b.sequences[j];
  // The lookahead step read and wrote only entries its table covers; the
  // scheduler may have given the sequence more blocks since.
  const bool table_holds =
      q.block_table.size() >= p.block_table.size() &&
      std::equal(p.block_table.begin(), p.block_table.end(),
                 q.block_table.begin());
  return p.num_tokens == q.num_tokens && p.num_cached == q.num_cached &&
         table_holds && p.visible_streams == q.visible_streams &&
         p.logits == q.logits && p.kernel_tokens == q.kernel_tokens &&
         a.tokens[p.first_token] == b.tokens[q.first_token] &&
         a.meta[p.first_token].stream == b.meta[q.first_token].stream &&
         a.meta[p.first_token].y == b.meta[q.first_token].y;
}

}  // namespace

absl::Status CheckAhead(const Batch& ahead, int n_rows) {
  if (ahead.tokens.size() != ahead.sequences.size() ||
      ahead.meta.size() != ahead.tokens.size()) {
    return absl::InvalidArgumentError(
        "lookahead: a batch of one-token sequences expected");
  }
  for (size_t i = 0; i < ahead.sequences.size(); ++i) {
    const BatchSequence& s = ahead.sequences[i];
    if (s.first_token != static_cast<int>(i) || s.num_tokens != 1 ||
        s.logits != BatchSequence::Logits::kLast) {
      return absl::InvalidArgumentError(absl::StrCat(
          "lookahead: sequence ", i, " is not one token with its logits"));
    }
    const int32_t t = ahead.tokens[i];
    if (t < 0 && AheadRow(t) >= n_rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "lookahead: token ", i, " names row ", AheadRow(t), " of ", n_rows));
    }
  }
  return absl::OkStatus();
}

Batch ResolveAhead(const Batch& ahead, const TopLogits& top) {
  Batch out = ahead;
  for (int32_t& t : out.tokens) {
    if (t < 0) t = top.ids[static_cast<size_t>(AheadRow(t)) * top.k];
  }
  return out;
}

std::optional<std::vector<int>> MatchAhead(const Batch& resolved,
                                           const Batch& next) {
  if (next.sequences.empty() || next.tokens.size() != next.sequences.size()) {
    return std::nullopt;
  }
  std::vector<int> rows;
  size_t i = 0;
  for (size_t j = 0; j < next.sequences.size(); ++j) {
    while (i < resolved.sequences.size() &&
           !SameSequence(resolved, i, next, j)) {
      ++i;
    }
    if (i == resolved.sequences.size()) return std::nullopt;
    rows.push_back(static_cast<int>(i++));
  }
  return rows;
}

void SelectRows(const TopLogits& from, const std::vector<int>& rows,
                TopLogits* out) {
  const size_t k = from.k;
  out->k = from.k;
  out->ids.resize(rows.size() * k);
  out->values.resize(rows.size() * k);
  out->log_z.resize(from.log_z.empty() ? 0 : rows.size());
  for (size_t j = 0; j < rows.size(); ++j) {
    const size_t r = rows[j];
    std::copy_n(from.ids.begin() + r * k, k, out->ids.begin() + j * k);
    std::copy_n(from.values.begin() + r * k, k, out->values.begin() + j * k);
    if (!from.log_z.empty()) out->log_z[j] = from.log_z[r];
  }
}

}  // namespace braid::model
