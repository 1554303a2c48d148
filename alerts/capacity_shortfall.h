// CapacityShortfallDetector: the working set at the configured target exceeds the
// replica's configured KV-cache capacity, a structural shortfall (the cache cannot
// hold what the workload reuses, whatever the eviction policy), and its recovery.
//
// Condition value: working set / capacity (1.2 = the working set is 20% larger than
// the cache). Pending at >= fire_threshold (default 1.0), cleared below
// clear_threshold (default 0.9: the working set must fall back 10% under capacity).
//
// Not converged: when the working set is absent (the target is not reached within
// the tracked range M), the working set is known to exceed M. If M >= capacity
// (inputs.tracked_pages), the shortfall is certain and M / capacity is used as a
// lower bound (annotated as "> M pages"); otherwise the detector reports kNoData.
//
// Quiet: kNoData without a capacity > 0; kBelowMinVolume with fewer than
// min_short_window_requests requests in the short window (the working set of a
// handful of requests says nothing).
//
// Thread safety: stateless after construction; one caller at a time.
#ifndef KVWATCH_ALERTS_CAPACITY_SHORTFALL_H_
#define KVWATCH_ALERTS_CAPACITY_SHORTFALL_H_

#include <string>
#include <string_view>

#include "alerts/detector.h"
#include "alerts/rule.h"
#include "base/status.h"

namespace kvwatch::alerts {

inline constexpr std::string_view kCapacityShortfallAlertName = "KVWatchWorkingSetOverCapacity";

struct CapacityShortfallOptions {
  // Whether the Alerter evaluates this detector. Default: true.
  bool enabled = true;
  // Working set / capacity at or above which the alert goes pending. Default: 1.0.
  double fire_threshold = 1.0;
  // Working set / capacity below which a firing alert clears. Default: 0.9.
  double clear_threshold = 0.9;
  // Requests needed in the short window. Default: 500.
  double min_short_window_requests = 500;
  // Severity, `for` (default 15m) and keep_firing_for (default 0).
  RuleOptions rule;

  base::Status Validate(std::string_view prefix) const;

  bool operator==(const CapacityShortfallOptions&) const = default;
};

class CapacityShortfallDetector : public Detector {
 public:
  // `short_window` names the window the working set is measured over ("1h").
  CapacityShortfallDetector(CapacityShortfallOptions options, std::string short_window);

  // Detector
  std::string_view AlertName() const override { return kCapacityShortfallAlertName; }
  std::string_view Window() const override { return window_; }
  Observation Evaluate(const DetectorInput& input) override;

 private:
  Annotations Annotate(const AlertInputs& inputs, double working_set, bool lower_bound,
                       double ratio) const;

  const CapacityShortfallOptions options_;
  const std::string window_;
};

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_CAPACITY_SHORTFALL_H_
