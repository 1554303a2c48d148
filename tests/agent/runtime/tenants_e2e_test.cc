// Acceptance test of issue 11's tenants, classes and capacity-miss alert, end to
// end: a real `kvwatch agent` tails a JSON Lines trace the test writes at
// wall-clock pace (each record stamped with the wall time it is written at: the
// agent's windows run on record time, its alert samples counters on wall time),
// and a real Prometheus on 127.0.0.1 scrapes it every second and evaluates the
// shipped rules (packaging/prometheus/kvwatch-rules.yml, every group every
// second).
//
// Workload (kCapacity = 2000 pages, the only configured capacity):
//   - conversations, tenant "chat": kConversations at a time, kConvRate requests/s
//     round robin; turn 1 has kFirstPages new pages and each later turn extends
//     the previous turn's hash_ids by kTurnPages, so the derived classes are first
//     (turn 1), turn2, turn3-4, turn5-8 and turn9+; after kTurns turns a
//     conversation ends and a new one starts (the first ones end early, so the
//     conversations are at different turns). Every live conversation fits in the
//     cache (16 x 70 pages at most), and a conversation comes back every 0.8 s,
//     after about 750 other pages: no capacity misses.
//   - from kFloodStartS on, a one-shot flood, tenant "batch": kFloodRate
//     requests/s, each kFloodPages new pages (class first). Between two turns of a
//     conversation the flood now references about 2,000 new pages, so the
//     conversations' prefixes are evicted before they come back.
// Asserted after the flood has run for a while (Prometheus instant queries,
// the values at the flood's start against now):
//   - kvwatch_evicted_by_total{dimension="class",evictor="first"} grows for the
//     conversation classes, and for each conversation class that lost pages,
//     "first" is its largest evictor; the tenant matrix names "batch" evicting
//     "chat";
//   - the conversation classes' kvwatch_group_capacity_misses_total rose (and
//     were ~0 before the flood); chat's isolated hits exceed its shared hits;
//   - the evictor matrix and the groups' capacity misses at the end equal what
//     `kvwatch replay --classes` computes over the same trace file;
//   - the agent's KVWatchCapacityMissesRising (alerts.capacity_miss_share, short
//     window 10s against 60s, `for: 0s`) fires after the flood starts, not
//     before, and while firing names class first (and tenant batch) as the top
//     evictor within 5 s (GET /api/v1/alerts); kvwatch_alert_state shows it
//     firing in Prometheus. (An evictor cell first exported at an evaluation has
//     no increase until the next one, so with `for: 0s` the very first firing
//     evaluation may name no evictor; the test prints both.)
//   - the PromQL twin: the recording rule kvwatch:capacity_miss_share:1h returns
//     data, and the rules' share/ratio expressions with [1h]/[24h] replaced by
//     [10s]/[60s] reach the firing threshold (2) during the flood, with the
//     annotation's topk(1, ...) query (at [10s]) naming class first as the
//     evictor while the ratio stays at the clearing threshold (1.5) or above.
//
// Skips when prometheus is not installed. Deadlines only bound a broken build.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/agent/deploy_checks.h"
#include "tests/agent/testing_agent.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers
using deploy_checks::PrometheusWithRules;

const std::string kSource = KVWATCH_SOURCE_DIR;

constexpr int kCapacity = 2000;
constexpr int kConversations = 16;
constexpr int kTurns = 10;
constexpr int kFirstPages = 20;
constexpr int kTurnPages = 5;
constexpr int kConvRate = 20;     // conversation requests per second, all conversations
constexpr int kFloodRate = 40;    // flood requests per second
constexpr int kFloodPages = 64;   // new pages per flood request
constexpr int kFloodStartS = 40;  // seconds of conversations alone
constexpr int kDurationS = 65;    // the whole workload
constexpr int kPageTokens = 16;   // page_tokens default
const std::vector<std::string> kConversationClasses = {"turn2", "turn3-4", "turn5-8", "turn9+"};

// ------------------------------------------------------------------ Workload

struct Workload {
  std::vector<std::int64_t> ms;    // each record's time in the workload, ascending
  std::vector<std::string> lines;  // JSON Lines records without "timestamp" and '\n'
};

