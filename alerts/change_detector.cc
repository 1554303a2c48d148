#include "alerts/change_detector.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "alerts/checkpoint.h"
#include "alerts/format.h"
#include "alerts/thresholds.h"

namespace kvwatch::alerts {

std::string_view DirectionName(ChangeDirection direction) {
  switch (direction) {
    case ChangeDirection::kUp:
      return "up";
    case ChangeDirection::kDown:
      return "down";
    case ChangeDirection::kBoth:
      return "both";
  }
  return "unknown";
}

base::Status CusumOptions::Validate(std::string_view prefix) const {
  const std::string where(prefix);
  if (warmup_samples < 2) {
    return base::Status::Error(where + ".warmup_samples: expected at least 2, got " + std::to_string(warmup_samples));
  }
  return FirstError({
      ValidateNonNegative(where + ".slack", slack),
      ValidatePositive(where + ".cap", cap),
      ValidatePositive(where + ".min_sigma", min_sigma),
      ValidateNonNegative(where + ".min_sigma_fraction", min_sigma_fraction),
  });
}

Cusum::Cusum(CusumOptions options) : options_(std::move(options)) {}

void Cusum::Reset() {
  learned_ = 0;
  mean_ = m2_ = sigma_ = 0;
  up_ = Side{};
  down_ = Side{};
}

void Cusum::Add(double x) {
  if (!std::isfinite(x)) return;
  if (learning()) {
    ++learned_;
    const double delta = x - mean_;
    mean_ += delta / learned_;
    m2_ += delta * (x - mean_);
    if (!learning()) {
      const double sample_sigma = std::sqrt(m2_ / (learned_ - 1));
      sigma_ = std::max({sample_sigma, options_.min_sigma, options_.min_sigma_fraction * std::fabs(mean_)});
    }
    return;
  }
  const double z = (x - mean_) / sigma_;
  Update(up_, z - options_.slack, x, options_.cap);
  Update(down_, -z - options_.slack, x, options_.cap);
}

void Cusum::Update(Side& side, double drift, double x, double cap) {
  side.statistic = std::clamp(side.statistic + drift, 0.0, cap);
  if (side.statistic == 0) {
    side.run_sum = 0;
    side.run_length = 0;
    return;
  }
  side.run_sum += x;
  ++side.run_length;
}

ChangeDirection Cusum::side() const {
  switch (options_.direction) {
    case ChangeDirection::kUp:
      return ChangeDirection::kUp;
    case ChangeDirection::kDown:
      return ChangeDirection::kDown;
    case ChangeDirection::kBoth:
      return up_.statistic >= down_.statistic ? ChangeDirection::kUp : ChangeDirection::kDown;
  }
  return ChangeDirection::kUp;
}

double Cusum::statistic() const { return side() == ChangeDirection::kUp ? up_.statistic : down_.statistic; }

double Cusum::ShiftedMean() const {
  const Side& s = side() == ChangeDirection::kUp ? up_ : down_;
  if (s.run_length == 0) return std::nan("");
  return s.run_sum / s.run_length;
}

base::Status ChangeTestOptions::Validate(std::string_view prefix) const {
  const std::string where(prefix);
  if (sample_period.count() <= 0) {
    return base::Status::Error(where + ".sample_period: expected a duration > 0, got " +
                               std::to_string(sample_period.count()) + "s");
  }
  if (relearn_after.count() < 0) {
    return base::Status::Error(where + ".relearn_after: expected a duration >= 0, got " +
                               std::to_string(relearn_after.count()) + "s");
  }
  if (cusum.cap < fire_threshold) {
    return base::Status::Error(where + ".cusum.cap: expected at least fire_threshold (" +
                               FormatNumber(fire_threshold, 6) + "), got " + FormatNumber(cusum.cap, 6) +
                               ": the alarm could never fire");
  }
  return FirstError({
      ValidateThresholds(where, fire_threshold, clear_threshold),
      ValidatePositive(where + ".fire_threshold", fire_threshold),
      cusum.Validate(where + ".cusum"),
      ValidateNonNegative(where + ".min_short_window_requests", min_short_window_requests),
      rule.Validate(where + ".rule"),
  });
}

std::string_view ChangeTestAlertName(CounterKind counter) {
  switch (counter) {
    case CounterKind::kEvictedBlocks:
      return "KVWatchEvictionRateDrift";
    case CounterKind::kRejectedRequests:
      return "KVWatchRejectionRateDrift";
    case CounterKind::kPreemptions:
      return "KVWatchPreemptionRateDrift";
    case CounterKind::kRequests:
      return "KVWatchRequestRateDrift";
  }
  return "KVWatchRateDrift";
}

ChangeTestDetector::ChangeTestDetector(ChangeTestOptions options)
    : options_(std::move(options)), window_(FormatDuration(options_.sample_period)), cusum_(options_.cusum) {}

Observation ChangeTestDetector::Evaluate(const DetectorInput& input) {
  const CounterWindows& windows = input.counters[options_.counter];
  if (!windows.corrected_total || !windows.latest_time) {
    return Observation::NoData("counter " + std::string(CounterName(options_.counter)) + " not reported");
  }
  const Point point{*windows.latest_time, *windows.corrected_total};
  if (auto quiet =
          CheckVolume(ShortWindowRequests(input), options_.min_short_window_requests, "requests in the short window")) {
    anchor_ = point;  // the quiet stretch is not sampled
    return *quiet;
  }
  if (!anchor_) {
    anchor_ = point;
  } else if (point.time - anchor_->time >= options_.sample_period) {
    TakeSample(point);
  }
  if (cusum_.learning()) {
    return Observation::NoData("learning the baseline rate: " + std::to_string(cusum_.samples_learned()) + " of " +
                               std::to_string(options_.cusum.warmup_samples) + " samples");
  }
  return Observation::Valid(cusum_.statistic(), options_.fire_threshold, options_.clear_threshold, Annotate());
}

void ChangeTestDetector::TakeSample(const Point& point) {
  const double seconds = std::chrono::duration<double>(point.time - anchor_->time).count();
  const double rate = (point.total - anchor_->total) / seconds;
  anchor_ = point;
  last_rate_ = rate;
  cusum_.Add(rate);
  if (cusum_.learning() || cusum_.statistic() < options_.fire_threshold) {
    alarm_since_.reset();
    return;
  }
  if (!alarm_since_) alarm_since_ = point.time;
  if (options_.relearn_after.count() > 0 && point.time - *alarm_since_ >= options_.relearn_after) {
    cusum_.Reset();  // accept the new level: the next samples learn it
    alarm_since_.reset();
    ++relearned_;
  }
}

Annotations ChangeTestDetector::Annotate() const {
  const std::string unit(CounterUnit(options_.counter));
  const double shifted = cusum_.ShiftedMean();
  const bool up = cusum_.side() == ChangeDirection::kUp;
  Annotations a;
  a["counter"] = std::string(CounterName(options_.counter));
  a["baseline_rate_per_second"] = FormatNumber(cusum_.mean());
  a["baseline_sigma_per_second"] = FormatNumber(cusum_.sigma());
  if (last_rate_) a["last_rate_per_second"] = FormatNumber(*last_rate_);
  if (!std::isnan(shifted)) a["shifted_rate_per_second"] = FormatNumber(shifted);
  a["cusum_upper"] = FormatNumber(cusum_.upper());
  a["cusum_lower"] = FormatNumber(cusum_.lower());
  a["direction"] = up ? "up" : "down";
  a["threshold_sigma"] = FormatNumber(options_.fire_threshold);
  a["slack_sigma"] = FormatNumber(options_.cusum.slack);
  const std::string now_text = std::isnan(shifted) ? "its baseline" : FormatNumber(shifted) + "/s";
  a["summary"] = "Sustained " + std::string(up ? "rise" : "fall") + " of the " + unit + " rate: " + now_text +
                 " against a baseline of " + FormatNumber(cusum_.mean()) + "/s (CUSUM " +
                 FormatNumber(cusum_.statistic(), 3) + " sigma)";
  a["description"] = "A CUSUM test on the " + unit + " per second, sampled every " + window_ +
                     ", against the baseline learned earlier (" + FormatNumber(cusum_.mean()) + "/s, sigma " +
                     FormatNumber(cusum_.sigma()) + "/s). Fires when the statistic reaches " +
                     FormatNumber(options_.fire_threshold) + " sigma and clears below " +
                     FormatNumber(options_.clear_threshold) +
                     " sigma; a shift too small for the window "
                     "comparison accumulates here.";
  return a;
}

void Cusum::Serialize(std::vector<std::uint8_t>* out) const {
  base::AppendPod<std::int32_t>(out, learned_);
  base::AppendPod(out, mean_);
  base::AppendPod(out, m2_);
  base::AppendPod(out, sigma_);
  for (const Side* side : {&up_, &down_}) {
    base::AppendPod(out, side->statistic);
    base::AppendPod(out, side->run_sum);
    base::AppendPod<std::int32_t>(out, side->run_length);
  }
}

bool Cusum::Deserialize(std::span<const std::uint8_t>* in) {
  std::int32_t learned = 0;
  if (!base::ReadPod(in, &learned) || !base::ReadPod(in, &mean_) || !base::ReadPod(in, &m2_) ||
      !base::ReadPod(in, &sigma_)) {
    return false;
  }
  if (learned < 0 || learned > options_.warmup_samples) return false;
  learned_ = learned;
  if (!learning() && !(sigma_ > 0 && std::isfinite(sigma_))) return false;  // z divides by it
  for (Side* side : {&up_, &down_}) {
    std::int32_t run_length = 0;
    if (!base::ReadPod(in, &side->statistic) || !base::ReadPod(in, &side->run_sum) || !base::ReadPod(in, &run_length) ||
        run_length < 0) {
      return false;
    }
    side->run_length = run_length;
  }
  return true;
}

void ChangeTestDetector::Serialize(std::vector<std::uint8_t>* out) const {
  cusum_.Serialize(out);
  checkpoint::AppendOptional(out, anchor_, [](std::vector<std::uint8_t>* o, const Point& p) {
    checkpoint::AppendTime(o, p.time);
    base::AppendPod(o, p.total);
  });
  checkpoint::AppendOptionalDouble(out, last_rate_);
  checkpoint::AppendOptionalTime(out, alarm_since_);
  base::AppendPod<std::int32_t>(out, relearned_);
}

bool ChangeTestDetector::Deserialize(std::span<const std::uint8_t>* in) {
  std::int32_t relearned = 0;
  const auto read_point = [](std::span<const std::uint8_t>* i, Point* p) {
    return checkpoint::ReadTime(i, &p->time) && base::ReadPod(i, &p->total);
  };
  if (!cusum_.Deserialize(in) || !checkpoint::ReadOptional(in, &anchor_, read_point) ||
      !checkpoint::ReadOptionalDouble(in, &last_rate_) || !checkpoint::ReadOptionalTime(in, &alarm_since_) ||
      !base::ReadPod(in, &relearned) || relearned < 0) {
    return false;
  }
  relearned_ = relearned;
  return true;
}

}  // namespace kvwatch::alerts
