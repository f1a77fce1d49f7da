#include "openai/run.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace braid::openai {
namespace {

// A Generate request's chunks as choice `index`'s events.
class GenerateSink : public batching::OutputSink {
 public:
  GenerateSink(std::weak_ptr<RequestRun> run, int index)
      : run_(std::move(run)), index_(index) {}

  void Push(batching::OutputChunk chunk) override {
    std::shared_ptr<RequestRun> run = run_.lock();
    if (run == nullptr) return;
    if (!chunk.error.ok()) {
      run->Fail(std::move(chunk.error));
      return;
    }
    ChoiceEvent e;
    e.index = index_;
    e.reasoning = chunk.reasoning;
    e.text = std::move(chunk.text);
    e.token_ids = std::move(chunk.token_ids);
    e.logprobs = std::move(chunk.logprobs);
    e.final = chunk.final;
    e.finish_reason = chunk.finish_reason;
    e.output_tokens = chunk.output_tokens;
    e.reasoning_tokens = chunk.reasoning_tokens;
    run->Push(std::move(e));
  }

 private:
  const std::weak_ptr<RequestRun> run_;
  const int index_;
};

// A branch session's events: output stream 2 + i is choice first + i. The
// session closes once every branch's turn has ended.
class BranchSink : public batching::SessionSink {
 public:
  BranchSink(std::weak_ptr<RequestRun> run, batching::Engine* engine, int first,
             int n, bool logprobs)
      : run_(std::move(run)),
        engine_(engine),
        first_(first),
        n_(n),
        logprobs_(logprobs) {}

  void set_handle(uint64_t handle) { handle_ = handle; }

  void Push(batching::SessionEvent event) override {
    using Kind = batching::SessionEvent::Kind;
    std::shared_ptr<RequestRun> run = run_.lock();
    if (run == nullptr) return;
    switch (event.kind) {
      case Kind::kTokens:
      case Kind::kTurnEnd: {
        ChoiceEvent e;
        e.index = first_ + event.stream - 2;
        e.reasoning = event.reasoning;
        e.text = std::move(event.text);
        for (const batching::SampledToken& t : event.tokens) {
          e.token_ids.push_back(t.token_id);
          if (logprobs_) e.logprobs.push_back(t);
        }
        if (event.kind == Kind::kTurnEnd) {
          e.final = true;
          e.finish_reason = event.finish_reason;
          e.output_tokens = event.output_tokens;
          e.reasoning_tokens = event.reasoning_tokens;
        }
        run->Push(std::move(e));
        if (event.kind == Kind::kTurnEnd && ++ended_ == n_) {
          engine_->CloseSession(handle_);
        }
        break;
      }
      case Kind::kError:
        run->Fail(std::move(event.status));
        break;
      case Kind::kClosed:
        if (!event.status.ok()) run->Fail(std::move(event.status));
        break;
      case Kind::kOpened:
      case Kind::kAck:
        break;
    }
  }

 private:
  const std::weak_ptr<RequestRun> run_;
  batching::Engine* const engine_;
  const int first_, n_;
  const bool logprobs_;
  std::atomic<uint64_t> handle_{0};
  int ended_ = 0;  // engine thread only
};

// n branches over `r`'s prompt: the prompt but its last token is the
// session's prefix (so a cached prefix is reused), the last token the input
// every branch starts after.
batching::SessionOptions BranchOptions(const batching::GenerationRequest& r,
                                       int n, const std::string& owner) {
  batching::SessionOptions o;
  o.owner = owner;
  o.prefix.assign(r.prompt.begin(), r.prompt.end() - 1);
  o.priority = r.priority;
  o.tenant = r.tenant;
  o.tpot_objective = r.tpot_objective;
  o.ttft_objective = r.ttft_objective;
  o.streams.push_back(batching::SessionStreamOptions{.name = "prompt"});
  for (int i = 0; i < n; ++i) {
    batching::SessionStreamOptions s;
    s.name = absl::StrCat("choice", i);
    s.output = true;
    s.visibility = batching::StreamVisibility::kBranch;
    s.sampling = r.sampling;
    s.sampling.seed = r.sampling.seed + static_cast<uint64_t>(i);
    s.max_tokens = r.max_tokens;
    s.stop_token_ids = r.stop_token_ids;
    s.stop = r.stop;
    s.ignore_eos = r.ignore_eos;
    s.reasoning = r.reasoning;
    o.streams.push_back(std::move(s));
  }
  return o;
}

}  // namespace

