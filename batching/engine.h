#ifndef BRAID_BATCHING_ENGINE_H_
#define BRAID_BATCHING_ENGINE_H_

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "batching/request.h"
#include "model/llama.h"
#include "model/tokenizer/streaming_detokenizer.h"
#include "model/tokenizer/tokenizer.h"

namespace braid::batching {

struct EngineOptions {
  int max_running = 8;      // requests holding a KV cache at once
  int max_waiting = 256;    // admitted but not yet running
  int prefill_chunk = 512;  // prompt tokens per forward call
};

// Counters for tests and operators; a consistent snapshot.
struct EngineStats {
  int running = 0;
  int waiting = 0;
  int64_t kv_tokens_reserved = 0;  // capacity of live KV caches, in tokens
  int64_t completed = 0;
  int64_t cancelled = 0;
};

// The step loop: one engine thread runs every model call.
//
// Requests enter through Submit (any thread) and wait in a FIFO by priority.
// Each step the engine admits waiting requests up to `max_running`, then gives
// every running request one forward call (a prefill chunk or one decode
// token), samples, and pushes output to the request's sink. Cancel marks a
// request; it is finished and its KV cache freed at the start of the next
// step. Requests come and go between steps.
//
// This is the single-sequence-per-call engine of the first release: each
// request owns a contiguous KV cache sized to prompt + max_tokens. Paged KV
// and batched steps replace it in batching/'s continuous-batching engine.
//
// Thread-safe: Submit, Cancel, Stats and Shutdown may be called from any
// thread. The model and tokenizer must outlive the engine.
class Engine {
 public:
  Engine(model::LlamaModel* model, const model::Tokenizer* tokenizer,
         const EngineOptions& options);
  ~Engine();  // Shutdown()

  // Queues a request. RESOURCE_EXHAUSTED when the waiting queue is full.
  // Returns a handle for Cancel.
  absl::StatusOr<uint64_t> Submit(GenerationRequest request,
                                  std::shared_ptr<OutputSink> sink);

  // Cancels a request in any phase; its sink gets a final CANCELLED chunk.
  // Unknown or finished handles are ignored.
  void Cancel(uint64_t handle);

  EngineStats Stats() const;

  // Cancels everything and joins the engine thread.
  void Shutdown();

 private:
  struct Sequence;

  void Loop();
  void AdmitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs one forward call for `seq`; returns true when it finished.
  bool Step(Sequence& seq);
  // Sends one token; returns true when a stop string matched (finished).
  bool EmitToken(Sequence& seq, const SampledToken& token);
  // Sends the final chunk and frees the KV cache.
  void Finish(Sequence& seq, FinishReason reason, absl::Status error,
              std::string matched_stop = "");

  model::LlamaModel* const model_;
  const model::Tokenizer* const tokenizer_;
  const EngineOptions options_;

  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  std::deque<std::unique_ptr<Sequence>> waiting_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> cancels_ ABSL_GUARDED_BY(mu_);
  EngineStats stats_ ABSL_GUARDED_BY(mu_);

  // Engine thread only.
  std::list<std::unique_ptr<Sequence>> running_;
  std::vector<float> logits_;

  std::thread thread_;
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_ENGINE_H_
