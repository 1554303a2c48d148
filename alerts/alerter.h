// Alerter: the configured set of detectors of one replica, evaluated together at a
// given time, with their alert life cycles and the Alertmanager re-send schedule.
//
// Each evaluation (Evaluate) takes the plain observations of AlertInputs, turns
// the cumulative counters into short- and baseline-window increases (resets
// handled), runs every enabled detector and steps its Rule, and returns every
// alert's state plus the transitions this evaluation made (pending, firing,
// resolved, cancelled). TakeDue(now) then hands out the Alertmanager v2 items due
// at `now` per the client contract (notify.h) and records them as sent; the agent
// encodes them (EncodeAlertmanagerPayload) and POSTs them to every Alertmanager.
//
// Identity: every alert has the labels alertname, window, severity, replica and
// model (the last two omitted when empty) plus the configured extra labels. They
// are fixed at construction, so an alert keeps one identity across evaluations;
// the numbers are annotations.
//
// Default detectors (all thresholds are documented next to their definitions):
//   KVWatchKneeShift                knee 1h vs 24h, relative change >= 25% (clear < 15%), for 15m
//   KVWatchWorkingSetOverCapacity   working set / capacity >= 1.0 (clear < 0.9), for 15m
//   KVWatchEvictionRateShift        eviction rate 1h / 24h >= 2 (clear < 1.5), floor 1/s, for 15m
//   KVWatchRejectionRateShift       same for rejected requests, floor 0.05/s
//   KVWatchPreemptionRateShift      same for preemptions, floor 0.05/s
//   KVWatchCapacityMissesRising     capacity-miss share 1h / 24h >= 2 (clear < 1.5), floor 1% of
//                                   references, smallest capacity, for 15m
//   KVWatchEvictionRateDrift        CUSUM on the per-minute eviction rate, h = 10 sigma
//                                   (clear < 5), k = 0.75 sigma, for 5m
//   KVWatchKvLoadHigh               KV load factor over 5m >= 0.9 (clear < 0.8), 50 requests
//                                   with token counts, for 10m
//
// Time: each Evaluate carries its time; one earlier than the previous evaluation's
// is rejected (nothing changes). No clock is read.
//
// Thread safety: none. The agent owns one Alerter and serializes calls (or guards
// it with its own mutex); results are plain values that can be handed to other
// threads.
#ifndef KVWATCH_ALERTS_ALERTER_H_
#define KVWATCH_ALERTS_ALERTER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "alerts/alert.h"
#include "alerts/capacity_miss_share.h"
#include "alerts/capacity_shortfall.h"
#include "alerts/change_detector.h"
#include "alerts/counter_rate.h"
#include "alerts/detector.h"
#include "alerts/inputs.h"
#include "alerts/knee_shift.h"
#include "alerts/kv_load.h"
#include "alerts/notify.h"
#include "alerts/rate_shift.h"
#include "alerts/rule.h"
#include "base/status.h"

namespace kvwatch::alerts {

struct AlerterOptions {
  // -------------------
  // Identity (labels)

  // The "replica" label, from the agent's config. Default: "" (label omitted).
  std::string replica;
  // The "model" label, from the agent's config. Default: "" (label omitted).
  std::string model;
  // Constant labels added to every alert (e.g. cluster). Names must match
  // [a-zA-Z_][a-zA-Z0-9_]*, not start with "__", not be one of alertname, window,
  // severity, replica, model; values must be non-empty. Default: none.
  Labels extra_labels;

  // -------------------
  // Windows

  // The short window: knees, working set, rates are compared over it. Default: 1h.
  std::chrono::seconds short_window{3600};
  // The baseline window the short one is compared against. Default: 24h.
  std::chrono::seconds baseline_window{24 * 3600};

  // How often the owner evaluates (alerts.evaluation_interval): the Alerter reads
  // no clock, the agent's loop calls Evaluate this often. > 0. Default: 15s.
  std::chrono::milliseconds evaluation_interval{15000};

  // -------------------
  // Detectors (see each header for the meaning of the value)

