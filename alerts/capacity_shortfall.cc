#include "alerts/capacity_shortfall.h"

#include <algorithm>
#include <utility>

#include "alerts/format.h"
#include "alerts/thresholds.h"

namespace kvwatch::alerts {

std::string_view WorkingSetTargetName(WorkingSetTarget target) {
  for (const auto& spelling : kWorkingSetTargetSpellings) {
    if (spelling.value == target) return spelling.name;
  }
  return "?";
}

std::string WorkingSetSpec::Text() const {
  return std::string(WorkingSetTargetName(target)) + " " + FormatNumber(fraction);
}

base::Status CapacityShortfallOptions::Validate(std::string_view prefix) const {
  const std::string where(prefix);
  return FirstError({
      ValidateThresholds(where, fire_threshold, clear_threshold),
      ValidatePositive(where + ".fire_threshold", fire_threshold),
      ValidateNonNegative(where + ".min_short_window_requests", min_short_window_requests),
      rule.Validate(where + ".rule"),
  });
}

CapacityShortfallDetector::CapacityShortfallDetector(CapacityShortfallOptions options, std::string short_window)
    : options_(std::move(options)), window_(std::move(short_window)) {}

Observation CapacityShortfallDetector::Evaluate(const DetectorInput& input) {
  const AlertInputs& inputs = input.inputs;
  if (!inputs.capacity_pages || *inputs.capacity_pages <= 0) {
    return Observation::NoData("cache capacity not configured");
  }
  const double capacity = *inputs.capacity_pages;
  double working_set = 0;
  bool lower_bound = false;
  if (inputs.working_set_pages) {
    working_set = *inputs.working_set_pages;
  } else if (inputs.tracked_pages && *inputs.tracked_pages >= capacity) {
    working_set = *inputs.tracked_pages;  // not converged within M >= capacity
    lower_bound = true;
  } else {
    return Observation::NoData(
        "working set not converged within the tracked range, which is smaller than the "
        "capacity");
  }
  if (auto quiet = CheckVolume(ShortWindowRequests(input), options_.min_short_window_requests,
                               "requests in the " + window_ + " window")) {
    return *quiet;
  }
  const double ratio = working_set / capacity;
  return Observation::Valid(ratio, options_.fire_threshold, options_.clear_threshold,
                            Annotate(inputs, working_set, lower_bound, ratio));
}

Annotations CapacityShortfallDetector::Annotate(const AlertInputs& inputs, double working_set, bool lower_bound,
                                                double ratio) const {
  const double capacity = *inputs.capacity_pages;
  const std::string more = lower_bound ? ">" : "";
  Annotations a;
  a["working_set_pages"] = more + FormatCount(working_set);
  a["capacity_pages"] = FormatCount(capacity);
  a["shortfall_pages"] = more + FormatCount(std::max(0.0, working_set - capacity));
  a["working_set_to_capacity"] = more + FormatNumber(ratio);
  if (!inputs.working_set_target.empty()) a["target"] = inputs.working_set_target;
  std::string ws_text = more + FormatCount(working_set) + " pages";
  std::string capacity_text = FormatCount(capacity) + " pages";
  if (inputs.bytes_per_page) {
    const double ws_bytes = working_set * *inputs.bytes_per_page;
    const double capacity_bytes = capacity * *inputs.bytes_per_page;
    a["working_set_bytes"] = more + FormatCount(ws_bytes);
    a["capacity_bytes"] = FormatCount(capacity_bytes);
    ws_text += " (" + more + FormatBytes(ws_bytes) + ")";
    capacity_text += " (" + FormatBytes(capacity_bytes) + ")";
  }
  const std::string target = inputs.working_set_target.empty() ? "" : " at target " + inputs.working_set_target;
  a["summary"] = "KV-cache working set" + target + " over " + window_ + " is " + ws_text + ", " + more +
                 FormatPercent(ratio) + " of the capacity " + capacity_text;
  a["description"] = "The working set" + target + " of the last " + window_ + " (" + ws_text +
                     ") does not fit in the configured KV cache (" + capacity_text +
                     "): hits are lost to evictions whatever the policy. Fires at " +
                     FormatPercent(options_.fire_threshold) + " of capacity and clears below " +
                     FormatPercent(options_.clear_threshold) + ".";
  return a;
}

}  // namespace kvwatch::alerts
