// The agent's tenants and classes (issue 11), in-process: requests go through
// Agent::OnRequest and the numbers are read from its /metrics text and its alert
// inputs. A hand-worked flood (a single-turn flood pushes a conversation out of a
// 4-page cache) shows up as capacity misses of the conversation's class and
// tenant, attributed to the flooding class and tenant, in /metrics and in the
// capacity-miss alert's inputs; 100,000 distinct tenant names keep the tenant
// labels at K + 1; a sampled agent exports no group series; the counters survive
// a restart through the state file.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/runtime/agent.h"
#include "collectors/exposition_parser.h"
#include "tests/agent/testing_agent.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

AgentOptions Options(const std::string& state_path = "") {
  AgentOptions o;
  o.replica = "test";
  o.engine.max_pages = 4096;
  o.engine.remembered_evictions = 4096;
  o.curve.windows = {{"1h", 3600}};
  o.curve.capacities = {4};
  o.bytes_per_token = 1024;
  o.http.port = 0;
  o.state_path = state_path;
  return o;
}

std::unique_ptr<Agent> MakeAgent(AgentOptions o) {
  auto agent = Agent::Create(std::move(o));
  EXPECT_TRUE(agent.ok()) << agent.error();
  return agent.ok() ? std::move(agent).value() : nullptr;
}

curve::Request Make(std::string tenant, std::vector<curve::PageId> pages, double t) {
  curve::Request r;
  r.timestamp_s = t;
  r.tenant = std::move(tenant);
  r.pages = std::move(pages);
  r.input_tokens = static_cast<std::int64_t>(r.pages.size()) * 16;
  r.output_tokens = 100;
  return r;
}

void Flood(Agent* agent) {
  agent->OnRequest(Make("chat", {1, 2}, 100));                                       // first
  agent->OnRequest(Make("chat", {1, 2, 3}, 101));                                    // turn2
  for (curve::PageId p = 10; p < 15; ++p) agent->OnRequest(Make("bulk", {p}, 102));  // "first" x 5
  agent->OnRequest(Make("chat", {1, 2, 3, 4}, 103));                                 // turn3-4: 1, 2, 3 are 5 deep
}

// "name{label=value,...}" (labels in name order) -> value, for the families asked for.
std::map<std::string, double> Series(Agent* agent, const std::string& prefix) {
  std::map<std::string, double> out;
  const collectors::Exposition e = collectors::ParseExposition(agent->RenderMetrics());
  EXPECT_TRUE(e.errors.empty());
  for (const collectors::Sample& s : e.samples) {
    if (s.name.rfind(prefix, 0) != 0) continue;
    std::string key = s.name + "{";
    for (const auto& [k, v] : s.labels) key += k + "=" + v + ",";
    out[key + "}"] = s.value;
  }
  return out;
}

// "name{b=1,a=2,}" with its labels in name order, as Series() writes them.
std::string Sorted(const std::string& key) {
  const std::size_t open = key.find('{');
  std::vector<std::string> labels;
  std::string label;
  for (std::size_t i = open + 1; i + 1 < key.size(); ++i) {
    if (key[i] == ',') {
      labels.push_back(label);
      label.clear();
    } else {
      label += key[i];
    }
  }
  std::sort(labels.begin(), labels.end());
  std::string out = key.substr(0, open + 1);
  for (const std::string& l : labels) out += l + ",";
  return out + "}";
}

// The value of a series (labels in any order), or a failure that lists what there is.
double At(const std::map<std::string, double>& m, const std::string& key) {
  auto it = m.find(Sorted(key));
  if (it != m.end()) return it->second;
  std::string have;
  for (const auto& [k, v] : m) have += "\n  " + k;
  ADD_FAILURE() << "no series " << key << "; have:" << have;
  return -1;
}

