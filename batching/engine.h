#ifndef BRAID_BATCHING_ENGINE_H_
#define BRAID_BATCHING_ENGINE_H_

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "batching/executor.h"
#include "batching/prefill_pacer.h"
#include "batching/reasoning.h"
#include "batching/request.h"
#include "batching/scheduler.h"
#include "batching/session.h"
#include "batching/work_queue.h"
#include "metrics/engine_metrics.h"
#include "model/tokenizer/tokenizer.h"

namespace braid::batching {

struct EngineOptions {
  SchedulerOptions scheduler;
  // Admission control: requests accepted but not yet started, and their
  // prompt tokens. Beyond either bound Submit fails at once.
  int max_waiting_requests = 256;
  int64_t max_waiting_tokens = 256 * 1024;
  // A request that reaches this many tokens (prompt + output) finishes with
  // kContextFull; a session's context (all its streams' entries) holds at
  // most this many (batching/session.h).
  int max_context_tokens = 4096;
  // Sessions: open sessions per client (SessionOptions::owner; 0 = no
  // limit), sessions kept for resume (the least recently kept go first; 0 =
  // none are kept), and how long an open session may sit idle before it is
  // kept and its client told (absl::InfiniteDuration() = never).
  int max_sessions_per_client = 0;
  int max_kept_sessions = 64;
  absl::Duration session_idle_timeout = absl::InfiniteDuration();
  // Stream isolation: while requests decode, prompt prefill is paced so a
  // step takes at most this many times a decode-only step, as measured
  // (PrefillPacer; at least 1 prompt token per step). <= 1 turns pacing
  // off (the scheduler's static limit still applies).
  double max_decode_slowdown = 0;
  // A TPOT objective: while requests decode, a step may take up to this long
  // when that allows more prompt tokens than max_decode_slowdown does
  // (absl::ZeroDuration() = none). The default of requests and sessions that
  // state none (SessionOptions::tpot_objective); each step is held to the
  // tightest objective of the work decoding in it.
  absl::Duration tpot_objective = absl::ZeroDuration();
  // Prompt deadlines: a prompt's first token (a session's bulk input's
  // last entry) is due ttft_objective (or the request's own) after it could
  // be admitted (time waiting for KV blocks or a batch slot is not the
  // pacer's to make up) plus prompt_slowdown times what its prefill alone
  // takes, as the pacer estimates it (what its tokens computed so far cost,
  // plus those left, PrefillPacer::RestOfPrompt). While requests decode, a
  // step then takes only as many prompt tokens as keep every waiting prompt
  // on time, earliest due first: at least max_decode_slowdown's and at most
  // the TPOT objective's, so decoding streams see short steps whenever the
  // prompts can afford them. absl::ZeroDuration(): off (prompts always take
  // all the TPOT objective allows).
  absl::Duration ttft_objective = absl::ZeroDuration();
  double prompt_slowdown = 2.5;
  // Thinking markers: reasoning routing (the reasoning queue) and budgets
  // of Generate requests and session streams.
  ReasoningMarkers reasoning;
  // Debugging: every step takes at least this long (it sleeps out the rest:
  // a slower machine whose step time does not depend on the batch, as a
  // GPU's at small batches, for routing tests), and step number
  // `stall_step` (counted from 1; 0 = never) takes `stall` longer (a stuck
  // step, for the watchdog).
  absl::Duration debug_min_step = absl::ZeroDuration();
  int64_t debug_stall_step = 0;
  absl::Duration debug_stall = absl::ZeroDuration();
};

// Counters for tests, operators and --stats_file; a consistent snapshot.
struct EngineStats {
  int requests = 0;  // accepted and not finished
  int waiting = 0;   // accepted, never scheduled yet
  int64_t waiting_tokens = 0;
  int running = 0;  // holding KV blocks
  std::array<int, kNumQueues> queue_sizes = {};
  std::array<int, kNumQueues> queue_running = {};  // of queue_sizes
  int kv_blocks_total = 0;
  int kv_blocks_free = 0;  // unreferenced (cached content counts as free)
  int kv_blocks_cached = 0;
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t computed_tokens = 0;    // tokens run through the executor
  int64_t prefix_hit_tokens = 0;  // tokens taken from the prefix cache
  int64_t completed = 0;
  int64_t cancelled = 0;
  int64_t failed = 0;
  int sessions = 0;       // open sessions (holding their KV context)
  int kept_sessions = 0;  // closed with keep, resumable
  // Time spent in steps since start, and when the step in progress began
  // (absl::InfinitePast() between steps): the busy share, the watchdog.
  absl::Duration busy = absl::ZeroDuration();
  absl::Time step_started = absl::InfinitePast();
  // Finished requests' time in the engine (arrival to finish), summed.
  absl::Duration request_time = absl::ZeroDuration();
  // The TPOT objective the last step was paced to (Engine::StepObjective).
  absl::Duration step_objective = absl::ZeroDuration();
};

// The continuous-batching engine: one thread runs the step loop
//   inbox -> Scheduler::Schedule -> Executor::Execute -> Scheduler::Update
//   -> emit tokens, finish requests
// and requests join and leave between steps.
//
// One kind of work: a session (batching/session.h). A Generate request is
// a session of one output stream whose turn starts on the prompt
// (SessionOptions::request), closed when the turn ends; what only a request
// has (its sink of chunks, deadline, timings, admission accounting) rides
// beside it.
//
// Submit and Cancel only touch the inbox (a mutex-guarded list), so gRPC
// reactors never block on model work. Cancellation (client cancel, deadline,
// disconnect, shutdown) is applied at the top of the next step: the
// request's KV blocks are freed and its sink gets a final CANCELLED chunk,
// whatever phase it was in (queued, prefilling, decoding or preempted).
//
// Thread-safe: Submit, Cancel, Stats and Shutdown may be called from any
// thread. The executor and tokenizer must outlive the engine.
class Engine {
 public:
  // `queues` are the prompt / reasoning / I/O queues (streams/ makes them).
  // `metrics` (nullable; outlives the engine) receives step, token and
  // request metrics from the engine thread and admission rejections from
  // Submit's caller.
  Engine(Executor* executor, const model::Tokenizer* tokenizer,
         const EngineOptions& options, WorkQueues queues,
         metrics::EngineMetrics* metrics = nullptr);
  ~Engine();  // Shutdown()

