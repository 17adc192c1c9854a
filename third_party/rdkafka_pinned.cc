// Fails the build when the librdkafka headers a target compiles against are
// not the pinned release tools/build_librdkafka installs (for instance a
// leftover librdkafka-dev's /usr/include/librdkafka taking precedence): the
// headers and the static library linked must be the same version. Bump with
// LIBRDKAFKA_VERSION in tools/build_librdkafka (README, "librdkafka").
#include <librdkafka/rdkafka.h>

static_assert(RD_KAFKA_VERSION == 0x020f01ff,
              "librdkafka headers are not the pinned 2.15.1 from tools/build_librdkafka");
