// gpu_e2e: the end-to-end part of the GPU check (issue 32), a client of two
// braidd daemons serving the same random-weight model, one on the CPU (the
// oracle) and one on CUDA; tools/gpu/e2e.sh starts them and runs this.
//
//   gpu_e2e --cpu=127.0.0.1:P --cuda=127.0.0.1:Q --cuda_stats=FILE
//       --out=e2e.json
//
// 1. Greedy: --prompts prompts of --tokens tokens each (ignore_eos), sent at
//    once to each daemon; the token ids must match. Where a CUDA output
//    parts from the CPU's, the CUDA's token must be the CPU's second choice
//    there, within --tie_nats of its first (a near tie that BF16 rounding
//    may flip); the rest of that output is not compared.
// 2. Session, on both: a prefix, then two appends each generating on four
//    greedy branches (VISIBILITY_BRANCH, the same sampling): every turn ends
//    with FINISH_REASON_LENGTH after --session_tokens tokens, the branches
//    write the same tokens, and the CUDA daemon's the CPU's (near ties as
//    above).
// 3. Cancel: a long generation on the CUDA daemon, cancelled by the client
//    after a few tokens, ends CANCELLED; the KV blocks in use (braidd's
//    --stats_file, --cuda_stats) rise during it and return to the idle value.
//
// Writes --out: {"tests": checks, "failures": failed checks, "checks": [...],
// and what each part saw}, the shape of a gtest JSON summary, so check.sh
// tabulates it as it does the tests. Exit status 1 when a check fails.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "proto/braid/v1/braid.grpc.pb.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "tools/gpu/token_compare.h"

ABSL_FLAG(std::string, cpu, "", "the CPU daemon's address (required)");
ABSL_FLAG(std::string, cuda, "", "the CUDA daemon's address (required)");
ABSL_FLAG(std::string, cuda_stats, "",
          "the CUDA daemon's --stats_file (required)");
ABSL_FLAG(std::string, out, "", "where to write the JSON report (required)");
ABSL_FLAG(std::string, expect_backend, "cuda",
          "the backend the --cuda daemon must report (cpu: a dry run of "
          "this client against two CPU daemons)");
ABSL_FLAG(int, prompts, 10, "greedy prompts");
ABSL_FLAG(int, tokens, 24, "tokens per greedy generation");
ABSL_FLAG(int, session_tokens, 12, "tokens per branch and session turn");
ABSL_FLAG(double, tie_nats, 0.1,
          "where outputs part, the CPU's first and second choices may be "
          "this close (nats)");
ABSL_FLAG(double, logprob_nats, 0.5,
          "the sampled tokens' log-probabilities on both daemons may differ "
          "this much (nats)");
ABSL_FLAG(int, serving_timeout_s, 180, "wait this long for SERVING");

namespace {

namespace pb = ::braid::v1;
using ::braid::gpu_check::Compare;
using ::braid::gpu_check::Ids;
using ::braid::gpu_check::Parting;
using ::braid::gpu_check::Token;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr int kBranches = 4;
constexpr int kRpcSeconds = 120;

// The checks and their outcomes.
class Checks {
 public:
  void Add(const std::string& name, bool ok, const std::string& detail) {
    std::printf("e2e: %-22s %s  %s\n", name.c_str(), ok ? "ok  " : "FAIL",
                detail.c_str());
    std::fflush(stdout);
    list_.push_back({{"name", name}, {"ok", ok}, {"detail", detail}});
    failures_ += ok ? 0 : 1;
  }
  int failures() const { return failures_; }
  json ToJson() const { return list_; }
  size_t size() const { return list_.size(); }

 private:
  json list_ = json::array();
  int failures_ = 0;
};

std::unique_ptr<grpc::ClientContext> Context(int seconds = kRpcSeconds) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::seconds(seconds));
  return ctx;
}

