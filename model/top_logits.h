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

// A draw over a whole row, made where the row is: batching's Sampler::Draw
// without top-k, top-p or min-p (DrawInIdOrder), whose token depends on
// every entry. u in [0, 1) comes from the request's generator; u < 0 draws
// nothing but asks for the row's softmax denominator at the temperature
// (TopLogits::sums), with which the host draws a nucleus (top-p, min-p)
// from the row's largest entries.
struct RowDraw {
  float inv_temperature = 0.0f;  // 0: this row draws nothing
  double u = 0.0;
};

// The penalties of one row, as batching's Sampler orders them (llama.cpp's
// and vLLM's order): each token of the context the request has seen
// (prompt and output) has its logit divided by `repetition` when positive,
// multiplied by it otherwise; then each generated token's logit loses
// frequency * its output count + presence.
struct RowPenalties {
  float repetition = 1.0f;
  float frequency = 0.0f;
  float presence = 0.0f;
  // Distinct token ids, and how many times the output holds each (0: only
  // in the prompt).
  std::vector<int32_t> ids;
  std::vector<int32_t> output_counts;
};

struct TopRequest {
  int k = 1;           // entries per row, in [1, min(n_vocab, kMaxTopLogits)]
  bool log_z = false;  // also log(sum_i exp(row[i])) of each row
  // Empty, or one per logits row of the step: their draws.
  std::vector<RowDraw> draws;
  // Empty, or one per logits row: applied to the row before anything else
  // (its top entries, log-sum-exp and draw are the penalized row's).
  std::vector<RowPenalties> penalties;
};

struct TopLogits {
  int k = 0;
  // [rows, k]: each row's k largest entries, by value descending, then id
  // ascending among equal values (a greedy choice is the first of the
  // largest, as kernels::cpu::ArgMax's).
  std::vector<int32_t> ids;
  std::vector<float> values;
  std::vector<float> log_z;  // [rows] when asked, else empty
  // [rows] when draws were asked: each row's drawn id (-1: none) and its
  // logit there, and for the rows that asked for it (u < 0) its softmax
  // denominator sum_i exp(row[i] * t - max_j row[j] * t) (t the
  // inv_temperature; NucleusSum on the host; unspecified for the others).
  std::vector<int32_t> drawn;
  std::vector<float> drawn_logit;
  std::vector<double> sums;
  // Scratch of the host reduction (Model::ForwardTop's default: the step's
  // rows, a penalized row, the sorts).
  std::vector<float> rows;
  std::vector<float> penalized;
  std::vector<int32_t> order;
  std::vector<float> scaled;

  int num_rows() const { return k == 0 ? 0 : static_cast<int>(ids.size()) / k; }
};

// InvalidArgument unless 1 <= req.k <= min(n_vocab, kMaxTopLogits), each
// penalty's ids and counts agree in number, and, once the step's rows are
// known (n_rows >= 0), req.draws and req.penalties are empty or one per row.
absl::Status CheckTopRequest(const TopRequest& req, int n_vocab,
                             int n_rows = -1);

// Applies `p` to row [n_vocab] in place (ids outside it are left): the one
// implementation of the penalties on the host (Sampler's, and the oracle of
// the device's).
void ApplyPenalties(const RowPenalties& p, float* row, int n_vocab);

// The draw of `d` from row [n]: p = softmax(row * inv_temperature) (floats
// of exp / a double sum), walked in id order until the running sum (double)
// passes u * sum(p); the last id when rounding leaves it short.
int32_t DrawInIdOrder(const float* row, int64_t n, const RowDraw& d);

// sum_i exp(row[i] * inv_temperature - max) (the products in float, each
// exp a float) summed in double from the largest product down: the
// denominator of batching's Sampler nucleus over the whole row, bit for bit.
// `scratch` holds the sorted products.
double NucleusSum(const float* row, int64_t n, float inv_temperature,
                  std::vector<float>* scratch);

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