  // Queues a request; returns a handle for Cancel. RESOURCE_EXHAUSTED at
  // once when the waiting work is over a bound (the message names it) or
  // the request could never fit the KV pool; DEADLINE_EXCEEDED when its
  // deadline has passed; UNAVAILABLE after Shutdown. A request whose
  // deadline passes later ends with a DEADLINE_EXCEEDED error chunk within
  // one step.
  absl::StatusOr<uint64_t> Submit(GenerationRequest request,
                                  std::shared_ptr<OutputSink> sink);

  // Cancels a request in any phase; its sink gets a final CANCELLED chunk
  // within one step. Unknown or finished handles are ignored. For a
  // session: ends it, frees its blocks, and reports kClosed with CANCELLED.
  void Cancel(uint64_t handle);

  // Sessions (docs/MULTISTREAM.md, batching/session.h). OpenSession checks
  // the options and queues the session; its sink gets kOpened, then events
  // as input lands and streams write. It fails with RESOURCE_EXHAUSTED when
  // the owner already has max_sessions_per_client open sessions, and with
  // ALREADY_EXISTS when the owner has an open or kept session of that id,
  // and with INVALID_ARGUMENT for a multi-stream session (model_streams > 0)
  // that is not aligned, binds a stream outside the model's streams or two
  // to one, or has a branch. The others act at the top of the next step, in
  // call order; unknown handles are ignored. CloseSession frees the session's
  // blocks and reports kClosed; with `keep` (and max_kept_sessions > 0) it
  // keeps the session instead: its computed context stays in the prefix cache
  // as free, evictable blocks (Scheduler::Keep), its entries and stream state
  // with the engine, until ResumeSession, or until more than
  // max_kept_sessions are kept (least recently kept dropped first). A
  // session idle for session_idle_timeout is kept the same way and gets
  // kClosed with DEADLINE_EXCEEDED.
  absl::StatusOr<uint64_t> OpenSession(SessionOptions options,
                                       std::shared_ptr<SessionSink> sink);
  void SessionAppend(uint64_t handle, SessionInput input);
  void SessionInterrupt(uint64_t handle, int stream);
  void CloseSession(uint64_t handle, bool keep = false);

