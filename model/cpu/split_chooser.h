// Which way to run a forward step that can run either row-parallel (every
// section split over the pool) or data-parallel (the sequences in parts, one
// a thread), when neither always wins: at 2-7 tokens a thread the faster one
// depends on where the machine runs the pool's threads (on two core
// complexes or one; a VM's vCPUs can move between them while a process
// runs). So the step time of each way is kept for every batch size, as an
// average of recent steps, and the faster way runs, the other one step in
// kProbeEvery to keep its time current (what that costs and gains:
// docs/perf-log/code-notes.md). Either way
// gives the same bits (LlamaModel's batch invariance); only the speed
// depends on the choice. Not thread-safe (one forward pass at a time).
#ifndef BRAID_MODEL_CPU_SPLIT_CHOOSER_H_
#define BRAID_MODEL_CPU_SPLIT_CHOOSER_H_

#include <algorithm>
#include <array>
#include <cstdint>

namespace braid::model {

class SplitChooser {
 public:
  // Batch sizes (tokens) with their own times; larger ones share the last.
  static constexpr int kSizes = 64;
  static constexpr int64_t kProbeEvery = 32;
  // Steps that try each way in turn before the first choice.
  static constexpr int64_t kTrials = 4;
  // Weights of a new step time in the average: the first kTrials / 2 of a
  // way keep the fastest (a size's first steps pay one-time costs); after
  // them a faster step counts more than a slower one, and a slower one as
  // at most kMaxJump times the average (a step the OS interrupted moves it
  // little).
  static constexpr double kWeightFaster = 0.5;
  static constexpr double kWeightSlower = 0.2;
  static constexpr double kMaxJump = 1.5;

  // Whether the next step of `tokens` tokens should run data-parallel.
  bool PickData(int tokens) {
    Times& t = times_[Index(tokens)];
    ++t.steps;
    if (t.steps <= kTrials) return t.steps % 2 == 0;
    const bool data_faster = t.avg[1] < t.avg[0];
    return t.steps % kProbeEvery == 0 ? !data_faster : data_faster;
  }

  // That step took `seconds`.
  void Record(int tokens, bool data, double seconds) {
    Times& t = times_[Index(tokens)];
    double& avg = t.avg[data ? 1 : 0];
    int64_t& n = t.samples[data ? 1 : 0];
    if (n++ < kTrials / 2) {
      avg = n == 1 ? seconds : std::min(avg, seconds);
    } else if (seconds < avg) {
      avg += kWeightFaster * (seconds - avg);
    } else {
      avg += kWeightSlower * (std::min(seconds, kMaxJump * avg) - avg);
    }
  }

 private:
  struct Times {
    double avg[2] = {0, 0};  // seconds a step: row-, data-parallel
    int64_t samples[2] = {0, 0};
    int64_t steps = 0;
  };
  static int Index(int tokens) { return std::clamp(tokens, 0, kSizes - 1); }
  std::array<Times, kSizes> times_;
};

}  // namespace braid::model

#endif  // BRAID_MODEL_CPU_SPLIT_CHOOSER_H_
