// cuda_bench: the CUDA executor's figures for issue 32's targets, straight
// over the model seam (CudaModel::Load, NewKvCache, Forward on hand-built
// batches; no engine, no server), on a random-weight model of a real
// model's shape at full depth (model/testing/random_llama; the device holds
// BF16 whatever the file's type, so Q8_0, quick to write, is the default).
//
//   cuda_bench --shape=llama-1b [--batches=1,16,64] [--context=512]
//       [--steps=50] [--graphs=both|on|off] [--pdl=off|on|both]
//       [--throughput] [--top_k=0]
//       [--json=PATH]
//
// Decode (--decode, on by default): per batch size, every sequence's
// --context tokens are prefilled, then one step at the last position the
// measurement reaches and --warmup steps (so the CUDA graphs of every bucket
// the measurement meets are captured before it), then --steps timed steps.
// Printed: median and p90 ms/step, the ratio to batch 1, the HBM bound
// (WeightBytes() / 4.8e12 B/s, H200's HBM3e; and with the K/V read) and the
// share of it reached, the GPU idle between and inside steps and the wall
// time per step.
//
// GPU idle: Forward synchronises at its end, so an event recorded on
// CudaModel::stream() right before a Forward enters the queue ahead of its
// work, and one recorded right after it returns follows that work. The gap
// end_n -> start_n+1 is then time the GPU had nothing queued between two
// steps (here only the next batch's bookkeeping on the host); the host's
// preparation inside Forward (building and uploading the metadata, launches
// when graphs are off, the logits' copy back) lies in start_n -> end_n, the
// step time. idle% = sum of gaps / sum of step times. What the host's part
// inside a step costs shows against --gated_steps more steps, each held
// behind a gate (a host function spinning on the stream) until Forward has
// queued all its work: from the gate's opening to the end, the GPU's own
// time (gpu_ms); in_step% = 1 - gpu_ms / the median step time.
//
// Throughput (--throughput): --seqs sequences of --prompt tokens prefilled
// in steps of at most --max_tokens tokens, then --gen decode steps of all of
// them at once; prints output tokens/s. The KV pool is sized from
// KvBlocksForFreeMemory(16, 0.9), with an error naming what does not fit.
//
// Steps go through Forward (whole logits rows back to the host), or with
// --top_k=k through ForwardTop (k entries per row reduced on the device:
// what the engine's greedy steps call, k = 1). With --top_k and --lookahead
// (the default), greedy steps are also timed as the engine runs them, each
// next step told first (Model::SetLookahead) so that it is enqueued before
// the host reads this one's tokens: their host time per step against the
// gated GPU time gives the GPU idle between pipelined steps; throughput's
// decode runs that way.
//
// Each measurement prints a human line and, with --json, appends one JSON
// object line to PATH (tools/gpu/check.sh collects them in bench.jsonl).
// Needs a GPU; built with --config=cuda.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/cuda/status.h"
#include "model/batch.h"
#include "model/cuda/cuda_model.h"
#include "model/gguf.h"
#include "model/lookahead.h"
#include "model/model.h"
#include "model/testing/bench_batches.h"
#include "model/testing/random_llama.h"
#include "model/top_logits.h"
#include "util/status_macros.h"

ABSL_FLAG(std::string, shape, "smollm2-135m",
          "smollm2-135m, llama-1b or llama-8b (full depth)");
ABSL_FLAG(std::string, matrix_type, "Q8_0",
          "the file's type of the attention and FFN matrices");
ABSL_FLAG(std::string, graphs, "both",
          "CudaLoadOptions::cuda_graphs: both, on or off");
ABSL_FLAG(std::string, pdl, "off",
          "CudaLoadOptions::dependent_launch: both, on or off (each graphs "
          "setting with each)");
ABSL_FLAG(int, max_tokens, 2048, "CudaLoadOptions::max_tokens");
ABSL_FLAG(bool, decode, true, "measure decode steps");
ABSL_FLAG(std::string, batches, "1,16,64", "decode batch sizes");
ABSL_FLAG(int, context, 512, "tokens each decode sequence holds first");
ABSL_FLAG(int, steps, 50, "timed decode steps per batch size");
ABSL_FLAG(int, warmup, 5, "untimed decode steps before them");
ABSL_FLAG(int, gated_steps, 10,
          "decode steps after them timed on the GPU alone (the gate)");