  // Reattaches the kept session `session_id` of `owner` to `sink` under a
  // new handle (returned): the sink gets kOpened (resumed), and the next
  // turn computes only what is not in the prefix cache any more. NOT_FOUND
  // when the owner has no such kept session, FAILED_PRECONDITION when it is
  // open, RESOURCE_EXHAUSTED over max_sessions_per_client. `prepare` sees
  // the session's options before any event reaches the sink.
  absl::StatusOr<uint64_t> ResumeSession(
      const std::string& owner, const std::string& session_id,
      std::shared_ptr<SessionSink> sink,
      absl::FunctionRef<void(const SessionOptions&)> prepare);

  EngineStats Stats() const;

  // Cancels everything and joins the engine thread.
  void Shutdown();

 private:
  // A Generate request's session sink: its chunks (engine.cc).
  class RequestSink;
  // What only a Generate request has beside its session (whose options
  // hold its prompt and sampling): where its chunks go, its clock and its
  // counts (engine thread, once queued).
  struct Request {
    std::shared_ptr<RequestSink> sink;
    absl::Time arrival = absl::InfinitePast();
    absl::Time deadline = absl::InfiniteFuture();
    int num_output = 0;
    int num_reasoning = 0;  // of num_output, of the reasoning stream
    bool waiting = true;    // counted by admission control
    absl::Time first_scheduled = absl::InfinitePast();
    absl::Time first_token = absl::InfinitePast();
    absl::Time last_token = absl::InfinitePast();
  };
  // A unit of work: a session a client opened, or one made from a Generate
  // request, which `request` then holds the rest of.
  struct Work {
    std::unique_ptr<Session> session;
    std::unique_ptr<Request> request;  // null for a client's session
    // While it is in the prompt queue: since when (admissible), and what its
    // prompt tokens computed so far cost by the pacer's estimates
    // (seconds).
    absl::Time prompt_since = absl::InfinitePast();
    int prompt_done = 0;
    double prompt_work_s = 0;
    void ForgetPrompt() {
      prompt_since = absl::InfinitePast();
      prompt_done = 0;
      prompt_work_s = 0;
    }
  };
  struct SessionCommand {
    enum class Kind { kOpen, kAppend, kInterrupt, kClose, kResume } kind;
    uint64_t handle = 0;
    std::unique_ptr<Session> session;   // kOpen
    SessionInput input;                 // kAppend
    int stream = 0;                     // kInterrupt
    bool keep = false;                  // kClose
    uint64_t kept_handle = 0;           // kResume: the kept session
    std::shared_ptr<SessionSink> sink;  // kResume
  };
  // An open or kept session, by (owner, session_id).
  struct SessionRecord {
    uint64_t handle = 0;  // of the open session, or of the kept one
    bool kept = false;
    std::shared_ptr<const SessionOptions> options;
  };
  using SessionKey = std::pair<std::string, std::string>;

