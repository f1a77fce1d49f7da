// The engine's session entry points and their application on the engine
// thread (batching/session.h holds the session logic).
#include <utility>

#include "absl/strings/str_cat.h"
#include "batching/engine.h"

namespace braid::batching {

absl::StatusOr<uint64_t> Engine::OpenSession(
    SessionOptions options, std::shared_ptr<SessionSink> sink) {
  if (options.prefix.empty()) {
    return absl::InvalidArgumentError(
        "a session needs a non-empty prefix (at least one token)");
  }
  if (options.streams.empty()) {
    return absl::InvalidArgumentError("a session needs at least one stream");
  }
  const int64_t pool_tokens =
      int64_t{options_.scheduler.num_blocks} * options_.scheduler.block_size;
  if (static_cast<int64_t>(options.prefix.size()) >= pool_tokens) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the session prefix needs ", options.prefix.size(),
        " tokens of KV cache but the whole pool holds ", pool_tokens));
  }
  absl::MutexLock lock(&mu_);
  if (shutdown_) return absl::UnavailableError("the engine is shutting down");
  const uint64_t handle = next_handle_++;
  SessionCommand c;
  c.kind = SessionCommand::Kind::kOpen;
  c.handle = handle;
  c.session = std::make_unique<Session>(std::move(options), std::move(sink),
                                        handle, tokenizer_, options_.reasoning);
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

void Engine::CloseSession(uint64_t handle) {
  SessionCommand c;
  c.kind = SessionCommand::Kind::kClose;
  c.handle = handle;
  PostSession(std::move(c));
}

void Engine::ApplySessionCommand(SessionCommand& c) {
  if (c.kind == SessionCommand::Kind::kOpen) {
    Session& s = *c.session;
    sessions_[c.handle] = std::move(c.session);
    s.Open(scheduler_);
    return;
  }
  auto it = sessions_.find(c.handle);
  if (it == sessions_.end()) return;
  Session& s = *it->second;
  switch (c.kind) {
    case SessionCommand::Kind::kAppend:
      s.Append(std::move(c.input), scheduler_);
      break;
    case SessionCommand::Kind::kInterrupt:
      s.Interrupt(c.stream, scheduler_);
      break;
    case SessionCommand::Kind::kClose:
      FinishSession(s, absl::OkStatus());
      break;
    case SessionCommand::Kind::kOpen:
      break;
  }
}

void Engine::FinishSession(Session& session, absl::Status status) {
  session.EndAllTurns(FinishReason::kCancelled, scheduler_);
  // Free the blocks before telling the client.
  scheduler_.Remove(session.handle());
  std::unique_ptr<Session> owned = std::move(sessions_[session.handle()]);
  sessions_.erase(session.handle());
  PublishStats();
  SessionEvent e;
  e.kind = SessionEvent::Kind::kClosed;
  e.status = std::move(status);
  owned->sink().Push(std::move(e));
}

}  // namespace braid::batching
