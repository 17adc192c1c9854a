#include "core/engine/types.h"

#include "absl/strings/str_cat.h"

namespace ferry {

std::string TopicPartition::ToString() const { return absl::StrCat(topic, "/", partition); }

}  // namespace ferry
