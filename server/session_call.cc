#include "server/session_call.h"

#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "frontend/session_open.h"
#include "server/convert.h"
#include "server/ordered_writer.h"
#include "server/status.h"

namespace braid::server {

using frontend::BuildSession;
using frontend::CheckResume;
using frontend::InvalidField;
using frontend::SessionStreamInfo;
using frontend::StreamTable;
using frontend::UnderField;
namespace {

v1::SessionEvent ErrorEvent(const absl::Status& status) {
  v1::SessionEvent event;
  v1::SessionError* error = event.mutable_error();
  error->set_code(static_cast<int>(status.code()));
  error->set_message(frontend::SanitizeUtf8(status.message()));
  return event;
}

// Appends `next` (tokens of the same stream and kind, at the positions
// right after `into`'s, or text only) to `into`.
bool Mergeable(const v1::SessionTokens& into, const v1::SessionTokens& next) {
  if (into.stream_id() != next.stream_id() || into.stream() != next.stream()) {
    return false;
  }
  if (next.token_ids().empty() || into.token_ids().empty()) return true;
  return next.first_position() == into.first_position() + into.token_ids_size();
}

void Merge(v1::SessionTokens* into, const v1::SessionTokens& next) {
  if (into->token_ids().empty())
    into->set_first_position(next.first_position());
  for (int32_t id : next.token_ids()) into->add_token_ids(id);
  into->mutable_text()->append(next.text());
  for (const v1::TokenLogprob& lp : next.logprobs()) {
    *into->add_logprobs() = lp;
  }
}

struct SessionItem {
  v1::SessionEvent event;
  bool closed = false;  // the engine closed the session: finish
  grpc::Status status;  // when closed
};

}  // namespace

// One call's writer: engine events become SessionEvent messages, token
// events of one stream at contiguous positions coalesced; it also decides
// when a read may start, so that Finish never races one.
class SessionCall::Outbox
    : public OrderedWriter<SessionCall, v1::SessionEvent, SessionItem>,
      public batching::SessionSink {
 public:
  Outbox(SessionCall* call, batching::Engine* engine, const CallHooks& hooks)
      : OrderedWriter(call, hooks, metrics::Rpc::kSession), engine_(engine) {}

  // Before OpenSession.
  void Configure(std::string session_id,
                 std::vector<SessionStreamInfo> streams) {
    absl::MutexLock lock(&mu_);
    session_id_ = std::move(session_id);
    streams_ = std::move(streams);
  }

  void set_handle(uint64_t handle) {
    absl::MutexLock lock(&mu_);
    handle_ = handle;
  }

  // Engine thread.
  void Push(batching::SessionEvent e) override {
    {
      absl::MutexLock lock(&mu_);
      if (e.kind == batching::SessionEvent::Kind::kClosed) {
        engine_closed_ = true;
      }
      if (!Accepting()) return;
      Convert(std::move(e));
    }
    Pump();
  }

  // gRPC threads: a failed action; the session stays open.
  void PushError(const absl::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (!Accepting()) return;
      queue_.push_back(SessionItem{ErrorEvent(status)});
    }
    Pump();
  }

