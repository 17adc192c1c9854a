// ScanYaml (core/config/yaml_limits.h) and what ParseConfig makes of its findings:
// the value limit, a second document, and input that makes yaml-cpp 0.7's
// LoadAll loop forever (found by tests/fuzz's config target).
#include "core/config/yaml_limits.h"

#include <string>

#include <yaml-cpp/exceptions.h>

#include "core/config/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

TEST(ScanYamlTest, CountsOneDocument) {
  const YamlScan scan = ScanYaml("a: 1\nb: [x, y]\n", 100);
  EXPECT_EQ(scan.documents, 1);
  EXPECT_EQ(scan.line_over_limit, 0);
}

TEST(ScanYamlTest, NamesTheLineOverTheValueLimit) {
  // Values: the map, a, 1, b, the list, x, y: the 5th (the list) is on line 2.
  const YamlScan scan = ScanYaml("a: 1\nb: [x, y]\n", 4);
  EXPECT_EQ(scan.line_over_limit, 2);
}

TEST(ScanYamlTest, StopsAtTheSecondDocument) {
  const YamlScan scan = ScanYaml("a: 1\n---\nb: 2\n---\nc: 3\n", 100);
  EXPECT_EQ(scan.documents, 2);
  EXPECT_EQ(scan.second_document_line, 3);
}

TEST(ScanYamlTest, ALoneCommaIsASyntaxErrorNotAnEndlessStreamOfDocuments) {
  // yaml-cpp 0.7 reports an empty document here forever without consuming
  // the comma (jbeder/yaml-cpp#1040); the scan must throw, not loop.
  EXPECT_THROW(ScanYaml(",", 1000000), YAML::Exception);
  EXPECT_THROW(ScanYaml("\n,\n", 1000000), YAML::Exception);
  EXPECT_THROW(ScanYaml("topics:\n  - name: a\n,\n", 1000000), YAML::Exception);
}

TEST(ParseConfigYamlTest, ALoneCommaIsAnInvalidYamlErrorWithItsLine) {
  auto config = ParseConfig("\n,\n", "f.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("f.yaml:2"));
  EXPECT_THAT(config.status().message(), HasSubstr("invalid YAML"));
}

TEST(ParseConfigYamlTest, ASecondDocumentIsRefusedWithItsLine) {
  auto config = ParseConfig(
      "topics:\n  - name: a\nprocessors:\n  - name: p\n    target: ipv4:127.0.0.1:1\n---\n"
      "topics: []\n",
      "f.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("f.yaml:7"));
  EXPECT_THAT(config.status().message(), HasSubstr("expected one YAML document"));
}

}  // namespace
}  // namespace ferry
