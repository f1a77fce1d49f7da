// The architectures braid reads besides the default model's (Llama 3.x's
// rope_freqs, Qwen2's Q/K/V biases, Qwen3's per-head Q/K norms and head size,
// the neox RoPE of both, Mistral's sliding window, Gemma 2's and Gemma 3's
// blocks: scaled embeddings, GeGLU, post-norms, soft-capping, sliding
// layers with RoPE of their own) against llama.cpp on random-weight models
// with each architecture's real tensor set and metadata
// (tools/golden/arch_models.py, in $BRAID_ARCH_DIR; the fixture's
// fingerprint of each file must match), fixtures by
// tools/golden/make_arch_golden.py (llama-cpp-python on them; for Mistral,
// whose window llama.cpp does not read, a float64 reference that the script
// holds to llama.cpp without the window). The windows are 64 positions: the
// prompt and the decode steps run well past them.
//
// The weights are F32, so the engines differ only in the order of their sums:
// teacher-forced on llama.cpp's greedy tokens after a 256-token prompt, at
// every position the cosine of braid's and llama.cpp's logits over
// llama.cpp's top 32 (centred) is >= 0.999 and braid's argmax is llama.cpp's
// token.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/cpu/llama.h"
#include "model/gguf.h"
#include "model/testing/sequence_runner.h"
#include "tests/golden/fixtures.h"

namespace braid {
namespace {

constexpr char kFixture[] = "tests/golden/testdata/arch_golden.tsv";
constexpr double kMinCosine = 0.999;

class ArchGoldenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ArchGoldenTest, TeacherForcedLogitsMatchLlamaCpp) {
  const std::string name = GetParam();
  golden::FixtureSums want;
  const std::vector<golden::TopLogitCase> cases =
      golden::LoadTopLogitCases(kFixture, "#FILE", name, &want);
  ASSERT_EQ(cases.size(), 1u);
  const char* dir = std::getenv("BRAID_ARCH_DIR");
  ASSERT_NE(dir, nullptr)
      << "BRAID_ARCH_DIR is not set: `make test` sets it (scripts/test.sh "
         "runs tools/golden/arch_models.py)";
  const std::string path = std::string(dir) + "/" + name + ".gguf";
  const golden::FixtureSums got = golden::Fingerprint(path);
  ASSERT_TRUE(got == want) << path << " is not the file the fixture was made "
                           << "from: " << got.s1 << " " << got.s2 << " vs "
                           << want.s1 << " " << want.s2;
  auto file = model::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto model = model::LlamaModel::Load(*std::move(file), {2});
  ASSERT_TRUE(model.ok()) << model.status();
  const bool llama = name == "llama3" || name == "mistral";
  ASSERT_EQ((*model)->config().arch, llama ? "llama" : name);
  if (name == "mistral" || name.rfind("gemma", 0) == 0) {
    ASSERT_EQ((*model)->config().sliding_window, 64);
  }

  const golden::TopLogitCase& c = cases[0];
  ASSERT_GE(c.prompt_ids.size(), 256u);
  model::testing::SequenceRunner run(**model, 512);
  std::vector<float> logits;
  double worst = 1;
  for (size_t i = 0; i < c.greedy_ids.size(); ++i) {
    ASSERT_TRUE((i == 0 ? run.Forward(c.prompt_ids, false, &logits)
                        : run.Forward({c.greedy_ids[i - 1]}, false, &logits))
                    .ok());
    const int best = static_cast<int>(
        std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_EQ(best, c.greedy_ids[i]) << name << " position " << i;
    std::vector<double> ours, theirs;
    for (const auto& [id, value] : c.tops[i]) {
      ours.push_back(logits[id]);
      theirs.push_back(value);
    }
    const double cosine = golden::CentredCosine(ours, theirs);
    worst = std::min(worst, cosine);
    EXPECT_GE(cosine, kMinCosine) << name << " position " << i;
  }
  std::printf("%s: worst centred top-32 cosine %.7f over %zu positions\n",
              name.c_str(), worst, c.greedy_ids.size());
}

INSTANTIATE_TEST_SUITE_P(Archs, ArchGoldenTest,
                         ::testing::Values("llama3", "qwen2", "qwen3",
                                           "mistral", "gemma2", "gemma3"),
                         [](const auto& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace braid
