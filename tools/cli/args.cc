#include "tools/cli/args.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace braid::cli {

std::string ParsedArgs::Get(const std::string& name,
                            const std::string& fallback) const {
  auto it = flags.find(name);
  return it == flags.end() || it->second.empty() ? fallback : it->second.back();
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     absl::Span<const FlagSpec> known) {
  ParsedArgs out;
  std::vector<std::pair<const FlagSpec*, std::string>> given;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (flags_done || !absl::StartsWith(a, "--") || a == "-") {
      if (out.command.empty()) {
        out.command = a;
      } else {
        out.positional.push_back(a);
      }
      continue;
    }
    if (a == "--") {
      flags_done = true;
      continue;
    }
    std::string name = a.substr(2), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& f : known) {
      if (name == f.name) spec = &f;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (spec->takes_value) {
      if (!inline_value) {
        if (i + 1 >= args.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("--", name, " needs a value"));
        }
        value = args[++i];
      }
    } else if (!inline_value) {
      value = "true";
    } else if (value != "true" && value != "false") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", name, " takes true or false, got \"", value, "\""));
    }
    given.push_back({spec, value});
  }
  for (const auto& [spec, value] : given) {
    const std::vector<std::string> commands =
        absl::StrSplit(spec->commands, ',', absl::SkipEmpty());
    if (!commands.empty() && !out.command.empty() &&
        std::find(commands.begin(), commands.end(), out.command) ==
            commands.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", spec->name, " is not a flag of ", out.command));
    }
    out.flags[spec->name].push_back(value);
  }
  return out;
}

}  // namespace braid::cli