RequestRun::RequestRun(batching::Engine* engine, int num_choices,
                       int prompt_tokens, absl::Time deadline)
    : engine_(engine),
      num_choices_(num_choices),
      prompt_tokens_(prompt_tokens),
      deadline_(deadline),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

RequestRun::~RequestRun() {
  Cancel(absl::CancelledError("request ended"));
  if (wake_fd_ >= 0) close(wake_fd_);
}

void RequestRun::Wake() {
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof(one));
}

absl::StatusOr<std::shared_ptr<RequestRun>> RequestRun::Start(
    batching::Engine* engine, std::vector<batching::GenerationRequest> prompts,
    int n, const std::string& owner, absl::Time deadline) {
  int prompt_tokens = 0;
  for (const batching::GenerationRequest& r : prompts) {
    prompt_tokens += static_cast<int>(r.prompt.size());
  }
  std::shared_ptr<RequestRun> run(new RequestRun(
      engine, static_cast<int>(prompts.size()) * n, prompt_tokens, deadline));
  for (size_t p = 0; p < prompts.size(); ++p) {
    const int first = static_cast<int>(p) * n;
    // A session needs a prefix and an input token: a one-token prompt's n
    // choices are n requests (there is nothing to share).
    if (n == 1 || prompts[p].prompt.size() < 2) {
      for (int i = 0; i < n; ++i) {
        batching::GenerationRequest r = prompts[p];
        r.sampling.seed += static_cast<uint64_t>(i);
        if (n > 1) r.request_id = absl::StrCat(r.request_id, "-", i);
        absl::StatusOr<uint64_t> handle = engine->Submit(
            std::move(r), std::make_shared<GenerateSink>(run, first + i));
        if (!handle.ok()) {
          run->Cancel(handle.status());
          return handle.status();
        }
        absl::MutexLock lock(&run->mu_);
        run->work_.push_back({*handle, false});
      }
      continue;
    }
    const batching::GenerationRequest& r = prompts[p];
    auto sink = std::make_shared<BranchSink>(run, engine, first, n,
                                             r.sampling.logprobs);
    absl::StatusOr<uint64_t> handle =
        engine->OpenSession(BranchOptions(r, n, owner), sink);
    if (!handle.ok()) {
      run->Cancel(handle.status());
      return handle.status();
    }
    sink->set_handle(*handle);
    {
      absl::MutexLock lock(&run->mu_);
      run->work_.push_back({*handle, true});
    }
    batching::SessionInput input;
    input.input_id = "prompt";
    input.stream = 1;
    input.tokens = {r.prompt.back()};
    for (int i = 0; i < n; ++i) input.generate_on.push_back(2 + i);
    engine->SessionAppend(*handle, std::move(input));
  }
  return run;
}

void RequestRun::Push(ChoiceEvent event) {
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return;
    if (event.final) ++finished_;
    events_.push_back(std::move(event));
  }
  Wake();
}

void RequestRun::Fail(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (status_.ok()) status_ = std::move(status);
  }
  Wake();
}

std::vector<ChoiceEvent> RequestRun::Take() {
  if (absl::Now() >= deadline_) {
    Cancel(absl::DeadlineExceededError(
        "the request ran past the server's limit (--max_request_seconds)"));
  }
  uint64_t count;
  if (wake_fd_ >= 0) (void)!read(wake_fd_, &count, sizeof(count));
  absl::MutexLock lock(&mu_);
  std::vector<ChoiceEvent> out(std::make_move_iterator(events_.begin()),
                               std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

bool RequestRun::over() const {
  absl::MutexLock lock(&mu_);
  return events_.empty() && (!status_.ok() || finished_ == num_choices_);
}

absl::Status RequestRun::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void RequestRun::Cancel(absl::Status why) {
  std::vector<Work> work;
  {
    absl::MutexLock lock(&mu_);
    if (finished_ == num_choices_ && events_.empty()) return;
    if (status_.ok()) status_ = std::move(why);
    if (cancelled_) return;
    cancelled_ = true;
    work = work_;
  }
  Wake();
  for (const Work& w : work) engine_->Cancel(w.handle);
}

}  // namespace braid::openai
