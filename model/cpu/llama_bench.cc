// Benchmark driver for the CPU executor (tools/bench/cpu_bench.py runs it
// beside llama.cpp and prints ratios). Through LlamaModel::Forward on a paged
// pool of --kv_tokens entries, it measures:
//   prefill:  one sequence of --prefill tokens in one call (tok/s);
//   decode1:  one sequence, --decode greedy tokens after a short prompt;
//   decodeN:  --seqs sequences decoding together, one batch per step
//             (aggregate tok/s);
//   mixed:    --seqs sequences decoding, each step alone and with a
//             --mixed_chunk-token prompt chunk of another sequence whose
//             context already holds --mixed_ctx entries (the stream-isolation
//             case of the serving benchmark): median step times and ratio;
//   read_gbps: a streaming read over a buffer much larger than the caches
//             with the same thread count (the machine's read bandwidth);
//   weight_bytes / kv bytes: what one decode step reads;
//   handoff_ns: the round trip of a cache line between two threads on CPUs
//             0 and 1 (pinned), ~100 ns on one core complex, ~400 on two:
//             a VM's vCPUs can move between the two placements, which moves
//             every ratio of batched to one-stream decode (the batched step
//             is compute-bound, its ~150 parallel sections hand data across).
// Each phase runs --reps times; the best run is reported. Prints one JSON
// object on stdout; with --sections also (stderr) the decode phases' time a
// step in each part of the forward pass, averaged over every rep; with
// --interleave also one stream and --seqs sequences decoding with their
// steps alternating (interleaved_decode1_tps, interleaved_decodeN_tps: over
// every rep), their ratio free of the drift between two phases' minutes.
//   bazel run //model:llama_bench -- --model=PATH --threads=2
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/thread_pool.h"
#include "model/batch.h"
#include "model/cpu/llama.h"
#include "model/cpu/paged_kv.h"
#include "model/gguf.h"

ABSL_FLAG(std::string, model,
          "/root/.cache/braid/models/SmolLM2-135M-Instruct.Q4_1.gguf",
          "GGUF model path");
ABSL_FLAG(int, prefill, 512, "prompt tokens for the prefill phase");
ABSL_FLAG(int, prompt, 27, "prompt tokens before the decode phases");
ABSL_FLAG(int, decode, 128, "tokens decoded per sequence");
ABSL_FLAG(int, seqs, 8, "sequences in the batched decode phase");
ABSL_FLAG(int, threads, 0, "threads (0 = hardware concurrency)");
ABSL_FLAG(int, kv_tokens, 4096, "KV pool capacity in tokens");
ABSL_FLAG(int, block_size, 16, "KV block size");
ABSL_FLAG(int, spin_us, 200, "thread pool spin before sleeping");
ABSL_FLAG(bool, packed_matmul, false,
          "matrix products on repacked weights (LoadOptions::packed_matmul)");
ABSL_FLAG(int, reps, 3, "repetitions per phase (best is reported)");
ABSL_FLAG(bool, avx2, false,
          "run the AVX2 kernels where the CPU has AVX-512 (as on a CPU "
          "without it)");
ABSL_FLAG(bool, vnni, true,
          "with --avx2: use AVX-VNNI where the CPU has it (--novnni: as on "
          "an AVX2 CPU without it)");
ABSL_FLAG(int, mixed_chunk, 0,
          "mixed phase: prompt tokens added to each --seqs decode step "
          "(0 skips the phase)");
ABSL_FLAG(int, mixed_steps, 0,
          "mixed phase: steps of each kind (0: 20 x --reps)");
ABSL_FLAG(int, mixed_ctx, 1000,
          "mixed phase: context already cached before the prompt chunk");
ABSL_FLAG(bool, interleave, false,
          "also run one stream and --seqs sequences decoding with their steps "
          "alternating (their own contexts), so both step times come from the "
          "same minutes of a machine whose speed drifts: interleaved_* fields");
ABSL_FLAG(bool, probe, false,
          "print only {\"handoff_ns\": ..., \"read_gbps\": ...} (no model; "
          "the read bandwidth with --threads threads) and exit");
ABSL_FLAG(bool, sections, false,
          "print (stderr) the decode phases' ms a step in each part of the "
          "forward pass (LlamaModel::SetSectionProfile)");

