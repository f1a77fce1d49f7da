#include "model/gguf.h"

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/testing/gguf_writer.h"

namespace braid::model {
namespace {

using ::braid::model::testing::GgufWriter;
using ::testing::HasSubstr;

std::string F32Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

// A small file with every metadata kind and three tensors.
GgufWriter SmallWriter(uint32_t version = 3) {
  GgufWriter w(version);
  w.AddString("general.architecture", "llama");
  w.AddUint8("u8", 200);
  w.AddInt8("i8", -5);
  w.AddUint16("u16", 60000);
  w.AddInt16("i16", -30000);
  w.AddUint32("u32", 4000000000u);
  w.AddInt32("i32", -7);
  w.AddUint64("u64", 1ull << 40);
  w.AddInt64("i64", -(1ll << 40));
  w.AddFloat32("f32", 1.5f);
  w.AddFloat64("f64", 2.25);
  w.AddBool("flag", true);
  w.AddStringArray("strs", {"a", "", "hello"});
  w.AddInt32Array("ints", {1, -2, 3});
  w.AddFloat32Array("floats", {0.5f, -1.0f});
  w.AddNestedInt32Array("nested", {{1, 2}, {3}});
  w.AddTensor("norm", GgmlType::kF32, {4}, F32Bytes({1, 2, 3, 4}));
  std::vector<float> m(64 * 2);
  for (size_t i = 0; i < m.size(); ++i) m[i] = 0.01f * i;
  w.AddTensorFromFloats("w.q4_1", GgmlType::kQ4_1, {64, 2}, m);
  w.AddTensorFromFloats("w.q8_0", GgmlType::kQ8_0, {32, 1},
                        {m.begin(), m.begin() + 32});
  return w;
}

TEST(GgufTest, ReadsEveryValueKindAndTensor) {
  for (uint32_t version : {2u, 3u}) {
    auto file = GgufFile::FromBytes(SmallWriter(version).Serialize());
    ASSERT_TRUE(file.ok()) << file.status();
    const GgufFile& f = **file;
    EXPECT_EQ(f.version(), version);
    EXPECT_EQ(*f.GetString("general.architecture"), "llama");
    EXPECT_EQ(*f.GetInt("u8"), 200);
    EXPECT_EQ(*f.GetInt("i8"), -5);
    EXPECT_EQ(*f.GetInt("u16"), 60000);
    EXPECT_EQ(*f.GetInt("i16"), -30000);
    EXPECT_EQ(*f.GetInt("u32"), 4000000000ll);
    EXPECT_EQ(*f.GetInt("i32"), -7);
    EXPECT_EQ(*f.GetInt("u64"), 1ll << 40);
    EXPECT_EQ(*f.GetInt("i64"), -(1ll << 40));
    EXPECT_EQ(*f.GetFloat("f32"), 1.5);
    EXPECT_EQ(*f.GetFloat("f64"), 2.25);
    EXPECT_EQ(*f.GetFloat("i32"), -7.0);  // Ints are accepted as floats.
    EXPECT_TRUE(*f.GetBool("flag"));
    EXPECT_THAT(*f.GetStringArray("strs"),
                ::testing::ElementsAre("a", "", "hello"));
    EXPECT_THAT(*f.GetIntArray("ints"), ::testing::ElementsAre(1, -2, 3));
    EXPECT_THAT(*f.GetFloatArray("floats"),
                ::testing::ElementsAre(0.5f, -1.0f));
    EXPECT_TRUE(f.Has("nested"));
    EXPECT_FALSE(f.GetIntArray("nested").ok());
    EXPECT_FALSE(f.Has("missing"));
    EXPECT_EQ(f.GetInt("missing").status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(f.GetInt("f32").status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(f.GetString("u8").ok());
    EXPECT_FALSE(f.GetBool("u8").ok());
    EXPECT_FALSE(f.GetStringArray("ints").ok());

    ASSERT_EQ(f.tensors().size(), 3u);
    const GgufTensor* norm = f.FindTensor("norm");
    ASSERT_NE(norm, nullptr);
    EXPECT_EQ(norm->type, GgmlType::kF32);
    EXPECT_EQ(norm->num_elements(), 4);
    float v[4];
    std::memcpy(v, norm->data, 16);
    EXPECT_EQ(v[3], 4.0f);
    const GgufTensor* q = f.FindTensor("w.q4_1");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->dims, (std::vector<int64_t>{64, 2}));
    EXPECT_EQ(q->size_bytes, 4u * 20);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(q->data) -
                  reinterpret_cast<uintptr_t>(norm->data),
              32u);  // Default alignment 32.
    EXPECT_EQ(f.FindTensor("nope"), nullptr);
  }
}

TEST(GgufTest, HonoursCustomAlignment) {
  GgufWriter w = SmallWriter();
  w.set_alignment(64);
  auto file = GgufFile::FromBytes(w.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->alignment(), 64u);
  const auto& t = (*file)->tensors();
  EXPECT_EQ(t[1].data - t[0].data, 64);
}

absl::Status ParseStatus(const std::string& bytes) {
  return GgufFile::FromBytes(bytes).status();
}

TEST(GgufTest, RejectsBadHeaders) {
  std::string bytes = SmallWriter().Serialize();
  std::string bad = bytes;
  bad[0] = 'X';
  EXPECT_THAT(ParseStatus(bad).message(), HasSubstr("magic"));
  bad = bytes;
  bad[4] = 1;  // Version 1.
  EXPECT_THAT(ParseStatus(bad).message(), HasSubstr("version 1"));
  bad = bytes;
  bad[15] = 0x7F;  // Huge tensor count.
  EXPECT_THAT(ParseStatus(bad).message(), HasSubstr("tensor count"));
  bad = bytes;
  bad[23] = 0x7F;  // Huge kv count.
  EXPECT_THAT(ParseStatus(bad).message(), HasSubstr("metadata count"));
  EXPECT_FALSE(ParseStatus("").ok());
}

TEST(GgufTest, RejectsNonPowerOfTwoAlignment) {
  GgufWriter w = SmallWriter();
  w.set_alignment(48);
  EXPECT_THAT(ParseStatus(w.Serialize()).message(), HasSubstr("alignment"));
}

TEST(GgufTest, RejectsUnsupportedTensorTypeByName) {
  GgufWriter w;
  w.AddTensor("blk.0.iq2", static_cast<GgmlType>(16), {256},
              std::string(66, 0));
  const absl::Status s = ParseStatus(w.Serialize());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("IQ2_XXS"));
  EXPECT_THAT(s.message(), HasSubstr("blk.0.iq2"));
  EXPECT_THAT(s.message(), HasSubstr("Q4_K"));  // the supported list
}

// K-quant tensors: read with their 256-element super-blocks; a row that is
// not a whole number of them, or data that the file does not hold, is an
// error naming the tensor.
TEST(GgufTest, KQuantTensorsAreSizedBySuperBlocks) {
  GgufWriter ok;
  ok.AddTensor("q4k", GgmlType::kQ4_K, {512, 2}, std::string(4 * 144, 0));
  ok.AddTensor("q6k", GgmlType::kQ6_K, {256}, std::string(210, 0));
  ok.AddTensor("q50", GgmlType::kQ5_0, {64}, std::string(44, 0));
  auto f = GgufFile::FromBytes(ok.Serialize());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->FindTensor("q4k")->size_bytes, 4u * 144);
  EXPECT_EQ((*f)->FindTensor("q6k")->size_bytes, 210u);
  EXPECT_EQ((*f)->FindTensor("q50")->size_bytes, 44u);

