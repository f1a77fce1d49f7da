#include "model/tokenizer/chat_template.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace braid::model {
namespace {

std::string ChatDataPath(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const std::string rel = "model/tokenizer/testdata/chat/" + name;
  return srcdir ? std::string(srcdir) + "/braid/" + rel : rel;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Hex(const std::string& hex) { return absl::HexStringToBytes(hex); }

// Every line of chat_golden.tsv is one rendering by Python jinja2 of a
// reference template (make_chat_golden.py); Render must agree byte for byte,
// and fail exactly where the template raises.
TEST(ChatTemplateTest, MatchesJinjaRenderingOfReferenceTemplates) {
  std::ifstream in(ChatDataPath("chat_golden.tsv"));
  ASSERT_TRUE(in) << "missing chat_golden.tsv";
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    ASSERT_EQ(f.size(), 7u) << line;
    absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromSource(
        ReadFile(ChatDataPath(f[0])), Hex(f[2]), Hex(f[3]));
    ASSERT_TRUE(tmpl.ok()) << f[0] << ": " << tmpl.status();
    EXPECT_EQ(tmpl->name(), f[1]) << f[0];
    std::vector<ChatMessage> messages;
    for (absl::string_view pair :
         absl::StrSplit(f[5], ',', absl::SkipEmpty())) {
      std::pair<std::string, std::string> rc = absl::StrSplit(pair, ':');
      messages.push_back({Hex(rc.first), Hex(rc.second)});
    }
    std::string desc = f[0] + " gen=" + f[4] + " roles=";
    for (const ChatMessage& m : messages) desc += m.role + ",";
    absl::StatusOr<std::string> got = tmpl->Render(messages, f[4] == "1");
    if (f[6] == "ERROR") {
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
          << desc;
    } else {
      ASSERT_TRUE(got.ok()) << desc << ": " << got.status();
      EXPECT_EQ(*got, Hex(f[6])) << desc;
    }
    ++cases;
  }
  EXPECT_GE(cases, 200);
}

// chat_tools_golden.tsv (make_chat_golden.py --tools): the templates that
// call functions, rendered by jinja2 with tools (as Hugging Face's tojson
// writes them) and with assistant turns that call them, byte for byte.
TEST(ChatTemplateTest, MatchesJinjaRenderingWithTools) {
  std::ifstream in(ChatDataPath("chat_tools_golden.tsv"));
  ASSERT_TRUE(in) << "missing chat_tools_golden.tsv";
  std::string line;
  int cases = 0, with_tools = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    ASSERT_EQ(f.size(), 8u) << line;
    absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromSource(
        ReadFile(ChatDataPath(f[0])), Hex(f[2]), Hex(f[3]));
    ASSERT_TRUE(tmpl.ok()) << f[0] << ": " << tmpl.status();
    EXPECT_EQ(tmpl->name(), f[1]) << f[0];
    EXPECT_TRUE(tmpl->supports_tools());
    std::vector<ChatMessage> messages;
    for (absl::string_view m : absl::StrSplit(f[5], ',', absl::SkipEmpty())) {
      std::vector<std::string> p = absl::StrSplit(m, ':');
      ASSERT_EQ(p.size(), 3u) << m;
      ChatMessage message{Hex(p[0]), Hex(p[1]), {}};
      for (absl::string_view c : absl::StrSplit(p[2], '+', absl::SkipEmpty())) {
        std::pair<std::string, std::string> na = absl::StrSplit(c, ';');
        message.tool_calls.push_back({Hex(na.first), Hex(na.second)});
      }
      messages.push_back(std::move(message));
    }
    std::vector<std::string> tools;
    if (f[6] != "-") {
      for (absl::string_view t : absl::StrSplit(f[6], ',')) {
        tools.push_back(Hex(std::string(t)));
      }
    }
    with_tools += !tools.empty();
    std::string desc = f[0] + " gen=" + f[4] +
                       " tools=" + std::to_string(tools.size()) + " roles=";
    for (const ChatMessage& m : messages) desc += m.role + ",";
    absl::StatusOr<std::string> got =
        tmpl->Render(messages, f[4] == "1", tools);
    if (f[7] == "ERROR") {
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
          << desc;
    } else {
      ASSERT_TRUE(got.ok()) << desc << ": " << got.status();
      EXPECT_EQ(*got, Hex(f[7])) << desc;
    }
    ++cases;
  }
  EXPECT_GE(cases, 50);
  EXPECT_GE(with_tools, 30);
}

