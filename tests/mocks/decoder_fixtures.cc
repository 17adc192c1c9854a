#include "tests/mocks/decoder_fixtures.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace ferry::testing {

TopicConfig Topic(const std::string& name, FieldSource key, FieldSource type) {
  TopicConfig topic;
  topic.name = name;
  topic.key = std::move(key);
  topic.type = std::move(type);
  return topic;
}

std::unique_ptr<Decoder> MustCreate(const std::vector<TopicConfig>& topics) {
  absl::StatusOr<std::unique_ptr<Decoder>> decoder = Decoder::Create(topics);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  return decoder.ok() ? std::move(*decoder) : nullptr;
}

}  // namespace ferry::testing
