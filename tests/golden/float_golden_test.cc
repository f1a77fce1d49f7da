// braid's float weight paths (F16, BF16) against llama.cpp on the real model:
// the default model converted in memory (model/testing/convert_gguf.h, the
// values tools/gguf_convert.py writes: the fixture's checksum of them must
// match), fixtures by tools/golden/make_float_golden.py (llama-cpp-python on
// the converted file).
//
// llama.cpp rounds the activations of F16 and BF16 weights to the weights'
// type; braid keeps them in f32 (dot.h), so the logits are close, not equal:
// teacher-forced on llama.cpp's greedy tokens, braid's argmax matches on the
// first 8 tokens of every prompt and on >= 90% of all (issue 2's bar), and
// each of llama.cpp's top logits at every position is within kTolerance.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "model/cpu/llama.h"
#include "model/gguf.h"
#include "model/testing/convert_gguf.h"
#include "model/testing/model_path.h"
#include "model/testing/sequence_runner.h"
#include "tests/golden/fixtures.h"

namespace braid {
namespace {

using golden::ParseIds;

constexpr char kFixture[] = "tests/golden/testdata/float_golden.tsv";
// Largest |braid - llama.cpp| allowed on a top logit (measured: F16 0.026,
// BF16 0.180; the logits here span ~10-30).
constexpr double kTolerance[] = {0.1, 0.5};  // F16, BF16

// make_float_golden.py's "#CHECKSUM" pair for a type: two sums over the
// 16-bit values of that type's tensors in file order, of the values and of
// (1-based index) x value, mod 2^64.
using Checksum = golden::FixtureSums;

Checksum WeightsChecksum(const model::GgufFile& file, model::GgmlType type) {
  Checksum c;
  uint64_t i = 0;
  for (const model::GgufTensor& t : file.tensors()) {
    if (t.type != type) continue;
    const int64_t n = t.num_elements();
    for (int64_t k = 0; k < n; ++k) {
      uint16_t v;
      std::memcpy(&v, t.data + 2 * k, 2);
      c.s1 += v;
      c.s2 += ++i * v;
    }
  }
  return c;
}

class FloatGoldenTest : public ::testing::TestWithParam<model::GgmlType> {};

TEST_P(FloatGoldenTest, TeacherForcedLogitsMatchLlamaCpp) {
  const model::GgmlType type = GetParam();
  const bool f16 = type == model::GgmlType::kF16;
  Checksum want;
  const std::vector<golden::TopLogitCase> cases = golden::LoadTopLogitCases(
      kFixture, "#CHECKSUM", f16 ? "F16" : "BF16", &want);
  ASSERT_GE(cases.size(), 4u);

  const std::string path = model::testing::SmolLm2Path();
  ASSERT_FALSE(path.empty()) << model::testing::kNoModelMessage;
  auto src = model::GgufFile::Open(path);
  ASSERT_TRUE(src.ok()) << src.status();
  auto bytes = model::testing::ConvertMatrices(**src, type);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto file = model::GgufFile::FromBytes(*std::move(bytes));
  ASSERT_TRUE(file.ok()) << file.status();
  // The float paths under test, not the quantized ones, on the weights
  // llama.cpp ran (the fixture's conversion).
  ASSERT_EQ(file.value()->FindTensor("blk.0.ffn_up.weight")->type, type);
  ASSERT_EQ(file.value()->FindTensor("token_embd.weight")->type, type);
  const Checksum got = WeightsChecksum(**file, type);
  ASSERT_TRUE(got == want) << "converted weights differ from the fixture's: "
                           << got.s1 << " " << got.s2 << " vs " << want.s1
                           << " " << want.s2;
  auto model = model::LlamaModel::Load(*std::move(file), {2});
  ASSERT_TRUE(model.ok()) << model.status();
  const int n_vocab = (*model)->config().n_vocab;

  int same = 0, total = 0;
  double worst = 0;
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
        EXPECT_EQ(best, c.greedy_ids[i]) << "position " << i;
      }
      same += best == c.greedy_ids[i];
      ++total;
      for (const auto& [id, want] : c.tops[i]) {
        const double diff = std::fabs(logits[id] - want);
        worst = std::max(worst, diff);
        EXPECT_LE(diff, kTolerance[f16 ? 0 : 1])
            << "position " << i << " token " << id;
      }
    }
  }
  EXPECT_GE(same, 0.9 * total);
  std::printf(
      "%s: %d of %d greedy tokens as llama.cpp, worst top-logit "
      "difference %.4f\n",
      f16 ? "F16" : "BF16", same, total, worst);
}

INSTANTIATE_TEST_SUITE_P(Types, FloatGoldenTest,
                         ::testing::Values(model::GgmlType::kF16,
                                           model::GgmlType::kBF16),
                         [](const auto& info) {
                           return info.param == model::GgmlType::kF16
                                      ? std::string("F16")
                                      : std::string("BF16");
                         });

}  // namespace
}  // namespace braid
