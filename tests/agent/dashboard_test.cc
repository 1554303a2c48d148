// Tests of the Grafana dashboard (packaging/grafana/kvwatch.json), its
// provisioning files, and every PromQL expression the project ships: the
// dashboard's panel targets and variable queries, and the rules of
// packaging/prometheus/*.yml (or, without them, of the PrometheusRule in
// packaging/kubernetes/prometheusrule.yaml, which otherwise holds the same groups).
//
// Structure: the dashboard passes CheckDashboard (unique panel ids, datasource
// only through ${datasource}, every $variable defined, units and descriptions,
// job and instance matchers, ranges from $__rate_interval/$__range, counters in
// rate/increase); the checker itself is shown to catch each kind of mistake.
//
// Live: a real `kvwatch agent` (synthetic replica at 200 requests/s, capacities
// 1000 and 2000 pages with sglang and s3fifo canaries, isolated tenant curves
// (tenants.isolated, for the interference panel), a model for bytes, and a
// trace file with a bad line so that collector errors exist) is scraped every second by a real Prometheus
// that also evaluates the rules (every group every second) and one
// always-firing test alert (so that ALERTS has a series). Once a few scrapes
// are in, every query runs as an instant query with $__range, $__rate_interval
// and $__interval = 1m and the variables set to the agent's job, instance and
// window 5m (capacity 1000). Each must succeed and return data, except
// expressions over the engine collectors' series (kvwatch_engine_* but
// kvwatch_engine_memory_bytes, and kvwatch_running_kv_bytes), which have no
// data without a serving engine: those must only succeed, and are listed as
// "no data here". (kvwatch_alert_state comes from the agent's
// alerting, on by default.) Every variable query must offer the value
// substituted for it. Every rule must pass `promtool check rules` and evaluate
// with health ok; recording rules over the agent's own series return data.
// Skips the live part when prometheus or promtool is not installed.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/agent/deploy_checks.h"
#include "tests/agent/testing_agent.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers
using namespace deploy_checks;    // NOLINT(build/namespaces): test helpers

const std::string kSource = KVWATCH_SOURCE_DIR;
const std::string kDashboard = kSource + "/packaging/grafana/kvwatch.json";
const std::string kPrometheusRule = kSource + "/packaging/kubernetes/prometheusrule.yaml";

// Series that exist only with a serving engine: the engine collectors' (all
// kvwatch_engine_* but the curve engine's own kvwatch_engine_memory_bytes), and
// kvwatch_running_kv_bytes (KV of running requests, from an engine's /metrics).
bool NeedsEngine(const std::string& expr) {
  static const std::regex kEngine(R"(\bkvwatch_(engine_(?!memory_bytes\b)[A-Za-z0-9_]+|running_kv_bytes\b))");
  return std::regex_search(expr, kEngine);
}

DashboardCheck CheckText(const std::string& json, simdjson::dom::parser* parser) {
  simdjson::dom::element doc;
  if (parser->parse(json).get(doc)) {
    DashboardCheck c;
    c.problems.push_back("not JSON");
    return c;
  }
  return CheckDashboard(doc);
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += "  " + s + "\n";
  return out;
}

// ------------------------------------------------------------------ structure

