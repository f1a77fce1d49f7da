// libFuzzer target: sequences of Session actions (open, append with and
// without generation, interrupt, close, close with keep, resume, cancel),
// Generate requests beside them, failed steps and idle timeouts, driven
// through a real batching::Engine over a fake executor (scripted logits, a
// fake KV pool read back through the block tables) on a small KV pool, so
// preemption, context limits and the prefix cache all run. Each input
// builds its own engine; the first bytes choose its options (pool size,
// context length, batch limits, the linear, aligned or rows layout, duplex
// policy).
//
// The actions come from the fuzzer's thread while the engine steps on its
// own, as a gRPC reactor's would; the invariants hold whatever the
// interleaving:
// - every session that opened gets kOpened first and exactly one kClosed,
//   last: no event after a session's end; every Generate request one final
//   chunk, last, with at most max_tokens tokens;
// - every input is answered once, in the order sent (kAck, or kError with
//   its id), except input queued behind a turn (DuplexPolicy::kQueue) when
//   the session closes first; an ack covers exactly the input's tokens;
// - positions on a stream only grow (acks and tokens), within the context;
// - tokens only on output streams, only in a turn started by input that
//   asked for that stream, and a turn's end counts the tokens it sent (and
//   the stop token or end of generation that ended it, which is not sent);
// - at the end (every session closed, every request finished): no request
//   or session left and every KV block free.
// A broken invariant or a hang (30 s) aborts with what broke.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "batching/engine.h"
#include "batching/testing/fake_executor.h"
#include "model/tokenizer/tokenizer.h"
#include "queues/work_queues.h"
#include "tests/fuzz/vocab.h"

namespace braid::fuzz {
namespace {

using batching::SessionEvent;
using Kind = SessionEvent::Kind;

constexpr absl::Duration kHang = absl::Seconds(30);

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "session action fuzzer: %s\n", what.c_str());
  std::abort();
}

std::unique_ptr<model::Tokenizer> g_tokenizer;

// Records a session's events and checks the ordering rules as they come.
class CheckingSink : public batching::SessionSink {
 public:
  void Push(SessionEvent e) override {
    absl::MutexLock lock(&mu_);
    if (closed_) Fail(absl::StrCat("event kind ", e.kind, " after kClosed"));
    if (events_.empty() && e.kind != Kind::kOpened) {
      Fail(absl::StrCat("first event is kind ", e.kind, ", not kOpened"));
    }
    if (e.kind == Kind::kClosed) closed_ = true;
    events_.push_back(std::move(e));
  }

  bool WaitClosed(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto closed = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_; };
    return mu_.AwaitWithTimeout(absl::Condition(&closed), timeout);
  }
  bool closed() {
    absl::MutexLock lock(&mu_);
    return closed_;
  }
  std::vector<SessionEvent> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }

 private:
  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<SessionEvent> events_ ABSL_GUARDED_BY(mu_);
};

class CheckingOutput : public batching::OutputSink {
 public:
  explicit CheckingOutput(int64_t max_tokens) : max_tokens_(max_tokens) {}
  void Push(batching::OutputChunk chunk) override {
    absl::MutexLock lock(&mu_);
    if (final_) Fail("a Generate chunk after the final one");
    tokens_ += static_cast<int64_t>(chunk.token_ids.size());
    if (tokens_ > max_tokens_) Fail("a Generate request past max_tokens");
    final_ = chunk.final || !chunk.error.ok();
  }
  bool WaitFinal(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return final_; };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }

 private:
  const int64_t max_tokens_;
  absl::Mutex mu_;
  bool final_ ABSL_GUARDED_BY(mu_) = false;
  int64_t tokens_ ABSL_GUARDED_BY(mu_) = 0;
};

// A session as the fuzzer drives it: what it sent, to check the events.
struct Driven {
  batching::SessionOptions options;
  std::shared_ptr<CheckingSink> sink;
  uint64_t handle = 0;
  bool closing = false;  // close, keep or cancel sent
  bool kept = false;     // closed with keep: resumable by its id
  std::vector<batching::SessionInput> inputs;
};

struct Limits {
  int max_context = 0;
  int vocab = 0;
};

