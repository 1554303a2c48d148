// CapacityMissShareDetector (KVWatchCapacityMissesRising): the share of page
// references that are capacity misses (they would hit in an unlimited cache but
// miss in an LRU cache of C pages) over the short window against the same share
// over the baseline window (default 1h against 24h), from kvwatch's own cumulative
// counters (AlertInputs::capacity_misses, issue 11). A rising share is the early
// warning of operating beyond the eviction-free region: reusable pages are being
// lost to eviction.
//
//   share(W) = rate(kvwatch_capacity_misses_total{capacity_pages=C}[W])
//              / rate(kvwatch_page_references_total[W])
//   value    = share(short) / max(share(baseline), share_floor)
//
// Rates, not increases, so a miss counter that appeared later than the reference
// counter (a capacity added at a restart) is compared over its own span. Which C:
// the smallest reported capacity (default), or with `every_capacity` each one, the
// value being the largest ratio (the annotations name its capacity). Pending at >=
// fire_threshold (default 2.0), cleared below clear_threshold (default 1.5). Like
// the rate shifts, a new level that persists is absorbed by the baseline and the
// alert resolves after about a baseline window.
//
// Evictors: when the inputs carry the evictor matrix (kvwatch_evicted_by_total),
// the annotations name, per dimension ("class", "tenant"), the (evictor, victim)
// pair with the largest increase over the short window at the alert's capacity
// ("class first evicts class turn2"), self-eviction included, as the PromQL twin's
// topk(1, sum by (evictor, victim) (rate(kvwatch_evicted_by_total[1h]))) does.
//
// Quiet: kNoData until the reference counter and a miss counter have two samples,
// or when no page was referenced in the short window; kBelowMinVolume with fewer
// than min_short_window_requests requests in the short window
// (ShortWindowRequests()).
//
// A cell that appears (the agent exports only cells that are not zero) counts as 0
// at the previous evaluation, so the alert names the evictor from its first
// firing evaluation on.
//
// Memory: the reference and miss counters keep baseline_window / sample_spacing
// samples each; evictor cells only the short window's, and only at the capacities
// reported, and a cell not reported for a short window is dropped (the folder
// relabels groups). With K = 8 that is at most 2 x 9 x 9 cells per capacity.
//
// Thread safety: keeps counter histories; one owner (the Alerter) serializes calls.
#ifndef KVWATCH_ALERTS_CAPACITY_MISS_SHARE_H_
#define KVWATCH_ALERTS_CAPACITY_MISS_SHARE_H_

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "alerts/counter_rate.h"
#include "alerts/detector.h"
#include "alerts/rule.h"
#include "base/status.h"

namespace kvwatch::alerts {

inline constexpr std::string_view kCapacityMissAlertName = "KVWatchCapacityMissesRising";

struct CapacityMissShareOptions {
  // Whether the Alerter evaluates this detector. Default: true (quiet without
  // capacity-miss counters, i.e. without curve.capacities).
  bool enabled = true;
  // share(short) / max(share(baseline), floor) at or above which the alert goes
  // pending. Default: 2.0 (the share doubled).
  double fire_threshold = 2.0;
  // The ratio below which a firing alert clears. Default: 1.5.
  double clear_threshold = 1.5;
  // The floor of the baseline share, a fraction of page references, so a cache that
  // (almost) never misses does not "double" on a handful of misses. Default: 0.01.
  double share_floor = 0.01;
  // Requests needed in the short window. Default: 500.
  double min_short_window_requests = 500;
  // false: the smallest reported capacity only; true: every reported capacity, the
  // value being the largest ratio. Default: false.
  bool every_capacity = false;
  // Severity, `for` (default 15m) and keep_firing_for (default 0).
  RuleOptions rule;

  base::Status Validate(std::string_view prefix) const;

  bool operator==(const CapacityMissShareOptions&) const = default;
};

// The top (evictor, victim) pair of one dimension over the short window.
struct TopEvictor {
  std::string evictor;
  std::string victim;
  double pages = 0;  // increase over the short window
  double share = 0;  // of all attributed pages of that dimension at that capacity
};

class CapacityMissShareDetector : public Detector {
 public:
  // `sample_spacing`: the counter histories keep one sample per spacing (the
  // Alerter's anchors: short_window / 360).
  CapacityMissShareDetector(CapacityMissShareOptions options, std::chrono::seconds short_window,
                            std::chrono::seconds baseline_window, TimePoint::duration sample_spacing);

  // Detector
  std::string_view AlertName() const override { return kCapacityMissAlertName; }
  std::string_view Window() const override { return window_; }
  Observation Evaluate(const DetectorInput& input) override;

  // The top pair of `dimension` at `capacity_pages` over the short window ending at
  // the last evaluation; std::nullopt without an attributed page.
  std::optional<TopEvictor> TopEvictorOf(std::string_view dimension, double capacity_pages) const;

  // The reference, miss and evictor-cell histories and the last evaluation's time.
  void Serialize(std::vector<std::uint8_t>* out) const override;
  bool Deserialize(std::span<const std::uint8_t>* in) override;

 private:
  struct Share {
    double capacity_pages = 0;
    double short_share = 0;
    double baseline_share = 0;
    double ratio = 0;
    double short_misses = 0;
  };
  using CellKey = std::tuple<double, std::string, std::string, std::string>;  // C, dimension, victim, evictor

  void Observe(const AlertInputs& inputs);
  Annotations Annotate(const Share& share, double short_references) const;

  const CapacityMissShareOptions options_;
  const std::chrono::seconds short_window_;
  const std::chrono::seconds baseline_window_;
  const TimePoint::duration spacing_;
  const std::string short_name_;
  const std::string baseline_name_;
  const std::string window_;
  CounterHistory references_;
  std::map<double, CounterHistory> misses_;  // by capacity
  std::map<CellKey, CounterHistory> cells_;  // short-window retention
  TimePoint now_{};
};

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_CAPACITY_MISS_SHARE_H_
