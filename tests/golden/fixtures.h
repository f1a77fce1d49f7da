// Parsing shared by the golden tests' fixture files (testdata/*.tsv).
#ifndef BRAID_TESTS_GOLDEN_FIXTURES_H_
#define BRAID_TESTS_GOLDEN_FIXTURES_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace braid::golden {

// Space-separated token ids; a part that is not an integer fails the test.
inline std::vector<int32_t> ParseIds(absl::string_view s) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(s, ' ', absl::SkipEmpty())) {
    int32_t id = 0;
    EXPECT_TRUE(absl::SimpleAtoi(part, &id)) << part;
    ids.push_back(id);
  }
  return ids;
}

// A prompt of a top-logit fixture (make_float_golden.py,
// make_kquant_golden.py): llama.cpp's prompt ids, its greedy continuation,
// and at each generated position its top (id, logit) pairs.
struct TopLogitCase {
  std::vector<int32_t> prompt_ids, greedy_ids;
  std::vector<std::vector<std::pair<int32_t, float>>> tops;
};

// A header line's two sums ("#TAG NAME s1 s2").
struct FixtureSums {
  uint64_t s1 = 0, s2 = 0;
  bool operator==(const FixtureSums& o) const {
    return s1 == o.s1 && s2 == o.s2;
  }
};

// The cases of `name` in a top-logit fixture file, whose lines are
// "#TAG NAME s1 s2" (its sums into *sums when NAME is name) or
// "NAME hex(prompt) prompt-ids greedy-ids tops", tops as id:value pairs
// joined by ',', positions by ';'; other "#..." lines are skipped. A
// malformed line fails the test.
inline std::vector<TopLogitCase> LoadTopLogitCases(const std::string& path,
                                                   absl::string_view tag,
                                                   absl::string_view name,
                                                   FixtureSums* sums) {
  std::vector<TopLogitCase> cases;
  std::ifstream tsv(path);
  EXPECT_TRUE(tsv) << "missing fixture " << path;
  std::string line;
  while (std::getline(tsv, line)) {
    std::vector<absl::string_view> cols = absl::StrSplit(line, '\t');
    if (cols[0] == tag) {
      EXPECT_EQ(cols.size(), 4u) << line;
      if (cols.size() == 4 && cols[1] == name) {
        EXPECT_TRUE(absl::SimpleAtoi(cols[2], &sums->s1) &&
                    absl::SimpleAtoi(cols[3], &sums->s2))
            << line;
      }
      continue;
    }
    if (absl::StartsWith(cols[0], "#")) continue;  // another header
    EXPECT_EQ(cols.size(), 5u) << line;
    if (cols.size() != 5 || cols[0] != name) continue;
    TopLogitCase c{ParseIds(cols[2]), ParseIds(cols[3]), {}};
    for (absl::string_view pos : absl::StrSplit(cols[4], ';')) {
      auto& top = c.tops.emplace_back();
      for (absl::string_view pair : absl::StrSplit(pos, ',')) {
        std::vector<absl::string_view> kv = absl::StrSplit(pair, ':');
        int32_t id = 0;
        float v = 0;
        EXPECT_TRUE(kv.size() == 2 && absl::SimpleAtoi(kv[0], &id) &&
                    absl::SimpleAtof(kv[1], &v))
            << pair;
        top.emplace_back(id, v);
      }
    }
    EXPECT_EQ(c.tops.size(), c.greedy_ids.size());
    cases.push_back(std::move(c));
  }
  return cases;
}

// kquant_models.fingerprint: two sums over the file as little-endian 64-bit
// words (zero-padded), of the words and of (1-based index) x word.
inline FixtureSums Fingerprint(const std::string& path) {
  FixtureSums sums;
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
inline double CentredCosine(const std::vector<double>& a,
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

}  // namespace braid::golden

#endif  // BRAID_TESTS_GOLDEN_FIXTURES_H_
