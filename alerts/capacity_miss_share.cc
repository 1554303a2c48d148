#include "alerts/capacity_miss_share.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "alerts/checkpoint.h"
#include "alerts/format.h"
#include "alerts/thresholds.h"

namespace kvwatch::alerts {
namespace {

constexpr std::string_view kDimensions[] = {"class", "tenant"};

// Drops the histories whose latest sample is older than `horizon`.
template <typename Map>
void DropStale(Map& histories, TimePoint horizon) {
  std::erase_if(histories, [&](const auto& entry) {
    const std::optional<TimePoint> latest = entry.second.latest_time();
    return !latest || *latest < horizon;
  });
}

}  // namespace

base::Status CapacityMissShareOptions::Validate(std::string_view prefix) const {
  const std::string where(prefix);
  return FirstError({
      ValidateThresholds(where, fire_threshold, clear_threshold),
      ValidatePositive(where + ".fire_threshold", fire_threshold),
      ValidatePositive(where + ".share_floor", share_floor),
      ValidateNonNegative(where + ".min_short_window_requests", min_short_window_requests),
      rule.Validate(where + ".rule"),
  });
}

CapacityMissShareDetector::CapacityMissShareDetector(CapacityMissShareOptions options,
                                                     std::chrono::seconds short_window,
                                                     std::chrono::seconds baseline_window,
                                                     TimePoint::duration sample_spacing)
    : options_(std::move(options)),
      short_window_(short_window),
      baseline_window_(baseline_window),
      spacing_(sample_spacing),
      short_name_(FormatDuration(short_window)),
      baseline_name_(FormatDuration(baseline_window)),
      window_(short_name_ + "/" + baseline_name_),
      references_(baseline_window, sample_spacing) {}

void CapacityMissShareDetector::Observe(const AlertInputs& inputs) {
  const TimePoint previous = now_;
  now_ = inputs.time;
  const CapacityMissInputs& in = inputs.capacity_misses;
  if (in.page_references) references_.Observe(now_, *in.page_references);
  for (const CapacityMissSample& sample : in.capacity_misses) {
    auto it = misses_.try_emplace(sample.capacity_pages, baseline_window_, spacing_).first;
    it->second.Observe(now_, sample.misses);
  }
  for (const EvictedBySample& cell : in.evicted_by) {
    CellKey key{cell.capacity_pages, cell.dimension, cell.victim, cell.evictor};
    auto [it, added] = cells_.try_emplace(std::move(key), short_window_, spacing_);
    // A cell appears once it is not zero (the agent exports no zero cells): it was
    // 0 at the previous evaluation, so its first increase counts at once.
    if (added && previous != TimePoint{} && previous < now_) it->second.Observe(previous, 0);
    it->second.Observe(now_, cell.pages);
  }
  DropStale(misses_, now_ - short_window_);
  DropStale(cells_, now_ - short_window_);
}

Observation CapacityMissShareDetector::Evaluate(const DetectorInput& input) {
  Observe(input.inputs);
  const std::optional<WindowIncrease> short_refs = references_.IncreaseOver(now_, short_window_);
  const std::optional<WindowIncrease> baseline_refs = references_.IncreaseOver(now_, baseline_window_);
  if (!short_refs || !baseline_refs) {
    return Observation::NoData("counter page_references has fewer than two samples");
  }
  if (auto quiet = CheckVolume(ShortWindowRequests(input), options_.min_short_window_requests,
                               "requests in the " + short_name_ + " window")) {
    return *quiet;
  }
  if (short_refs->increase <= 0) {
    return Observation::NoData("no page references in the " + short_name_ + " window");
  }
  std::optional<Share> chosen;
  for (const auto& [capacity, history] : misses_) {
    const std::optional<WindowIncrease> short_misses = history.IncreaseOver(now_, short_window_);
    const std::optional<WindowIncrease> baseline_misses = history.IncreaseOver(now_, baseline_window_);
    if (!short_misses || !baseline_misses) continue;
    Share share;
    share.capacity_pages = capacity;
    share.short_share = short_misses->rate() / short_refs->rate();
    share.baseline_share = baseline_refs->rate() > 0 ? baseline_misses->rate() / baseline_refs->rate() : 0;
    share.ratio = share.short_share / std::max(share.baseline_share, options_.share_floor);
    share.short_misses = short_misses->increase;
    if (!chosen || share.ratio > chosen->ratio) chosen = share;
    if (!options_.every_capacity) break;  // the map is ordered: the smallest capacity
  }
  if (!chosen) return Observation::NoData("no capacity-miss counter has two samples");
  return Observation::Valid(chosen->ratio, options_.fire_threshold, options_.clear_threshold,
                            Annotate(*chosen, short_refs->increase));
}

std::optional<TopEvictor> CapacityMissShareDetector::TopEvictorOf(std::string_view dimension,
                                                                  double capacity_pages) const {
  std::optional<TopEvictor> top;
  double total = 0;
  for (const auto& [key, history] : cells_) {
    const auto& [capacity, cell_dimension, victim, evictor] = key;
    if (capacity != capacity_pages || cell_dimension != dimension) continue;
    const std::optional<WindowIncrease> increase = history.IncreaseOver(now_, short_window_);
    if (!increase || increase->increase <= 0) continue;
    total += increase->increase;
    if (!top || increase->increase > top->pages) top = TopEvictor{evictor, victim, increase->increase, 0};
  }
  if (top) top->share = top->pages / total;
  return top;
}

Annotations CapacityMissShareDetector::Annotate(const Share& share, double short_references) const {
  Annotations a;
  a["capacity_pages"] = FormatCount(share.capacity_pages);
  a["short_share"] = FormatNumber(share.short_share);
  a["baseline_share"] = FormatNumber(share.baseline_share);
  a["share_floor"] = FormatNumber(options_.share_floor);
  a["ratio"] = FormatNumber(share.ratio);
  a["short_window_capacity_misses"] = FormatCount(share.short_misses);
  a["short_window_page_references"] = FormatCount(short_references);
  std::string evictors;
  for (std::string_view dimension : kDimensions) {
    const std::optional<TopEvictor> top = TopEvictorOf(dimension, share.capacity_pages);
    if (!top) continue;
    const std::string d(dimension);
    a["top_evictor_" + d] = top->evictor;
    a["top_victim_" + d] = top->victim;
    a["top_evicted_pages_" + d] = FormatCount(top->pages);
    a["top_evictor_share_" + d] = FormatNumber(top->share);
    evictors += " " + d + " " + top->evictor + " evicts " + d + " " + top->victim + " (" + FormatPercent(top->share) +
                " of the attributed misses).";
  }
  const std::string capacity = FormatCount(share.capacity_pages) + " pages";
  a["summary"] = "Capacity misses at " + capacity + " are " + FormatPercent(share.short_share) +
                 " of page references over " + short_name_ + ", " + FormatNumber(share.ratio, 3) + "x the " +
                 baseline_name_ + " share" + (evictors.empty() ? "" : ":" + evictors);
  a["description"] = "Page references that would hit in an unlimited cache but miss in an LRU cache of " + capacity +
                     ": " + FormatPercent(share.short_share) + " over the last " + short_name_ + " against " +
                     FormatPercent(share.baseline_share) + " over the last " + baseline_name_ + " (floored at " +
                     FormatPercent(options_.share_floor) +
                     "). Reusable pages are being lost to eviction: the replica "
                     "runs beyond its eviction-free region. Fires at " +
                     FormatNumber(options_.fire_threshold) + "x and clears below " +
                     FormatNumber(options_.clear_threshold) + "x." + evictors;
  return a;
}

void CapacityMissShareDetector::Serialize(std::vector<std::uint8_t>* out) const {
  checkpoint::AppendTime(out, now_);
  references_.Serialize(out);
  base::AppendPod<std::uint64_t>(out, misses_.size());
  for (const auto& [capacity, history] : misses_) {
    base::AppendPod(out, capacity);
    history.Serialize(out);
  }
  base::AppendPod<std::uint64_t>(out, cells_.size());
  for (const auto& [key, history] : cells_) {
    const auto& [capacity, dimension, victim, evictor] = key;
    base::AppendPod(out, capacity);
    base::AppendString(out, dimension);
    base::AppendString(out, victim);
    base::AppendString(out, evictor);
    history.Serialize(out);
  }
}

bool CapacityMissShareDetector::Deserialize(std::span<const std::uint8_t>* in) {
  // A history is at least its retention, spacing, sample count, presence byte,
  // last raw value and resets.
  constexpr std::size_t kHistoryBytes = 5 * sizeof(std::uint64_t) + 1;
  std::uint64_t n = 0;
  if (!checkpoint::ReadTime(in, &now_) || !references_.Deserialize(in) ||
      !base::ReadCount(in, &n, sizeof(double) + kHistoryBytes)) {
    return false;
  }
  misses_.clear();
  for (std::uint64_t k = 0; k < n; ++k) {
    double capacity = 0;
    if (!base::ReadPod(in, &capacity) || std::isnan(capacity)) return false;  // a NaN key breaks the map's order
    auto [it, added] = misses_.try_emplace(capacity, baseline_window_, spacing_);
    if (!added || !it->second.Deserialize(in)) return false;
  }
  if (!base::ReadCount(in, &n, sizeof(double) + 3 * sizeof(std::uint64_t) + kHistoryBytes)) return false;
  cells_.clear();
  for (std::uint64_t k = 0; k < n; ++k) {
    double capacity = 0;
    std::string dimension, victim, evictor;
    if (!base::ReadPod(in, &capacity) || std::isnan(capacity) || !base::ReadString(in, &dimension) ||
        !base::ReadString(in, &victim) || !base::ReadString(in, &evictor)) {
      return false;
    }
    auto [it, added] = cells_.try_emplace(
        CellKey{capacity, std::move(dimension), std::move(victim), std::move(evictor)}, short_window_, spacing_);
    if (!added || !it->second.Deserialize(in)) return false;
  }
  return true;
}

}  // namespace kvwatch::alerts
