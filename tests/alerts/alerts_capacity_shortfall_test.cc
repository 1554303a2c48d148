// Tests for alerts/capacity_shortfall.h: working set over capacity, the
// not-converged lower bound, annotations, and through the Alerter `for`,
// hysteresis, recovery and minimum volume.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "alerts/alerter.h"
#include "alerts/capacity_shortfall.h"
#include "tests/alerts/testing_alerts.h"

namespace kvwatch::alerts {
namespace {

using std::chrono::seconds;

TimePoint At(int s) { return TimePoint{} + seconds(1'700'000'000 + s); }

AlertInputs WorkingSet(int t, std::optional<double> working_set, double capacity = 10000,
                       double short_requests = 2000) {
  AlertInputs inputs;
  inputs.time = At(t);
  inputs.working_set_pages = working_set;
  inputs.capacity_pages = capacity;
  inputs.short_window_requests = short_requests;
  return inputs;
}

Observation Evaluate(CapacityShortfallDetector& detector, const AlertInputs& inputs) {
  const DerivedCounters counters;
  return detector.Evaluate(DetectorInput{inputs, counters});
}

TEST(CapacityShortfallDetectorTest, ValueIsWorkingSetOverCapacity) {
  CapacityShortfallDetector detector(CapacityShortfallOptions{}, "1h");
  EXPECT_EQ(detector.AlertName(), "KVWatchWorkingSetOverCapacity");
  EXPECT_EQ(detector.Window(), "1h");
  Observation over = Evaluate(detector, WorkingSet(0, 12000));
  ASSERT_EQ(over.kind, ObservationKind::kValid);
  EXPECT_DOUBLE_EQ(over.value, 1.2);
  EXPECT_TRUE(over.above_fire);
  EXPECT_EQ(over.annotations.at("shortfall_pages"), "2000");
  Observation fits = Evaluate(detector, WorkingSet(0, 8500));
  EXPECT_FALSE(fits.above_fire);
  EXPECT_TRUE(fits.below_clear);
  EXPECT_EQ(fits.annotations.at("shortfall_pages"), "0");
}

TEST(CapacityShortfallDetectorTest, AnnotationsCarryWorkingSetAndCapacityInBytes) {
  CapacityShortfallDetector detector(CapacityShortfallOptions{}, "1h");
  AlertInputs inputs = WorkingSet(0, 12000);
  inputs.bytes_per_page = 1024 * 1024;
  inputs.working_set_target = "page_hit 0.95";
  const Annotations a = Evaluate(detector, inputs).annotations;
  EXPECT_EQ(a.at("working_set_pages"), "12000");
  EXPECT_EQ(a.at("capacity_pages"), "10000");
  EXPECT_EQ(a.at("working_set_bytes"), "12582912000");
  EXPECT_EQ(a.at("capacity_bytes"), "10485760000");
  EXPECT_EQ(a.at("target"), "page_hit 0.95");
  EXPECT_NE(a.at("summary").find("12000 pages (11.7 GiB)"), std::string::npos) << a.at("summary");
  EXPECT_NE(a.at("summary").find("120%"), std::string::npos) << a.at("summary");
}

TEST(CapacityShortfallDetectorTest, NotConvergedBeyondCapacityIsALowerBound) {
  CapacityShortfallDetector detector(CapacityShortfallOptions{}, "1h");
  AlertInputs inputs = WorkingSet(0, std::nullopt);
  inputs.tracked_pages = 16384;
  Observation observation = Evaluate(detector, inputs);
  ASSERT_EQ(observation.kind, ObservationKind::kValid);
  EXPECT_DOUBLE_EQ(observation.value, 1.6384);
  EXPECT_TRUE(observation.above_fire);
  EXPECT_EQ(observation.annotations.at("working_set_pages"), ">16384");
  // Not converged within a tracked range smaller than the capacity: unknown.
  inputs.tracked_pages = 8192;
  EXPECT_EQ(Evaluate(detector, inputs).kind, ObservationKind::kNoData);
  inputs.tracked_pages.reset();
  EXPECT_EQ(Evaluate(detector, inputs).kind, ObservationKind::kNoData);
}

TEST(CapacityShortfallDetectorTest, QuietWithoutCapacityOrVolume) {
  CapacityShortfallDetector detector(CapacityShortfallOptions{}, "1h");
  AlertInputs no_capacity = WorkingSet(0, 12000);
  no_capacity.capacity_pages.reset();
  EXPECT_EQ(Evaluate(detector, no_capacity).kind, ObservationKind::kNoData);
  EXPECT_EQ(Evaluate(detector, WorkingSet(0, 12000, 0)).kind, ObservationKind::kNoData);
  EXPECT_EQ(Evaluate(detector, WorkingSet(0, 12000, 10000, 499)).kind, ObservationKind::kBelowMinVolume);
}

AlerterOptions CapacityOnly() {
  AlerterOptions options;
  options.knee_shift.enabled = false;
  options.eviction_rate_shift.enabled = false;
  options.rejection_rate_shift.enabled = false;
  options.preemption_rate_shift.enabled = false;
  options.change_tests.clear();
  return options;
}

class CapacityShortfallAlertTest : public ::testing::Test, public testing::SteppedAlerter {
 protected:
  CapacityShortfallAlertTest() : SteppedAlerter(CapacityOnly()) {}
};

TEST_F(CapacityShortfallAlertTest, FiresAfterForDurationNotBefore) {
  EXPECT_EQ(Step(WorkingSet(0, 10500)), std::vector<EventKind>{EventKind::kPending});
  for (int t = 30; t < 900; t += 30) {
    EXPECT_EQ(Step(WorkingSet(t, 10500)), std::vector<EventKind>{}) << t;
  }
  EXPECT_EQ(State(), AlertState::kPending);
  EXPECT_EQ(Step(WorkingSet(900, 10500)), std::vector<EventKind>{EventKind::kFiring});
}

TEST_F(CapacityShortfallAlertTest, NoFlapBetweenThresholdsThenRecovery) {
  int t = 0;
  for (; t <= 900; t += 60) Step(WorkingSet(t, 11000));
  ASSERT_EQ(State(), AlertState::kFiring);
  const double noisy[] = {9100, 10100, 9500, 9950, 10050, 9010};
  for (int i = 0; i < 120; ++i, t += 60) {
    EXPECT_EQ(Step(WorkingSet(t, noisy[i % 6])), std::vector<EventKind>{}) << i;
  }
  EXPECT_EQ(Step(WorkingSet(t, 8900)), std::vector<EventKind>{EventKind::kResolved});
  AlertStatus status = alerter_.Statuses().at(0);
  EXPECT_EQ(status.resolved_at, At(t));
  EXPECT_EQ(status.annotations.at("working_set_pages"), "8900");  // the recovery's numbers
}

TEST_F(CapacityShortfallAlertTest, StaysQuietBelowMinimumVolume) {
  for (int t = 0; t < 7200; t += 60) {
    EXPECT_EQ(Step(WorkingSet(t, 30000, 10000, 100)), std::vector<EventKind>{});
  }
  EXPECT_EQ(State(), AlertState::kInactive);
}

}  // namespace
}  // namespace kvwatch::alerts
