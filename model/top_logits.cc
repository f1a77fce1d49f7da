#include "model/top_logits.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace braid::model {

absl::Status CheckTopRequest(const TopRequest& req, int n_vocab, int n_rows) {
  if (req.k < 1 || req.k > std::min(n_vocab, kMaxTopLogits)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ForwardTop: k = ", req.k, ", must be in [1, ",
                     std::min(n_vocab, kMaxTopLogits), "]"));
  }
  if (n_rows >= 0 && !req.draws.empty() &&
      req.draws.size() != static_cast<size_t>(n_rows)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ForwardTop: ", req.draws.size(), " draws for ", n_rows,
                     " logits rows"));
  }
  return absl::OkStatus();
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
  for (int r = 0; r < n_rows; ++r) {
    const float* row = rows + int64_t{r} * n_vocab;
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
      out->drawn[r] =
          d.inv_temperature > 0.0f ? DrawInIdOrder(row, n_vocab, d) : -1;
      out->drawn_logit[r] = out->drawn[r] >= 0 ? row[out->drawn[r]] : 0.0f;
    }
  }
}

}  // namespace braid::model
