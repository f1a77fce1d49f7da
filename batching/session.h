// A multi-stream session as the engine runs it (docs/MULTISTREAM.md): the
// streams of one KV context, their position counters y, where input lands,
// which output streams are generating, and the lockstep of their steps.
//
// The KV context itself is a scheduler request (Scheduler::AddSession) whose
// entries this class appends in non-decreasing y. Two layouts:
//
// - linear (single-stream models): the session is one conversation. Input
//   lands after every entry written so far, and generating streams continue
//   after it (interject), so with one output stream the context is exactly
//   an ordinary causal sequence.
// - aligned (multi-stream models, braid.streams.*): every stream keeps its
//   own y. Input that arrives while output streams are writing lands at
//   y >= the current step and is fed one token per step at its position, so
//   output tokens at y see exactly the input entries below y.
// - rows (multi-stream models whose braid.streams.layout is "rows"): the
//   aligned layout with every model stream present at every position from
//   y0 on. A row y is completed once nothing more can land in it: each model
//   stream without an entry there (no session stream bound to it, an input
//   stream with no input due at y, an output stream not writing) gets the
//   model's silence token. Rows are added only while some output stream
//   writes or input is placed, never while the session is idle. An output
//   stream's token at y is sampled from its own entry at y - 1 (a turn's
//   first token too: from its entry, often silence, in the last row).
//
// Output streams with VISIBILITY_BRANCH see the shared prefix (stream 0), the
// input streams and themselves: independent branches over one prompt whose
// KV blocks are stored once; input streams do not see branches. On a
// multi-stream model the same rule holds over model streams (a model stream
// bound to no session stream counts as input), one branch per model stream.
// Stream 0 is the prefix; client streams are 1..n in the order of
// SessionOptions::streams.
//
// Entry tags: for a single-stream model an entry's stream is its session
// stream (0..n). For a multi-stream model (SessionOptions::model_streams)
// it is the model stream the session stream is bound to
// (SessionStreamOptions::model_stream; the prefix is model stream 0, like an
// ordinary request), so the model adds that stream's embedding row, and
// every model stream sees every other (the paper's semantics) unless a
// branch is involved. Sample points and events name session streams either
// way.
//
// A session's context holds at most `max_context_tokens` entries (every
// stream's together; the served context length): input that would overflow
// it is refused with OUT_OF_RANGE, and a turn that reaches it ends with
// kLength. Keep / Resume take the session out of the scheduler and back
// (close with keep, idle timeout, open with resume), its streams' state
// (samplers, positions) intact.
//
// Owned by the engine; engine thread only; not thread-safe.
#ifndef BRAID_BATCHING_SESSION_H_
#define BRAID_BATCHING_SESSION_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "batching/reasoning.h"
#include "batching/request.h"
#include "batching/sampler.h"
#include "batching/scheduler.h"
#include "batching/step_plan.h"
#include "batching/stop_matcher.h"
#include "model/tokenizer/streaming_detokenizer.h"
#include "model/tokenizer/tokenizer.h"

