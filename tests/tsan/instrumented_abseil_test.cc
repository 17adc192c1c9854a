// Under --config=tsan, absl::Mutex must be the instrumented build from
// tools/setup_tsan: with Debian's uninstrumented libabsl_synchronization, TSan
// sees none of ferry's (or gRPC's) locks and reports every guarded member as
// a data race. The hand-offs below are then reported and this test fails
// (TSan exits 66), as does the library check. Without TSan they simply pass.
#include <dlfcn.h>
#include <link.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FERRY_TSAN 1
#endif
#endif

namespace {

int CollectPath(dl_phdr_info* info, size_t, void* data) {
  const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  if (name.find("libabsl_synchronization.so") != std::string::npos) {
    *static_cast<std::string*>(data) = name;
  }
  return 0;
}

TEST(InstrumentedAbseilTest, SynchronizationLibraryComesFromTheTsanPrefix) {
  std::string path;
  dl_iterate_phdr(CollectPath, &path);
  ASSERT_NE(path, "") << "libabsl_synchronization is not loaded";
#ifdef FERRY_TSAN
  EXPECT_EQ(path.rfind("/opt/ferry-tsan/lib/", 0), 0u)
      << path << ": run tools/setup --tsan, and build with --config=tsan";
#endif
}

// Two threads increment one counter under an absl::Mutex.
struct Counter {
  absl::Mutex mutex;
  int value ABSL_GUARDED_BY(mutex) = 0;
};

TEST(InstrumentedAbseilTest, MutexOrdersPlainMemory) {
  Counter counter;
  auto increment = [&counter] {
    for (int i = 0; i < 1000; ++i) {
      absl::MutexLock lock(&counter.mutex);
      ++counter.value;
    }
  };
  std::thread first(increment);
  std::thread second(increment);
  first.join();
  second.join();
  absl::MutexLock lock(&counter.mutex);
  EXPECT_EQ(counter.value, 2000);
}

struct Answer {
  absl::Mutex mutex;
  absl::CondVar changed;
  bool given ABSL_GUARDED_BY(mutex) = false;
};

// A value written before Notify() is read after WaitForNotification() and
// after a CondVar wake-up: the hand-offs ferry's engine and gRPC rely on.
TEST(InstrumentedAbseilTest, NotificationAndCondVarOrderPlainMemory) {
  std::vector<int> handed_over;
  absl::Notification ready;
  Answer answer;
  std::thread other([&] {
    ready.WaitForNotification();
    handed_over.push_back(2);
    absl::MutexLock lock(&answer.mutex);
    answer.given = true;
    answer.changed.Signal();
  });
  handed_over.push_back(1);
  ready.Notify();
  {
    absl::MutexLock lock(&answer.mutex);
    while (!answer.given) answer.changed.Wait(&answer.mutex);
  }
  EXPECT_EQ(handed_over, (std::vector<int>{1, 2}));
  other.join();
}

}  // namespace
