#include "core/config/yaml_limits.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <sstream>

#include <yaml-cpp/exceptions.h>

namespace ferry {
namespace {

// Thrown by the counter to stop the parser at the limit or at a second
// document (the parser has no other way to stop inside a document); never
// leaves this file.
struct StopScan {};

class ValueCounter : public YAML::EventHandler {
 public:
  explicit ValueCounter(size_t max_values) : max_values_(max_values) {}

  const YamlScan& scan() const { return scan_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    // A document that starts where the last one did means yaml-cpp is not
    // consuming its input (see the header): a syntax error, not a document.
    if (scan_.documents > 0 && mark.pos <= last_document_pos_) {
      throw YAML::ParserException(mark, "unexpected token: no YAML value can start here");
    }
    last_document_pos_ = mark.pos;
    ++scan_.documents;
  }
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
    if (scan_.documents > 1) {
      // The second document's first value: where an operator sees it.
      scan_.second_document_line = mark.line >= 0 ? mark.line + 1 : 1;
      throw StopScan{};
    }
    if (++values_ > max_values_) {
      scan_.line_over_limit = mark.line >= 0 ? mark.line + 1 : 1;
      throw StopScan{};
    }
  }

  const size_t max_values_;
  size_t values_ = 0;
  int last_document_pos_ = -1;
  YamlScan scan_;
};

}  // namespace

YamlScan ScanYaml(const std::string& text, size_t max_values) {
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  ValueCounter counter(max_values);
  try {
    while (parser.HandleNextDocument(counter)) {
    }
  } catch (const StopScan&) {
  }
  return counter.scan();
}

}  // namespace ferry