ABSL_FLAG(bool, throughput, false, "measure throughput");
ABSL_FLAG(int, seqs, 256, "throughput: sequences");
ABSL_FLAG(int, prompt, 1024, "throughput: prompt tokens per sequence");
ABSL_FLAG(int, gen, 1024, "throughput: decode steps");
ABSL_FLAG(int, top_k, 0,
          "0: Forward (whole logits rows to the host); k > 0: ForwardTop "
          "with k entries per row (the engine's greedy steps: k = 1)");
ABSL_FLAG(bool, lookahead, true,
          "with --top_k > 0: also time greedy decode steps with the next step "
          "told in advance (Model::SetLookahead), as the engine runs them");
ABSL_FLAG(std::string, json, "", "append one JSON line per measurement here");

namespace braid::model {
namespace {

constexpr int kBlockSize = 16;
constexpr double kKvFraction = 0.9;
constexpr double kHbmBytesPerSecond = 4.8e12;  // H200 HBM3e

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Human lines to stdout, JSON lines to --json.
class Report {
 public:
  explicit Report(std::string json_path) : path_(std::move(json_path)) {}
  void Line(const std::string& s) {
    std::printf("%s\n", s.c_str());
    std::fflush(stdout);
  }
  // `fields`: `"key": value` pairs, joined into one object after the common
  // ones (common_, set once the device and model are known).
  void Json(const std::vector<std::string>& fields) {
    if (path_.empty()) return;
    std::FILE* f = std::fopen(path_.c_str(), "a");
    if (f == nullptr) return;
    std::fprintf(f, "{%s, %s}\n", common_.c_str(),
                 absl::StrJoin(fields, ", ").c_str());
    std::fclose(f);
  }
  void set_common(std::string c) { common_ = std::move(c); }

 private:
  std::string path_;
  std::string common_;
};

std::string Field(const char* key, double v) {
  return absl::StrFormat("\"%s\": %.6g", key, v);
}
std::string Field(const char* key, int64_t v) {
  return absl::StrFormat("\"%s\": %d", key, v);
}
std::string Field(const char* key, const std::string& v) {
  return absl::StrFormat("\"%s\": \"%s\"", key, v);
}
std::string Field(const char* key, bool v) {
  return absl::StrFormat("\"%s\": %s", key, v ? "true" : "false");
}

// How the model is loaded for one set of measurements: CUDA graphs and
// programmatic dependent launch on or off (a load each).
struct Setting {
  bool graphs = true;
  bool pdl = false;
  std::string Name() const {
    return absl::StrCat("graphs ", graphs ? "on" : "off", ", PDL ",
                        pdl ? "on" : "off");
  }
  std::string Fields() const {
    return absl::StrCat(Field("graphs", graphs), ", ", Field("pdl", pdl));
  }
};

// The value at fraction q of the sorted values (q = 0.5: the median).
double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(std::ceil(q * v.size()));
  return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
}

// The model, a cache laid out for the sequences (BenchLayout), and the
// logits buffer every step reuses.
struct Run {
  CudaModel* model = nullptr;
  std::unique_ptr<KvCache> kv;
  testing::BenchLayout layout;
  int top_k = 0;  // > 0: ForwardTop, as the engine's greedy steps
  std::vector<float> logits;
  TopLogits top;

  absl::Status Step(const Batch& b) {
    if (top_k == 0) return model->Forward(b, *kv, &logits);
    TopRequest req;
    req.k = top_k;
    return model->ForwardTop(b, *kv, req, &top);
  }
};

// A cache for `seqs` sequences of up to `entries` entries each, if it fits
// in kKvFraction of the free device memory.
absl::StatusOr<Run> NewRun(CudaModel& model, int seqs, int entries, int top_k) {
  Run run;
  run.model = &model;
  run.top_k = top_k;
  run.layout =
      testing::BenchLayout::For(kBlockSize, entries, model.info().n_vocab);
  const int64_t need = run.layout.NumBlocks(seqs);
  BRAID_ASSIGN_OR_RETURN(const int fit,
                         model.KvBlocksForFreeMemory(kBlockSize, kKvFraction));
  if (need > fit) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%d sequences of %d entries need %d KV blocks of %d (%.1f GiB); "
        "%.0f%% of the free device memory holds %d: lower --seqs, --prompt, "
        "--gen, --context or the batch sizes",
        seqs, entries, need, kBlockSize,
        need * double(model.KvBlockBytes(kBlockSize)) / (1 << 30),
        kKvFraction * 100, fit));
  }
  run.kv = model.NewKvCache(kBlockSize, static_cast<int>(need));
  return run;
}

