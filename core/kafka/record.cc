#include "core/kafka/record.h"

namespace ferry {

int64_t RawRecord::ByteSize() const {
  // Fixed overhead for the struct, the Event and bookkeeping around it.
  int64_t size = 256 + static_cast<int64_t>(topic.size() + payload.size());
  if (key) size += static_cast<int64_t>(key->size());
  for (const auto& [name, value] : headers) {
    size += static_cast<int64_t>(name.size() + value.size()) + 32;
  }
  return size;
}

}  // namespace ferry
