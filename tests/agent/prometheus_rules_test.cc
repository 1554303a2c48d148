// The shipped Prometheus alerting rules (packaging/prometheus/kvwatch-rules.yml):
//   - `promtool check rules` accepts them;
//   - `promtool test rules` passes their unit tests (kvwatch-rules.test.yml: each
//     alert fires after `for`, holds between its thresholds, resolves, and stays
//     quiet below its minimum volume);
//   - they mirror the agent's own alerts with the default AlerterOptions: one rule
//     per alert PromQL can express (all but the CUSUM drift tests), with the same
//     `for`, severity and window labels, and the same thresholds in the expression.
// The promtool parts skip when promtool is not installed (Debian: prometheus).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <regex>
#include <string>

#include "alerts/alerter.h"
#include "alerts/format.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers

const std::string kRules = std::string(KVWATCH_SOURCE_DIR) + "/packaging/prometheus/kvwatch-rules.yml";
const std::string kRulesTest = std::string(KVWATCH_SOURCE_DIR) + "/packaging/prometheus/kvwatch-rules.test.yml";

TEST(PrometheusRulesTest, PromtoolChecksAndUnitTestsPass) {
  const std::string promtool = FindProgram("promtool");
  if (promtool.empty()) GTEST_SKIP() << "promtool is not installed (Debian: prometheus)";
  const CommandResult check = RunCommand({promtool, "check", "rules", kRules}, Millis(60000));
  EXPECT_TRUE(check.Exited(0)) << "promtool check rules:\n" << check.Describe();
  EXPECT_NE(check.out.find("SUCCESS"), std::string::npos) << check.Describe();
  // promtool evaluates every rule over hours of simulated series: 11 s of CPU,
  // and on a loaded 2-core machine (stress-ng --cpu 2, other builds and tests,
  // load average 20-24) this test took 98-137 s, where 120 s was the limit. The
  // limit bounds a hung promtool only, well inside the test's CTest TIMEOUT.
  const CommandResult test = RunCommand({promtool, "test", "rules", kRulesTest}, Millis(600000));
  EXPECT_TRUE(test.Exited(0)) << "promtool test rules:\n" << test.Describe();
  EXPECT_NE(test.out.find("SUCCESS"), std::string::npos) << test.Describe();
}

// The rule's expression, `for`, labels, by alert name.
std::map<std::string, YAML::Node> AlertRules() {
  std::map<std::string, YAML::Node> out;
  const YAML::Node doc = YAML::LoadFile(kRules);
  for (const YAML::Node& group : doc["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      if (rule["alert"]) out[rule["alert"].as<std::string>()] = rule;
    }
  }
  return out;
}

// Recording rules' expressions by name, to read thresholds through them.
std::map<std::string, std::string> RecordingRules() {
  std::map<std::string, std::string> out;
  const YAML::Node doc = YAML::LoadFile(kRules);
  for (const YAML::Node& group : doc["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      if (rule["record"]) out[rule["record"].as<std::string>()] = rule["expr"].as<std::string>();
    }
  }
  return out;
}

