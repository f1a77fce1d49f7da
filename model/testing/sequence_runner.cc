#include "model/testing/sequence_runner.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/batch.h"

namespace braid::model::testing {

SequenceRunner::SequenceRunner(LlamaModel& model, int max_tokens,
                               int block_size)
    : model_(model),
      pool_(model.NewPagedKvPool(
          block_size, std::max(1, (max_tokens + block_size - 1) / block_size))),
      block_table_(pool_.num_blocks()) {
  std::iota(block_table_.begin(), block_table_.end(), 0);
}

absl::Status SequenceRunner::Forward(absl::Span<const int32_t> tokens,
                                     bool all_logits,
                                     std::vector<float>* logits) {
  const int n = static_cast<int>(tokens.size());
  if (size_ + n > capacity()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("SequenceRunner: the pool holds ", size_, " of ",
                     capacity(), " entries; ", n, " more do not fit"));
  }
  Batch batch;
  batch.tokens.assign(tokens.begin(), tokens.end());
  for (int t = 0; t < n; ++t) batch.meta.push_back(EntryMeta{0, size_ + t});
  BatchSequence seq;
  seq.num_tokens = n;
  seq.num_cached = size_;
  seq.block_table = block_table_;
  seq.logits =
      all_logits ? BatchSequence::Logits::kAll : BatchSequence::Logits::kLast;
  batch.sequences.push_back(std::move(seq));
  if (absl::Status s = model_.Forward(batch, pool_, logits); !s.ok()) return s;
  size_ += n;
  return absl::OkStatus();
}

void SequenceRunner::Truncate(int n) { size_ = std::clamp(n, 0, size_); }

}  // namespace braid::model::testing