// Prefills sequences [0, seqs) with `len` tokens each (PrefillBatches);
// returns the seconds it took.
absl::StatusOr<double> Prefill(Run& run, int seqs, int len, int max_tokens) {
  const std::vector<Batch> steps =
      testing::PrefillBatches(run.layout, seqs, len, max_tokens);
  const Clock::time_point t0 = Clock::now();
  for (const Batch& b : steps) BRAID_RETURN_IF_ERROR(run.Step(b));
  return SecondsSince(t0);
}

// CUDA events, destroyed with it.
class Events {
 public:
  ~Events() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  absl::StatusOr<cudaEvent_t> New() {
    cudaEvent_t e;
    BRAID_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
    events_.push_back(e);
    return e;
  }

 private:
  std::vector<cudaEvent_t> events_;
};

double ElapsedMs(cudaEvent_t from, cudaEvent_t to) {
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, from, to);
  return ms;
}

struct StepTimes {
  std::vector<double> step_ms;     // start_n -> end_n (events)
  double gap_ms = 0.0;             // sum of end_n -> start_n+1
  double wall_ms = 0.0;            // the whole loop on the host, per step
  std::vector<double> gpu_ms;      // the gated steps' (GatedDecode)
  double lookahead_wall_ms = 0.0;  // TimeLookahead's, 0 when not run
};

// `steps` decode steps from position `first`, each between two events.
absl::Status TimeDecode(Run& run, Batch& b, int first, int steps,
                        StepTimes* t) {
  auto stream = static_cast<cudaStream_t>(run.model->stream());
  Events events;
  std::vector<cudaEvent_t> start(steps), end(steps);
  for (int i = 0; i < steps; ++i) {
    BRAID_ASSIGN_OR_RETURN(start[i], events.New());
    BRAID_ASSIGN_OR_RETURN(end[i], events.New());
  }
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    testing::SetDecodePosition(run.layout, first + i, b);
    cudaEventRecord(start[i], stream);
    BRAID_RETURN_IF_ERROR(run.Step(b));
    cudaEventRecord(end[i], stream);
  }
  t->wall_ms = SecondsSince(t0) * 1e3 / steps;
  BRAID_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(end[steps - 1]));
  for (int i = 0; i < steps; ++i) {
    t->step_ms.push_back(ElapsedMs(start[i], end[i]));
    if (i + 1 < steps) t->gap_ms += ElapsedMs(end[i], start[i + 1]);
  }
  return absl::OkStatus();
}

// The GPU's own time of a step, the host's preparation taken out: a host
// function holds the stream until `delay_ms` after Forward was called (by
// when Forward has queued all its work: the delay exceeds a whole step's
// wall time), so the step's work then runs back to back from an event
// recorded behind the gate to one recorded when Forward returns. Only
// after the warm-up (graph captures never meet the gate).
absl::Status GatedDecode(Run& run, Batch& b, int first, int steps,
                         double delay_ms, StepTimes* t) {
  auto stream = static_cast<cudaStream_t>(run.model->stream());
  Events events;
  for (int i = 0; i < steps; ++i) {
    testing::SetDecodePosition(run.layout, first + i, b);
    BRAID_ASSIGN_OR_RETURN(cudaEvent_t start, events.New());
    BRAID_ASSIGN_OR_RETURN(cudaEvent_t end, events.New());
    std::atomic<bool> open{false};
    BRAID_CUDA_RETURN_IF_ERROR(cudaLaunchHostFunc(
        stream,
        [](void* p) {
          auto* gate = static_cast<std::atomic<bool>*>(p);
          while (!gate->load(std::memory_order_acquire)) {
          }
        },
        &open));
    cudaEventRecord(start, stream);
    std::thread opener([&] {
      std::this_thread::sleep_for(
          std::chrono::duration<double, std::milli>(delay_ms));
      open.store(true, std::memory_order_release);
    });
    const absl::Status st = run.Step(b);
    opener.join();
    // The gate's function has read `open` once this event completes.
    cudaEventRecord(end, stream);
    BRAID_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(end));
    BRAID_RETURN_IF_ERROR(st);
    t->gpu_ms.push_back(ElapsedMs(start, end));
  }
  return absl::OkStatus();
}

