// ferryctl's help text (`ferryctl --help`) and each command's usage line
// (printed with a usage error), kept apart from ferryctl.cc so the commands
// there stay readable.
//
// Threading: constants.
#ifndef FERRY_CLIENTS_FERRYCTL_USAGE_H_
#define FERRY_CLIENTS_FERRYCTL_USAGE_H_

#include <map>
#include <string>

namespace ferry::ferryctl {

// Every command, flag and exit code.
extern const char* const kUsage;

// Command name -> its usage line(s); the keys are the commands ferryctl knows.
const std::map<std::string, std::string>& CommandUsages();

}  // namespace ferry::ferryctl

#endif  // FERRY_CLIENTS_FERRYCTL_USAGE_H_
