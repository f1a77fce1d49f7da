#include "openai/tools.h"

#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace braid::openai {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

void AppendString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (c < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", c);
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

void Append(const Json& v, std::string* out) {
  if (v.is_object()) {
    out->push_back('{');
    bool first = true;
    for (const auto& [key, value] : v.items()) {
      if (!first) out->append(", ");
      first = false;
      AppendString(key, out);
      out->append(": ");
      Append(value, out);
    }
    out->push_back('}');
  } else if (v.is_array()) {
    out->push_back('[');
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out->append(", ");
      Append(v[i], out);
    }
    out->push_back(']');
  } else if (v.is_string()) {
    AppendString(v.get<std::string>(), out);
  } else {
    out->append(v.dump());  // numbers, true, false, null
  }
}

}  // namespace

std::string PyJson(const Json& v) {
  std::string out;
  Append(v, &out);
  return out;
}

ToolCallSplitter::ToolCallSplitter(std::string id_prefix)
    : id_prefix_(std::move(id_prefix)) {}

ToolCallSplitter::Piece ToolCallSplitter::Push(absl::string_view text) {
  held_.append(text.data(), text.size());
  Piece out;
  Scan(&out);
  return out;
}

ToolCallSplitter::Piece ToolCallSplitter::Finish() {
  Piece out;
  out.content = std::move(held_);
  held_.clear();
  in_block_ = false;
  return out;
}

void ToolCallSplitter::Scan(Piece* out) {
  while (true) {
    if (in_block_) {
      const size_t close = held_.find(kClose);
      if (close == std::string::npos) return;  // the block goes on
      const size_t end = close + kClose.size();
      ToolCall call;
      if (ParseCall(absl::string_view(held_).substr(kOpen.size(),
                                                    close - kOpen.size()),
                    &call)) {
        out->calls.push_back(std::move(call));
        after_call_ = true;
      } else {
        out->content.append(held_, 0, end);
      }
      held_.erase(0, end);
      in_block_ = false;
      continue;
    }
    if (after_call_) {
      size_t i = 0;
      while (i < held_.size() && absl::ascii_isspace(held_[i])) ++i;
      held_.erase(0, i);
      if (held_.empty()) return;
      after_call_ = false;
    }
    const size_t open = held_.find(kOpen);
    if (open != std::string::npos) {
      out->content.append(held_, 0, open);
      held_.erase(0, open);
      in_block_ = true;
      continue;
    }
    // Hold the longest end of the text that may begin an opening tag.
    size_t keep = std::min(held_.size(), kOpen.size() - 1);
    while (keep > 0 && std::string_view(held_).substr(held_.size() - keep) !=
                           kOpen.substr(0, keep)) {
      --keep;
    }
    out->content.append(held_, 0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return;
  }
}

bool ToolCallSplitter::ParseCall(absl::string_view body, ToolCall* call) {
  const Json v = Json::parse(absl::StripAsciiWhitespace(body), nullptr,
                             /*allow_exceptions=*/false);
  if (v.is_discarded() || !v.is_object()) return false;
  const auto name = v.find("name");
  if (name == v.end() || !name->is_string() ||
      name->get<std::string>().empty()) {
    return false;
  }
  const auto arguments = v.find("arguments");
  if (arguments == v.end() || arguments->is_null()) {
    call->arguments = "{}";
  } else if (arguments->is_object()) {
    call->arguments = PyJson(*arguments);
  } else {
    return false;
  }
  call->name = name->get<std::string>();
  call->id = absl::StrCat(id_prefix_, num_calls_++);
  return true;
}

ToolCallSplitter::Piece SplitToolCalls(absl::string_view text,
                                       std::string id_prefix) {
  ToolCallSplitter splitter(std::move(id_prefix));
  ToolCallSplitter::Piece out = splitter.Push(text);
  ToolCallSplitter::Piece rest = splitter.Finish();
  out.content += rest.content;
  out.content = std::string(absl::StripAsciiWhitespace(out.content));
  return out;
}

}  // namespace braid::openai
