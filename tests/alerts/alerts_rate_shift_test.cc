// Tests for alerts/rate_shift.h through the Alerter (which turns the cumulative
// counters into window rates): eviction, rejection and preemption shifts, the
// absolute floor, `for`, no flapping on noise, recovery, minimum volume and
// counter resets.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "alerts/alerter.h"
#include "alerts/rate_shift.h"

namespace kvwatch::alerts {
namespace {

using std::chrono::seconds;

TimePoint At(int s) { return TimePoint{} + seconds(1'700'000'000 + s); }

// A fake engine: cumulative counters advanced by per-second rates.
struct FakeEngine {
  double evicted = 0;
  double rejected = 0;
  double preempted = 0;
  double requests = 0;

  void Advance(int seconds, double eviction_rate, double request_rate = 5, double rejection_rate = 0,
               double preemption_rate = 0) {
    evicted += eviction_rate * seconds;
    requests += request_rate * seconds;
    rejected += rejection_rate * seconds;
    preempted += preemption_rate * seconds;
  }
  void Restart() { evicted = rejected = preempted = requests = 0; }
  AlertInputs Inputs(int t) const {
    AlertInputs inputs;
    inputs.time = At(t);
    inputs.counters.evicted_blocks = evicted;
    inputs.counters.rejected_requests = rejected;
    inputs.counters.preemptions = preempted;
    inputs.counters.requests = requests;
    return inputs;
  }
};

// Deterministic multiplicative noise in [1 - amplitude, 1 + amplitude].
class TestNoise {
 public:
  explicit TestNoise(std::uint64_t seed) : state_(seed) {}
  double Factor(double amplitude) {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(state_ >> 11) * 0x1.0p-53;
    return 1 + amplitude * (2 * u - 1);
  }

 private:
  std::uint64_t state_;
};

AlerterOptions RatesOnly() {
  AlerterOptions options;
  options.knee_shift.enabled = false;
  options.capacity_shortfall.enabled = false;
  options.change_tests.clear();
  return options;
}

class RateShiftAlertTest : public ::testing::Test {
 protected:
  RateShiftAlertTest() : alerter_(Alerter::Create(RatesOnly()).value()) {}

  // Evaluates at `t`; returns the events of the alert named `alertname`.
  std::vector<AlertEvent> Step(int t, const std::string& alertname) {
    base::Result<Evaluation> result = alerter_.Evaluate(engine_.Inputs(t));
    EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error());
    std::vector<AlertEvent> events;
    for (const AlertEvent& event : result.value().events) {
      if (event.labels.at("alertname") == alertname) events.push_back(event);
    }
    return events;
  }
  AlertStatus Status(const std::string& alertname) const {
    for (const AlertStatus& status : alerter_.Statuses()) {
      if (status.labels.at("alertname") == alertname) return status;
    }
    ADD_FAILURE() << "no alert " << alertname;
    return AlertStatus{};
  }

  FakeEngine engine_;
  Alerter alerter_;
};

constexpr char kEviction[] = "KVWatchEvictionRateShift";
constexpr char kRejection[] = "KVWatchRejectionRateShift";
constexpr char kPreemption[] = "KVWatchPreemptionRateShift";

TEST_F(RateShiftAlertTest, EvictionShiftFiresAfterForDurationNotBefore) {
  int t = 0;
  for (; t <= 24 * 3600; t += 60) {
    ASSERT_TRUE(Step(t, kEviction).empty()) << t;
    engine_.Advance(60, 10);
  }
  std::optional<int> pending_at;
  std::optional<int> firing_at;
  for (; t <= 30 * 3600 && !firing_at; t += 60) {
    for (const AlertEvent& event : Step(t, kEviction)) {
      if (event.kind == EventKind::kPending) pending_at = t;
      if (event.kind == EventKind::kFiring) firing_at = t;
    }
    if (!pending_at) {
      const double value = Status(kEviction).value;
      EXPECT_LT(value, 2.0) << t;
    }
    engine_.Advance(60, 40);
  }
  ASSERT_TRUE(pending_at.has_value());
  ASSERT_TRUE(firing_at.has_value());
  EXPECT_EQ(*firing_at - *pending_at, 15 * 60);
  const AlertStatus status = Status(kEviction);
  EXPECT_GE(status.value, 2.0);
  EXPECT_EQ(status.annotations.at("counter"), "evicted_blocks");
  EXPECT_EQ(status.annotations.at("baseline_rate_per_second").substr(0, 3), "10.");
  EXPECT_EQ(status.labels.at("window"), "1h/24h");
}

TEST_F(RateShiftAlertTest, NoisyShiftFiresOnceAndResolvesOnce) {
  TestNoise noise(7);
  int fired = 0;
  int resolved = 0;
  for (int t = 0; t <= 60 * 3600; t += 60) {
    for (const AlertEvent& event : Step(t, kEviction)) {
      if (event.kind == EventKind::kFiring) ++fired;
      if (event.kind == EventKind::kResolved) ++resolved;
    }
    const double level = t < 24 * 3600 ? 10 : 40;
    engine_.Advance(60, level * noise.Factor(0.3), 5 * noise.Factor(0.3));
  }
  // The new level is absorbed by the 24h baseline: fired once, resolved once.
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(resolved, 1);
  EXPECT_EQ(Status(kEviction).state, AlertState::kResolved);
}

TEST_F(RateShiftAlertTest, RejectionsFromZeroNeedToExceedTheFloor) {
  int t = 0;
  // 0.02 rejections/s from a zero baseline: 0.4x the 0.05/s floor, never fires.
  for (; t <= 6 * 3600; t += 60) {
    for (const AlertEvent& event : Step(t, kRejection)) {
      EXPECT_NE(event.kind, EventKind::kPending) << t;
    }
    engine_.Advance(60, 10, 5, 0.02);
  }
  EXPECT_LT(Status(kRejection).value, 1.0);
  // 0.5 rejections/s: well over 2x the floor.
  bool fired = false;
  for (; t <= 9 * 3600 && !fired; t += 60) {
    for (const AlertEvent& event : Step(t, kRejection)) fired |= event.kind == EventKind::kFiring;
    engine_.Advance(60, 10, 5, 0.5);
  }
  EXPECT_TRUE(fired);
  EXPECT_EQ(Status(kRejection).annotations.at("rate_floor_per_second"), "0.05");
}

TEST_F(RateShiftAlertTest, PreemptionShiftFires) {
  int t = 0;
  for (; t <= 12 * 3600; t += 60) {
    Step(t, kPreemption);
    engine_.Advance(60, 10, 5, 0, 0.1);
  }
  bool fired = false;
  for (; t <= 14 * 3600 && !fired; t += 60) {
    for (const AlertEvent& event : Step(t, kPreemption)) fired |= event.kind == EventKind::kFiring;
    engine_.Advance(60, 10, 5, 0, 1.0);
  }
  EXPECT_TRUE(fired);
  EXPECT_EQ(Status(kPreemption).labels.at("alertname"), kPreemption);
}

TEST_F(RateShiftAlertTest, StaysQuietBelowMinimumVolume) {
  // 0.1 requests/s = 360 requests an hour, below the 500 minimum.
  int t = 0;
  for (; t <= 24 * 3600; t += 60) {
    Step(t, kEviction);
    engine_.Advance(60, 10, 0.1);
  }
  for (; t <= 30 * 3600; t += 60) {
    EXPECT_TRUE(Step(t, kEviction).empty()) << t;
    engine_.Advance(60, 100, 0.1);
  }
  EXPECT_EQ(Status(kEviction).observation, ObservationKind::kBelowMinVolume);
  EXPECT_EQ(Status(kEviction).state, AlertState::kInactive);
}

TEST_F(RateShiftAlertTest, CounterResetKeepsTheRatesRight) {
  int t = 0;
  for (; t <= 12 * 3600; t += 60) {
    ASSERT_TRUE(Step(t, kEviction).empty());
    engine_.Advance(60, 10);
  }
  engine_.Restart();  // the engine restarted right after the last evaluation
  engine_.Advance(60, 10);
  for (int i = 0; i < 30; ++i, t += 60) {
    ASSERT_TRUE(Step(t, kEviction).empty()) << t;
    engine_.Advance(60, 10);
  }
  const AlertStatus status = Status(kEviction);
  EXPECT_EQ(status.annotations.at("short_rate_per_second"), "10");
  EXPECT_EQ(status.annotations.at("baseline_rate_per_second"), "10");
  EXPECT_EQ(status.annotations.at("counter_resets"), "1");
  EXPECT_DOUBLE_EQ(status.value, 1.0);
}

TEST(RateShiftOptionsTest, DefaultsPerCounter) {
  EXPECT_EQ(RateShiftDefaults(CounterKind::kEvictedBlocks).rate_floor_per_second, 1.0);
  EXPECT_EQ(RateShiftDefaults(CounterKind::kRejectedRequests).rate_floor_per_second, 0.05);
  EXPECT_EQ(RateShiftDefaults(CounterKind::kPreemptions).rate_floor_per_second, 0.05);
  RateShiftOptions options;
  options.rate_floor_per_second = 0;
  base::Status status = options.Validate("rejection_rate_shift");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().find("rejection_rate_shift.rate_floor_per_second"), std::string::npos);
}

TEST(RateShiftDetectorTest, QuietUntilTheCounterHasTwoSamples) {
  RateShiftDetector detector(CounterKind::kEvictedBlocks, RateShiftOptions{}, "1h", "24h");
  AlertInputs inputs;
  inputs.short_window_requests = 1000;
  DerivedCounters counters;
  EXPECT_EQ(detector.Evaluate(DetectorInput{inputs, counters}).kind, ObservationKind::kNoData);
  counters[CounterKind::kEvictedBlocks].short_window = WindowIncrease{3600, 60, 1};
  counters[CounterKind::kEvictedBlocks].baseline_window = WindowIncrease{3600, 60, 1};
  Observation observation = detector.Evaluate(DetectorInput{inputs, counters});
  ASSERT_EQ(observation.kind, ObservationKind::kValid);
  EXPECT_DOUBLE_EQ(observation.value, 1.0);
}

}  // namespace
}  // namespace kvwatch::alerts
