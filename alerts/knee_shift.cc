#include "alerts/knee_shift.h"

#include <cmath>
#include <utility>

#include "alerts/format.h"
#include "alerts/thresholds.h"

namespace kvwatch::alerts {

base::Status KneeShiftOptions::Validate(std::string_view prefix) const {
  const std::string where(prefix);
  return FirstError({
      ValidateThresholds(where, fire_threshold, clear_threshold),
      ValidateNonNegative(where + ".min_shift_pages", min_shift_pages),
      ValidateNonNegative(where + ".min_short_window_requests", min_short_window_requests),
      ValidateNonNegative(where + ".min_baseline_window_requests", min_baseline_window_requests),
      rule.Validate(where + ".rule"),
  });
}

KneeShiftDetector::KneeShiftDetector(KneeShiftOptions options, std::string short_window, std::string baseline_window)
    : options_(std::move(options)),
      short_window_(std::move(short_window)),
      baseline_window_(std::move(baseline_window)),
      window_(short_window_ + "/" + baseline_window_) {}

Observation KneeShiftDetector::Evaluate(const DetectorInput& input) {
  const AlertInputs& inputs = input.inputs;
  if (!inputs.short_knee_pages || !inputs.baseline_knee_pages) {
    return Observation::NoData("knee of the " +
                               std::string(inputs.short_knee_pages ? baseline_window_ : short_window_) +
                               " window not available");
  }
  if (*inputs.baseline_knee_pages <= 0) {
    return Observation::NoData("baseline knee is 0 pages: no relative change defined");
  }
  if (auto quiet = CheckVolume(inputs.short_window_requests, options_.min_short_window_requests,
                               "requests in the " + short_window_ + " window")) {
    return *quiet;
  }
  if (auto quiet = CheckVolume(inputs.baseline_window_requests, options_.min_baseline_window_requests,
                               "requests in the " + baseline_window_ + " window")) {
    return *quiet;
  }
  const double short_knee = *inputs.short_knee_pages;
  const double baseline_knee = *inputs.baseline_knee_pages;
  const double shift = std::fabs(short_knee - baseline_knee);
  const double change = shift / baseline_knee;
  Observation observation = Observation::Valid(change, options_.fire_threshold, options_.clear_threshold,
                                               Annotate(inputs, short_knee, baseline_knee, change));
  observation.above_fire = observation.above_fire && shift >= options_.min_shift_pages;
  return observation;
}

Annotations KneeShiftDetector::Annotate(const AlertInputs& inputs, double short_knee, double baseline_knee,
                                        double change) const {
  const bool grew = short_knee >= baseline_knee;
  Annotations a;
  a["old_knee_pages"] = FormatCount(baseline_knee);
  a["new_knee_pages"] = FormatCount(short_knee);
  a["relative_change"] = FormatNumber(change);
  a["direction"] = grew ? "grew" : "shrank";
  a["fire_threshold"] = FormatNumber(options_.fire_threshold);
  a["clear_threshold"] = FormatNumber(options_.clear_threshold);
  if (inputs.short_window_requests) {
    a["short_window_requests"] = FormatCount(*inputs.short_window_requests);
  }
  std::string old_text = FormatCount(baseline_knee) + " pages";
  std::string new_text = FormatCount(short_knee) + " pages";
  if (inputs.bytes_per_page) {
    const double old_bytes = baseline_knee * *inputs.bytes_per_page;
    const double new_bytes = short_knee * *inputs.bytes_per_page;
    a["old_knee_bytes"] = FormatCount(old_bytes);
    a["new_knee_bytes"] = FormatCount(new_bytes);
    old_text += " (" + FormatBytes(old_bytes) + ")";
    new_text += " (" + FormatBytes(new_bytes) + ")";
  }
  a["summary"] = "KV-cache knee " + std::string(grew ? "grew" : "shrank") + " by " + FormatPercent(change) + ": " +
                 old_text + " over " + baseline_window_ + " -> " + new_text + " over " + short_window_;
  a["description"] =
      "The knee of the hit-rate curve (where more cache starts buying much less hit rate) "
      "of the last " +
      short_window_ + " is " + new_text + ", against " + old_text + " over the last " + baseline_window_ + ". " +
      (grew ? "The workload now needs more KV cache for the same efficiency."
            : "The workload now reuses a smaller set of pages.") +
      " Fires at a change of " + FormatPercent(options_.fire_threshold) + " and clears below " +
      FormatPercent(options_.clear_threshold) + ".";
  return a;
}

}  // namespace kvwatch::alerts