std::string RecordJson(const std::string& tenant, const std::vector<std::uint64_t>& ids, int output_tokens) {
  std::string out = "{\"tenant\": \"" + tenant +
                    "\", \"input_length\": " + std::to_string(ids.size() * kPageTokens - kPageTokens / 2) +
                    ", \"output_length\": " + std::to_string(output_tokens) + ", \"hash_ids\": [";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + "]}";
}

Workload MakeWorkload() {
  Workload w;
  std::uint64_t next_id = 1;
  struct Conversation {
    std::vector<std::uint64_t> ids;
    int turns = 0;
    int length = kTurns;
  };
  // Staggered: conversation c's first one ends after 1 + c % kTurns turns, so
  // every class runs at once rather than all conversations in lockstep.
  std::vector<Conversation> conversations(kConversations);
  for (int c = 0; c < kConversations; ++c) conversations[c].length = 1 + c % kTurns;
  // Conversation requests and flood requests, merged by time.
  std::vector<std::pair<std::int64_t, std::string>> all;
  const int conv_requests = kConvRate * kDurationS;
  for (int i = 0; i < conv_requests; ++i) {
    Conversation& c = conversations[i % kConversations];
    if (c.turns == c.length) c = Conversation{};
    const int add = c.turns == 0 ? kFirstPages : kTurnPages;
    for (int p = 0; p < add; ++p) c.ids.push_back(next_id++);
    ++c.turns;
    all.emplace_back(static_cast<std::int64_t>(i) * 1000 / kConvRate, RecordJson("chat", c.ids, 200));
  }
  const int flood_requests = kFloodRate * (kDurationS - kFloodStartS);
  for (int i = 0; i < flood_requests; ++i) {
    std::vector<std::uint64_t> ids;
    for (int p = 0; p < kFloodPages; ++p) ids.push_back(next_id++);
    all.emplace_back(kFloodStartS * 1000 + static_cast<std::int64_t>(i) * 1000 / kFloodRate,
                     RecordJson("batch", ids, 50));
  }
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [ms, line] : all) {
    w.ms.push_back(ms);
    w.lines.push_back(std::move(line));
  }
  return w;
}

// Writes the workload into the trace as wall time passes, each record stamped
// with start_ms + its workload time.
class Feeder {
 public:
  Feeder(const Workload& workload, std::string trace)
      : workload_(workload), trace_(std::move(trace)), start_ms_(WallNowMs()) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Feeder() {
    stop_ = true;
    thread_.join();
  }
  Feeder(const Feeder&) = delete;
  Feeder& operator=(const Feeder&) = delete;

  std::int64_t start_ms() const { return start_ms_; }
  std::size_t written() const { return written_.load(); }
  bool done() const { return written_.load() == workload_.lines.size(); }

 private:
  void Run() {
    std::size_t next = 0;
    while (!stop_ && next < workload_.lines.size()) {
      const std::int64_t elapsed = WallNowMs() - start_ms_;
      std::string batch;
      std::size_t end = next;
      while (end < workload_.lines.size() && workload_.ms[end] <= elapsed) {
        batch += Stamped(workload_.lines[end], start_ms_ + workload_.ms[end]) + "\n";
        ++end;
      }
      if (end > next) {
        AppendFile(trace_, batch);
        next = end;
        written_ = next;
      }
      std::this_thread::sleep_for(Millis(20));
    }
  }

  const Workload& workload_;
  const std::string trace_;
  const std::int64_t start_ms_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> written_{0};
  std::thread thread_;
};

std::string AgentConfig(const std::string& trace) {
  return "web: {port: 0}\nreplica: tenants-e2e\nmodel: llama-3-70b\n"
         "curve:\n  windows: [\"10s\", \"60s\"]\n  capacities: [" +
         std::to_string(kCapacity) +
         "]\n"
         "tenants:\n  enabled: true\n  isolated: true\n"
         "collectors:\n  trace_files:\n" +
         TraceFileCollectorYaml("trace", trace) +
         "alerts:\n"
         "  evaluation_interval: 1s\n  short_window: 10s\n  baseline_window: 60s\n"
         "  capacity_miss_share: {enabled: true, for: 0s, min_requests: 50}\n"
         "  knee_shift: {enabled: false}\n  over_capacity: {enabled: false}\n"
         "  rate_shift: {enabled: false}\n  drift: {enabled: false}\n";
}

// ------------------------------------------------------------------ Prometheus