TEST(DashboardStructureTest, ShippedDashboardPassesEveryCheck) {
  simdjson::dom::parser parser;
  const DashboardCheck check = CheckText(ReadFile(kDashboard), &parser);
  EXPECT_TRUE(check.problems.empty()) << kDashboard << ":\n" << Join(check.problems);
  for (const char* v : {"datasource", "job", "instance", "window", "capacity"}) {
    EXPECT_EQ(check.variables.count(v), 1u) << v;
  }
  // The panels the issue asks for, by the series they query.
  std::string all;
  for (const DashboardQuery& q : check.queries) all += q.expr + "\n";
  for (const char* needed :
       {"kvwatch_page_hit_capacity_pages_bucket", "kvwatch_page_references_total", "kvwatch_working_set_pages",
        "kvwatch_working_set_bytes", "kvwatch_knee_pages", "kvwatch_engine_evicted_blocks_total",
        "kvwatch_engine_preemptions_total", "kvwatch_engine_rejected_requests_total",
        "kvwatch_engine_prefix_cache_hit_ratio", "kvwatch_page_hit_ratio", "ALERTS", "kvwatch_alert_state",
        "kvwatch_collector_up", "kvwatch_collector_errors_total", "kvwatch_policy_page_hit_ratio",
        "kvwatch_policy_request_coverage_ratio", "kvwatch_policy_gain_ratio",
        // Issue 11: the tenants row and the admission row.
        "kvwatch_group_page_hit_ratio{job=~\"$job\",instance=~\"$instance\",dimension=\"tenant\"",
        "kvwatch_group_page_hit_ratio{job=~\"$job\",instance=~\"$instance\",dimension=\"class\"",
        "kvwatch_group_isolated_page_hit_ratio", "kvwatch_group_isolated_page_hits_total",
        "kvwatch_group_page_hits_total", "kvwatch_evicted_by_total", "kvwatch_group_capacity_misses_total",
        "kvwatch_request_footprint_bytes_bucket", "kvwatch_running_kv_bytes", "kvwatch_capacity_misses_total",
        "kvwatch:capacity_miss_share:1h", "kvwatch:capacity_miss_share:24h",
        "kvwatch:capacity_miss_share:ratio_1h_24h"}) {
    EXPECT_NE(all.find(needed), std::string::npos) << "no panel queries " << needed;
  }
  EXPECT_GE(check.queries.size(), 30u);
}

TEST(DashboardStructureTest, CurveQueryDividesHitsByReferencesPerBucket) {
  simdjson::dom::parser parser;
  const DashboardCheck check = CheckText(ReadFile(kDashboard), &parser);
  // The curve: hits at capacity le over the range, over every reference of the
  // same range, summed over the selected replicas (the fleet where every replica
  // has that capacity).
  const std::string curve =
      "sum by (le) (increase(kvwatch_page_hit_capacity_pages_bucket{job=~\"$job\",instance=~\"$instance\","
      "le!=\"+Inf\"}[$__range])) / ignoring(le) group_left sum(increase(kvwatch_page_references_total{job=~\"$job\","
      "instance=~\"$instance\"}[$__range]))";
  bool found = false;
  for (const DashboardQuery& q : check.queries) found = found || q.expr == curve;
  EXPECT_TRUE(found) << "no panel has the curve query " << curve;
}

