// UTF-8: the one validity rule ferry applies to text it puts into proto3
// `string` fields or shows to people (record header names and event types,
// worker names and messages). It is protobuf's own validator, the rule its
// runtimes apply when parsing: no overlong forms, no UTF-16 surrogates,
// nothing above U+10FFFF.
//
// Threading: stateless functions, safe from any thread.
#ifndef FERRY_CORE_COMMON_UTF8_H_
#define FERRY_CORE_COMMON_UTF8_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace ferry {

// True iff `text` may be stored in a proto3 `string` field.
bool IsValidUtf8(absl::string_view text);

// The length of the longest prefix of `text` that is valid UTF-8 (a
// sequence cut off at the end of `text` is not part of it).
size_t ValidUtf8PrefixLength(absl::string_view text);

// `text` with every byte that does not belong to a valid UTF-8 sequence
// replaced by U+FFFD (EF BF BD); `text` itself when it is valid.
std::string ToValidUtf8(absl::string_view text);

}  // namespace ferry

#endif  // FERRY_CORE_COMMON_UTF8_H_
