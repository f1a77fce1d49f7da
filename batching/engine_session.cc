// The engine's session entry points and their application on the engine
// thread (batching/session.h holds the session logic).
//
// Design note. Which sessions exist is known on two sides: the engine
// thread owns the Session objects (open in work_, kept in kept_), while
// callers need answers at once (is this id open, kept, over the client's
// limit?). session_records_ answers them under mu_: OpenSession and
// ResumeSession change it when they accept, the engine thread when a
// session closes, is kept or is dropped. A resume claims its record before
// its command reaches the engine thread, and TrimKeptSessions never drops
// a claimed session, so an accepted resume always finds its session.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "batching/engine.h"
#include "metrics/engine_metrics.h"

namespace braid::batching {

namespace {

// Counts a session's tokens into the engine's metrics as its events pass
// (on the engine thread): the prefix when opened and every input as
// prompt tokens, a turn's output and reasoning tokens at its end (hidden
// reasoning included), as a Generate request's are counted at its finish;
// and the time between a stream's tokens within a turn, by the queue its
// kind decodes on, as a request's inter-token latency.
class MeteredSessionSink : public SessionSink {
 public:
  MeteredSessionSink(std::shared_ptr<SessionSink> inner,
                     metrics::EngineMetrics* metrics)
      : inner_(std::move(inner)), metrics_(metrics) {}

  void Push(SessionEvent e) override {
    switch (e.kind) {
      case SessionEvent::Kind::kTokens: {
        if (e.tokens.empty()) break;
        const absl::Time now = absl::Now();
        auto [it, first] = last_token_.try_emplace(e.stream, now);
        if (!first) {
          metrics_->RecordInterTokenLatency(
              e.reasoning ? metrics::Queue::kReasoning : metrics::Queue::kIo,
              absl::ToDoubleSeconds(now - it->second));
          it->second = now;
        }
        break;
      }
      case SessionEvent::Kind::kOpened:
        if (!e.resumed) metrics_->RecordSessionTokens(e.prefix_length, 0, 0);
        break;
      case SessionEvent::Kind::kAck:
        metrics_->RecordSessionTokens(e.end_position - e.first_position, 0, 0);
        break;
      case SessionEvent::Kind::kTurnEnd:
        metrics_->RecordSessionTokens(0, e.output_tokens, e.reasoning_tokens);
        last_token_.erase(e.stream);
        break;
      default:
        break;
    }
    inner_->Push(std::move(e));
  }

 private:
  const std::shared_ptr<SessionSink> inner_;
  metrics::EngineMetrics* const metrics_;
  absl::flat_hash_map<int, absl::Time> last_token_;  // per stream, this turn
};

}  // namespace

std::shared_ptr<SessionSink> Engine::Metered(
    std::shared_ptr<SessionSink> sink) const {
  if (metrics_ == nullptr) return sink;
  return std::make_shared<MeteredSessionSink>(std::move(sink), metrics_);
}

namespace {

// A multi-stream session (model_streams > 0) is aligned (or rows, with a
// silence token), and binds each of its streams to a model stream of its
// own.
absl::Status CheckModelStreams(const SessionOptions& o) {
  if (o.rows && o.model_streams <= 0) {
    return absl::InvalidArgumentError(
        "the rows layout needs a multi-stream model (model_streams > 0)");
  }
  if (o.model_streams <= 0) return absl::OkStatus();
  if (!o.aligned) {
    return absl::InvalidArgumentError(
        "a multi-stream session (model_streams > 0) uses the aligned layout");
  }
  if (o.rows && o.silence_token_id < 0) {
    return absl::InvalidArgumentError(
        "the rows layout needs the model's silence token (silence_token_id)");
  }
  std::vector<int> bound(o.model_streams, -1);
  for (size_t i = 0; i < o.streams.size(); ++i) {
    const SessionStreamOptions& s = o.streams[i];
    const std::string name =
        absl::StrCat("stream ", i + 1, " (\"", s.name, "\")");
    if (s.model_stream < 0 || s.model_stream >= o.model_streams) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " is bound to model stream ", s.model_stream,
                       ", outside [0, ", o.model_streams, ")"));
    }
    if (bound[s.model_stream] >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " and stream ", bound[s.model_stream] + 1,
                       " are both bound to model stream ", s.model_stream));
    }
    bound[s.model_stream] = static_cast<int>(i) + 1;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Engine::CheckSessionLimit(const std::string& owner) const {
  const int max = options_.max_sessions_per_client;
  if (max <= 0) return absl::OkStatus();
  auto it = open_sessions_per_owner_.find(owner);
  const int open = it == open_sessions_per_owner_.end() ? 0 : it->second;
  if (open < max) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "this client already has ", open,
      " open sessions (--max_sessions_per_client=", max,
      "); close one (close with keep leaves it resumable) or retry later"));
}

