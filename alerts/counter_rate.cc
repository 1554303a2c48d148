#include "alerts/counter_rate.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "alerts/checkpoint.h"

namespace kvwatch::alerts {

CounterHistory::CounterHistory(std::chrono::seconds retention, TimePoint::duration min_spacing)
    : retention_(retention), min_spacing_(min_spacing) {}

bool CounterHistory::Observe(TimePoint time, double value) {
  if (!std::isfinite(value) || value < 0) return false;
  if (latest_ && time <= latest_->time) return false;
  double total = value;
  if (latest_) {
    const bool reset = value < last_raw_;
    if (reset) ++resets_;
    total = latest_->total + (reset ? value : value - last_raw_);
  }
  last_raw_ = value;
  latest_ = Sample{time, total};
  if (stored_.empty() || time - stored_.back().time >= min_spacing_) {
    stored_.push_back(*latest_);
  }
  Prune(time);
  return true;
}

void CounterHistory::Prune(TimePoint now) {
  // Keep one sample at or before the retention edge as the anchor of the longest window.
  const TimePoint edge = now - retention_;
  while (stored_.size() >= 2 && stored_[1].time <= edge) stored_.pop_front();
}

std::optional<TimePoint> CounterHistory::latest_time() const {
  if (!latest_) return std::nullopt;
  return latest_->time;
}

std::optional<WindowIncrease> CounterHistory::IncreaseOver(TimePoint now, std::chrono::seconds window) const {
  if (!latest_ || stored_.empty() || window.count() <= 0) return std::nullopt;
  const TimePoint start = now - window;
  // The newest stored sample at or before `start`, else the oldest one.
  auto after =
      std::upper_bound(stored_.begin(), stored_.end(), start, [](TimePoint t, const Sample& s) { return t < s.time; });
  const Sample* anchor = after == stored_.begin() ? &stored_.front() : &*std::prev(after);
  const double seconds = std::chrono::duration<double>(latest_->time - anchor->time).count();
  if (seconds <= 0) return std::nullopt;
  WindowIncrease result;
  result.increase = latest_->total - anchor->total;
  result.seconds = seconds;
  result.coverage = std::min(1.0, seconds / static_cast<double>(window.count()));
  return result;
}

void CounterHistory::Serialize(std::vector<std::uint8_t>* out) const {
  base::AppendPod<std::int64_t>(out, retention_.count());
  base::AppendPod<std::int64_t>(out, min_spacing_.count());
  base::AppendPod<std::uint64_t>(out, stored_.size());
  for (const Sample& s : stored_) {
    checkpoint::AppendTime(out, s.time);
    base::AppendPod(out, s.total);
  }
  checkpoint::AppendOptional(out, latest_, [](std::vector<std::uint8_t>* o, const Sample& s) {
    checkpoint::AppendTime(o, s.time);
    base::AppendPod(o, s.total);
  });
  base::AppendPod(out, last_raw_);
  base::AppendPod(out, resets_);
}

bool CounterHistory::Deserialize(std::span<const std::uint8_t>* in) {
  std::int64_t retention = 0, spacing = 0;
  std::uint64_t n = 0;
  if (!base::ReadPod(in, &retention) || retention != retention_.count() || !base::ReadPod(in, &spacing) ||
      spacing != min_spacing_.count() || !base::ReadCount(in, &n, 2 * sizeof(std::int64_t))) {
    return false;
  }
  stored_.clear();
  for (std::uint64_t k = 0; k < n; ++k) {
    Sample s{};
    if (!checkpoint::ReadTime(in, &s.time) || !base::ReadPod(in, &s.total)) return false;
    if (!stored_.empty() && s.time <= stored_.back().time) return false;
    stored_.push_back(s);
  }
  const auto read_sample = [](std::span<const std::uint8_t>* i, Sample* s) {
    return checkpoint::ReadTime(i, &s->time) && base::ReadPod(i, &s->total);
  };
  if (!checkpoint::ReadOptional(in, &latest_, read_sample) || !base::ReadPod(in, &last_raw_) ||
      !base::ReadPod(in, &resets_)) {
    return false;
  }
  // Every observation stores its first sample and updates the latest.
  if (stored_.empty() != !latest_.has_value()) return false;
  return !latest_ || latest_->time >= stored_.back().time;
}

}  // namespace kvwatch::alerts
