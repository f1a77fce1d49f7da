// Benchmark: load a GGUF Llama model, prefill N tokens, decode M greedily.
// Prints load seconds, prefill and decode tokens/second, and peak RSS.
//   bazel run -c opt //model:llama_bench -- --model=PATH --prefill=128
//   --decode=64
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "model/gguf.h"
#include "model/llama.h"

ABSL_FLAG(std::string, model,
          "/root/.cache/braid/models/SmolLM2-135M-Instruct.Q4_1.gguf",
          "GGUF model path");
ABSL_FLAG(int, prefill, 128, "prompt tokens to prefill");
ABSL_FLAG(int, decode, 64, "tokens to decode greedily");
ABSL_FLAG(int, threads, 0, "threads (0 = hardware concurrency)");

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using braid::model::GgufFile;
  using braid::model::LlamaModel;
  const auto t0 = std::chrono::steady_clock::now();
  auto file = GgufFile::Open(absl::GetFlag(FLAGS_model));
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.status().ToString().c_str());
    return 1;
  }
  auto model =
      LlamaModel::Load(*std::move(file),
                       braid::model::LoadOptions{absl::GetFlag(FLAGS_threads)});
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  const double load_s = Seconds(t0);
  const int n_prefill = std::max(1, absl::GetFlag(FLAGS_prefill));
  const int n_decode = absl::GetFlag(FLAGS_decode);
  const int n_vocab = (*model)->config().n_vocab;
  std::vector<int32_t> prompt(n_prefill);
  for (int i = 0; i < n_prefill; ++i) prompt[i] = (i * 7919 + 13) % n_vocab;
  braid::model::KvCache kv = (*model)->NewKvCache(n_prefill + n_decode + 1);
  std::vector<float> logits;

  const auto t1 = std::chrono::steady_clock::now();
  if (auto s = (*model)->Forward(prompt, kv, false, &logits); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  const double prefill_s = Seconds(t1);

  const auto t2 = std::chrono::steady_clock::now();
  for (int i = 0; i < n_decode; ++i) {
    const int32_t next = static_cast<int32_t>(
        std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (auto s = (*model)->Forward({&next, 1}, kv, false, &logits); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  const double decode_s = Seconds(t2);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  std::printf("model: %s\n", absl::GetFlag(FLAGS_model).c_str());
  std::printf("load_seconds: %.3f\n", load_s);
  std::printf("prefill: %d tokens in %.3f s = %.1f tok/s\n", n_prefill,
              prefill_s, n_prefill / prefill_s);
  std::printf("decode: %d tokens in %.3f s = %.1f tok/s\n", n_decode, decode_s,
              n_decode > 0 ? n_decode / decode_s : 0.0);
  std::printf("peak_rss_mib: %.1f\n", ru.ru_maxrss / 1024.0);
  return 0;
}