void Engine::ReleaseSessionSlot(const std::string& owner) {
  auto it = open_sessions_per_owner_.find(owner);
  if (it != open_sessions_per_owner_.end() && --it->second <= 0) {
    open_sessions_per_owner_.erase(it);
  }
}

absl::StatusOr<uint64_t> Engine::OpenSession(
    SessionOptions options, std::shared_ptr<SessionSink> sink) {
  if (options.prefix.empty()) {
    return absl::InvalidArgumentError(
        "a session needs a non-empty prefix (at least one token)");
  }
  if (options.streams.empty()) {
    return absl::InvalidArgumentError("a session needs at least one stream");
  }
  if (absl::Status s = CheckModelStreams(options); !s.ok()) return s;
  const int64_t pool_tokens =
      int64_t{options_.scheduler.num_blocks} * options_.scheduler.block_size;
  if (static_cast<int64_t>(options.prefix.size()) >= pool_tokens) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the session prefix needs ", options.prefix.size(),
        " tokens of KV cache but the whole pool holds ", pool_tokens));
  }
  if (static_cast<int64_t>(options.prefix.size()) >=
      options_.max_context_tokens) {
    return absl::OutOfRangeError(absl::StrCat(
        "the session prefix holds ", options.prefix.size(),
        " tokens, leaving no room in the served context length of ",
        options_.max_context_tokens, " tokens (--context_length)"));
  }
  absl::MutexLock lock(&mu_);
  if (shutdown_) return absl::UnavailableError("the engine is shutting down");
  if (absl::Status s = CheckSessionLimit(options.owner); !s.ok()) return s;
  const uint64_t handle = next_handle_++;
  if (options.session_id.empty()) {
    options.session_id = absl::StrCat("session-", handle);
  }
  SessionRecord& record =
      session_records_[SessionKey(options.owner, options.session_id)];
  if (record.handle != 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "this client already has ", record.kept ? "a kept" : "an open",
        " session \"", options.session_id, "\"",
        record.kept ? "; resume it (open with resume) or choose another id"
                    : "; choose another id"));
  }
  record.handle = handle;
  record.options = std::make_shared<const SessionOptions>(options);
  ++open_sessions_per_owner_[options.owner];
  SessionCommand c;
  c.kind = SessionCommand::Kind::kOpen;
  c.handle = handle;
  c.session = std::make_unique<Session>(
      std::move(options), Metered(std::move(sink)), handle, tokenizer_,
      options_.reasoning, options_.max_context_tokens);
  session_commands_.push_back(std::move(c));
  return handle;
}

