// Tests for alerts/capacity_miss_share.h through the Alerter, on explicit time: a
// one-shot flood that starts part-way raises the capacity-miss share and the alert
// names the flooding class and tenant; the exact value; hysteresis; the floor; the
// smallest capacity against every capacity; no data and low volume stay quiet;
// option and input validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "alerts/alerter.h"
#include "alerts/capacity_miss_share.h"
#include "tests/alerts/testing_alerts.h"

namespace kvwatch::alerts {
namespace {

using std::chrono::seconds;

TimePoint At(int s) { return TimePoint{} + seconds(1'700'000'000 + s); }

constexpr char kAlert[] = "KVWatchCapacityMissesRising";

// The agent's counters: page references, requests, capacity misses at two
// capacities and the evictor matrix, advanced by per-second rates.
struct FakeAgent {
  double references = 0;
  double requests = 0;
  std::map<double, double> misses;  // capacity -> cumulative misses
  // (dimension, victim, evictor, capacity) -> cumulative pages
  std::map<std::tuple<std::string, std::string, std::string, double>, double> evicted_by;
  bool report_references = true;
  bool report_misses = true;

  // `share_256` and `share_1024`: capacity misses per reference at each capacity;
  // the misses at 256 are split over `cells` (dimension, victim, evictor, weight).
  void Advance(int s, double reference_rate, double share_256, double share_1024,
               const std::vector<std::tuple<std::string, std::string, std::string, double>>& cells = {},
               double request_rate = 5) {
    const double refs = reference_rate * s;
    references += refs;
    requests += request_rate * s;
    misses[256] += refs * share_256;
    misses[1024] += refs * share_1024;
    for (const auto& [dimension, victim, evictor, weight] : cells) {
      evicted_by[{dimension, victim, evictor, 256}] += refs * share_256 * weight;
    }
  }
  AlertInputs Inputs(int t) const {
    AlertInputs inputs;
    inputs.time = At(t);
    inputs.counters.requests = requests;
    if (report_references) inputs.capacity_misses.page_references = references;
    if (report_misses) {
      for (const auto& [capacity, value] : misses) inputs.capacity_misses.capacity_misses.push_back({capacity, value});
    }
    for (const auto& [key, value] : evicted_by) {
      const auto& [dimension, victim, evictor, capacity] = key;
      inputs.capacity_misses.evicted_by.push_back({dimension, victim, evictor, capacity, value});
    }
    return inputs;
  }
};

AlerterOptions CapacityMissesOnly() {
  AlerterOptions options = testing::NoDetectors();
  options.capacity_miss_share.enabled = true;
  return options;
}

// The steady mix: conversations evict a little of each other.
const std::vector<std::tuple<std::string, std::string, std::string, double>> kSteady = {
    {"class", "turn2", "turn2", 0.5},        {"class", "turn2", "first", 0.2},        {"class", "first", "first", 0.3},
    {"tenant", "tenant-a", "tenant-a", 0.7}, {"tenant", "tenant-a", "tenant-b", 0.3},
};
// The flood: single-turn requests of tenant-b push out turn2 conversations of tenant-a.
const std::vector<std::tuple<std::string, std::string, std::string, double>> kFlood = {
    {"class", "turn2", "first", 0.8},        {"class", "turn2", "turn2", 0.1},        {"class", "first", "first", 0.1},
    {"tenant", "tenant-a", "tenant-b", 0.9}, {"tenant", "tenant-a", "tenant-a", 0.1},
};

class CapacityMissShareTest : public ::testing::Test {
 protected:
  explicit CapacityMissShareTest(const AlerterOptions& options = CapacityMissesOnly())
      : alerter_(Alerter::Create(options).value()) {}

  std::vector<EventKind> Step(int t) {
    base::Result<Evaluation> result = alerter_.Evaluate(agent_.Inputs(t));
    EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error());
    std::vector<EventKind> kinds;
    if (!result.ok()) return kinds;
    for (const AlertEvent& event : result.value().events) kinds.push_back(event.kind);
    return kinds;
  }
  AlertStatus Status() const { return alerter_.Statuses().at(0); }

  // A steady day at 100 references/s, 2% capacity misses at 256 pages.
  int SteadyDay() {
    int t = 0;
    for (; t <= 24 * 3600; t += 60) {
      EXPECT_TRUE(Step(t).empty()) << t;
      agent_.Advance(60, 100, 0.02, 0.01, kSteady);
    }
    return t;
  }

  FakeAgent agent_;
  Alerter alerter_;
};

TEST_F(CapacityMissShareTest, FloodFiresAfterForAndNamesTheFloodingClass) {
  ASSERT_EQ(alerter_.Statuses().size(), 1u);
  EXPECT_EQ(Status().labels.at("alertname"), kAlert);
  EXPECT_EQ(Status().labels.at("window"), "1h/24h");
  int t = SteadyDay();
  EXPECT_EQ(Status().observation, ObservationKind::kValid);
  EXPECT_NEAR(Status().value, 1.0, 1e-9);                            // a steady share is its own baseline
  EXPECT_EQ(Status().annotations.at("top_evictor_class"), "turn2");  // before the flood

  std::optional<int> pending_at, firing_at;
  for (; t <= 30 * 3600 && !firing_at; t += 60) {
    for (EventKind kind : Step(t)) {
      if (kind == EventKind::kPending) pending_at = t;
      if (kind == EventKind::kFiring) firing_at = t;
    }
    agent_.Advance(60, 100, 0.08, 0.01, kFlood);
  }
  ASSERT_TRUE(pending_at && firing_at);
  EXPECT_EQ(*firing_at - *pending_at, 15 * 60);
  // share(1h) = 0.08 * f + 0.02 * (1 - f) with f the flooded part of the hour; the
  // ratio reaches 2 once the 1h share is twice the (slowly rising) 24h share: about
  // 25 minutes into the flood.
  EXPECT_GT(*pending_at - 24 * 3600, 15 * 60);
  EXPECT_LT(*pending_at - 24 * 3600, 35 * 60);

  const Annotations& a = Status().annotations;
  EXPECT_EQ(a.at("capacity_pages"), "256");
  EXPECT_EQ(a.at("top_evictor_class"), "first");
  EXPECT_EQ(a.at("top_victim_class"), "turn2");
  EXPECT_EQ(a.at("top_evictor_tenant"), "tenant-b");
  EXPECT_EQ(a.at("top_victim_tenant"), "tenant-a");
  EXPECT_NE(a.at("summary").find("class first evicts class turn2"), std::string::npos) << a.at("summary");
  EXPECT_NE(a.at("summary").find("tenant tenant-b evicts tenant tenant-a"), std::string::npos) << a.at("summary");
}

// An evictor cell that appears with the flood (the agent exports no zero cell)
// counts from its first report: the first firing evaluation already names it.
AlerterOptions CapacityMissesWithoutFor() {
  AlerterOptions options = CapacityMissesOnly();
  options.capacity_miss_share.rule.for_duration = seconds(0);
  return options;
}
class ImmediateTest : public CapacityMissShareTest {
 protected:
  ImmediateTest() : CapacityMissShareTest(CapacityMissesWithoutFor()) {}
};

TEST_F(ImmediateTest, ANewEvictorCellIsNamedAtTheFirstFiringEvaluation) {
  const std::vector<std::tuple<std::string, std::string, std::string, double>> quiet = {
      {"class", "turn2", "turn2", 1.0}};
  int t = 0;
  for (; t <= 24 * 3600; t += 60) {
    Step(t);
    agent_.Advance(60, 100, 0.02, 0.01, quiet);
  }
  // The flood brings a cell never reported before: (class, turn2, first).
  const std::vector<std::tuple<std::string, std::string, std::string, double>> flood = {
      {"class", "turn2", "first", 0.9}, {"class", "turn2", "turn2", 0.1}};
  agent_.Advance(60, 1000, 1.0, 0.01, flood);  // ten times the traffic, every reference a miss
  t += 60;
  Step(t);
  ASSERT_EQ(Status().state, AlertState::kFiring) << Status().value;
  EXPECT_EQ(Status().annotations.at("top_evictor_class"), "first");
}

TEST_F(CapacityMissShareTest, ValueIsTheShareRatioExactly) {
  int t = SteadyDay();
  // One full hour of flood: share(1h) = 0.08; share(24h) = (23 * 0.02 + 0.08) / 24.
  for (const int end = t + 3600; t <= end; t += 60) {
    if (t == end) break;
    Step(t);
    agent_.Advance(60, 100, 0.08, 0.01, kFlood);
  }
  Step(t);
  const double baseline = (23 * 0.02 + 0.08) / 24;
  EXPECT_NEAR(Status().value, 0.08 / baseline, 0.01);
  EXPECT_EQ(Status().annotations.at("short_share"), "0.08");
  // Over the hour 80% of the attributed class misses were first -> turn2.
  EXPECT_EQ(Status().annotations.at("top_evictor_share_class"), "0.8");
}

TEST_F(CapacityMissShareTest, HoldsBetweenThresholdsThenResolves) {
  int t = SteadyDay();
  for (const int end = t + 2 * 3600; t < end; t += 60) {
    Step(t);
    agent_.Advance(60, 100, 0.08, 0.01, kFlood);
  }
  ASSERT_EQ(Status().state, AlertState::kFiring);
  // Back to the old share: the 1h share falls, the ratio passes through [1.5, 2)
  // (still firing) before it goes below 1.5 and the alert resolves.
  bool held_between = false;
  std::optional<int> resolved_at;
  for (const int end = t + 3 * 3600; t < end && !resolved_at; t += 60) {
    for (EventKind kind : Step(t)) {
      if (kind == EventKind::kResolved) resolved_at = t;
    }
    const double value = Status().value;
    if (value >= 1.5 && value < 2.0) {
      EXPECT_EQ(Status().state, AlertState::kFiring) << value;
      held_between = true;
    }
    if (!resolved_at) {
      EXPECT_GE(value, 1.5) << t;
    }
    agent_.Advance(60, 100, 0.02, 0.01, kSteady);
  }
  EXPECT_TRUE(held_between);
  ASSERT_TRUE(resolved_at);
  EXPECT_LT(Status().value, 1.5);
}

TEST_F(CapacityMissShareTest, FloorKeepsAnAlmostMissFreeCacheQuiet) {
  int t = 0;
  for (; t <= 24 * 3600; t += 60) {
    Step(t);
    agent_.Advance(60, 100, 0.0, 0.0);
  }
  // 0 -> 0.5% of references: infinitely more, but half the 1% floor.
  for (const int end = t + 2 * 3600; t < end; t += 60) {
    EXPECT_TRUE(Step(t).empty()) << t;
    agent_.Advance(60, 100, 0.005, 0.0);
  }
  EXPECT_NEAR(Status().value, 0.5, 1e-9);
  EXPECT_EQ(Status().annotations.count("top_evictor_class"), 0u);  // no matrix reported
  EXPECT_EQ(Status().annotations.at("baseline_share").substr(0, 5), "0.000");
}

TEST_F(CapacityMissShareTest, NoDataWithoutCounters) {
  agent_.report_references = false;
  for (int t = 0; t <= 2 * 3600; t += 60) {
    EXPECT_TRUE(Step(t).empty());
    agent_.Advance(60, 100, 0.5, 0.5);
  }
  EXPECT_EQ(Status().observation, ObservationKind::kNoData);
  EXPECT_NE(Status().quiet_reason.find("page_references"), std::string::npos) << Status().quiet_reason;

  agent_.report_references = true;
  agent_.report_misses = false;
  for (int t = 2 * 3600 + 60; t <= 4 * 3600; t += 60) {
    EXPECT_TRUE(Step(t).empty());
    agent_.Advance(60, 100, 0.5, 0.5);
  }
  EXPECT_EQ(Status().observation, ObservationKind::kNoData);
  EXPECT_NE(Status().quiet_reason.find("capacity-miss"), std::string::npos) << Status().quiet_reason;
  EXPECT_EQ(Status().state, AlertState::kInactive);
}

TEST_F(CapacityMissShareTest, LowVolumeStaysQuiet) {
  int t = 0;
  for (; t <= 24 * 3600; t += 60) {
    Step(t);
    agent_.Advance(60, 100, 0.02, 0.01, kSteady, /*request_rate=*/0.1);  // 360 requests an hour
  }
  for (const int end = t + 2 * 3600; t < end; t += 60) {
    EXPECT_TRUE(Step(t).empty()) << t;
    agent_.Advance(60, 100, 0.5, 0.5, kFlood, 0.1);
  }
  EXPECT_EQ(Status().observation, ObservationKind::kBelowMinVolume);
  EXPECT_EQ(Status().state, AlertState::kInactive);
}

AlerterOptions EveryCapacity() {
  AlerterOptions options = CapacityMissesOnly();
  options.capacity_miss_share.every_capacity = true;
  return options;
}

class EveryCapacityTest : public CapacityMissShareTest {
 protected:
  EveryCapacityTest() : CapacityMissShareTest(EveryCapacity()) {}
};

// A rise at 1024 pages only: the default (smallest capacity, 256) does not see it,
// every_capacity does and names the capacity.
TEST_F(CapacityMissShareTest, SmallestCapacityOnlyByDefault) {
  int t = SteadyDay();
  for (const int end = t + 2 * 3600; t < end; t += 60) {
    EXPECT_TRUE(Step(t).empty()) << t;
    agent_.Advance(60, 100, 0.02, 0.05, kSteady);
  }
  EXPECT_EQ(Status().annotations.at("capacity_pages"), "256");
  EXPECT_NEAR(Status().value, 1.0, 1e-9);
}

TEST_F(EveryCapacityTest, EveryCapacityTakesTheLargestRatio) {
  int t = SteadyDay();
  for (const int end = t + 2 * 3600; t < end; t += 60) {
    Step(t);
    agent_.Advance(60, 100, 0.02, 0.05, kSteady);
  }
  EXPECT_EQ(Status().annotations.at("capacity_pages"), "1024");
  EXPECT_GT(Status().value, 2.0);
  EXPECT_EQ(Status().state, AlertState::kFiring);
  // The matrix is reported at 256 only: no evictor to name at 1024.
  EXPECT_EQ(Status().annotations.count("top_evictor_class"), 0u);
}

TEST(CapacityMissShareOptionsTest, ValidationNamesTheField) {
  AlerterOptions options;
  options.capacity_miss_share.clear_threshold = 3;
  const auto inverted = Alerter::Create(options);
  ASSERT_FALSE(inverted.ok());
  EXPECT_NE(inverted.error().find("capacity_miss_share.clear_threshold"), std::string::npos) << inverted.error();

  AlerterOptions floor_options;
  floor_options.capacity_miss_share.share_floor = 0;
  const auto no_floor = Alerter::Create(floor_options);
  ASSERT_FALSE(no_floor.ok());
  EXPECT_NE(no_floor.error().find("capacity_miss_share.share_floor"), std::string::npos) << no_floor.error();

  AlerterOptions disabled_options;
  disabled_options.capacity_miss_share.enabled = false;
  const auto disabled = Alerter::Create(disabled_options);
  ASSERT_TRUE(disabled.ok());
  for (const AlertStatus& status : disabled.value().Statuses()) EXPECT_NE(status.labels.at("alertname"), kAlert);
}

TEST(CapacityMissShareOptionsTest, NegativeInputsAreRejected) {
  const AlerterOptions defaults;
  auto alerter = Alerter::Create(defaults);
  ASSERT_TRUE(alerter.ok());
  AlertInputs inputs;
  inputs.time = At(0);
  inputs.capacity_misses.evicted_by.push_back({"class", "a", "b", 256, -1});
  auto result = alerter.value().Evaluate(inputs);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().find("inputs.capacity_misses.evicted_by[0].pages"), std::string::npos) << result.error();
  inputs.capacity_misses.evicted_by.clear();
  inputs.capacity_misses.page_references = -5;
  result = alerter.value().Evaluate(inputs);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().find("page_references"), std::string::npos) << result.error();
}

}  // namespace
}  // namespace kvwatch::alerts
