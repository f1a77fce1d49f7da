#include "batching/prefill_pacer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace braid::batching {
namespace {

// Weights of a new observation: the decode-only step changes only when
// requests come and go; a prompt's per-token cost climbs with its context.
constexpr double kDecodeWeight = 0.2;
constexpr double kPrefillWeight = 0.3;
constexpr double kProbeWeight = 0.7;
// After this many steps with prefill in a row, one step without (a probe)
// re-measures the decode-only step, which grows as the decoding requests'
// contexts do; otherwise that growth would be charged to the prompt.
constexpr int kProbeEvery = 15;
// The decode-only estimate rises by at most this factor a sample.
constexpr double kMaxRise = 1.1;
// Caps stay below this (a step's token budget bounds them anyway).
constexpr int kMaxCap = 1 << 20;

double Blend(double old_value, double sample, double weight) {
  return old_value == 0 ? sample : old_value + weight * (sample - old_value);
}

}  // namespace

PrefillPacer::PrefillPacer(double max_slowdown, int min_tokens,
                           double step_objective_seconds)
    : max_slowdown_(max_slowdown),
      min_tokens_(std::max(1, min_tokens)),
      step_objective_s_(step_objective_seconds) {}

void PrefillPacer::Observe(int decode_tokens, int prefill_tokens,
                           double seconds) {
  if (max_slowdown_ <= 1 || decode_tokens <= 0 || seconds <= 0) return;
  if (prefill_tokens == 0) {
    // A probe (after paced steps) mostly replaces the old estimate, which
    // may be many steps old.
    // A different set of decoders starts a new estimate.
    const bool same =
        decode_tokens_ > 0 &&
        4 * std::abs(decode_tokens - decode_tokens_) <= decode_tokens_;
    // A sample far above the estimate is mostly noise (the thread pool
    // preempted: a step twice as long): the estimate rises at most
    // kMaxRise a sample, which real growth (the decoders' contexts, a few
    // percent every probe) never needs; one slow probe would otherwise
    // allow every paced step until the next probe half as long again.
    const double sample = same && decode_s_ > 0
                              ? std::min(seconds, kMaxRise * decode_s_)
                              : seconds;
    decode_s_ = Blend(same ? decode_s_ : 0.0, sample,
                      mixed_steps_ > 0 ? kProbeWeight : kDecodeWeight);
    decode_tokens_ = decode_tokens;
    mixed_steps_ = 0;
    return;
  }
  ++mixed_steps_;
  if (decode_s_ == 0) return;
  if (4 * std::abs(decode_tokens - decode_tokens_) > decode_tokens_) {
    mixed_steps_ = kProbeEvery;  // the decoders changed: probe next
    return;
  }
  // What the prefill tokens added; a step faster than the estimate (noise)
  // still counts, as a small positive cost.
  const double added = std::max(seconds - decode_s_, 0.05 * decode_s_);
  per_token_s_ = Blend(per_token_s_, added / prefill_tokens, kPrefillWeight);
}

void PrefillPacer::Reset() {
  decode_s_ = 0;
  per_token_s_ = 0;
  mixed_steps_ = 0;
  decode_tokens_ = 0;
}

double PrefillPacer::PrefillSeconds(int tokens) const {
  if (per_token_s_ > 0) return tokens * per_token_s_;
  if (decode_s_ > 0 && decode_tokens_ > 0) {
    return tokens * decode_s_ / decode_tokens_;
  }
  return 0;
}

double PrefillPacer::RestOfPrompt(int done, double done_seconds,
                                  int left) const {
  const double now = PrefillSeconds(1);  // the cost of token `done`
  if (done <= 0 || done_seconds <= 0 || now <= 0) return PrefillSeconds(left);
  // cost(x) = a + b x: done_seconds = a done + b done^2 / 2, now = a + b done;
  // b kept in [0, now / done] (a >= 0).
  const double k = done;
  const double b = std::clamp(2 * (k * now - done_seconds) / (k * k), 0.0,
                              now / k);
  const double a = now - b * k;
  return a * left + b * ((k + left) * (k + left) - k * k) / 2;
}

int PrefillPacer::Cap(absl::Span<const DuePrompt> prompts) const {
  if (max_slowdown_ <= 1) return 0;
  // Also before any decode-only step was seen (prompts arriving without a
  // pause): a probe gives the estimate.
  if (mixed_steps_ >= kProbeEvery) return kProbe;
  if (decode_s_ == 0) return 0;
  // Before a prompt token was measured beside these decoders, guess that it
  // costs what a decode token's share of the step does (a token at about
  // the same context); the first paced step measures it. Unpaced, that
  // first step took the static limit (64 tokens: 44 ms against 7 ms
  // decode steps, the longest gap of the isolation benchmark).
  const double per_token =
      per_token_s_ > 0 ? per_token_s_ : decode_s_ / decode_tokens_;
  const double slowdown = (max_slowdown_ - 1) * decode_s_;
  const double low = std::floor(slowdown / per_token);
  const double high = std::floor(
      std::max(slowdown, step_objective_s_ - decode_s_) / per_token);
  double tokens = high;
  if (deadlines_) {
    // Earliest due first: by each due time, the work of every prompt due
    // by then must be done; the largest of those shares of the time left
    // is the one to keep. p prompt tokens in a step of decode_s_ + p x
    // per_token seconds give them the share p x per_token / (decode_s_ +
    // p x per_token). A share of time rather than a rate of tokens: a
    // prompt's later tokens cost more (their attention), and its work
    // (RestOfPrompt) counts them so.
    std::vector<DuePrompt> due(prompts.begin(), prompts.end());
    std::sort(due.begin(), due.end(),
              [](const DuePrompt& a, const DuePrompt& b) {
                return a.seconds_left < b.seconds_left;
              });
    double share = 0, work = 0;
    for (const DuePrompt& d : due) {
      work += d.work_seconds;
      share = d.seconds_left <= 0 ? HUGE_VAL
                                  : std::max(share, work / d.seconds_left);
    }
    const double need =
        share >= 1 ? high
                   : std::ceil(share * decode_s_ / ((1 - share) * per_token));
    tokens = std::clamp(need, low, high);
  }
  return static_cast<int>(
      std::clamp<double>(tokens, min_tokens_, static_cast<double>(kMaxCap)));
}

}  // namespace braid::batching
