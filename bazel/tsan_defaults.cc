// ThreadSanitizer's defaults for every binary and test of --config=tsan,
// linked in through .bazelrc's `--custom_malloc` (the one hook Bazel has for
// adding a library to every link). Compiled in rather than read from
// TSAN_OPTIONS so that the children the end-to-end tests start (ferry, the
// workers, the mock cluster) and a binary run by hand behave the same as the
// test itself. TSAN_OPTIONS still adds to or overrides the options.
//
// Suppressions: third-party code only, each with the upstream issue it works
// around. Never ferry's own code: fix the race instead.

extern "C" const char* __tsan_default_options() {
  // second_deadlock_stack: both stacks of a lock-order inversion.
  // history_size=4: older accesses of long tests are still in the report.
  return "second_deadlock_stack=1:history_size=4";
}

extern "C" const char* __tsan_default_suppressions() {
  return R"(
# abseil 20220623 (Debian's, rebuilt by tools/setup_tsan): Mutex wakes a
# waiter through Waiter::Post on a ThreadIdentity that TSan last saw written
# by mmap in another thread, because the hand-off inside Mutex is hidden from
# TSan on purpose. A false positive, fixed upstream (after this version) by
# ignoring accesses around PerThreadSem::Post in Mutex::IncrementSynchSem:
# https://github.com/abseil/abseil-cpp/issues/1239 (also #760; seen in gRPC
# as https://github.com/grpc/grpc/issues/29550).
race:synchronization_internal::Waiter::Post

# gRPC 1.51 (Debian's, uninstrumented): TSan sees its libc calls (memcpy,
# free, sendmsg, close) through the interceptors but none of the atomics and
# lock-free queues that order them, so it reports gRPC's own buffers and
# sockets, handed between its threads, as races (e.g. free in
# ~grpc_chttp2_transport against sendmsg in tcp_send,
# https://github.com/grpc/grpc/issues/18211; an uninstrumented gRPC in a TSan
# binary, https://github.com/grpc/grpc/issues/16749). Ignores only the memory
# accesses of interceptors called from these libraries; their locking (absl,
# instrumented) and every access of ferry's own code stay checked.
called_from_lib:libgrpc.so
called_from_lib:libgrpc++.so
called_from_lib:libgpr.so
# The same hand-offs reach instrumented code through gRPC's absl::Status
# helpers (error payloads built on one gRPC thread, read on another), which
# call the instrumented abseil; these helpers never call back into ferry.
race:grpc_core::StatusGetInt
race:grpc_core::StatusSetInt
race:grpc_core::StatusGetStr
race:grpc_core::StatusSetStr
race:grpc_core::StatusGetTime
race:grpc_core::StatusSetTime
race:grpc_core::StatusAddChild
race:grpc_core::StatusToString
race:grpc_core::StatusCreate

# gRPC 1.51's own threads (grpc_core::Thread, e.g. the timer manager's,
# started inside ServerBuilder::BuildAndStart) can have finished but not yet
# been joined by gRPC when a test's process exits right after a server
# shutdown: a "thread leak" report naming a gRPC thread, in about 1 of 8 runs
# of clients/cpp:worker_test's ShutdownDeliversInFlightResultWithinGrace
# (grpc/grpc#31129 made the timer threads non-joinable for this reason; the
# same flake with gRPC 1.49-1.50: googleapis/google-cloud-cpp#9990). Only
# threads whose creation stack passes through gRPC's Thread class.
thread:grpc_core::Thread::Thread

# OpenSSL 3 (Debian's libcrypto/libssl, uninstrumented, used by gRPC's TLS):
# objects are freed when an atomic reference count TSan cannot see drops to
# zero, so destroying their rwlock looks like a race with its last use
# (pthread_rwlock_destroy in CRYPTO_THREAD_lock_free). Uninstrumented
# libraries need to be rebuilt with TSan for their synchronization to be
# seen (https://github.com/google/sanitizers/issues/1004); same treatment as
# gRPC above.
called_from_lib:libcrypto.so
called_from_lib:libssl.so

# librdkafka 2.15.1 (tools/build_librdkafka: built with gcc, uninstrumented,
# linked statically, so it is named by function, not library): a message's
# buffer and a topic handle's lock are freed by its own threads when
# reference counts kept with atomics TSan cannot see drop to zero, which looks
# like a race with ferry's last read of the record (free in rd_buf_destroy
# against memcpy/parse in ferry), with the last rdlock (rwlock_destroy), or
# with its own lookups (a list freed while its broker thread still reads).
# Uninstrumented libraries cannot show their synchronization
# (https://github.com/google/sanitizers/issues/1004); the lasting fix is a
# -fsanitize=thread build of librdkafka for this config. Its C11 locks and
# threads are made visible by tsan_c11_threads.cc.
race:^rd_buf_destroy$
race:^rwlock_destroy$
race:^rd_list_destroy_elems$

# librdkafka 2.15.1's mock cluster (the embedded default, KIP-848 groups):
# rd_kafka_mock_cgrp_consumer_session_tmr_cb (src/rdkafka_mock_cgrp.c:1727 of
# the pinned tarball) opens with mtx_unlock(&mcluster->lock) where its comment
# and its closing unlock say it means mtx_lock: a real upstream bug (no
# upstream issue found in the issue index; the classic group's timer is
# fine). It is mock-cluster code only (real brokers are not affected), on the
# mock's own thread; ferry cannot change it, so only this report is hidden.
mutex:rd_kafka_mock_cgrp_consumer_session_tmr_cb
)";
}
