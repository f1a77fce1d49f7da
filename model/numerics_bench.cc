// How close braid's two matrix arithmetics are to exact math, beside
// llama.cpp's: for the golden prompts (tests/golden/testdata), teacher-forced
// on llama.cpp's greedy tokens, the logits of
//   - braid, default arithmetic (ggml's rounding, bit-identical to llama.cpp),
//   - braid with LoadOptions::packed_matmul (exact integer block sums),
//   - llama.cpp (the fixture, stored as fp16),
// each against a double-precision forward pass over the dequantized weights
// (model/testing/masked_reference: no activation quantization, no fp16 K/V),
// per position: cosine similarity and whether the top token agrees.
//   bazel run -c opt //model:numerics_bench -- --model=PATH [--prompts=12]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/fp16.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/testing/masked_reference.h"
#include "model/testing/sequence_runner.h"

ABSL_FLAG(std::string, model, "", "the GGUF of the fixtures (SmolLM2)");
ABSL_FLAG(std::string, fixtures, "tests/golden/testdata",
          "directory of generate_golden.tsv and generate_logits.f16");
ABSL_FLAG(int, prompts, 12, "golden prompts to use");
ABSL_FLAG(int, threads, 2, "threads for braid's forward passes");

namespace {

using braid::model::GgufFile;
using braid::model::LlamaModel;
using braid::model::LoadOptions;
constexpr int kNumTokens = 32;

struct Case {
  std::vector<int32_t> prompt, greedy;
};

std::vector<int32_t> Ids(absl::string_view s) {
  std::vector<int32_t> out;
  for (absl::string_view part : absl::StrSplit(s, ' ', absl::SkipEmpty())) {
    int32_t id = 0;
    if (absl::SimpleAtoi(part, &id)) out.push_back(id);
  }
  return out;
}

void Die(const std::string& what) {
  std::fprintf(stderr, "numerics_bench: %s\n", what.c_str());
  std::exit(1);
}

std::unique_ptr<LlamaModel> Load(bool packed) {
  auto file = GgufFile::Open(absl::GetFlag(FLAGS_model));
  if (!file.ok()) Die(std::string(file.status().message()));
  LoadOptions opts;
  opts.num_threads = absl::GetFlag(FLAGS_threads);
  opts.packed_matmul = packed;
  auto model = LlamaModel::Load(*std::move(file), opts);
  if (!model.ok()) Die(std::string(model.status().message()));
  return *std::move(model);
}

// braid's logits at the kNumTokens positions, evaluated as the fixture was
// made: the prompt in one call, then one token per call.
std::vector<std::vector<float>> Braid(LlamaModel& model, const Case& c) {
  braid::model::testing::SequenceRunner run(
      model, static_cast<int>(c.prompt.size()) + kNumTokens);
  std::vector<std::vector<float>> out;
  std::vector<float> logits;
  for (int i = 0; i < kNumTokens; ++i) {
    const absl::Status st =
        i == 0 ? run.Forward(c.prompt, false, &logits)
               : run.Forward({c.greedy[i - 1]}, false, &logits);
    if (!st.ok()) Die(std::string(st.message()));
    out.push_back(logits);
  }
  return out;
}

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0, a2 = 0, b2 = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += double{a[i]} * b[i];
    a2 += double{a[i]} * a[i];
    b2 += double{b[i]} * b[i];
  }
  return dot / std::sqrt(a2 * b2);
}

size_t Top(const std::vector<float>& v) {
  return std::max_element(v.begin(), v.end()) - v.begin();
}

struct Tally {
  std::vector<double> cos;
  int top_same = 0;
  void Add(const std::vector<float>& got, const std::vector<float>& ref) {
    cos.push_back(Cosine(got, ref));
    top_same += Top(got) == Top(ref);
  }
  void Print(const char* name) {
    std::vector<double> s = cos;
    std::sort(s.begin(), s.end());
    double mean = 0;
    for (double v : s) mean += 1 - v;
    std::printf(
        "%-28s worst %.6f  p10 %.6f  median %.6f  mean(1-cos) %.2e  "
        "top-1 as exact %d/%zu\n",
        name, s.front(), s[s.size() / 10], s[s.size() / 2], mean / s.size(),
        top_same, s.size());
  }
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_fixtures);
  std::ifstream tsv(dir + "/generate_golden.tsv");
  if (!tsv) Die("missing " + dir + "/generate_golden.tsv");
  std::vector<Case> cases;
  std::string line;
  while (std::getline(tsv, line) &&
         static_cast<int>(cases.size()) < absl::GetFlag(FLAGS_prompts)) {
    std::vector<absl::string_view> cols = absl::StrSplit(line, '\t');
    if (cols.size() != 3) Die("bad fixture line");
    cases.push_back({Ids(cols[1]), Ids(cols[2])});
  }
  auto ggml = Load(false);
  auto packed = Load(true);
  const int n_vocab = ggml->config().n_vocab;
  std::ifstream bin(dir + "/generate_logits.f16", std::ios::binary);
  if (!bin) Die("missing " + dir + "/generate_logits.f16");
  Tally t_ggml, t_packed, t_llama, t_ggml_llama, t_packed_llama;
  std::vector<uint16_t> half(n_vocab);
  for (size_t p = 0; p < cases.size(); ++p) {
    const Case& c = cases[p];
    std::vector<braid::model::testing::MaskedEntry> entries;
    std::vector<int32_t> all = c.prompt;
    all.insert(all.end(), c.greedy.begin(), c.greedy.end() - 1);
    for (size_t i = 0; i < all.size(); ++i) {
      entries.push_back({all[i], 0, static_cast<int32_t>(i)});
    }
    const auto exact =
        braid::model::testing::MaskedFullForward(*ggml, entries, {{0}});
    const auto a = Braid(*ggml, c);
    const auto b = Braid(*packed, c);
    for (int i = 0; i < kNumTokens; ++i) {
      const std::vector<float>& ref = exact[c.prompt.size() - 1 + i];
      bin.read(reinterpret_cast<char*>(half.data()), n_vocab * 2);
      std::vector<float> llama(n_vocab);
      for (int v = 0; v < n_vocab; ++v) {
        llama[v] = braid::kernels::cpu::Fp16ToFp32(half[v]);
      }
      t_ggml.Add(a[i], ref);
      t_packed.Add(b[i], ref);
      t_llama.Add(llama, ref);
      t_ggml_llama.Add(a[i], llama);
      t_packed_llama.Add(b[i], llama);
    }
    std::fprintf(stderr, "prompt %zu done\n", p);
  }
  std::printf(
      "%zu prompts x %d positions, logits cosine against exact math "
      "(double, dequantized weights):\n",
      cases.size(), kNumTokens);
  t_ggml.Print("braid default (ggml)");
  t_packed.Print("braid --packed_matmul");
  t_llama.Print("llama.cpp (fp16 fixture)");
  std::printf("against llama.cpp's fixture:\n");
  t_ggml_llama.Print("braid default (ggml)");
  t_packed_llama.Print("braid --packed_matmul");
  return 0;
}