// Checks one driven session's events against what was sent to it.
void CheckSession(const Driven& d, const Limits& limits) {
  const std::vector<SessionEvent> events = d.sink->events();
  // A broken rule prints the session's inputs and events, then aborts.
  auto Fail = [&](const std::string& what) {
    for (const batching::SessionInput& in : d.inputs) {
      std::fprintf(stderr, "input %s stream %d tokens %zu generate_on %zu\n",
                   in.input_id.c_str(), in.stream, in.tokens.size(),
                   in.generate_on.size());
    }
    for (const SessionEvent& e : events) {
      std::fprintf(stderr,
                   "event kind %d stream %d tokens %zu first %lld end %lld "
                   "input %s finish %d output_tokens %d text \"%s\" %s\n",
                   static_cast<int>(e.kind), e.stream, e.tokens.size(),
                   static_cast<long long>(e.first_position),
                   static_cast<long long>(e.end_position), e.input_id.c_str(),
                   static_cast<int>(e.finish_reason), e.output_tokens,
                   e.text.c_str(), e.status.ToString().c_str());
    }
    fuzz::Fail(what);
  };
  if (events.empty() || events.back().kind != Kind::kClosed) {
    Fail("a session ended without kClosed");
  }
  const int n = static_cast<int>(d.options.streams.size());
  std::map<std::string, const batching::SessionInput*> by_id;
  for (const batching::SessionInput& in : d.inputs) by_id[in.input_id] = &in;
  std::vector<int64_t> next(n + 1, 0);  // lowest position a stream may use
  std::vector<bool> asked(n + 1, false), active(n + 1, false);
  std::vector<int64_t> turn_tokens(n + 1, 0);
  size_t answered = 0;  // inputs acked or refused, in order
  auto answer = [&](const std::string& id) -> const batching::SessionInput* {
    // Answers come in the order sent; input that is never answered (queued
    // and dropped at close) can only be at the end.
    while (answered < d.inputs.size() && d.inputs[answered].input_id != id) {
      ++answered;
      if (d.options.duplex != batching::DuplexPolicy::kQueue) {
        Fail(absl::StrCat("input ", d.inputs[answered - 1].input_id,
                          " was never answered; ", id, " was"));
      }
    }
    if (answered == d.inputs.size()) {
      Fail(absl::StrCat("an answer to unknown or repeated input ", id));
    }
    return &d.inputs[answered++];
  };
  for (const SessionEvent& e : events) {
    const bool stream_ok = e.stream >= 1 && e.stream <= n;
    switch (e.kind) {
      case Kind::kOpened:
        if (&e != &events.front()) Fail("kOpened twice");
        break;
      case Kind::kAck: {
        const batching::SessionInput* in = answer(e.input_id);
        if (e.stream != in->stream) Fail("an ack names another stream");
        if (e.end_position - e.first_position !=
            static_cast<int64_t>(in->tokens.size())) {
          Fail(absl::StrCat("ack of ", e.input_id, " covers [",
                            e.first_position, ", ", e.end_position, ") for ",
                            in->tokens.size(), " tokens"));
        }
        if (e.first_position < next[e.stream]) {
          Fail(absl::StrCat("ack of ", e.input_id, " at ", e.first_position,
                            " below the stream's next position ",
                            next[e.stream]));
        }
        next[e.stream] = e.end_position;
        for (int s : in->generate_on) asked[s] = true;
        break;
      }
      case Kind::kError:
        if (!e.input_id.empty()) {
          answer(e.input_id);
          if (e.status.code() != absl::StatusCode::kOutOfRange) {
            Fail(absl::StrCat("input refused with ", e.status.ToString()));
          }
        }
        break;
      case Kind::kTokens: {
        if (!stream_ok || !d.options.streams[e.stream - 1].output) {
          Fail(absl::StrCat("tokens on stream ", e.stream));
        }
        if (!active[e.stream]) {
          if (!asked[e.stream]) {
            Fail(absl::StrCat("tokens on stream ", e.stream,
                              " with no input asking for a turn"));
          }
          active[e.stream] = true;
          asked[e.stream] = false;
          turn_tokens[e.stream] = 0;
        }
        if (e.first_position < next[e.stream]) {
          Fail(absl::StrCat("tokens at ", e.first_position, " on stream ",
                            e.stream, " below its next position ",
                            next[e.stream]));
        }
        const int64_t end =
            e.first_position + static_cast<int64_t>(e.tokens.size());
        if (end > limits.max_context) Fail("tokens past the context");
        for (const batching::SampledToken& t : e.tokens) {
          if (t.token_id < 0 || t.token_id >= limits.vocab) {
            Fail("a token outside the vocabulary");
          }
        }
        next[e.stream] = end;
        turn_tokens[e.stream] += static_cast<int64_t>(e.tokens.size());
        break;
      }
      case Kind::kTurnEnd: {
        if (!stream_ok || !d.options.streams[e.stream - 1].output) {
          Fail(absl::StrCat("a turn end on stream ", e.stream));
        }
        const int64_t sent = active[e.stream] ? turn_tokens[e.stream] : 0;
        // A stop token or end of generation ends the turn counted, unsent.
        const bool unsent_last =
            e.finish_reason == batching::FinishReason::kStop ||
            e.finish_reason == batching::FinishReason::kEos;
        if (e.output_tokens != sent &&
            !(unsent_last && e.output_tokens == sent + 1)) {
          Fail(absl::StrCat("a turn end counts ", e.output_tokens,
                            " tokens; the turn sent ", sent));
        }
        if (e.output_tokens > d.options.streams[e.stream - 1].max_tokens) {
          Fail("a turn past its max_tokens");
        }
        if (!active[e.stream]) asked[e.stream] = false;  // ended at once
        active[e.stream] = false;
        break;
      }
      case Kind::kClosed:
        break;
    }
  }
}

