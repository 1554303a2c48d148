#include "alerts/rule.h"

#include <algorithm>
#include <utility>

#include "alerts/checkpoint.h"

namespace kvwatch::alerts {

base::Status RuleOptions::Validate(std::string_view prefix) const {
  const std::string where(prefix);
  if (severity.empty()) {
    return base::Status::Error(where + ".severity: expected a non-empty label value");
  }
  if (for_duration.count() < 0) {
    return base::Status::Error(where + ".for: expected a duration >= 0, got " + std::to_string(for_duration.count()) +
                               "s");
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

void Rule::Serialize(std::vector<std::uint8_t>* out) const {
  base::AppendPod<std::uint8_t>(out, static_cast<std::uint8_t>(state_));
  checkpoint::AppendOptionalTime(out, active_since_);
  checkpoint::AppendOptionalTime(out, fired_at_);
  checkpoint::AppendOptionalTime(out, resolved_at_);
  checkpoint::AppendOptionalTime(out, clear_since_);
  checkpoint::AppendTime(out, last_step_);
}

bool Rule::Deserialize(std::span<const std::uint8_t>* in) {
  std::uint8_t state = 0;
  if (!base::ReadPod(in, &state) || state > static_cast<std::uint8_t>(AlertState::kResolved) ||
      !checkpoint::ReadOptionalTime(in, &active_since_) || !checkpoint::ReadOptionalTime(in, &fired_at_) ||
      !checkpoint::ReadOptionalTime(in, &resolved_at_) || !checkpoint::ReadOptionalTime(in, &clear_since_) ||
      !checkpoint::ReadTime(in, &last_step_)) {
    return false;
  }
  state_ = static_cast<AlertState>(state);
  // StepPending reads active_since; a firing alert is sent with fired_at.
  if (state_ == AlertState::kPending && !active_since_) return false;
  if (state_ == AlertState::kFiring && !fired_at_) return false;
  return true;
}

}  // namespace kvwatch::alerts
