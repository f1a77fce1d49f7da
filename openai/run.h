// One HTTP request's work in the engine: every prompt's choices, their
// output as one ordered queue of events that the HTTP handler drains.
//
// A prompt with n = 1 is a Generate request (Engine::Submit: admission
// control, deadline, metrics). A prompt with n > 1 is a session whose n
// output streams are branches over the prompt (docs/MULTISTREAM.md), so
// the prompt's KV blocks are computed and stored once (a one-token prompt,
// with nothing to share, is n requests); choice i samples with seed + i. Choice
// indices are prompt * n + branch, as OpenAI numbers them.
//
// Thread-safe: the engine thread pushes, one HTTP thread waits and reads,
// any thread may Cancel.
#ifndef BRAID_OPENAI_RUN_H_
#define BRAID_OPENAI_RUN_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "batching/engine.h"
#include "batching/request.h"

namespace braid::openai {

// Output of one choice, in order; the choice's last event has `final` set.
struct ChoiceEvent {
  int index = 0;
  bool reasoning = false;  // text and tokens of the reasoning stream
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<batching::SampledToken> logprobs;  // one per token when asked
  bool final = false;
  batching::FinishReason finish_reason = batching::FinishReason::kNone;
  int output_tokens = 0;  // final: the choice's, reasoning included
  int reasoning_tokens = 0;
};

class RequestRun {
 public:
  // Starts every prompt's choices. A refusal (admission control, session
  // limits, shutdown) cancels what had started and is returned.
  static absl::StatusOr<std::shared_ptr<RequestRun>> Start(
      batching::Engine* engine,
      std::vector<batching::GenerationRequest> prompts, int n,
      const std::string& owner, absl::Time deadline = absl::InfiniteFuture());
  ~RequestRun();

  // The events that arrived (none: nothing new). Past the deadline the run
  // is cancelled with DEADLINE_EXCEEDED first.
  std::vector<ChoiceEvent> Take();
  // Readable (an eventfd) once there is news since the last Take: events,
  // the end, a failure. For poll(2) beside the client's socket.
  int wake_fd() const { return wake_fd_; }
  absl::Time deadline() const { return deadline_; }
  // Every choice ended, or the run failed or was cancelled.
  bool over() const;
  // The run's failure (an engine error, Cancel's status); OK while running
  // and when every choice ended normally.
  absl::Status status() const;
  // Ends every choice's engine work (blocks freed within one step); the
  // run fails with `why`. Idempotent: the first status stays.
  void Cancel(absl::Status why);

  int num_choices() const { return num_choices_; }
  int prompt_tokens() const { return prompt_tokens_; }

  // The engine's side, by the sinks (run.cc).
  void Push(ChoiceEvent event);
  void Fail(absl::Status status);

 private:
  RequestRun(batching::Engine* engine, int num_choices, int prompt_tokens,
             absl::Time deadline);
  void Wake();
  struct Work {
    uint64_t handle = 0;
    bool session = false;
  };

  batching::Engine* const engine_;
  const int num_choices_;
  const int prompt_tokens_;
  const absl::Time deadline_;
  const int wake_fd_;
  mutable absl::Mutex mu_;
  std::vector<Work> work_ ABSL_GUARDED_BY(mu_);
  std::deque<ChoiceEvent> events_ ABSL_GUARDED_BY(mu_);
  int finished_ ABSL_GUARDED_BY(mu_) = 0;  // choices with a final event
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace braid::openai

#endif  // BRAID_OPENAI_RUN_H_