  // Knee shift, short vs baseline knee. Defaults: fire 0.25, clear 0.15, min shift
  // 32 pages, 500 / 5000 requests, for 15m.
  KneeShiftOptions knee_shift;
  // Working set over capacity. Defaults: fire 1.0, clear 0.9, 500 requests, for 15m.
  CapacityShortfallOptions capacity_shortfall;
  // Eviction-rate shift. Defaults: fire 2.0, clear 1.5, floor 1 block/s, for 15m.
  RateShiftOptions eviction_rate_shift = RateShiftDefaults(CounterKind::kEvictedBlocks);
  // Rejection-rate shift. Defaults: fire 2.0, clear 1.5, floor 0.05 requests/s
  // (3 a minute), for 15m.
  RateShiftOptions rejection_rate_shift = RateShiftDefaults(CounterKind::kRejectedRequests);
  // Preemption-rate shift. Defaults: fire 2.0, clear 1.5, floor 0.05 preemptions/s,
  // for 15m.
  RateShiftOptions preemption_rate_shift = RateShiftDefaults(CounterKind::kPreemptions);
  // Capacity-miss share (kvwatch's own counters, AlertInputs::capacity_misses).
  // Defaults: fire 2.0, clear 1.5, floor 0.01 of references, smallest capacity,
  // 500 requests, for 15m.
  CapacityMissShareOptions capacity_miss_share;
  // Sequential change tests, at most one per counter. Default: one CUSUM on the
  // eviction rate (ChangeTestOptions defaults: 60 s samples, 120 warm-up samples,
  // k 0.75, h 10, clear 5, relearn after 1h, for 5m). A CUSUM on the rejection rate
  // is possible but, with an idle baseline, behaves as "any rejections for a few
  // minutes"; the rejection-rate shift covers that with an explicit floor.
  std::vector<ChangeTestOptions> change_tests{ChangeTestOptions{}};
  // KV load factor (AlertInputs::kv_load). Defaults: window 5m, fire 0.9, clear
  // 0.8, 50 requests with token counts, for 10m.
  KvLoadOptions kv_load;

  // -------------------
  // Notification (Alertmanager v2 re-send contract)

  // Defaults: resend every 60s with endsAt = now + 4m; resolved re-sent for 15m.
  NotifyOptions notify;

  // Ok, or the first problem, naming the field ("knee_shift.clear_threshold: ...").
  base::Status Validate() const;

  bool operator==(const AlerterOptions&) const = default;
};

// The outcome of one evaluation.
struct Evaluation {
  std::vector<AlertStatus> alerts;  // every configured alert, in a fixed order
  std::vector<AlertEvent> events;   // transitions made by this evaluation
};

class Alerter {
 public:
  // An Alerter with the enabled detectors of `options`, or the validation error.
  static base::Result<Alerter> Create(AlerterOptions options);

  Alerter(Alerter&&) = default;
  Alerter& operator=(Alerter&&) = delete;
  Alerter(const Alerter&) = delete;
  Alerter& operator=(const Alerter&) = delete;

  // Evaluates every detector on `inputs`. Errors (state unchanged): inputs.time
  // earlier than the previous evaluation's; a present number that is negative or
  // not finite (the message names the field).
  base::Result<Evaluation> Evaluate(const AlertInputs& inputs);

  // The alerts due to be (re)sent at `now` (notify.h), recorded as sent at `now`.
  // Call it after Evaluate, typically every resend interval or every evaluation.
  std::vector<PostableAlert> TakeDue(TimePoint now);

  // Every configured alert's state after the last evaluation, in a fixed order.
  std::vector<AlertStatus> Statuses() const;
  const AlerterOptions& options() const { return options_; }
  // The time of the last accepted evaluation; nullopt before the first.
  std::optional<TimePoint> last_evaluation() const { return last_time_; }

  // Checkpoint encoding (appends): the last evaluation's time, the counter
  // histories, and per alert its identity (labels), its life cycle (Rule), its
  // status (annotations, times, what was handed out to be sent) and its
  // detector's state (the change test's CUSUM, the capacity-miss histories).
  // Times are stored as they are (system_clock ticks): a restored firing alert
  // keeps its startsAt, and its next re-send is due resend_interval after the
  // last one recorded here.
  void Serialize(std::vector<std::uint8_t>* out) const;
  // Consumes what Serialize wrote. True: this Alerter now behaves exactly as the
  // one that wrote it did at that moment (same alerts, events and items due for
  // the same inputs). False (the Alerter is unchanged): truncated or malformed
  // bytes, or bytes of another set of alerts (the alerts' labels differ: other
  // detectors enabled, other windows, severities, replica, model or extra
  // labels) or of other windows (the counter histories' retention). Thresholds
  // and `for` durations are not compared: a checkpoint restores into an Alerter
  // whose thresholds were retuned, and the new ones apply from the next
  // evaluation.
  bool Deserialize(std::span<const std::uint8_t>* in);

 private:
  struct Entry {
    std::unique_ptr<Detector> detector;
    Rule rule;
    AlertStatus status;
  };

  explicit Alerter(AlerterOptions options);
  void AddDetector(std::unique_ptr<Detector> detector, const RuleOptions& rule);
  DerivedCounters ObserveCounters(const AlertInputs& inputs);
  std::optional<AlertEvent> Step(Entry& entry, TimePoint now, const DetectorInput& input);

  AlerterOptions options_;
  std::vector<Entry> entries_;
  std::vector<CounterHistory> counters_;  // indexed by CounterKind
  std::optional<TimePoint> last_time_;
};

// Validates AlertInputs' numbers; the error names the field ("inputs.capacity_pages").
base::Status ValidateInputs(const AlertInputs& inputs);

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_ALERTER_H_