void AddTokens(const google::protobuf::RepeatedField<int32_t>& ids,
               const google::protobuf::RepeatedPtrField<pb::TokenLogprob>& lp,
               std::vector<Token>* out) {
  for (int i = 0; i < ids.size(); ++i) {
    Token t;
    t.id = ids[i];
    if (i < lp.size()) t.logprob = lp[i].logprob();
    if (i < lp.size() && lp[i].top_size() >= 2) {
      t.first_id = lp[i].top(0).token_id();
      t.first_logprob = lp[i].top(0).logprob();
      t.second_id = lp[i].top(1).token_id();
      t.second_logprob = lp[i].top(1).logprob();
    }
    out->push_back(t);
  }
}

json PartingJson(const Parting& p) {
  return {{"position", p.position},
          {"cpu_gap_nats", std::isfinite(p.cpu_gap_nats)
                               ? json(p.cpu_gap_nats)
                               : json("not the second choice")},
          {"tolerated", p.tolerated},
          {"max_logprob_diff", p.max_logprob_diff}};
}

pb::SamplingParams Greedy(int max_tokens) {
  pb::SamplingParams s;
  s.set_max_tokens(max_tokens);
  s.set_ignore_eos(true);
  s.set_logprobs(true);
  s.set_top_logprobs(2);
  return s;
}

