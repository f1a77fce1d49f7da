#include "batching/session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace braid::batching {

void TakeSampling(GenerationRequest& r, SessionStreamOptions& o) {
  o.sampling = r.sampling;
  o.max_tokens = r.max_tokens;
  o.stop_token_ids = std::move(r.stop_token_ids);
  o.stop = std::move(r.stop);
  o.ignore_eos = r.ignore_eos;
  o.reasoning = r.reasoning;
}

Session::Session(SessionOptions options, std::shared_ptr<SessionSink> sink,
                 uint64_t handle, const model::Tokenizer* tokenizer,
                 const ReasoningMarkers& markers, int max_context_tokens)
    : options_(std::move(options)),
      sink_(std::move(sink)),
      handle_(handle),
      tokenizer_(tokenizer),
      max_context_tokens_(max_context_tokens) {
  const int64_t y0 = static_cast<int64_t>(options_.prefix.size());
  streams_.resize(options_.streams.size() + 1);
  for (size_t i = 0; i < streams_.size(); ++i) {
    Stream& st = streams_[i];
    st.next_y = i == 0 ? 0 : y0;
    if (i == 0 || !options_.streams[i - 1].output) continue;
    const SessionStreamOptions& o = options_.streams[i - 1];
    st.sampler = std::make_unique<Sampler>(o.sampling, options_.prefix);
    st.detokenizer = std::make_unique<model::StreamingDetokenizer>(tokenizer_);
    if (options_.request) {
      st.reasoning_detokenizer =
          std::make_unique<model::StreamingDetokenizer>(tokenizer_);
    }
    st.gate = ReasoningGate(markers, o.reasoning, options_.prefix);
  }
  streams_[0].next_y = y0;
  if (options_.model_streams > 0) {
    const int m = options_.model_streams;
    model_next_y_.assign(m, y0);
    model_last_index_.assign(m, -1);
    model_last_index_[0] = static_cast<int>(y0) - 1;
    bound_.assign(m, 0);
    for (size_t i = 0; i < options_.streams.size(); ++i) {
      bound_[options_.streams[i].model_stream] = static_cast<int>(i) + 1;
    }
  }
  const std::vector<std::vector<int32_t>> sees = Visibility();
  seen_by_.resize(sees.size());
  for (size_t s = 1; s < streams_.size(); ++s) {
    if (!IsOutput(static_cast<int>(s))) continue;
    for (int32_t tag : sees[Tag(static_cast<int>(s))]) {
      seen_by_[tag].push_back(static_cast<int>(s));
    }
  }
}

int32_t Session::Tag(int s) const {
  if (options_.request) return 0;
  if (options_.model_streams <= 0) return s;
  return s == 0 ? 0 : options_.streams[s - 1].model_stream;
}

// One rule for both kinds of tags: over session streams (single-stream
// models) or over model streams (multi-stream models, where a model stream
// bound to no session stream counts as input). Without branches every
// stream sees every other.
std::vector<std::vector<int32_t>> Session::Visibility() const {
  if (options_.request) return {{}};  // one tag: stream 0
  const bool multi = options_.model_streams > 0;
  const int n =
      multi ? options_.model_streams : static_cast<int>(streams_.size());
  // The session stream each tag belongs to (0: the prefix or none).
  std::vector<int> session_stream(n, 0);
  for (int t = 0; t < n; ++t) session_stream[t] = multi ? bound_[t] : t;
  const auto is_output = [&](int t) {
    return session_stream[t] > 0 && IsOutput(session_stream[t]);
  };
  const auto is_branch = [&](int t) {
    return is_output(t) && options_.streams[session_stream[t] - 1].visibility ==
                               StreamVisibility::kBranch;
  };
  bool any_branch = false;
  for (int t = 0; t < n; ++t) any_branch |= is_branch(t);
  std::vector<std::vector<int32_t>> sees(n);
  for (int s = 0; s < n; ++s) {
    for (int t = 0; t < n; ++t) {
      if (t == s) continue;
      // A branch sees the prefix and the input streams; input streams do
      // not see branches (they are shared by all of them).
      if (is_output(t) &&
          (is_branch(s) || ((multi || s > 0) && !is_output(s) && any_branch))) {
        continue;
      }
      sees[s].push_back(t);
    }
  }
  return sees;
}

