// `ferryctl rate-limit`: its command line as a SetRateLimitRequest and what
// it prints; and the per-processor cells `ferryctl status` shows for the
// protections of issue 21 (rate limit, concurrency limit, circuit breaker).
//
// Threading: plain functions.
#ifndef FERRY_CLIENTS_FERRYCTL_RATE_LIMIT_VIEW_H_
#define FERRY_CLIENTS_FERRYCTL_RATE_LIMIT_VIEW_H_

#include <string>

#include "absl/status/statusor.h"
#include "clients/ferryctl/cli_flags.h"
#include "ferry/v1/control.pb.h"

namespace ferry::ferryctl {

// The most events per second the server accepts (control_service.h).
inline constexpr double kMaxRateLimit = 1e9;

// `rate-limit PROCESSOR EVENTS_PER_SECOND [--burst=N]` or
// `rate-limit PROCESSOR --clear` (positional()[0] is "rate-limit").
// InvalidArgument, saying what to write, for anything else: a missing or
// extra argument, a rate that is not a number from 0 to kMaxRateLimit, a
// negative burst, --clear with a rate or --burst. Nothing is checked against
// the processors: the server names them when one is unknown.
absl::StatusOr<v1::SetRateLimitRequest> ParseRateLimit(const CommandLine& line);

// What was recorded, in words, with the control offset.
std::string RenderRateLimit(const v1::SetRateLimitRequest& request,
                            const v1::SetRateLimitResponse& response);

// Cells of the PROCESSORS table: "200/s burst 20", "none", with
// " (operator)" when an operator set it; "17 adaptive" or "40" ("-" when
// not known); "off", "closed", "half_open", "open" with " (opened N)" once
// it has opened.
std::string DescribeRateLimit(const v1::ProcessorStatus& processor);
std::string DescribeConcurrency(const v1::ProcessorStatus& processor);
std::string DescribeBreaker(const v1::ProcessorStatus& processor);

}  // namespace ferry::ferryctl

#endif  // FERRY_CLIENTS_FERRYCTL_RATE_LIMIT_VIEW_H_
