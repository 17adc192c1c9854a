#include "core/yaml_limits.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <sstream>

namespace ferry {
namespace {

// Thrown by the counter to stop the parser at the limit (the parser has no
// other way to stop inside a document); never leaves this file.
struct LimitReached {};

class ValueCounter : public YAML::EventHandler {
 public:
  explicit ValueCounter(size_t max_values) : max_values_(max_values) {}

  int line_over() const { return line_over_; }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Count(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Count(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Count(mark);
  }
  void OnMapEnd() override {}

 private:
  void Count(const YAML::Mark& mark) {
    if (++values_ > max_values_) {
      line_over_ = mark.line >= 0 ? mark.line + 1 : 1;
      throw LimitReached{};
    }
  }

  const size_t max_values_;
  size_t values_ = 0;
  int line_over_ = 0;
};

}  // namespace

int LineOverYamlValueLimit(const std::string& text, size_t max_values) {
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  ValueCounter counter(max_values);
  try {
    while (parser.HandleNextDocument(counter)) {
    }
  } catch (const LimitReached&) {
  }
  return counter.line_over();
}

}  // namespace ferry
