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
#include <optional>
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
  // Model's host reduction, counted; with a lookahead set, runs it right
  // after the step (as a device would while the host works) and answers
  // the next ForwardTop from it when that matches (model/lookahead.h).
  absl::Status ForwardTop(const model::Batch& batch, model::KvCache& kv,
                          const model::TopRequest& req,
                          model::TopLogits* out) override;
  void SetLookahead(const model::Batch* ahead) override;
  // Model's default reduction either way; `on` says it is a device's
  // (Model::ReducesOnDevice).
  bool ReducesOnDevice() const override { return on_device_; }
  void set_reduces_on_device(bool on) { on_device_ = on; }

  // Steps run so far (lookahead steps included), how many of them through
  // ForwardTop, and the ForwardTop calls answered by a lookahead step.
  int steps() const { return steps_; }
  int top_steps() const { return top_steps_; }
  int lookahead_hits() const { return lookahead_hits_; }
  // ForwardTop calls that drew tokens over whole rows (TopRequest::draws).
  int draw_steps() const { return draw_steps_; }

 private:
  model::ModelInfo info_;
  int steps_ = 0, top_steps_ = 0, lookahead_hits_ = 0, draw_steps_ = 0;
  bool on_device_ = false;
  std::optional<model::Batch> ahead_;  // set for the next ForwardTop
  // The lookahead step run, its request and rows.
  std::optional<model::Batch> pending_;
  model::TopRequest pending_req_;
  model::TopLogits pending_top_;
};

}  // namespace braid::batching::testing

#endif  // BRAID_BATCHING_TESTING_TOY_MODEL_H_
