// The checks every Model::Forward makes of a batch before it touches the
// cache (model/model.h: an invalid batch changes neither kv nor logits),
// shared by the CPU and CUDA models.
#ifndef BRAID_MODEL_BATCH_CHECK_H_
#define BRAID_MODEL_BATCH_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "model/batch.h"

namespace braid::model {

// What a batch must fit.
struct BatchLimits {
  int n_vocab = 0;
  // Stream ids must lie in [0, n_streams) when > 0 (a model with
  // stream_embd); 0: any stream id.
  int n_streams = 0;
  int64_t block_size = 0;
  int64_t num_blocks = 0;
};

// OK, or InvalidArgument naming the first problem: no tokens, metas and
// tokens of different counts, a token id outside [0, n_vocab), a stream id
// outside [0, n_streams), a negative y or num_cached or kernel_tokens,
// sequences that do not partition the tokens in order, a block table too
// short for its context or with ids outside [0, num_blocks).
absl::Status CheckBatch(const Batch& batch, const BatchLimits& limits);

}  // namespace braid::model

#endif  // BRAID_MODEL_BATCH_CHECK_H_