// Options of the engine and of every session, from the input's first bytes.
struct Setup {
  batching::EngineOptions engine;
  bool aligned = false;
  int model_streams = 0;
  bool rows = false;  // the rows layout (silence token 0)
  batching::DuplexPolicy duplex = batching::DuplexPolicy::kInterject;
};

Setup ReadSetup(FuzzedDataProvider& in) {
  Setup s;
  batching::SchedulerOptions& sch = s.engine.scheduler;
  sch.block_size = in.PickValueInArray({1, 2, 4, 16});
  sch.num_blocks = in.ConsumeIntegralInRange(4, 96) * 16 / sch.block_size;
  sch.max_batch_tokens = in.ConsumeIntegralInRange(1, 48);
  sch.max_num_seqs = in.ConsumeIntegralInRange(1, 8);
  s.engine.max_context_tokens = in.ConsumeIntegralInRange(8, 160);
  s.engine.max_waiting_requests = in.ConsumeIntegralInRange(1, 16);
  s.engine.max_kept_sessions = in.ConsumeIntegralInRange(0, 3);
  s.engine.max_sessions_per_client = in.ConsumeIntegralInRange(0, 4);
  if (in.ConsumeBool()) {
    s.engine.session_idle_timeout =
        absl::Milliseconds(in.ConsumeIntegralInRange(1, 30));
  }
  if (in.ConsumeBool()) s.engine.max_decode_slowdown = 1.5;
  s.duplex = in.PickValueInArray({batching::DuplexPolicy::kInterject,
                                  batching::DuplexPolicy::kInterrupt,
                                  batching::DuplexPolicy::kQueue});
  s.aligned = in.ConsumeBool();
  if (s.aligned) s.model_streams = in.ConsumeIntegralInRange(0, 4);
  s.rows = s.model_streams > 0 && in.ConsumeBool();
  return s;
}

std::vector<int32_t> Tokens(FuzzedDataProvider& in, int max_n, int vocab) {
  std::vector<int32_t> t(in.ConsumeIntegralInRange(1, max_n));
  for (int32_t& id : t) id = in.ConsumeIntegralInRange(0, vocab - 1);
  return t;
}