TEST(AgentTenantsTest, AFloodIsAttributedToTheFloodingClassAndTenant) {
  auto agent = MakeAgent(Options());
  ASSERT_NE(agent, nullptr);
  Flood(agent.get());
  const auto m = Series(agent.get(), "kvwatch_");
  // Pages 1, 2, 3 of the third turn are 5, 6, 7 deep (group_accounting_test works it out):
  // 1 + 5/6 + 5/7 of the misses go to the flood, 1/6 + 2/7 to the conversation itself.
  const double flood = 1 + 5.0 / 6 + 5.0 / 7, self = 1.0 / 6 + 2.0 / 7;
  EXPECT_EQ(At(m, "kvwatch_capacity_misses_total{capacity_pages=4,}"), 3);
  EXPECT_DOUBLE_EQ(At(m, "kvwatch_evicted_by_total{dimension=class,victim=turn3-4,evictor=first,capacity_pages=4,}"),
                   flood);
  EXPECT_DOUBLE_EQ(At(m, "kvwatch_evicted_by_total{dimension=class,victim=turn3-4,evictor=turn2,capacity_pages=4,}"),
                   self);
  EXPECT_DOUBLE_EQ(At(m, "kvwatch_evicted_by_total{dimension=tenant,victim=chat,evictor=bulk,capacity_pages=4,}"),
                   flood);
  EXPECT_EQ(At(m, "kvwatch_group_capacity_misses_total{dimension=class,group=turn3-4,capacity_pages=4,}"), 3);
  EXPECT_EQ(At(m, "kvwatch_group_capacity_misses_total{dimension=tenant,group=bulk,capacity_pages=4,}"), 0);
  EXPECT_EQ(At(m, "kvwatch_group_requests_total{dimension=tenant,group=chat,}"), 3);
  EXPECT_EQ(At(m, "kvwatch_group_page_references_total{dimension=tenant,group=bulk,}"), 5);
  // turn2's page hits at 4 pages: 1 and 2 (2 deep); the window's ratio agrees.
  EXPECT_EQ(At(m, "kvwatch_group_page_hits_total{dimension=class,group=turn2,capacity_pages=4,}"), 2);
  EXPECT_DOUBLE_EQ(At(m, "kvwatch_group_page_hit_ratio{window=1h,dimension=class,group=turn2,capacity_pages=4,}"),
                   2.0 / 3.0);
  EXPECT_DOUBLE_EQ(
      At(m, "kvwatch_group_request_coverage_ratio{window=1h,dimension=class,group=turn3-4,capacity_pages=4,}"), 0.0);
  // Footprints: class first = 5 floods of (16 + 100) tokens and one of (32 + 100), x 1024 bytes.
  EXPECT_EQ(At(m, "kvwatch_request_footprint_bytes_count{class=first,}"), 6);
  EXPECT_EQ(At(m, "kvwatch_request_footprint_bytes_sum{class=first,}"), (5.0 * 116 + 132) * 1024);
  EXPECT_EQ(At(m, "kvwatch_request_footprint_bytes_bucket{class=first,le=1048576,}"), 6);  // all <= 1 MiB
  EXPECT_EQ(m.count("kvwatch_group_isolated_page_hits_total{group=chat,capacity_pages=4,}"), 0u);
}

TEST(AgentTenantsTest, TheGroupsApiGivesEveryBucketAndTheEvictors) {
  AgentOptions o = Options();
  o.tenants.isolated = true;
  auto agent = MakeAgent(std::move(o));
  ASSERT_NE(agent, nullptr);
  Flood(agent.get());
  const std::string json = agent->RenderGroupsJson("1h");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(json).get(doc)) << json;
  EXPECT_EQ(std::string_view(doc["window"]), "1h");
  EXPECT_TRUE(bool(doc["isolated"]));
  bool found = false;
  for (simdjson::dom::element g : doc["dimensions"]["class"].get_array()) {
    if (std::string_view(g["group"]) != "turn3-4") continue;
    found = true;
    EXPECT_EQ(std::uint64_t(g["requests"]), 1u);
    EXPECT_EQ(std::uint64_t(g["page_refs"]), 4u);
    // Every bucket bound of the window curve, increasing, ratios in [0, 1].
    std::size_t points = 0;
    std::uint64_t last = 0;
    for (simdjson::dom::element p : g["points"].get_array()) {
      EXPECT_GT(std::uint64_t(p["capacity_pages"]), last);
      last = std::uint64_t(p["capacity_pages"]);
      EXPECT_GE(double(p["page_hit_ratio"]), 0);
      EXPECT_LE(double(p["page_hit_ratio"]), 1);
      ++points;
    }
    EXPECT_GT(points, 10u);
    simdjson::dom::element at = g["at_capacities"].at(0);
    EXPECT_EQ(std::uint64_t(at["capacity_pages"]), 4u);
    EXPECT_EQ(std::uint64_t(at["capacity_misses"]), 3u);
    EXPECT_DOUBLE_EQ(double(at["evicted_by"]["first"]), 1 + 5.0 / 6 + 5.0 / 7);
  }
  EXPECT_TRUE(found) << json;
  EXPECT_TRUE(agent->RenderGroupsJson("5m").empty());  // not a window
}

