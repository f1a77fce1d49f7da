// The braid CLI's command line: flags before or after the command, as
// `--flag=value` or `--flag value`, `--` ending the flags (what follows is
// positional even if it starts with "--"). Pure functions.
#ifndef BRAID_TOOLS_CLI_ARGS_H_
#define BRAID_TOOLS_CLI_ARGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace braid::cli {

struct FlagSpec {
  const char* name;  // without the dashes: "max-tokens"
  bool takes_value;  // else a switch (--flag, or --flag=true|false)
  // The commands it belongs to, comma-separated; "" = every command (a
  // global flag).
  const char* commands;
};

struct ParsedArgs {
  std::string command;                  // the first positional argument
  std::vector<std::string> positional;  // after the command
  // Every value given, in order (repeatable flags); switches hold "true" or
  // "false".
  std::map<std::string, std::vector<std::string>> flags;

  bool Has(const std::string& name) const { return flags.count(name) > 0; }
  // The last value given, or `fallback`.
  std::string Get(const std::string& name,
                  const std::string& fallback = "") const;
  bool Switch(const std::string& name) const { return Get(name) == "true"; }
};

// INVALID_ARGUMENT naming the flag: unknown, missing its value, a switch
// given a value other than true/false, or not a flag of the command.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     absl::Span<const FlagSpec> known);

}  // namespace braid::cli

#endif  // BRAID_TOOLS_CLI_ARGS_H_
