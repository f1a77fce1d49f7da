#include "model/top_logits.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace braid::model {

absl::Status CheckTopRequest(const TopRequest& req, int n_vocab, int n_rows) {
  if (req.k < 1 || req.k > std::min(n_vocab, kMaxTopLogits)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ForwardTop: k = ", req.k, ", must be in [1, ",
                     std::min(n_vocab, kMaxTopLogits), "]"));
  }
  for (const auto& [what, size] :
       {std::pair<const char*, size_t>{"draws", req.draws.size()},
        {"penalties", req.penalties.size()}}) {
    if (n_rows >= 0 && size != 0 && size != static_cast<size_t>(n_rows)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ForwardTop: ", size, " ", what, " for ", n_rows, " logits rows"));
    }
  }
  for (const RowPenalties& p : req.penalties) {
    if (p.ids.size() != p.output_counts.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ForwardTop: penalties of ", p.ids.size(), " ids with ",
                       p.output_counts.size(), " counts"));
    }
  }
  return absl::OkStatus();
}

void ApplyPenalties(const RowPenalties& p, float* row, int n_vocab) {
  const bool repetition = p.repetition != 1.0f;
  const bool output = p.frequency != 0.0f || p.presence != 0.0f;
  for (size_t i = 0; i < p.ids.size(); ++i) {
    const int32_t t = p.ids[i];
    if (t < 0 || t >= n_vocab) continue;
    float& l = row[t];
    if (repetition) l = l > 0 ? l / p.repetition : l * p.repetition;
    const int32_t n = p.output_counts[i];
    if (output && n > 0) l -= p.frequency * n + p.presence;
  }
}

int32_t DrawInIdOrder(const float* row, int64_t n, const RowDraw& d) {
  float max = row[0] * d.inv_temperature;
  for (int64_t i = 1; i < n; ++i)
    max = std::max(max, row[i] * d.inv_temperature);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += std::exp(row[i] * d.inv_temperature - max);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    total +=
        static_cast<float>(std::exp(row[i] * d.inv_temperature - max) / sum);
  }
  const double target = d.u * total;
  double cum = 0;
  for (int64_t i = 0; i < n; ++i) {
    cum += static_cast<float>(std::exp(row[i] * d.inv_temperature - max) / sum);
    if (target < cum) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(n - 1);
}

double NucleusSum(const float* row, int64_t n, float inv_temperature,
                  std::vector<float>* scratch) {
  scratch->resize(n);
  for (int64_t i = 0; i < n; ++i) (*scratch)[i] = row[i] * inv_temperature;
  std::sort(scratch->begin(), scratch->end(), std::greater<float>());
  const float max = (*scratch)[0];
  double sum = 0;
  for (float v : *scratch) sum += std::exp(v - max);
  return sum;
}

float LogSumExp(const float* row, int64_t n) {
  const float max = *std::max_element(row, row + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += std::exp(static_cast<double>(row[i] - max));
  }
  return max + static_cast<float>(std::log(sum));
}

void ReduceLogits(const float* rows, int n_rows, int n_vocab,
                  const TopRequest& req, TopLogits* out) {
  const int k = req.k;
  out->k = k;
  out->ids.resize(static_cast<size_t>(n_rows) * k);
  out->values.resize(out->ids.size());
  out->log_z.resize(req.log_z ? n_rows : 0);
  out->drawn.resize(req.draws.empty() ? 0 : n_rows);
  out->drawn_logit.resize(out->drawn.size());
  out->sums.resize(out->drawn.size());
  for (int r = 0; r < n_rows; ++r) {
    const float* row = rows + int64_t{r} * n_vocab;
    if (!req.penalties.empty() && !req.penalties[r].ids.empty()) {
      out->penalized.assign(row, row + n_vocab);
      ApplyPenalties(req.penalties[r], out->penalized.data(), n_vocab);
      row = out->penalized.data();
    }
    int32_t* ids = out->ids.data() + int64_t{r} * k;
    float* values = out->values.data() + int64_t{r} * k;
    if (k == 1) {
      ids[0] = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
    } else {
      out->order.resize(n_vocab);
      for (int i = 0; i < n_vocab; ++i) out->order[i] = i;
      std::partial_sort(out->order.begin(), out->order.begin() + k,
                        out->order.end(), [row](int32_t a, int32_t b) {
                          return row[a] > row[b] || (row[a] == row[b] && a < b);
                        });
      std::copy_n(out->order.begin(), k, ids);
    }
    for (int j = 0; j < k; ++j) values[j] = row[ids[j]];
    if (req.log_z) out->log_z[r] = LogSumExp(row, n_vocab);
    if (!req.draws.empty()) {
      const RowDraw& d = req.draws[r];
      const bool draws = d.inv_temperature > 0.0f;
      out->drawn[r] = draws && d.u >= 0 ? DrawInIdOrder(row, n_vocab, d) : -1;
      out->drawn_logit[r] = out->drawn[r] >= 0 ? row[out->drawn[r]] : 0.0f;
      out->sums[r] =
          draws && d.u < 0
              ? NucleusSum(row, n_vocab, d.inv_temperature, &out->scaled)
              : 0.0;
    }
  }
}

}  // namespace braid::model
