#include "batching/model_executor.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "model/lookahead.h"

namespace braid::batching {

ModelExecutor::ModelExecutor(model::Model* model, int block_size,
                             int num_blocks)
    : model_(model), kv_(model->NewKvCache(block_size, num_blocks)) {}

// A sequence's entries are cut into runs of one stream each, every run its
// own BatchSequence over the sequence's block table: run k starts at context
// index num_cached + (its offset), so it sees the entries of the runs before
// it (computed earlier in entry order) and the kernel masks the rest by the
// visibility rule. A Generate request is one run; a session's lockstep
// decode step of K streams becomes K one-token sequences, each on the kernel
// of a single-stream decode step.
void ModelExecutor::AddSequence(const ScheduledSequence& s,
                                std::vector<int>* sample_rows, int* rows) {
  const int n = static_cast<int>(s.tokens.size());
  for (int a = 0; a < n;) {
    const int32_t stream = s.meta[a].stream;
    int b = a + 1;
    while (b < n && s.meta[b].stream == stream) ++b;
    model::BatchSequence seq;
    seq.first_token = static_cast<int>(batch_.tokens.size());
    seq.num_tokens = b - a;
    seq.num_cached = s.num_cached + a;
    seq.block_table = s.block_table;
    seq.kernel_tokens = s.kernel_tokens;
    if (stream >= 0 && stream < static_cast<int32_t>(s.sees.size())) {
      seq.visible_streams = s.sees[stream];
    }
    bool want_last = false, want_other = false;
    for (const SamplePoint& p : s.samples) {
      if (p.index == b - 1) want_last = true;
      if (p.index >= a && p.index < b - 1) want_other = true;
    }
    seq.logits = want_other  ? model::BatchSequence::Logits::kAll
                 : want_last ? model::BatchSequence::Logits::kLast
                             : model::BatchSequence::Logits::kNone;
    for (size_t j = 0; j < s.samples.size(); ++j) {
      const int idx = s.samples[j].index;
      if (idx < a || idx >= b) continue;
      (*sample_rows)[j] = want_other ? *rows + (idx - a) : *rows;
    }
    if (want_other) {
      *rows += b - a;
    } else if (want_last) {
      *rows += 1;
    }
    for (int i = a; i < b; ++i) {
      const EntryTag t = s.meta[i];
      batch_.tokens.push_back(s.tokens[i]);
      batch_.meta.push_back({t.stream, t.y});
    }
    batch_.sequences.push_back(std::move(seq));
    a = b;
  }
}

// The reduction every sample point of `plan` can sample from (the largest k
// any needs, log Z when any reports log-probabilities, the penalties of
// the rows that have them, the draws of the rows that draw over their whole
// row, their u's taken now), or nullopt when one needs its whole row, a
// drawing or penalized row is shared, or none samples.
std::optional<model::TopRequest> ModelExecutor::TopNeeded(
    const StepPlan& plan, int n_vocab,
    const std::vector<std::vector<int>>& sample_rows, int n_rows) {
  struct Need {
    Sampler* sampler;
    int row;
    model::TopRequest request;
  };
  std::vector<Need> needs;
  std::vector<int> row_samples(n_rows, 0);
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const ScheduledSequence& s = plan.sequences[i];
    for (size_t j = 0; j < s.samples.size(); ++j) {
      Sampler* sampler = s.samples[j].sampler;
      std::optional<model::TopRequest> r = sampler->RowNeeds(n_vocab);
      if (!r.has_value()) return std::nullopt;
      // A nucleus from a reduction only where that spares copying rows.
      const bool nucleus = !r->draws.empty() && r->draws[0].u < 0;
      if (nucleus && !model_->ReducesOnDevice()) return std::nullopt;
      needs.push_back({sampler, sample_rows[i][j], *std::move(r)});
      ++row_samples[sample_rows[i][j]];
    }
  }
  if (needs.empty()) return std::nullopt;
  model::TopRequest top;
  bool draws = false;
  for (Need& n : needs) {
    top.k = std::max(top.k, n.request.k);
    top.log_z = top.log_z || n.request.log_z;
    if (n.request.draws.empty() && n.request.penalties.empty()) continue;
    if (row_samples[n.row] > 1) return std::nullopt;
    draws = draws || !n.request.draws.empty();
    if (n.request.penalties.empty()) continue;
    top.penalties.resize(n_rows);
    top.penalties[n.row] = std::move(n.request.penalties[0]);
  }
  if (!draws) return top;
  // Only now, sure of the path, do the drawing samplers take their u's (a
  // nucleus draws on the host: its u < 0 stays).
  top.draws.assign(n_rows, model::RowDraw());
  for (const Need& n : needs) {
    if (n.request.draws.empty()) continue;
    top.draws[n.row] = n.request.draws[0];
    if (top.draws[n.row].u >= 0) top.draws[n.row].u = n.sampler->NextUniform();
  }
  return top;
}

