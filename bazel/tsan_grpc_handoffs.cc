// Makes gRPC's completion hand-offs visible to ThreadSanitizer (--config=tsan).
//
// Debian's libgrpc is not instrumented: a batch started on one thread
// (grpc_call_start_batch) completes on another after a chain of lock-free
// queues and atomics that TSan cannot see. The grpcpp code on both ends is
// inline in gRPC's headers, so it IS compiled (instrumented) into ferry's
// objects: without the edges below TSan reports every CallOpSet a reactor
// fills on one thread and gRPC finalizes on another as a race, although gRPC
// orders them (a batch's ops happen before its completion is delivered).
//
// These definitions interpose gRPC's C entry points (the executable's
// symbols come first in the dynamic lookup; libgrpc++ and libgrpc call them
// through the PLT) and add exactly that documented edge, keyed by the batch's
// tag: release where a tag is handed to gRPC, acquire + release where gRPC
// completes it (grpc_cq_end_op, on the thread that then runs or queues the
// callback), acquire where a completion queue hands it back. One more for the
// callback server: OnDone runs after every other reaction, which gRPC counts
// in ServerCallbackCall::callbacks_outstanding_; the reactions' decrements
// are instrumented (inline in grpcpp), but the last one often happens inside
// libgrpc++, so ScheduleOnDone acquires what the counter released. Nothing
// else is ordered, so a race in ferry's own code stays a report.
#include <dlfcn.h>
#include <grpc/grpc.h>
#include <grpcpp/support/server_callback.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"

extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);

struct grpc_cq_completion;  // internal to libgrpc; only passed through

namespace {

template <typename Function>
Function Next(const char* name) {
  void* next = dlsym(RTLD_NEXT, name);
  if (next == nullptr) {
    std::fprintf(stderr, "tsan_grpc_handoffs: no %s after the executable\n", name);
    std::abort();
  }
  return reinterpret_cast<Function>(next);
}

void Release(void* tag) {
  if (tag != nullptr) __tsan_release(tag);
}

void Acquire(void* tag) {
  if (tag != nullptr) __tsan_acquire(tag);
}

// A pointer to gRPC's private ServerCallbackCall::callbacks_outstanding_: an
// explicit instantiation may name a private member, and the friend function
// it defines hands the pointer out.
using CounterMember = std::atomic_int grpc::internal::ServerCallbackCall::*;
CounterMember CallbacksOutstanding(CounterMember*);
template <CounterMember member>
struct CounterAccess {
  friend CounterMember CallbacksOutstanding(CounterMember*) { return member; }
};
template struct CounterAccess<&grpc::internal::ServerCallbackCall::callbacks_outstanding_>;

}  // namespace

void grpc::internal::ServerCallbackCall::ScheduleOnDone(bool inline_ondone) {
  using Real = void (*)(ServerCallbackCall*, bool);
  static const auto next = Next<Real>("_ZN4grpc8internal18ServerCallbackCall14ScheduleOnDoneEb");
  Acquire(&(this->*CallbacksOutstanding(nullptr)));
  next(this, inline_ondone);
}

extern "C" grpc_call_error grpc_call_start_batch(grpc_call* call, const grpc_op* ops, size_t nops,
                                                 void* tag, void* reserved) {
  static const auto next = Next<decltype(&grpc_call_start_batch)>("grpc_call_start_batch");
  Release(tag);
  return next(call, ops, nops, tag, reserved);
}

extern "C" grpc_call_error grpc_server_request_call(
    grpc_server* server, grpc_call** call, grpc_call_details* details,
    grpc_metadata_array* request_metadata, grpc_completion_queue* cq_bound_to_call,
    grpc_completion_queue* cq_for_notification, void* tag_new) {
  static const auto next = Next<decltype(&grpc_server_request_call)>("grpc_server_request_call");
  Release(tag_new);
  return next(server, call, details, request_metadata, cq_bound_to_call, cq_for_notification,
              tag_new);
}

extern "C" grpc_call_error grpc_server_request_registered_call(
    grpc_server* server, void* registered_method, grpc_call** call, gpr_timespec* deadline,
    grpc_metadata_array* request_metadata, grpc_byte_buffer** optional_payload,
    grpc_completion_queue* cq_bound_to_call, grpc_completion_queue* cq_for_notification,
    void* tag_new) {
  static const auto next = Next<decltype(&grpc_server_request_registered_call)>(
      "grpc_server_request_registered_call");
  Release(tag_new);
  return next(server, registered_method, call, deadline, request_metadata, optional_payload,
              cq_bound_to_call, cq_for_notification, tag_new);
}

extern "C" void grpc_channel_watch_connectivity_state(grpc_channel* channel,
                                                      grpc_connectivity_state last_observed_state,
                                                      gpr_timespec deadline,
                                                      grpc_completion_queue* cq, void* tag) {
  static const auto next = Next<decltype(&grpc_channel_watch_connectivity_state)>(
      "grpc_channel_watch_connectivity_state");
  Release(tag);
  next(channel, last_observed_state, deadline, cq, tag);
}

extern "C" grpc_event grpc_completion_queue_next(grpc_completion_queue* cq, gpr_timespec deadline,
                                                 void* reserved) {
  static const auto next =
      Next<decltype(&grpc_completion_queue_next)>("grpc_completion_queue_next");
  grpc_event event = next(cq, deadline, reserved);
  if (event.type == GRPC_OP_COMPLETE) Acquire(event.tag);
  return event;
}

extern "C" grpc_event grpc_completion_queue_pluck(grpc_completion_queue* cq, void* tag,
                                                  gpr_timespec deadline, void* reserved) {
  static const auto next =
      Next<decltype(&grpc_completion_queue_pluck)>("grpc_completion_queue_pluck");
  grpc_event event = next(cq, tag, deadline, reserved);
  if (event.type == GRPC_OP_COMPLETE) Acquire(event.tag);
  return event;
}

// Declared in libgrpc's internal completion_queue.h (C++ linkage); every
// completion of a tag, for callback and polling queues alike, passes here.
void grpc_cq_end_op(grpc_completion_queue* cq, void* tag, absl::Status error,
                    void (*done)(void* done_arg, grpc_cq_completion* storage), void* done_arg,
                    grpc_cq_completion* storage, bool internal);

void grpc_cq_end_op(grpc_completion_queue* cq, void* tag, absl::Status error,
                    void (*done)(void* done_arg, grpc_cq_completion* storage), void* done_arg,
                    grpc_cq_completion* storage, bool internal) {
  using EndOp = void (*)(grpc_completion_queue*, void*, absl::Status,
                         void (*)(void*, grpc_cq_completion*), void*, grpc_cq_completion*, bool);
  // The mangled name of the declaration above with Debian's absl namespace.
  static const auto next = Next<EndOp>(
      "_Z14grpc_cq_end_opP21grpc_completion_queuePvN4absl7debian36StatusEPFvS1_P18grpc_cq_"
      "completionES1_S6_b");
  Acquire(tag);
  Release(tag);
  next(cq, tag, std::move(error), done, done_arg, storage, internal);
}
