// Paces prompt prefill beside decoding (stream isolation,
// docs/ARCHITECTURE.md): from the measured durations of the engine's steps it
// estimates what a step of only decode tokens takes and what each prefill token
// adds to it, and allows as many prefill tokens per step as keep a step within
// `max_slowdown` times the decode-only step, or within a step-time objective
// (a TPOT objective: the time each decoding stream may wait for its next
// token) when that allows more. With prompt deadlines on, the objective is a
// bound rather than a target: a step takes only as many more prompt tokens
// as the waiting prompts need to meet their due times (earliest first), so
// decoding streams see short steps whenever the prompts can afford them.
// The estimates follow the work
// as it changes (a prompt's tokens cost more as its context grows): both are
// exponential moving averages. Pure bookkeeping; not thread-safe (the engine
// thread owns it).
#ifndef BRAID_BATCHING_PREFILL_PACER_H_
#define BRAID_BATCHING_PREFILL_PACER_H_

#include "absl/types/span.h"

namespace braid::batching {

class PrefillPacer {
 public:
  // A prompt waiting for or in prefill: seconds until its first token is
  // due (<= 0: late) and what computing its entries left takes alone
  // (seconds, RestOfPrompt).
  struct DuePrompt {
    double seconds_left = 0;
    double work_seconds = 0;
  };

  // max_slowdown <= 1 turns pacing off (Cap() is always 0). Caps are at
  // least min_tokens (prompt chunks keep making progress). A step may also
  // take up to `step_objective_seconds` (0 = none) when that is more than
  // max_slowdown x the decode-only step.
  PrefillPacer(double max_slowdown, int min_tokens,
               double step_objective_seconds = 0);

  // One step: its decode and prefill token counts and how long it took.
  // The decode-only step is remembered with its decode tokens; a step with
  // prefill whose decode tokens differ from those by more than a quarter
  // says nothing about the prompt's cost (the decoders changed) and asks
  // for a probe instead.
  void Observe(int decode_tokens, int prefill_tokens, double seconds);

  // Forgets every estimate (the engine went idle: the next busy spell may
  // decode a different set of requests).
  void Reset();

  // Prefill tokens the next step may take while requests decode; 0 while
  // no decode-only step was measured (or pacing is off); before a prefill
  // token's cost is measured, it is taken to be a decode token's share of
  // the decode step; kProbe (no prefill at all)
  // for one step after every 15 steps with prefill in a row, to measure the
  // decode-only step (also when none was ever seen: prompts that keep
  // arriving) and re-measure it as the decoding requests' contexts grow.
  //
  // With deadlines on (UseDeadlines), the cap between the slowdown's and
  // the objective's is the fewest tokens a step that keep every prompt of
  // `prompts` on time, earliest due first: the share of each step's time
  // that prompt work must take from now on, as prompt tokens at the current
  // cost; a late prompt (or more work than can be on time) gets the
  // objective's.
  int Cap(absl::Span<const DuePrompt> prompts = {}) const;
  static constexpr int kProbe = -1;

  // Whether Cap() weighs the prompts' due times (off: prompts always get
  // what the objective allows).
  void UseDeadlines(bool on) { deadlines_ = on; }

  // What computing `tokens` prompt tokens takes at the current per-token
  // estimate (a decode token's share of the decode step before one was
  // measured); 0 while nothing is measured.
  double PrefillSeconds(int tokens) const;
  // What the `left` tokens of a prompt still take, `done` of whose tokens
  // took `done_seconds` (by these estimates as they ran): a prompt token's
  // cost grows linearly with its position (its attention), so the cost per
  // token now and the mean so far give the line, extrapolated; with none
  // done, PrefillSeconds(left).
  double RestOfPrompt(int done, double done_seconds, int left) const;

  // The step-time objective from now on (0 = none); the engine sets the
  // tightest of the decoding requests' TPOT objectives before each step.
  void SetStepObjective(double seconds) { step_objective_s_ = seconds; }

  double decode_step_seconds() const { return decode_s_; }
  double seconds_per_prefill_token() const { return per_token_s_; }

 private:
  const double max_slowdown_;
  const int min_tokens_;
  double step_objective_s_;
  bool deadlines_ = false;
  double decode_s_ = 0;     // decode-only step (0 = not seen yet)
  double per_token_s_ = 0;  // added per prefill token (0 = not seen yet)
  int mixed_steps_ = 0;     // steps with prefill since a decode-only one
  int decode_tokens_ = 0;   // of the last decode-only step
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_PREFILL_PACER_H_