void Session::Open(Scheduler& scheduler) {
  const int n = static_cast<int>(options_.prefix.size());
  std::vector<EntryTag> meta(n);
  for (int i = 0; i < n; ++i) meta[i] = {Tag(0), i};
  scheduler.AddSession(handle_, options_.prefix, std::move(meta), Visibility(),
                       options_.priority, options_.tenant);
  registered_ = true;
  num_entries_ = n;
  SessionEvent e;
  e.kind = SessionEvent::Kind::kOpened;
  e.prefix_length = n;
  e.context_tokens = n;
  sink_->Push(std::move(e));
  if (options_.request) StartTurn(1, scheduler);
}

std::shared_ptr<SessionSink> Session::Keep(Scheduler& scheduler) {
  EndAllTurns(FinishReason::kCancelled, scheduler);
  // Input the client sent is kept, without the generation it asked for.
  while (!queued_.empty()) {
    SessionInput input = std::move(queued_.front());
    queued_.pop_front();
    input.generate_on.clear();
    Append(std::move(input), scheduler);
  }
  FeedDueInput(scheduler, /*all=*/true);
  if (registered_) kept_ = scheduler.Keep(handle_);
  registered_ = false;
  return std::move(sink_);
}

// The kept context returns to the scheduler with the first input after a
// resume, not before: scheduled with nothing new to compute, it would take
// its cached blocks back only to give them up again (and its partial last
// block, taken for writing, would be lost).
void Session::Resume(uint64_t handle, std::shared_ptr<SessionSink> sink) {
  handle_ = handle;
  sink_ = std::move(sink);
  SessionEvent e;
  e.kind = SessionEvent::Kind::kOpened;
  e.prefix_length = static_cast<int64_t>(options_.prefix.size());
  e.resumed = true;
  e.context_tokens = num_entries_;
  sink_->Push(std::move(e));
}

bool Session::idle() const {
  if (generating() || !queued_.empty()) return false;
  for (const Stream& st : streams_) {
    if (!st.due.empty()) return false;
  }
  return true;
}

Sampler* Session::sampler(int stream) { return streams_[stream].sampler.get(); }

bool Session::generating() const {
  for (const Stream& st : streams_) {
    if (st.active) return true;
  }
  return false;
}

int64_t Session::MaxNextY() const {
  int64_t y = 0;
  for (const Stream& st : streams_) {
    y = std::max(y, st.next_y);
    if (!st.due.empty()) y = std::max(y, st.due.back().second + 1);
  }
  for (int64_t m : model_next_y_) y = std::max(y, m);
  return y;
}

int64_t Session::Step() const {
  int64_t y = -1;
  for (const Stream& st : streams_) {
    if (st.active) y = std::max(y, st.next_y);
  }
  return y;
}

void Session::AppendEntry(int32_t stream, int32_t token, int64_t y,
                          Scheduler& scheduler) {
  AppendTagged(Tag(stream), token, y, scheduler);
}

void Session::AppendTagged(int32_t tag, int32_t token, int64_t y,
                           Scheduler& scheduler) {
  const int32_t t[1] = {token};
  const EntryTag m[1] = {{tag, static_cast<int32_t>(y)}};
  scheduler.AppendEntries(handle_, t, m);
  if (tag >= 0 && tag < static_cast<int32_t>(model_next_y_.size()) &&
      options_.model_streams > 0) {
    model_next_y_[tag] = std::max(model_next_y_[tag], y + 1);
    model_last_index_[tag] = num_entries_;
  }
  ++num_entries_;
}

int64_t Session::RowsEntries(int64_t end) const {
  const int64_t y0 = static_cast<int64_t>(options_.prefix.size());
  return y0 + int64_t{options_.model_streams} * std::max<int64_t>(0, end - y0);
}