struct DecodeFlags {
  std::vector<int> batches;
  int context, steps, warmup, gated, max_tokens, top_k;
  bool lookahead = false;  // also time greedy steps with SetLookahead
  // Positions the decode steps write from `context` on.
  int positions() const {
    return warmup + steps + gated + (lookahead ? steps : 0);
  }
};

// `steps` greedy steps from position `first` as the engine runs them: each
// step's tokens the top-1 of the one before, the next step told to the
// model first (SetLookahead), so the model enqueues it before the host
// reads this one's tokens. Returns the host's wall ms per step.
absl::StatusOr<double> TimeLookahead(Run& run, Batch& b, int first, int steps) {
  const TopRequest req{1, false};
  Batch ahead = b;
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    std::vector<int32_t> tokens = b.tokens;
    testing::SetDecodePosition(run.layout, first + i, b);
    if (i > 0) b.tokens = tokens;  // the top-1 ids of the step before
    testing::SetDecodePosition(run.layout, first + i + 1, ahead);
    for (size_t j = 0; j < ahead.tokens.size(); ++j) {
      ahead.tokens[j] = AheadToken(static_cast<int>(j));
    }
    run.model->SetLookahead(&ahead);
    BRAID_RETURN_IF_ERROR(run.model->ForwardTop(b, *run.kv, req, &run.top));
    for (size_t j = 0; j < b.tokens.size(); ++j) b.tokens[j] = run.top.ids[j];
  }
  return SecondsSince(t0) * 1e3 / steps;
}

// Prefill, the untimed steps (the last position first), the timed ones,
// then the gated ones, for `seqs` sequences.
absl::StatusOr<StepTimes> DecodeAt(Run& run, int seqs, const DecodeFlags& f,
                                   double* prefill_s) {
  BRAID_ASSIGN_OR_RETURN(*prefill_s,
                         Prefill(run, seqs, f.context, f.max_tokens));
  Batch b = testing::DecodeBatch(seqs);
  testing::SetDecodePosition(run.layout, f.context + f.positions() - 1, b);
  BRAID_RETURN_IF_ERROR(run.Step(b));
  for (int i = 0; i < f.warmup; ++i) {
    testing::SetDecodePosition(run.layout, f.context + i, b);
    BRAID_RETURN_IF_ERROR(run.Step(b));
  }
  StepTimes t;
  const int first = f.context + f.warmup;
  BRAID_RETURN_IF_ERROR(TimeDecode(run, b, first, f.steps, &t));
  const double delay_ms = 1.0 + 2.0 * Quantile(t.step_ms, 0.9);
  BRAID_RETURN_IF_ERROR(
      GatedDecode(run, b, first + f.steps, f.gated, delay_ms, &t));
  if (f.lookahead) {
    BRAID_ASSIGN_OR_RETURN(
        t.lookahead_wall_ms,
        TimeLookahead(run, b, first + f.steps + f.gated, f.steps));
  }
  return t;
}

