// DeadLetterWriter: where terminal failures go when their policy is `dlq`.
//
// A dead letter carries the original record (key, payload, headers) plus
// headers that say where it came from and why it failed, so an operator can
// inspect it and replay it. The engine counts the offset done only after the
// writer reports success: a failed event is never dropped silently.
//
// Threading: Write may be called with the engine's mutex held, so it must not
// block and must never call `done` inline; `done` runs later on a writer
// thread, exactly once.
#ifndef FERRY_CORE_ENGINE_DEAD_LETTER_H_
#define FERRY_CORE_ENGINE_DEAD_LETTER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace ferry {

struct DeadLetter {
  std::string dead_letter_topic;
  std::string source_topic;
  int32_t source_partition = 0;
  int64_t source_offset = 0;
  std::optional<std::string> key;  // the original record key
  std::string payload;
  std::vector<std::pair<std::string, std::string>> headers;  // original headers
  int64_t timestamp_ms = 0;
  std::string error;      // why it failed
  int attempts = 0;       // attempts made (0 for poison records)
  // The processor that took the record; empty for poison and unrouted
  // records (no processor did). Written as ferry.processor either way.
  std::string processor;
};

// Header names ferry adds to every dead letter.
inline constexpr char kHeaderSourceTopic[] = "ferry.source.topic";
inline constexpr char kHeaderSourcePartition[] = "ferry.source.partition";
inline constexpr char kHeaderSourceOffset[] = "ferry.source.offset";
inline constexpr char kHeaderError[] = "ferry.error";
inline constexpr char kHeaderAttempts[] = "ferry.attempts";
inline constexpr char kHeaderProcessor[] = "ferry.processor";
inline constexpr char kHeaderInstance[] = "ferry.instance";
// Only on a letter too big for its topic, written without parts of it.
inline constexpr char kHeaderPayloadDropped[] = "ferry.payload.dropped";
inline constexpr char kHeaderKeyDropped[] = "ferry.key.dropped";
inline constexpr char kHeaderHeadersDropped[] = "ferry.headers.dropped";
inline constexpr char kHeaderDroppedReason[] = "ferry.dropped.reason";

class DeadLetterWriter {
 public:
  using Done = std::function<void(absl::Status)>;
  virtual ~DeadLetterWriter() = default;
  virtual void Write(DeadLetter letter, Done done) = 0;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_DEAD_LETTER_H_