  GgufWriter ragged;
  ragged.AddTensor("blk.0.ffn_up.weight", GgmlType::kQ4_K, {576},
                   std::string(144 * 3, 0));
  const absl::Status s = ParseStatus(ragged.Serialize());
  EXPECT_THAT(s.message(), HasSubstr("blk.0.ffn_up.weight"));
  EXPECT_THAT(s.message(), HasSubstr("block size 256"));

  GgufWriter short_data;
  short_data.AddTensor("q5k", GgmlType::kQ5_K, {256, 64},
                       std::string(176, 0));  // one block of 64
  EXPECT_FALSE(ParseStatus(short_data.Serialize()).ok());
}

TEST(GgufTest, RejectsRowNotMultipleOfBlock) {
  GgufWriter w;
  w.AddTensor("t", GgmlType::kQ8_0, {16}, std::string(34, 0));
  EXPECT_THAT(ParseStatus(w.Serialize()).message(), HasSubstr("block size"));
}

TEST(GgufTest, RejectsDuplicates) {
  GgufWriter w;
  w.AddUint32("k", 1);
  w.AddUint32("k", 2);
  EXPECT_THAT(ParseStatus(w.Serialize()).message(), HasSubstr("duplicate"));
  GgufWriter t;
  t.AddTensor("x", GgmlType::kF32, {1}, std::string(4, 0));
  t.AddTensor("x", GgmlType::kF32, {1}, std::string(4, 0));
  EXPECT_THAT(ParseStatus(t.Serialize()).message(), HasSubstr("duplicate"));
}

