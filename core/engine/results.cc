#include "core/engine/results.h"

#include "core/common/worker_text.h"

namespace ferry {

ResultOutcome ClassifyResult(v1::Result::Status status) {
  switch (status) {
    case v1::Result::OK:
      return ResultOutcome::kOk;
    case v1::Result::RETRY:
      return ResultOutcome::kRetry;
    case v1::Result::NOT_ATTEMPTED:
      return ResultOutcome::kNotAttempted;
    case v1::Result::FAIL:
    case v1::Result::STATUS_UNSPECIFIED:
      return ResultOutcome::kFail;
    default:
      return ResultOutcome::kUnknown;
  }
}

std::string ResultError(const v1::Result& result, ResultOutcome outcome) {
  if (!result.message().empty()) return SanitizeWorkerMessage(result.message());
  switch (outcome) {
    case ResultOutcome::kRetry:
      return result.status() == v1::Result::NOT_ATTEMPTED ? "NOT_ATTEMPTED (not after another run "
                                                            "member: taken as RETRY)"
                                                          : "RETRY";
    default:
      return "FAIL (no message)";
  }
}

}  // namespace ferry
