#ifndef BRAID_BATCHING_SAMPLER_H_
#define BRAID_BATCHING_SAMPLER_H_

#include <cstdint>
#include <optional>
#include <random>
#include <unordered_map>
#include <vector>

#include "absl/types/span.h"
#include "model/top_logits.h"

namespace braid::batching {

// Sampling parameters of one request, already validated and with defaults
// applied (see braid.v1.SamplingParams for the meaning of each field).
struct SamplingOptions {
  float temperature = 0.0f;  // 0 = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  uint64_t seed = 0;
  int top_logprobs = 0;  // alternatives per position
  bool logprobs = false;
};

struct TokenChoice {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

// One sampled token with its log-probability under the model's raw
// distribution and, when asked, the most likely alternatives.
struct SampledToken {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<TokenChoice> top;  // most likely first
};

// One logits row as Model::ForwardTop reduced it (model/top_logits.h).
struct ReducedRow {
  absl::Span<const int32_t> ids;  // its largest entries, in TopLogits order
  absl::Span<const float> values;
  float log_z = 0.0f;  // when asked
  int32_t drawn = -1;  // its draw, when it drew
  float drawn_logit = 0.0f;
  double sum = 0.0;  // its nucleus denominator when asked (>= 1), else 0
};
// Row r of `top`.
ReducedRow RowOf(const model::TopLogits& top, int r);

// Turns one row of logits into a token. Owns the request's random generator
// (seeded once, so equal seeds give equal outputs) and the token counts that
// the penalties need. One per request; not thread-safe.
//
// Order of operations, as in llama.cpp and vLLM: penalties on the raw logits,
// then greedy argmax (temperature 0) or temperature -> top-k -> softmax ->
// top-p -> min-p -> draw. Log-probabilities are reported from the raw logits.
class Sampler {
 public:
  Sampler(const SamplingOptions& options, absl::Span<const int32_t> prompt);

  // `logits` [n_vocab] is used as scratch and modified.
  SampledToken Sample(absl::Span<float> logits);
  // The same from a row that must stay as it is (parallel streams share
  // rows): only penalties change logits, and only then are they copied,
  // into *scratch.
  SampledToken Sample(absl::Span<const float> logits,
                      std::vector<float>* scratch);

  // What the next Sample needs of a logits row of n_vocab entries: its k
  // largest entries (and its log-sum-exp when log-probabilities are
  // reported) for a greedy choice or a top-k draw; or (draws, one entry)
  // a draw over the whole row made where the row is, for a temperature
  // without top-k, top-p or min-p (its u from NextUniform, once the step
  // is sure to take that path); or for a nucleus (top-p, min-p, no top-k)
  // the row's kMaxTopLogits largest entries and its softmax denominator
  // (draws, one entry with u < 0); with penalties (penalties, one entry),
  // all of the row they changed. nullopt for the whole row: penalties with
  // log-probabilities need both the raw row and the penalized one.
  std::optional<model::TopRequest> RowNeeds(int n_vocab) const;
  // The uniform number in [0, 1) of the next draw, from the request's
  // generator (each draw takes one).
  double NextUniform();
  // Whether the next token is the row's largest entry, whatever the draw
  // (greedy, or top-k of 1, without penalties).
  bool TakesTop1() const;
  // Sample from a row reduced as RowNeeds asked (at least that many
  // entries): the token and log-probabilities Sample would give from the
  // whole row; nullopt, having changed nothing, when a nucleus reaches past
  // the row's entries (rare: a flat distribution with top-p near 1), for
  // Sample over the whole row instead.
  std::optional<SampledToken> SampleTop(const ReducedRow& row);

  // Records a generated token (for penalties). Sample() calls it itself.
  void Accept(int32_t token_id);
  // A session's turns: tokens that joined the context the stream sees
  // (input, other streams' tokens it sees) count as prompt; at a turn's
  // start the tokens generated before it become prompt too, so a turn is
  // penalized as a Generate request over the same context would be
  // (repetition over prompt and output, frequency and presence over the
  // turn's own tokens).
  void AddPrompt(absl::Span<const int32_t> tokens);
  void StartTurn();

 private:
  bool HasPenalties() const;
  // The penalties of the next token, as the row's reduction applies them.
  model::RowPenalties Penalties() const;
  void ApplyPenalties(absl::Span<float> logits) const;
  int32_t Draw(absl::Span<const float> logits);
  // The draw from candidates_ once top-k has cut it and ordered it.
  int32_t DrawOrdered();
  // candidates_ (ordered, scaled logits) into their probabilities: the
  // softmax over them, or over the whole row whose denominator (of exp(x -
  // max)) is whole_sum.
  void ToProbabilities(std::optional<double> whole_sum);
  // How many of candidates_ (probabilities) top-p and min-p keep; nullopt
  // when `partial` (candidates_ the largest entries of a longer row) and
  // the cut is not sure to fall among them.
  std::optional<size_t> NucleusSize(bool partial) const;
  // The draw among the first n of candidates_ (one u).
  int32_t DrawAmong(size_t n);
  // Picks from `shaped` (after penalties), logprobs from `raw` (before).
  SampledToken Pick(absl::Span<const float> shaped,
                    absl::Span<const float> raw);

  SamplingOptions options_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int> prompt_counts_;
  std::unordered_map<int32_t, int> output_counts_;
  std::vector<std::pair<float, int32_t>> candidates_;  // scratch
};

// log_softmax of one element and the top-n alternatives, from raw logits.
void ComputeLogprobs(absl::Span<const float> logits, int32_t token_id,
                     int top_n, SampledToken* out);

}  // namespace braid::batching

#endif  // BRAID_BATCHING_SAMPLER_H_
