#include "batching/session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace braid::batching {

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
    st.gate = ReasoningGate(markers, o.reasoning, options_.prefix);
  }
  streams_[0].next_y = y0;
}

int32_t Session::Tag(int s) const {
  if (options_.model_streams <= 0) return s;
  return s == 0 ? 0 : options_.streams[s - 1].model_stream;
}

std::vector<std::vector<int32_t>> Session::Visibility() const {
  if (options_.model_streams > 0) {
    const int m = options_.model_streams;
    std::vector<std::vector<int32_t>> sees(m);
    for (int s = 0; s < m; ++s) {
      for (int t = 0; t < m; ++t) {
        if (t != s) sees[s].push_back(t);
      }
    }
    return sees;
  }
  const int n = static_cast<int>(streams_.size());
  std::vector<std::vector<int32_t>> sees(n);
  bool any_branch = false;
  for (const SessionStreamOptions& o : options_.streams) {
    any_branch |= o.output && o.visibility == StreamVisibility::kBranch;
  }
  for (int s = 0; s < n; ++s) {
    const bool branch =
        s > 0 && IsOutput(s) &&
        options_.streams[s - 1].visibility == StreamVisibility::kBranch;
    for (int t = 0; t < n; ++t) {
      if (t == s) continue;
      const bool t_output = t > 0 && IsOutput(t);
      // A branch sees the prefix and the input streams; input streams do
      // not see branches (they are shared by all of them).
      if (t_output && (branch || (s > 0 && !IsOutput(s) && any_branch))) {
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
  const int32_t t[1] = {token};
  const EntryTag m[1] = {{Tag(stream), static_cast<int32_t>(y)}};
  scheduler.AppendEntries(handle_, t, m);
  ++num_entries_;
}

int64_t Session::NumPlannedEntries() const {
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
  const int64_t need = NumPlannedEntries() + n + writers;
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
                         options_.tenant);
    kept_ = {};
    registered_ = true;
  }
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
    const int64_t step = Step();
    first = std::max(in.next_y, step >= 0 ? step : MaxNextY());
    if (!in.due.empty()) first = std::max(first, in.due.back().second + 1);
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

void Session::StartTurn(int s, Scheduler& scheduler) {
  Stream& st = streams_[s];
  if (st.active) return;
  FeedDueInput(scheduler, /*all=*/true);
  if (scheduler.num_computed_tokens(handle_) >= num_entries_) {
    // The last entry's logits are gone; a turn starts from new input.
    SessionEvent e;
    e.kind = SessionEvent::Kind::kError;
    e.stream = s;
    e.status = absl::FailedPreconditionError(
        "generation starts after input: append at least one token with "
        "generate_on");
    sink_->Push(std::move(e));
    return;
  }
  st.active = true;
  st.turn_tokens = 0;
  st.stop = std::make_unique<StopMatcher>(options_.streams[s - 1].stop);
  // A turn starts after everything written so far; its first token comes
  // from the logits of the context's last entry.
  st.next_y = std::max(st.next_y, MaxNextY());
  const SamplePoint p{num_entries_ - 1, static_cast<int32_t>(s)};
  scheduler.AddSamplePoints(handle_, absl::MakeConstSpan(&p, 1));
}

void Session::EndTurn(int s, FinishReason reason, Scheduler& scheduler,
                      std::string matched_stop) {
  Stream& st = streams_[s];
  if (!st.active) return;
  st.active = false;
  scheduler.ClearSamplePoints(handle_, s);
  SessionEvent e;
  e.kind = SessionEvent::Kind::kTurnEnd;
  e.stream = s;
  e.finish_reason = reason;
  e.matched_stop = std::move(matched_stop);
  e.output_tokens = st.turn_tokens;
  e.reasoning_tokens = st.gate.num_reasoning();
  e.seed = options_.streams[s - 1].sampling.seed;
  // Release what was held back for stop strings and partial characters
  // (a matched stop string dropped both already).
  e.text =
      (st.stop != nullptr ? st.stop->Flush() : "") + st.detokenizer->Flush();
  st.stop.reset();
  sink_->Push(std::move(e));
}

std::vector<SamplePoint> Session::FitContext(std::vector<SamplePoint> points,
                                             Scheduler& scheduler) {
  while (!points.empty() &&
         NumPlannedEntries() + static_cast<int64_t>(points.size()) >
             max_context_tokens_) {
    const int s = points.back().stream;
    points.pop_back();
    EndTurn(s, FinishReason::kLength, scheduler);
  }
  return points;
}

void Session::Interrupt(int s, Scheduler& scheduler) {
  EndTurn(s, FinishReason::kCancelled, scheduler);
  if (!generating()) FeedDueInput(scheduler, /*all=*/true);
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
void Session::OnStep(const ScheduledSequence& s,
                     absl::Span<const SampledToken> tokens,
                     Scheduler& scheduler) {
  std::vector<SamplePoint> points;
  for (size_t j = 0; j < s.samples.size(); ++j) {
    const int sid = s.samples[j].stream;
    Stream& st = streams_[sid];
    if (!st.active) continue;
    const SessionStreamOptions& o = options_.streams[sid - 1];
    const ReasoningGate::Decision d = st.gate.Next(tokens[j].token_id);
    const int64_t y = st.next_y++;
    AppendEntry(sid, d.token, y, scheduler);
    ++st.turn_tokens;
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
      t.token_id = d.token;
      e.tokens.push_back(std::move(t));
      e.text = st.detokenizer->Push(d.token);
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
  while (!generating() && !queued_.empty()) {
    SessionInput next = std::move(queued_.front());
    queued_.pop_front();
    Append(std::move(next), scheduler);
  }
}

}  // namespace braid::batching
