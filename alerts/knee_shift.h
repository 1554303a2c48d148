// KneeShiftDetector: the knee of the short window's capacity-to-hit-rate curve
// against the knee of the baseline window's curve (default 1h against 24h).
//
// Condition value: the relative change |short - baseline| / baseline (0.3 = the knee
// moved by 30%, up or down; the direction is in the annotations, not in the labels).
// The alert goes pending when the value is >= fire_threshold AND the knee moved by
// at least min_shift_pages (so a small cache's knee moving 4 -> 5 pages is not a
// 25% "shift"); it clears when the value is < clear_threshold.
//
// Stationary workloads: the curve engine keeps one cache state over the whole
// stream and a window only selects which requests count (docs/semantics.md
// section 5), so on a stationary workload the short and baseline knees estimate the
// same point and differ by noise only. The defaults (25% to fire, 15% to clear,
// held for 15 minutes, 500 requests in the short window) are chosen so that such
// noise does not fire; a knee-shift alert on a stationary workload is a bug.
//
// Quiet: kNoData without both knees or with a baseline knee <= 0; kBelowMinVolume
// with fewer than min_short_window_requests requests in the short window or
// min_baseline_window_requests in the baseline window.
//
// Thread safety: stateless after construction; Evaluate() may be called from one
// thread at a time.
#ifndef KVWATCH_ALERTS_KNEE_SHIFT_H_
#define KVWATCH_ALERTS_KNEE_SHIFT_H_

#include <string>
#include <string_view>

#include "alerts/detector.h"
#include "alerts/rule.h"
#include "base/status.h"

namespace kvwatch::alerts {

inline constexpr std::string_view kKneeShiftAlertName = "KVWatchKneeShift";

struct KneeShiftOptions {
  // Whether the Alerter evaluates this detector. Default: true.
  bool enabled = true;
  // Relative knee change at or above which the alert goes pending. Default: 0.25.
  double fire_threshold = 0.25;
  // Relative knee change below which a firing alert clears. Default: 0.15.
  double clear_threshold = 0.15;
  // The knee must also have moved by at least this many pages to fire. Default: 32.
  double min_shift_pages = 32;
  // Requests needed in the short window. Default: 500.
  double min_short_window_requests = 500;
  // Requests needed in the baseline window. Default: 5000.
  double min_baseline_window_requests = 5000;
  // Severity, `for` (default 15m) and keep_firing_for (default 0).
  RuleOptions rule;

  base::Status Validate(std::string_view prefix) const;

  bool operator==(const KneeShiftOptions&) const = default;
};

class KneeShiftDetector : public Detector {
 public:
  // `short_window` and `baseline_window` name the windows ("1h", "24h").
  KneeShiftDetector(KneeShiftOptions options, std::string short_window, std::string baseline_window);

  // Detector
  std::string_view AlertName() const override { return kKneeShiftAlertName; }
  std::string_view Window() const override { return window_; }
  Observation Evaluate(const DetectorInput& input) override;

 private:
  Annotations Annotate(const AlertInputs& inputs, double short_knee, double baseline_knee, double change) const;

  const KneeShiftOptions options_;
  const std::string short_window_;
  const std::string baseline_window_;
  const std::string window_;
};

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_KNEE_SHIFT_H_
