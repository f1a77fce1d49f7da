// A second implementation of the model seam (model/model.h), for tests: no
// weights, no kernels, its own KV cache. A token's logits are one-hot on
// ToyModel::Next of the tokens its query sees in its cache (the entries of
// its own stream up to its y, and those of the streams it may see strictly
// before it, in context order), so an engine that hands it the wrong
// blocks, positions or visible streams gets different tokens.
#ifndef BRAID_BATCHING_TESTING_TOY_MODEL_H_
#define BRAID_BATCHING_TESTING_TOY_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "model/model.h"

namespace braid::batching::testing {

class ToyModel : public model::Model {
 public:
  explicit ToyModel(int n_vocab);

  // The token after `seen` (the visible context, in order; never empty).
  static int32_t Next(absl::Span<const int32_t> seen, int n_vocab);

  const model::ModelInfo& info() const override { return info_; }
  int64_t KvBlockBytes(int block_size) const override;
  std::unique_ptr<model::KvCache> NewKvCache(int block_size,
                                             int num_blocks) const override;
  absl::Status Forward(const model::Batch& batch, model::KvCache& kv,
                       std::vector<float>* logits) override;
  // Model's host reduction, counted.
  absl::Status ForwardTop(const model::Batch& batch, model::KvCache& kv,
                          const model::TopRequest& req,
                          model::TopLogits* out) override;

  // Steps run so far, and how many of them through ForwardTop.
  int steps() const { return steps_; }
  int top_steps() const { return top_steps_; }

 private:
  model::ModelInfo info_;
  int steps_ = 0, top_steps_ = 0;
};

}  // namespace braid::batching::testing

#endif  // BRAID_BATCHING_TESTING_TOY_MODEL_H_
