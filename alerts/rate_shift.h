// RateShiftDetector: the rate of one engine counter (evicted blocks, rejected
// requests or preemptions) over the short window against its rate over the
// baseline window (default 1h against 24h, both ending now, as in the PromQL
// rate(x[1h]) / rate(x[24h])), computed by the Alerter from the cumulative counter
// with counter resets handled (alerts/counter_rate.h).
//
// Condition value: short_rate / max(baseline_rate, rate_floor_per_second). The
// absolute floor keeps a counter that is (almost) always 0 from "doubling" on a
// handful of events: with a zero baseline the value is short_rate / floor, so the
// alert needs short_rate >= fire_threshold * floor. Pending at >= fire_threshold
// (default 2.0: the rate doubled), cleared below clear_threshold (default 1.5).
//
// Because the baseline window contains the short one, a new level that persists is
// gradually absorbed into the baseline and the alert resolves after about a
// baseline window: this detector reports shifts, not levels. Small sustained
// shifts that never reach the ratio are the change test's job (change_detector.h).
//
// Quiet: kNoData until the counter has two samples; kBelowMinVolume with fewer than
// min_short_window_requests requests in the short window (ShortWindowRequests()).
//
// Thread safety: stateless after construction; one caller at a time.
#ifndef KVWATCH_ALERTS_RATE_SHIFT_H_
#define KVWATCH_ALERTS_RATE_SHIFT_H_

#include <string>
#include <string_view>

#include "alerts/detector.h"
#include "alerts/rule.h"
#include "base/status.h"

namespace kvwatch::alerts {

struct RateShiftOptions {
  // Whether the Alerter evaluates this detector. Default: true.
  bool enabled = true;
  // short rate / max(baseline rate, floor) at or above which the alert goes pending.
  // Default: 2.0.
  double fire_threshold = 2.0;
  // The ratio below which a firing alert clears. Default: 1.5.
  double clear_threshold = 1.5;
  // The absolute floor of the baseline rate, in counter units per second. Default:
  // 1.0 here; RateShiftDefaults() sets it per counter.
  double rate_floor_per_second = 1.0;
  // Requests needed in the short window. Default: 500.
  double min_short_window_requests = 500;
  // Severity, `for` (default 15m) and keep_firing_for (default 0).
  RuleOptions rule;

  base::Status Validate(std::string_view prefix) const;

  bool operator==(const RateShiftOptions&) const = default;
};

// "KVWatchEvictionRateShift", "KVWatchRejectionRateShift",
// "KVWatchPreemptionRateShift", "KVWatchRequestRateShift".
std::string_view RateShiftAlertName(CounterKind counter);
// The defaults for one counter: the struct's defaults with the rate floor of that
// counter: 1.0 evicted blocks/s; 0.05 rejected requests/s, preemptions/s and
// requests/s (3 a minute).
RateShiftOptions RateShiftDefaults(CounterKind counter);

class RateShiftDetector : public Detector {
 public:
  RateShiftDetector(CounterKind counter, RateShiftOptions options, std::string short_window,
                    std::string baseline_window);

  // Detector
  std::string_view AlertName() const override { return RateShiftAlertName(counter_); }
  std::string_view Window() const override { return window_; }
  Observation Evaluate(const DetectorInput& input) override;

 private:
  Annotations Annotate(const CounterWindows& windows, double ratio) const;

  const CounterKind counter_;
  const RateShiftOptions options_;
  const std::string short_window_;
  const std::string baseline_window_;
  const std::string window_;
};

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_RATE_SHIFT_H_
