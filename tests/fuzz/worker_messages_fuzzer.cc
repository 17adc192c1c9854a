// Fuzz target: the worker-message path. Arbitrary ProcessResponse bytes and
// sequences (Ready, Credit, Results with any ids, statuses, credit and
// retry_after; bytes that do not parse) from several worker streams, mixed
// with submits, stream losses, revokes, resets, skips, commits and timer
// ticks, against a real Engine with fake streams (EngineModel applies each
// message as server/workers/worker_pool.cc does). After every step the model's
// properties must hold (no crash, a consistent snapshot, nothing committed
// that was not finished, order, credit), and a final drain must lose nothing.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tests/fuzz/engine_model.h"

namespace {

using ::ferry::fuzz::EngineModel;

absl::Status Step(EngineModel& model, FuzzedDataProvider& input) {
  const int stream = input.ConsumeIntegral<uint8_t>();
  const int pick = input.ConsumeIntegral<uint8_t>();
  switch (input.ConsumeIntegralInRange(0, 13)) {
    case 0:
    case 1:
      return model.Submit(pick, input.ConsumeIntegral<uint8_t>());
    case 2:
    case 3:
      return model.WorkerBytes(stream, input.ConsumeRandomLengthString(2048));
    case 4: {
      // 0..4 are the protocol's statuses (4: NOT_ATTEMPTED), 5 an unknown one.
      const auto status =
          static_cast<ferry::v1::Result::Status>(input.ConsumeIntegralInRange(0, 5));
      const uint32_t credit = input.ConsumeIntegralInRange<uint32_t>(0, 3);
      const uint32_t retry_after_ms = input.ConsumeBool() ? input.ConsumeIntegral<uint32_t>() : 0;
      return model.Answer(stream, pick, status, credit, retry_after_ms);
    }
    case 5:
      return model.Ready(stream, input.ConsumeIntegralInRange<uint32_t>(0, 16),
                         input.ConsumeIntegralInRange<uint32_t>(0, 6));
    case 6:
      return model.Credit(stream, input.ConsumeIntegral<uint32_t>() % 8);
    case 7:
      return model.Tick(absl::Milliseconds(input.ConsumeIntegralInRange(0, 12000)));
    case 8:
      return model.Commit();
    case 9:
      return model.CloseStream(stream);
    case 10:
      return model.Revoke(pick);
    case 11:
      return model.Assign(pick);
    case 12:
      return model.Reset(pick, input.ConsumeBool());
    default:
      return model.Skip(pick, input.ConsumeIntegral<uint8_t>());
  }
}

[[noreturn]] void Fail(const std::string& when, const absl::Status& status) {
  std::fprintf(stderr, "worker_messages fuzzer: %s: %s\n", when.c_str(),
               status.ToString().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  ferry::fuzz::ModelOptions options;
  options.policy = input.ConsumeBool() ? ferry::FailurePolicy::kBlock : ferry::FailurePolicy::kSkip;
  options.max_attempts = input.ConsumeIntegralInRange(1, 4);
  options.max_in_flight = input.ConsumeIntegralInRange(1, 8);
  options.retry_on_timeout = input.ConsumeBool();
  options.max_buffered = 50;
  EngineModel model(options);
  model.OpenStream();
  model.OpenStream();
  for (int step = 0; step < 500 && input.remaining_bytes() > 0; ++step) {
    const absl::Status status = Step(model, input);
    if (!status.ok()) Fail("step " + std::to_string(step), status);
  }
  const absl::Status drained = model.Drain();
  if (!drained.ok()) Fail("drain", drained);
  return 0;
}
