// WorkerText: makes a string a worker sent (Ready.worker_name, a Result's
// message or retry reason, a gRPC status message) safe to put into ferry's
// log lines, metric labels, RPC answers and dead-letter headers.
//
// A worker is outside ferry's trust boundary: its strings may be megabytes
// long, hold newlines or terminal escapes that forge log lines, or be invalid
// UTF-8 that a proto3 `string` field (GetStatus, a dead-letter header read by
// a strict client) must not carry. Sanitize() bounds the length and makes the
// text one printable line of valid UTF-8:
//   * control characters (C0, DEL, C1) and the Unicode line/paragraph
//     separators and bidirectional overrides are written as `\xNN` /
//     `\u{XXXX}` escapes, so the line still says what was sent;
//   * each byte that is not part of valid UTF-8 becomes U+FFFD;
//   * the result holds at most `max_bytes` bytes of that text (cut on a
//     character boundary), followed, when cut, by `...[N bytes truncated]`
//     (N counts the input bytes not shown), so the whole answer stays under
//     max_bytes + 32 bytes and the work done is bounded by max_bytes, not by
//     the input's size.
//
// Threading: pure functions, safe from any thread.
#ifndef FERRY_CORE_COMMON_WORKER_TEXT_H_
#define FERRY_CORE_COMMON_WORKER_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace ferry {

// Bounds for what a worker calls itself and for a message it sends.
inline constexpr size_t kMaxWorkerNameBytes = 256;
inline constexpr size_t kMaxWorkerMessageBytes = 1024;

std::string SanitizeWorkerText(absl::string_view text, size_t max_bytes);

inline std::string SanitizeWorkerName(absl::string_view name) {
  return SanitizeWorkerText(name, kMaxWorkerNameBytes);
}
inline std::string SanitizeWorkerMessage(absl::string_view message) {
  return SanitizeWorkerText(message, kMaxWorkerMessageBytes);
}

}  // namespace ferry

#endif  // FERRY_CORE_COMMON_WORKER_TEXT_H_
