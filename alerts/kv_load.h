// KvLoadDetector: the KV load factor rho (curve/kv_load.h: arrival rate x mean KV
// token-seconds per request / KV capacity in tokens, Little's law for memory)
// holds above a threshold: admission is outrunning the replica's KV memory, and
// preemptions (recompute) follow.
//
// Condition value: rho over the configured window (default 5m). Pending at >=
// fire_threshold (default 0.9), cleared below clear_threshold (default 0.8),
// firing after `for` (default 10m).
//
// Quiet: kNoData without a load factor (the window has no request with prompt and
// output token counts, as with KV events, or the agent knows no KV capacity);
// kBelowMinVolume with fewer than min_short_window_requests requests with token
// counts in the window (default 50).
//
// Thread safety: stateless after construction; one caller at a time.
#ifndef KVWATCH_ALERTS_KV_LOAD_H_
#define KVWATCH_ALERTS_KV_LOAD_H_

#include <chrono>
#include <string>
#include <string_view>

#include "alerts/detector.h"
#include "alerts/rule.h"
#include "base/status.h"

namespace kvwatch::alerts {

inline constexpr std::string_view kKvLoadAlertName = "KVWatchKvLoadHigh";

struct KvLoadOptions {
  // Whether the Alerter evaluates this detector. Default: true.
  bool enabled = true;
  // The window rho is read over (one of the agent's curve windows); the alert's
  // window label. Default: 5m.
  std::chrono::seconds window{300};
  // rho at or above which the alert goes pending. Default: 0.9.
  double fire_threshold = 0.9;
  // rho below which a firing alert clears. Default: 0.8.
  double clear_threshold = 0.8;
  // Requests with token counts needed in the window. Default: 50.
  double min_short_window_requests = 50;
  // Severity, `for` (default 10m) and keep_firing_for (default 0).
  RuleOptions rule{"warning", std::chrono::seconds(600), std::chrono::seconds(0)};

  base::Status Validate(std::string_view prefix) const;

  bool operator==(const KvLoadOptions&) const = default;
};

class KvLoadDetector : public Detector {
 public:
  explicit KvLoadDetector(KvLoadOptions options);

  std::string_view AlertName() const override { return kKvLoadAlertName; }
  std::string_view Window() const override { return window_; }
  Observation Evaluate(const DetectorInput& input) override;

 private:
  KvLoadOptions options_;
  std::string window_;
};

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_KV_LOAD_H_