int64_t Session::FirstInputPosition(const Stream& in, int64_t step) const {
  int64_t first = std::max(in.next_y, step >= 0 ? step : MaxNextY());
  if (!in.due.empty()) first = std::max(first, in.due.back().second + 1);
  return first;
}

int64_t Session::NumPlannedEntries() const {
  // Every row below the last planned position will be complete.
  if (options_.rows) return RowsEntries(MaxNextY());
  int64_t n = num_entries_;
  for (const Stream& st : streams_) n += static_cast<int64_t>(st.due.size());
  return n;
}

absl::Status Session::CheckRoom(const SessionInput& input) const {
  int writers = 0;
  for (size_t s = 1; s < streams_.size(); ++s) {
    const bool continues =
        streams_[s].active && options_.duplex != DuplexPolicy::kInterrupt;
    const bool starts =
        std::find(input.generate_on.begin(), input.generate_on.end(),
                  static_cast<int>(s)) != input.generate_on.end();
    writers += continues || starts;
  }
  const int64_t n = static_cast<int64_t>(input.tokens.size());
  int64_t need = NumPlannedEntries() + n + writers;
  if (options_.rows) {
    // Whole rows: up to the input's end, and one more row for the next
    // token when a stream writes (at the step when streams go on writing).
    const bool keeps_step =
        generating() && options_.duplex != DuplexPolicy::kInterrupt;
    const int64_t step = keeps_step ? Step() : -1;
    int64_t end = MaxNextY();
    if (n > 0) {
      end = std::max(end, FirstInputPosition(streams_[input.stream], step) + n);
    }
    if (writers > 0) end = keeps_step ? std::max(end, step + 1) : end + 1;
    need = RowsEntries(end);
  }
  if (need <= max_context_tokens_) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrCat(
      "appending ", n, " tokens would grow the session's context to ", need,
      " tokens",
      writers > 0 ? absl::StrCat(" (with the next token of each of ", writers,
                                 " generating streams)")
                  : "",
      ", past the served context length of ", max_context_tokens_,
      " tokens (--context_length); nothing was appended and the session "
      "stays open"));
}

void Session::Append(SessionInput input, Scheduler& scheduler) {
  if (generating() && options_.duplex == DuplexPolicy::kQueue) {
    queued_.push_back(std::move(input));
    return;
  }
  if (absl::Status room = CheckRoom(input); !room.ok()) {
    SessionEvent e;
    e.kind = SessionEvent::Kind::kError;
    e.stream = input.stream;
    e.input_id = input.input_id;
    e.status = std::move(room);
    sink_->Push(std::move(e));
    return;
  }
  if (!registered_) {
    scheduler.AddSession(handle_, std::move(kept_.tokens),
                         std::move(kept_.meta), Visibility(), options_.priority,
                         options_.tenant, std::move(kept_.one_token_kernels));
    kept_ = {};
    registered_ = true;
  }
  // Input that arrives while the streams write is I/O work when small,
  // whatever the policy does with the turns (SchedulerOptions::
  // session_small_input_tokens).
  scheduler.SetSessionInputWhileWriting(handle_, generating());
  if (generating() && options_.duplex == DuplexPolicy::kInterrupt) {
    EndAllTurns(FinishReason::kCancelled, scheduler);
  }
  Place(input, scheduler);
  for (int s : input.generate_on) StartTurn(s, scheduler);
}

