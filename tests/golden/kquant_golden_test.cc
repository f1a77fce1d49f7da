// braid on the files users download (K-quants and the 5-bit types) against
// llama.cpp: the default model quantized by llama.cpp's own quantizer
// (tools/golden/kquant_models.py, in $BRAID_KQUANT_DIR; the fixture's
// fingerprint of each file must match), fixtures by
// tools/golden/make_kquant_golden.py (llama-cpp-python on those files).
//
// Teacher-forced on llama.cpp's greedy tokens, at every position: the cosine
// between braid's and llama.cpp's logits over llama.cpp's top 32 (each
// vector centred on its mean, so the shared offset of ~10-30 does not hide a
// difference) is >= 0.999, and braid's argmax over the whole vocabulary is
// llama.cpp's token on the first 8 positions of every prompt.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/testing/sequence_runner.h"
#include "tests/golden/fixtures.h"

namespace braid {
namespace {

constexpr char kFixture[] = "tests/golden/testdata/kquant_golden.tsv";
constexpr double kMinCosine = 0.999;

// kquant_models.fingerprint: two sums over the file as little-endian 64-bit
// words (zero-padded), of the words and of (1-based index) x word.
golden::FixtureSums Fingerprint(const std::string& path) {
  golden::FixtureSums sums;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return sums;
  std::vector<uint8_t> buf(1 << 20);
  uint64_t index = 0;
  size_t got;
  while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    if (got % 8 != 0) std::memset(buf.data() + got, 0, 8 - got % 8);
    for (size_t off = 0; off < got; off += 8) {
      uint64_t word;
      std::memcpy(&word, buf.data() + off, 8);
      sums.s1 += word;
      sums.s2 += ++index * word;
    }
  }
  std::fclose(f);
  return sums;
}

// Cosine of a and b after subtracting each one's mean.
double CentredCosine(const std::vector<double>& a,
                     const std::vector<double>& b) {
  double ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ma += a[i];
    mb += b[i];
  }
  ma /= a.size();
  mb /= b.size();
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += (a[i] - ma) * (b[i] - mb);
    aa += (a[i] - ma) * (a[i] - ma);
    bb += (b[i] - mb) * (b[i] - mb);
  }
  return ab / std::sqrt(aa * bb);
}

class KQuantGoldenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(KQuantGoldenTest, TeacherForcedLogitsMatchLlamaCpp) {
  const std::string name = GetParam();
  golden::FixtureSums want;
  const std::vector<golden::TopLogitCase> cases =
      golden::LoadTopLogitCases(kFixture, "#FILE", name, &want);
  ASSERT_GE(cases.size(), 10u);
  const char* dir = std::getenv("BRAID_KQUANT_DIR");
  ASSERT_NE(dir, nullptr)
      << "BRAID_KQUANT_DIR is not set: `make test` sets it (scripts/test.sh "
         "runs tools/golden/kquant_models.py with llama-cpp-python, which "
         "scripts/setup.sh installs in ~/.cache/braid/llama-venv)";
  const std::string path = std::string(dir) + "/smollm2-" + name + ".gguf";
  const golden::FixtureSums got = Fingerprint(path);
  ASSERT_TRUE(got == want) << path << " is not the file the fixture was made "
                           << "from (missing, or another llama.cpp wrote it): "
                           << got.s1 << " " << got.s2 << " vs " << want.s1
                           << " " << want.s2;
  auto file = model::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto model = model::LlamaModel::Load(*std::move(file), {2});
  ASSERT_TRUE(model.ok()) << model.status();
  const int n_vocab = (*model)->config().n_vocab;

  int same = 0, total = 0;
  double worst_cosine = 1, worst_diff = 0;
  for (const golden::TopLogitCase& c : cases) {
    model::testing::SequenceRunner run(**model, 256);
    std::vector<float> logits;
    for (size_t i = 0; i < c.greedy_ids.size(); ++i) {
      if (i == 0) {
        ASSERT_TRUE(run.Forward(c.prompt_ids, false, &logits).ok());
      } else {
        ASSERT_TRUE(run.Forward({c.greedy_ids[i - 1]}, false, &logits).ok());
      }
      ASSERT_EQ(logits.size(), static_cast<size_t>(n_vocab));
      int best = 0;
      for (int v = 1; v < n_vocab; ++v) {
        if (logits[v] > logits[best]) best = v;
      }
      if (i < 8) {
        EXPECT_EQ(best, c.greedy_ids[i]) << name << " position " << i;
      }
      same += best == c.greedy_ids[i];
      ++total;
      std::vector<double> ours, theirs;
      for (const auto& [id, value] : c.tops[i]) {
        ours.push_back(logits[id]);
        theirs.push_back(value);
        worst_diff = std::max(worst_diff, std::fabs(logits[id] - value));
      }
      const double cosine = CentredCosine(ours, theirs);
      worst_cosine = std::min(worst_cosine, cosine);
      EXPECT_GE(cosine, kMinCosine) << name << " position " << i;
    }
  }
  std::printf(
      "%s: %d of %d greedy tokens as llama.cpp, worst centred top-32 cosine "
      "%.6f, worst top-logit difference %.4f\n",
      name.c_str(), same, total, worst_cosine, worst_diff);
}

INSTANTIATE_TEST_SUITE_P(Files, KQuantGoldenTest,
                         ::testing::Values("q4_k_m", "q5_k_m", "q6_k",
                                           "q3_k_m", "q2_k", "q5_0", "q5_1",
                                           "q8_0"),
                         [](const auto& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace braid
