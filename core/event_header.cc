#include "core/event_header.h"

#include <limits>
#include <utility>

#include "google/protobuf/stubs/common.h"

namespace ferry {

bool IsValidUtf8(absl::string_view text) {
  // The validator takes an int length; no record field comes near 2 GiB.
  if (text.size() > static_cast<size_t>(std::numeric_limits<int>::max())) return false;
  return google::protobuf::internal::IsStructurallyValidUTF8(text.data(),
                                                             static_cast<int>(text.size()));
}

std::string ToValidUtf8(absl::string_view text) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(text.size() + 8);
  while (!text.empty()) {
    // The longest valid prefix is kept as is; the byte after it cannot start
    // a valid sequence there, so it is replaced and the scan goes on.
    const int valid = google::protobuf::internal::UTF8SpnStructurallyValid(
        google::protobuf::StringPiece(text.data(), text.size()));
    out.append(text.data(), static_cast<size_t>(valid));
    text.remove_prefix(static_cast<size_t>(valid));
    if (text.empty()) break;
    out.append(kReplacement, 3);
    text.remove_prefix(1);
  }
  return out;
}

void AddEventHeader(v1::Event* event, std::string name, std::string value) {
  v1::Header* header = event->add_headers();
  if (IsValidUtf8(name)) {
    header->set_key(std::move(name));
  } else {
    header->set_key(ToValidUtf8(name));
    header->set_raw_key(std::move(name));
  }
  header->set_value(std::move(value));
}

const std::string& OriginalName(const v1::Header& header) {
  return header.raw_key().empty() ? header.key() : header.raw_key();
}

}  // namespace ferry