  // The client cancelled, disconnected or its deadline passed.
  void Cancel() {
    Abort(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
  }

  // Cancels the engine session unless it already ended.
  void CancelEngine() override {
    uint64_t handle;
    {
      absl::MutexLock lock(&mu_);
      if (engine_closed_) return;
      handle = handle_;
    }
    if (handle != 0) engine_->Cancel(handle);
  }

  // Decides whether to start the next read; EndRead after StartRead.
  bool BeginRead() {
    absl::MutexLock lock(&mu_);
    if (!Accepting()) return false;
    read_starting_ = true;
    return true;
  }

  void EndRead() {
    {
      absl::MutexLock lock(&mu_);
      read_starting_ = false;
    }
    Pump();
  }

  // The stream index of input (or output) stream `id`, or 0.
  int Find(absl::string_view id, bool output) {
    absl::MutexLock lock(&mu_);
    for (size_t i = 1; i < streams_.size(); ++i) {
      if (streams_[i].id == id && streams_[i].output == output) {
        return static_cast<int>(i);
      }
    }
    return 0;
  }

  uint64_t handle() {
    absl::MutexLock lock(&mu_);
    return handle_;
  }

 private:
  void Convert(batching::SessionEvent e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    using Kind = batching::SessionEvent::Kind;
    const SessionStreamInfo* info =
        e.stream >= 0 && e.stream < static_cast<int>(streams_.size())
            ? &streams_[e.stream]
            : nullptr;
    const std::string stream_id = info != nullptr ? info->id : "";
    SessionItem item;
    v1::SessionEvent& out = item.event;
    switch (e.kind) {
      case Kind::kOpened: {
        v1::SessionOpened* opened = out.mutable_opened();
        opened->set_session_id(session_id_);
        opened->set_prefix_length(e.prefix_length);
        opened->set_resumed(e.resumed);
        opened->set_context_tokens(e.context_tokens);
        break;
      }
      case Kind::kTokens: {
        v1::SessionTokens* t = out.mutable_tokens();
        t->set_stream_id(stream_id);
        t->set_stream(e.reasoning ? v1::STREAM_KIND_REASONING
                                  : v1::STREAM_KIND_OUTPUT);
        t->set_first_position(e.first_position);
        t->set_text(frontend::SanitizeUtf8(e.text));
        const bool logprobs = info != nullptr && info->logprobs;
        for (const batching::SampledToken& s : e.tokens) {
          t->add_token_ids(s.token_id);
          if (!logprobs) continue;
          ToProto(s, t->add_logprobs());
        }
        break;
      }
      case Kind::kAck: {
        v1::InputAck* ack = out.mutable_ack();
        ack->set_input_id(e.input_id);
        ack->set_stream_id(stream_id);
        ack->set_first_position(e.first_position);
        ack->set_end_position(e.end_position);
        ack->set_num_tokens(e.output_tokens);
        break;
      }
      case Kind::kTurnEnd: {
        if (!e.text.empty()) {  // what the turn held back: no token
          SessionItem text;
          v1::SessionTokens* t = text.event.mutable_tokens();
          t->set_stream_id(stream_id);
          t->set_stream(e.reasoning ? v1::STREAM_KIND_REASONING
                                    : v1::STREAM_KIND_OUTPUT);
          t->set_first_position(e.first_position);
          t->set_text(frontend::SanitizeUtf8(e.text));
          queue_.push_back(std::move(text));
        }
        v1::TurnEnd* end = out.mutable_turn_end();
        end->set_stream_id(stream_id);
        v1::FinalInfo* final = end->mutable_info();
        final->set_finish_reason(ToProto(e.finish_reason));
        final->set_matched_stop(frontend::SanitizeUtf8(e.matched_stop));
        final->set_seed(e.seed);
        final->mutable_usage()->set_output_tokens(e.output_tokens);
        final->mutable_usage()->set_reasoning_tokens(e.reasoning_tokens);
        break;
      }
      case Kind::kError:
        item.event = ErrorEvent(e.status);
        break;
      case Kind::kClosed:
        item.closed = true;
        item.status = ToGrpcStatus(e.status);
        break;
    }
    queue_.push_back(std::move(item));
  }

  Step Next(v1::SessionEvent* out, grpc::Status* status) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (queue_.empty()) return Step::kIdle;
    if (queue_.front().closed) {
      *status = queue_.front().status;
      queue_.clear();
      return Step::kFinish;
    }
    *out = std::move(queue_.front().event);
    queue_.pop_front();
    if (out->has_tokens()) {
      v1::SessionTokens* t = out->mutable_tokens();
      while (!queue_.empty() && queue_.front().event.has_tokens() &&
             Mergeable(*t, queue_.front().event.tokens())) {
        Merge(t, queue_.front().event.tokens());
        queue_.pop_front();
      }
    }
    out->set_session_id(session_id_);
    out->set_sequence_number(next_sequence_number_++);
    return Step::kWrite;
  }

  batching::Engine* const engine_;
  std::string session_id_ ABSL_GUARDED_BY(mu_);
  std::vector<SessionStreamInfo> streams_ ABSL_GUARDED_BY(mu_);
  uint64_t handle_ ABSL_GUARDED_BY(mu_) = 0;
  bool engine_closed_ ABSL_GUARDED_BY(mu_) = false;
};

SessionCall::SessionCall(Backend backend, std::string default_session_id,
                         CallHooks hooks)
    : backend_(backend),
      default_session_id_(std::move(default_session_id)),
      outbox_(std::make_shared<Outbox>(this, backend.engine, hooks)),
      hooks_(hooks) {
  if (hooks_.metrics != nullptr) {
    hooks_.metrics->SessionOpened();
    session_counted_ = true;
  }
  if (hooks_.registry != nullptr) registry_id_ = hooks_.registry->Add(outbox_);
  if (outbox_->BeginRead()) {
    StartRead(&request_);
    outbox_->EndRead();
  }
}

SessionCall::SessionCall(const grpc::Status& error, CallHooks hooks)
    : outbox_(std::make_shared<Outbox>(this, nullptr, hooks)), hooks_(hooks) {
  outbox_->FinishNow(error);
}

bool SessionCall::Open(const v1::SessionOpen& open) {
  if (open.resume()) return Resume(open);
  absl::StatusOr<frontend::BuiltSession> built =
      BuildSession(FromProto(open), *backend_.builder, backend_.model_streams);
  if (!built.ok()) {
    outbox_->FinishNow(ToGrpcStatus(built.status()));
    return false;
  }
  batching::SessionOptions& options = built->options;
  std::vector<SessionStreamInfo>& streams = built->streams;
  if (options.session_id.empty()) options.session_id = default_session_id_;
  options.owner = backend_.owner;
  outbox_->Configure(options.session_id, std::move(streams));
  absl::StatusOr<uint64_t> handle =
      backend_.engine->OpenSession(std::move(options), outbox_);
  if (!handle.ok()) {
    outbox_->FinishNow(ToGrpcStatus(handle.status()));
    return false;
  }
  outbox_->set_handle(*handle);
  return true;
}