// Design note. Where input lands decides what it can influence, so it is the
// one place both layouts differ. Linear: at the end of the context; every
// generating stream moves its next position past it and samples its next
// token from the input's last entry (interject), which with one stream is
// plain causal decoding of the interleaved history. Aligned: at
// y >= the current step, one entry per step while output streams write
// (FeedDueInput), so the output token at y sees exactly the input below y;
// with no stream writing it is computed at once, as a prompt chunk.
void Session::Place(const SessionInput& input, Scheduler& scheduler) {
  Stream& in = streams_[input.stream];
  const int n = static_cast<int>(input.tokens.size());
  // For the output streams that see it, the input is context as a Generate
  // prompt is: its thinking markers open or close thinking, and it counts
  // for their penalties.
  for (int s : seen_by_[Tag(input.stream)]) {
    streams_[s].gate.Observe(input.tokens);
    streams_[s].sampler->AddPrompt(input.tokens);
  }
  int64_t first;
  if (!options_.aligned) {
    first = MaxNextY();
    std::vector<EntryTag> meta(n);
    for (int i = 0; i < n; ++i) {
      meta[i] = {Tag(input.stream), static_cast<int32_t>(first + i)};
    }
    scheduler.AppendEntries(handle_, input.tokens, meta);
    num_entries_ += n;
    for (Stream& st : streams_) st.next_y = std::max(st.next_y, first + n);
    // Generating streams continue after the input.
    std::vector<SamplePoint> points;
    for (size_t s = 1; s < streams_.size(); ++s) {
      if (!streams_[s].active) continue;
      scheduler.ClearSamplePoints(handle_, static_cast<int32_t>(s));
      points.push_back({num_entries_ - 1, static_cast<int32_t>(s)});
    }
    scheduler.AddSamplePoints(handle_, points);
  } else {
    first = FirstInputPosition(in, Step());
    for (int i = 0; i < n; ++i) in.due.push_back({input.tokens[i], first + i});
    FeedDueInput(scheduler, /*all=*/!generating());
  }
  SessionEvent ack;
  ack.kind = SessionEvent::Kind::kAck;
  ack.stream = input.stream;
  ack.input_id = input.input_id;
  ack.first_position = first;
  ack.end_position = first + n;
  ack.output_tokens = n;
  sink_->Push(std::move(ack));
}

void Session::FeedDueInput(Scheduler& scheduler, bool all) {
  const int64_t step = Step();
  if (options_.rows) {
    if (all || step < 0) {
      FillRows(MaxNextY(), scheduler);
      return;
    }
    // Rows below the step are final; input due at the step itself goes in
    // ahead of the outputs that write there next.
    FillRows(step, scheduler);
  }
  for (size_t s = 1; s < streams_.size(); ++s) {
    Stream& st = streams_[s];
    while (!st.due.empty() && (all || st.due.front().second <= step)) {
      AppendEntry(static_cast<int32_t>(s), st.due.front().first,
                  st.due.front().second, scheduler);
      st.next_y = st.due.front().second + 1;
      st.due.pop_front();
    }
  }
}

// Design note. The rows layout is the aligned one with the gaps filled, so
// it needs no placement rule of its own: input lands where the aligned
// layout puts it, outputs write where it writes them, and a row is filled
// with silence once it is final, i.e. once it lies below the step the
// outputs write next (or, with no stream writing, at once). Filling only
// final rows keeps entries in non-decreasing y (the outputs' entries at the
// step come before the silence beside them) and means an idle session adds
// nothing. The entries a full pass would see at every position exist before
// any query at a later position is computed, so chunked rows are exact.
void Session::FillRows(int64_t end, Scheduler& scheduler) {
  const int m_count = options_.model_streams;
  int64_t y = end;
  for (int64_t m : model_next_y_) y = std::min(y, m);
  for (; y < end; ++y) {
    for (int m = 0; m < m_count; ++m) {
      if (model_next_y_[m] > y) continue;
      Stream& st = streams_[bound_[m]];
      if (bound_[m] > 0 && !st.due.empty() && st.due.front().second == y) {
        AppendEntry(bound_[m], st.due.front().first, y, scheduler);
        st.next_y = y + 1;
        st.due.pop_front();
      } else {
        AppendTagged(m, options_.silence_token_id, y, scheduler);
      }
    }
  }
}

void Session::StartTurn(int s, Scheduler& scheduler) {
  Stream& st = streams_[s];
  if (st.active) return;
  if (options_.rows) {
    StartRowsTurn(s, scheduler);
    return;
  }
  FeedDueInput(scheduler, /*all=*/true);
  if (scheduler.num_computed_tokens(handle_) >= num_entries_) {
    // The last entry's logits are gone; a turn starts from new input.
    NoInputToStartFrom(s);
    return;
  }
  // A turn starts after everything written so far; its first token comes
  // from the logits of the context's last entry.
  BeginTurn(s, std::max(st.next_y, MaxNextY()), num_entries_ - 1, scheduler);
}

