#include "tools/cli/args.h"

#include "gtest/gtest.h"

namespace braid::cli {
namespace {

constexpr FlagSpec kFlags[] = {
    {"addr", true, ""},
    {"max-tokens", true, "generate,chat"},
    {"stop", true, "generate"},
    {"chat", false, "generate"},
    {"stream-input", false, "chat"},
};

TEST(ArgsTest, FlagsBeforeOrAfterTheCommandInBothForms) {
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{"--addr", "h:1", "generate", "--max-tokens=5",
                                 "hello", "world"},
        std::vector<std::string>{"generate", "hello", "--addr=h:1", "world",
                                 "--max-tokens", "5"}}) {
    auto r = ParseArgs(argv, kFlags);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->command, "generate");
    EXPECT_EQ(r->positional, (std::vector<std::string>{"hello", "world"}));
    EXPECT_EQ(r->Get("addr"), "h:1");
    EXPECT_EQ(r->Get("max-tokens"), "5");
    EXPECT_FALSE(r->Has("chat"));
  }
}

TEST(ArgsTest, RepeatedFlagsSwitchesAndDoubleDash) {
  auto r = ParseArgs({"generate", "--stop", "a", "--stop=b", "--chat", "--",
                      "--not-a-flag", "x"},
                     kFlags);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->flags.at("stop"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r->Switch("chat"));
  EXPECT_EQ(r->positional, (std::vector<std::string>{"--not-a-flag", "x"}));
  auto off = ParseArgs({"generate", "--chat=false", "p"}, kFlags);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->Switch("chat"));
}

TEST(ArgsTest, ErrorsNameTheFlag) {
  auto unknown = ParseArgs({"generate", "--nope"}, kFlags);
  EXPECT_NE(unknown.status().message().find("--nope"), std::string::npos);
  auto missing = ParseArgs({"generate", "--max-tokens"}, kFlags);
  EXPECT_NE(missing.status().message().find("needs a value"),
            std::string::npos);
  auto bad_switch = ParseArgs({"generate", "--chat=yes"}, kFlags);
  EXPECT_NE(bad_switch.status().message().find("true or false"),
            std::string::npos);
  auto wrong_command = ParseArgs({"generate", "--stream-input"}, kFlags);
  EXPECT_NE(wrong_command.status().message().find("not a flag of generate"),
            std::string::npos);
}

}  // namespace
}  // namespace braid::cli