TEST(DashboardStructureTest, CheckerCatchesEachKindOfMistake) {
  const std::string good_panel =
      R"json({"id": 1, "type": "timeseries", "title": "T", "description": "D",
          "datasource": {"type": "prometheus", "uid": "${datasource}"},
          "fieldConfig": {"defaults": {"unit": "short"}},
          "targets": [{"refId": "A", "datasource": {"type": "prometheus", "uid": "${datasource}"},
                       "expr": "rate(kvwatch_requests_total{job=~\"$job\",instance=~\"$instance\"}[$__rate_interval])"}]})json";
  auto dashboard = [](const std::string& panels, const std::string& extra_var = "") {
    return R"json({"uid": "u", "title": "t", "editable": false, "schemaVersion": 38, "templating": {"list": [
        {"name": "datasource", "type": "datasource", "query": "prometheus"},
        {"name": "job", "type": "query", "refresh": 2, "definition": "label_values(kvwatch_build_info, job)",
         "datasource": {"type": "prometheus", "uid": "${datasource}"}},
        {"name": "instance", "type": "query", "refresh": 2, "definition": "label_values(kvwatch_build_info, instance)",
         "datasource": {"type": "prometheus", "uid": "${datasource}"}},
        {"name": "window", "type": "query", "refresh": 2, "definition": "label_values(kvwatch_knee_pages, window)",
         "datasource": {"type": "prometheus", "uid": "${datasource}"}})json" +
           extra_var + R"json(]}, "panels": [)json" + panels + "]}";
  };
  simdjson::dom::parser parser;
  ASSERT_TRUE(CheckText(dashboard(good_panel), &parser).problems.empty())
      << Join(CheckText(dashboard(good_panel), &parser).problems);

  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string p = good_panel;
    const auto at = p.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? p : p.replace(at, from.size(), to);
  };
  struct Case {
    std::string name;
    std::string json;
    std::string expected;  // a word of the problem
  };
  const std::vector<Case> cases = {
      {"hard-coded uid", dashboard(replaced("\"uid\": \"${datasource}\"}", "\"uid\": \"P1809F7CD0C75ACF3\"}")),
       "hard-coded"},
      {"undefined variable", dashboard(replaced("$__rate_interval", "$interval")), "not a template variable"},
      {"hard-coded range", dashboard(replaced("$__rate_interval", "5m")), "hard-coded"},
      {"missing unit", dashboard(replaced("\"unit\": \"short\"", "\"decimals\": 1")), "no unit"},
      {"missing description", dashboard(replaced("\"description\": \"D\",", "")), "no description"},
      {"duplicate id", dashboard(good_panel + "," + good_panel), "used twice"},
      {"no instance matcher", dashboard(replaced(",instance=~\\\"$instance\\\"", "")), "matchers"},
      {"bare counter",
       dashboard(
           replaced("rate(kvwatch_requests_total{job=~\\\"$job\\\",instance=~\\\"$instance\\\"}[$__rate_interval])",
                    "kvwatch_requests_total{job=~\\\"$job\\\",instance=~\\\"$instance\\\"}")),
       "outside rate"},
      {"editable",
       [&] {
         std::string d = dashboard(good_panel);
         return d.replace(d.find("\"editable\": false"), 17, "\"editable\": true");
       }(),
       "editable"},
      {"datasource variable of the wrong type",
       [&] {
         std::string d = dashboard(good_panel);
         return d.replace(d.find("\"query\": \"prometheus\""), 21, "\"query\": \"loki\"");
       }(),
       "datasource"},
  };
  for (const Case& c : cases) {
    const DashboardCheck check = CheckText(c.json, &parser);
    bool found = false;
    for (const std::string& p : check.problems) found = found || p.find(c.expected) != std::string::npos;
    EXPECT_TRUE(found) << c.name << ": expected a problem with \"" << c.expected << "\", got:\n"
                       << Join(check.problems);
  }
}

TEST(DashboardStructureTest, VariableSubstitutionAndLabelValues) {
  const std::map<std::string, std::string> values = {{"job", "kvwatch"}, {"instance", "h:1"}, {"__range", "1m"}};
  EXPECT_EQ(
      SubstituteVariables("a{job=~\"$job\",instance=~\"${instance}\"}[$__range] [[job]] ${job:regex} $jobs", values),
      "a{job=~\"kvwatch\",instance=~\"h:1\"}[1m] kvwatch kvwatch $jobs");
  EXPECT_EQ(VariableReferences("x $a ${b} ${c:csv} [[d]] $__range"),
            (std::vector<std::string>{"a", "b", "c", "d", "__range"}));
  auto lv = ParseLabelValues("label_values(kvwatch_knee_pages{job=~\"$job\"}, window)");
  ASSERT_TRUE(lv.has_value());
  EXPECT_EQ(lv->first, "kvwatch_knee_pages{job=~\"$job\"}");
  EXPECT_EQ(lv->second, "window");
  lv = ParseLabelValues("label_values(job)");
  ASSERT_TRUE(lv.has_value());
  EXPECT_EQ(lv->first, "");
  EXPECT_FALSE(ParseLabelValues("query_result(up)").has_value());
}

