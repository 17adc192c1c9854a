// Results: how the engine reads one v1::Result from a worker — which outcome
// its status means, and the error a RETRY or FAIL carries (the worker's
// message, sanitized: core/common/worker_text.h).
//
// Threading: pure functions.
#ifndef FERRY_CORE_ENGINE_RESULTS_H_
#define FERRY_CORE_ENGINE_RESULTS_H_

#include <string>

#include "ferry/v1/processor.pb.h"

namespace ferry {

enum class ResultOutcome {
  kOk,
  kRetry,
  kFail,     // FAIL, and STATUS_UNSPECIFIED (see the proto)
  // NOT_ATTEMPTED: a run member the worker did not handle (RETRY unless it
  // followed another member of its run: core/engine/runs.h).
  kNotAttempted,
  kUnknown,  // a status no version of the protocol defines: a protocol error
};

ResultOutcome ClassifyResult(v1::Result::Status status);

// The error recorded for a RETRY or FAIL result.
std::string ResultError(const v1::Result& result, ResultOutcome outcome);

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_RESULTS_H_
