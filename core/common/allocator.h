// Allocator settings for the ferry binary, applied once at startup.
//
// ferry links gperftools' tcmalloc (third_party/system.BUILD). By default
// tcmalloc hands freed pages back to the kernel as it goes (its release rate,
// 1.0), and every page it takes again is faulted in and zeroed by the kernel.
// ferry's per-event path frees and allocates the same amount continuously (a
// poll round's events on one thread, their results on another, librdkafka's
// fetch buffers on a third), so under load a quarter of its CPU went to those
// page faults (`clear_page_erms`, bench/RESULTS.md). Keeping freed pages
// mapped (release rate 0) ends that; the cost is that ferry's resident
// memory stays at its high-water mark, which the budgets bound
// (README "Memory").
//
// Threading: call KeepFreedMemoryMapped once from main, before other threads
// start.
#ifndef FERRY_CORE_COMMON_ALLOCATOR_H_
#define FERRY_CORE_COMMON_ALLOCATOR_H_

namespace ferry {

// Sets tcmalloc's release rate to 0 unless the operator chose one through
// TCMALLOC_RELEASE_RATE (tcmalloc reads that variable itself, before main).
// Returns whether it did: false in a build without tcmalloc (the sanitizer
// builds) or when the variable is set.
bool KeepFreedMemoryMapped();

// tcmalloc's current release rate, or -1 in a build without tcmalloc.
double AllocatorReleaseRate();

}  // namespace ferry

#endif  // FERRY_CORE_COMMON_ALLOCATOR_H_
