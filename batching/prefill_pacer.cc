#include "batching/prefill_pacer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

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

int PrefillPacer::Cap() const {
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
  const double budget =
      std::max((max_slowdown_ - 1) * decode_s_, step_objective_s_ - decode_s_);
  const double tokens = std::floor(budget / per_token);
  return static_cast<int>(
      std::clamp<double>(tokens, min_tokens_, static_cast<double>(kMaxCap)));
}

}  // namespace braid::batching
