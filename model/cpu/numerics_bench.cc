// How close braid's two matrix arithmetics are to exact math, beside
// llama.cpp's: for the golden prompts (tests/golden/testdata), teacher-forced
// on llama.cpp's greedy tokens, the logits of
//   - braid, default arithmetic (ggml's rounding, bit-identical to llama.cpp),
//   - braid with LoadOptions::packed_matmul (exact integer block sums),
//   - llama.cpp (the fixture, stored as fp16),
// each against a double-precision forward pass over the dequantized weights
// (model/testing/masked_reference: no activation quantization, no fp16 K/V),
// per position: cosine similarity and whether the top token agrees.
// With --text FILE it also reports the perplexity of the file's first
// --windows x --window tokens under each (braid's prompt path, one window a
// call; exact math by the same double-precision pass).
//   bazel run -c opt //model:numerics_bench -- --model=PATH [--prompts=12]
//       [--text=docs/ARCHITECTURE.md]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/fp16.h"
#include "model/cpu/llama.h"
#include "model/gguf.h"
#include "model/testing/masked_reference.h"
#include "model/testing/sequence_runner.h"
#include "model/tokenizer/gguf_loader.h"
#include "model/tokenizer/tokenizer.h"

ABSL_FLAG(std::string, model, "", "the GGUF of the fixtures (SmolLM2)");
ABSL_FLAG(std::string, fixtures, "tests/golden/testdata",
          "directory of generate_golden.tsv and generate_logits.f16");
ABSL_FLAG(int, prompts, 12, "golden prompts to use");
ABSL_FLAG(int, threads, 2, "threads for braid's forward passes");
ABSL_FLAG(std::string, text, "", "a text file for the perplexity comparison");
ABSL_FLAG(int, window, 256, "tokens a perplexity window");
ABSL_FLAG(int, windows, 4, "perplexity windows");

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

// Mean negative log-likelihood (nats) of tokens[1..] given their prefixes,
// from logits rows [n, n_vocab] (row i predicts token i + 1).
double MeanNll(const std::vector<float>& logits, const std::vector<int32_t>& t,
               int n_vocab) {
  double sum = 0;
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    const float* row = logits.data() + i * n_vocab;
    const float m = *std::max_element(row, row + n_vocab);
    double z = 0;
    for (int v = 0; v < n_vocab; ++v) z += std::exp(double{row[v]} - m);
    sum += std::log(z) + m - row[t[i + 1]];
  }
  return sum / static_cast<double>(t.size() - 1);
}

// Perplexity of --text under braid's two arithmetics and exact math.
void Perplexity(LlamaModel& ggml, LlamaModel& packed) {
  std::ifstream in(absl::GetFlag(FLAGS_text));
  if (!in) Die("cannot read " + absl::GetFlag(FLAGS_text));
  std::stringstream ss;
  ss << in.rdbuf();
  auto file = GgufFile::Open(absl::GetFlag(FLAGS_model));
  if (!file.ok()) Die(std::string(file.status().message()));
  auto data = braid::model::TokenizerDataFromGguf(**file);
  if (!data.ok()) Die(std::string(data.status().message()));
  auto tok = braid::model::Tokenizer::Create(*std::move(data));
  if (!tok.ok()) Die(std::string(tok.status().message()));
  const std::vector<int32_t> all = (*tok)->Encode(ss.str(), false, false);
  const int w = absl::GetFlag(FLAGS_window);
  const int n_vocab = ggml.config().n_vocab;
  double nll[3] = {0, 0, 0};
  int windows = 0;
  for (int k = 0; k < absl::GetFlag(FLAGS_windows) &&
                  (k + 1) * static_cast<size_t>(w) <= all.size();
       ++k, ++windows) {
    const std::vector<int32_t> t(all.begin() + k * w,
                                 all.begin() + (k + 1) * w);
    for (int m = 0; m < 2; ++m) {
      LlamaModel& model = m == 0 ? ggml : packed;
      braid::model::testing::SequenceRunner run(model, w);
      std::vector<float> logits;
      const absl::Status st = run.Forward(t, true, &logits);
      if (!st.ok()) Die(std::string(st.message()));
      nll[m] += MeanNll(logits, t, n_vocab);
    }
    std::vector<braid::model::testing::MaskedEntry> entries;
    for (int i = 0; i < w; ++i) entries.push_back({t[i], 0, i});
    const auto exact =
        braid::model::testing::MaskedFullForward(ggml, entries, {{0}});
    std::vector<float> flat;
    for (const auto& row : exact)
      flat.insert(flat.end(), row.begin(), row.end());
    nll[2] += MeanNll(flat, t, n_vocab);
    std::fprintf(stderr, "window %d done\n", k);
  }
  if (windows == 0) Die("text too short for one window");
  std::printf("perplexity of %d x %d tokens of %s:\n", windows, w,
              absl::GetFlag(FLAGS_text).c_str());
  const char* names[3] = {"braid default (ggml)", "braid --packed_matmul",
                          "exact math (double)"};
  for (int m = 0; m < 3; ++m) {
    std::printf("%-28s %.4f (mean NLL %.6f nats)\n", names[m],
                std::exp(nll[m] / windows), nll[m] / windows);
  }
}

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
  if (!absl::GetFlag(FLAGS_text).empty()) Perplexity(*ggml, *packed);
  return 0;
}