// One session's options: a prefix, one or two input streams and one to
// three output streams (branches on a single-stream model), each output
// stream sampled its own way.
batching::SessionOptions SessionOf(FuzzedDataProvider& in, const Setup& setup,
                                   int vocab, int id) {
  batching::SessionOptions o;
  o.session_id = absl::StrCat("s", id % 4);  // ids repeat: ALREADY_EXISTS
  o.owner = in.ConsumeBool() ? "a" : "b";
  o.prefix = Tokens(in, 12, vocab);
  o.aligned = setup.aligned;
  o.model_streams = setup.model_streams;
  o.rows = setup.rows;
  o.silence_token_id = setup.rows ? 0 : -1;
  o.duplex = setup.duplex;
  o.priority = in.ConsumeIntegralInRange(0, 2);
  const int inputs = in.ConsumeIntegralInRange(1, 2);
  const int outputs = in.ConsumeIntegralInRange(1, 3);
  for (int i = 0; i < inputs + outputs; ++i) {
    batching::SessionStreamOptions s;
    s.name = absl::StrCat("s", i + 1);
    s.output = i >= inputs;
    s.model_stream = i % std::max(1, setup.model_streams);
    if (s.output) {
      s.max_tokens = in.ConsumeIntegralInRange(1, 12);
      s.ignore_eos = in.ConsumeBool();
      if (!setup.aligned && in.ConsumeBool()) {
        s.visibility = batching::StreamVisibility::kBranch;
      }
      s.sampling.temperature = in.ConsumeBool() ? 0.8f : 0.0f;
      s.sampling.seed = in.ConsumeIntegral<uint8_t>();
      s.sampling.top_k = in.ConsumeIntegralInRange(0, 5);
      s.sampling.repetition_penalty = in.ConsumeBool() ? 1.3f : 1.0f;
      s.sampling.logprobs = in.ConsumeBool();
      if (in.ConsumeBool())
        s.stop_token_ids = {in.ConsumeIntegralInRange(0, 7)};
      if (in.ConsumeBool()) s.stop = {"a"};
    }
    o.streams.push_back(std::move(s));
  }
  return o;
}

// The output (or input) streams of `o`, 1-based.
std::vector<int> Streams(const batching::SessionOptions& o, bool output) {
  std::vector<int> out;
  for (size_t i = 0; i < o.streams.size(); ++i) {
    if (o.streams[i].output == output) out.push_back(static_cast<int>(i) + 1);
  }
  return out;
}

// Waits until the executor ran `steps` more steps, or none ran for 2 ms
// (the engine has nothing to do): lets work proceed between actions.
void Proceed(const batching::Engine& engine, int steps) {
  const int64_t target = engine.Stats().steps + steps;
  int64_t last = -1;
  absl::Time since = absl::Now();
  while (true) {
    const int64_t now_steps = engine.Stats().steps;
    if (now_steps >= target) return;
    if (now_steps != last) {
      last = now_steps;
      since = absl::Now();
    } else if (absl::Now() - since > absl::Milliseconds(2)) {
      return;
    }
    absl::SleepFor(absl::Microseconds(50));
  }
}

