// C11 threads (<threads.h>) routed through the POSIX calls ThreadSanitizer
// intercepts, for --config=tsan.
//
// Debian's librdkafka creates its threads with glibc's thrd_create and locks
// with mtx_lock/cnd_wait. glibc implements them on its internal pthread
// functions, which clang 14's TSan runtime does not intercept: TSan never
// learns of librdkafka's threads (it crashes in the first intercepted call on
// one, e.g. a malloc) nor of its locks (every record handed from a broker
// thread to ferry's poll thread would look like a race). librdkafka's own
// answer for TSan builds is to avoid libc's C11 threads
// (https://github.com/confluentinc/librdkafka/pull/2541; the crash:
// https://github.com/confluentinc/librdkafka/issues/4929). We cannot rebuild
// it, so the executable defines these functions (first in the dynamic lookup,
// so librdkafka binds to them) with glibc's own semantics on top of the
// intercepted pthread calls. glibc's mtx_t and cnd_t hold a pthread_mutex_t
// and pthread_cond_t, which is how glibc itself implements them.
//
// The lock calls run with TSan's memory-access tracking off (their locking
// is still recorded): librdkafka initialises a lock on one thread and hands
// the object to another through atomics TSan cannot see, so the interceptor's
// read of the lock word would be reported like the accesses that
// `called_from_lib:librdkafka.so` (tsan_defaults.cc) already ignores.
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <threads.h>
#include <time.h>

extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();

namespace {

// Runs `call` with memory accesses untracked; synchronization still counts.
template <typename Call>
int Untracked(Call call) {
  __tsan_ignore_thread_begin();
  const int result = call();
  __tsan_ignore_thread_end();
  return result;
}

int ThrdResult(int error) {
  switch (error) {
    case 0:
      return thrd_success;
    case ENOMEM:
    case EAGAIN:
      return thrd_nomem;
    case EBUSY:
      return thrd_busy;
    case ETIMEDOUT:
      return thrd_timedout;
    default:
      return thrd_error;
  }
}

struct Start {
  thrd_start_t function;
  void* argument;
};

void* RunC11Thread(void* start_pointer) {
  const Start start = *static_cast<Start*>(start_pointer);
  delete static_cast<Start*>(start_pointer);
  // glibc passes a C11 thread's int result through the void* exit value.
  return reinterpret_cast<void*>(static_cast<intptr_t>(start.function(start.argument)));
}

pthread_mutex_t* AsPthread(mtx_t* mutex) { return reinterpret_cast<pthread_mutex_t*>(mutex); }
pthread_cond_t* AsPthread(cnd_t* condition) {
  return reinterpret_cast<pthread_cond_t*>(condition);
}

static_assert(sizeof(mtx_t) >= sizeof(pthread_mutex_t), "glibc's mtx_t holds a pthread mutex");
static_assert(sizeof(cnd_t) >= sizeof(pthread_cond_t), "glibc's cnd_t holds a pthread cond");
static_assert(sizeof(thrd_t) == sizeof(pthread_t), "glibc's thrd_t is a pthread_t");

}  // namespace

extern "C" {

int thrd_create(thrd_t* thread, thrd_start_t function, void* argument) {
  Start* start = new Start{function, argument};
  pthread_t id;
  const int error = pthread_create(&id, nullptr, RunC11Thread, start);
  if (error != 0) {
    delete start;
    return ThrdResult(error);
  }
  *thread = id;
  return thrd_success;
}

int thrd_join(thrd_t thread, int* result) {
  void* exit_value = nullptr;
  const int error = pthread_join(thread, &exit_value);
  if (error == 0 && result != nullptr) {
    *result = static_cast<int>(reinterpret_cast<intptr_t>(exit_value));
  }
  return ThrdResult(error);
}

int thrd_detach(thrd_t thread) { return ThrdResult(pthread_detach(thread)); }

int mtx_init(mtx_t* mutex, int type) {
  pthread_mutexattr_t attributes;
  pthread_mutexattr_init(&attributes);
  if ((type & mtx_recursive) != 0) {
    pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_RECURSIVE);
  }
  const int error = Untracked([&] { return pthread_mutex_init(AsPthread(mutex), &attributes); });
  pthread_mutexattr_destroy(&attributes);
  return ThrdResult(error);
}

int mtx_lock(mtx_t* mutex) { return ThrdResult(Untracked([&] { return pthread_mutex_lock(AsPthread(mutex)); })); }

int mtx_trylock(mtx_t* mutex) { return ThrdResult(Untracked([&] { return pthread_mutex_trylock(AsPthread(mutex)); })); }

int mtx_timedlock(mtx_t* mutex, const struct timespec* deadline) {
  return ThrdResult(Untracked([&] { return pthread_mutex_timedlock(AsPthread(mutex), deadline); }));
}

int mtx_unlock(mtx_t* mutex) { return ThrdResult(Untracked([&] { return pthread_mutex_unlock(AsPthread(mutex)); })); }

void mtx_destroy(mtx_t* mutex) {
  Untracked([&] { return pthread_mutex_destroy(AsPthread(mutex)); });
}

int cnd_init(cnd_t* condition) { return ThrdResult(Untracked([&] { return pthread_cond_init(AsPthread(condition), nullptr); })); }

int cnd_signal(cnd_t* condition) { return ThrdResult(Untracked([&] { return pthread_cond_signal(AsPthread(condition)); })); }

int cnd_broadcast(cnd_t* condition) {
  return ThrdResult(Untracked([&] { return pthread_cond_broadcast(AsPthread(condition)); }));
}

int cnd_wait(cnd_t* condition, mtx_t* mutex) {
  return ThrdResult(Untracked([&] { return pthread_cond_wait(AsPthread(condition), AsPthread(mutex)); }));
}

int cnd_timedwait(cnd_t* condition, mtx_t* mutex, const struct timespec* deadline) {
  return ThrdResult(Untracked([&] { return pthread_cond_timedwait(AsPthread(condition), AsPthread(mutex), deadline); }));
}

void cnd_destroy(cnd_t* condition) {
  Untracked([&] { return pthread_cond_destroy(AsPthread(condition)); });
}

}  // extern "C"
