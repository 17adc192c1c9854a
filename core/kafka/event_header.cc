#include "core/kafka/event_header.h"

#include <utility>

#include "core/common/utf8.h"

namespace ferry {

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
