// Tests for alerts/rule.h: the pending/firing/resolved life cycle with `for`,
// hysteresis, keep_firing_for and quiet observations, on a fake time.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <vector>

#include "alerts/rule.h"

namespace kvwatch::alerts {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

constexpr double kFire = 1.0;
constexpr double kClear = 0.8;

TimePoint At(int s) { return TimePoint{} + seconds(1'700'000'000 + s); }

Observation Value(double v) { return Observation::Valid(v, kFire, kClear, {}); }

RuleOptions Options(int for_seconds, int keep_seconds = 0) {
  RuleOptions options;
  options.for_duration = seconds(for_seconds);
  options.keep_firing_for = seconds(keep_seconds);
  return options;
}

TEST(RuleTest, FiresAfterForDurationNotBefore) {
  Rule rule(Options(300));
  EXPECT_EQ(rule.Step(At(0), Value(1.2)), EventKind::kPending);
  EXPECT_EQ(rule.active_since(), At(0));
  for (int t = 30; t < 300; t += 30) {
    EXPECT_EQ(rule.Step(At(t), Value(1.2)), std::nullopt) << t;
    EXPECT_EQ(rule.state(), AlertState::kPending) << t;
  }
  EXPECT_EQ(rule.Step(At(300), Value(1.2)), EventKind::kFiring);
  EXPECT_EQ(rule.state(), AlertState::kFiring);
  EXPECT_EQ(rule.fired_at(), At(300));
  EXPECT_EQ(rule.active_since(), At(0));
}

TEST(RuleTest, ZeroForFiresAtOnce) {
  Rule rule(Options(0));
  EXPECT_EQ(rule.Step(At(0), Value(1.0)), EventKind::kFiring);  // at the threshold fires
  EXPECT_EQ(rule.fired_at(), At(0));
}

TEST(RuleTest, PendingNeedsTheFiringThresholdAtEveryStep) {
  Rule rule(Options(120));
  EXPECT_EQ(rule.Step(At(0), Value(1.1)), EventKind::kPending);
  // Between the thresholds: not enough to stay pending (deadband applies to firing).
  EXPECT_EQ(rule.Step(At(60), Value(0.9)), EventKind::kCancelled);
  EXPECT_EQ(rule.state(), AlertState::kInactive);
  EXPECT_EQ(rule.Step(At(90), Value(1.1)), EventKind::kPending);
  EXPECT_EQ(rule.active_since(), At(90));  // the `for` clock restarted
  EXPECT_EQ(rule.Step(At(180), Value(1.1)), std::nullopt);
  EXPECT_EQ(rule.Step(At(210), Value(1.1)), EventKind::kFiring);
}

TEST(RuleTest, NoiseAroundTheFiringThresholdDoesNotFire) {
  Rule rule(Options(300));
  int firing_events = 0;
  for (int i = 0; i < 200; ++i) {
    const double v = (i % 2 == 0) ? 1.02 : 0.98;  // straddles the firing threshold
    if (rule.Step(At(30 * i), Value(v)) == EventKind::kFiring) ++firing_events;
  }
  EXPECT_EQ(firing_events, 0);
  EXPECT_NE(rule.state(), AlertState::kFiring);
}

TEST(RuleTest, HysteresisKeepsFiringBetweenThresholdsAndResolvesBelowClear) {
  Rule rule(Options(60));
  ASSERT_EQ(rule.Step(At(0), Value(1.5)), EventKind::kPending);
  ASSERT_EQ(rule.Step(At(60), Value(1.5)), EventKind::kFiring);
  // Noise between clear (0.8) and above fire: no flapping.
  for (int i = 0; i < 100; ++i) {
    const double v = (i % 3 == 0) ? 0.81 : (i % 3 == 1 ? 1.05 : 0.95);
    EXPECT_EQ(rule.Step(At(120 + 30 * i), Value(v)), std::nullopt) << i;
    EXPECT_EQ(rule.state(), AlertState::kFiring);
  }
  EXPECT_EQ(rule.Step(At(4000), Value(0.79)), EventKind::kResolved);
  EXPECT_EQ(rule.state(), AlertState::kResolved);
  EXPECT_EQ(rule.resolved_at(), At(4000));
  EXPECT_EQ(rule.fired_at(), At(60));
  // Between the thresholds again after resolving: stays resolved (needs the fire threshold).
  EXPECT_EQ(rule.Step(At(4030), Value(0.95)), std::nullopt);
  EXPECT_EQ(rule.state(), AlertState::kResolved);
}

TEST(RuleTest, KeepFiringForHoldsAfterTheConditionClears) {
  Rule rule(Options(0, 600));
  ASSERT_EQ(rule.Step(At(0), Value(2)), EventKind::kFiring);
  EXPECT_EQ(rule.Step(At(60), Value(0.1)), std::nullopt);   // cleared, held
  EXPECT_EQ(rule.Step(At(300), Value(0.9)), std::nullopt);  // back above clear: countdown off
  EXPECT_EQ(rule.Step(At(360), Value(0.1)), std::nullopt);  // cleared again at 360
  EXPECT_EQ(rule.Step(At(900), Value(0.1)), std::nullopt);  // 540 s < 600 s
  EXPECT_EQ(rule.Step(At(960), Value(0.1)), EventKind::kResolved);
  EXPECT_EQ(rule.resolved_at(), At(960));
}

TEST(RuleTest, QuietObservationsCancelPendingAndResolveFiring) {
  Rule rule(Options(60));
  ASSERT_EQ(rule.Step(At(0), Value(2)), EventKind::kPending);
  EXPECT_EQ(rule.Step(At(30), Observation::BelowMinVolume("few requests")), EventKind::kCancelled);
  ASSERT_EQ(rule.Step(At(60), Value(2)), EventKind::kPending);
  ASSERT_EQ(rule.Step(At(120), Value(2)), EventKind::kFiring);
  EXPECT_EQ(rule.Step(At(150), Observation::NoData("knee missing")), EventKind::kResolved);
}

TEST(RuleTest, ResolvedAlertThatComesBackIsANewInstance) {
  Rule rule(Options(60));
  ASSERT_EQ(rule.Step(At(0), Value(2)), EventKind::kPending);
  ASSERT_EQ(rule.Step(At(60), Value(2)), EventKind::kFiring);
  ASSERT_EQ(rule.Step(At(120), Value(0)), EventKind::kResolved);
  EXPECT_EQ(rule.Step(At(180), Value(2)), EventKind::kPending);
  EXPECT_EQ(rule.active_since(), At(180));
  EXPECT_FALSE(rule.fired_at().has_value());
  EXPECT_FALSE(rule.resolved_at().has_value());
  EXPECT_EQ(rule.Step(At(240), Value(2)), EventKind::kFiring);
  EXPECT_EQ(rule.fired_at(), At(240));
}

TEST(RuleTest, TimeGoingBackwardsNeverShortensFor) {
  Rule rule(Options(300));
  ASSERT_EQ(rule.Step(At(1000), Value(2)), EventKind::kPending);
  EXPECT_EQ(rule.Step(At(0), Value(2)), std::nullopt);  // treated as At(1000)
  EXPECT_EQ(rule.Step(At(1299), Value(2)), std::nullopt);
  EXPECT_EQ(rule.Step(At(1300), Value(2)), EventKind::kFiring);
}

TEST(RuleOptionsTest, ValidateNamesTheField) {
  RuleOptions options;
  EXPECT_TRUE(options.Validate("x").ok());
  options.severity = "";
  auto status = options.Validate("knee_shift.rule");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().find("knee_shift.rule.severity"), std::string::npos);
  options = RuleOptions();
  options.for_duration = seconds(-1);
  ASSERT_FALSE(options.Validate("r").ok());
  EXPECT_NE(options.Validate("r").error().find("r.for"), std::string::npos);
  options = RuleOptions();
  options.keep_firing_for = minutes(-1);
  EXPECT_FALSE(options.Validate("r").ok());
}

}  // namespace
}  // namespace kvwatch::alerts