using Series = PromSample;
// An instant query at `time_s` (Unix seconds; now when absent).
base::Result<std::vector<Series>> QueryAt(int port, const std::string& expr,
                                          std::optional<double> time_s = std::nullopt) {
  return PromQuery(port, expr, time_s);
}

std::string Describe(const std::vector<Series>& series) {
  std::string out;
  for (const Series& s : series) {
    std::string labels;
    for (const auto& [k, v] : s.labels) labels += (labels.empty() ? "" : ",") + k + "=\"" + v + "\"";
    char value[64];
    std::snprintf(value, sizeof(value), "%.6g", s.value);
    out += "  {" + labels + "} " + value + "\n";
  }
  return out;
}

// The shipped rule file with every group evaluated every second.
std::string RulesEverySecond(const std::string& dir, YAML::Node* shipped, std::string* error) {
  try {
    *shipped = YAML::LoadFile(kSource + "/packaging/prometheus/kvwatch-rules.yml");
  } catch (const YAML::Exception& e) {
    *error = std::string("kvwatch-rules.yml: ") + e.what();
    return "";
  }
  YAML::Node doc;
  doc["groups"] = YAML::Clone((*shipped)["groups"]);
  for (YAML::Node group : doc["groups"]) group["interval"] = "1s";
  const std::string path = dir + "/rules.yml";
  if (!WriteFile(path, YAML::Dump(doc) + "\n")) {
    *error = "cannot write " + path;
    return "";
  }
  return path;
}