void Session::NoInputToStartFrom(int s) {
  SessionEvent e;
  e.kind = SessionEvent::Kind::kError;
  e.stream = s;
  e.status = absl::FailedPreconditionError(
      "generation starts after input: append at least one token with "
      "generate_on");
  sink_->Push(std::move(e));
}

void Session::BeginTurn(int s, int64_t next_y, int sample_index,
                        Scheduler& scheduler) {
  Stream& st = streams_[s];
  st.active = true;
  st.turn_tokens = 0;
  st.turn_reasoning = 0;
  st.sampler->StartTurn();
  st.stop = std::make_unique<StopMatcher>(options_.streams[s - 1].stop);
  st.next_y = next_y;
  const SamplePoint p{sample_index, static_cast<int32_t>(s)};
  scheduler.AddSamplePoints(handle_, absl::MakeConstSpan(&p, 1));
  UpdateThinking(scheduler);
}

void Session::UpdateThinking(Scheduler& scheduler) {
  if (!registered_) return;
  bool writing = false, thinking = true;
  for (const Stream& st : streams_) {
    if (!st.active) continue;
    writing = true;
    thinking = thinking && st.gate.thinking();
  }
  scheduler.SetSessionThinking(handle_, writing && thinking);
}

void Session::EndTurn(int s, FinishReason reason, Scheduler& scheduler,
                      std::string matched_stop) {
  Stream& st = streams_[s];
  if (!st.active) return;
  st.active = false;
  scheduler.ClearSamplePoints(handle_, s);
  UpdateThinking(scheduler);
  SessionEvent e;
  e.kind = SessionEvent::Kind::kTurnEnd;
  e.stream = s;
  e.finish_reason = reason;
  e.matched_stop = std::move(matched_stop);
  e.output_tokens = st.turn_tokens;
  e.reasoning_tokens = st.turn_reasoning;
  e.seed = options_.streams[s - 1].sampling.seed;
  // Release what was held back for stop strings and partial characters
  // (a matched stop string dropped both already), after the last token.
  e.first_position = st.next_y;
  e.reasoning = st.last_reasoning;
  e.text =
      (st.stop != nullptr ? st.stop->Flush() : "") + st.detokenizer->Flush();
  if (st.reasoning_detokenizer != nullptr) {
    e.reasoning_text = st.reasoning_detokenizer->Flush();
  }
  st.stop.reset();
  sink_->Push(std::move(e));
}

// Rows layout: a stream joins the running step, or starts after the last
// row; its first token comes from its own entry in the row before.
void Session::StartRowsTurn(int s, Scheduler& scheduler) {
  const int64_t step = Step();
  if (step < 0) FeedDueInput(scheduler, /*all=*/true);
  const int index = model_last_index_[Tag(s)];
  if (index < 0 || index < scheduler.num_computed_tokens(handle_)) {
    NoInputToStartFrom(s);
    return;
  }
  BeginTurn(s, step >= 0 ? step : MaxNextY(), index, scheduler);
}

std::vector<SamplePoint> Session::FitContext(std::vector<SamplePoint> points,
                                             Scheduler& scheduler) {
  if (options_.rows) {
    // The next tokens need one more row, which ending some of the turns
    // would not shrink: all of them end.
    if (points.empty() ||
        RowsEntries(std::max(MaxNextY(), Step() + 1)) <= max_context_tokens_) {
      return points;
    }
    for (auto it = points.rbegin(); it != points.rend(); ++it) {
      EndTurn(it->stream, FinishReason::kLength, scheduler);
    }
    return {};
  }
  while (!points.empty() &&
         NumPlannedEntries() + static_cast<int64_t>(points.size()) >
             max_context_tokens_) {
    const int s = points.back().stream;
    points.pop_back();
    EndTurn(
        s,
        options_.request ? FinishReason::kContextFull : FinishReason::kLength,
        scheduler);
  }
  return points;
}