bool WaitServing(const std::shared_ptr<grpc::Channel>& channel, int seconds) {
  auto health = grpc::health::v1::Health::NewStub(channel);
  const Clock::time_point deadline =
      Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < deadline) {
    grpc::health::v1::HealthCheckResponse r;
    auto ctx = Context(5);
    if (health->Check(ctx.get(), {}, &r).ok() &&
        r.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

// ---------------------------------------------------------------------------
// 1. Greedy generations

struct Generation {
  std::vector<Token> tokens;
  grpc::Status status;
  pb::FinishReason finish = pb::FINISH_REASON_UNSPECIFIED;
};

Generation Generate(pb::Braid::Stub& stub, const std::string& prompt,
                    int tokens) {
  pb::GenerateRequest req;
  req.mutable_prompt()->set_text(prompt);
  *req.mutable_sampling() = Greedy(tokens);
  auto ctx = Context();
  auto reader = stub.Generate(ctx.get(), req);
  Generation g;
  pb::GenerateResponse r;
  while (reader->Read(&r)) {
    AddTokens(r.token_ids(), r.logprobs(), &g.tokens);
    if (r.has_final()) g.finish = r.final().finish_reason();
  }
  g.status = reader->Finish();
  return g;
}

const char* const kPrompts[] = {
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):",
    "The three primary colors are",
    "In 1969, the first humans to walk on the Moon",
    "A recipe for pancakes: first, mix",
    "The quick brown fox jumps over",
    "Photosynthesis is the process by which",
    "Dear hiring manager, I am writing to apply for",
    "The most important rule of distributed systems is",
    "Water boils at a temperature of",
    "To be, or not to be, that is",
};

// Every prompt on both daemons at once (the CUDA daemon batches them).
void RunGreedy(pb::Braid::Stub& cpu, pb::Braid::Stub& cuda, Checks& checks,
               json& report) {
  const int n = std::min<int>(absl::GetFlag(FLAGS_prompts),
                              sizeof(kPrompts) / sizeof(kPrompts[0]));
  const int tokens = absl::GetFlag(FLAGS_tokens);
  std::vector<Generation> want(n), got(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back(
        [&, i] { want[i] = Generate(cpu, kPrompts[i], tokens); });
    threads.emplace_back(
        [&, i] { got[i] = Generate(cuda, kPrompts[i], tokens); });
  }
  for (std::thread& t : threads) t.join();
  int complete = 0, identical = 0, tolerated = 0;
  double logprob_diff = 0.0;
  int compared = 0;
  std::vector<std::string> partings;
  for (int i = 0; i < n; ++i) {
    bool ok = true;
    for (const Generation* g : {&want[i], &got[i]}) {
      ok = ok && g->status.ok() && g->finish == pb::FINISH_REASON_LENGTH &&
           static_cast<int>(g->tokens.size()) == tokens;
    }
    complete += ok;
    const Parting p =
        Compare(want[i].tokens, got[i].tokens, absl::GetFlag(FLAGS_tie_nats));
    identical += p.position < 0;
    logprob_diff = std::max(logprob_diff, p.max_logprob_diff);
    compared += p.equal_tokens;
    tolerated += p.position >= 0 && p.tolerated;
    if (p.position >= 0) {
      partings.push_back(absl::StrFormat("prompt %d at token %d (CPU gap %g)",
                                         i, p.position, p.cpu_gap_nats));
    }
    report["greedy"].push_back({{"prompt", kPrompts[i]},
                                {"cpu", Ids(want[i].tokens)},
                                {"cuda", Ids(got[i].tokens)},
                                {"cpu_status", want[i].status.error_message()},
                                {"cuda_status", got[i].status.error_message()},
                                {"parting", PartingJson(p)}});
  }
  checks.Add("greedy_complete", complete == n,
             absl::StrFormat("%d/%d prompts gave %d tokens on both", complete,
                             n, tokens));
  checks.Add(
      "greedy_match", identical + tolerated == n,
      absl::StrFormat("%d/%d identical, %d parted at a near tie%s%s", identical,
                      n, tolerated, partings.empty() ? "" : ": ",
                      absl::StrJoin(partings, "; ")));
  checks.Add("greedy_logprobs_close",
             complete == n && logprob_diff <= absl::GetFlag(FLAGS_logprob_nats),
             absl::StrFormat("the sampled tokens' log-probabilities differ by "
                             "%.4f nats at most (%d tokens)",
                             logprob_diff, compared));
}

// ---------------------------------------------------------------------------
// 2. A session with appends and branches

struct SessionRun {
  bool opened = false;
  std::vector<pb::InputAck> acks;
  // [turn][branch]: the tokens and how the turn ended.
  std::vector<std::vector<std::vector<Token>>> turns;
  std::vector<std::vector<pb::FinishReason>> finishes;
  std::vector<std::string> errors;
  grpc::Status status;
};

pb::SessionRequest OpenRequest(int tokens) {
  pb::SessionRequest req;
  pb::SessionOpen* open = req.mutable_open();
  open->mutable_prefix()->set_text(
      "You are a helpful assistant. Answer briefly and precisely.");
  pb::StreamSpec* user = open->add_streams();
  user->set_stream_id("user");
  user->set_kind(pb::STREAM_KIND_INPUT);
  for (int b = 0; b < kBranches; ++b) {
    pb::StreamSpec* out = open->add_streams();
    out->set_stream_id(absl::StrCat("b", b));
    out->set_kind(pb::STREAM_KIND_OUTPUT);
    out->set_visibility(pb::VISIBILITY_BRANCH);
    *out->mutable_sampling() = Greedy(tokens);
  }
  return req;
}

pb::SessionRequest AppendRequest(int turn, const std::string& text) {
  pb::SessionRequest req;
  pb::SessionAppend* a = req.mutable_append();
  a->set_input_id(absl::StrCat("in", turn));
  a->set_stream_id("user");
  a->mutable_input()->set_text(text);
  for (int b = 0; b < kBranches; ++b) a->add_generate_on(absl::StrCat("b", b));
  return req;
}

// "b2" -> 2; -1 for any other stream id.
int BranchIndex(const std::string& stream_id) {
  if (stream_id.size() != 2 || stream_id[0] != 'b') return -1;
  const int b = stream_id[1] - '0';
  return b >= 0 && b < kBranches ? b : -1;
}

using SessionStream =
    grpc::ClientReaderWriter<pb::SessionRequest, pb::SessionEvent>;

// Reads events until every branch ended its turn (false: the call ended).
bool ReadTurn(SessionStream& stream, SessionRun& run) {
  run.turns.emplace_back(kBranches);
  run.finishes.emplace_back(kBranches, pb::FINISH_REASON_UNSPECIFIED);
  int ended = 0;
  pb::SessionEvent ev;
  while (ended < kBranches && stream.Read(&ev)) {
    if (ev.has_tokens()) {
      const int b = BranchIndex(ev.tokens().stream_id());
      if (b < 0) continue;
      AddTokens(ev.tokens().token_ids(), ev.tokens().logprobs(),
                &run.turns.back()[b]);
    } else if (ev.has_turn_end()) {
      const int b = BranchIndex(ev.turn_end().stream_id());
      if (b < 0) continue;
      run.finishes.back()[b] = ev.turn_end().info().finish_reason();
      ++ended;
    } else if (ev.has_ack()) {
      run.acks.push_back(ev.ack());
    } else if (ev.has_error()) {
      run.errors.push_back(ev.error().message());
    }
  }
  return ended == kBranches;
}

SessionRun RunSession(pb::Braid::Stub& stub, int tokens) {
  SessionRun run;
  auto ctx = Context();
  std::unique_ptr<SessionStream> stream = stub.Session(ctx.get());
  pb::SessionEvent ev;
  run.opened = stream->Write(OpenRequest(tokens)) && stream->Read(&ev) &&
               ev.has_opened();
  const char* const inputs[] = {"Tell me a short story about a lighthouse.",
                                " Now make it rhyme."};
  for (int turn = 0; run.opened && turn < 2; ++turn) {
    if (!stream->Write(AppendRequest(turn, inputs[turn])) ||
        !ReadTurn(*stream, run)) {
      break;
    }
  }
  pb::SessionRequest close;
  close.mutable_close();
  stream->Write(close);
  stream->WritesDone();
  while (stream->Read(&ev)) {
    if (ev.has_error()) run.errors.push_back(ev.error().message());
  }
  run.status = stream->Finish();
  return run;
}

// The protocol of one daemon's session: opened, two acks, every turn of
// every branch ended LENGTH with `tokens` tokens, closed OK.
std::string SessionProblems(const SessionRun& r, int tokens) {
  std::vector<std::string> p;
  if (!r.opened) p.push_back("not opened");
  if (r.acks.size() != 2) p.push_back(absl::StrCat(r.acks.size(), " acks"));
  for (const pb::InputAck& a : r.acks) {
    if (a.num_tokens() <= 0) p.push_back("an empty ack");
  }
  if (r.turns.size() != 2) p.push_back(absl::StrCat(r.turns.size(), " turns"));
  for (size_t t = 0; t < r.turns.size(); ++t) {
    for (int b = 0; b < kBranches; ++b) {
      if (static_cast<int>(r.turns[t][b].size()) != tokens ||
          r.finishes[t][b] != pb::FINISH_REASON_LENGTH) {
        p.push_back(absl::StrFormat("turn %d branch %d: %d tokens, finish %d",
                                    t, b, r.turns[t][b].size(),
                                    r.finishes[t][b]));
      }
    }
  }
  for (const std::string& e : r.errors) p.push_back("error: " + e);
  if (!r.status.ok()) p.push_back("status: " + r.status.error_message());
  return absl::StrJoin(p, "; ");
}

// Turns whose branches did not all write branch 0's tokens.
std::string BranchProblems(const SessionRun& r) {
  std::vector<std::string> p;
  for (size_t t = 0; t < r.turns.size(); ++t) {
    for (int b = 1; b < kBranches; ++b) {
      if (Ids(r.turns[t][b]) != Ids(r.turns[t][0])) {
        p.push_back(absl::StrFormat("turn %d: branch %d differs", t, b));
      }
    }
  }
  return absl::StrJoin(p, "; ");
}

json SessionJson(const SessionRun& r) {
  json turns = json::array();
  for (const auto& turn : r.turns) {
    json branches = json::array();
    for (const auto& b : turn) branches.push_back(Ids(b));
    turns.push_back(branches);
  }
  return {{"opened", r.opened},
          {"acks", r.acks.size()},
          {"turns", turns},
          {"errors", r.errors},
          {"status", r.status.error_message()}};
}

void CheckSession(pb::Braid::Stub& cpu, pb::Braid::Stub& cuda, Checks& checks,
                  json& report) {
  const int tokens = absl::GetFlag(FLAGS_session_tokens);
  const SessionRun want = RunSession(cpu, tokens);
  const SessionRun got = RunSession(cuda, tokens);
  report["session"] = {{"cpu", SessionJson(want)}, {"cuda", SessionJson(got)}};
  const std::string cpu_problems = SessionProblems(want, tokens);
  const std::string problems = SessionProblems(got, tokens);
  checks.Add("session_protocol", problems.empty() && cpu_problems.empty(),
             problems.empty() && cpu_problems.empty()
                 ? absl::StrFormat("2 appends, %d branches x 2 turns of %d "
                                   "tokens, closed OK on both",
                                   kBranches, tokens)
                 : absl::StrCat("cuda: ", problems, " cpu: ", cpu_problems));
  const std::string branches = BranchProblems(got);
  checks.Add(
      "session_branches_equal", branches.empty() && !got.turns.empty(),
      branches.empty() ? "every branch wrote the same tokens" : branches);
  // The second turn is compared only when the first matched exactly (its
  // context holds the first turn's tokens).
  std::vector<std::string> partings;
  bool ok = want.turns.size() == got.turns.size() && !got.turns.empty();
  for (size_t t = 0; ok && t < got.turns.size(); ++t) {
    const Parting p = Compare(want.turns[t][0], got.turns[t][0],
                              absl::GetFlag(FLAGS_tie_nats));
    report["session"]["parting"].push_back(PartingJson(p));
    if (p.position < 0) continue;
    partings.push_back(absl::StrFormat("turn %d at token %d (CPU gap %g)", t,
                                       p.position, p.cpu_gap_nats));
    ok = p.tolerated;
    break;
  }
  checks.Add("session_matches_cpu", ok,
             partings.empty() ? "both turns identical"
                              : absl::StrJoin(partings, "; "));
}

// ---------------------------------------------------------------------------
// 3. Cancel

struct KvStats {
  bool read = false;
  int requests = 0, sessions = 0, total = 0, free = 0;
};

KvStats ReadStats(const std::string& path) {
  KvStats s;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("kv_blocks_free")) return s;
  s.read = true;
  s.requests = j.value("requests", 0);
  s.sessions = j.value("sessions", 0);
  s.total = j.value("kv_blocks_total", 0);
  s.free = j.value("kv_blocks_free", 0);
  return s;
}

