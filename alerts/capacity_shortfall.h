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
#include "base/source_kinds.h"
#include "base/status.h"

namespace kvwatch::alerts {

inline constexpr std::string_view kCapacityShortfallAlertName = "KVWatchWorkingSetOverCapacity";

// The working set the detector compares with the capacity: the smallest cache
// reaching `fraction` of the unlimited page hits (kPageHit) or of the requests
// (kRequestCoverage). The agent measures it (alerts.over_capacity.target and
// .fraction); the detector only reads the number and names the target.
enum class WorkingSetTarget { kPageHit, kRequestCoverage };
// Its spellings in the config and in annotations; the first of each value is its name.
inline constexpr base::Spelling<WorkingSetTarget> kWorkingSetTargetSpellings[] = {
    {"page_hit", WorkingSetTarget::kPageHit},
    {"request_coverage", WorkingSetTarget::kRequestCoverage},
};
std::string_view WorkingSetTargetName(WorkingSetTarget target);  // "page_hit", "request_coverage"

struct WorkingSetSpec {
  // Default: page_hit.
  WorkingSetTarget target = WorkingSetTarget::kPageHit;
  // In (0, 1]. Default: 0.95.
  double fraction = 0.95;

  // "page_hit 0.95": the target in words, for annotations.
  std::string Text() const;

  bool operator==(const WorkingSetSpec&) const = default;
};

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
  // The working set compared (measured by the caller). Default: page_hit 0.95.
  WorkingSetSpec working_set;

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
  Annotations Annotate(const AlertInputs& inputs, double working_set, bool lower_bound, double ratio) const;

  const CapacityShortfallOptions options_;
  const std::string window_;
};

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_CAPACITY_SHORTFALL_H_
