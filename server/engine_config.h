// braidd's engine flags -> batching::EngineOptions, and the engine's counters
// as JSON (--stats_file and the shutdown log line). Stateless functions.
#ifndef BRAID_SERVER_ENGINE_CONFIG_H_
#define BRAID_SERVER_ENGINE_CONFIG_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "batching/engine.h"
#include "model/tokenizer/tokenizer.h"

namespace braid::server {

// The flag values, as given.
struct EngineFlags {
  int kv_budget_mb = 512;
  int kv_budget_tokens = 0;  // > 0 overrides kv_budget_mb
  int block_size = 16;
  int max_batch_tokens = 512;
  int max_prefill_tokens_while_decoding = 64;
  int prefill_tokens_per_decode_token = 4;
  double max_decode_slowdown = 1.5;
  int tpot_objective_ms = 60;  // 0: none
  int ttft_objective_ms = 1000;  // 0: prompt deadlines off
  double prompt_slowdown = 2.5;
  int max_num_seqs = 64;
  int max_waiting_requests = 256;
  int64_t max_waiting_tokens = 262144;
  std::array<double, 3> queue_shares = {0.5, 0.25,
                                        0.25};  // io, reasoning, prompt
  std::string think_start, think_end;           // marker text; empty = none
  int context_length = 4096;
  // Sessions.
  int session_idle_timeout_s = 300;  // 0 = never
  int max_sessions_per_client = 16;  // 0 = no limit
  int max_kept_sessions = 64;
  // Debugging (EngineOptions::debug_*).
  int debug_min_step_ms = 0;
  int64_t debug_stall_step = 0;
  int debug_stall_ms = 0;
};

// Validates the flags and sizes the KV cache for a model whose blocks of
// block_size entries take kv_block_bytes(block_size) bytes
// (model::Model::KvBlockBytes). INVALID_ARGUMENT names the flag at fault:
// a cache smaller than one full context, bad shares, a marker that is not
// exactly one token of `tokenizer`, a negative session limit.
absl::StatusOr<batching::EngineOptions> MakeEngineOptions(
    const EngineFlags& flags, absl::FunctionRef<int64_t(int)> kv_block_bytes,
    const model::Tokenizer* tokenizer);

}  // namespace braid::server

#endif  // BRAID_SERVER_ENGINE_CONFIG_H_
