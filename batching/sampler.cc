#include "batching/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/ops.h"

namespace braid::batching {

Sampler::Sampler(const SamplingOptions& options,
                 absl::Span<const int32_t> prompt)
    : options_(options), rng_(options.seed) {
  for (int32_t t : prompt) ++prompt_counts_[t];
}

void Sampler::Accept(int32_t token_id) { ++output_counts_[token_id]; }

void Sampler::AddPrompt(absl::Span<const int32_t> tokens) {
  for (int32_t t : tokens) ++prompt_counts_[t];
}

void Sampler::StartTurn() {
  for (const auto& [t, n] : output_counts_) prompt_counts_[t] += n;
  output_counts_.clear();
}

bool Sampler::HasPenalties() const {
  return options_.repetition_penalty != 1.0f ||
         options_.frequency_penalty != 0.0f ||
         options_.presence_penalty != 0.0f;
}

model::RowPenalties Sampler::Penalties() const {
  model::RowPenalties p;
  p.repetition = options_.repetition_penalty;
  p.frequency = options_.frequency_penalty;
  p.presence = options_.presence_penalty;
  // Repetition reaches the prompt's tokens too; frequency and presence only
  // the output's (a prompt-only token's count is 0).
  if (p.repetition != 1.0f) {
    for (const auto& [t, n] : prompt_counts_) {
      if (output_counts_.count(t)) continue;
      p.ids.push_back(t);
      p.output_counts.push_back(0);
    }
  }
  for (const auto& [t, n] : output_counts_) {
    p.ids.push_back(t);
    p.output_counts.push_back(n);
  }
  return p;
}

void Sampler::ApplyPenalties(absl::Span<float> logits) const {
  model::ApplyPenalties(Penalties(), logits.data(),
                        static_cast<int>(logits.size()));
}

namespace {

bool ByLogit(const std::pair<float, int32_t>& a,
             const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

}  // namespace

// Temperature, top-k, top-p and min-p shape the candidate set; the draw uses
// one uniform number from the request's generator.
int32_t Sampler::Draw(absl::Span<const float> logits) {
  const float inv_t = 1.0f / options_.temperature;
  size_t keep = logits.size();
  // Only top-p and min-p need the survivors in order; without them (and
  // without top-k) the draw walks the vocabulary in id order, which spares a
  // sort of the whole vocabulary per token.
  const bool ordered = options_.top_p < 1.0f || options_.min_p > 0.0f;
  const bool top_k =
      options_.top_k > 0 && static_cast<size_t>(options_.top_k) < keep;
  if (!top_k && !ordered) {
    return model::DrawInIdOrder(logits.data(), static_cast<int64_t>(keep),
                                {inv_t, NextUniform()});
  }
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    candidates_.emplace_back(logits[i] * inv_t, static_cast<int32_t>(i));
  }
  if (top_k) {
    keep = options_.top_k;
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep,
                      candidates_.end(), ByLogit);
    candidates_.resize(keep);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), ByLogit);
  }
  return DrawOrdered();
}