namespace braid::batching {

enum class StreamVisibility { kAll, kBranch };
enum class DuplexPolicy { kInterject, kInterrupt, kQueue };

struct SessionStreamOptions {
  std::string name;
  bool output = false;  // sampled; otherwise client input
  StreamVisibility visibility = StreamVisibility::kAll;
  // Output streams: per turn.
  SamplingOptions sampling;
  int64_t max_tokens = 256;
  std::vector<int32_t> stop_token_ids;
  // Stop strings, matched in the turn's output text (not in reasoning);
  // the text sent ends before the match, as for Generate.
  std::vector<std::string> stop;
  bool ignore_eos = false;
  ReasoningOptions reasoning;
  // Multi-stream models: the model stream (index into braid.streams.roles)
  // whose (stream, y) tag, and so stream embedding, this stream's entries
  // carry; in [0, SessionOptions::model_streams), one session stream each.
  int model_stream = 0;
};

struct SessionOptions {
  // Unique per owner among open and kept sessions; the engine names the
  // session when empty.
  std::string session_id;
  // The client identity (frontend/auth.h ClientIdentity): the per-client
  // session limit counts by it, and only it may resume the session.
  std::string owner;
  std::vector<int32_t> prefix;  // non-empty: stream 0 at y = 0..
  std::vector<SessionStreamOptions> streams;
  bool aligned = false;  // the model is multi-stream
  // The model's stream count (braid.streams.count) when it is multi-stream:
  // entries are tagged with model streams and every stream sees every other
  // (visibility kAll; needs `aligned`). 0: a single-stream model, entries
  // tagged with session streams.
  int model_streams = 0;
  // The rows layout (needs model_streams): every model stream has an entry
  // at every position from y0 on, `silence_token_id` where it has nothing.
  bool rows = false;
  int32_t silence_token_id = -1;
  DuplexPolicy duplex = DuplexPolicy::kInterject;
  int priority = 0;
  std::string tenant;
  // The time per output token the session asks for while it decodes: steps
  // that serve other work's prompts beside it take at most this long (as
  // far as --max_decode_slowdown's bound allows: the pacer never holds a
  // step below it); zero: EngineOptions::tpot_objective. The engine holds
  // every step to the tightest objective of the work decoding in it.
  absl::Duration tpot_objective = absl::ZeroDuration();
  // The time to first token the session's prompts (and bulk input) ask
  // for, before EngineOptions::prompt_slowdown's share; zero:
  // EngineOptions::ttft_objective. See there.
  absl::Duration ttft_objective = absl::ZeroDuration();
  // A Generate request (Engine::Submit): one output stream whose turn
  // starts on the prefix (the prompt) when the session opens. Its entries
  // carry the prefix's tag (stream 0 at y = context index): the context is
  // an ordinary causal sequence, which the prefix cache holds whole. The
  // reasoning text has a detokenizer of its own (the turn's end holds back
  // each kind's bytes apart), and a turn that fills the context ends with
  // kContextFull.
  bool request = false;
};

// Moves a request's sampling, length, stops, EOS and reasoning options
// into output stream `o` (what Generate and a session's output stream share).
void TakeSampling(GenerationRequest& r, SessionStreamOptions& o);

// Client input for one input stream.
struct SessionInput {
  std::string input_id;
  int stream = 0;  // 1..n, an input stream
  std::vector<int32_t> tokens;
  std::vector<int> generate_on;  // output streams to start afterwards
};

// What a session tells its client, in order.
struct SessionEvent {
  enum class Kind { kOpened, kTokens, kAck, kTurnEnd, kError, kClosed };
  Kind kind = Kind::kTokens;
  int stream = 0;
  // kTokens (reasoning: the tokens are the stream's reasoning)
  bool reasoning = false;
  std::vector<SampledToken> tokens;
  std::string text;
  std::string reasoning_text;
  int64_t first_position = 0;
  // kTurnEnd: `text` holds what the turn held back (stop-string prefixes,
  // bytes of a partial character), at `first_position`, the stream's next
  // position (after its last token), of the kind (`reasoning`) of the last
  // token sent; for a request (SessionOptions::request) `text` is the
  // output's and `reasoning_text` the reasoning's.
  // kAck (first_position above, end_position exclusive)
  std::string input_id;
  int64_t end_position = 0;
  // kOpened: prefix length, whether the session was resumed and the
  // entries its context holds; kTurnEnd: the turn's finish.
  int64_t prefix_length = 0;
  bool resumed = false;
  int64_t context_tokens = 0;
  FinishReason finish_reason = FinishReason::kNone;
  std::string matched_stop;  // kTurnEnd with kStop
  int output_tokens = 0;
  int reasoning_tokens = 0;
  uint64_t seed = 0;
  // kError (the session stays open) or kClosed (the last event; non-OK
  // when it ended by an error or cancellation).
  absl::Status status;
};

// Receives a session's events. Push is called from the engine thread, must
// not block, and must be thread-safe.
class SessionSink {
 public:
  virtual ~SessionSink() = default;
  virtual void Push(SessionEvent event) = 0;
};

class Session {
 public:
  Session(SessionOptions options, std::shared_ptr<SessionSink> sink,
          uint64_t handle, const model::Tokenizer* tokenizer,
          const ReasoningMarkers& markers, int max_context_tokens);

  uint64_t handle() const { return handle_; }
  const SessionOptions& options() const { return options_; }
  SessionSink& sink() { return *sink_; }

  // Registers the context with the scheduler and reports kOpened.
  void Open(Scheduler& scheduler);
  // Takes the session out of the scheduler, its computed context left in
  // the prefix cache (Scheduler::Keep): ends running turns (kCancelled),
  // places queued input without generating, and returns the sink, which
  // the session no longer holds.
  std::shared_ptr<SessionSink> Keep(Scheduler& scheduler);
  // After Keep: reports kOpened (resumed) to `sink`; the kept context
  // returns to the scheduler, under `handle`, with the next Append.
  void Resume(uint64_t handle, std::shared_ptr<SessionSink> sink);
  // Nothing to do without the client: no turn running, no input waiting.
  bool idle() const;
  // The last client action or generated token (for the idle timeout).
  absl::Time last_active() const { return last_active_; }
  void Touch(absl::Time now) { last_active_ = now; }
  // Places client input (or queues it under DuplexPolicy::kQueue while a
  // turn is running), acknowledges it, starts generation.
  void Append(SessionInput input, Scheduler& scheduler);
  // Ends the turn of output stream `stream` now.
  void Interrupt(int stream, Scheduler& scheduler);
  // Applies one step's samples of this session (lockstep: one token per
  // active output stream), then feeds input that became due. Returns, per
  // token kept, whether it belongs to the reasoning stream (sent or not).
  std::vector<bool> OnStep(const ScheduledSequence& s,
                           absl::Span<const SampledToken> tokens,
                           Scheduler& scheduler);
  // Ends every turn with `reason` (no events when quiet).
  void EndAllTurns(FinishReason reason, Scheduler& scheduler);
  bool generating() const;
  Sampler* sampler(int stream);