// Tools, or an assistant turn that calls one, for a family that has no
// tool calls: refused, naming the family.
TEST(ChatTemplateTest, ToolsNeedAFamilyWithToolCalls) {
  absl::StatusOr<ChatTemplate> chatml =
      ChatTemplate::FromSource("chatml", "<s>", "<|im_end|>");
  ASSERT_TRUE(chatml.ok());
  EXPECT_FALSE(chatml->supports_tools());
  const std::vector<ChatMessage> user = {{"user", "hi", {}}};
  const std::vector<std::string> tools = {R"({"type": "function"})"};
  absl::StatusOr<std::string> got = chatml->Render(user, true, tools);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("chatml"), std::string::npos);
  const std::vector<ChatMessage> call = {{"user", "hi", {}},
                                         {"assistant", "", {{"f", "{}"}}}};
  EXPECT_EQ(chatml->Render(call, true).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<ChatTemplate> qwen =
      ChatTemplate::FromSource("qwen2.5", "", "<|im_end|>");
  ASSERT_TRUE(qwen.ok());
  absl::StatusOr<std::string> q = qwen->Render(user, true);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(*q,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You "
            "are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi"
            "<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, SmolLm2DefaultSystemIsExtracted) {
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromSource(
      ReadFile(ChatDataPath("smollm2.jinja")), "<|im_start|>", "<|im_end|>");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  EXPECT_EQ(tmpl->name(), "chatml");
  ASSERT_TRUE(tmpl->default_system().has_value());
  EXPECT_EQ(*tmpl->default_system(),
            "You are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face");
  absl::StatusOr<std::string> out =
      tmpl->Render({{"user", "Hi"}}, /*add_generation_prompt=*/true);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
            "trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>"
            "\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, DefaultSystemWithEscapedNewlines) {
  // HF JSON often stores "\\n" (a Jinja escape) rather than a raw newline.
  const std::string source =
      "{% for message in messages %}{% if loop.first and "
      "messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nBe "
      "brief.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + "
      "'\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromSource(source, "", "");
  ASSERT_TRUE(tmpl.ok());
  ASSERT_TRUE(tmpl->default_system().has_value());
  EXPECT_EQ(*tmpl->default_system(), "Be brief.");
}

TEST(ChatTemplateTest, PlainChatMlHasNoDefaultSystem) {
  absl::StatusOr<ChatTemplate> tmpl =
      ChatTemplate::FromSource(ReadFile(ChatDataPath("chatml.jinja")), "", "");
  ASSERT_TRUE(tmpl.ok());
  EXPECT_FALSE(tmpl->default_system().has_value());
}

// A conversation rendered whole equals its first turns plus the
// continuation: what a session holds after the first reply (which ends at
// the assistant's text) plus what the next turn appends.
TEST(ChatTemplateTest, ContinuationExtendsTheConversation) {
  struct Case {
    const char* file;
    const char* bos;
    const char* eos;
  };
  for (const Case& c : {Case{"smollm2.jinja", "<|im_start|>", "<|im_end|>"},
                        {"chatml.jinja", "", "<|im_end|>"},
                        {"llama3.jinja", "<|begin_of_text|>", "<|eot_id|>"},
                        {"gemma.jinja", "<bos>", "<eos>"},
                        {"zephyr.jinja", "<s>", "</s>"},
                        {"phi3.jinja", "<s>", "<|endoftext|>"}}) {
    SCOPED_TRACE(c.file);
    absl::StatusOr<ChatTemplate> tmpl =
        ChatTemplate::FromSource(ReadFile(ChatDataPath(c.file)), c.bos, c.eos);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    const std::vector<ChatMessage> first = {{"user", "Hi"},
                                            {"assistant", "Hello!"}};
    const std::vector<ChatMessage> next = {{"user", "Name a color."}};
    std::vector<ChatMessage> whole = first;
    whole.insert(whole.end(), next.begin(), next.end());
    absl::StatusOr<std::string> expected = tmpl->Render(whole, true);
    ASSERT_TRUE(expected.ok()) << expected.status();
    // The context after the first reply: the first turn's prompt and the
    // reply's text.
    absl::StatusOr<std::string> prompt = tmpl->Render({first[0]}, true);
    ASSERT_TRUE(prompt.ok());
    absl::StatusOr<std::string> more = tmpl->RenderContinuation(next, true);
    ASSERT_TRUE(more.ok()) << more.status();
    EXPECT_EQ(*prompt + "Hello!" + *more, *expected);
  }
  absl::StatusOr<ChatTemplate> v3 = ChatTemplate::FromSource(
      ReadFile(ChatDataPath("mistral_v3.jinja")), "<s>", "</s>");
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(v3->RenderContinuation({{"system", "s"}, {"user", "u"}}, true)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, UnknownTemplateSuggestsRawPrompt) {
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromSource(
      "{% for m in messages %}{{ m.content }}{% endfor %}", "", "");
  ASSERT_EQ(tmpl.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tmpl.status().message().find("raw prompt"), std::string::npos);
}

TEST(ChatTemplateTest, InvalidRoleIsInvalidArgument) {
  for (const char* file :
       {"smollm2.jinja", "llama2.jinja", "llama3.jinja", "mistral_v7.jinja",
        "gemma.jinja", "zephyr.jinja", "phi3.jinja", "deepseek.jinja"}) {
    absl::StatusOr<ChatTemplate> tmpl =
        ChatTemplate::FromSource(ReadFile(ChatDataPath(file)), "<s>", "</s>");
    ASSERT_TRUE(tmpl.ok()) << file;
    absl::StatusOr<std::string> out =
        tmpl->Render({{"user", "hi"}, {"wizard", "x"}}, true);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << file;
    EXPECT_NE(out.status().message().find("wizard"), std::string::npos);
  }
}

TEST(ChatTemplateTest, BareFamilyNamesAreAccepted) {
  absl::StatusOr<ChatTemplate> tmpl =
      ChatTemplate::FromSource("llama3", "<|begin_of_text|>", "<|eot_id|>");
  ASSERT_TRUE(tmpl.ok());
  EXPECT_EQ(tmpl->name(), "llama3");
}

}  // namespace
}  // namespace braid::model