namespace {

using braid::model::Batch;
using braid::model::BatchSequence;
using braid::model::EntryMeta;
using braid::model::LlamaModel;
using braid::model::PagedKvPool;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double RssMib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  }
  return 0;
}

void Check(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    std::exit(1);
  }
}

int32_t Argmax(const float* v, int n) {
  return static_cast<int32_t>(braid::kernels::cpu::ArgMax(v, n));
}

// Sequence i owns blocks [i * per_seq, (i + 1) * per_seq).
struct Runner {
  LlamaModel& model;
  PagedKvPool& pool;
  int per_seq;
  std::vector<float> logits;

  std::vector<int32_t> Table(int seq) const {
    std::vector<int32_t> t(per_seq);
    for (int b = 0; b < per_seq; ++b) t[b] = seq * per_seq + b;
    return t;
  }
  // Prefills `prompt` for sequences 0..n_seqs-1 (one call each); returns the
  // first generated token of each.
  std::vector<int32_t> Prefill(const std::vector<int32_t>& prompt, int n_seqs) {
    std::vector<int32_t> next(n_seqs);
    const int n_vocab = model.config().n_vocab;
    for (int s = 0; s < n_seqs; ++s) {
      Batch b;
      b.tokens = prompt;
      for (size_t t = 0; t < prompt.size(); ++t) {
        b.meta.push_back(EntryMeta{0, static_cast<int32_t>(t)});
      }
      BatchSequence seq;
      seq.num_tokens = static_cast<int>(prompt.size());
      seq.block_table = Table(s);
      b.sequences.push_back(std::move(seq));
      Check(model.Forward(b, pool, &logits));
      next[s] = Argmax(logits.data(), n_vocab);
    }
    return next;
  }
  // A decode batch of sequences first..first+count-1, one token each (their
  // `tokens`) after n_cached entries.
  Batch DecodeBatch(int first, int count, std::vector<int32_t> tokens,
                    int n_cached) const {
    Batch b;
    b.tokens = std::move(tokens);
    for (int s = 0; s < count; ++s) {
      b.meta.push_back(EntryMeta{0, n_cached});
      BatchSequence seq;
      seq.first_token = s;
      seq.num_tokens = 1;
      seq.num_cached = n_cached;
      seq.block_table = Table(first + s);
      b.sequences.push_back(std::move(seq));
    }
    return b;
  }
  // One greedy step of a decode batch, updated in place for the next.
  void Step(Batch& b) {
    const int n_vocab = model.config().n_vocab;
    Check(model.Forward(b, pool, &logits));
    for (size_t s = 0; s < b.tokens.size(); ++s) {
      b.tokens[s] = Argmax(logits.data() + int64_t(s) * n_vocab, n_vocab);
      ++b.meta[s].y;
      ++b.sequences[s].num_cached;
    }
  }
  // Decodes n_steps greedy tokens for n_seqs sequences in one batch per step;
  // returns seconds.
  double Decode(int n_seqs, int n_cached, std::vector<int32_t> next,
                int n_steps) {
    Batch b = DecodeBatch(0, n_seqs, std::move(next), n_cached);
    const auto t0 = Clock::now();
    for (int step = 0; step < n_steps; ++step) Step(b);
    return Seconds(t0);
  }
  // One stream (sequence n_seqs, its next token `one`) and n_seqs sequences
  // (0..n_seqs-1, `next`) decoding n_steps greedy tokens each, their steps
  // alternating; returns the summed seconds of each.
  std::pair<double, double> Interleaved(int n_seqs, int n_cached, int32_t one,
                                        std::vector<int32_t> next,
                                        int n_steps) {
    Batch single = DecodeBatch(n_seqs, 1, {one}, n_cached);
    Batch many = DecodeBatch(0, n_seqs, std::move(next), n_cached);
    double single_s = 0, many_s = 0;
    for (int i = 0; i < n_steps; ++i) {
      auto t = Clock::now();
      Step(single);
      single_s += Seconds(t);
      t = Clock::now();
      Step(many);
      many_s += Seconds(t);
    }
    return {single_s, many_s};
  }
  // Median step seconds of n_seqs decoding sequences, alone (first) and with
  // a chunk of `chunk` prompt tokens of sequence n_seqs at context `ctx`
  // (its entries 0..ctx-1 are prefilled first). Steps alternate. With
  // `profiles`, times the sections of the steps alone into profiles[0] and
  // of the mixed steps into profiles[1].
  std::pair<double, double> Mixed(int n_seqs, int n_cached, int chunk, int ctx,
                                  int n_steps,
                                  LlamaModel::SectionProfile* profiles) {
    std::vector<int32_t> prompt(ctx);
    for (int i = 0; i < ctx; ++i) prompt[i] = (i * 31 + 5) % 1000 + 100;
    Batch pre;
    pre.tokens = prompt;
    for (int t = 0; t < ctx; ++t) pre.meta.push_back(EntryMeta{0, t});
    BatchSequence ps;
    ps.num_tokens = ctx;
    ps.block_table = Table(n_seqs);
    pre.sequences.push_back(ps);
    Check(model.Forward(pre, pool, &logits));
    auto decode_batch = [&](bool with_chunk) {
      std::vector<int32_t> tokens(n_seqs);
      for (int s = 0; s < n_seqs; ++s) tokens[s] = 100 + s;
      Batch b = DecodeBatch(0, n_seqs, std::move(tokens), n_cached);
      if (with_chunk) {
        BatchSequence seq;
        seq.first_token = n_seqs;
        seq.num_tokens = chunk;
        seq.num_cached = ctx;
        seq.block_table = Table(n_seqs);
        seq.logits = BatchSequence::Logits::kNone;
        for (int t = 0; t < chunk; ++t) {
          b.tokens.push_back(200 + t);
          b.meta.push_back(EntryMeta{0, ctx + t});
        }
        b.sequences.push_back(std::move(seq));
      }
      return b;
    };
    const Batch alone = decode_batch(false), mixed = decode_batch(true);
    std::vector<double> a, m;
    for (int step = 0; step < n_steps; ++step) {
      if (profiles != nullptr) model.SetSectionProfile(&profiles[0]);
      auto t = Clock::now();
      Check(model.Forward(alone, pool, &logits));
      a.push_back(Seconds(t));
      if (profiles != nullptr) model.SetSectionProfile(&profiles[1]);
      t = Clock::now();
      Check(model.Forward(mixed, pool, &logits));
      m.push_back(Seconds(t));
    }
    model.SetSectionProfile(nullptr);
    std::sort(a.begin(), a.end());
    std::sort(m.begin(), m.end());
    return {a[a.size() / 2], m[m.size() / 2]};
  }
};

