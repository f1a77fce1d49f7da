#include "batching/stop_matcher.h"

#include "gtest/gtest.h"

namespace braid::batching {
namespace {

TEST(StopMatcherTest, NoStopsPassesEverything) {
  StopMatcher m({});
  EXPECT_EQ(m.Push("abc").text, "abc");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, MatchAcrossChunks) {
  StopMatcher m({"STOP"});
  StopMatcher::Result r = m.Push("hello S");
  EXPECT_EQ(r.text, "hello ");
  EXPECT_FALSE(r.stopped);
  r = m.Push("TO");
  EXPECT_EQ(r.text, "");
  r = m.Push("P and more");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.matched, "STOP");
}

TEST(StopMatcherTest, FalseStartIsReleased) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.Push("ST").text, "");
  EXPECT_EQ(m.Push("AR").text, "STAR");
  EXPECT_EQ(m.Push("S").text, "");
  EXPECT_EQ(m.Flush(), "S");
}

TEST(StopMatcherTest, EarliestMatchWins) {
  StopMatcher m({"world", "lo w"});
  StopMatcher::Result r = m.Push("hello world");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "hel");
  EXPECT_EQ(r.matched, "lo w");
}

TEST(StopMatcherTest, TextBeforeStopInSameChunk) {
  StopMatcher m({"\n\n"});
  StopMatcher::Result r = m.Push("line one\n");
  EXPECT_EQ(r.text, "line one");
  r = m.Push("\nnext");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
}

}  // namespace
}  // namespace braid::batching