TEST(GgufTest, RejectsBadDims) {
  GgufWriter w;
  w.AddTensor("zero", GgmlType::kF32, {0}, "");
  EXPECT_THAT(ParseStatus(w.Serialize()).message(), HasSubstr("dim"));
  GgufWriter big;
  big.AddTensor("huge", GgmlType::kF32, {1ll << 32, 1ll << 32}, "");
  EXPECT_FALSE(ParseStatus(big.Serialize()).ok());
  GgufWriter five;
  five.AddTensor("5d", GgmlType::kF32, {1, 1, 1, 1, 1}, std::string(4, 0));
  EXPECT_THAT(ParseStatus(five.Serialize()).message(), HasSubstr("n_dims"));
}

// Finds the 8-byte offset field of tensor `name` in a serialized file.
size_t OffsetFieldPos(const std::string& bytes, const std::string& name,
                      int n_dims) {
  const size_t name_pos = bytes.find(name);
  return name_pos + name.size() + 4 + 8 * n_dims + 4;
}

TEST(GgufTest, RejectsOverlappingAndOutOfBoundsTensors) {
  GgufWriter w;
  w.AddTensor("aaaa", GgmlType::kF32, {8}, std::string(32, 0));
  w.AddTensor("bbbb", GgmlType::kF32, {8}, std::string(32, 0));
  std::string bytes = w.Serialize();
  ASSERT_TRUE(ParseStatus(bytes).ok());
  std::string overlap = bytes;
  std::memset(&overlap[OffsetFieldPos(bytes, "bbbb", 1)], 0, 8);
  EXPECT_THAT(ParseStatus(overlap).message(), HasSubstr("overlap"));
  std::string outside = bytes;
  outside[OffsetFieldPos(bytes, "bbbb", 1) + 1] = 1;  // Offset 256 + 32.
  EXPECT_THAT(ParseStatus(outside).message(), HasSubstr("outside"));
  std::string misaligned = bytes;
  misaligned[OffsetFieldPos(bytes, "bbbb", 1)] = 33;
  EXPECT_THAT(ParseStatus(misaligned).message(), HasSubstr("aligned"));
}

TEST(GgufTest, EveryTruncationFailsCleanly) {
  const std::string bytes = SmallWriter().Serialize();
  for (size_t len = 0; len < bytes.size(); ++len) {
    const absl::Status s = ParseStatus(bytes.substr(0, len));
    ASSERT_FALSE(s.ok()) << "prefix of " << len << " bytes parsed";
    ASSERT_TRUE(s.code() == absl::StatusCode::kDataLoss ||
                s.code() == absl::StatusCode::kInvalidArgument)
        << s;
  }
}

// Reads everything a loaded file exposes, so a sanitizer sees any bad pointer.
uint64_t TouchEverything(const GgufFile& f) {
  uint64_t sum = 0;
  for (const std::string& key : f.keys()) {
    sum += f.GetInt(key).ok() + f.GetFloat(key).ok() + f.GetBool(key).ok();
    if (auto s = f.GetString(key); s.ok()) sum += s->size();
    if (auto a = f.GetStringArray(key); a.ok()) sum += a->size();
    if (auto a = f.GetIntArray(key); a.ok()) sum += a->size();
    if (auto a = f.GetFloatArray(key); a.ok()) sum += a->size();
  }
  for (const GgufTensor& t : f.tensors()) {
    for (size_t i = 0; i < t.size_bytes; ++i) sum += t.data[i];
  }
  return sum;
}

TEST(GgufTest, RandomByteFlipsNeverCrash) {
  const std::string bytes = SmallWriter().Serialize();
  std::mt19937 rng(1234);
  int ok = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string mutated = bytes;
    const int flips = 1 + iter % 4;
    for (int i = 0; i < flips; ++i) {
      const size_t pos = rng() % mutated.size();
      mutated[pos] = static_cast<char>(rng() & 0xFF);
    }
    auto file = GgufFile::FromBytes(std::move(mutated));
    if (file.ok()) {
      ++ok;
      TouchEverything(**file);
    }
  }
  // Flips inside tensor data leave a valid file, so some must parse.
  EXPECT_GT(ok, 0);
}

TEST(GgufTest, OpenReportsMissingFile) {
  EXPECT_EQ(GgufFile::Open("/nonexistent/x.gguf").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(GgufTest, OpenMapsAWrittenFile) {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR")
                                             : "/tmp") +
      "/small.gguf";
  ASSERT_TRUE(SmallWriter().WriteFile(path).ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->tensors().size(), 3u);
}

}  // namespace
}  // namespace braid::model
