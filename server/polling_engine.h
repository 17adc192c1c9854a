// The gRPC polling engine ferry runs on, chosen before gRPC starts.
//
// Why not gRPC 1.51's default (epoll1): there every polling thread of the
// process shares one epoll set, so the thread of ferry's own gRPC server
// (Control, health, reflection: a sync server, since 1.51's reflection
// service has no callback form) takes turns picking up the worker streams'
// I/O, and each completion it picks up is handed to the callback threads
// that run the stream reactors. With the `poll` engine each completion queue
// polls its own descriptors, so that thread sleeps until a Control call
// comes. Measured on the benchmark: ferry's CPU per KEY event fell by about
// 7% and throughput rose by about 10% (bench/RESULTS.md).
//
// An operator's own GRPC_POLL_STRATEGY is kept.
//
// Threading: call first thing in main, before any thread exists (setenv).
#ifndef FERRY_SERVER_POLLING_ENGINE_H_
#define FERRY_SERVER_POLLING_ENGINE_H_

namespace ferry {

inline constexpr char kPollStrategyVariable[] = "GRPC_POLL_STRATEGY";
inline constexpr char kDefaultPollStrategy[] = "poll";

// Sets GRPC_POLL_STRATEGY to kDefaultPollStrategy unless it is set already.
void UsePollEngineUnlessSet();

}  // namespace ferry

#endif  // FERRY_SERVER_POLLING_ENGINE_H_
