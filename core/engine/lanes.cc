#include "core/engine/lanes.h"

namespace ferry {

uint64_t StableHash(absl::string_view bytes, uint64_t seed) {
  uint64_t hash = seed;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

}  // namespace ferry
