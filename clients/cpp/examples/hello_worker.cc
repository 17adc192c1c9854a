// The "hello world" of a ferry processor: ack every event, fail empty ones.
// Run it, point a ferry processor target at 127.0.0.1:50051, stop it with Ctrl-C
// (example_worker.cc shows a graceful SIGTERM shutdown).
#include <cstdio>

#include "clients/cpp/worker.h"

ferry::sdk::Outcome Handle(const ferry::v1::Event& event) {
  if (event.payload().empty()) return ferry::sdk::Outcome::Fail("empty payload");
  std::printf("%s/%d@%lld: %s\n", event.topic().c_str(), event.partition(),
              static_cast<long long>(event.offset()), event.payload().c_str());
  return ferry::sdk::Outcome::Ok();  // or Outcome::Retry("why", absl::Seconds(5))
}

int main() {
  ferry::sdk::WorkerOptions options;
  options.name = "hello";
  auto worker = ferry::sdk::Worker::Create(options, Handle);
  if (!worker.ok() || !(*worker)->Start("127.0.0.1:50051").ok()) return 1;
  (*worker)->Wait();  // serves until Shutdown()
}
