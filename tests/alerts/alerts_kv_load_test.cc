// Tests for alerts/kv_load.h: the KV load factor's detector (value, quiet rules,
// annotations) and, through the Alerter, firing after the hold time and clearing
// with hysteresis.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <vector>

#include "alerts/alerter.h"
#include "alerts/kv_load.h"
#include "tests/alerts/testing_alerts.h"

namespace kvwatch::alerts {
namespace {

using std::chrono::seconds;

TimePoint At(int s) { return TimePoint{} + seconds(1'700'000'000 + s); }

AlertInputs Load(int t, std::optional<double> rho, double sized = 200) {
  AlertInputs inputs;
  inputs.time = At(t);
  if (rho) {
    KvLoadSample k;
    k.load_factor = *rho;
    k.sized_requests = sized;
    k.arrivals_per_s = 2;
    k.mean_token_seconds = 500 * *rho;
    k.capacity_tokens = 1000;
    k.decode_tokens_per_s = 50;
    k.prefill_s = 0.25;
    inputs.kv_load = k;
  }
  return inputs;
}

Observation Evaluate(KvLoadDetector& detector, const AlertInputs& inputs) {
  const DerivedCounters counters;
  return detector.Evaluate(DetectorInput{inputs, counters});
}

TEST(KvLoadDetectorTest, ValueIsTheLoadFactorAgainstItsThresholds) {
  KvLoadDetector detector(KvLoadOptions{});
  EXPECT_EQ(detector.AlertName(), "KVWatchKvLoadHigh");
  EXPECT_EQ(detector.Window(), "5m");
  const Observation high = Evaluate(detector, Load(0, 0.95));
  ASSERT_EQ(high.kind, ObservationKind::kValid);
  EXPECT_DOUBLE_EQ(high.value, 0.95);
  EXPECT_TRUE(high.above_fire);
  EXPECT_FALSE(high.below_clear);
  EXPECT_EQ(high.annotations.at("kv_capacity_tokens"), "1000");
  EXPECT_EQ(high.annotations.at("load_factor"), "0.95");
  EXPECT_EQ(high.annotations.at("prefill_seconds"), "0.25");
  EXPECT_NE(high.annotations.at("description").find("(prefill 0.25 s, decode at 50 tokens/s)"), std::string::npos)
      << high.annotations.at("description");
  EXPECT_NE(high.annotations.at("summary").find("over 5m"), std::string::npos);
  const Observation between = Evaluate(detector, Load(0, 0.85));
  EXPECT_FALSE(between.above_fire);
  EXPECT_FALSE(between.below_clear);
  EXPECT_TRUE(Evaluate(detector, Load(0, 0.5)).below_clear);
}

TEST(KvLoadDetectorTest, QuietWithoutLoadFactorOrEnoughSizedRequests) {
  KvLoadDetector detector(KvLoadOptions{});
  const Observation none = Evaluate(detector, Load(0, std::nullopt));
  EXPECT_EQ(none.kind, ObservationKind::kNoData);
  EXPECT_NE(none.reason.find("token counts"), std::string::npos) << none.reason;
  EXPECT_EQ(Evaluate(detector, Load(0, 2.0, 49)).kind, ObservationKind::kBelowMinVolume);
  EXPECT_EQ(Evaluate(detector, Load(0, 2.0, 50)).kind, ObservationKind::kValid);
}

TEST(KvLoadDetectorTest, OptionsAreValidated) {
  KvLoadOptions o;
  o.clear_threshold = 1.0;  // above fire
  EXPECT_FALSE(o.Validate("kv_load").ok());
  o = KvLoadOptions{};
  o.window = seconds(0);
  const base::Status s = o.Validate("kv_load");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("kv_load.window"), std::string::npos) << s.error();
}

class KvLoadAlertTest : public ::testing::Test {
 protected:
  KvLoadAlertTest() : alerter_(Options()) {}
  static AlerterOptions Options() {
    AlerterOptions o = testing::NoDetectors();
    o.kv_load.enabled = true;
    return o;
  }
  std::vector<EventKind> Step(const AlertInputs& inputs) { return alerter_.Step(inputs); }
  AlertState State() const { return alerter_.State(); }
  testing::SteppedAlerter alerter_;
};

TEST_F(KvLoadAlertTest, FiresAfterHoldingTenMinutesAndClearsBelowTheClearThreshold) {
  EXPECT_EQ(Step(Load(0, 0.95)), std::vector<EventKind>{EventKind::kPending});
  for (int t = 15; t < 600; t += 15) EXPECT_EQ(Step(Load(t, 0.92)), std::vector<EventKind>{}) << t;
  EXPECT_EQ(State(), AlertState::kPending);
  EXPECT_EQ(Step(Load(600, 0.91)), std::vector<EventKind>{EventKind::kFiring});
  // Between the thresholds it keeps firing; below the clear threshold it resolves.
  EXPECT_EQ(Step(Load(615, 0.85)), std::vector<EventKind>{});
  EXPECT_EQ(State(), AlertState::kFiring);
  EXPECT_EQ(Step(Load(630, 0.7)), std::vector<EventKind>{EventKind::kResolved});
}

TEST_F(KvLoadAlertTest, ADipBelowTheFireThresholdRestartsTheHold) {
  EXPECT_EQ(Step(Load(0, 1.2)), std::vector<EventKind>{EventKind::kPending});
  EXPECT_EQ(Step(Load(300, 0.89)), std::vector<EventKind>{EventKind::kCancelled});
  EXPECT_EQ(Step(Load(315, 1.2)), std::vector<EventKind>{EventKind::kPending});
  EXPECT_EQ(Step(Load(900, 1.2)), std::vector<EventKind>{});
  EXPECT_EQ(Step(Load(915, 1.2)), std::vector<EventKind>{EventKind::kFiring});
}

TEST_F(KvLoadAlertTest, LosingTheLoadFactorResolvesAFiringAlert) {
  Step(Load(0, 1.5));
  Step(Load(600, 1.5));
  ASSERT_EQ(State(), AlertState::kFiring);
  EXPECT_EQ(Step(Load(615, std::nullopt)), std::vector<EventKind>{EventKind::kResolved});
}

}  // namespace
}  // namespace kvwatch::alerts