void Session::Interrupt(int s, Scheduler& scheduler) {
  EndTurn(s, FinishReason::kCancelled, scheduler);
  if (!generating()) FeedDueInput(scheduler, /*all=*/true);
  AppendQueued(scheduler);
}

void Session::EndAllTurns(FinishReason reason, Scheduler& scheduler) {
  for (size_t s = 1; s < streams_.size(); ++s) {
    EndTurn(static_cast<int>(s), reason, scheduler);
  }
}

// Lockstep: every active output stream got one token in this step. Each is
// written at its stream's next y (the same y for all of them in the aligned
// layout and for branches), sent to the client, and becomes the entry whose
// logits give the stream's next token.
std::vector<bool> Session::OnStep(const ScheduledSequence& s,
                                  absl::Span<const SampledToken> tokens,
                                  Scheduler& scheduler) {
  std::vector<bool> kinds;
  std::vector<SamplePoint> points;
  for (size_t j = 0; j < s.samples.size(); ++j) {
    const int sid = s.samples[j].stream;
    Stream& st = streams_[sid];
    if (!st.active) continue;
    const SessionStreamOptions& o = options_.streams[sid - 1];
    const ReasoningGate::Decision d = st.gate.Next(tokens[j].token_id);
    kinds.push_back(d.reasoning);
    const int64_t y = st.next_y++;
    AppendEntry(sid, d.token, y, scheduler);
    for (int other : seen_by_[Tag(sid)]) {
      streams_[other].sampler->AddPrompt(absl::MakeConstSpan(&d.token, 1));
    }
    ++st.turn_tokens;
    st.turn_reasoning += d.reasoning;
    FinishReason finish = FinishReason::kNone;
    std::string matched;
    if (std::find(o.stop_token_ids.begin(), o.stop_token_ids.end(), d.token) !=
        o.stop_token_ids.end()) {
      finish = FinishReason::kStop;
      matched = absl::StrCat(d.token);
    } else if (!o.ignore_eos && tokenizer_->IsEndOfGeneration(d.token)) {
      finish = FinishReason::kEos;
    } else if (st.turn_tokens >= o.max_tokens) {
      finish = FinishReason::kLength;
    }
    if (finish != FinishReason::kStop && finish != FinishReason::kEos &&
        !(d.reasoning && o.reasoning.hide)) {
      SessionEvent e;
      e.kind = SessionEvent::Kind::kTokens;
      e.stream = sid;
      e.reasoning = d.reasoning;
      SampledToken t = tokens[j];
      if (d.forced) t = SampledToken{d.token};  // not sampled: no logprobs
      e.tokens.push_back(std::move(t));
      e.text = (d.reasoning && st.reasoning_detokenizer != nullptr
                    ? *st.reasoning_detokenizer
                    : *st.detokenizer)
                   .Push(d.token);
      if (!d.reasoning) {
        // Like Generate: the tokens that form a stop string are sent, its
        // text (and anything after it) is not.
        StopMatcher::Result r = st.stop->Push(e.text);
        e.text = std::move(r.text);
        if (r.stopped) {
          finish = FinishReason::kStop;
          matched = std::move(r.matched);
          st.detokenizer->Flush();
          st.stop.reset();
        }
      }
      e.first_position = y;
      st.last_reasoning = d.reasoning;
      sink_->Push(std::move(e));
    }
    if (finish != FinishReason::kNone) {
      EndTurn(sid, finish, scheduler, std::move(matched));
    } else {
      points.push_back({num_entries_ - 1, static_cast<int32_t>(sid)});
    }
  }
  points = FitContext(std::move(points), scheduler);
  scheduler.AddSamplePoints(handle_, points);
  FeedDueInput(scheduler, /*all=*/!generating());
  AppendQueued(scheduler);
  UpdateThinking(scheduler);
  return kinds;
}

void Session::AppendQueued(Scheduler& scheduler) {
  while (!generating() && !queued_.empty()) {
    SessionInput next = std::move(queued_.front());
    queued_.pop_front();
    Append(std::move(next), scheduler);
  }
}

}  // namespace braid::batching
