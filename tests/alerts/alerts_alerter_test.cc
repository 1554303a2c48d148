// Tests for alerts/alerter.h: option validation, stable low-cardinality labels,
// input validation, events, and the Alertmanager re-send schedule end to end.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "alerts/alerter.h"

namespace kvwatch::alerts {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

TimePoint At(int s) { return TimePoint{} + seconds(1'700'000'000 + s); }

AlerterOptions Named() {
  AlerterOptions options;
  options.replica = "vllm-0";
  options.model = "llama-3-70b";
  options.capacity_miss_share.enabled = true;  // off by default; every detector here
  return options;
}

// Inputs with a knee that moved +40% and enough traffic; counters optional.
AlertInputs Shifted(int t, double short_knee = 1400) {
  AlertInputs inputs;
  inputs.time = At(t);
  inputs.short_knee_pages = short_knee;
  inputs.baseline_knee_pages = 1000;
  inputs.bytes_per_page = 2 * 1024 * 1024;
  inputs.short_window_requests = 5000;
  inputs.baseline_window_requests = 100000;
  inputs.working_set_pages = 5000;
  inputs.capacity_pages = 10000;
  return inputs;
}

std::string ErrorOf(AlerterOptions options) {
  base::Result<Alerter> alerter = Alerter::Create(std::move(options));
  return alerter.ok() ? "" : alerter.error();
}

TEST(AlerterOptionsTest, DefaultsAreValid) {
  const AlerterOptions options;
  EXPECT_TRUE(options.Validate().ok());
  EXPECT_EQ(options.short_window, minutes(60));
  EXPECT_EQ(options.baseline_window, minutes(24 * 60));
  EXPECT_EQ(options.knee_shift.fire_threshold, 0.25);
  EXPECT_EQ(options.knee_shift.clear_threshold, 0.15);
  EXPECT_EQ(options.knee_shift.rule.for_duration, minutes(15));
  EXPECT_EQ(options.capacity_shortfall.fire_threshold, 1.0);
  EXPECT_EQ(options.capacity_shortfall.clear_threshold, 0.9);
  EXPECT_EQ(options.eviction_rate_shift.fire_threshold, 2.0);
  EXPECT_EQ(options.eviction_rate_shift.clear_threshold, 1.5);
  ASSERT_EQ(options.change_tests.size(), 1u);
  EXPECT_EQ(options.change_tests[0].counter, CounterKind::kEvictedBlocks);
  EXPECT_EQ(options.change_tests[0].rule.for_duration, minutes(5));
  EXPECT_EQ(options.notify.resend_interval, seconds(60));
  EXPECT_EQ(options.notify.resolved_retention, minutes(15));
}

TEST(AlerterOptionsTest, ErrorsNameTheField) {
  AlerterOptions options;
  options.knee_shift.clear_threshold = 0.5;
  EXPECT_NE(ErrorOf(options).find("knee_shift.clear_threshold"), std::string::npos);

  options = AlerterOptions();
  options.extra_labels["severity"] = "page";
  EXPECT_NE(ErrorOf(options).find("extra_labels.severity"), std::string::npos);
  options.extra_labels = {{"9lives", "x"}};
  EXPECT_NE(ErrorOf(options).find("extra_labels.9lives"), std::string::npos);
  options.extra_labels = {{"__name", "x"}};
  EXPECT_NE(ErrorOf(options).find("extra_labels.__name"), std::string::npos);
  options.extra_labels = {{"cluster", ""}};
  EXPECT_NE(ErrorOf(options).find("extra_labels.cluster"), std::string::npos);

  options = AlerterOptions();
  options.baseline_window = options.short_window;
  EXPECT_NE(ErrorOf(options).find("baseline_window"), std::string::npos);

  options = AlerterOptions();
  options.change_tests.push_back(ChangeTestOptions{});
  EXPECT_NE(ErrorOf(options).find("change_tests[1].counter"), std::string::npos);

  options = AlerterOptions();
  options.notify.resolved_retention = minutes(1);
  EXPECT_NE(ErrorOf(options).find("notify.resolved_retention"), std::string::npos);

  options = AlerterOptions();
  options.rejection_rate_shift.rule.severity = "";
  EXPECT_NE(ErrorOf(options).find("rejection_rate_shift.rule.severity"), std::string::npos);
}

TEST(AlerterTest, LabelsAreStableAndLowCardinality) {
  AlerterOptions options = Named();
  options.extra_labels = {{"cluster", "eu-1"}};
  Alerter alerter = Alerter::Create(options).value();
  const std::vector<AlertStatus> before = alerter.Statuses();
  ASSERT_EQ(before.size(), 8u);
  std::set<std::string> names;
  for (const AlertStatus& status : before) {
    std::set<std::string> keys;
    for (const auto& [key, value] : status.labels) keys.insert(key);
    EXPECT_EQ(keys, (std::set<std::string>{"alertname", "cluster", "model", "replica", "severity", "window"}));
    EXPECT_EQ(status.labels.at("replica"), "vllm-0");
    EXPECT_EQ(status.labels.at("model"), "llama-3-70b");
    EXPECT_EQ(status.labels.at("severity"), "warning");
    names.insert(status.labels.at("alertname"));
  }
  EXPECT_EQ(names,
            (std::set<std::string>{"KVWatchKneeShift", "KVWatchWorkingSetOverCapacity", "KVWatchEvictionRateShift",
                                   "KVWatchRejectionRateShift", "KVWatchPreemptionRateShift",
                                   "KVWatchEvictionRateDrift", "KVWatchCapacityMissesRising", "KVWatchKvLoadHigh"}));
  // The numbers change at every evaluation; the identity does not.
  for (int i = 0; i < 50; ++i) {
    AlertInputs inputs = Shifted(60 * i, 1000 + 37 * i);
    inputs.counters.evicted_blocks = 1000.0 * i * i;
    inputs.counters.requests = 100.0 * i;
    ASSERT_TRUE(alerter.Evaluate(inputs).ok());
  }
  const std::vector<AlertStatus> after = alerter.Statuses();
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i].labels, before[i].labels);
}

TEST(AlerterTest, EmptyReplicaAndModelAreOmitted) {
  Alerter alerter = Alerter::Create(AlerterOptions()).value();
  for (const AlertStatus& status : alerter.Statuses()) {
    EXPECT_EQ(status.labels.count("replica"), 0u);
    EXPECT_EQ(status.labels.count("model"), 0u);
    EXPECT_EQ(status.labels.size(), 3u);
  }
}

TEST(AlerterTest, RejectsTimeGoingBackwardsAndBadNumbers) {
  Alerter alerter = Alerter::Create(Named()).value();
  ASSERT_TRUE(alerter.Evaluate(Shifted(600)).ok());
  const std::vector<AlertStatus> before = alerter.Statuses();

  base::Result<Evaluation> earlier = alerter.Evaluate(Shifted(599));
  ASSERT_FALSE(earlier.ok());
  EXPECT_NE(earlier.error().find("inputs.time"), std::string::npos);

  AlertInputs negative = Shifted(660);
  negative.capacity_pages = -5;
  base::Result<Evaluation> bad = alerter.Evaluate(negative);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("inputs.capacity_pages"), std::string::npos) << bad.error();

