#include "server/generate_call.h"

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/convert.h"
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

// The shared state of one call: chunks from the engine, the write in flight
// and the call's progress, all under one mutex.
class GenerateCall::Outbox : public batching::OutputSink,
                             public AbortableStream {
 public:
  Outbox(GenerateCall* call, batching::Engine* engine, std::string request_id,
         absl::Time client_deadline, metrics::ServerMetrics* metrics)
      : call_(call),
        engine_(engine),
        request_id_(std::move(request_id)),
        client_deadline_(client_deadline),
        metrics_(metrics) {}

  void set_handle(uint64_t handle) {
    absl::MutexLock lock(&mu_);
    handle_ = handle;
  }

  // Engine thread.
  void Push(batching::OutputChunk chunk) override {
    {
      absl::MutexLock lock(&mu_);
      if (call_ == nullptr || finished_) return;
      chunks_.push_back(std::move(chunk));
    }
    Pump();
  }

  // gRPC threads.
  void WriteDone(bool ok) {
    {
      absl::MutexLock lock(&mu_);
      write_in_flight_ = false;
      if (!ok && !cancelled_) {  // the stream is broken
        cancelled_ = true;
        cancel_status_ = grpc::Status(grpc::StatusCode::CANCELLED,
                                      "the client's stream broke");
      }
    }
    if (!ok) CancelEngineRequest();
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
    CancelEngineRequest();
    Pump();
  }

  void Abort(const grpc::Status& status) override {
    if (!MarkCancelled(status)) return;
    RecordCancellation(metrics::CancelCause::kDrain);
    CancelEngineRequest();
    Pump();
  }

  void FinishNow(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    RecordRpc(status);
    call_->Finish(status);
  }

  void Detach() {
    absl::MutexLock lock(&mu_);
    call_ = nullptr;
    chunks_.clear();
  }

 private:
  // False when the call already finished or was cancelled.
  bool MarkCancelled(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    if (finished_ || cancelled_) return false;
    cancelled_ = true;
    cancel_status_ = status;
    return true;
  }

  void RecordCancellation(metrics::CancelCause cause) {
    if (metrics_ != nullptr) metrics_->RecordCancellation(cause);
  }

  void RecordRpc(const grpc::Status& status) {
    if (metrics_ != nullptr) {
      metrics_->RecordRpc(metrics::Rpc::kGenerate,
                          static_cast<int>(status.error_code()));
    }
  }

  void CancelEngineRequest() {
    uint64_t handle;
    {
      absl::MutexLock lock(&mu_);
      handle = handle_;
    }
    if (handle != 0) engine_->Cancel(handle);
  }

  // Starts the next write, or finishes the call, when there is something to
  // do and no write in flight.
  void Pump() {
    GenerateCall* call;
    grpc::Status finish_status;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      call = call_;
      if (call == nullptr || finished_ || write_in_flight_) return;
      if (final_written_ || cancelled_) {
        finish = true;
        finish_status = final_written_ ? grpc::Status::OK : cancel_status_;
      } else {
        if (chunks_.empty()) return;
        response_.Clear();
        response_.set_request_id(request_id_);
        // Coalesce chunks of one stream (reasoning or output) per message.
        const bool reasoning = chunks_.front().reasoning;
        response_.set_stream(reasoning ? v1::STREAM_KIND_REASONING
                                       : v1::STREAM_KIND_OUTPUT);
        while (!chunks_.empty()) {
          const batching::OutputChunk& c = chunks_.front();
          if (!c.error.ok()) {
            finish = true;
            finish_status = ToGrpcStatus(c.error);
            chunks_.clear();
            break;
          }
          if (c.reasoning != reasoning && !c.final) break;
          AppendChunk(c, &response_);
          if (c.final) final_written_ = true;
          chunks_.pop_front();
        }
        if (!finish) {
          response_.set_sequence_number(next_sequence_number_++);
          write_in_flight_ = true;
        }
      }
      if (finish) finished_ = true;
    }
    if (finish) {
      RecordRpc(finish_status);
      call->Finish(finish_status);
    } else {
      call->StartWrite(&response_);
    }
  }

  absl::Mutex mu_;
  GenerateCall* call_ ABSL_GUARDED_BY(mu_);
  batching::Engine* const engine_;
  const std::string request_id_;
  const absl::Time client_deadline_;
  metrics::ServerMetrics* const metrics_;
  uint64_t handle_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<batching::OutputChunk> chunks_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish() was called
  bool final_written_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status cancel_status_ ABSL_GUARDED_BY(mu_);  // when cancelled_
  uint64_t next_sequence_number_ ABSL_GUARDED_BY(mu_) = 0;
  v1::GenerateResponse response_;  // the write in flight
};

GenerateCall::GenerateCall(batching::Engine* engine,
                           batching::GenerationRequest request,
                           absl::Time client_deadline, CallHooks hooks)
    : outbox_(std::make_shared<Outbox>(this, engine, request.request_id,
                                       client_deadline, hooks.metrics)),
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
                                       absl::InfiniteFuture(), hooks.metrics)) {
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