void RunOne(FuzzedDataProvider& in) {
  const int vocab = g_tokenizer->vocab_size();
  const Setup setup = ReadSetup(in);
  batching::testing::FakeExecutor executor(vocab,
                                           setup.engine.scheduler.block_size);
  std::vector<std::unique_ptr<Driven>> sessions;
  std::vector<std::shared_ptr<CheckingOutput>> requests;
  std::vector<uint64_t> request_handles;
  int next_input = 0;
  {
    batching::Engine engine(
        &executor, g_tokenizer.get(), setup.engine,
        queues::MakeWorkQueues(queues::QueuePolicy::kFairShare));
    // The sessions the fuzzer may still act on.
    auto live = [&]() {
      std::vector<Driven*> out;
      for (auto& d : sessions) {
        if (!d->closing) out.push_back(d.get());
      }
      return out;
    };
    int actions = 0;
    while (in.remaining_bytes() > 0 && actions++ < 64) {
      const int op = in.ConsumeIntegralInRange(0, 10);
      std::vector<Driven*> open = live();
      Driven* target =
          open.empty()
              ? nullptr
              : open[in.ConsumeIntegralInRange<size_t>(0, open.size() - 1)];
      switch (op) {
        case 0: {  // open a session
          auto d = std::make_unique<Driven>();
          d->options =
              SessionOf(in, setup, vocab, static_cast<int>(sessions.size()));
          d->sink = std::make_shared<CheckingSink>();
          auto h = engine.OpenSession(d->options, d->sink);
          if (!h.ok()) break;
          d->handle = *h;
          sessions.push_back(std::move(d));
          break;
        }
        case 1:
        case 2:
        case 3: {  // input, with or without generation
          if (target == nullptr) break;
          const std::vector<int> inputs = Streams(target->options, false);
          batching::SessionInput input;
          input.input_id = absl::StrCat("in", next_input++);
          input.stream =
              inputs[in.ConsumeIntegralInRange<size_t>(0, inputs.size() - 1)];
          input.tokens = Tokens(in, 10, vocab);
          for (int s : Streams(target->options, true)) {
            if (op != 3 && in.ConsumeBool()) input.generate_on.push_back(s);
          }
          target->inputs.push_back(input);
          engine.SessionAppend(target->handle, std::move(input));
          break;
        }
        case 4: {  // interrupt an output stream
          if (target == nullptr) break;
          const std::vector<int> outputs = Streams(target->options, true);
          engine.SessionInterrupt(target->handle,
                                  outputs[in.ConsumeIntegralInRange<size_t>(
                                      0, outputs.size() - 1)]);
          break;
        }
        case 5:  // close, or close with keep
          if (target == nullptr) break;
          target->closing = true;
          target->kept = in.ConsumeBool();
          engine.CloseSession(target->handle, target->kept);
          break;
        case 6:  // cancel
          if (target == nullptr) break;
          target->closing = true;
          engine.Cancel(target->handle);
          break;
        case 7: {  // resume a session closed with keep, once it closed
          std::vector<Driven*> kept;
          for (auto& d : sessions) {
            if (d->kept && d->sink->closed()) kept.push_back(d.get());
          }
          if (kept.empty()) break;
          Driven& old =
              *kept[in.ConsumeIntegralInRange<size_t>(0, kept.size() - 1)];
          old.kept = false;  // one resume of each keep
          auto d = std::make_unique<Driven>();
          d->sink = std::make_shared<CheckingSink>();
          auto h = engine.ResumeSession(
              old.options.owner, old.options.session_id, d->sink,
              [&](const batching::SessionOptions& o) { d->options = o; });
          if (!h.ok()) break;
          d->handle = *h;
          sessions.push_back(std::move(d));
          break;
        }
        case 8: {  // a Generate request beside the sessions
          batching::GenerationRequest r;
          r.prompt = Tokens(in, 24, vocab);
          r.max_tokens = in.ConsumeIntegralInRange(1, 12);
          r.ignore_eos = in.ConsumeBool();
          r.arrival = absl::Now();
          if (in.ConsumeBool()) {
            r.deadline =
                absl::Now() + absl::Milliseconds(in.ConsumeIntegral<uint8_t>());
          }
          auto sink = std::make_shared<CheckingOutput>(r.max_tokens);
          auto h = engine.Submit(std::move(r), sink);
          if (!h.ok()) break;
          requests.push_back(sink);
          request_handles.push_back(*h);
          if (in.ConsumeBool()) engine.Cancel(*h);
          break;
        }
        case 9:  // the next step fails
          executor.FailNextStep(absl::InternalError("injected"));
          break;
        case 10:  // let the engine step
          Proceed(engine, in.ConsumeIntegralInRange(1, 16));
          break;
      }
    }
    // Close what is open, let every request finish, then check.
    for (auto& d : sessions) {
      if (!d->closing) {
        d->closing = true;
        engine.CloseSession(d->handle);
      }
    }
    for (auto& d : sessions) {
      if (!d->sink->WaitClosed(kHang)) Fail("a session never closed");
    }
    for (auto& r : requests) {
      if (!r->WaitFinal(kHang)) Fail("a Generate request never finished");
    }
    const Limits limits{setup.engine.max_context_tokens, vocab};
    for (auto& d : sessions) CheckSession(*d, limits);
    // Stats are published after the step that ended the last of them.
    const absl::Time deadline = absl::Now() + kHang;
    while (true) {
      const batching::EngineStats s = engine.Stats();
      if (s.requests == 0 && s.running == 0 && s.waiting == 0 &&
          s.sessions == 0 && s.kv_blocks_free == s.kv_blocks_total) {
        break;
      }
      if (absl::Now() > deadline) {
        Fail(absl::StrCat("not idle at the end: ", s.requests, " requests, ",
                          s.sessions, " sessions, ", s.running, " running, ",
                          s.kv_blocks_free, " of ", s.kv_blocks_total,
                          " blocks free"));
      }
      absl::SleepFor(absl::Microseconds(100));
    }
  }
}

}  // namespace
}  // namespace braid::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::g_tokenizer = braid::fuzz::LoadTokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  braid::fuzz::RunOne(in);
  return 0;
}
