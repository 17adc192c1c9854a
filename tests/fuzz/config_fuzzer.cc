// Fuzz target: the config parser (core/config/config.h ParseConfig) on arbitrary
// YAML text. It must never crash, hang or throw: an error is a fine answer.
// An accepted config must also be one the rest of ferry can start from (the
// checks below are what the engine and the pool rely on).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "core/config/config.h"

namespace {

void Fail(const char* what) {
  std::fprintf(stderr, "config fuzzer: accepted config violates: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ferry::Config> config = ferry::ParseConfig(text, "fuzz.yaml");
  if (!config.ok()) {
    // Errors are fine, but they must say where they come from.
    if (config.status().message().find("fuzz.yaml") == absl::string_view::npos) {
      std::fprintf(stderr, "error without the file name: %s\n",
                   std::string(config.status().message()).c_str());
      std::abort();
    }
    return 0;
  }
  if (config->lane_count <= 0) Fail("lane_count > 0");
  if (config->lane_capacity <= 0) Fail("lane_capacity > 0");
  if (config->max_buffered_events <= 0) Fail("max_buffered_events > 0");
  for (const ferry::ProcessorConfig& processor : config->processors) {
    if (processor.max_in_flight <= 0) Fail("processors[].max_in_flight > 0");
    if (processor.max_batch <= 0) Fail("processors[].max_batch > 0");
    if (processor.max_attempts <= 0) Fail("processors[].max_attempts > 0");
    if (processor.streams <= 0) Fail("processors[].streams > 0");
  }
  return 0;
}