  // sees(s) of every tagged stream (session streams, or model streams for a
  // multi-stream model), besides itself; for Scheduler::AddSession.
  std::vector<std::vector<int32_t>> Visibility() const;

 private:
  struct Stream {
    int64_t next_y = 0;
    bool active = false;  // output stream in a turn
    int turn_tokens = 0;
    int turn_reasoning = 0;       // of turn_tokens
    bool last_reasoning = false;  // the kind of the last token sent
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<model::StreamingDetokenizer> detokenizer;
    // A request's reasoning text (SessionOptions::request); else null and
    // `detokenizer` holds both kinds.
    std::unique_ptr<model::StreamingDetokenizer> reasoning_detokenizer;
    std::unique_ptr<StopMatcher> stop;  // of the running turn
    ReasoningGate gate;
    // Aligned layout: placed input waiting for its step.
    std::deque<std::pair<int32_t, int64_t>> due;  // token, y
  };

  bool IsOutput(int s) const { return options_.streams[s - 1].output; }
  // The stream id session stream `s`'s entries are tagged with.
  int32_t Tag(int s) const;
  // Places `input` now; returns the index of its last entry.
  void Place(const SessionInput& input, Scheduler& scheduler);
  void StartTurn(int s, Scheduler& scheduler);
  // Makes output stream s active from position next_y, its first token
  // sampled from the logits of entry sample_index.
  void BeginTurn(int s, int64_t next_y, int sample_index, Scheduler& scheduler);
  // Reports that stream s cannot start: no input to sample after.
  void NoInputToStartFrom(int s);
  void StartRowsTurn(int s, Scheduler& scheduler);
  void EndTurn(int s, FinishReason reason, Scheduler& scheduler,
               std::string matched_stop = "");
  // Input queued behind the turns (DuplexPolicy::kQueue) goes in, in order,
  // once no stream writes (a turn may start again and stop it).
  void AppendQueued(Scheduler& scheduler);
  // Tells the scheduler whether the session thinks (every writing stream
  // between its thinking markers): its decode steps then go to the
  // reasoning queue.
  void UpdateThinking(Scheduler& scheduler);
  // OUT_OF_RANGE when placing `input` (and one more entry for each stream
  // that would then generate) would overflow max_context_tokens_.
  absl::Status CheckRoom(const SessionInput& input) const;
  // Entries in the context plus placed input not appended yet.
  int64_t NumPlannedEntries() const;
  // Ends turns, last stream first, until the next token of every stream in
  // `points` fits max_context_tokens_; returns the points left.
  std::vector<SamplePoint> FitContext(std::vector<SamplePoint> points,
                                      Scheduler& scheduler);
  // Appends input entries whose y is due (aligned layout); in the rows
  // layout also completes the rows below the step (every row when `all`).
  void FeedDueInput(Scheduler& scheduler, bool all);
  // Rows layout: completes every row below `end`, model stream by model
  // stream: the input due there, else silence.
  void FillRows(int64_t end, Scheduler& scheduler);
  // Entries of a rows-layout context whose rows end at `end`.
  int64_t RowsEntries(int64_t end) const;
  // Where input for `in` lands when output streams write at `step` (-1:
  // none writes).
  int64_t FirstInputPosition(const Stream& in, int64_t step) const;
  void AppendEntry(int32_t stream, int32_t token, int64_t y,
                   Scheduler& scheduler);
  // Appends an entry tagged `tag` (a model stream in the rows layout).
  void AppendTagged(int32_t tag, int32_t token, int64_t y,
                    Scheduler& scheduler);
  int64_t MaxNextY() const;
  int64_t Step() const;  // next y of the active output streams

  const SessionOptions options_;
  std::shared_ptr<SessionSink> sink_;
  uint64_t handle_;
  const model::Tokenizer* const tokenizer_;
  const int max_context_tokens_;
  std::vector<Stream> streams_;      // [0] = prefix
  std::deque<SessionInput> queued_;  // DuplexPolicy::kQueue
  int num_entries_ = 0;
  // seen_by_[tag]: the output streams (session stream numbers) that see
  // the entries tagged `tag` and are not their writer, for their samplers'
  // penalties and reasoning gates.
  std::vector<std::vector<int>> seen_by_;
  // Rows layout, per model stream: the next y without an entry, the index
  // of its last entry (-1: none) and the session stream bound to it (0:
  // none; the prefix is no bound stream).
  std::vector<int64_t> model_next_y_;
  std::vector<int> model_last_index_;
  std::vector<int> bound_;
  // Whether the context is in the scheduler; if not (kept, or resumed and
  // waiting for input), kept_ holds its entries.
  bool registered_ = false;
  Scheduler::SessionEntries kept_;
  absl::Time last_active_ = absl::InfinitePast();
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_SESSION_H_
