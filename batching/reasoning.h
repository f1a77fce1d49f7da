// Routing of a model's thinking section and its budget, shared by Generate
// requests and session output streams.
//
// Tokens from the start-of-thinking marker up to and including the
// end-of-thinking marker belong to the reasoning stream; the rest is output.
// With a budget, once that many tokens were generated inside the thinking
// section the next token is forced to the end marker (the sampled one is
// dropped), so thinking ends and the model answers. Plain value; one per
// request or stream; not thread-safe.
#ifndef BRAID_BATCHING_REASONING_H_
#define BRAID_BATCHING_REASONING_H_

#include <cstdint>

#include "absl/types/span.h"

namespace braid::batching {

// Token ids of the thinking markers (-1 = the model has none).
struct ReasoningMarkers {
  int32_t think_start_id = -1;
  int32_t think_end_id = -1;
};

struct ReasoningOptions {
  int budget = 0;     // reasoning tokens before the end marker; 0 = no limit
  bool hide = false;  // do not send reasoning tokens to the client
};

class ReasoningGate {
 public:
  ReasoningGate() = default;
  // `context`: the tokens before generation (a prompt may open thinking).
  ReasoningGate(const ReasoningMarkers& markers,
                const ReasoningOptions& options,
                absl::Span<const int32_t> context)
      : markers_(markers), options_(options) {
    Observe(context);
  }

  // Context that is not generated (input placed in a session's context):
  // its markers open or close thinking as a prompt's do; its tokens do not
  // count against the budget.
  void Observe(absl::Span<const int32_t> context) {
    for (int32_t t : context) Track(t, /*generated=*/false);
  }

  struct Decision {
    int32_t token = 0;       // the token to keep (the end marker when forced)
    bool reasoning = false;  // belongs to the reasoning stream
    bool forced = false;
  };

  // Decides about a sampled token.
  Decision Next(int32_t sampled) {
    Decision d{sampled, thinking_, false};
    if (thinking_ && options_.budget > 0 && markers_.think_end_id >= 0 &&
        num_thinking_ >= options_.budget && sampled != markers_.think_end_id) {
      d.token = markers_.think_end_id;
      d.forced = true;
    }
    if (!thinking_ && d.token == markers_.think_start_id && d.token >= 0) {
      d.reasoning = true;
    }
    if (d.reasoning) ++num_reasoning_;
    Track(d.token, /*generated=*/true);
    return d;
  }

  bool thinking() const { return thinking_; }
  int num_reasoning() const { return num_reasoning_; }
  const ReasoningOptions& options() const { return options_; }

 private:
  void Track(int32_t t, bool generated) {
    if (t < 0) return;
    if (generated && thinking_ && t != markers_.think_end_id) ++num_thinking_;
    if (t == markers_.think_start_id) {
      thinking_ = true;
      num_thinking_ = 0;
    } else if (t == markers_.think_end_id) {
      thinking_ = false;
    }
  }

  ReasoningMarkers markers_;
  ReasoningOptions options_;
  bool thinking_ = false;
  int num_thinking_ = 0;  // generated tokens in the current thinking section
  int num_reasoning_ = 0;
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_REASONING_H_