  AlertInputs nan = Shifted(660);
  nan.counters.evicted_blocks = std::nan("");
  ASSERT_FALSE(alerter.Evaluate(nan).ok());
  EXPECT_NE(alerter.Evaluate(nan).error().find("inputs.counters.evicted_blocks"), std::string::npos);

  const std::vector<AlertStatus> after = alerter.Statuses();
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].state, before[i].state);
    EXPECT_EQ(after[i].evaluated_at, At(600));
  }
  EXPECT_TRUE(alerter.Evaluate(Shifted(600)).ok());  // the same time again is fine
}

TEST(AlerterTest, EventsCarryIdentityAndNumbers) {
  Alerter alerter = Alerter::Create(Named()).value();
  base::Result<Evaluation> first = alerter.Evaluate(Shifted(0));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first.value().events.size(), 1u);
  const AlertEvent& pending = first.value().events[0];
  EXPECT_EQ(pending.kind, EventKind::kPending);
  EXPECT_EQ(pending.time, At(0));
  EXPECT_EQ(pending.labels.at("alertname"), "KVWatchKneeShift");
  EXPECT_EQ(pending.labels.at("window"), "1h/24h");
  EXPECT_EQ(pending.annotations.at("old_knee_pages"), "1000");
  EXPECT_EQ(pending.annotations.at("new_knee_bytes"), "2936012800");
  EXPECT_DOUBLE_EQ(pending.value, 0.4);
  EXPECT_EQ(first.value().alerts.size(), 8u);

  for (int t = 60; t < 900; t += 60) {
    base::Result<Evaluation> step = alerter.Evaluate(Shifted(t));
    ASSERT_TRUE(step.ok());
    EXPECT_TRUE(step.value().events.empty()) << t;
  }
  base::Result<Evaluation> fired = alerter.Evaluate(Shifted(900));
  ASSERT_TRUE(fired.ok());
  ASSERT_EQ(fired.value().events.size(), 1u);
  EXPECT_EQ(fired.value().events[0].kind, EventKind::kFiring);
  EXPECT_EQ(fired.value().events[0].labels, pending.labels);
}