  void Loop();
  // Moves the inbox into the scheduler; false when shutting down.
  bool DrainInbox();
  // Ends the requests whose deadline has passed.
  void ExpireDeadlines();
  // One step: plan, run, apply (or wait for work when nothing fits).
  void RunStep();
  // The TPOT objective the next step is paced to: the tightest objective of
  // the work decoding (in the I/O or reasoning queue), a request's or
  // session's own or options_.tpot_objective; options_.tpot_objective when
  // nothing decodes.
  absl::Duration StepObjective() const;
  // The prompts waiting for or in prefill with their due times, for the
  // pacer (empty with prompt deadlines off).
  absl::Span<const PrefillPacer::DuePrompt> PromptsDue(absl::Time now);
  // Before the executor runs a step begun at `now`: each sample point gets
  // its request's or stream's sampler; requests starting now stop counting
  // as waiting; the stats show the step and the objective it is paced to.
  bool ExpectsSameWork(const StepPlan& plan);
  void StartStep(StepPlan& plan, absl::Time now);
  // After it ran: the debug delays, busy time, step metrics, the pacer.
  void EndStep(const StepPlan& plan, absl::Time start);
  // A failed step fails its requests only; the others go on.
  void FailStep(const StepPlan& plan, const absl::Status& status);
  // The sampled tokens: the reasoning budget's forced end markers, then the
  // scheduler, the requests and the sessions.
  void ApplyStep(const StepPlan& plan, StepOutput& output, absl::Time now);
  // Step metrics; the step's decode and prompt tokens come counted.
  void RecordStep(const StepPlan& plan, int decode_tokens, int prefill_tokens,
                  absl::Duration duration);
  // A request's tokens of one step (`reasoning`: of each, whether it is
  // the reasoning stream's): its timings; finishes it when its turn ended.
  void OnRequestTokens(Work& w, const std::vector<bool>& reasoning);
  // Sends a request's final chunk, frees its blocks and forgets it.
  void Finish(Work& w, FinishReason reason, absl::Status error,
              std::string matched_stop = "");
  // The request metrics of a request's final chunk.
  void RecordRequest(const Request& a, const OutputChunk& chunk,
                     FinishReason reason);
  void PublishStats();
  // Sleeps out the debug step floor and stall (EngineOptions), if any, for
  // a step that began at `start`.
  void DebugDelay(absl::Time start);
  void ApplySessionCommand(SessionCommand& command);
  // Ends a session: frees its blocks and sends kClosed with `status`.
  void FinishSession(Session& session, absl::Status status);
  // Keeps a session (CloseSession with keep) and sends kClosed with
  // `status`; closes it instead when nothing may be kept.
  void KeepSession(Session& session, absl::Status status);
  // Drops the least recently kept sessions beyond max_kept_sessions.
  void TrimKeptSessions();
  void ResumeKeptSession(SessionCommand& command);
  // Keeps the sessions idle for longer than session_idle_timeout.
  void ExpireIdleSessions(absl::Time now);
  // RESOURCE_EXHAUSTED when `owner` has max_sessions_per_client open.
  absl::Status CheckSessionLimit(const std::string& owner) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseSessionSlot(const std::string& owner)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PostSession(SessionCommand command);

  Executor* const executor_;
  const model::Tokenizer* const tokenizer_;
  const EngineOptions options_;
  metrics::EngineMetrics* const metrics_;
  int64_t debug_steps_ = 0;  // steps run, for debug_stall_step
  // `sink`, counting the session's tokens into metrics_ when there are any.
  std::shared_ptr<SessionSink> Metered(std::shared_ptr<SessionSink> sink) const;

  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // the engine holds requests
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<Work> inbox_ ABSL_GUARDED_BY(mu_);  // Generate requests
  std::vector<uint64_t> cancels_ ABSL_GUARDED_BY(mu_);
  std::vector<SessionCommand> session_commands_ ABSL_GUARDED_BY(mu_);
  EngineStats stats_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<SessionKey, SessionRecord> session_records_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> open_sessions_per_owner_
      ABSL_GUARDED_BY(mu_);

  // Engine thread only.
  Scheduler scheduler_;
  PrefillPacer pacer_;
  absl::Duration step_objective_ = absl::ZeroDuration();  // StepObjective()
  std::vector<PrefillPacer::DuePrompt> due_;              // PromptsDue()'s
  absl::flat_hash_map<uint64_t, Work> work_;              // by handle
  // Kept sessions by handle, and their handles least recently kept first.
  absl::flat_hash_map<uint64_t, std::unique_ptr<Session>> kept_;
  std::list<uint64_t> kept_order_;

  std::thread thread_;
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_ENGINE_H_