TEST(AgentTenantsTest, TheCapacityMissAlertSeesTheCountersAndTheEvictors) {
  AgentOptions o = Options();
  AlertRunnerOptions alerts;
  alerts.inputs.short_window = 0;
  alerts.inputs.baseline_window = 0;
  alerts.log = [](const std::string&) {};
  o.alerts = alerts;
  auto agent = MakeAgent(std::move(o));
  ASSERT_NE(agent, nullptr);
  Flood(agent.get());
  const alerts::AlertInputs in = agent->AlertInputsAt(agent->alert_runner()->Now());
  ASSERT_TRUE(in.capacity_misses.page_references.has_value());
  EXPECT_EQ(*in.capacity_misses.page_references, 2 + 3 + 5 + 4);
  ASSERT_EQ(in.capacity_misses.capacity_misses.size(), 1u);
  EXPECT_EQ(in.capacity_misses.capacity_misses[0].capacity_pages, 4);
  EXPECT_EQ(in.capacity_misses.capacity_misses[0].misses, 3);
  bool class_cell = false;
  for (const alerts::EvictedBySample& e : in.capacity_misses.evicted_by) {
    if (e.dimension == "class" && e.victim == "turn3-4" && e.evictor == "first") {
      class_cell = true;
      EXPECT_DOUBLE_EQ(e.pages, 1 + 5.0 / 6 + 5.0 / 7);
      EXPECT_EQ(e.capacity_pages, 4);
    }
  }
  EXPECT_TRUE(class_cell);
}

TEST(AgentTenantsTest, IsolatedCurvesShowTheHitsLostToOtherTenants) {
  AgentOptions o = Options();
  o.tenants.isolated = true;
  auto agent = MakeAgent(std::move(o));
  ASSERT_NE(agent, nullptr);
  Flood(agent.get());
  const auto m = Series(agent.get(), "kvwatch_group_isolated");
  // Alone, "chat"'s third turn finds 1, 2, 3 within 4 pages: 2 (turn2) + 3 hits; shared: 2 + 0.
  EXPECT_EQ(At(m, "kvwatch_group_isolated_page_hits_total{group=chat,capacity_pages=4,}"), 5);
  EXPECT_DOUBLE_EQ(At(m, "kvwatch_group_isolated_page_hit_ratio{window=1h,group=chat,capacity_pages=4,}"), 5.0 / 9.0);
}

