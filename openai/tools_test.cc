#include "openai/tools.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace braid::openai {
namespace {

using Json = nlohmann::ordered_json;

// Python's json.dumps(v, ensure_ascii=False), as Hugging Face's tojson
// writes tools into a chat template (values printed by Python 3.11).
TEST(PyJsonTest, WritesWhatPythonWrites) {
  const Json v = Json::parse(
      R"({"b": [1, 2.5, true, null, {}], "a": "q\"\\\n\t\u0001é😀/", "c": {}})");
  EXPECT_EQ(PyJson(v),
            "{\"b\": [1, 2.5, true, null, {}], \"a\": "
            "\"q\\\"\\\\\\n\\t\\u0001é😀/\", \"c\": {}}");
  EXPECT_EQ(PyJson(Json::array()), "[]");
  EXPECT_EQ(PyJson(Json(-3)), "-3");
}

std::vector<std::string> Names(const std::vector<ToolCall>& calls) {
  std::vector<std::string> names;
  for (const ToolCall& c : calls) names.push_back(c.name);
  return names;
}

TEST(ToolCallSplitterTest, WholeText) {
  ToolCallSplitter::Piece p = SplitToolCalls(
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\":\"Paris\",\"days\":2}}\n</tool_call>\n<tool_call>\n"
      "{\"name\": \"now\"}\n</tool_call>",
      "call_x_");
  EXPECT_EQ(p.content, "Let me look.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].id, "call_x_0");
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, "{\"city\": \"Paris\", \"days\": 2}");
  EXPECT_EQ(p.calls[1].id, "call_x_1");
  EXPECT_EQ(p.calls[1].arguments, "{}");
}

// A block that is no call (not JSON, no name, arguments not an object)
// stays content, as does an unterminated one and a lone closing tag.
TEST(ToolCallSplitterTest, WhatIsNoCallStaysContent) {
  for (const std::string text :
       {"<tool_call>\nnot json\n</tool_call>",
        "<tool_call>{\"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
        "a <tool_call>{\"name\": \"f\"", "x </tool_call> y", "<tool_ca"}) {
    ToolCallSplitter::Piece p = SplitToolCalls(text, "c");
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text) << text;
  }
}

// Streamed a character at a time: no part of a call is ever sent as
// content, content before a call goes out at once, and whitespace right
// after a call is dropped.
TEST(ToolCallSplitterTest, StreamedOneCharacterAtATime) {
  const std::string text =
      "Sure <t!> <tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": "
      "\"</tool\"}}\n</tool_call>\n\n<tool_call>{\"name\": \"g\"}</tool_call>"
      "\ndone <tool_";
  ToolCallSplitter s("id");
  std::string content;
  std::vector<ToolCall> calls;
  std::vector<size_t> content_at_call;
  for (char c : text) {
    ToolCallSplitter::Piece p = s.Push(std::string(1, c));
    EXPECT_EQ(p.content.find('{'), std::string::npos) << content;
    content += p.content;
    for (ToolCall& call : p.calls) {
      content_at_call.push_back(content.size());
      calls.push_back(std::move(call));
    }
  }
  content += s.Finish().content;
  EXPECT_EQ(content, "Sure <t!> done <tool_");
  EXPECT_EQ(Names(calls), (std::vector<std::string>{"f", "g"}));
  EXPECT_EQ(calls[0].arguments, "{\"x\": \"</tool\"}");
  EXPECT_EQ(content_at_call, (std::vector<size_t>{10, 10}));
  EXPECT_EQ(s.num_calls(), 2);
}

}  // namespace
}  // namespace braid::openai