absl::StatusOr<uint64_t> Engine::ResumeSession(
    const std::string& owner, const std::string& session_id,
    std::shared_ptr<SessionSink> sink,
    absl::FunctionRef<void(const SessionOptions&)> prepare) {
  SessionCommand c;
  c.kind = SessionCommand::Kind::kResume;
  c.sink = Metered(std::move(sink));
  std::shared_ptr<const SessionOptions> options;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::UnavailableError("the engine is shutting down");
    auto it = session_records_.find(SessionKey(owner, session_id));
    if (it == session_records_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "this client has no kept session \"", session_id,
          "\" (never kept, or dropped: at most --max_kept_sessions=",
          options_.max_kept_sessions, " are kept, the oldest go first)"));
    }
    if (!it->second.kept) {
      return absl::FailedPreconditionError(
          absl::StrCat("session \"", session_id,
                       "\" is open; only a session closed with keep (or "
                       "after its idle timeout) can be resumed"));
    }
    if (absl::Status s = CheckSessionLimit(owner); !s.ok()) return s;
    c.kept_handle = it->second.handle;
    c.handle = next_handle_++;
    it->second.kept = false;  // claimed: TrimKeptSessions leaves it
    it->second.handle = c.handle;
    ++open_sessions_per_owner_[owner];
    options = it->second.options;
  }
  const uint64_t handle = c.handle;
  prepare(*options);
  absl::MutexLock lock(&mu_);
  if (shutdown_) return absl::UnavailableError("the engine is shutting down");
  session_commands_.push_back(std::move(c));
  return handle;
}

void Engine::PostSession(SessionCommand command) {
  absl::MutexLock lock(&mu_);
  session_commands_.push_back(std::move(command));
}

void Engine::SessionAppend(uint64_t handle, SessionInput input) {
  SessionCommand c;
  c.kind = SessionCommand::Kind::kAppend;
  c.handle = handle;
  c.input = std::move(input);
  PostSession(std::move(c));
}

void Engine::SessionInterrupt(uint64_t handle, int stream) {
  SessionCommand c;
  c.kind = SessionCommand::Kind::kInterrupt;
  c.handle = handle;
  c.stream = stream;
  PostSession(std::move(c));
}

void Engine::CloseSession(uint64_t handle, bool keep) {
  SessionCommand c;
  c.kind = SessionCommand::Kind::kClose;
  c.handle = handle;
  c.keep = keep;
  PostSession(std::move(c));
}

void Engine::ApplySessionCommand(SessionCommand& c) {
  const absl::Time now = absl::Now();
  if (c.kind == SessionCommand::Kind::kOpen) {
    Session& s = *c.session;
    work_[c.handle].session = std::move(c.session);
    s.Touch(now);
    s.Open(scheduler_);
    return;
  }
  if (c.kind == SessionCommand::Kind::kResume) {
    ResumeKeptSession(c);
    return;
  }
  auto it = work_.find(c.handle);
  // Session commands name sessions; a Generate request's handle is none.
  if (it == work_.end() || it->second.request != nullptr) return;
  Session& s = *it->second.session;
  s.Touch(now);
  switch (c.kind) {
    case SessionCommand::Kind::kAppend:
      s.Append(std::move(c.input), scheduler_);
      break;
    case SessionCommand::Kind::kInterrupt:
      s.Interrupt(c.stream, scheduler_);
      break;
    case SessionCommand::Kind::kClose:
      if (c.keep) {
        KeepSession(s, absl::OkStatus());
      } else {
        FinishSession(s, absl::OkStatus());
      }
      break;
    case SessionCommand::Kind::kOpen:
    case SessionCommand::Kind::kResume:
      break;
  }
}

void Engine::FinishSession(Session& session, absl::Status status) {
  session.EndAllTurns(FinishReason::kCancelled, scheduler_);
  // Free the blocks before telling the client.
  scheduler_.Remove(session.handle());
  std::unique_ptr<Session> owned = std::move(work_[session.handle()].session);
  work_.erase(session.handle());
  {
    absl::MutexLock lock(&mu_);
    const SessionOptions& o = owned->options();
    auto it = session_records_.find(SessionKey(o.owner, o.session_id));
    if (it != session_records_.end() && it->second.handle == owned->handle()) {
      session_records_.erase(it);
    }
    ReleaseSessionSlot(o.owner);
  }
  PublishStats();
  SessionEvent e;
  e.kind = SessionEvent::Kind::kClosed;
  e.status = std::move(status);
  owned->sink().Push(std::move(e));
}

