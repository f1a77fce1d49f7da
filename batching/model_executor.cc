#include "batching/model_executor.h"

#include <utility>

namespace braid::batching {

ModelExecutor::ModelExecutor(model::LlamaModel* model, int block_size,
                             int num_blocks)
    : model_(model), pool_(model->NewPagedKvPool(block_size, num_blocks)) {}

absl::StatusOr<StepOutput> ModelExecutor::Execute(
    const StepPlan& plan, absl::Span<Sampler* const> samplers) {
  batch_.tokens.clear();
  batch_.meta.clear();
  batch_.sequences.clear();
  for (const ScheduledSequence& s : plan.sequences) {
    model::BatchSequence seq;
    seq.first_token = static_cast<int>(batch_.tokens.size());
    seq.num_tokens = static_cast<int>(s.tokens.size());
    seq.num_cached = s.num_cached;
    seq.block_table = s.block_table;
    seq.logits = s.sample ? model::BatchSequence::Logits::kLast
                          : model::BatchSequence::Logits::kNone;
    batch_.sequences.push_back(std::move(seq));
    // Single-stream requests: stream 0, y = context index.
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      batch_.tokens.push_back(s.tokens[i]);
      batch_.meta.push_back({0, s.num_cached + static_cast<int32_t>(i)});
    }
  }
  if (absl::Status st = model_->Forward(batch_, pool_, &logits_); !st.ok()) {
    return st;
  }
  const int n_vocab = vocab_size();
  StepOutput out;
  out.tokens.resize(plan.sequences.size());
  int row = 0;
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    if (!plan.sequences[i].sample) continue;
    absl::Span<float> logits(logits_.data() + int64_t{row} * n_vocab, n_vocab);
    out.tokens[i] = samplers[i]->Sample(logits);
    ++row;
  }
  return out;
}

}  // namespace braid::batching
