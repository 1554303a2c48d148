#include "alerts/rule.h"

#include <algorithm>
#include <utility>

namespace kvwatch::alerts {

base::Status RuleOptions::Validate(std::string_view prefix) const {
  const std::string where(prefix);
  if (severity.empty()) {
    return base::Status::Error(where + ".severity: expected a non-empty label value");
  }
  if (for_duration.count() < 0) {
    return base::Status::Error(where + ".for: expected a duration >= 0, got " +
                                std::to_string(for_duration.count()) + "s");
  }
  if (keep_firing_for.count() < 0) {
    return base::Status::Error(where + ".keep_firing_for: expected a duration >= 0, got " +
                                std::to_string(keep_firing_for.count()) + "s");
  }
  return base::Status::Ok();
}

Rule::Rule(RuleOptions options) : options_(std::move(options)) {}

std::optional<EventKind> Rule::Step(TimePoint now, const Observation& observation) {
  now = std::max(now, last_step_);  // never let a duration go negative
  last_step_ = now;
  const bool valid = observation.kind == ObservationKind::kValid;
  switch (state_) {
    case AlertState::kInactive:
    case AlertState::kResolved:
      return StepQuiet(now, valid && observation.above_fire);
    case AlertState::kPending:
      return StepPending(now, valid && observation.above_fire);
    case AlertState::kFiring:
      return StepFiring(now, valid && !observation.below_clear);
  }
  return std::nullopt;
}

std::optional<EventKind> Rule::StepQuiet(TimePoint now, bool above_fire) {
  if (!above_fire) return std::nullopt;
  state_ = AlertState::kPending;
  active_since_ = now;
  fired_at_.reset();
  resolved_at_.reset();
  clear_since_.reset();
  if (options_.for_duration.count() == 0) {
    state_ = AlertState::kFiring;
    fired_at_ = now;
    return EventKind::kFiring;
  }
  return EventKind::kPending;
}

std::optional<EventKind> Rule::StepPending(TimePoint now, bool above_fire) {
  if (!above_fire) {
    state_ = AlertState::kInactive;
    active_since_.reset();
    return EventKind::kCancelled;
  }
  if (now - *active_since_ < options_.for_duration) return std::nullopt;
  state_ = AlertState::kFiring;
  fired_at_ = now;
  return EventKind::kFiring;
}

std::optional<EventKind> Rule::StepFiring(TimePoint now, bool holds) {
  if (holds) {
    clear_since_.reset();
    return std::nullopt;
  }
  if (!clear_since_) clear_since_ = now;
  if (now - *clear_since_ < options_.keep_firing_for) return std::nullopt;
  state_ = AlertState::kResolved;
  resolved_at_ = now;
  clear_since_.reset();
  return EventKind::kResolved;
}

}  // namespace kvwatch::alerts
