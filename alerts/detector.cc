#include "alerts/detector.h"

#include <utility>

#include "alerts/format.h"

namespace kvwatch::alerts {

Observation Observation::NoData(std::string reason) {
  Observation observation;
  observation.kind = ObservationKind::kNoData;
  observation.reason = std::move(reason);
  return observation;
}

Observation Observation::BelowMinVolume(std::string reason) {
  Observation observation;
  observation.kind = ObservationKind::kBelowMinVolume;
  observation.reason = std::move(reason);
  return observation;
}

Observation Observation::Valid(double value, double fire_threshold, double clear_threshold, Annotations annotations) {
  Observation observation;
  observation.kind = ObservationKind::kValid;
  observation.value = value;
  observation.above_fire = value >= fire_threshold;
  observation.below_clear = value < clear_threshold;
  observation.annotations = std::move(annotations);
  return observation;
}

std::string_view CounterName(CounterKind kind) {
  switch (kind) {
    case CounterKind::kEvictedBlocks:
      return "evicted_blocks";
    case CounterKind::kRejectedRequests:
      return "rejected_requests";
    case CounterKind::kPreemptions:
      return "preemptions";
    case CounterKind::kRequests:
      return "requests";
  }
  return "unknown";
}

std::string_view CounterUnit(CounterKind kind) {
  switch (kind) {
    case CounterKind::kEvictedBlocks:
      return "evicted blocks";
    case CounterKind::kRejectedRequests:
      return "rejected requests";
    case CounterKind::kPreemptions:
      return "preemptions";
    case CounterKind::kRequests:
      return "requests";
  }
  return "events";
}

std::optional<double> CounterValue(const CounterSample& sample, CounterKind kind) {
  switch (kind) {
    case CounterKind::kEvictedBlocks:
      return sample.evicted_blocks;
    case CounterKind::kRejectedRequests:
      return sample.rejected_requests;
    case CounterKind::kPreemptions:
      return sample.preemptions;
    case CounterKind::kRequests:
      return sample.requests;
  }
  return std::nullopt;
}

std::optional<double> ShortWindowRequests(const DetectorInput& input) {
  const CounterWindows& requests = input.counters[CounterKind::kRequests];
  if (requests.short_window) return requests.short_window->increase;
  return input.inputs.short_window_requests;
}

std::optional<Observation> CheckVolume(std::optional<double> volume, double min_volume, std::string_view what) {
  if (min_volume <= 0) return std::nullopt;
  if (!volume) {
    return Observation::BelowMinVolume(std::string(what) + " unknown (minimum " + FormatCount(min_volume) + ")");
  }
  if (*volume < min_volume) {
    return Observation::BelowMinVolume(std::string(what) + " " + FormatCount(*volume) + " below the minimum " +
                                       FormatCount(min_volume));
  }
  return std::nullopt;
}

}  // namespace kvwatch::alerts