// Prints a section profile's milliseconds a step to stderr.
void PrintSections(const std::string& label,
                   const LlamaModel::SectionProfile& p) {
  std::fprintf(stderr, "sections, %s, ms a step:", label.c_str());
  double total = 0;
  for (int k = 0; k < LlamaModel::kNumSections; ++k) {
    const double ms = p.seconds[k] / std::max<int64_t>(1, p.steps) * 1e3;
    total += ms;
    std::fprintf(stderr, " %s %.3f",
                 LlamaModel::SectionName(static_cast<LlamaModel::Section>(k)),
                 ms);
  }
  std::fprintf(stderr, " total %.3f\n", total);
}

// Best-of-3 read bandwidth (GB/s) over a 512 MiB buffer, split across the
// pool's threads.
double ReadBandwidthGbps(braid::kernels::cpu::ThreadPool& pool) {
  const size_t n = size_t{512} << 20;
  std::vector<uint8_t> buf(n, 1);
  const int64_t chunks = pool.num_threads() * 8;
  std::vector<int64_t> sink(chunks);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    pool.ParallelFor(chunks, [&](int64_t c) {
      const auto* p =
          reinterpret_cast<const __m256i*>(buf.data() + n / chunks * c);
      __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
      for (size_t i = 0; i < n / chunks / 32; i += 2) {
        acc0 = _mm256_xor_si256(acc0, _mm256_load_si256(p + i));
        acc1 = _mm256_xor_si256(acc1, _mm256_load_si256(p + i + 1));
      }
      sink[c] = _mm256_extract_epi64(_mm256_xor_si256(acc0, acc1), 0);
    });
    best = std::max(best, n / Seconds(t0) / 1e9);
  }
  return best;
}

