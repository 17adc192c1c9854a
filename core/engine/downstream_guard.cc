#include "core/engine/downstream_guard.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/log.h"

namespace ferry {
namespace {

constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

int64_t FixedLimit(const ProcessorConfig& processor) {
  return std::max<int64_t>(1, int64_t{processor.streams} * processor.max_in_flight);
}

}  // namespace

DownstreamGuards::DownstreamGuards(const Config& config, absl::Time now) {
  guards_.reserve(config.processors.size());
  for (const ProcessorConfig& processor : config.processors) {
    guards_.push_back(Guard{processor.name, processor.rate_limit, RateLimiter(kEngineTimerTick),
                            false,
                            ConcurrencyLimiter(processor.concurrency, FixedLimit(processor)),
                            CircuitBreaker(processor.circuit_breaker),
                            processor.circuit_breaker.probes});
    Guard& guard = guards_.back();
    guard.rate.Configure(processor.rate_limit, now);
    Refresh(guard);
  }
}

void DownstreamGuards::Refresh(Guard& guard) {
  guard.active = guard.rate.limited() || guard.concurrency.adaptive() || guard.breaker.enabled();
}

bool DownstreamGuards::any_time_based() const {
  for (const Guard& guard : guards_) {
    if (guard.rate.limited() || guard.breaker.enabled()) return true;
  }
  return false;
}

int64_t DownstreamGuards::Allowance(int processor, int64_t in_flight, absl::Time now) {
  Guard& guard = guards_[Index(processor)];
  if (!guard.active) return kUnlimited;
  int64_t allowance = kUnlimited;
  if (guard.breaker.enabled()) {
    NoteState(guard, guard.breaker.State(now));
    allowance = std::min(allowance, guard.breaker.Allowance(now));
  }
  if (guard.concurrency.adaptive()) {
    allowance = std::min(allowance, std::max<int64_t>(0, guard.concurrency.limit() - in_flight));
  }
  if (guard.rate.limited() && allowance > 0) {
    allowance = std::min(allowance, guard.rate.Available(now));
  }
  return allowance;
}

void DownstreamGuards::OnDispatched(int processor) {
  Guard& guard = guards_[Index(processor)];
  if (!guard.active) return;
  if (guard.rate.limited()) guard.rate.Take(1);
  if (guard.breaker.enabled()) guard.breaker.OnDispatched(1);
}

bool DownstreamGuards::OnOutcome(int processor, Outcome outcome, absl::Duration latency,
                                 int64_t in_flight, absl::Time now) {
  Guard& guard = guards_[Index(processor)];
  if (!guard.active) return false;
  if (guard.concurrency.adaptive()) {
    // FAIL is the event's own fault (bad data), not a sign of overload.
    const bool dropped = outcome == Outcome::kRetry || outcome == Outcome::kTimeout;
    guard.concurrency.OnSample(latency, in_flight, dropped);
  }
  if (!guard.breaker.enabled()) return false;
  const BreakerState state = guard.breaker.OnOutcome(outcome == Outcome::kOk, now);
  NoteState(guard, state);
  return outcome != Outcome::kOk && state != BreakerState::kClosed;
}

void DownstreamGuards::NoteState(Guard& guard, BreakerState state) {
  if (state == guard.logged_state) return;
  guard.logged_state = state;
  std::string line;
  switch (state) {
    case BreakerState::kOpen:
      line = absl::StrCat("circuit breaker of processor ", guard.name,
                          " opened: its workers' recent outcomes are mostly failures; nothing is "
                          "dispatched to it until a probe succeeds (failed events wait without "
                          "using an attempt)");
      break;
    case BreakerState::kHalfOpen:
      line = absl::StrCat("circuit breaker of processor ", guard.name, " half-open: probing with ",
                          guard.probes, " event(s)");
      break;
    case BreakerState::kClosed:
      line = absl::StrCat("circuit breaker of processor ", guard.name,
                          " closed: probes succeeded; dispatching resumes");
      break;
  }
  Log(state == BreakerState::kOpen ? LogLevel::kWarn : LogLevel::kInfo, "engine", line);
}

void DownstreamGuards::SetRateLimits(const std::map<std::string, RateLimitConfig>& overrides,
                                     absl::Time now) {
  for (Guard& guard : guards_) {
    auto it = overrides.find(guard.name);
    const bool overridden = it != overrides.end();
    const RateLimitConfig& wanted = overridden ? it->second : guard.configured_rate;
    guard.rate_overridden = overridden;
    const RateLimitConfig& current = guard.rate.config();
    if (current.events_per_second != wanted.events_per_second ||
        current.EffectiveBurst() != wanted.EffectiveBurst()) {
      guard.rate.Configure(wanted, now);
      Log(LogLevel::kInfo, "engine",
          wanted.limited()
              ? absl::StrFormat("rate limit of processor %s: %g events/s (burst %d)%s",
                                guard.name, wanted.events_per_second, wanted.EffectiveBurst(),
                                overridden ? ", set by an operator" : "")
              : absl::StrCat("rate limit of processor ", guard.name, " lifted"));
    }
    Refresh(guard);
  }
}

void DownstreamGuards::Fill(int processor, absl::Time now, ProcessorSnapshot* snapshot) {
  Guard& guard = guards_[Index(processor)];
  const RateLimitConfig& rate = guard.rate.config();
  snapshot->rate_limit_eps = rate.limited() ? rate.events_per_second : 0;
  snapshot->rate_limit_burst = rate.limited() ? rate.EffectiveBurst() : 0;
  snapshot->rate_limit_overridden = guard.rate_overridden;
  snapshot->concurrency_limit = guard.concurrency.limit();
  snapshot->concurrency_adaptive = guard.concurrency.adaptive();
  snapshot->breaker_enabled = guard.breaker.enabled();
  snapshot->breaker_state =
      guard.breaker.enabled() ? guard.breaker.State(now) : BreakerState::kClosed;
  snapshot->breaker_opened = guard.breaker.opened();
}

}  // namespace ferry
