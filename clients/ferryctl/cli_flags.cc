#include "clients/ferryctl/cli_flags.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"

namespace ferry::ferryctl {
namespace {

const FlagSpec* Find(const std::vector<FlagSpec>& known, const std::string& name) {
  for (const FlagSpec& spec : known) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<CommandLine> CommandLine::Parse(const std::vector<std::string>& args,
                                               const std::vector<FlagSpec>& known) {
  CommandLine result;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      result.positional_.insert(result.positional_.end(), args.begin() + i + 1, args.end());
      break;
    }
    // "-" alone and negative numbers are not flags.
    if (arg.size() < 2 || arg[0] != '-' || (arg[1] >= '0' && arg[1] <= '9')) {
      result.positional_.push_back(arg);
      continue;
    }
    std::string body = arg.substr(absl::StartsWith(arg, "--") ? 2 : 1);
    std::string name = body;
    std::optional<std::string> value;
    if (const size_t eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
    }
    // Only the name is respelled: a value such as a topic keeps its dashes.
    std::replace(name.begin(), name.end(), '-', '_');
    const FlagSpec* spec = Find(known, name);
    if (spec == nullptr && absl::StartsWith(name, "no") && !value.has_value()) {
      const FlagSpec* negated = Find(known, name.substr(2));
      if (negated != nullptr && negated->is_bool) {
        result.values_[negated->name] = "false";
        continue;
      }
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
    }
    if (!value.has_value()) {
      if (spec->is_bool) {
        value = "true";
      } else if (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "--")) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(arg, " needs a value (", arg, "=VALUE or ", arg, " VALUE)"));
      }
    }
    result.values_[spec->name] = *value;
  }
  return result;
}

std::vector<std::string> CommandLine::Given() const {
  std::vector<std::string> names;
  for (const auto& [name, value] : values_) names.push_back(name);
  return names;
}

}  // namespace ferry::ferryctl
