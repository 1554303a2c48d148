#include "alerts/counter_rate.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace kvwatch::alerts {

CounterHistory::CounterHistory(std::chrono::seconds retention,
                               TimePoint::duration min_spacing)
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

std::optional<WindowIncrease> CounterHistory::IncreaseOver(TimePoint now,
                                                           std::chrono::seconds window) const {
  if (!latest_ || stored_.empty() || window.count() <= 0) return std::nullopt;
  const TimePoint start = now - window;
  // The newest stored sample at or before `start`, else the oldest one.
  auto after = std::upper_bound(stored_.begin(), stored_.end(), start,
                                [](TimePoint t, const Sample& s) { return t < s.time; });
  const Sample* anchor = after == stored_.begin() ? &stored_.front() : &*std::prev(after);
  const double seconds = std::chrono::duration<double>(latest_->time - anchor->time).count();
  if (seconds <= 0) return std::nullopt;
  WindowIncrease result;
  result.increase = latest_->total - anchor->total;
  result.seconds = seconds;
  result.coverage = std::min(1.0, seconds / static_cast<double>(window.count()));
  return result;
}

}  // namespace kvwatch::alerts
