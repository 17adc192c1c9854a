// The sink of the transport floor (bench/transport_floor.cc,
// bench/README.md): a no-op ferry.v1.Processor that answers every event OK
// at once. It announces Ready{max_in_flight = credit}, then answers each
// Events message with one Results message for all of its events and gives
// their credit back — in Results.credit when the client sent
// `ferry-results-credit: 1` (as ferry does), else as a Credit message after
// the Results. Cancel messages need nothing: nothing is ever held.
//
// Threading: gRPC's sync server runs each stream's Process on its own
// thread; the sink keeps no state across streams, so any number may run.
#ifndef FERRY_BENCH_FLOOR_SINK_H_
#define FERRY_BENCH_FLOOR_SINK_H_

#include <cstdint>

#include "ferry/v1/processor.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace ferry::bench {

inline constexpr char kResultsCreditHeader[] = "ferry-results-credit";

class FloorSink final : public ferry::v1::Processor::Service {
 public:
  explicit FloorSink(uint32_t credit) : credit_(credit) {}

  grpc::Status Process(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<ferry::v1::ProcessResponse,
                                                ferry::v1::ProcessRequest>* stream) override;

 private:
  const uint32_t credit_;
};

}  // namespace ferry::bench

#endif  // FERRY_BENCH_FLOOR_SINK_H_