TEST(DashboardStructureTest, ProvisioningPointsAtThePackagedDashboard) {
  YAML::Node dashboards, datasources;
  try {
    dashboards = YAML::LoadFile(kSource + "/packaging/grafana/provisioning/dashboards/kvwatch.yml");
    datasources = YAML::LoadFile(kSource + "/packaging/grafana/provisioning/datasources/prometheus.yml");
  } catch (const YAML::Exception& e) {
    FAIL() << "provisioning YAML: " << e.what();
  }
  EXPECT_EQ(dashboards["apiVersion"].as<int>(0), 1);
  ASSERT_TRUE(dashboards["providers"].IsSequence());
  const YAML::Node provider = dashboards["providers"][0];
  EXPECT_EQ(provider["type"].as<std::string>(""), "file");
  // packaging/cpack.cmake installs the dashboard there.
  EXPECT_EQ(provider["options"]["path"].as<std::string>(""), "/usr/share/kvwatch/grafana/dashboards");
  EXPECT_FALSE(provider["allowUiUpdates"].as<bool>(true));
  EXPECT_EQ(datasources["apiVersion"].as<int>(0), 1);
  ASSERT_TRUE(datasources["datasources"].IsSequence());
  EXPECT_EQ(datasources["datasources"][0]["type"].as<std::string>(""), "prometheus");
  // The dashboard must not depend on this data source's uid.
  const std::string uid = datasources["datasources"][0]["uid"].as<std::string>("");
  ASSERT_FALSE(uid.empty());
  EXPECT_EQ(ReadFile(kDashboard).find(uid), std::string::npos) << "the dashboard names data source uid " << uid;
}

// ------------------------------------------------------------------ live

// The rules of every shipped rule file (packaging/prometheus/*.yml, else the
// PrometheusRule's groups), each copied into dir with every group evaluated
// every second (groups may say `interval: 1m`, which would delay the first
// evaluation by up to a minute). Sets *originals to the files as shipped.
std::vector<std::string> ShippedRuleFiles(const std::string& dir, std::vector<std::string>* originals,
                                          std::string* error) {
  std::vector<std::pair<std::string, YAML::Node>> sources;  // name, groups
  try {
    const std::filesystem::path rules_dir = kSource + "/packaging/prometheus";
    if (std::filesystem::is_directory(rules_dir)) {
      for (const auto& entry : std::filesystem::directory_iterator(rules_dir)) {
        const std::string ext = entry.path().extension().string();
        if (ext != ".yml" && ext != ".yaml") continue;
        // Rule files have groups; promtool test files (rule_files, tests) do not.
        const YAML::Node doc = YAML::LoadFile(entry.path().string());
        if (doc["groups"]) sources.emplace_back(entry.path().string(), doc["groups"]);
      }
    }
    // The PrometheusRule carries the same groups when there are rule files
    // (packaging_test checks it), and is loaded only when there are none.
    if (sources.empty()) sources.emplace_back(kPrometheusRule, YAML::LoadFile(kPrometheusRule)["spec"]["groups"]);
  } catch (const YAML::Exception& e) {
    *error = std::string("rule files: ") + e.what();
    return {};
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    YAML::Node doc;
    doc["groups"] = YAML::Clone(sources[i].second);
    for (YAML::Node group : doc["groups"]) group["interval"] = "1s";
    const std::string path = dir + "/rules-" + std::to_string(i) + ".yml";
    if (!WriteFile(path, YAML::Dump(doc) + "\n")) {
      *error = "cannot write " + path;
      return {};
    }
    out.push_back(path);
    if (sources[i].first != kPrometheusRule) originals->push_back(sources[i].first);
  }
  return out;
}

class DashboardLiveTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (FindProgram("prometheus").empty() || FindProgram("promtool").empty()) {
      skip_ = "prometheus or promtool is not installed";
      return;
    }
    dir_ = std::make_unique<TempDir>("kvwatch_dashboard_test");
    if (!dir_->ok()) {
      error_ = "cannot create a temp dir";
      return;
    }
    const std::string bad = dir_->Sub("bad.jsonl");
    WriteFile(bad, "this is not json\n");
    const std::string config =
        "replica: dashboard-test\nmodel: llama-3-70b\n"
        "curve:\n  capacities: [1000, 2000]\n  policies: [sglang, s3fifo]\n"
        "tenants:\n  isolated: true\n"
        "web:\n  port: 0\n"
        "collectors:\n  synth: {rate: 200}\n  trace_files:\n" +
        TraceFileCollectorYaml("bad-input", bad);
    agent_ = AgentProcess::Start(dir_->path(), "agent", config, &error_);
    if (!agent_) return;

    rule_files_ = ShippedRuleFiles(dir_->path(), &original_rule_files_, &error_);
    if (rule_files_.empty()) return;
    // An always-firing alert that keeps job and instance, so ALERTS has a series.
    const std::string test_rules = dir_->Sub("test-alert.yml");
    WriteFile(test_rules,
              "groups:\n  - name: dashboard-test\n    rules:\n      - alert: KVWatchTestAlwaysFiring\n"
              "        expr: kvwatch_build_info\n");
    std::vector<std::string> files = rule_files_;
    files.push_back(test_rules);
    instance_ = "127.0.0.1:" + std::to_string(agent_->port());
    prometheus_ = PrometheusWithRules::Start(dir_->path(), "kvwatch", {instance_}, files, kStartTimeout, &error_);
    if (!prometheus_) return;
    // A few scrapes in, every rule evaluated, and the test alert firing.
    const bool ready = PollUntil(
        [&] {
          const QueryAnswer scrapes = prometheus_->Query("count_over_time(kvwatch_requests_total[1m]) >= 4");
          const QueryAnswer alert =
              prometheus_->Query("ALERTS{alertname=\"KVWatchTestAlwaysFiring\",alertstate=\"firing\"}");
          auto rules = prometheus_->Rules();
          bool evaluated = rules.ok() && !rules.value().empty();
          if (evaluated) {
            for (const RuleState& r : rules.value()) evaluated = evaluated && r.health != "unknown";
          }
          return scrapes.series > 0 && alert.series > 0 && evaluated;
        },
        Millis(60000), Millis(250));
    if (!ready)
      error_ = "Prometheus did not get 4 scrapes, the test alert and every rule evaluated in 60 s; log:\n" +
               Tail(prometheus_->Log());
  }
  static void TearDownTestSuite() {
    if (prometheus_) prometheus_->Stop(kStopTimeout);
    if (agent_) agent_->Stop();
    prometheus_.reset();
    agent_.reset();
    dir_.reset();
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(error_.empty()) << error_;
  }

  std::map<std::string, std::string> Values() const {
    return {{"__range", "1m"},       {"__rate_interval", "1m"}, {"__interval", "1m"},         {"job", "kvwatch"},
            {"instance", instance_}, {"window", "5m"},          {"datasource", "Prometheus"}, {"capacity", "1000"}};
  }

  static inline std::string skip_;
  static inline std::string error_;
  static inline std::string instance_;
  static inline std::vector<std::string> rule_files_;           // as loaded (evaluated every second)
  static inline std::vector<std::string> original_rule_files_;  // packaging/prometheus/*.yml as shipped
  static inline std::unique_ptr<TempDir> dir_;
  static inline std::unique_ptr<AgentProcess> agent_;
  static inline std::unique_ptr<PrometheusWithRules> prometheus_;
};

