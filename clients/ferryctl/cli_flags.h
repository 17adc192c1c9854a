// ferryctl's command line: a subcommand and its flags.
//
// Parsed here rather than by absl::ParseCommandLine because ferryctl's exit
// codes are a contract (2 = usage error) and absl exits 1 on an unknown flag;
// because each subcommand accepts its own flags (absl's are global); because
// `reset` must know whether --to-offset was given at all (0 is a valid
// offset); and because Kafka's tools spell flags with dashes (--dry-run)
// where absl wants underscores. Values are still converted with
// absl::ParseFlag, so bools, integers and durations read as with absl flags.
//
// Accepted forms: `--name=value`, `--name value` (not for bools), `--name`
// and `--noname` for bools, one or two leading dashes, `-` or `_` inside the
// name; `--` ends the flags. The last of repeated flags wins.
//
// Threading: plain values.
#ifndef FERRY_CLIENTS_FERRYCTL_CLI_FLAGS_H_
#define FERRY_CLIENTS_FERRYCTL_CLI_FLAGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/flags/marshalling.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ferry::ferryctl {

struct FlagSpec {
  // Underscore spelling, e.g. "dry_run".
  std::string name;
  // A bool takes no separate value argument.
  bool is_bool = false;
};

class CommandLine {
 public:
  // `args` excludes the program name. Every flag must be in `known`;
  // InvalidArgument otherwise (unknown flag, missing value).
  static absl::StatusOr<CommandLine> Parse(const std::vector<std::string>& args,
                                           const std::vector<FlagSpec>& known);

  // Arguments that are not flags (the subcommand first).
  const std::vector<std::string>& positional() const { return positional_; }
  bool Has(absl::string_view name) const { return values_.count(std::string(name)) > 0; }
  // Names of the flags given, sorted.
  std::vector<std::string> Given() const;

  // The flag's value, `fallback` when it was not given, InvalidArgument when
  // it does not parse as a T.
  template <typename T>
  absl::StatusOr<T> Get(absl::string_view name, T fallback) const {
    auto it = values_.find(std::string(name));
    if (it == values_.end()) return fallback;
    T value;
    std::string error;
    // Explicitly the template: absl/time has a deprecated non-template overload.
    if (!absl::ParseFlag<T>(absl::string_view(it->second), &value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, "=", it->second, ": ", error));
    }
    return value;
  }

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::string> values_;
};

}  // namespace ferry::ferryctl

#endif  // FERRY_CLIENTS_FERRYCTL_CLI_FLAGS_H_