// One batch size's line and JSON object.
void ReportDecode(const DecodeFlags& f, const Setting& setting, int seqs,
                  const StepTimes& t, double prefill_s, double hbm_ms,
                  double kv_ms, double* b1_ms, Report& report) {
  const double median = Quantile(t.step_ms, 0.5);
  const double p90 = Quantile(t.step_ms, 0.9);
  double sum = 0.0;
  for (double ms : t.step_ms) sum += ms;
  if (seqs == 1) *b1_ms = median;
  const double ratio = *b1_ms > 0.0 ? median / *b1_ms : 0.0;
  const double idle = sum > 0.0 ? 100.0 * t.gap_ms / sum : 0.0;
  const double gpu = t.gpu_ms.empty() ? 0.0 : Quantile(t.gpu_ms, 0.5);
  const double in_step = gpu > 0.0 ? 100.0 * (1.0 - gpu / median) : 0.0;
  const double prefill_tps = seqs * double(f.context) / prefill_s;
  report.Line(absl::StrFormat(
      "%6d %9.3f %8.3f %8.3f %6.2f %6.2f %8.3f %8.1f %10.0f %6.1f %8.1f", seqs,
      median, p90, t.wall_ms, ratio, idle, gpu, in_step, prefill_tps,
      100.0 * hbm_ms / median, 100.0 * (hbm_ms + kv_ms) / median));
  report.Json(
      {Field("bench", std::string("decode")), setting.Fields(),
       Field("batch", double(seqs)), Field("context", double(f.context)),
       Field("steps", double(f.steps)), Field("median_ms", median),
       Field("p90_ms", p90), Field("wall_ms_per_step", t.wall_ms),
       Field("ratio_to_b1", ratio), Field("idle_pct", idle),
       Field("gpu_ms", gpu), Field("in_step_idle_pct", in_step),
       Field("hbm_bound_ms", hbm_ms), Field("hbm_pct", 100.0 * hbm_ms / median),
       Field("hbm_kv_bound_ms", hbm_ms + kv_ms),
       Field("prefill_tokens_per_s", prefill_tps)});
  if (t.lookahead_wall_ms > 0.0) {
    // The device's own step time against the host's time per step: what
    // the device waited for the host between lookahead steps.
    const double idle_la =
        gpu > 0.0 ? 100.0 * (1.0 - gpu / t.lookahead_wall_ms) : 0.0;
    report.Line(absl::StrFormat(
        "%6d lookahead: %.3f ms/step on the host, GPU idle %.1f%%", seqs,
        t.lookahead_wall_ms, idle_la));
    report.Json({Field("bench", std::string("decode_lookahead")),
                 setting.Fields(), Field("batch", double(seqs)),
                 Field("wall_ms_per_step", t.lookahead_wall_ms),
                 Field("gpu_ms", gpu), Field("idle_pct", idle_la)});
  }
}

absl::Status BenchDecode(CudaModel& model, const DecodeFlags& f,
                         const Setting& setting, Report& report) {
  const int max_batch = *std::max_element(f.batches.begin(), f.batches.end());
  BRAID_ASSIGN_OR_RETURN(
      Run run, NewRun(model, max_batch, f.context + f.positions(), f.top_k));
  const double hbm_ms = model.WeightBytes() / kHbmBytesPerSecond * 1e3;
  const double kv_token_bytes =
      double(model.KvBlockBytes(kBlockSize)) / kBlockSize;
  report.Line(absl::StrFormat(
      "decode, %s, context %d: HBM bound %.3f ms/step (weights)\n"
      "%6s %9s %8s %8s %6s %6s %8s %8s %10s %6s %8s",
      setting.Name(), f.context, hbm_ms, "batch", "median_ms", "p90_ms",
      "wall_ms", "x_b1", "idle%", "gpu_ms", "in_step%", "prefill/s", "hbm%",
      "hbm+kv%"));
  double b1_ms = 0.0;
  for (int seqs : f.batches) {
    double prefill_s = 0.0;
    BRAID_ASSIGN_OR_RETURN(StepTimes t, DecodeAt(run, seqs, f, &prefill_s));
    // Every sequence's K/V read once, at the timed steps' mean context.
    const double kv_ms = seqs * (f.context + f.warmup + f.steps / 2.0) *
                         kv_token_bytes / kHbmBytesPerSecond * 1e3;
    ReportDecode(f, setting, seqs, t, prefill_s, hbm_ms, kv_ms, &b1_ms, report);
  }
  if (b1_ms > 0.0) {
    report.Line(absl::StrFormat("batch 1 reaches %.1f%% of the HBM bound",
                                100.0 * hbm_ms / b1_ms));
  }
  return absl::OkStatus();
}

struct ThroughputFlags {
  int seqs, prompt, gen, max_tokens, top_k;
  bool lookahead = false;  // greedy steps with SetLookahead (TimeLookahead)
};