TEST_F(DashboardLiveTest, EveryDashboardQueryRunsAndReturnsData) {
  simdjson::dom::parser parser;
  const DashboardCheck check = CheckText(ReadFile(kDashboard), &parser);
  ASSERT_FALSE(check.queries.empty());
  const auto values = Values();
  std::vector<std::string> no_data_here;
  std::size_t with_data = 0;
  for (const DashboardQuery& q : check.queries) {
    const std::string expr = SubstituteVariables(q.expr, values);
    EXPECT_TRUE(VariableReferences(expr).empty()) << q.where << ": unsubstituted variable in " << expr;
    if (q.variable) {
      const auto lv = ParseLabelValues(expr);
      ASSERT_TRUE(lv.has_value()) << q.where << ": not label_values(): " << expr;
      auto got = prometheus_->LabelValues(lv->second, lv->first);
      ASSERT_TRUE(got.ok()) << q.where << ": " << got.error();
      const auto it = values.find(q.where.substr(std::string("variable ").size()));
      ASSERT_NE(it, values.end()) << q.where;
      const auto& list = got.value();
      EXPECT_NE(std::find(list.begin(), list.end(), it->second), list.end())
          << q.where << ": " << expr << " does not offer \"" << it->second << "\"";
      ++with_data;
      continue;
    }
    const QueryAnswer a = prometheus_->Query(expr);
    EXPECT_TRUE(a.success) << q.where << ": " << expr << "\n  " << a.error;
    if (!a.success) continue;
    if (NeedsEngine(q.expr)) {
      if (a.series == 0) no_data_here.push_back(q.where + ": " + q.expr);
      continue;
    }
    EXPECT_GT(a.finite, 0u) << q.where << ": no data (" << a.series << " series, " << a.finite << " finite) for "
                            << expr;
    with_data += a.finite > 0;
  }
  std::cout << "[ dashboard ] " << check.queries.size() << " queries: " << with_data << " returned data, "
            << no_data_here.size() << " valid with no data here (no serving engine):\n"
            << Join(no_data_here);
  // The model's hit ratio at the replica's capacity picks one of the two
  // configured capacities (the largest, kvwatch_cache_capacity_pages).
  std::size_t joins = 0;
  for (const DashboardQuery& q : check.queries) {
    if (q.expr.find("count_values") == std::string::npos) continue;
    ++joins;
    EXPECT_EQ(prometheus_->Query(SubstituteVariables(q.expr, values)).series, 1u) << q.where << ": " << q.expr;
  }
  EXPECT_GE(joins, 1u);
  // The engine panels exist, and only they may lack data.
  EXPECT_GE(no_data_here.size(), 4u);
}

TEST_F(DashboardLiveTest, EveryRuleIsValidAndEvaluatesCleanly) {
  ASSERT_FALSE(rule_files_.empty());
  const std::string promtool = FindProgram("promtool");
  std::vector<std::string> checked = rule_files_;
  checked.insert(checked.end(), original_rule_files_.begin(), original_rule_files_.end());
  for (const std::string& file : checked) {
    const CommandResult check = RunCommand({promtool, "check", "rules", file}, Millis(60000));
    EXPECT_TRUE(check.Exited(0)) << "promtool check rules " << file << ":\n" << check.Describe();
  }
  auto rules = prometheus_->Rules();
  ASSERT_TRUE(rules.ok()) << rules.error();
  std::size_t shipped = 0;
  for (const RuleState& r : rules.value()) {
    EXPECT_EQ(r.health, "ok") << r.group << "/" << r.name << ": " << r.last_error;
    shipped += r.group != "dashboard-test";
  }
  EXPECT_GT(shipped, 0u);
  // Each expression as a query: valid; recording rules over the agent's own series return data.
  const auto values = Values();
  std::vector<std::string> listed;
  for (const std::string& file : rule_files_) {
    const YAML::Node doc = YAML::LoadFile(file);
    for (const YAML::Node& group : doc["groups"]) {
      for (const YAML::Node& rule : group["rules"]) {
        const std::string expr = rule["expr"].as<std::string>("");
        const bool recording = static_cast<bool>(rule["record"]);
        const std::string name = recording ? rule["record"].as<std::string>() : rule["alert"].as<std::string>();
        const QueryAnswer a = prometheus_->Query(SubstituteVariables(expr, values));
        EXPECT_TRUE(a.success) << file << ": " << name << ": " << a.error;
        if (recording && !NeedsEngine(expr)) {
          EXPECT_GT(a.finite, 0u) << file << ": recording rule " << name << " has no data";
        }
        listed.push_back(name + (recording ? " (record)" : " (alert)") + ": " + std::to_string(a.series) + " series" +
                         (NeedsEngine(expr) ? ", no data here (engine series)" : ""));
      }
    }
  }
  std::cout << "[ rules ] " << listed.size() << " rules:\n" << Join(listed);
}

}  // namespace
}  // namespace kvwatch::agent
