#include "alerts/rate_shift.h"

#include <algorithm>
#include <utility>

#include "alerts/format.h"
#include "alerts/thresholds.h"

namespace kvwatch::alerts {

base::Status RateShiftOptions::Validate(std::string_view prefix) const {
  const std::string where(prefix);
  return FirstError({
      ValidateThresholds(where, fire_threshold, clear_threshold),
      ValidatePositive(where + ".fire_threshold", fire_threshold),
      ValidatePositive(where + ".rate_floor_per_second", rate_floor_per_second),
      ValidateNonNegative(where + ".min_short_window_requests", min_short_window_requests),
      rule.Validate(where + ".rule"),
  });
}

std::string_view RateShiftAlertName(CounterKind counter) {
  switch (counter) {
    case CounterKind::kEvictedBlocks:
      return "KVWatchEvictionRateShift";
    case CounterKind::kRejectedRequests:
      return "KVWatchRejectionRateShift";
    case CounterKind::kPreemptions:
      return "KVWatchPreemptionRateShift";
    case CounterKind::kRequests:
      return "KVWatchRequestRateShift";
  }
  return "KVWatchRateShift";
}

RateShiftOptions RateShiftDefaults(CounterKind counter) {
  RateShiftOptions options;
  options.rate_floor_per_second = counter == CounterKind::kEvictedBlocks ? 1.0 : 0.05;
  return options;
}

RateShiftDetector::RateShiftDetector(CounterKind counter, RateShiftOptions options, std::string short_window,
                                     std::string baseline_window)
    : counter_(counter),
      options_(std::move(options)),
      short_window_(std::move(short_window)),
      baseline_window_(std::move(baseline_window)),
      window_(short_window_ + "/" + baseline_window_) {}

Observation RateShiftDetector::Evaluate(const DetectorInput& input) {
  const CounterWindows& windows = input.counters[counter_];
  if (!windows.short_window || !windows.baseline_window) {
    return Observation::NoData("counter " + std::string(CounterName(counter_)) + " has fewer than two samples");
  }
  if (auto quiet = CheckVolume(ShortWindowRequests(input), options_.min_short_window_requests,
                               "requests in the " + short_window_ + " window")) {
    return *quiet;
  }
  const double short_rate = windows.short_window->rate();
  const double baseline_rate = windows.baseline_window->rate();
  const double ratio = short_rate / std::max(baseline_rate, options_.rate_floor_per_second);
  return Observation::Valid(ratio, options_.fire_threshold, options_.clear_threshold, Annotate(windows, ratio));
}

Annotations RateShiftDetector::Annotate(const CounterWindows& windows, double ratio) const {
  const double short_rate = windows.short_window->rate();
  const double baseline_rate = windows.baseline_window->rate();
  const std::string unit(CounterUnit(counter_));
  Annotations a;
  a["counter"] = std::string(CounterName(counter_));
  a["short_rate_per_second"] = FormatNumber(short_rate);
  a["baseline_rate_per_second"] = FormatNumber(baseline_rate);
  a["rate_floor_per_second"] = FormatNumber(options_.rate_floor_per_second);
  a["ratio"] = FormatNumber(ratio);
  a["short_window_increase"] = FormatCount(windows.short_window->increase);
  a["counter_resets"] = std::to_string(windows.resets);
  a["summary"] = "Rate of " + unit + " is " + FormatNumber(ratio, 3) + "x its baseline: " + FormatNumber(short_rate) +
                 "/s over " + short_window_ + " against " + FormatNumber(baseline_rate) + "/s over " + baseline_window_;
  a["description"] = "The engine's " + unit + " per second over the last " + short_window_ + " (" +
                     FormatNumber(short_rate) + "/s) against the last " + baseline_window_ + " (" +
                     FormatNumber(baseline_rate) + "/s, floored at " + FormatNumber(options_.rate_floor_per_second) +
                     "/s). Fires at " + FormatNumber(options_.fire_threshold) + "x and clears below " +
                     FormatNumber(options_.clear_threshold) + "x.";
  return a;
}

}  // namespace kvwatch::alerts
