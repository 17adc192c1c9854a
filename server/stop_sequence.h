// StopSequence: the record of what the server has started, so that shutdown
// is the reverse of startup by construction instead of a hand-written list.
// Each component registers its stop action right after it started; StopAll
// runs them last-started first, each exactly once. A startup that fails half
// way stops exactly what it had started.
//
// Threading: owner thread only (the server's Start/Stop caller).
#ifndef FERRY_SERVER_STOP_SEQUENCE_H_
#define FERRY_SERVER_STOP_SEQUENCE_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ferry {

class StopSequence {
 public:
  // `name` started; `stop` undoes it.
  void Started(std::string name, std::function<void()> stop);
  // Runs every stop action not yet run, in reverse order of Started.
  // Idempotent.
  void StopAll();

  // Names in the order they started / stopped.
  const std::vector<std::string>& started() const { return started_; }
  const std::vector<std::string>& stopped() const { return stopped_; }

 private:
  std::vector<std::pair<std::string, std::function<void()>>> running_;
  std::vector<std::string> started_;
  std::vector<std::string> stopped_;
};

}  // namespace ferry

#endif  // FERRY_SERVER_STOP_SEQUENCE_H_
