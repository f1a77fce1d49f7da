// The metric definitions: names, fixed label sets, what each Record call
// moves, and the vLLM-compatible names only behind their option.
#include <sstream>

#include "gtest/gtest.h"
#include "metrics/engine_metrics.h"
#include "metrics/server_metrics.h"
#include "metrics/testing.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace braid::metrics {
namespace {

using testing::Value;

std::string Text(const prometheus::Registry& r) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, r.Collect());
  return out.str();
}

TEST(EngineMetricsTest, FixedLabelSetsExistAtZero) {
  prometheus::Registry r;
  EngineMetrics m(r);
  for (const char* q : {"io", "reasoning", "prompt"}) {
    EXPECT_EQ(Value(r, "braid_requests_running", {{"queue", q}}), 0) << q;
    EXPECT_EQ(Value(r, "braid_requests_waiting", {{"queue", q}}), 0) << q;
    EXPECT_EQ(Value(r, "braid_inter_token_latency_seconds", {{"queue", q}}), 0);
  }
  for (const char* f :
       {"eos", "length", "stop", "context_full", "cancelled", "error"}) {
    EXPECT_EQ(Value(r, "braid_requests_finished_total", {{"finish_reason", f}}),
              0);
  }
  EXPECT_EQ(Value(r, "braid_preemptions_total"), 0);
  EXPECT_EQ(Value(r, "braid_num_requests_waiting"), 0);
  EXPECT_EQ(Value(r, "vllm:num_requests_waiting"), -1);  // braid's own names
}

TEST(EngineMetricsTest, RecordsStepsTokensAndRequests) {
  prometheus::Registry r;
  EngineMetrics m(r);
  m.RecordStep(StepPhase::kPrefill, 0.2, 1, 100);
  m.RecordStep(StepPhase::kDecode, 0.01, 4, 4);
  m.RecordStep(StepPhase::kDecode, 0.01, 4, 4);
  m.RecordInterTokenLatency(Queue::kReasoning, 0.03);
  m.RecordPreemptions(2);
  m.RecordRejection(Rejection::kWaitingTokens);
  RequestSample s;
  s.finish_reason = FinishReason::kLength;
  s.queue_seconds = 0.1;
  s.time_to_first_token_seconds = 0.5;
  s.e2e_seconds = 1.5;
  s.prompt_tokens = 10;
  s.reasoning_tokens = 3;
  s.output_tokens = 11;
  m.RecordRequest(s);
  RequestSample cancelled;  // never scheduled
  cancelled.finish_reason = FinishReason::kCancelled;
  cancelled.e2e_seconds = 0.2;
  m.RecordRequest(cancelled);

  EXPECT_EQ(
      Value(r, "braid_engine_step_duration_seconds", {{"phase", "prefill"}}),
      1);
  EXPECT_EQ(
      Value(r, "braid_engine_step_duration_seconds", {{"phase", "decode"}}), 2);
  EXPECT_EQ(Value(r, "braid_engine_step_tokens"), 3);
  EXPECT_EQ(
      Value(r, "braid_inter_token_latency_seconds", {{"queue", "reasoning"}}),
      1);
  EXPECT_EQ(Value(r, "braid_preemptions_total"), 2);
  EXPECT_EQ(Value(r, "braid_admission_rejections_total",
                  {{"bound", "waiting_tokens"}}),
            1);
  EXPECT_EQ(
      Value(r, "braid_requests_finished_total", {{"finish_reason", "length"}}),
      1);
  EXPECT_EQ(Value(r, "braid_requests_finished_total",
                  {{"finish_reason", "cancelled"}}),
            1);
  EXPECT_EQ(Value(r, "braid_request_duration_seconds"), 2);
  EXPECT_EQ(Value(r, "braid_request_queue_time_seconds"), 1);
  EXPECT_EQ(Value(r, "braid_time_to_first_token_seconds"), 1);
  EXPECT_EQ(Value(r, "braid_time_per_output_token_seconds"), 1);
  EXPECT_EQ(Value(r, "braid_prompt_tokens_total"), 10);
  EXPECT_EQ(Value(r, "braid_reasoning_tokens_total"), 3);
  EXPECT_EQ(Value(r, "braid_output_tokens_total"), 11);
  // (1.5 - 0.5) / 10 = 0.1 s per output token: in the (0.08, 0.1] bucket.
  EXPECT_NE(
      Text(r).find("braid_time_per_output_token_seconds_bucket{le=\"0.1\"} 1"),
      std::string::npos);
}

