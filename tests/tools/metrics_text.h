// Test-only checker of ferry's Prometheus endpoint: a strict parser of the
// text exposition format (version 0.0.4, what /metrics serves) and a minimal
// HTTP GET to scrape it. Used by the tests that check the exposition
// (server/observability, core/engine stats, tests/e2e); ferry itself and
// ferryctl never read metrics text (ferryctl reads GetStatus over gRPC).
//
// ParseExposition rejects anything a Prometheus server would, and a few
// things it would only warn about: malformed lines, bad metric or label
// names, bad escapes, a TYPE or HELP given twice or a TYPE after its samples,
// a family's samples split up, duplicate series, negative or NaN counters,
// histograms whose buckets are not cumulative, lack +Inf or disagree with
// _count.
//
// Threading: plain functions and values.
#ifndef FERRY_TESTS_TOOLS_METRICS_TEXT_H_
#define FERRY_TESTS_TOOLS_METRICS_TEXT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ferry {

using MetricLabels = std::map<std::string, std::string>;

struct MetricSample {
  std::string name;  // as written: e.g. ferry_enqueue_duration_seconds_bucket
  MetricLabels labels;
  double value = 0;
};

struct MetricFamilyText {
  std::string name;
  std::string type = "untyped";  // counter | gauge | histogram | summary | untyped
  std::string help;
  std::vector<MetricSample> samples;
};

class Exposition {
 public:
  std::map<std::string, MetricFamilyText> families;

  // Samples named `name` whose labels include every pair of `match`.
  std::vector<const MetricSample*> Find(const std::string& name,
                                        const MetricLabels& match = {}) const;
  // The sum of those samples' values (0 when none).
  double Sum(const std::string& name, const MetricLabels& match = {}) const;
  // The value of the one sample with exactly these labels.
  std::optional<double> Value(const std::string& name, const MetricLabels& labels = {}) const;
  // Every sample name present (family names and _bucket/_sum/_count names).
  std::vector<std::string> SampleNames() const;
  bool HasFamily(const std::string& name) const { return families.count(name) > 0; }

 private:
  friend absl::StatusOr<Exposition> ParseExposition(absl::string_view text);
  // Sample name -> family name.
  std::map<std::string, std::string> family_of_;
};

// Parses and validates `text`. Errors name the line: "line 12: ...".
absl::StatusOr<Exposition> ParseExposition(absl::string_view text);

// GET http://`host_port``path` (HTTP/1.0, no TLS); the body of a 200 answer.
// `host_port`: 127.0.0.1:9464, [::1]:9464 or localhost:9464.
absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path,
                                    absl::Duration timeout);

// HttpGet(host_port, "/metrics") then ParseExposition.
absl::StatusOr<Exposition> ScrapeMetrics(const std::string& host_port,
                                         absl::Duration timeout = absl::Seconds(5));

}  // namespace ferry

#endif  // FERRY_TESTS_TOOLS_METRICS_TEXT_H_