double Sampler::NextUniform() {
  // 53 random bits -> [0, 1).
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

int32_t Sampler::DrawOrdered() {
  ToProbabilities(std::nullopt);
  return DrawAmong(*NucleusSize(false));
}

void Sampler::ToProbabilities(std::optional<double> whole_sum) {
  // In place (first = probability).
  float max_logit = candidates_[0].first;
  for (const auto& c : candidates_) max_logit = std::max(max_logit, c.first);
  double sum = 0;
  for (auto& c : candidates_) {
    c.first = std::exp(c.first - max_logit);
    sum += c.first;
  }
  if (whole_sum.has_value()) sum = *whole_sum;
  for (auto& c : candidates_) c.first = static_cast<float>(c.first / sum);
}

std::optional<size_t> Sampler::NucleusSize(bool partial) const {
  size_t n = candidates_.size();
  if (options_.top_p < 1.0f) {
    double cum = 0;
    size_t i = 0;
    bool reached = false;
    while (i < n && !reached)
      reached = (cum += candidates_[i++].first) >= options_.top_p;
    // The entries past the candidates (each at most the last one's
    // probability) must all come after the cut: the last kept strictly
    // more likely than the last candidate.
    if (partial &&
        (!reached || !(candidates_[i - 1].first > candidates_.back().first))) {
      return std::nullopt;
    }
    n = std::max<size_t>(i, 1);
  }
  if (options_.min_p > 0.0f) {
    const float floor = options_.min_p * candidates_[0].first;
    size_t m = 1;
    while (m < n && candidates_[m].first >= floor) ++m;
    // Some candidate below the floor: every entry past them is too.
    if (partial && m == candidates_.size()) return std::nullopt;
    n = m;
  }
  return n;
}

int32_t Sampler::DrawAmong(size_t n) {
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += candidates_[i].first;
  const double u = NextUniform() * total;
  double cum = 0;
  for (size_t i = 0; i < n; ++i) {
    cum += candidates_[i].first;
    if (u < cum) return candidates_[i].second;
  }
  return candidates_[n - 1].second;
}

std::optional<model::TopRequest> Sampler::RowNeeds(int n_vocab) const {
  // Log-probabilities are the raw row's, the choice the penalized row's.
  if (HasPenalties() && options_.logprobs) return std::nullopt;
  model::TopRequest need;
  if (HasPenalties()) need.penalties = {Penalties()};
  if (options_.temperature > 0.0f) {
    const bool top_k = options_.top_k > 0 && options_.top_k < n_vocab;
    if (top_k) {
      need.k = options_.top_k;
    } else if (options_.top_p < 1.0f || options_.min_p > 0.0f) {
      // A nucleus: its largest entries and the whole row's denominator.
      need.k = std::min(n_vocab, model::kMaxTopLogits);
      need.draws = {{1.0f / options_.temperature, -1.0}};
    } else {
      need.draws = {{1.0f / options_.temperature, 0.0}};
    }
  }
  if (options_.logprobs) need.k = std::max(need.k, options_.top_logprobs);
  if (need.k > std::min(n_vocab, model::kMaxTopLogits)) return std::nullopt;
  need.log_z = options_.logprobs;
  return need;
}

bool Sampler::TakesTop1() const {
  return !HasPenalties() &&
         (options_.temperature <= 0.0f || options_.top_k == 1);
}

ReducedRow RowOf(const model::TopLogits& top, int r) {
  ReducedRow row;
  const size_t k = top.k;
  row.ids = absl::MakeConstSpan(top.ids.data() + r * k, k);
  row.values = absl::MakeConstSpan(top.values.data() + r * k, k);
  if (!top.log_z.empty()) row.log_z = top.log_z[r];
  if (!top.drawn.empty()) {
    row.drawn = top.drawn[r];
    row.drawn_logit = top.drawn_logit[r];
  }
  // (Only a row that asked for its denominator and drew nothing has one.)
  if (!top.sums.empty() && row.drawn < 0) row.sum = top.sums[r];
  return row;
}

std::optional<SampledToken> Sampler::SampleTop(const ReducedRow& row) {
  const absl::Span<const int32_t> ids = row.ids;
  const absl::Span<const float> values = row.values;
  SampledToken out;
  float logit = values[0];
  if (row.drawn >= 0) {
    out.token_id = row.drawn;
    logit = row.drawn_logit;
  } else if (options_.temperature <= 0.0f) {
    out.token_id = ids[0];
  } else {
    // The row's top-k candidates (a nucleus: all its entries), ordered by
    // the scaled logits as Draw orders them.
    candidates_.clear();
    const float inv_t = 1.0f / options_.temperature;
    const bool nucleus = row.sum > 0.0;  // asked for (it is at least 1)
    const size_t keep =
        nucleus ? ids.size() : std::min<size_t>(options_.top_k, ids.size());
    for (size_t i = 0; i < keep; ++i) {
      candidates_.emplace_back(values[i] * inv_t, ids[i]);
    }
    std::sort(candidates_.begin(), candidates_.end(), ByLogit);
    // (No candidates only when a caller broke RowNeeds' contract.)
    if (candidates_.empty()) {
      out.token_id = ids[0];
    } else if (!nucleus) {
      out.token_id = DrawOrdered();
    } else {
      ToProbabilities(row.sum);
      const std::optional<size_t> n = NucleusSize(true);
      if (!n.has_value()) return std::nullopt;
      out.token_id = DrawAmong(*n);
    }
    for (size_t i = 0; i < keep; ++i) {
      if (ids[i] == out.token_id) logit = values[i];
    }
  }
  if (options_.logprobs) {
    out.logprob = logit - row.log_z;
    const size_t n = std::min<size_t>(options_.top_logprobs, ids.size());
    for (size_t i = 0; i < n; ++i) {
      out.top.push_back({ids[i], values[i] - row.log_z});
    }
  }
  Accept(out.token_id);
  return out;
}

SampledToken Sampler::Sample(absl::Span<float> logits) {
  if (!HasPenalties()) return Pick(logits, logits);
  std::vector<float> raw;
  if (options_.logprobs) raw.assign(logits.begin(), logits.end());
  ApplyPenalties(logits);
  return Pick(logits, raw);
}

SampledToken Sampler::Sample(absl::Span<const float> logits,
                             std::vector<float>* scratch) {
  if (!HasPenalties()) return Pick(logits, logits);
  scratch->assign(logits.begin(), logits.end());
  ApplyPenalties(absl::MakeSpan(*scratch));
  return Pick(*scratch, logits);
}

SampledToken Sampler::Pick(absl::Span<const float> shaped,
                           absl::Span<const float> raw) {
  SampledToken out;
  if (options_.temperature <= 0.0f) {
    out.token_id = static_cast<int32_t>(kernels::cpu::ArgMax(
        shaped.data(), static_cast<int64_t>(shaped.size())));
  } else {
    out.token_id = Draw(shaped);
  }
  if (options_.logprobs) {
    ComputeLogprobs(raw, out.token_id, options_.top_logprobs, &out);
  }
  Accept(out.token_id);
  return out;
}

void ComputeLogprobs(absl::Span<const float> logits, int32_t token_id,
                     int top_n, SampledToken* out) {
  const float log_z = model::LogSumExp(logits.data(), logits.size());
  out->logprob = logits[token_id] - log_z;
  out->top.clear();
  if (top_n <= 0) return;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  top_n = std::min<int>(top_n, static_cast<int>(ids.size()));
  std::partial_sort(
      ids.begin(), ids.begin() + top_n, ids.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
  for (int i = 0; i < top_n; ++i) {
    out->top.push_back({ids[i], logits[ids[i]] - log_z});
  }
}

}  // namespace braid::batching