bool Contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST(PrometheusRulesTest, RulesMirrorTheAgentsDefaultAlerts) {
  // Every detector the agent can run, the capacity-miss share included (off by
  // default until the agent feeds it; its rule must mirror it all the same).
  alerts::AlerterOptions defaults;
  defaults.capacity_miss_share.enabled = true;
  auto alerter = alerts::Alerter::Create(defaults);
  ASSERT_TRUE(alerter.ok()) << alerter.error();
  const auto rules = AlertRules();
  const auto records = RecordingRules();
  int mirrored = 0;
  for (const alerts::AlertStatus& status : alerter.value().Statuses()) {
    const std::string name = status.labels.at("alertname");
    if (std::regex_search(name, std::regex("Drift$"))) {
      EXPECT_EQ(rules.count(name), 0u) << name << ": CUSUM has no PromQL form";
      continue;
    }
    SCOPED_TRACE(name);
    ASSERT_EQ(rules.count(name), 1u) << "no Prometheus rule for the agent's alert " << name;
    const YAML::Node rule = rules.at(name);
    EXPECT_EQ(rule["labels"]["severity"].as<std::string>(""), status.labels.at("severity"));
    EXPECT_EQ(rule["labels"]["window"].as<std::string>(""), status.labels.at("window"));
    ++mirrored;
  }
  EXPECT_EQ(mirrored, 7);

  // `for` and the thresholds, detector by detector.
  auto expect = [&](const std::string& alert, const alerts::RuleOptions& rule, double fire, double clear) {
    SCOPED_TRACE(alert);
    ASSERT_EQ(rules.count(alert), 1u);
    const std::string expr = rules.at(alert)["expr"].as<std::string>();
    EXPECT_EQ(rules.at(alert)["for"].as<std::string>(""), alerts::FormatDuration(rule.for_duration));
    EXPECT_TRUE(Contains(expr, ">= " + alerts::FormatNumber(fire))) << expr;
    EXPECT_TRUE(Contains(expr, ">= " + alerts::FormatNumber(clear))) << expr;
    EXPECT_TRUE(Contains(expr, "ALERTS{alertname=\"" + alert + "\", alertstate=\"firing\"}")) << expr;
  };
  expect("KVWatchKneeShift", defaults.knee_shift.rule, defaults.knee_shift.fire_threshold,
         defaults.knee_shift.clear_threshold);
  expect("KVWatchWorkingSetOverCapacity", defaults.capacity_shortfall.rule, defaults.capacity_shortfall.fire_threshold,
         defaults.capacity_shortfall.clear_threshold);
  expect("KVWatchEvictionRateShift", defaults.eviction_rate_shift.rule, defaults.eviction_rate_shift.fire_threshold,
         defaults.eviction_rate_shift.clear_threshold);
  expect("KVWatchRejectionRateShift", defaults.rejection_rate_shift.rule, defaults.rejection_rate_shift.fire_threshold,
         defaults.rejection_rate_shift.clear_threshold);
  expect("KVWatchPreemptionRateShift", defaults.preemption_rate_shift.rule,
         defaults.preemption_rate_shift.fire_threshold, defaults.preemption_rate_shift.clear_threshold);
  expect("KVWatchCapacityMissesRising", defaults.capacity_miss_share.rule, defaults.capacity_miss_share.fire_threshold,
         defaults.capacity_miss_share.clear_threshold);
  expect("KVWatchKvLoadHigh", defaults.kv_load.rule, defaults.kv_load.fire_threshold, defaults.kv_load.clear_threshold);

  // The KV load alert reads the agent's own rho over its window, with its volume guard.
  const std::string load = rules.at("KVWatchKvLoadHigh")["expr"].as<std::string>();
  const std::string load_window = alerts::FormatDuration(defaults.kv_load.window);
  EXPECT_TRUE(Contains(load, "kvwatch_kv_load_factor{window=\"" + load_window + "\"}")) << load;
  EXPECT_TRUE(Contains(load, "kvwatch_kv_load_requests{window=\"" + load_window +
                                 "\"} >= " + alerts::FormatCount(defaults.kv_load.min_short_window_requests)))
      << load;

  // Guards: minimum volumes, the knee's minimum move, the rate floors.
  const std::string knee = rules.at("KVWatchKneeShift")["expr"].as<std::string>();
  EXPECT_TRUE(Contains(knee, ">= " + alerts::FormatCount(defaults.knee_shift.min_shift_pages))) << knee;
  EXPECT_TRUE(Contains(knee, "kvwatch_window_requests{window=\"1h\"} >= " +
                                 alerts::FormatCount(defaults.knee_shift.min_short_window_requests)))
      << knee;
  EXPECT_TRUE(Contains(knee, "kvwatch_window_requests{window=\"24h\"} >= " +
                                 alerts::FormatCount(defaults.knee_shift.min_baseline_window_requests)))
      << knee;
  const std::pair<const char*, const alerts::RateShiftOptions*> rates[] = {
      {"kvwatch:engine_evicted_blocks:rate_ratio_1h_24h", &defaults.eviction_rate_shift},
      {"kvwatch:engine_rejected_requests:rate_ratio_1h_24h", &defaults.rejection_rate_shift},
      {"kvwatch:engine_preemptions:rate_ratio_1h_24h", &defaults.preemption_rate_shift},
  };
  for (const auto& [record, options] : rates) {
    ASSERT_EQ(records.count(record), 1u) << record;
    EXPECT_TRUE(Contains(records.at(record), "), " + alerts::FormatNumber(options->rate_floor_per_second) + ")"))
        << record << ": " << records.at(record);
  }
  // The capacity-miss share's floor and the names the agent exports (issue 11).
  ASSERT_EQ(records.count("kvwatch:capacity_miss_share:ratio_1h_24h"), 1u);
  EXPECT_TRUE(Contains(records.at("kvwatch:capacity_miss_share:ratio_1h_24h"),
                       "clamp_min(kvwatch:capacity_miss_share:24h, " +
                           alerts::FormatNumber(defaults.capacity_miss_share.share_floor) + ")"));
  for (const char* window : {"1h", "24h"}) {
    const std::string record = std::string("kvwatch:capacity_miss_share:") + window;
    ASSERT_EQ(records.count(record), 1u) << record;
    EXPECT_TRUE(Contains(records.at(record), "rate(kvwatch_capacity_misses_total[" + std::string(window) + "])"));
    EXPECT_TRUE(Contains(records.at(record), "rate(kvwatch_page_references_total[" + std::string(window) + "])"));
  }
  EXPECT_TRUE(Contains(rules.at("KVWatchCapacityMissesRising")["annotations"]["top_evictor_class"].as<std::string>(),
                       "kvwatch_evicted_by_total{dimension=\\\"class\\\""));
  EXPECT_TRUE(Contains(rules.at("KVWatchCapacityMissesRising")["expr"].as<std::string>(),
                       "kvwatch_window_requests{window=\"1h\"} >= " +
                           alerts::FormatCount(defaults.capacity_miss_share.min_short_window_requests)));
  // The exact names the engine collectors export.
  EXPECT_TRUE(Contains(records.at("kvwatch:engine_evicted_blocks:rate_ratio_1h_24h"),
                       "kvwatch_engine_evicted_blocks_total{medium=\"GPU\"}"));
}

}  // namespace
}  // namespace kvwatch::agent
