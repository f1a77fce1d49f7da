// Parsing shared by the golden tests' fixture files (testdata/*.tsv).
#ifndef BRAID_TESTS_GOLDEN_FIXTURES_H_
#define BRAID_TESTS_GOLDEN_FIXTURES_H_

#include <cstdint>
#include <vector>

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

}  // namespace braid::golden

#endif  // BRAID_TESTS_GOLDEN_FIXTURES_H_
