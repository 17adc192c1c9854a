// FakeDeadLetterWriter: records dead letters; the test decides when and how
// each write completes (as Kafka's delivery report would, later and on
// another call stack).
//
// Threading: not thread-safe; tests drive it from one thread.
#ifndef FERRY_TESTS_MOCKS_FAKE_DEAD_LETTER_WRITER_H_
#define FERRY_TESTS_MOCKS_FAKE_DEAD_LETTER_WRITER_H_

#include <utility>
#include <vector>

#include "core/engine/dead_letter.h"

namespace ferry::testing {

class FakeDeadLetterWriter final : public DeadLetterWriter {
 public:
  void Write(DeadLetter letter, Done done) override {
    written_.push_back(letter);
    pending_.emplace_back(std::move(letter), std::move(done));
  }

  // Every letter ever written (including rewrites after failures).
  const std::vector<DeadLetter>& written() const { return written_; }
  size_t pending() const { return pending_.size(); }
  // Completes the oldest outstanding write with `status`.
  void Complete(absl::Status status = absl::OkStatus()) {
    auto [letter, done] = std::move(pending_.front());
    pending_.erase(pending_.begin());
    done(status);
  }

 private:
  std::vector<DeadLetter> written_;
  std::vector<std::pair<DeadLetter, Done>> pending_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_MOCKS_FAKE_DEAD_LETTER_WRITER_H_
