#include "server/generate_call.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/convert.h"
#include "server/ordered_writer.h"
#include "server/status.h"

namespace braid::server {
namespace {

void AppendChunk(const batching::OutputChunk& chunk,
                 v1::GenerateResponse* out) {
  for (int32_t id : chunk.token_ids) out->add_token_ids(id);
  out->mutable_text()->append(chunk.text);
  for (const batching::SampledToken& t : chunk.logprobs) {
    ToProto(t, out->add_logprobs());
  }
  if (!chunk.final) return;
  v1::FinalInfo* info = out->mutable_final();
  info->set_finish_reason(ToProto(chunk.finish_reason));
  info->set_matched_stop(chunk.matched_stop);
  info->set_seed(chunk.seed);
  v1::Usage* usage = info->mutable_usage();
  usage->set_prompt_tokens(chunk.prompt_tokens);
  usage->set_output_tokens(chunk.output_tokens);
  usage->set_reasoning_tokens(chunk.reasoning_tokens);
  v1::Timings* timings = info->mutable_timings();
  timings->set_queue_seconds(chunk.queue_seconds);
  timings->set_time_to_first_token_seconds(chunk.time_to_first_token_seconds);
  timings->set_total_seconds(chunk.total_seconds);
}

}  // namespace

// One call's writer: chunks from the engine become GenerateResponse
// messages, the chunks of one stream (reasoning or output) coalesced.
class GenerateCall::Outbox
    : public OrderedWriter<GenerateCall, v1::GenerateResponse,
                           batching::OutputChunk>,
      public batching::OutputSink {
 public:
  Outbox(GenerateCall* call, batching::Engine* engine, std::string request_id,
         absl::Time client_deadline, const CallHooks& hooks)
      : OrderedWriter(call, hooks, metrics::Rpc::kGenerate),
        engine_(engine),
        request_id_(std::move(request_id)),
        client_deadline_(client_deadline) {}

  void set_handle(uint64_t handle) {
    absl::MutexLock lock(&mu_);
    handle_ = handle;
  }

  // Engine thread.
  void Push(batching::OutputChunk chunk) override {
    {
      absl::MutexLock lock(&mu_);
      if (!Accepting()) return;
      queue_.push_back(std::move(chunk));
    }
    Pump();
  }

  // The client cancelled, disconnected or its deadline passed.
  void Cancel() {
    const bool deadline = absl::Now() >= client_deadline_;
    if (!MarkCancelled(grpc::Status(
            deadline ? grpc::StatusCode::DEADLINE_EXCEEDED
                     : grpc::StatusCode::CANCELLED,
            deadline ? "deadline exceeded" : "cancelled by the client"))) {
      return;
    }
    RecordCancellation(deadline ? metrics::CancelCause::kDeadline
                                : metrics::CancelCause::kClient);
    CancelEngine();
    Pump();
  }

  void Abort(const grpc::Status& status) override {
    if (!MarkCancelled(status)) return;
    RecordCancellation(metrics::CancelCause::kDrain);
    CancelEngine();
    Pump();
  }

 private:
  void RecordCancellation(metrics::CancelCause cause) {
    if (metrics() != nullptr) metrics()->RecordCancellation(cause);
  }

  void CancelEngine() override {
    uint64_t handle;
    {
      absl::MutexLock lock(&mu_);
      handle = handle_;
    }
    if (handle != 0) engine_->Cancel(handle);
  }

  bool Completed() const override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return final_written_;
  }

  Step Next(v1::GenerateResponse* out, grpc::Status* status) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (queue_.empty()) return Step::kIdle;
    out->Clear();
    out->set_request_id(request_id_);
    // Coalesce chunks of one stream (reasoning or output) per message.
    const bool reasoning = queue_.front().reasoning;
    out->set_stream(reasoning ? v1::STREAM_KIND_REASONING
                              : v1::STREAM_KIND_OUTPUT);
    while (!queue_.empty()) {
      const batching::OutputChunk& c = queue_.front();
      if (!c.error.ok()) {
        *status = ToGrpcStatus(c.error);
        queue_.clear();
        return Step::kFinish;
      }
      if (c.reasoning != reasoning && !c.final) break;
      AppendChunk(c, out);
      if (c.final) final_written_ = true;
      queue_.pop_front();
    }
    out->set_sequence_number(next_sequence_number_++);
    return Step::kWrite;
  }

  batching::Engine* const engine_;
  const std::string request_id_;
  const absl::Time client_deadline_;
  uint64_t handle_ ABSL_GUARDED_BY(mu_) = 0;
  bool final_written_ ABSL_GUARDED_BY(mu_) = false;
};

GenerateCall::GenerateCall(batching::Engine* engine,
                           batching::GenerationRequest request,
                           absl::Time client_deadline, CallHooks hooks)
    : outbox_(std::make_shared<Outbox>(this, engine, request.request_id,
                                       client_deadline, hooks)),
      hooks_(hooks) {
  if (hooks_.metrics != nullptr) {
    hooks_.metrics->SessionOpened();
    session_counted_ = true;
  }
  if (hooks_.registry != nullptr) registry_id_ = hooks_.registry->Add(outbox_);
  absl::StatusOr<uint64_t> handle = engine->Submit(std::move(request), outbox_);
  if (!handle.ok()) {
    outbox_->FinishNow(ToGrpcStatus(handle.status()));
    return;
  }
  outbox_->set_handle(*handle);
}

GenerateCall::GenerateCall(const grpc::Status& error, CallHooks hooks)
    : outbox_(std::make_shared<Outbox>(this, nullptr, "",
                                       absl::InfiniteFuture(), hooks)) {
  outbox_->FinishNow(error);
}

void GenerateCall::OnWriteDone(bool ok) { outbox_->WriteDone(ok); }

void GenerateCall::OnCancel() { outbox_->Cancel(); }

void GenerateCall::OnDone() {
  outbox_->Detach();
  if (registry_id_ != 0) hooks_.registry->Remove(registry_id_);
  if (session_counted_) hooks_.metrics->SessionClosed();
  delete this;
}

}  // namespace braid::server
