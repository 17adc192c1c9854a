#include "server/polling_engine.h"

#include <cstdlib>

namespace ferry {

void UsePollEngineUnlessSet() {
  // overwrite=0: a value the operator set (even an empty one) stays.
  (void)setenv(kPollStrategyVariable, kDefaultPollStrategy, /*overwrite=*/0);
}

}  // namespace ferry