TEST(EngineMetricsTest, Gauges) {
  prometheus::Registry r;
  EngineMetrics m(r);
  EngineGauges g;
  g.running = {3, 1, 2};
  g.waiting = {0, 0, 5};
  g.kv_blocks_total = 100;
  g.kv_blocks_free = 75;
  g.prefix_hit_tokens = 30;
  g.computed_tokens = 90;
  m.SetGauges(g);
  EXPECT_EQ(Value(r, "braid_requests_running", {{"queue", "io"}}), 3);
  EXPECT_EQ(Value(r, "braid_requests_waiting", {{"queue", "prompt"}}), 5);
  EXPECT_EQ(Value(r, "braid_kv_blocks_used"), 25);
  EXPECT_EQ(Value(r, "braid_kv_blocks_free"), 75);
  EXPECT_DOUBLE_EQ(Value(r, "braid_kv_usage_ratio"), 0.25);
  EXPECT_DOUBLE_EQ(Value(r, "braid_prefix_cache_hit_ratio"), 0.25);
  EXPECT_EQ(Value(r, "braid_num_requests_running"), 6);
  EXPECT_EQ(Value(r, "braid_num_requests_waiting"), 5);
}

TEST(ServerMetricsTest, RpcsByCodeSessionsStateAndInfo) {
  prometheus::Registry r;
  ServerMetrics m(r, "1.2.3");
  EXPECT_EQ(
      Value(r, "braid_rpcs_total", {{"method", "Generate"}, {"code", "OK"}}),
      0);
  m.RecordRpc(Rpc::kGenerate, 3);
  m.RecordRpc(Rpc::kGenerate, 3);
  m.RecordRpc(Rpc::kTokenize, 16);
  m.RecordRpc(Rpc::kTokenize, 99);  // out of range -> UNKNOWN
  m.RecordRpc(Rpc::kSession, 4);
  EXPECT_EQ(Value(r, "braid_rpcs_total",
                  {{"method", "Session"}, {"code", "DEADLINE_EXCEEDED"}}),
            1);
  EXPECT_EQ(
      Value(r, "braid_rpcs_total", {{"method", "Session"}, {"code", "OK"}}), 0);
  EXPECT_EQ(Value(r, "braid_rpcs_total",
                  {{"method", "Generate"}, {"code", "INVALID_ARGUMENT"}}),
            2);
  EXPECT_EQ(Value(r, "braid_rpcs_total",
                  {{"method", "Tokenize"}, {"code", "UNAUTHENTICATED"}}),
            1);
  EXPECT_EQ(Value(r, "braid_rpcs_total",
                  {{"method", "Tokenize"}, {"code", "UNKNOWN"}}),
            1);
  m.RecordCancellation(CancelCause::kDrain);
  EXPECT_EQ(Value(r, "braid_cancellations_total", {{"cause", "drain"}}), 1);
  m.SessionOpened();
  m.SessionOpened();
  m.SessionClosed();
  EXPECT_EQ(Value(r, "braid_sessions_open"), 1);
  EXPECT_EQ(Value(r, "braid_server_state", {{"state", "loading"}}), 1);
  m.SetState(ServerState::kDraining);
  EXPECT_EQ(Value(r, "braid_server_state", {{"state", "loading"}}), 0);
  EXPECT_EQ(Value(r, "braid_server_state", {{"state", "draining"}}), 1);
  m.SetState(ServerState::kStalled);
  EXPECT_EQ(Value(r, "braid_server_state", {{"state", "draining"}}), 0);
  EXPECT_EQ(Value(r, "braid_server_state", {{"state", "stalled"}}), 1);
  m.RecordStall();
  EXPECT_EQ(Value(r, "braid_engine_stalls_total"), 1);
  m.SetResidentBytes(123456789);
  EXPECT_EQ(Value(r, "process_resident_memory_bytes"), 123456789);
  EXPECT_EQ(Value(r, "braid_build_info", {{"version", "1.2.3"}}), 1);
  m.SetModelInfo({.name = "SmolLM2",
                  .architecture = "llama",
                  .backend = "cpu",
                  .context_length = 512,
                  .kv_block_size = 16,
                  .kv_num_blocks = 4096});
  EXPECT_EQ(Value(r, "braid_model_info",
                  {{"model_name", "SmolLM2"}, {"context_length", "512"}}),
            1);
  EXPECT_EQ(Value(r, "braid_kv_cache_info",
                  {{"block_size", "16"}, {"num_blocks", "4096"}}),
            1);
}

}  // namespace
}  // namespace braid::metrics