// The expression of the recording rule `record` in the rules.
std::string RecordExpr(const YAML::Node& rules, const std::string& record) {
  for (const YAML::Node& group : rules["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      if (rule["record"] && rule["record"].as<std::string>() == record) return rule["expr"].as<std::string>();
    }
  }
  return "";
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// ------------------------------------------------------------------ kvwatch replay

// `kvwatch replay --format json --classes` over the trace at kCapacity: per
// dimension ("tenant", "class") and victim, its capacity misses and evicted_by
// cells, keyed "victim" and "victim<-evictor".
base::Result<std::map<std::string, double>> ReplayInterference(const std::string& trace, const std::string& dimension) {
  using R = base::Result<std::map<std::string, double>>;
  CommandResult run = RunCommand({KVWATCH_BINARY, "replay", "--format", "json", "--capacities",
                                  std::to_string(kCapacity), "--classes", "--progress", "never", trace},
                                 Millis(120000));
  if (!run.Exited(0)) return R::Error("kvwatch replay: " + run.Describe());
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array groups;
  const std::string key = dimension == "tenant" ? "tenants" : "classes";
  if (parser.parse(run.out).get(doc) || doc["interference"][key].get(groups)) {
    return R::Error("kvwatch replay: no interference." + key + " in " + Tail(run.out, 400));
  }
  std::map<std::string, double> out;
  for (simdjson::dom::element g : groups) {
    std::string_view name;
    simdjson::dom::array points;
    if (g["name"].get(name) || g["points"].get(points)) return R::Error("kvwatch replay: bad group");
    for (simdjson::dom::element point : points) {
      double misses = 0;
      simdjson::dom::object evicted_by;
      if (point["capacity_misses"].get(misses) || point["evicted_by"].get(evicted_by)) {
        return R::Error("kvwatch replay: bad point of " + std::string(name));
      }
      out[std::string(name)] = misses;
      for (auto cell : evicted_by) {
        double pages = 0;
        if (cell.value.get(pages) == simdjson::SUCCESS) {
          out[std::string(name) + "<-" + std::string(cell.key)] = pages;
        }
      }
    }
  }
  return out;
}

// ------------------------------------------------------------------ The agent's alert

struct AgentAlert {
  std::string state;  // "" when absent
  std::map<std::string, std::string> annotations;
  double value = 0;
};

AgentAlert AgentAlertOf(const AgentProcess& agent, const std::string& alertname) {
  AgentAlert out;
  HttpResult r = agent.Get("/api/v1/alerts");
  if (r.status != 200) return out;
  simdjson::dom::parser parser;
  simdjson::dom::array alerts;
  if (parser.parse(r.body)["data"]["alerts"].get(alerts)) return out;
  for (simdjson::dom::element a : alerts) {
    std::string_view name, state;
    if (a["labels"]["alertname"].get(name) || a["state"].get(state) || name != alertname) continue;
    out.state = std::string(state);
    simdjson::dom::object annotations;
    if (!a["annotations"].get(annotations)) {
      for (auto field : annotations) {
        std::string_view v;
        if (field.value.get(v) == simdjson::SUCCESS) out.annotations[std::string(field.key)] = std::string(v);
      }
    }
    double value = 0;
    if (!a["value"].get(value)) out.value = value;
  }
  return out;
}

// ------------------------------------------------------------------ The test

TEST(TenantsEndToEndTest, OneShotFloodEvictsConversationsAndTheAlertNamesIt) {
  if (!PrometheusProcess::Available()) GTEST_SKIP() << "prometheus is not installed (Debian: prometheus)";
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const Workload workload = MakeWorkload();
  const std::string trace = dir.Sub("trace.jsonl");
  ASSERT_TRUE(WriteFile(trace, ""));

  std::string error;
  auto agent = AgentProcess::Start(dir.path(), "agent", AgentConfig(trace), &error);
  ASSERT_NE(agent, nullptr) << error;
  YAML::Node shipped_rules;
  const std::string rules = RulesEverySecond(dir.path(), &shipped_rules, &error);
  ASSERT_FALSE(rules.empty()) << error;
  const std::string instance = "127.0.0.1:" + std::to_string(agent->port());
  auto prometheus = PrometheusWithRules::Start(dir.path(), "kvwatch", {instance}, {rules}, kStartTimeout, &error);
  ASSERT_NE(prometheus, nullptr) << error;
  const int prom = prometheus->port();

  // The PromQL twin at the agent's windows: the recording rules' share with
  // [1h] -> [10s] and [24h] -> [60s], and the ratio rule over them.
  const std::string share_short =
      ReplaceAll(RecordExpr(shipped_rules, "kvwatch:capacity_miss_share:1h"), "[1h]", "[10s]");
  const std::string share_long =
      ReplaceAll(RecordExpr(shipped_rules, "kvwatch:capacity_miss_share:24h"), "[24h]", "[60s]");
  const std::string ratio_rule = RecordExpr(shipped_rules, "kvwatch:capacity_miss_share:ratio_1h_24h");
  ASSERT_FALSE(share_short.empty() || share_long.empty() || ratio_rule.empty())
      << "kvwatch-rules.yml lacks the kvwatch:capacity_miss_share:* recording rules";
  const std::string ratio_twin =
      ReplaceAll(ReplaceAll(ratio_rule, "kvwatch:capacity_miss_share:24h", "(" + share_long + ")"),
                 "kvwatch:capacity_miss_share:1h", "(" + share_short + ")");
  const std::string cap = "capacity_pages=\"" + std::to_string(kCapacity) + "\"";
  const std::string top_evictor_twin =
      "topk(1, sum by (evictor, victim) (rate(kvwatch_evicted_by_total{dimension=\"class\"," + cap + "}[10s])))";

  Feeder feeder(workload, trace);
  const std::int64_t flood_ms = feeder.start_ms() + kFloodStartS * 1000;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(kDurationS + 60);
  bool fired_before_flood = false;
  AgentAlert fired;  // as first seen firing
  std::int64_t fired_ms = 0;
  // As first seen firing with an evictor named (an evictor cell needs two
  // evaluations before it has an increase, so the first firing evaluation of a
  // flood that starts the cells may name none).
  AgentAlert named;
  std::int64_t named_ms = 0;
  std::set<std::string> evictors_named;  // every top_evictor_class seen while firing
  double max_twin_ratio = 0;
  std::string twin_top_evictor, twin_top_victim;
  std::int64_t twin_fired_ms = 0;
  // Watch until the workload is written and both the agent's alert and the twin fired and named an evictor.
  while (SteadyClock::now() < deadline && !(feeder.done() && named_ms && !twin_top_evictor.empty())) {
    ASSERT_TRUE(agent->Running()) << "the agent exited; stderr:\n" << Tail(agent->Stderr());
    const std::int64_t now = WallNowMs();
    const AgentAlert a = AgentAlertOf(*agent, std::string("KVWatchCapacityMissesRising"));
    if (a.state == "firing") {
      if (now < flood_ms) fired_before_flood = true;
      if (!fired_ms && now >= flood_ms) {
        fired = a;
        fired_ms = now;
      }
      if (a.annotations.count("top_evictor_class")) {
        evictors_named.insert(a.annotations.at("top_evictor_class"));
        if (!named_ms) {
          named = a;
          named_ms = now;
        }
      }
    }
    if (now >= flood_ms) {
      auto ratio = QueryAt(prom, ratio_twin);
      if (ratio.ok()) {
        for (const Series& s : ratio.value()) {
          if (s.labels.count("capacity_pages") && s.labels.at("capacity_pages") == std::to_string(kCapacity)) {
            max_twin_ratio = std::max(max_twin_ratio, s.value);
            if (s.value >= 2 && !twin_fired_ms) twin_fired_ms = now;
            // The annotation's query, while the ratio is at least the clearing
            // threshold (rate() needs two samples of a cell that just appeared).
            if (twin_fired_ms && s.value >= 1.5 && twin_top_evictor.empty()) {
              auto top = QueryAt(prom, top_evictor_twin);
              if (top.ok() && !top.value().empty()) {
                twin_top_evictor = top.value()[0].labels["evictor"];
                twin_top_victim = top.value()[0].labels["victim"];
              }
            }
          }
        }
      }
    }
    std::this_thread::sleep_for(Millis(500));
  }
  ASSERT_TRUE(agent->WaitForRequests(static_cast<double>(workload.lines.size())))
      << "the agent did not count every record; stderr:\n"
      << Tail(agent->Stderr());
  // Prometheus has scraped the agent after its last record: the queries below
  // read the whole workload.
  const double records = static_cast<double>(workload.lines.size());
  ASSERT_TRUE(PollUntil(
      [&] {
        auto total = QueryAt(prom, "sum(kvwatch_requests_total)");
        return total.ok() && !total.value().empty() && total.value()[0].value == records;
      },
      Millis(60000), Millis(250)))
      << "Prometheus did not scrape the agent's last count";

  const double flood_s = flood_ms / 1000.0;
  const double before_s = flood_s - 0.5;
  auto at = [&](std::int64_t ms) { return ms ? (ms - feeder.start_ms()) / 1000.0 : -1.0; };
  std::printf(
      "records %zu written; flood from %ds; agent alert firing at %.1fs (value %.3g); twin ratio max %.3g, "
      ">= 2 at %.1fs\n",
      feeder.written(), kFloodStartS, at(fired_ms), fired.value, max_twin_ratio, at(twin_fired_ms));

  // The evictor matrix by class, pages attributed: before the flood and now.
  const std::string matrix = "sum by (victim, evictor) (kvwatch_evicted_by_total{dimension=\"class\"," + cap + "})";
  auto matrix_before = QueryAt(prom, matrix, before_s);
  auto matrix_after = QueryAt(prom, matrix);
  ASSERT_TRUE(matrix_before.ok()) << matrix_before.error();
  ASSERT_TRUE(matrix_after.ok()) << matrix_after.error();
  std::printf("kvwatch_evicted_by_total{dimension=\"class\"} before the flood:\n%s",
              Describe(matrix_before.value()).c_str());
  std::printf("kvwatch_evicted_by_total{dimension=\"class\"} after the flood:\n%s",
              Describe(matrix_after.value()).c_str());
  auto cell = [](const std::vector<Series>& m, const std::string& victim, const std::string& evictor) {
    for (const Series& s : m) {
      if (s.labels.at("victim") == victim && s.labels.at("evictor") == evictor) return s.value;
    }
    return 0.0;
  };
  std::size_t victims = 0;
  for (const std::string& victim : kConversationClasses) {
    const double first_gain =
        cell(matrix_after.value(), victim, "first") - cell(matrix_before.value(), victim, "first");
    if (first_gain <= 0) continue;
    ++victims;
    for (const Series& s : matrix_after.value()) {
      if (s.labels.at("victim") != victim || s.labels.at("evictor") == "first") continue;
      const double gain = s.value - cell(matrix_before.value(), victim, s.labels.at("evictor"));
      EXPECT_GT(first_gain, gain) << "class " << s.labels.at("evictor") << " evicted more of " << victim
                                  << " than class first during the flood";
    }
  }
  EXPECT_GE(victims, 2u) << "class first evicted pages of fewer than two conversation classes";

  // The tenant matrix: batch evicts chat.
  const std::string tenants = "sum by (victim, evictor) (kvwatch_evicted_by_total{dimension=\"tenant\"," + cap + "})";
  auto tenant_matrix = QueryAt(prom, tenants);
  ASSERT_TRUE(tenant_matrix.ok()) << tenant_matrix.error();
  std::printf("kvwatch_evicted_by_total{dimension=\"tenant\"} after the flood:\n%s",
              Describe(tenant_matrix.value()).c_str());
  const double batch_chat = cell(tenant_matrix.value(), "chat", "batch");
  EXPECT_GT(batch_chat, 0);
  EXPECT_GT(batch_chat, cell(tenant_matrix.value(), "chat", "chat"));

  // Capacity misses of the conversation classes: ~0 before the flood, then up.
  const std::string misses =
      "sum(kvwatch_group_capacity_misses_total{dimension=\"class\",group=~\"turn.*\"," + cap + "})";
  auto misses_before = QueryAt(prom, misses, before_s);
  auto misses_after = QueryAt(prom, misses);
  ASSERT_TRUE(misses_before.ok() && misses_after.ok());
  const double m0 = misses_before.value().empty() ? 0 : misses_before.value()[0].value;
  ASSERT_FALSE(misses_after.value().empty()) << "no kvwatch_group_capacity_misses_total for the conversation classes";
  const double m1 = misses_after.value()[0].value;
  auto refs =
      QueryAt(prom, "sum(kvwatch_group_page_references_total{dimension=\"class\",group=~\"turn.*\"})", before_s);
  const double refs0 = refs.ok() && !refs.value().empty() ? refs.value()[0].value : 0;
  std::printf("conversation classes' capacity misses: %.0f before the flood (of %.0f page references), %.0f after\n",
              m0, refs0, m1);
  EXPECT_GT(refs0, 10000) << "the conversations did not run before the flood";
  EXPECT_LT(m0, 0.01 * refs0) << "the conversations did not fit in the cache before the flood";
  EXPECT_GT(m1 - m0, 10 * std::max(m0, 100.0));
  auto by_group = QueryAt(prom, "kvwatch_group_capacity_misses_total{" + cap + "}");
  if (by_group.ok()) std::printf("kvwatch_group_capacity_misses_total:\n%s", Describe(by_group.value()).c_str());

  // Interference: chat alone would have hit far more than in the shared cache.
  auto isolated = QueryAt(prom, "sum(kvwatch_group_isolated_page_hits_total{group=\"chat\"," + cap + "})");
  auto shared = QueryAt(prom, "sum(kvwatch_group_page_hits_total{dimension=\"tenant\",group=\"chat\"," + cap + "})");
  ASSERT_TRUE(isolated.ok() && shared.ok());
  ASSERT_FALSE(isolated.value().empty()) << "no kvwatch_group_isolated_page_hits_total{group=\"chat\"}";
  ASSERT_FALSE(shared.value().empty()) << "no kvwatch_group_page_hits_total{dimension=\"tenant\",group=\"chat\"}";
  std::printf("tenant chat: isolated page hits %.0f, shared page hits %.0f\n", isolated.value()[0].value,
              shared.value()[0].value);
  EXPECT_GT(isolated.value()[0].value, shared.value()[0].value + 1000);

  // Offline, the same records give the same matrix and misses: kvwatch replay
  // over the trace file the agent read.
  for (const std::string dimension : {"class", "tenant"}) {
    auto replayed = ReplayInterference(trace, dimension);
    ASSERT_TRUE(replayed.ok()) << replayed.error();
    auto cells = QueryAt(
        prom, "sum by (victim, evictor) (kvwatch_evicted_by_total{dimension=\"" + dimension + "\"," + cap + "})");
    auto groups = QueryAt(
        prom, "sum by (group) (kvwatch_group_capacity_misses_total{dimension=\"" + dimension + "\"," + cap + "})");
    ASSERT_TRUE(cells.ok() && groups.ok());
    std::map<std::string, double> live;
    for (const Series& c : cells.value()) live[c.labels.at("victim") + "<-" + c.labels.at("evictor")] = c.value;
    for (const Series& g : groups.value()) {
      if (g.value != 0) live[g.labels.at("group")] = g.value;
    }
    std::map<std::string, double> offline;
    for (const auto& [k, v] : replayed.value()) {
      if (v != 0) offline[k] = v;
    }
    ASSERT_EQ(live.size(), offline.size())
        << dimension << ": the agent's non-zero cells and misses differ from replay's";
    for (const auto& [k, v] : offline) {
      ASSERT_TRUE(live.count(k)) << dimension << " " << k << " is in replay (" << v << ") but not in Prometheus";
      EXPECT_NEAR(live.at(k), v, 1e-6 * std::max(1.0, v)) << dimension << " " << k;
    }
  }

  // The agent's alert: fired after the flood started, naming class first.
  EXPECT_FALSE(fired_before_flood) << "KVWatchCapacityMissesRising fired before the flood";
  ASSERT_GT(fired_ms, 0) << "the agent's KVWatchCapacityMissesRising never fired; now "
                         << AgentAlertOf(*agent, "KVWatchCapacityMissesRising").state << " ("
                         << Tail(agent->Get("/api/v1/alerts").body, 2000) << ")";
  std::printf("agent alert annotations when it first fired (%.1fs):\n", at(fired_ms));
  for (const auto& [k, v] : fired.annotations) std::printf("  %s: %s\n", k.c_str(), v.c_str());
  ASSERT_GT(named_ms, 0) << "the firing KVWatchCapacityMissesRising never named an evictor class";
  std::printf("agent alert annotations when it first named an evictor (%.1fs):\n", at(named_ms));
  for (const auto& [k, v] : named.annotations) std::printf("  %s: %s\n", k.c_str(), v.c_str());
  EXPECT_LE(named_ms - fired_ms, 5000) << "the alert named no evictor for its first 5 s of firing";
  EXPECT_EQ(named.annotations["top_evictor_class"], "first");
  EXPECT_EQ(evictors_named, std::set<std::string>{"first"}) << "other classes named as the top evictor while firing";
  EXPECT_NE(std::find(kConversationClasses.begin(), kConversationClasses.end(), named.annotations["top_victim_class"]),
            kConversationClasses.end())
      << named.annotations["top_victim_class"];
  EXPECT_EQ(named.annotations["top_evictor_tenant"], "batch");
  EXPECT_EQ(named.annotations["top_victim_tenant"], "chat");
  EXPECT_EQ(named.annotations["capacity_pages"], std::to_string(kCapacity));
  EXPECT_NE(named.annotations["summary"].find("class first evicts class turn"), std::string::npos)
      << named.annotations["summary"];
  auto state = QueryAt(prom, "max_over_time(kvwatch_alert_state{alertname=\"KVWatchCapacityMissesRising\"}[2m])");
  ASSERT_TRUE(state.ok()) << state.error();
  ASSERT_FALSE(state.value().empty()) << "no kvwatch_alert_state{alertname=\"KVWatchCapacityMissesRising\"}";
  EXPECT_EQ(state.value()[0].value, 2) << "Prometheus never saw the alert firing (kvwatch_alert_state 2)";

  // The PromQL twin: the recording rule has data, and the ratio at the agent's
  // windows reached the firing threshold, naming class first.
  auto recorded = QueryAt(prom, "kvwatch:capacity_miss_share:1h{" + cap + "}");
  ASSERT_TRUE(recorded.ok()) << recorded.error();
  ASSERT_FALSE(recorded.value().empty()) << "the recording rule kvwatch:capacity_miss_share:1h has no data; rules:\n"
                                         << Tail(prometheus->Log());
  std::printf("kvwatch:capacity_miss_share:1h now:\n%s", Describe(recorded.value()).c_str());
  EXPECT_GT(recorded.value()[0].value, 0);
  EXPECT_GE(max_twin_ratio, 2) << "the PromQL twin " << ratio_twin << " never reached 2";
  std::printf("PromQL twin's top evictor while firing: class %s evicts class %s\n", twin_top_evictor.c_str(),
              twin_top_victim.c_str());
  EXPECT_EQ(twin_top_evictor, "first") << "twin's top evictor while firing (victim " << twin_top_victim << ")";

  EXPECT_TRUE(prometheus->Stop(kStopTimeout).has_value());
  EXPECT_TRUE(agent->Stop().has_value());
}

}  // namespace
}  // namespace kvwatch::agent
