#include "core/common/allocator.h"

#include <cstdlib>

#ifdef FERRY_TCMALLOC
#include <gperftools/malloc_extension.h>
#endif

namespace ferry {

bool KeepFreedMemoryMapped() {
#ifdef FERRY_TCMALLOC
  if (std::getenv("TCMALLOC_RELEASE_RATE") != nullptr) return false;
  MallocExtension::instance()->SetMemoryReleaseRate(0);
  return true;
#else
  return false;
#endif
}

double AllocatorReleaseRate() {
#ifdef FERRY_TCMALLOC
  return MallocExtension::instance()->GetMemoryReleaseRate();
#else
  return -1;
#endif
}

}  // namespace ferry
