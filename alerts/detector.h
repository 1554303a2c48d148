// Detector: one alert condition, evaluated on the observations of one evaluation.
//
// A detector turns AlertInputs (and the counter windows the Alerter derived from the
// cumulative counters) into an Observation: a condition value in the detector's own
// unit, whether that value is at or above the firing threshold and whether it is
// below the (lower) clearing threshold, and annotations carrying the numbers. The
// life cycle (pending, `for`, firing, hysteresis, keep_firing_for, resolved) is not
// the detector's business: alerts/rule.h applies it to the Observations.
//
// Quiet rules: a detector returns kNoData when an input it needs is missing and
// kBelowMinVolume when the traffic it rests on is below its minimum volume. Both
// count as "condition false" for the rule (a pending alert is cancelled; a firing
// one resolves after keep_firing_for), exactly like a Prometheus rule whose
// expression returns nothing.
//
// Thread safety: detectors may keep state (the change test does); one owner
// serializes Evaluate() calls.
#ifndef KVWATCH_ALERTS_DETECTOR_H_
#define KVWATCH_ALERTS_DETECTOR_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "alerts/alert.h"
#include "alerts/counter_rate.h"
#include "alerts/inputs.h"

namespace kvwatch::alerts {

struct Observation {
  ObservationKind kind = ObservationKind::kNoData;
  double value = std::nan("");  // the condition value (kValid only)
  bool above_fire = false;      // value >= fire threshold (and any extra firing guard)
  bool below_clear = true;      // value < clear threshold
  Annotations annotations;      // numbers and "summary"/"description" (kValid only)
  std::string reason;           // why kNoData / kBelowMinVolume, in words

  static Observation NoData(std::string reason);
  static Observation BelowMinVolume(std::string reason);
  // A valid observation of `value` against the thresholds (REQUIRES clear <= fire).
  static Observation Valid(double value, double fire_threshold, double clear_threshold, Annotations annotations);
};

// The cumulative counters of CounterSample, by name.
enum class CounterKind { kEvictedBlocks = 0, kRejectedRequests, kPreemptions, kRequests };
inline constexpr std::size_t kCounterKinds = 4;
std::string_view CounterName(CounterKind kind);  // "evicted_blocks", ...
std::string_view CounterUnit(CounterKind kind);  // "evicted blocks", ... (in sentences)
std::optional<double> CounterValue(const CounterSample& sample, CounterKind kind);

// What the Alerter derived from one counter's history at this evaluation.
struct CounterWindows {
  std::optional<WindowIncrease> short_window;     // over the short window
  std::optional<WindowIncrease> baseline_window;  // over the baseline window
  std::optional<double> corrected_total;          // reset-corrected cumulative; absent before any sample
  std::optional<TimePoint> latest_time;           // time of the latest sample of the counter
  std::uint64_t resets = 0;                       // counter resets seen so far
};

struct DerivedCounters {
  std::array<CounterWindows, kCounterKinds> windows;

  const CounterWindows& operator[](CounterKind kind) const { return windows[static_cast<std::size_t>(kind)]; }
  CounterWindows& operator[](CounterKind kind) { return windows[static_cast<std::size_t>(kind)]; }
};

struct DetectorInput {
  const AlertInputs& inputs;
  const DerivedCounters& counters;
};

// Requests in the short window: the increase of the requests counter over the
// short window when that counter is reported, else inputs.short_window_requests.
std::optional<double> ShortWindowRequests(const DetectorInput& input);

// kBelowMinVolume when `volume` is unknown or below `min_volume` (a min_volume of 0
// accepts an unknown volume); std::nullopt when the volume suffices.
std::optional<Observation> CheckVolume(std::optional<double> volume, double min_volume, std::string_view what);

class Detector {
 public:
  virtual ~Detector() = default;

  // The alertname label, e.g. "KVWatchKneeShift". Constant.
  virtual std::string_view AlertName() const = 0;
  // The window label, e.g. "1h/24h". Constant.
  virtual std::string_view Window() const = 0;
  // Evaluates the condition on this evaluation's inputs.
  virtual Observation Evaluate(const DetectorInput& input) = 0;

  // Checkpoint of the state Evaluate keeps between evaluations (appends /
  // consumes); stateless detectors write nothing. Deserialize is false when the
  // bytes are truncated or inconsistent; the detector is then unspecified:
  // discard it. REQUIRES for Deserialize: a detector made with the same options.
  virtual void Serialize(std::vector<std::uint8_t>* out) const {}
  virtual bool Deserialize(std::span<const std::uint8_t>* in) { return true; }
};

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_DETECTOR_H_