absl::Status BenchThroughput(CudaModel& model, const ThroughputFlags& f,
                             const Setting& setting, Report& report) {
  if (f.seqs > f.max_tokens) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--seqs %d exceeds --max_tokens %d (one decode step)",
                        f.seqs, f.max_tokens));
  }
  BRAID_ASSIGN_OR_RETURN(Run run,
                         NewRun(model, f.seqs, f.prompt + f.gen, f.top_k));
  BRAID_ASSIGN_OR_RETURN(const double prefill_s,
                         Prefill(run, f.seqs, f.prompt, f.max_tokens));
  Batch b = testing::DecodeBatch(f.seqs);
  const Clock::time_point t0 = Clock::now();
  if (f.lookahead) {
    BRAID_RETURN_IF_ERROR(TimeLookahead(run, b, f.prompt, f.gen).status());
  } else {
    for (int i = 0; i < f.gen; ++i) {
      testing::SetDecodePosition(run.layout, f.prompt + i, b);
      BRAID_RETURN_IF_ERROR(run.Step(b));
    }
  }
  const double decode_s = SecondsSince(t0);
  const double out_tokens = double(f.seqs) * f.gen;
  report.Line(absl::StrFormat(
      "throughput, %s: %d sequences x (%d prompt + %d output): "
      "prefill %.2f s (%.0f tokens/s), decode %.2f s (%.3f ms/step): "
      "%.0f output tokens/s (%.0f with the prefill)",
      setting.Name(), f.seqs, f.prompt, f.gen, prefill_s,
      f.seqs * double(f.prompt) / prefill_s, decode_s, decode_s * 1e3 / f.gen,
      out_tokens / decode_s, out_tokens / (prefill_s + decode_s)));
  report.Json({Field("bench", std::string("throughput")), setting.Fields(),
               Field("seqs", double(f.seqs)), Field("prompt", double(f.prompt)),
               Field("gen", double(f.gen)), Field("prefill_s", prefill_s),
               Field("prefill_tokens_per_s", f.seqs * f.prompt / prefill_s),
               Field("decode_s", decode_s),
               Field("output_tokens_per_s", out_tokens / decode_s),
               Field("output_tokens_per_s_with_prefill",
                     out_tokens / (prefill_s + decode_s))});
  return absl::OkStatus();
}

absl::StatusOr<std::string> MakeImage(const std::string& shape,
                                      const std::string& matrix_type,
                                      Report& report) {
  BRAID_ASSIGN_OR_RETURN(testing::RandomLlamaSpec spec,
                         testing::NamedLlamaShape(shape));
  BRAID_ASSIGN_OR_RETURN(spec.matrix_type,
                         testing::GgmlTypeFromName(matrix_type));
  spec.fast_weights = true;
  const Clock::time_point t0 = Clock::now();
  std::string image = testing::MakeRandomLlamaGguf(spec);
  report.Line(absl::StrFormat("%s: random %s weights, %.2f GB file in %.1f s",
                              shape, matrix_type, image.size() / 1e9,
                              SecondsSince(t0)));
  return image;
}

// The device's name, as the driver says it.
std::string DeviceName(int device) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "unknown";
  return prop.name;
}

// "both", "on" or "off" as the settings to measure.
absl::StatusOr<std::vector<bool>> OnOff(const char* flag,
                                        const std::string& v) {
  if (v == "both") return std::vector<bool>{true, false};
  if (v == "on" || v == "off") return std::vector<bool>{v == "on"};
  return absl::InvalidArgumentError(absl::StrCat(flag, ": both, on or off"));
}

struct Flags {
  std::string shape, matrix_type;
  std::vector<Setting> settings;  // a load of the model each
  bool decode = true, throughput = false;
  DecodeFlags d;
  ThroughputFlags t;
};