bool ModelExecutor::BuildAhead(const StepPlan& plan) {
  if (!plan.lookahead) return false;
  ahead_.tokens.clear();
  ahead_.meta.clear();
  ahead_.sequences.clear();
  const int block_size = kv_->block_size();
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const ScheduledSequence& s = plan.sequences[i];
    if (s.tokens.size() != 1 || s.samples.size() != 1 ||
        s.samples[0].index != 0 || !s.samples[0].sampler->TakesTop1() ||
        int64_t{block_size} * static_cast<int64_t>(s.block_table.size()) <
            s.num_cached + 2) {
      return false;
    }
    const model::BatchSequence& now = batch_.sequences[i];
    model::BatchSequence next = now;
    next.num_cached = now.num_cached + 1;
    ahead_.sequences.push_back(std::move(next));
    ahead_.tokens.push_back(model::AheadToken(static_cast<int>(i)));
    ahead_.meta.push_back({s.meta[0].stream, s.meta[0].y + 1});
  }
  return !ahead_.sequences.empty();
}

absl::StatusOr<StepOutput> ModelExecutor::Execute(const StepPlan& plan) {
  batch_.tokens.clear();
  batch_.meta.clear();
  batch_.sequences.clear();
  // The logits row of each sample point.
  std::vector<std::vector<int>> sample_rows(plan.sequences.size());
  int rows = 0;
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const ScheduledSequence& s = plan.sequences[i];
    sample_rows[i].assign(s.samples.size(), -1);
    AddSequence(s, &sample_rows[i], &rows);
  }
  const int n_vocab = vocab_size();
  const std::optional<model::TopRequest> top =
      TopNeeded(plan, n_vocab, sample_rows, rows);
  absl::Status st;
  if (top.has_value()) {
    model_->SetLookahead(BuildAhead(plan) ? &ahead_ : nullptr);
    st = model_->ForwardTop(batch_, *kv_, *top, &top_);
  } else {
    st = model_->Forward(batch_, *kv_, &logits_);
  }
  if (!st.ok()) return st;
  StepOutput out;
  out.tokens.resize(plan.sequences.size());
  // Sample points whose nucleus reached past their reduced rows.
  std::vector<std::pair<size_t, size_t>> whole;
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const ScheduledSequence& s = plan.sequences[i];
    out.tokens[i].resize(s.samples.size());
    for (size_t j = 0; j < s.samples.size(); ++j) {
      Sampler* sampler = s.samples[j].sampler;
      const int64_t row = sample_rows[i][j];
      if (top.has_value()) {
        std::optional<SampledToken> t =
            sampler->SampleTop(RowOf(top_, static_cast<int>(row)));
        if (t.has_value()) {
          out.tokens[i][j] = *std::move(t);
        } else {
          whole.emplace_back(i, j);
        }
        continue;
      }
      SampleWholeRow(sampler, row, &out.tokens[i][j]);
    }
  }
  if (whole.empty()) return out;
  // The step again for its whole rows: its K/V entries are written again
  // with the same values, its logits are the same.
  whole_row_samples_ += static_cast<int64_t>(whole.size());
  ++whole_row_reruns_;
  if (absl::Status st = model_->Forward(batch_, *kv_, &logits_); !st.ok()) {
    return st;
  }
  for (const auto& [i, j] : whole) {
    SampleWholeRow(plan.sequences[i].samples[j].sampler, sample_rows[i][j],
                   &out.tokens[i][j]);
  }
  return out;
}

void ModelExecutor::SampleWholeRow(Sampler* sampler, int64_t row,
                                   SampledToken* out) {
  // Branches may share a row: it stays as it is (the sampler copies it only
  // for penalties).
  const int n_vocab = vocab_size();
  const float* logits = logits_.data() + row * n_vocab;
  *out = sampler->Sample(absl::MakeConstSpan(logits, n_vocab), &row_scratch_);
}

}  // namespace braid::batching
