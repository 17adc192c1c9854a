// A cheap pass over YAML text, before it is loaded into a tree: counts the
// values (scalars, lists, maps, aliases) without building them. yaml-cpp's
// tree costs about 460 bytes per value, so a 1 MiB file of `[a,a,a,...]`
// would take 240 MB to load; counting first refuses it in constant memory.
//
// Threading: a pure function; call it from any thread.
#ifndef FERRY_CORE_YAML_LIMITS_H_
#define FERRY_CORE_YAML_LIMITS_H_

#include <cstddef>
#include <string>

namespace ferry {

// The 1-based line of the value that takes `text` over `max_values`, or 0
// if it has at most that many (in all its documents). Throws
// YAML::Exception on a syntax error, like YAML::Load.
int LineOverYamlValueLimit(const std::string& text, size_t max_values);

}  // namespace ferry

#endif  // FERRY_CORE_YAML_LIMITS_H_