TEST(AgentTenantsTest, ManyTenantNamesKeepTheLabelsAtTheBound) {
  auto agent = MakeAgent(Options());
  ASSERT_NE(agent, nullptr);
  std::vector<curve::Request> batch;
  for (std::uint64_t i = 0; i < 100000; ++i) {
    // Eight heavy tenants and 100,000 one-request ones.
    const std::string tenant = i % 2 == 0 ? "heavy-" + std::to_string(i % 16) : "t" + std::to_string(i);
    agent->OnRequest(Make(tenant, {i + 1}, 100 + static_cast<double>(i) * 1e-3));
  }
  std::set<std::string> tenants;
  std::size_t series = 0;
  const collectors::Exposition e = collectors::ParseExposition(agent->RenderMetrics());
  for (const collectors::Sample& s : e.samples) {
    if (s.name.find("group") == std::string::npos && s.name.find("evicted_by") == std::string::npos) continue;
    ++series;
    if (s.Label("dimension").value_or("") != "tenant") continue;
    for (const char* label : {"group", "victim", "evictor"}) {
      if (auto v = s.Label(label)) tenants.insert(std::string(*v));
    }
  }
  EXPECT_LE(tenants.size(), 9u);
  EXPECT_TRUE(tenants.count("other"));
  for (int h = 0; h < 16; h += 2) EXPECT_TRUE(tenants.count("heavy-" + std::to_string(h))) << h;
  // The bound of agent/runtime/group_metrics.h for one capacity and one window.
  EXPECT_LE(series, 36u + 3 * 18 + 2 * 81 + 18 + 2 * 18 + 1);
}

// An engine collector that knows the KV-cache usage and capacity.
std::unique_ptr<collectors::Collector> FakeEngine() {
  collectors::EngineSignals s;
  s.kv_cache_usage = 0.25;
  s.capacity_pages = 1000;
  return std::make_unique<testing_support::FixedSignalsCollector>(s);
}

TEST(AgentTenantsTest, RunningKvIsTheEnginesUsageInBytes) {
  AgentOptions o = Options();
  o.collectors.push_back(FakeEngine());
  auto agent = MakeAgent(std::move(o));
  ASSERT_NE(agent, nullptr);
  // 0.25 x 1000 pages x 16 tokens x 1024 bytes per token.
  EXPECT_EQ(At(Series(agent.get(), "kvwatch_running_kv_bytes"), "kvwatch_running_kv_bytes{collector=vllm,}"),
            0.25 * 1000 * 16 * 1024);
  // Without bytes per token there is no byte figure.
  AgentOptions pages_only = Options();
  pages_only.bytes_per_token.reset();
  pages_only.collectors.push_back(FakeEngine());
  auto other = MakeAgent(std::move(pages_only));
  ASSERT_NE(other, nullptr);
  EXPECT_TRUE(Series(other.get(), "kvwatch_running_kv_bytes").empty());
}

TEST(AgentTenantsTest, ASampledAgentKeepsNoGroups) {
  AgentOptions o = Options();
  o.sample_rate = 0.5;
  auto agent = MakeAgent(std::move(o));
  ASSERT_NE(agent, nullptr);
  Flood(agent.get());
  EXPECT_TRUE(Series(agent.get(), "kvwatch_group_").empty());
  EXPECT_TRUE(Series(agent.get(), "kvwatch_evicted_by").empty());
  EXPECT_FALSE(Series(agent.get(), "kvwatch_capacity_misses_total").empty());  // the whole stream's still
}

TEST(AgentTenantsTest, CountersSurviveARestart) {
  testing_support::TempDir dir;
  const std::string state = (std::filesystem::path(dir.path()) / "state.bin").string();
  std::map<std::string, double> before;
  {
    auto agent = MakeAgent(Options(state));
    ASSERT_NE(agent, nullptr);
    Flood(agent.get());
    ASSERT_TRUE(agent->SaveState().ok());
    before = Series(agent.get(), "kvwatch_group_");
  }
  auto agent = MakeAgent(Options(state));
  ASSERT_NE(agent, nullptr);
  auto after = Series(agent.get(), "kvwatch_group_");
  before.erase("kvwatch_group_memory_bytes{}");  // the classifier starts empty
  after.erase("kvwatch_group_memory_bytes{}");
  EXPECT_EQ(before, after);
  // A state saved with other tenant settings is set aside, not misread (the
  // restored agent stops first: two agents on one state path are refused).
  agent.reset();
  AgentOptions other = Options(state);
  other.tenants.top_k = 3;
  auto third = MakeAgent(std::move(other));
  ASSERT_NE(third, nullptr);
  for (const auto& [series, value] : Series(third.get(), "kvwatch_group_requests_total")) {
    EXPECT_EQ(value, 0) << series;
  }
}

}  // namespace
}  // namespace kvwatch::agent
