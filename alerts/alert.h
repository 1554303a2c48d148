// Alert: the vocabulary shared by the rule life cycle, the Alerter and the notifier:
// label and annotation maps, the life-cycle states and transitions, and the state
// of one alert as the Alerter reports it.
//
// Life cycle (Prometheus semantics, plus hysteresis):
//   inactive --(value >= fire threshold)--> pending
//   pending  --(above fire threshold continuously for `for`)--> firing
//   pending  --(not above fire threshold)--> inactive            (event kCancelled)
//   firing   --(below clear threshold, or no data, for keep_firing_for)--> resolved
//   resolved --(value >= fire threshold)--> pending              (a new alert instance)
// Labels identify an alert (Alertmanager keys alerts by their label set) and never
// change across evaluations; numbers go in annotations.
//
// Thread safety: plain values.
#ifndef KVWATCH_ALERTS_ALERT_H_
#define KVWATCH_ALERTS_ALERT_H_

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "alerts/inputs.h"

namespace kvwatch::alerts {

// Sorted maps, so that encodings and comparisons are deterministic.
using Labels = std::map<std::string, std::string>;
using Annotations = std::map<std::string, std::string>;

enum class AlertState { kInactive, kPending, kFiring, kResolved };

// A transition made by one evaluation.
enum class EventKind {
  kPending,    // inactive/resolved -> pending
  kFiring,     // pending -> firing (or inactive -> firing when `for` is 0)
  kResolved,   // firing -> resolved
  kCancelled,  // pending -> inactive: the condition went away before `for` elapsed
};

// "inactive", "pending", "firing", "resolved" (the ALERTS{alertstate} spelling).
std::string_view StateName(AlertState state);
// "pending", "firing", "resolved", "cancelled".
std::string_view EventName(EventKind kind);

// What the detector could say at the last evaluation.
enum class ObservationKind {
  kNoData,          // an input is missing (or the detector is still learning)
  kBelowMinVolume,  // too little traffic for the numbers to mean anything: stay quiet
  kValid,           // the value was computed and compared with the thresholds
};
std::string_view ObservationKindName(ObservationKind kind);  // "no_data", ...

// The state of one alert after an evaluation.
struct AlertStatus {
  Labels labels;            // identity: alertname, window, severity, replica, model, extras
  Annotations annotations;  // numbers and a human summary, from the last evaluation with data
  AlertState state = AlertState::kInactive;
  ObservationKind observation = ObservationKind::kNoData;  // at the last evaluation
  std::string quiet_reason;                                // why the last observation was not kValid, in words
  double value = std::nan("");                             // the detector's condition value (NaN: none)
  std::optional<TimePoint> active_since;                   // pending began (kept while firing)
  std::optional<TimePoint> fired_at;                       // firing began: the stable startsAt
  std::optional<TimePoint> resolved_at;                    // when it resolved (state kResolved)
  std::optional<TimePoint> last_sent_at;                   // last time it was handed out to be sent
  bool resolution_sent = false;                            // the resolved state was handed out at least once
  TimePoint evaluated_at{};                                // time of the last evaluation
};

// One transition, with the alert's identity and numbers at that moment.
struct AlertEvent {
  EventKind kind = EventKind::kPending;
  TimePoint time{};
  Labels labels;
  Annotations annotations;
  double value = std::nan("");
};

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_ALERT_H_