// Polls the stats file until `pred` holds or `seconds` pass; the last read.
template <typename Pred>
KvStats WaitStats(const std::string& path, double seconds, Pred pred) {
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(seconds));
  KvStats s = ReadStats(path);
  while (!(s.read && pred(s)) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s = ReadStats(path);
  }
  return s;
}

json StatsJson(const KvStats& s) {
  return {{"requests", s.requests},
          {"sessions", s.sessions},
          {"kv_blocks_total", s.total},
          {"kv_blocks_free", s.free}};
}

void CheckCancel(pb::Braid::Stub& cuda, const std::string& stats,
                 Checks& checks, json& report) {
  auto idle_pred = [](const KvStats& s) {
    return s.requests == 0 && s.sessions == 0;
  };
  const KvStats idle = WaitStats(stats, 10, idle_pred);
  pb::GenerateRequest req;
  req.mutable_prompt()->set_text("Write a very long essay about the sea.");
  *req.mutable_sampling() = Greedy(1900);
  req.mutable_sampling()->set_logprobs(false);
  req.mutable_sampling()->set_top_logprobs(0);
  auto ctx = Context();
  auto reader = cuda.Generate(ctx.get(), req);
  pb::GenerateResponse r;
  int received = 0;
  while (received < 32 && reader->Read(&r)) received += r.token_ids_size();
  const KvStats busy = WaitStats(stats, 2, [&](const KvStats& s) {
    return s.requests > 0 && s.free < idle.free;
  });
  ctx->TryCancel();
  while (reader->Read(&r)) received += r.token_ids_size();
  const grpc::Status status = reader->Finish();
  const Clock::time_point t0 = Clock::now();
  const KvStats after = WaitStats(stats, 10, [&](const KvStats& s) {
    return idle_pred(s) && s.free == idle.free;
  });
  const double back_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  report["cancel"] = {
      {"idle", StatsJson(idle)},          {"busy", StatsJson(busy)},
      {"after", StatsJson(after)},        {"tokens_received", received},
      {"status", status.error_message()}, {"kv_back_ms", back_ms}};
  checks.Add("cancel_status",
             status.error_code() == grpc::StatusCode::CANCELLED,
             absl::StrFormat("%d tokens, then status %d (%s)", received,
                             status.error_code(), status.error_message()));
  checks.Add("cancel_kv_in_use", idle.read && busy.free < idle.free,
             absl::StrFormat("idle %d/%d free, %d during the generation",
                             idle.free, idle.total, busy.free));
  checks.Add("cancel_kv_back_to_idle",
             after.read && after.free == idle.free && idle_pred(after),
             absl::StrFormat("%d free %.0f ms after the cancel (idle %d)",
                             after.free, back_ms, idle.free));
}

