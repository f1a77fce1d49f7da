// Runs one sequence through LlamaModel::Forward(const Batch&, PagedKvPool&),
// for tests and tools that feed a single conversation: stream 0, y = context
// index (the causal mask), blocks 0, 1, 2, ... of its own pool in order. Each
// Forward appends tokens to the context, as a chat or a greedy loop does.
// Owns its pool; not thread-safe.
#ifndef BRAID_MODEL_TESTING_SEQUENCE_RUNNER_H_
#define BRAID_MODEL_TESTING_SEQUENCE_RUNNER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "model/cpu/llama.h"
#include "model/cpu/paged_kv.h"

namespace braid::model::testing {

class SequenceRunner {
 public:
  // A pool of ceil(max_tokens / block_size) blocks shaped for `model`, which
  // must outlive the runner.
  SequenceRunner(LlamaModel& model, int max_tokens, int block_size = 16);

  // Appends `tokens` at context indices size() .. size() + n - 1 and writes
  // logits: [n, n_vocab] if all_logits, else [1, n_vocab] for the last token.
  // Errors: ResourceExhausted (capacity() exceeded) and Forward's errors
  // (InvalidArgument: no tokens, token id out of range). On error the context
  // and logits are unchanged.
  absl::Status Forward(absl::Span<const int32_t> tokens, bool all_logits,
                       std::vector<float>* logits);

  // Drops context entries >= n (the next Forward overwrites them); no-op when
  // n >= size(), n < 0 counts as 0.
  void Truncate(int n);

  int size() const { return size_; }
  int capacity() const { return pool_.num_blocks() * pool_.block_size(); }
  PagedKvPool& pool() { return pool_; }

 private:
  LlamaModel& model_;
  PagedKvPool pool_;
  std::vector<int32_t> block_table_;  // 0, 1, ..., num_blocks - 1
  int size_ = 0;
};

}  // namespace braid::model::testing

#endif  // BRAID_MODEL_TESTING_SEQUENCE_RUNNER_H_