bool SessionCall::Resume(const v1::SessionOpen& open) {
  if (absl::Status s = CheckResume(FromProto(open)); !s.ok()) {
    outbox_->FinishNow(ToGrpcStatus(s));
    return false;
  }
  absl::StatusOr<uint64_t> handle = backend_.engine->ResumeSession(
      backend_.owner, open.session_id(), outbox_,
      [&](const batching::SessionOptions& options) {
        outbox_->Configure(options.session_id, StreamTable(options));
      });
  if (!handle.ok()) {
    outbox_->FinishNow(ToGrpcStatus(handle.status()));
    return false;
  }
  outbox_->set_handle(*handle);
  return true;
}

bool SessionCall::Act(const v1::SessionRequest& request) {
  const uint64_t handle = outbox_->handle();
  switch (request.action_case()) {
    case v1::SessionRequest::kOpen:
      outbox_->PushError(InvalidField("open", "the session is already open"));
      return true;
    case v1::SessionRequest::kAppend: {
      const v1::SessionAppend& a = request.append();
      batching::SessionInput input;
      input.stream = outbox_->Find(a.stream_id(), /*output=*/false);
      if (input.stream == 0) {
        outbox_->PushError(InvalidField(
            "append.stream_id",
            absl::StrCat("\"", a.stream_id(), "\" is not an INPUT stream")));
        return true;
      }
      if (a.input_id().size() > 128) {
        outbox_->PushError(
            InvalidField("append.input_id", "must be at most 128 bytes"));
        return true;
      }
      input.input_id = a.input_id();
      for (int i = 0; i < a.generate_on_size(); ++i) {
        const int s = outbox_->Find(a.generate_on(i), /*output=*/true);
        if (s == 0) {
          outbox_->PushError(
              InvalidField(absl::StrCat("append.generate_on[", i, "]"),
                           absl::StrCat("\"", a.generate_on(i),
                                        "\" is not an OUTPUT stream")));
          return true;
        }
        input.generate_on.push_back(s);
      }
      if (!a.has_input()) {
        outbox_->PushError(InvalidField("append.input", "is required"));
        return true;
      }
      absl::StatusOr<std::vector<int32_t>> tokens =
          backend_.builder->PromptTokens(FromProto(a.input()),
                                         /*starts_context=*/false);
      if (!tokens.ok()) {
        outbox_->PushError(UnderField("append.input", tokens.status()));
        return true;
      }
      input.tokens = *std::move(tokens);
      backend_.engine->SessionAppend(handle, std::move(input));
      return true;
    }
    case v1::SessionRequest::kInterruptStreamId: {
      const int s = outbox_->Find(request.interrupt_stream_id(), true);
      if (s == 0) {
        outbox_->PushError(
            InvalidField("interrupt_stream_id",
                         absl::StrCat("\"", request.interrupt_stream_id(),
                                      "\" is not an OUTPUT stream")));
        return true;
      }
      backend_.engine->SessionInterrupt(handle, s);
      return true;
    }
    case v1::SessionRequest::kCancel:
      if (!request.cancel()) {
        outbox_->PushError(InvalidField("cancel", "must be true when set"));
        return true;
      }
      backend_.engine->Cancel(handle);
      return false;
    case v1::SessionRequest::kClose:
      backend_.engine->CloseSession(handle, request.close().keep());
      return false;
    case v1::SessionRequest::ACTION_NOT_SET:
      break;
  }
  outbox_->PushError(InvalidField(
      "action",
      "one of append, interrupt_stream_id, cancel or close must be set"));
  return true;
}

void SessionCall::OnReadDone(bool ok) {
  bool more;
  if (!ok) {
    // Half-close, or the call is ending (then OnCancel acts).
    if (!opened_) {
      outbox_->FinishNow(ToGrpcStatus(
          InvalidField("SessionRequest", "the first message must be `open`")));
    } else {
      const uint64_t handle = outbox_->handle();
      if (handle != 0) backend_.engine->CloseSession(handle);
    }
    return;
  }
  if (!opened_) {
    if (request_.action_case() != v1::SessionRequest::kOpen) {
      outbox_->FinishNow(ToGrpcStatus(
          InvalidField("SessionRequest", "the first message must be `open`")));
      return;
    }
    if (!Open(request_.open())) return;
    opened_ = true;
    more = true;
  } else {
    more = Act(request_);
  }
  if (more && outbox_->BeginRead()) {
    StartRead(&request_);
    outbox_->EndRead();
  }
}

void SessionCall::OnWriteDone(bool ok) { outbox_->WriteDone(ok); }

void SessionCall::OnCancel() { outbox_->Cancel(); }

void SessionCall::OnDone() {
  outbox_->Detach();
  outbox_->CancelEngine();  // no-op when the session already ended
  if (registry_id_ != 0) hooks_.registry->Remove(registry_id_);
  if (session_counted_) hooks_.metrics->SessionClosed();
  delete this;
}

}  // namespace braid::server