// ---------------------------------------------------------------------------

bool CheckDaemons(const std::shared_ptr<grpc::Channel>& cpu,
                  const std::shared_ptr<grpc::Channel>& cuda, Checks& checks,
                  json& report) {
  const int seconds = absl::GetFlag(FLAGS_serving_timeout_s);
  const bool serving = WaitServing(cpu, seconds) && WaitServing(cuda, seconds);
  checks.Add(
      "serving", serving,
      serving ? "both daemons SERVING" : "a daemon never reported SERVING");
  if (!serving) return false;
  std::vector<std::string> backends;
  for (const auto& channel : {cpu, cuda}) {
    pb::ModelInfo info;
    auto ctx = Context(30);
    pb::Braid::NewStub(channel)->GetModelInfo(ctx.get(), {}, &info);
    backends.push_back(info.backend());
    report["models"].push_back({{"backend", info.backend()},
                                {"layers", info.num_layers()},
                                {"embedding", info.embedding_length()},
                                {"vocab", info.vocab_size()},
                                {"context_length", info.context_length()}});
  }
  const bool ok = backends[0] == "cpu" &&
                  backends[1] == absl::GetFlag(FLAGS_expect_backend);
  checks.Add("backends", ok,
             absl::StrCat("cpu daemon: ", backends[0],
                          ", cuda daemon: ", backends[1]));
  return ok;
}

