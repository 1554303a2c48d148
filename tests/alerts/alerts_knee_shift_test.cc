// Tests for alerts/knee_shift.h: the relative knee change, its guards and
// annotations, and, through the Alerter, `for`, hysteresis, minimum volume and the
// rule that a stationary workload never fires.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

#include "alerts/alerter.h"
#include "alerts/knee_shift.h"
#include "tests/alerts/testing_alerts.h"

namespace kvwatch::alerts {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

TimePoint At(int s) { return TimePoint{} + seconds(1'700'000'000 + s); }

using testing::TestRng;

AlertInputs Knees(int t, double short_knee, double baseline_knee, double short_requests = 2000,
                  double baseline_requests = 40000) {
  AlertInputs inputs;
  inputs.time = At(t);
  inputs.short_knee_pages = short_knee;
  inputs.baseline_knee_pages = baseline_knee;
  inputs.short_window_requests = short_requests;
  inputs.baseline_window_requests = baseline_requests;
  return inputs;
}

Observation Evaluate(KneeShiftDetector& detector, const AlertInputs& inputs) {
  const DerivedCounters counters;
  return detector.Evaluate(DetectorInput{inputs, counters});
}

TEST(KneeShiftDetectorTest, ValueIsRelativeChangeEitherWay) {
  KneeShiftDetector detector(KneeShiftOptions{}, "1h", "24h");
  EXPECT_EQ(detector.AlertName(), "KVWatchKneeShift");
  EXPECT_EQ(detector.Window(), "1h/24h");
  Observation up = Evaluate(detector, Knees(0, 1300, 1000));
  ASSERT_EQ(up.kind, ObservationKind::kValid);
  EXPECT_DOUBLE_EQ(up.value, 0.3);
  EXPECT_TRUE(up.above_fire);
  EXPECT_FALSE(up.below_clear);
  EXPECT_EQ(up.annotations.at("direction"), "grew");
  Observation down = Evaluate(detector, Knees(0, 700, 1000));
  EXPECT_DOUBLE_EQ(down.value, 0.3);
  EXPECT_EQ(down.annotations.at("direction"), "shrank");
  Observation small = Evaluate(detector, Knees(0, 1100, 1000));
  EXPECT_FALSE(small.above_fire);
  EXPECT_TRUE(small.below_clear);
}

TEST(KneeShiftDetectorTest, AnnotationsCarryPagesAndBytes) {
  KneeShiftDetector detector(KneeShiftOptions{}, "1h", "24h");
  AlertInputs inputs = Knees(0, 1500, 1000);
  inputs.bytes_per_page = 16 * 131072.0;  // 16 tokens of 128 KiB
  Observation observation = Evaluate(detector, inputs);
  const Annotations& a = observation.annotations;
  EXPECT_EQ(a.at("old_knee_pages"), "1000");
  EXPECT_EQ(a.at("new_knee_pages"), "1500");
  EXPECT_EQ(a.at("old_knee_bytes"), "2097152000");
  EXPECT_EQ(a.at("new_knee_bytes"), "3145728000");
  EXPECT_EQ(a.at("relative_change"), "0.5");
  EXPECT_NE(a.at("summary").find("1000 pages (1.95 GiB) over 24h -> 1500 pages (2.93 GiB)"), std::string::npos)
      << a.at("summary");
}

TEST(KneeShiftDetectorTest, SmallKneesNeedTheAbsoluteShift) {
  KneeShiftDetector detector(KneeShiftOptions{}, "1h", "24h");     // min_shift_pages 32
  Observation observation = Evaluate(detector, Knees(0, 60, 40));  // +50%, 20 pages
  ASSERT_EQ(observation.kind, ObservationKind::kValid);
  EXPECT_DOUBLE_EQ(observation.value, 0.5);
  EXPECT_FALSE(observation.above_fire);
}

TEST(KneeShiftDetectorTest, QuietWithoutKneesOrVolume) {
  KneeShiftDetector detector(KneeShiftOptions{}, "1h", "24h");
  AlertInputs missing = Knees(0, 1500, 1000);
  missing.short_knee_pages.reset();
  EXPECT_EQ(Evaluate(detector, missing).kind, ObservationKind::kNoData);
  EXPECT_EQ(Evaluate(detector, Knees(0, 1500, 0)).kind, ObservationKind::kNoData);
  EXPECT_EQ(Evaluate(detector, Knees(0, 1500, 1000, 499)).kind, ObservationKind::kBelowMinVolume);
  EXPECT_EQ(Evaluate(detector, Knees(0, 1500, 1000, 500, 4999)).kind, ObservationKind::kBelowMinVolume);
  AlertInputs unknown_volume = Knees(0, 1500, 1000);
  unknown_volume.short_window_requests.reset();
  EXPECT_EQ(Evaluate(detector, unknown_volume).kind, ObservationKind::kBelowMinVolume);
  EXPECT_EQ(Evaluate(detector, Knees(0, 1500, 1000, 500, 5000)).kind, ObservationKind::kValid);
}

TEST(KneeShiftOptionsTest, RejectsClearAboveFire) {
  KneeShiftOptions options;
  options.clear_threshold = 0.3;
  base::Status status = options.Validate("knee_shift");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().find("knee_shift.clear_threshold"), std::string::npos);
}

// The Alerter with only the knee-shift detector.
AlerterOptions KneeOnly() {
  AlerterOptions options;
  options.replica = "replica-a";
  options.capacity_shortfall.enabled = false;
  options.eviction_rate_shift.enabled = false;
  options.rejection_rate_shift.enabled = false;
  options.preemption_rate_shift.enabled = false;
  options.change_tests.clear();
  return options;
}

class KneeShiftAlertTest : public ::testing::Test, public testing::SteppedAlerter {
 protected:
  KneeShiftAlertTest() : SteppedAlerter(KneeOnly()) {}
};

TEST_F(KneeShiftAlertTest, FiresAfterForDurationNotBefore) {
  EXPECT_EQ(Step(Knees(0, 1000, 1000)), std::vector<EventKind>{});
  EXPECT_EQ(Step(Knees(60, 1400, 1000)), std::vector<EventKind>{EventKind::kPending});
  for (int t = 120; t < 60 + 15 * 60; t += 60) {
    EXPECT_EQ(Step(Knees(t, 1400, 1000)), std::vector<EventKind>{}) << t;
    EXPECT_EQ(State(), AlertState::kPending);
  }
  EXPECT_EQ(Step(Knees(60 + 15 * 60, 1400, 1000)), std::vector<EventKind>{EventKind::kFiring});
  AlertStatus status = alerter_.Statuses().at(0);
  EXPECT_EQ(status.fired_at, At(960));
  EXPECT_EQ(status.annotations.at("new_knee_pages"), "1400");
}

TEST_F(KneeShiftAlertTest, DoesNotFlapOnNoiseAndResolvesBelowClear) {
  int t = 0;
  for (; t <= 15 * 60; t += 60) Step(Knees(t, 1400, 1000));
  ASSERT_EQ(State(), AlertState::kFiring);
  // Noise between the clearing (15%) and above the firing (25%) threshold.
  const double changes[] = {0.16, 0.27, 0.2, 0.24, 0.17, 0.3, 0.155};
  for (int i = 0; i < 140; ++i, t += 60) {
    EXPECT_EQ(Step(Knees(t, 1000 * (1 + changes[i % 7]), 1000)), std::vector<EventKind>{}) << i;
  }
  EXPECT_EQ(Step(Knees(t, 1140, 1000)), std::vector<EventKind>{EventKind::kResolved});
  EXPECT_EQ(State(), AlertState::kResolved);
  EXPECT_EQ(alerter_.Statuses().at(0).annotations.at("new_knee_pages"), "1140");
}

TEST_F(KneeShiftAlertTest, StaysQuietBelowMinimumVolume) {
  for (int t = 0; t < 3 * 3600; t += 60) {
    EXPECT_EQ(Step(Knees(t, 3000, 1000, /*short_requests=*/400)), std::vector<EventKind>{});
  }
  AlertStatus status = alerter_.Statuses().at(0);
  EXPECT_EQ(status.state, AlertState::kInactive);
  EXPECT_EQ(status.observation, ObservationKind::kBelowMinVolume);
  EXPECT_NE(status.quiet_reason.find("400"), std::string::npos) << status.quiet_reason;
}

TEST_F(KneeShiftAlertTest, StationaryWorkloadNeverFires) {
  // Seven days at one evaluation a minute. Both knees estimate the same point; the
  // 1h knee wanders (AR(1), 8% stationary deviation), the 24h knee barely (1.5%).
  TestRng rng(20240501);
  double short_noise = 0;
  double baseline_noise = 0;
  int pending = 0;
  for (int i = 0; i < 7 * 24 * 60; ++i) {
    short_noise = 0.9 * short_noise + 0.08 * std::sqrt(1 - 0.81) * rng.Gaussian();
    baseline_noise = 0.99 * baseline_noise + 0.015 * std::sqrt(1 - 0.9801) * rng.Gaussian();
    const double requests = 3000 * (1 + 0.2 * rng.Uniform());
    std::vector<EventKind> events =
        Step(Knees(i * 60, 2000 * (1 + short_noise), 2000 * (1 + baseline_noise), requests, 24 * requests));
    for (EventKind kind : events) {
      ASSERT_NE(kind, EventKind::kFiring) << "fired on a stationary workload at minute " << i;
      if (kind == EventKind::kPending) ++pending;
    }
  }
  EXPECT_EQ(State() == AlertState::kFiring, false);
  RecordProperty("pending_episodes", pending);
}

}  // namespace
}  // namespace kvwatch::alerts
