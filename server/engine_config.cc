#include "server/engine_config.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace braid::server {
namespace {

absl::StatusOr<int32_t> MarkerToken(const std::string& flag,
                                    const std::string& text,
                                    const model::Tokenizer* tokenizer) {
  if (text.empty()) return -1;
  std::vector<int32_t> ids = tokenizer->Encode(text, false, true);
  if (ids.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "=", text, " is ", ids.size(),
        " tokens of this model's vocabulary; a thinking marker must be one"));
  }
  return ids[0];
}

// The KV pool: block size and count (from --kv_budget_tokens or
// --kv_budget_mb), at least one context.
absl::Status SetKvPool(const EngineFlags& flags,
                       absl::FunctionRef<int64_t(int)> kv_block_bytes,
                       batching::SchedulerOptions& s) {
  if (flags.block_size < 1 || flags.block_size > 1024) {
    return absl::InvalidArgumentError("--block_size must be in [1, 1024]");
  }
  s.block_size = flags.block_size;
  if (flags.kv_budget_tokens > 0) {
    s.num_blocks = (flags.kv_budget_tokens + s.block_size - 1) / s.block_size;
  } else {
    const int64_t block = kv_block_bytes(s.block_size);
    const int64_t budget = int64_t{flags.kv_budget_mb} << 20;
    s.num_blocks = block > 0 && budget > 0
                       ? static_cast<int>(std::min<int64_t>(budget / block,
                                                            int64_t{1} << 30))
                       : 0;
  }
  const int64_t pool_tokens = int64_t{s.num_blocks} * s.block_size;
  if (pool_tokens < flags.context_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("the KV cache holds ", pool_tokens,
                     " tokens, less than one context (", flags.context_length,
                     "); raise --kv_budget_mb / --kv_budget_tokens or lower "
                     "--context_length"));
  }
  return absl::OkStatus();
}

// Admission control and the session limits.
absl::Status SetLimits(const EngineFlags& flags, batching::EngineOptions& o) {
  if (flags.max_waiting_requests < 0 || flags.max_waiting_tokens < 0) {
    return absl::InvalidArgumentError(
        "--max_waiting_requests and --max_waiting_tokens must be >= 0");
  }
  o.max_waiting_requests = flags.max_waiting_requests;
  o.max_waiting_tokens = flags.max_waiting_tokens;
  o.max_context_tokens = flags.context_length;
  if (flags.session_idle_timeout_s < 0 || flags.max_sessions_per_client < 0 ||
      flags.max_kept_sessions < 0) {
    return absl::InvalidArgumentError(
        "--session_idle_timeout_s, --max_sessions_per_client and "
        "--max_kept_sessions must be >= 0");
  }
  o.session_idle_timeout = flags.session_idle_timeout_s > 0
                               ? absl::Seconds(flags.session_idle_timeout_s)
                               : absl::InfiniteDuration();
  o.max_sessions_per_client = flags.max_sessions_per_client;
  o.max_kept_sessions = flags.max_kept_sessions;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<batching::EngineOptions> MakeEngineOptions(
    const EngineFlags& flags, absl::FunctionRef<int64_t(int)> kv_block_bytes,
    const model::Tokenizer* tokenizer) {
  batching::EngineOptions o;
  batching::SchedulerOptions& s = o.scheduler;
  BRAID_RETURN_IF_ERROR(SetKvPool(flags, kv_block_bytes, s));
  s.max_batch_tokens = flags.max_batch_tokens;
  s.max_prefill_tokens_while_decoding = flags.max_prefill_tokens_while_decoding;
  s.prefill_tokens_per_decode_token = flags.prefill_tokens_per_decode_token;
  if (!(flags.max_decode_slowdown >= 0 && flags.max_decode_slowdown <= 100)) {
    return absl::InvalidArgumentError(
        "--max_decode_slowdown must be in [0, 100] (<= 1 = off)");
  }
  o.max_decode_slowdown = flags.max_decode_slowdown;
  if (flags.tpot_objective_ms < 0 || flags.tpot_objective_ms > 60000) {
    return absl::InvalidArgumentError(
        "--tpot_objective_ms must be in [0, 60000] (0 = none)");
  }
  o.tpot_objective = absl::Milliseconds(flags.tpot_objective_ms);
  if (flags.ttft_objective_ms < 0 || flags.ttft_objective_ms > 3600000) {
    return absl::InvalidArgumentError(
        "--ttft_objective_ms must be in [0, 3600000] (0 = off)");
  }
  o.ttft_objective = absl::Milliseconds(flags.ttft_objective_ms);
  if (!(flags.prompt_slowdown >= 0 && flags.prompt_slowdown <= 1000)) {
    return absl::InvalidArgumentError(
        "--prompt_slowdown must be in [0, 1000]");
  }
  o.prompt_slowdown = flags.prompt_slowdown;
  s.max_num_seqs = flags.max_num_seqs;
  s.queue_shares = flags.queue_shares;
  BRAID_ASSIGN_OR_RETURN(
      const int32_t start,
      MarkerToken("think_start", flags.think_start, tokenizer));
  BRAID_ASSIGN_OR_RETURN(const int32_t end,
                         MarkerToken("think_end", flags.think_end, tokenizer));
  o.reasoning = {start, end};
  if (flags.debug_min_step_ms < 0 || flags.debug_stall_ms < 0 ||
      flags.debug_stall_step < 0) {
    return absl::InvalidArgumentError(
        "--debug_min_step_ms, --debug_stall_step and --debug_stall_ms must "
        "be >= 0");
  }
  o.debug_min_step = absl::Milliseconds(flags.debug_min_step_ms);
  o.debug_stall_step = flags.debug_stall_step;
  o.debug_stall = absl::Milliseconds(flags.debug_stall_ms);
  if (absl::Status st = s.Validate(); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        st.message(),
        " (--max_batch_tokens, --max_num_seqs, --io_share, --reasoning_share, "
        "--prompt_share)"));
  }
  BRAID_RETURN_IF_ERROR(SetLimits(flags, o));
  return o;
}

}  // namespace braid::server