void Engine::KeepSession(Session& session, absl::Status status) {
  if (options_.max_kept_sessions <= 0) {
    FinishSession(session, status.ok()
                               ? absl::FailedPreconditionError(
                                     "the session was closed, not kept: this "
                                     "server keeps no sessions "
                                     "(--max_kept_sessions=0)")
                               : status);
    return;
  }
  const uint64_t handle = session.handle();
  std::unique_ptr<Session> owned = std::move(work_[handle].session);
  work_.erase(handle);
  std::shared_ptr<SessionSink> sink = owned->Keep(scheduler_);
  {
    absl::MutexLock lock(&mu_);
    const SessionOptions& o = owned->options();
    auto it = session_records_.find(SessionKey(o.owner, o.session_id));
    if (it != session_records_.end() && it->second.handle == handle) {
      it->second.kept = true;
    }
    ReleaseSessionSlot(o.owner);
  }
  kept_[handle] = std::move(owned);
  kept_order_.push_back(handle);
  TrimKeptSessions();
  PublishStats();
  SessionEvent e;
  e.kind = SessionEvent::Kind::kClosed;
  e.status = std::move(status);
  sink->Push(std::move(e));
}

void Engine::TrimKeptSessions() {
  int excess = static_cast<int>(kept_.size()) - options_.max_kept_sessions;
  for (auto it = kept_order_.begin(); excess > 0 && it != kept_order_.end();) {
    const uint64_t handle = *it;
    const SessionOptions& o = kept_.at(handle)->options();
    {
      absl::MutexLock lock(&mu_);
      auto r = session_records_.find(SessionKey(o.owner, o.session_id));
      if (r != session_records_.end() && r->second.handle != handle) {
        ++it;  // claimed by a resume on its way
        continue;
      }
      if (r != session_records_.end()) session_records_.erase(r);
    }
    // Its blocks stay in the prefix cache until evicted.
    kept_.erase(handle);
    it = kept_order_.erase(it);
    --excess;
  }
}

void Engine::ResumeKeptSession(SessionCommand& c) {
  auto it = kept_.find(c.kept_handle);
  if (it == kept_.end()) {  // never: a claimed session is not dropped
    SessionEvent e;
    e.kind = SessionEvent::Kind::kClosed;
    e.status = absl::InternalError("the kept session is gone");
    c.sink->Push(std::move(e));
    return;
  }
  std::unique_ptr<Session> owned = std::move(it->second);
  kept_.erase(it);
  kept_order_.remove(c.kept_handle);
  Session& s = *owned;
  work_[c.handle].session = std::move(owned);
  s.Touch(absl::Now());
  s.Resume(c.handle, std::move(c.sink));
  PublishStats();
}

void Engine::ExpireIdleSessions(absl::Time now) {
  const absl::Duration timeout = options_.session_idle_timeout;
  if (timeout == absl::InfiniteDuration()) return;
  std::vector<Session*> idle;
  for (auto& [handle, w] : work_) {
    Session* s = w.session.get();
    if (w.request == nullptr && s->idle() &&
        now - s->last_active() >= timeout) {
      idle.push_back(s);
    }
  }
  for (Session* s : idle) {
    const bool keep = options_.max_kept_sessions > 0;
    KeepSession(
        *s,
        absl::DeadlineExceededError(absl::StrCat(
            "the session was idle for ", absl::FormatDuration(timeout),
            " (--session_idle_timeout_s) and ",
            keep ? absl::StrCat("is kept: resume it with open "
                                "{session_id: \"",
                                s->options().session_id, "\", resume: true}")
                 : "was closed (--max_kept_sessions=0 keeps none)")));
  }
}

}  // namespace braid::batching
