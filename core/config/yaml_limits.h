// A cheap pass over YAML text, before it is loaded into a tree: counts the
// values (scalars, lists, maps, aliases) and the documents without building
// them. yaml-cpp's tree costs about 460 bytes per value, so a 1 MiB file of
// `[a,a,a,...]` would take 240 MB to load; counting first refuses it in
// constant memory.
//
// It also stands between ferry and a yaml-cpp defect: on some malformed
// input (a lone `,`) yaml-cpp's parser reports an empty document again and
// again without consuming anything, so YAML::LoadAll never returns
// (jbeder/yaml-cpp#1040, fixed upstream by #1319, not in Debian 12's
// 0.7.0). The scan refuses a document that starts where the previous one
// did, so callers load the first document with YAML::Load and never need
// LoadAll.
//
// Threading: a pure function; call it from any thread.
#ifndef FERRY_CORE_CONFIG_YAML_LIMITS_H_
#define FERRY_CORE_CONFIG_YAML_LIMITS_H_

#include <cstddef>
#include <string>

namespace ferry {

struct YamlScan {
  // The 1-based line of the value that takes the text over `max_values`,
  // or 0 if it has at most that many (in all its documents).
  int line_over_limit = 0;
  // Documents seen (the scan stops at the second one, or at the limit).
  int documents = 0;
  // The 1-based line of the second document's first value, when there is
  // one.
  int second_document_line = 0;
};

// Throws YAML::Exception on a syntax error, like YAML::Load, including the
// input yaml-cpp would otherwise loop on.
YamlScan ScanYaml(const std::string& text, size_t max_values);

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_YAML_LIMITS_H_
