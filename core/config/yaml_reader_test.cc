#include "core/config/yaml_reader.h"

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry::config_yaml {
namespace {

enum class Color { kRed, kGreen, kBlue };

absl::Status ReadColor(const YamlReader& reader, const std::string& text, Color* out) {
  return reader.GetEnum<Color>(YAML::Load(text), "paint.color", 3, "color",
                               {{"red", Color::kRed},
                                {"green", Color::kGreen},
                                {"blue", Color::kBlue}},
                               out);
}

TEST(YamlReaderTest, EnumReaderTakesEveryNameAndListsThemOtherwise) {
  YamlReader reader("f.yaml");
  Color color = Color::kRed;
  ASSERT_TRUE(ReadColor(reader, "blue", &color).ok());
  EXPECT_EQ(color, Color::kBlue);
  ASSERT_TRUE(ReadColor(reader, "green", &color).ok());
  EXPECT_EQ(color, Color::kGreen);
  absl::Status status = ReadColor(reader, "Blue\x01", &color);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "f.yaml:3: paint.color: unknown color \"Blue\\001\" (use red, green or blue)");
  EXPECT_EQ(color, Color::kGreen);  // unchanged on error
  status = ReadColor(reader, "[red]", &color);
  EXPECT_EQ(status.message(),
            "f.yaml:3: paint.color: expected a single value such as `red`, got a list");
}

TEST(YamlReaderTest, ErrorsNameFileLineAndPath) {
  YamlReader reader("ferry.yaml");
  EXPECT_EQ(reader.Error(0, "", "x").message(), "ferry.yaml:1: x");
  EXPECT_EQ(reader.Error(7, "a.b", "y").message(), "ferry.yaml:7: a.b: y");
}

TEST(YamlReaderTest, ForEachFieldRejectsUnknownAndDuplicatedKeys) {
  YamlReader reader("f.yaml");
  const YAML::Node node = YAML::Load("a: 1\nb: 2\na: 3\n");
  std::vector<std::string> seen;
  auto record = [&](const std::string& key, const std::string& path, int key_line,
                    const YAML::Node&, int) -> absl::Status {
    seen.push_back(path + "@" + std::to_string(key_line));
    (void)key;
    return absl::OkStatus();
  };
  absl::Status status = reader.ForEachField(node, "s", 1, {"a", "b"}, record);
  EXPECT_EQ(status.message(),
            "f.yaml:3: s.a: key is set twice (first on line 1); keep only one");
  EXPECT_THAT(seen, ::testing::ElementsAre("s.a@1", "s.b@2"));
  status = reader.ForEachField(YAML::Load("c: 1\n"), "s", 1, {"a", "b"}, record);
  EXPECT_EQ(status.message(), "f.yaml:1: s.c: unknown key (known keys: a, b)");
}

TEST(YamlReaderTest, TypedScalarsRefuseGarbageWithTheirHelp) {
  YamlReader reader("f.yaml");
  int64_t bytes = 0;
  ASSERT_TRUE(reader.GetBytes(YAML::Load("2KiB"), "p", 1, &bytes).ok());
  EXPECT_EQ(bytes, 2048);
  EXPECT_THAT(std::string(reader.GetBytes(YAML::Load("99999999999GiB"), "p", 1, &bytes)
                              .message()),
              ::testing::HasSubstr("too large"));
  absl::Duration d;
  EXPECT_THAT(std::string(reader.GetDuration(YAML::Load("5"), "p", 1, true, "5s", &d)
                              .message()),
              ::testing::HasSubstr("has no unit"));
  int n = 0;
  EXPECT_THAT(std::string(reader.GetInt(YAML::Load("1.5"), "p", 1, 1, "n: 2", &n).message()),
              ::testing::HasSubstr("expected a whole number"));
  std::string address;
  EXPECT_FALSE(reader.GetListenAddress(YAML::Load("host:99999"), "p", 1, &address).ok());
  EXPECT_TRUE(reader.GetListenAddress(YAML::Load("'[::1]:0'"), "p", 1, &address).ok());
}

TEST(YamlReaderTest, LocationsAreSourceAndLine) {
  YamlReader reader("dir/ferry.yaml");
  reader.Locate("kafka.acks", 4);
  EXPECT_THAT(reader.Locations(),
              ::testing::ElementsAre(::testing::Pair("kafka.acks", "dir/ferry.yaml:4")));
}

}  // namespace
}  // namespace ferry::config_yaml