TEST(AlerterTest, ResendScheduleEndToEnd) {
  Alerter alerter = Alerter::Create(Named()).value();
  int t = 0;
  for (; t < 900; t += 30) {
    ASSERT_TRUE(alerter.Evaluate(Shifted(t)).ok());
    EXPECT_TRUE(alerter.TakeDue(At(t)).empty()) << "pending alerts are not sent (" << t << ")";
  }
  // Firing from t = 900: sent at once, then every 60 s with endsAt = now + 4m.
  std::vector<int> sent_at;
  for (; t < 1800; t += 30) {
    ASSERT_TRUE(alerter.Evaluate(Shifted(t)).ok());
    for (const PostableAlert& item : alerter.TakeDue(At(t))) {
      EXPECT_EQ(item.labels.at("alertname"), "KVWatchKneeShift");
      EXPECT_EQ(item.starts_at, At(900));
      EXPECT_EQ(item.ends_at, At(t) + minutes(4));
      sent_at.push_back(t);
    }
  }
  ASSERT_EQ(sent_at.size(), 15u);
  EXPECT_EQ(sent_at.front(), 900);
  EXPECT_EQ(sent_at[1], 960);
  // Resolved at t = 1800: sent at once with endsAt = 1800, repeated every 60 s
  // for the 15-minute retention, then never again.
  std::vector<int> resolved_sent;
  for (; t < 1800 + 3600; t += 30) {
    ASSERT_TRUE(alerter.Evaluate(Shifted(t, 1000)).ok());
    for (const PostableAlert& item : alerter.TakeDue(At(t))) {
      EXPECT_EQ(item.ends_at, At(1800));
      EXPECT_EQ(item.starts_at, At(900));
      resolved_sent.push_back(t);
    }
  }
  ASSERT_FALSE(resolved_sent.empty());
  EXPECT_EQ(resolved_sent.front(), 1800);
  EXPECT_EQ(resolved_sent.back(), 1800 + 15 * 60);
  EXPECT_EQ(resolved_sent.size(), 16u);
  const AlertStatus status = alerter.Statuses().at(0);
  EXPECT_EQ(status.state, AlertState::kResolved);
  EXPECT_EQ(status.resolved_at, At(1800));
  EXPECT_TRUE(status.resolution_sent);
}

TEST(AlerterTest, ANewFiringAfterResolutionIsSentAgain) {
  Alerter alerter = Alerter::Create(Named()).value();
  int t = 0;
  for (; t <= 900; t += 60) ASSERT_TRUE(alerter.Evaluate(Shifted(t)).ok());
  ASSERT_EQ(alerter.TakeDue(At(900)).size(), 1u);
  ASSERT_TRUE(alerter.Evaluate(Shifted(t, 1000)).ok());  // resolved at 960
  ASSERT_EQ(alerter.TakeDue(At(t)).size(), 1u);
  t += 60;
  const int again = t;
  for (; t <= again + 900; t += 60) ASSERT_TRUE(alerter.Evaluate(Shifted(t)).ok());
  std::vector<PostableAlert> due = alerter.TakeDue(At(again + 900));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].starts_at, At(again + 900));  // a new instance, a new startsAt
  EXPECT_GT(due[0].ends_at, At(again + 900));
  const std::string body = EncodeAlertmanagerPayload(due);
  EXPECT_NE(body.find("\"alertname\":\"KVWatchKneeShift\""), std::string::npos) << body;
  EXPECT_NE(body.find("\"replica\":\"vllm-0\""), std::string::npos) << body;
}

TEST(AlerterTest, DisabledDetectorsAreAbsent) {
  AlerterOptions options;
  options.knee_shift.enabled = false;
  options.change_tests.clear();
  Alerter alerter = Alerter::Create(options).value();
  EXPECT_EQ(alerter.Statuses().size(), 6u);  // over capacity, 3 rate shifts, capacity-miss share, KV load
  for (const AlertStatus& status : alerter.Statuses()) {
    EXPECT_NE(status.labels.at("alertname"), "KVWatchKneeShift");
  }
  options.capacity_miss_share.enabled = false;
  Alerter without = Alerter::Create(options).value();
  EXPECT_EQ(without.Statuses().size(), 5u);
  for (const AlertStatus& status : without.Statuses()) {
    EXPECT_NE(status.labels.at("alertname"), "KVWatchCapacityMissesRising");
  }
  options.kv_load.enabled = false;
  EXPECT_EQ(Alerter::Create(options).value().Statuses().size(), 4u);
}

}  // namespace
}  // namespace kvwatch::alerts