// handoff_ns (see the file comment); 0 with fewer than 2 CPUs.
double HandoffNs() {
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0 || !CPU_ISSET(0, &mask) ||
      !CPU_ISSET(1, &mask)) {
    return 0;
  }
  auto pin = [](int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
  };
  constexpr int kTrips = 100000;
  alignas(64) std::atomic<int> flag{0};
  std::thread other([&] {
    pin(1);
    for (int i = 0; i < kTrips; ++i) {
      while (flag.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      flag.store(2 * i + 2, std::memory_order_release);
    }
  });
  cpu_set_t before;
  pthread_getaffinity_np(pthread_self(), sizeof(before), &before);
  pin(0);
  const auto t0 = Clock::now();
  for (int i = 0; i < kTrips; ++i) {
    flag.store(2 * i + 1, std::memory_order_release);
    while (flag.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const double ns = Seconds(t0) / kTrips * 1e9;
  other.join();
  pthread_setaffinity_np(pthread_self(), sizeof(before), &before);
  return ns;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_avx2)) {
    braid::kernels::cpu::SetDisableAvx512ForTesting(true);
    braid::kernels::cpu::SetDisableVnniForTesting(!absl::GetFlag(FLAGS_vnni));
  }
  const int threads = absl::GetFlag(FLAGS_threads);
  if (absl::GetFlag(FLAGS_probe)) {
    const double handoff = HandoffNs();
    braid::kernels::cpu::ThreadPool bw_pool(threads);
    std::printf("{\"handoff_ns\": %.0f, \"read_gbps\": %.2f}\n", handoff,
                ReadBandwidthGbps(bw_pool));
    return 0;
  }
  const int reps = std::max(1, absl::GetFlag(FLAGS_reps));
  const auto t0 = Clock::now();
  auto file = braid::model::GgufFile::Open(absl::GetFlag(FLAGS_model));
  Check(file.status());
  auto loaded = LlamaModel::Load(
      *std::move(file),
      braid::model::LoadOptions{threads, absl::GetFlag(FLAGS_spin_us),
                                absl::GetFlag(FLAGS_packed_matmul)});
  Check(loaded.status());
  LlamaModel& model = **loaded;
  const double load_s = Seconds(t0);
  const auto& c = model.config();
  const int bs = absl::GetFlag(FLAGS_block_size);
  const int kv_tokens = absl::GetFlag(FLAGS_kv_tokens);
  const int n_seqs = std::max(1, absl::GetFlag(FLAGS_seqs));
  const int n_prefill = absl::GetFlag(FLAGS_prefill);
  const int n_prompt = absl::GetFlag(FLAGS_prompt);
  const int n_decode = absl::GetFlag(FLAGS_decode);
  PagedKvPool pool = model.NewPagedKvPool(bs, (kv_tokens + bs - 1) / bs);
  const int mixed_chunk = absl::GetFlag(FLAGS_mixed_chunk);
  const int mixed_ctx = absl::GetFlag(FLAGS_mixed_ctx);
  const bool interleave = absl::GetFlag(FLAGS_interleave);
  const int per_seq =
      pool.num_blocks() / (n_seqs + (mixed_chunk > 0 || interleave ? 1 : 0));
  if (per_seq * bs <
      std::max({n_prefill, n_prompt + n_decode,
                mixed_chunk > 0 ? mixed_ctx + mixed_chunk : 0})) {
    std::fprintf(stderr, "--kv_tokens too small for --seqs\n");
    return 1;
  }
  Runner run{model, pool, per_seq, {}};
  std::vector<int32_t> prefill(n_prefill), prompt(n_prompt);
  for (int i = 0; i < n_prefill; ++i) prefill[i] = (i * 7919 + 13) % c.n_vocab;
  for (int i = 0; i < n_prompt; ++i) prompt[i] = (i * 104729 + 7) % c.n_vocab;

  double prefill_s = 1e9, decode1_s = 1e9, decoden_s = 1e9;
  const bool sections = absl::GetFlag(FLAGS_sections);
  LlamaModel::SectionProfile profiles[2];  // one stream, --seqs
  for (int rep = 0; rep < reps; ++rep) {
    auto t = Clock::now();
    run.Prefill(prefill, 1);
    prefill_s = std::min(prefill_s, Seconds(t));
    std::vector<int32_t> next = run.Prefill(prompt, n_seqs);
    if (sections) model.SetSectionProfile(&profiles[0]);
    decode1_s =
        std::min(decode1_s, run.Decode(1, n_prompt, {next[0]}, n_decode));
    if (sections) model.SetSectionProfile(&profiles[1]);
    decoden_s =
        std::min(decoden_s, run.Decode(n_seqs, n_prompt, next, n_decode));
    model.SetSectionProfile(nullptr);
  }
  for (int i = 0; sections && i < 2; ++i) {
    PrintSections(absl::StrFormat("%d sequence(s)", i == 0 ? 1 : n_seqs),
                  profiles[i]);
  }
  // Summed over the reps: one stream's and n_seqs sequences' seconds.
  double inter_single_s = 0, inter_many_s = 0;
  for (int rep = 0; interleave && rep < reps; ++rep) {
    const std::vector<int32_t> next = run.Prefill(prompt, n_seqs + 1);
    const auto [single_s, many_s] = run.Interleaved(
        n_seqs, n_prompt, next[n_seqs],
        std::vector<int32_t>(next.begin(), next.begin() + n_seqs), n_decode);
    inter_single_s += single_s;
    inter_many_s += many_s;
  }
  std::pair<double, double> mixed{0, 0};
  if (mixed_chunk > 0) {
    std::vector<int32_t> next = run.Prefill(prompt, n_seqs);
    LlamaModel::SectionProfile mixed_profiles[2];
    const int mixed_steps = absl::GetFlag(FLAGS_mixed_steps);
    mixed = run.Mixed(n_seqs, n_prompt, mixed_chunk, mixed_ctx,
                      mixed_steps > 0 ? mixed_steps : 20 * reps,
                      sections ? mixed_profiles : nullptr);
    for (int i = 0; sections && i < 2; ++i) {
      PrintSections(absl::StrFormat("%d sequence(s)%s", n_seqs,
                                    i == 0 ? "" : " with the prompt chunk"),
                    mixed_profiles[i]);
    }
  }
  const double rss = RssMib();
  // Bytes one decode step reads: every weight matrix (the embedding row is
  // negligible) plus K and V of the context, at the decode phase's mean
  // context length.
  const double weight_bytes = static_cast<double>(model.WeightBytes());
  const double mean_ctx = n_prompt + n_decode / 2.0;
  const double kv_bytes = 2.0 * c.n_layer * c.kv_dim() * 2 * mean_ctx;
  braid::kernels::cpu::ThreadPool bw_pool(threads);
  const double read_gbps = ReadBandwidthGbps(bw_pool);
  const double handoff_ns = HandoffNs();
  const double decode1_tps = n_decode / decode1_s;
  std::printf(
      "{\"isa\": \"%s\", \"threads\": %d, \"load_s\": %.4f, "
      "\"prefill_tokens\": %d, "
      "\"prefill_tps\": %.2f, \"decode_tokens\": %d, \"decode1_tps\": %.2f, "
      "\"seqs\": %d, \"decodeN_tps\": %.2f, \"rss_mib\": %.1f, "
      "\"kv_pool_mib\": %.1f, \"weight_bytes\": %.0f, "
      "\"kv_bytes_per_step\": %.0f, \"read_gbps\": %.2f, "
      "\"decode1_gbps\": %.2f, \"mixed_chunk\": %d, \"mixed_ctx\": %d, "
      "\"decode_step_ms\": %.2f, \"mixed_step_ms\": %.2f, "
      "\"mixed_ratio\": %.2f, \"interleaved_decode1_tps\": %.2f, "
      "\"interleaved_decodeN_tps\": %.2f, \"handoff_ns\": %.0f, "
      "\"data_parallel_steps\": %lld}\n",
      braid::kernels::cpu::CpuIsaName(), bw_pool.num_threads(), load_s,
      n_prefill, n_prefill / prefill_s, n_decode, decode1_tps, n_seqs,
      n_seqs * n_decode / decoden_s, rss, pool.bytes() / 1048576.0,
      weight_bytes, kv_bytes, read_gbps,
      (weight_bytes + kv_bytes) * decode1_tps / 1e9, mixed_chunk, mixed_ctx,
      mixed.first * 1e3, mixed.second * 1e3,
      mixed.first > 0 ? mixed.second / mixed.first : 0.0,
      interleave ? reps * n_decode / inter_single_s : 0.0,
      interleave ? reps * n_decode * n_seqs / inter_many_s : 0.0, handoff_ns,
      static_cast<long long>(model.data_parallel_steps()));
  return 0;
}
