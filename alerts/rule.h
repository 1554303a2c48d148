// Rule: the life cycle of one alert (inactive, pending, firing, resolved) driven by
// the Observations of one detector, with Prometheus' `for` and `keep_firing_for`
// and a hysteresis band (see alerts/alert.h for the state diagram).
//
//   * Going pending and staying pending needs the value at or above the FIRING
//     threshold at every evaluation (as in the Prometheus deadband rule
//     `x > hi or (x > lo and ALERTS{alertstate="firing"})`): noise around the firing
//     threshold restarts the `for` clock instead of firing.
//   * Pending becomes firing at the first evaluation at which the condition has
//     held for `for` (now - active_since >= for); `for` = 0 fires at once.
//   * A firing alert stays firing until the value drops BELOW the CLEARING threshold
//     (or the detector has no data / too little volume); it then resolves once that
//     has lasted keep_firing_for (0: at once). A value back at or above the clearing
//     threshold meanwhile cancels the countdown.
//   * A resolved alert that goes pending again is a new instance (new startsAt).
//
// Time is given with each step; a step earlier than the previous one is treated as
// simultaneous with it (no duration goes negative).
//
// Thread safety: none; one owner serializes calls.
#ifndef KVWATCH_ALERTS_RULE_H_
#define KVWATCH_ALERTS_RULE_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "alerts/alert.h"
#include "alerts/detector.h"
#include "alerts/inputs.h"
#include "base/status.h"

namespace kvwatch::alerts {

struct RuleOptions {
  // The severity label. Default: "warning". Must be non-empty.
  std::string severity = "warning";
  // How long the condition must hold (pending) before firing. Default: 15m.
  std::chrono::seconds for_duration{15 * 60};
  // How long a firing alert is held after its condition cleared. Default: 0.
  std::chrono::seconds keep_firing_for{0};

  // Ok, or an error naming the field under `prefix` (e.g. "knee_shift.rule").
  base::Status Validate(std::string_view prefix) const;

  bool operator==(const RuleOptions&) const = default;
};

class Rule {
 public:
  explicit Rule(RuleOptions options);

  // Advances the life cycle with the observation made at `now`. Returns the
  // transition this step made, if any.
  std::optional<EventKind> Step(TimePoint now, const Observation& observation);

  AlertState state() const { return state_; }
  std::optional<TimePoint> active_since() const { return active_since_; }
  std::optional<TimePoint> fired_at() const { return fired_at_; }
  std::optional<TimePoint> resolved_at() const { return resolved_at_; }
  const RuleOptions& options() const { return options_; }

  // Checkpoint encoding (appends / consumes): the state and its times, as they
  // are. Deserialize is false (the rule then unspecified: discard it) when
  // truncated or inconsistent (an unknown state, pending without its start,
  // firing without its start).
  void Serialize(std::vector<std::uint8_t>* out) const;
  bool Deserialize(std::span<const std::uint8_t>* in);

 private:
  std::optional<EventKind> StepQuiet(TimePoint now, bool above_fire);
  std::optional<EventKind> StepPending(TimePoint now, bool above_fire);
  std::optional<EventKind> StepFiring(TimePoint now, bool holds);

  const RuleOptions options_;
  AlertState state_ = AlertState::kInactive;
  std::optional<TimePoint> active_since_;
  std::optional<TimePoint> fired_at_;
  std::optional<TimePoint> resolved_at_;
  std::optional<TimePoint> clear_since_;  // firing, condition cleared since then
  TimePoint last_step_{};
};

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_RULE_H_
