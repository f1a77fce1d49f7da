// Logits rows reduced to what sampling needs (batching/sampler.h): each
// row's k largest entries and, when asked, its log-sum-exp. A greedy choice,
// a top-k draw and the reported log-probabilities depend on nothing else, so
// a model on a device returns these instead of whole vocabulary rows
// (Model::ForwardTop, model/model.h).
#ifndef BRAID_MODEL_TOP_LOGITS_H_
#define BRAID_MODEL_TOP_LOGITS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace braid::model {

// The most entries a row is reduced to (kernels/cuda/topk.h's kMaxTopK).
inline constexpr int kMaxTopLogits = 1024;

struct TopRequest {
  int k = 1;           // entries per row, in [1, min(n_vocab, kMaxTopLogits)]
  bool log_z = false;  // also log(sum_i exp(row[i])) of each row
};

struct TopLogits {
  int k = 0;
  // [rows, k]: each row's k largest entries, by value descending, then id
  // ascending among equal values (a greedy choice is the first of the
  // largest, as kernels::cpu::ArgMax's).
  std::vector<int32_t> ids;
  std::vector<float> values;
  std::vector<float> log_z;  // [rows] when asked, else empty
  // Scratch of the host reduction (Model::ForwardTop's default).
  std::vector<float> rows;
  std::vector<int32_t> order;

  int num_rows() const { return k == 0 ? 0 : static_cast<int>(ids.size()) / k; }
};

// InvalidArgument unless 1 <= req.k <= min(n_vocab, kMaxTopLogits).
absl::Status CheckTopRequest(const TopRequest& req, int n_vocab);

// log(sum_i exp(row[i])) as max + log(sum exp(x - max)), summed in double
// in index order.
float LogSumExp(const float* row, int64_t n);

// Reduces rows [n_rows, n_vocab] on the host into *out (req checked by the
// caller): the default of Model::ForwardTop, and the oracle of the device
// reductions.
void ReduceLogits(const float* rows, int n_rows, int n_vocab,
                  const TopRequest& req, TopLogits* out);

}  // namespace braid::model

#endif  // BRAID_MODEL_TOP_LOGITS_H_
