#include "clients/ferryctl/rate_limit_view.h"

#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ferry::ferryctl {
namespace {

// "200", "12.5", "0.25": no exponent or trailing zeros for ordinary rates.
std::string Rate(double events_per_second) { return absl::StrCat(events_per_second); }

}  // namespace

absl::StatusOr<v1::SetRateLimitRequest> ParseRateLimit(const CommandLine& line) {
  const std::vector<std::string>& args = line.positional();
  absl::StatusOr<bool> clear = line.Get<bool>("clear", false);
  if (!clear.ok()) return clear.status();
  absl::StatusOr<int64_t> burst = line.Get<int64_t>("burst", 0);
  if (!burst.ok()) return burst.status();
  if (args.size() < 2 || args[1].empty()) {
    return absl::InvalidArgumentError(
        "name the processor: ferryctl rate-limit PROCESSOR EVENTS_PER_SECOND, or "
        "ferryctl rate-limit PROCESSOR --clear");
  }
  v1::SetRateLimitRequest request;
  request.set_processor(args[1]);
  if (*clear) {
    if (args.size() > 2 || line.Has("burst")) {
      return absl::InvalidArgumentError(
          "--clear returns the processor to its configured rate limit: give no "
          "EVENTS_PER_SECOND or --burst with it (0 lifts the limit instead)");
    }
    request.set_clear(true);
    return request;
  }
  if (args.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.size() < 3 ? "missing EVENTS_PER_SECOND" : "one rate only",
        ": ferryctl rate-limit ", args[1], " 200 (events per second; 0 lifts the limit), or ",
        "ferryctl rate-limit ", args[1], " --clear"));
  }
  double rate = 0;
  if (!absl::SimpleAtod(args[2], &rate) || !std::isfinite(rate) || rate < 0 ||
      rate > kMaxRateLimit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "EVENTS_PER_SECOND \"", args[2], "\" is not a number from 0 (no limit) to ",
        absl::StrFormat("%.0f", kMaxRateLimit), ", e.g. 200 or 0.5"));
  }
  if (*burst < 0) {
    return absl::InvalidArgumentError("--burst must not be negative (0 or none: the default)");
  }
  request.set_events_per_second(rate);
  request.set_burst(*burst);
  return request;
}

std::string RenderRateLimit(const v1::SetRateLimitRequest& request,
                            const v1::SetRateLimitResponse& response) {
  std::string what;
  if (request.clear()) {
    what = "back to its configured limit";
  } else if (request.events_per_second() == 0) {
    what = "lifted (no limit)";
  } else {
    what = absl::StrCat(Rate(request.events_per_second()), " events/s, burst ",
                        request.burst() > 0 ? absl::StrCat(request.burst()) : "default");
  }
  return absl::StrCat("rate limit of ", request.processor(), ": ", what, " (control offset ",
                      response.control_offset(),
                      "); every replica applies it as it reads the control topic\n");
}

std::string DescribeRateLimit(const v1::ProcessorStatus& processor) {
  std::string text = processor.rate_limit_events_per_second() > 0
                         ? absl::StrCat(Rate(processor.rate_limit_events_per_second()), "/s")
                         : "none";
  if (processor.rate_limit_events_per_second() > 0 && processor.rate_limit_burst() > 0) {
    absl::StrAppend(&text, " burst ", processor.rate_limit_burst());
  }
  if (processor.rate_limit_overridden()) absl::StrAppend(&text, " (operator)");
  return text;
}

std::string DescribeConcurrency(const v1::ProcessorStatus& processor) {
  std::string text =
      processor.concurrency_limit() > 0 ? absl::StrCat(processor.concurrency_limit()) : "-";
  if (processor.concurrency_adaptive()) absl::StrAppend(&text, " adaptive");
  return text;
}

std::string DescribeBreaker(const v1::ProcessorStatus& processor) {
  // An answer from a ferry before the breaker existed carries no state.
  std::string text = processor.circuit_breaker().empty() ? "-" : processor.circuit_breaker();
  if (processor.circuit_breaker_opened() > 0) {
    absl::StrAppend(&text, " (opened ", processor.circuit_breaker_opened(), ")");
  }
  return text;
}

}  // namespace ferry::ferryctl
