// What every section parser of ParseConfig takes and records: the reader
// (located errors, typed scalars), the Config being filled, and ParseNotes,
// the facts the checks after parsing need (which optional keys were set, and
// on which lines, so that a cross-field error points at the right line).
//
// Threading: used by the parsing thread only, for one parse.
#ifndef FERRY_CORE_CONFIG_SECTION_H_
#define FERRY_CORE_CONFIG_SECTION_H_

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/config/config_types.h"
#include "core/config/yaml_reader.h"

namespace ferry {

// Lines of one topic's keys, in topics order (0: the key is not set).
struct TopicLines {
  int item = 1;
  int name = 1;
  int type = 0;
  int priority = 0;
};

// Where processors[i].concurrency's limits were written (0: not written, the
// default), for the check against streams x max_in_flight after the entry.
struct ConcurrencyLines {
  int initial_limit = 0;
  int min_limit = 0;
};

struct ParseNotes {
  int root_line = 1;
  int failures_line = 1;  // `failures:`, else the root's line
  bool has_topics = false;
  bool has_processors = false;
  bool has_default_policy = false;      // failures.on_failure
  bool has_metrics_listen = false;      // server.metrics_listen
  bool has_max_delayed_events = false;  // budgets.max_delayed_events
  bool has_lane_count = false;          // lanes.count (not `auto`)
  std::vector<TopicLines> topic_lines;
  int priorities_line = 0;
  int default_priority_line = 0;
  std::map<std::string, int> priority_by_type_lines;
  std::vector<ConcurrencyLines> concurrency_lines;  // in processors order
};

// Parses the top-level section `node` (its dotted `path`, on `line`).
using SectionParser = absl::Status (*)(config_yaml::YamlReader& reader,
                                       const YAML::Node& node, const std::string& path,
                                       int line, Config* config, ParseNotes* notes);

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_SECTION_H_
