// CounterHistory: turns one cumulative counter, sampled at each evaluation, into its
// increase and rate over trailing windows (the short and the baseline window), the
// way Prometheus' increase()/rate() do, without extrapolation.
//
// Counter resets: a sample lower than the previous one means the counter restarted
// (engine restart); the increase across the reset is the new value itself. The
// history keeps a reset-corrected running total, so windows spanning a reset are
// right, and resets() counts them.
//
// Window semantics: IncreaseOver(now, W) is the corrected total at the latest sample
// minus the total at the anchor, the newest stored sample at or before now - W (or
// the oldest sample when the history is younger than W). `seconds` is the real span
// between the two samples, so the rate is exact for the time actually covered and
// `coverage` = seconds / W says how much of the window that is.
//
// Memory: samples closer than `min_spacing` to the previous stored one are not
// stored (only the latest is kept), and samples older than `retention` (beyond one
// anchor) are dropped, so memory is bounded by retention / min_spacing samples.
//
// Thread safety: none; one owner (the Alerter) serializes calls.
#ifndef KVWATCH_ALERTS_COUNTER_RATE_H_
#define KVWATCH_ALERTS_COUNTER_RATE_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "alerts/inputs.h"

namespace kvwatch::alerts {

struct WindowIncrease {
  double increase = 0;  // reset-corrected increase of the counter over the span
  double seconds = 0;   // span actually covered, > 0
  double coverage = 0;  // seconds / window length, in (0, 1]

  double rate() const { return increase / seconds; }  // per second
};

class CounterHistory {
 public:
  // REQUIRES: retention > 0, min_spacing >= 0.
  CounterHistory(std::chrono::seconds retention, TimePoint::duration min_spacing);

  // Records the counter's cumulative `value` at `time`. Returns false (and records
  // nothing) when the value is not a finite non-negative number or `time` is not
  // later than the latest sample.
  bool Observe(TimePoint time, double value);

  // Increase over the window (now - window, now]. std::nullopt without two samples
  // spanning a positive time. `now` is normally the latest sample's time; samples
  // later than `now` are not expected (they would be counted).
  std::optional<WindowIncrease> IncreaseOver(TimePoint now, std::chrono::seconds window) const;

  // The reset-corrected cumulative total at the latest sample (0 before any).
  double corrected_total() const { return latest_ ? latest_->total : 0.0; }
  std::optional<TimePoint> latest_time() const;
  std::uint64_t resets() const { return resets_; }

  // Checkpoint encoding (appends / consumes): the retention and spacing (a
  // history of other windows is refused), the stored samples, the latest sample,
  // the last raw value and the resets. Deserialize is false when truncated or
  // inconsistent (times not increasing, a latest sample missing); the history is
  // then unspecified: discard it.
  void Serialize(std::vector<std::uint8_t>* out) const;
  bool Deserialize(std::span<const std::uint8_t>* in);

 private:
  struct Sample {
    TimePoint time;
    double total;  // reset-corrected cumulative value
  };

  void Prune(TimePoint now);

  const std::chrono::seconds retention_;
  const TimePoint::duration min_spacing_;
  std::deque<Sample> stored_;     // spaced at least min_spacing_ apart, oldest first
  std::optional<Sample> latest_;  // the latest sample, stored or not
  double last_raw_ = 0;
  std::uint64_t resets_ = 0;
};

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_COUNTER_RATE_H_
