#include "core/engine/concurrency_limiter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ferry {
namespace {

// The multiplicative cut on a drop.
constexpr double kDropFactor = 0.9;
// Samples between probes: kProbeMultiplier x limit, at least kProbeMinimum.
constexpr int64_t kProbeMultiplier = 30;
constexpr int64_t kProbeMinimum = 100;

// log10 of the limit, at least 1: below a limit of 10 the thresholds and the
// steps would shrink towards nothing and a small limit could not move.
double Log10AtLeastOne(double limit) { return std::max(1.0, std::log10(limit)); }

}  // namespace

ConcurrencyLimiter::ConcurrencyLimiter(const ConcurrencyConfig& config,
                                       int64_t max_limit)
    : adaptive_(config.mode == ConcurrencyMode::kAdaptive),
      max_limit_(std::max<int64_t>(1, max_limit)),
      min_limit_(std::clamp<int64_t>(config.min_limit, 1, max_limit_)),
      limit_(static_cast<double>(
          std::clamp<int64_t>(config.initial_limit, min_limit_, max_limit_))) {}

int64_t ConcurrencyLimiter::limit() const {
  if (!adaptive_) return max_limit_;
  return static_cast<int64_t>(limit_);
}

void ConcurrencyLimiter::SetLimit(double limit) {
  const int64_t before = this->limit();
  // NaN cannot arise from the arithmetic above, but a clamp of NaN is NaN:
  // keep the old limit rather than lose it.
  if (std::isnan(limit)) return;
  limit_ = std::clamp(limit, static_cast<double>(min_limit_),
                      static_cast<double>(max_limit_));
  if (this->limit() != before) ++changes_;
}

void ConcurrencyLimiter::StartProbe() {
  samples_since_probe_ = 0;
  const int64_t old_limit = limit();
  probe_target_ = std::max(min_limit_, old_limit / 2);
  SetLimit(static_cast<double>(probe_target_));
  no_load_latency_ = absl::InfiniteDuration();
  probe_min_ = absl::InfiniteDuration();
  probe_ = Probe::kDraining;
  probe_samples_left_ = old_limit;
  window_samples_ = 0;  // what the window held was measured under the old limit
  window_latency_ = absl::ZeroDuration();
  window_in_flight_ = 0;
}

void ConcurrencyLimiter::OnProbeSample(absl::Duration latency,
                                       int64_t in_flight) {
  if (probe_ == Probe::kDraining) {
    // Results of events sent under the old limit still carry its queueing;
    // the lowest of them is only a fallback if the drain never comes.
    probe_min_ = std::min(probe_min_, latency);
    --probe_samples_left_;
    if (in_flight > probe_target_ && probe_samples_left_ > 0) return;
    probe_ = Probe::kLearning;
    probe_samples_left_ = probe_target_;
    if (in_flight <= probe_target_) probe_min_ = absl::InfiniteDuration();
    return;
  }
  probe_min_ = std::min(probe_min_, latency);
  if (--probe_samples_left_ > 0) return;
  no_load_latency_ = probe_min_;
  probe_ = Probe::kNone;
}

void ConcurrencyLimiter::OnSample(absl::Duration latency, int64_t in_flight,
                                  bool dropped) {
  if (!adaptive_) return;
  // A latency of zero or less (a clock that stepped) or an infinite one
  // says nothing about the queue downstream.
  if (latency <= absl::ZeroDuration() || latency == absl::InfiniteDuration()) {
    return;
  }
  in_flight = std::max<int64_t>(0, in_flight);
  if (samples_since_cut_ >= 0) ++samples_since_cut_;
  // A drop cuts whatever the latency says: the downstream refused or lost
  // the event. Its latency (a fast refusal, a slow timeout) is no measure of
  // the no-load latency. One cut per window: the drops of one round trip
  // are one signal.
  if (dropped) {
    if (samples_since_cut_ < 0 || samples_since_cut_ >= limit()) {
      SetLimit(std::max(static_cast<double>(min_limit_), limit_ * kDropFactor));
      samples_since_cut_ = 0;
    }
    return;
  }
  if (probe_ != Probe::kNone) {
    OnProbeSample(latency, in_flight);
    return;
  }
  if (++samples_since_probe_ >=
      std::max(kProbeMinimum, kProbeMultiplier * limit())) {
    StartProbe();
    return;
  }
  if (latency < no_load_latency_) {
    no_load_latency_ = latency;
    return;
  }
  window_latency_ += latency;
  window_in_flight_ = std::max(window_in_flight_, in_flight);
  if (++window_samples_ < std::max<int64_t>(1, limit())) return;
  const absl::Duration mean = window_latency_ / window_samples_;
  const int64_t most_in_flight = window_in_flight_;
  window_samples_ = 0;
  window_latency_ = absl::ZeroDuration();
  window_in_flight_ = 0;
  Step(std::max(mean, no_load_latency_), most_in_flight);
}

void ConcurrencyLimiter::Step(absl::Duration latency, int64_t in_flight) {
  // The limit was not in use: the latency says nothing about a bigger one.
  if (in_flight < limit() - in_flight) return;  // in_flight x 2 < limit
  const double queue =
      limit_ * (1 - absl::FDivDuration(no_load_latency_, latency));
  const double log_limit = Log10AtLeastOne(limit_);
  const double alpha = 3 * log_limit;
  const double beta = 6 * log_limit;
  const double threshold = log_limit;
  if (queue <= threshold) {
    SetLimit(limit_ + beta);
  } else if (queue < alpha) {
    SetLimit(limit_ + log_limit);
  } else if (queue > beta) {
    SetLimit(limit_ - log_limit);
  }
}

}  // namespace ferry