int Run() {
  const std::string out = absl::GetFlag(FLAGS_out);
  const std::string stats = absl::GetFlag(FLAGS_cuda_stats);
  if (absl::GetFlag(FLAGS_cpu).empty() || absl::GetFlag(FLAGS_cuda).empty() ||
      stats.empty() || out.empty()) {
    std::fprintf(stderr,
                 "gpu_e2e: --cpu, --cuda, --cuda_stats and --out are "
                 "required\n");
    return 2;
  }
  auto cpu_channel = grpc::CreateChannel(absl::GetFlag(FLAGS_cpu),
                                         grpc::InsecureChannelCredentials());
  auto cuda_channel = grpc::CreateChannel(absl::GetFlag(FLAGS_cuda),
                                          grpc::InsecureChannelCredentials());
  Checks checks;
  json report = json::object();
  if (CheckDaemons(cpu_channel, cuda_channel, checks, report)) {
    auto cpu = pb::Braid::NewStub(cpu_channel);
    auto cuda = pb::Braid::NewStub(cuda_channel);
    RunGreedy(*cpu, *cuda, checks, report);
    CheckSession(*cpu, *cuda, checks, report);
    CheckCancel(*cuda, stats, checks, report);
  }
  report["tests"] = checks.size();
  report["failures"] = checks.failures();
  report["checks"] = checks.ToJson();
  std::ofstream(out) << report.dump(1) << "\n";
  return checks.failures() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "the GPU check's end-to-end part: a CUDA braidd against a CPU one");
  absl::ParseCommandLine(argc, argv);
  return Run();
}
