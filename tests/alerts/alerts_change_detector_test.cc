// Tests for alerts/change_detector.h: the CUSUM statistic, and the eviction-rate drift
// detector through the Alerter: it catches a sustained small shift that the
// window comparison with default thresholds misses, stays quiet on long
// stationary noise, re-learns after a long alarm, and handles volume and resets.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "alerts/alerter.h"
#include "alerts/change_detector.h"
#include "tests/alerts/testing_alerts.h"

namespace kvwatch::alerts {
namespace {

using std::chrono::seconds;

TimePoint At(int s) { return TimePoint{} + seconds(1'700'000'000 + s); }

using testing::TestRng;

TEST(CusumTest, LearnsThenFreezesTheBaseline) {
  CusumOptions options;
  options.warmup_samples = 4;
  Cusum cusum(options);
  for (double x : {8.0, 12.0, 8.0, 12.0}) {
    EXPECT_TRUE(cusum.learning());
    cusum.Add(x);
  }
  ASSERT_FALSE(cusum.learning());
  EXPECT_DOUBLE_EQ(cusum.mean(), 10);
  EXPECT_NEAR(cusum.sigma(), std::sqrt(16.0 / 3.0), 1e-12);  // sample standard deviation
  EXPECT_EQ(cusum.statistic(), 0);
}

TEST(CusumTest, AccumulatesShiftsBeyondTheSlack) {
  CusumOptions options;
  options.warmup_samples = 2;
  options.slack = 0.5;
  options.min_sigma = 1;
  options.min_sigma_fraction = 0;
  options.direction = ChangeDirection::kBoth;
  Cusum cusum(options);
  cusum.Add(10);
  cusum.Add(10);  // sigma 0, floored at 1
  ASSERT_DOUBLE_EQ(cusum.sigma(), 1);
  cusum.Add(10.4);  // within the slack: nothing accumulates
  EXPECT_EQ(cusum.upper(), 0);
  cusum.Add(12);  // z = 2: S+ = 1.5
  cusum.Add(12);  // S+ = 3
  EXPECT_DOUBLE_EQ(cusum.upper(), 3);
  EXPECT_DOUBLE_EQ(cusum.lower(), 0);
  EXPECT_DOUBLE_EQ(cusum.ShiftedMean(), 12);
  EXPECT_EQ(cusum.side(), ChangeDirection::kUp);
  for (int i = 0; i < 100; ++i) cusum.Add(20);
  EXPECT_DOUBLE_EQ(cusum.upper(), options.cap);  // clamped
  for (int i = 0; i < 10; ++i) cusum.Add(5);     // z = -5: drains by 5.5 a sample
  EXPECT_EQ(cusum.upper(), 0);
  EXPECT_GT(cusum.lower(), 0);
  EXPECT_EQ(cusum.side(), ChangeDirection::kDown);
  cusum.Reset();
  EXPECT_TRUE(cusum.learning());
  EXPECT_EQ(cusum.upper(), 0);
}

TEST(CusumTest, FlatWarmupUsesTheSigmaFloor) {
  CusumOptions options;
  options.warmup_samples = 3;
  Cusum cusum(options);  // min_sigma 0.1, min_sigma_fraction 0.02
  for (int i = 0; i < 3; ++i) cusum.Add(50);
  EXPECT_DOUBLE_EQ(cusum.sigma(), 1.0);  // 2% of 50
  Cusum idle(options);
  for (int i = 0; i < 3; ++i) idle.Add(0);
  EXPECT_DOUBLE_EQ(idle.sigma(), 0.1);
}

TEST(CusumTest, UpDirectionIgnoresDrops) {
  CusumOptions options;
  options.warmup_samples = 2;
  options.min_sigma = 1;
  Cusum cusum(options);
  cusum.Add(10);
  cusum.Add(10);
  for (int i = 0; i < 20; ++i) cusum.Add(0);
  EXPECT_GT(cusum.lower(), 0);
  EXPECT_EQ(cusum.statistic(), 0);  // direction up: a drop is not a change
}

TEST(ChangeTestOptionsTest, ValidateNamesTheField) {
  ChangeTestOptions options;
  EXPECT_TRUE(options.Validate("change_tests[0]").ok());
  options.cusum.cap = 5;  // below the fire threshold 10: could never fire
  base::Status status = options.Validate("change_tests[0]");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().find("change_tests[0].cusum.cap"), std::string::npos);
  options = ChangeTestOptions();
  options.cusum.warmup_samples = 1;
  EXPECT_FALSE(options.Validate("c").ok());
  options = ChangeTestOptions();
  options.sample_period = seconds(0);
  EXPECT_FALSE(options.Validate("c").ok());
}

// The Alerter with the default eviction-rate shift and the default CUSUM.
AlerterOptions EvictionDetectors() {
  AlerterOptions options;
  options.knee_shift.enabled = false;
  options.capacity_shortfall.enabled = false;
  options.rejection_rate_shift.enabled = false;
  options.preemption_rate_shift.enabled = false;
  return options;
}

constexpr char kDrift[] = "KVWatchEvictionRateDrift";
constexpr char kShift[] = "KVWatchEvictionRateShift";

// Drives an Alerter with an eviction rate of `level(minute)` blocks/s times Gaussian
// noise (10% by default), one evaluation a minute, counting events per alert.
class EvictionSimulation {
 public:
  explicit EvictionSimulation(std::uint64_t seed, AlerterOptions options = EvictionDetectors())
      : rng_(seed), alerter_(Alerter::Create(std::move(options)).value()) {}

  // Runs minutes [from, to) and returns the minute of the first event of `kind` on
  // `alertname`, if any.
  template <typename Level>
  std::optional<int> Run(int from, int to, Level level, const std::string& alertname, EventKind kind,
                         double noise = 0.1) {
    std::optional<int> first;
    for (int minute = from; minute < to; ++minute) {
      base::Result<Evaluation> result = alerter_.Evaluate(Inputs(minute));
      EXPECT_TRUE(result.ok());
      for (const AlertEvent& event : result.value().events) {
        const std::string& name = event.labels.at("alertname");
        ++counts_[name + ":" + std::string(EventName(event.kind))];
        if (name == alertname && event.kind == kind && !first) first = minute;
      }
      const double rate = level(minute) * (1 + noise * rng_.Gaussian());
      evicted_ += std::max(0.0, rate) * 60;
      requests_ += 20 * 60;
    }
    return first;
  }
  int Count(const std::string& alertname, EventKind kind) {
    return counts_[alertname + ":" + std::string(EventName(kind))];
  }
  AlertStatus Status(const std::string& alertname) const {
    for (const AlertStatus& status : alerter_.Statuses()) {
      if (status.labels.at("alertname") == alertname) return status;
    }
    ADD_FAILURE() << "no alert " << alertname;
    return AlertStatus{};
  }
  void RestartEngine() { evicted_ = requests_ = 0; }

 private:
  AlertInputs Inputs(int minute) const {
    AlertInputs inputs;
    inputs.time = At(minute * 60);
    inputs.counters.evicted_blocks = evicted_;
    inputs.counters.requests = requests_;
    return inputs;
  }

  TestRng rng_;
  Alerter alerter_;
  double evicted_ = 0;
  double requests_ = 0;
  std::map<std::string, int> counts_;
};

TEST(ChangeTestAlertTest, CatchesASustainedSmallShiftTheWindowComparisonMisses) {
  EvictionSimulation sim(42);
  const int shift_at = 6 * 60;  // after 6 hours at 100 blocks/s (10% noise)
  const auto level = [&](int minute) { return minute < shift_at ? 100.0 : 115.0; };
  EXPECT_FALSE(sim.Run(0, shift_at, level, kDrift, EventKind::kPending).has_value());
  EXPECT_EQ(sim.Status(kDrift).observation, ObservationKind::kValid);  // learned
  // +15% = 1.5 sigma: expected within about 19 samples plus `for`.
  // One hour of the new level (less than relearn_after, so the baseline is the old one).
  std::optional<int> fired = sim.Run(shift_at, shift_at + 60, level, kDrift, EventKind::kFiring);
  ASSERT_TRUE(fired.has_value());
  EXPECT_LE(*fired - shift_at, 45);
  EXPECT_GE(*fired - shift_at, 5);  // `for` is 5 minutes
  // The 1h/24h ratio never got near 2: the window comparison did not even go pending.
  EXPECT_EQ(sim.Count(kShift, EventKind::kPending), 0);
  EXPECT_LT(sim.Status(kShift).value, 1.3);
  const AlertStatus drift = sim.Status(kDrift);
  EXPECT_EQ(drift.labels.at("window"), "1m");
  EXPECT_EQ(drift.annotations.at("direction"), "up");
  EXPECT_NEAR(std::stod(drift.annotations.at("baseline_rate_per_second")), 100, 3);
}

TEST(ChangeTestAlertTest, LongStationaryNoisySeriesNeverFires) {
  // Three seeds, two weeks each at one sample a minute (20,160 samples).
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    EvictionSimulation sim(seed);
    const auto level = [](int) { return 100.0; };
    EXPECT_FALSE(sim.Run(0, 14 * 24 * 60, level, kDrift, EventKind::kFiring).has_value()) << "seed " << seed;
    EXPECT_EQ(sim.Count(kShift, EventKind::kFiring), 0) << "seed " << seed;
  }
}

TEST(ChangeTestAlertTest, RelearnsTheNewLevelAfterALongAlarm) {
  EvictionSimulation sim(9);
  const auto level = [](int minute) { return minute < 3 * 60 ? 100.0 : 130.0; };
  std::optional<int> fired = sim.Run(0, 4 * 60, level, kDrift, EventKind::kFiring);
  ASSERT_TRUE(fired.has_value());
  // relearn_after (1h) after the alarm, the detector learns the new level: resolved.
  std::optional<int> resolved = sim.Run(4 * 60, 7 * 60, level, kDrift, EventKind::kResolved);
  ASSERT_TRUE(resolved.has_value());
  EXPECT_NEAR(*resolved - *fired, 60, 10);
  EXPECT_EQ(sim.Status(kDrift).state, AlertState::kResolved);
  // The new level is the new normal: no second alarm.
  sim.Run(7 * 60, 24 * 60, level, kDrift, EventKind::kFiring);
  EXPECT_EQ(sim.Count(kDrift, EventKind::kFiring), 1);
  EXPECT_NEAR(std::stod(sim.Status(kDrift).annotations.at("baseline_rate_per_second")), 130, 4);
}

TEST(ChangeTestAlertTest, ResolvesWhenTheRateReturns) {
  AlerterOptions options = EvictionDetectors();
  options.change_tests[0].relearn_after = seconds(0);  // keep the old baseline
  EvictionSimulation sim(5, options);
  const auto level = [](int minute) { return minute >= 3 * 60 && minute < 4 * 60 ? 130.0 : 100.0; };
  ASSERT_TRUE(sim.Run(0, 4 * 60, level, kDrift, EventKind::kFiring).has_value());
  std::optional<int> resolved = sim.Run(4 * 60, 6 * 60, level, kDrift, EventKind::kResolved);
  ASSERT_TRUE(resolved.has_value());
  // Draining from the cap (15) to below 5 at about k = 0.75 a sample.
  EXPECT_LE(*resolved - 4 * 60, 25);
  EXPECT_EQ(sim.Count(kDrift, EventKind::kFiring), 1);
}

TEST(ChangeTestAlertTest, CounterResetIsNotADrift) {
  EvictionSimulation sim(11);
  const auto level = [](int) { return 100.0; };
  sim.Run(0, 4 * 60, level, kDrift, EventKind::kPending);
  sim.RestartEngine();
  EXPECT_FALSE(sim.Run(4 * 60, 8 * 60, level, kDrift, EventKind::kPending).has_value());
  EXPECT_EQ(sim.Status(kDrift).state, AlertState::kInactive);
}

TEST(ChangeTestAlertTest, StaysQuietBelowMinimumVolume) {
  AlerterOptions options = EvictionDetectors();
  options.change_tests[0].min_short_window_requests = 1e9;  // never enough traffic
  EvictionSimulation sim(3, options);
  const auto level = [](int minute) { return minute < 3 * 60 ? 100.0 : 300.0; };
  EXPECT_FALSE(sim.Run(0, 8 * 60, level, kDrift, EventKind::kPending).has_value());
  EXPECT_EQ(sim.Status(kDrift).observation, ObservationKind::kBelowMinVolume);
}

TEST(ChangeTestDetectorTest, OneSamplePerPeriodWhateverTheEvaluationRate) {
  ChangeTestOptions options;
  options.min_short_window_requests = 0;
  options.cusum.warmup_samples = 10;
  ChangeTestDetector detector(options);
  AlertInputs inputs;
  DerivedCounters counters;
  CounterWindows& evicted = counters[CounterKind::kEvictedBlocks];
  for (int s = 0; s <= 600; s += 15) {  // every 15 s for 10 minutes
    evicted.latest_time = At(s);
    evicted.corrected_total = 100.0 * s;
    detector.Evaluate(DetectorInput{inputs, counters});
  }
  EXPECT_EQ(detector.cusum().samples_learned(), 10);
  EXPECT_FALSE(detector.cusum().learning());
  EXPECT_DOUBLE_EQ(detector.cusum().mean(), 100);
}

}  // namespace
}  // namespace kvwatch::alerts