absl::StatusOr<Flags> ReadFlags() {
  Flags f;
  f.shape = absl::GetFlag(FLAGS_shape);
  f.matrix_type = absl::GetFlag(FLAGS_matrix_type);
  BRAID_ASSIGN_OR_RETURN(const std::vector<bool> graphs,
                         OnOff("--graphs", absl::GetFlag(FLAGS_graphs)));
  BRAID_ASSIGN_OR_RETURN(const std::vector<bool> pdl,
                         OnOff("--pdl", absl::GetFlag(FLAGS_pdl)));
  for (bool g : graphs) {
    for (bool p : pdl) f.settings.push_back({g, p});
  }
  f.decode = absl::GetFlag(FLAGS_decode);
  f.throughput = absl::GetFlag(FLAGS_throughput);
  const int max_tokens = absl::GetFlag(FLAGS_max_tokens);
  f.d = {{},
         absl::GetFlag(FLAGS_context),
         absl::GetFlag(FLAGS_steps),
         absl::GetFlag(FLAGS_warmup),
         absl::GetFlag(FLAGS_gated_steps),
         max_tokens,
         absl::GetFlag(FLAGS_top_k),
         absl::GetFlag(FLAGS_lookahead) && absl::GetFlag(FLAGS_top_k) > 0};
  for (absl::string_view s :
       absl::StrSplit(absl::GetFlag(FLAGS_batches), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < 1 || n > max_tokens) {
      return absl::InvalidArgumentError(
          absl::StrCat("--batches: ", s, " (1 .. --max_tokens)"));
    }
    f.d.batches.push_back(n);
  }
  if (f.d.steps < 1 || f.d.context < 1 || f.d.warmup < 0 || f.d.gated < 0) {
    return absl::InvalidArgumentError(
        "--steps, --context >= 1, --warmup, --gated_steps >= 0");
  }
  f.t = {absl::GetFlag(FLAGS_seqs),
         absl::GetFlag(FLAGS_prompt),
         absl::GetFlag(FLAGS_gen),
         max_tokens,
         f.d.top_k,
         f.d.lookahead};
  if (f.d.top_k < 0 || f.d.top_k > kMaxTopLogits) {
    return absl::InvalidArgumentError("--top_k: 0 .. kMaxTopLogits");
  }
  if (f.t.seqs < 1 || f.t.prompt < 1 || f.t.gen < 1) {
    return absl::InvalidArgumentError("--seqs, --prompt, --gen >= 1");
  }
  return f;
}

// Loads the model as the setting says and runs the measurements.
absl::Status BenchModel(std::unique_ptr<GgufFile> file, const Flags& f,
                        const Setting& setting, Report& report) {
  CudaLoadOptions opts;
  opts.max_tokens = f.d.max_tokens;
  opts.cuda_graphs = setting.graphs;
  opts.dependent_launch = setting.pdl;
  const Clock::time_point t0 = Clock::now();
  BRAID_ASSIGN_OR_RETURN(auto model, CudaModel::Load(std::move(file), opts));
  const double load_s = SecondsSince(t0);
  const std::string device = DeviceName(opts.device);
  report.Line(absl::StrFormat(
      "%s on %s, %s: loaded in %.1f s, %.2f GB of BF16 weights", f.shape,
      device, setting.Name(), load_s, model->WeightBytes() / 1e9));
  report.set_common(absl::StrJoin(
      {Field("shape", f.shape), Field("device", device),
       Field("matrix_type", f.matrix_type), Field("top_k", double(f.d.top_k)),
       Field("weight_bytes", model->WeightBytes())},
      ", "));
  report.Json({Field("bench", std::string("load")), setting.Fields(),
               Field("load_s", load_s)});
  if (f.decode)
    BRAID_RETURN_IF_ERROR(BenchDecode(*model, f.d, setting, report));
  if (f.throughput) {
    BRAID_RETURN_IF_ERROR(BenchThroughput(*model, f.t, setting, report));
  }
  return absl::OkStatus();
}

// One file image, one load of it per setting.
absl::Status Main() {
  BRAID_ASSIGN_OR_RETURN(const Flags f, ReadFlags());
  Report report(absl::GetFlag(FLAGS_json));
  BRAID_ASSIGN_OR_RETURN(std::string image,
                         MakeImage(f.shape, f.matrix_type, report));
  for (size_t i = 0; i < f.settings.size(); ++i) {
    const bool last = i + 1 == f.settings.size();
    BRAID_ASSIGN_OR_RETURN(
        auto file, GgufFile::FromBytes(last ? std::move(image) : image));
    BRAID_RETURN_IF_ERROR(
        BenchModel(std::move(file), f, f.settings[i], report));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace braid::model

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "the CUDA executor's decode step times, GPU idle and throughput on a "
      "random-weight model of a real model's shape");
  absl::ParseCommandLine(argc, argv);
  const absl::Status status = braid::model::Main();
  if (!status.ok()) {
    std::fprintf(stderr, "cuda_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
