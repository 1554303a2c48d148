// The metrics reference (docs/metrics.md) is generated from the components'
// metric tables (agent/runtime/metric_catalog.h) and documents every family the
// agent exports:
//   - docs/metrics.md holds MetricsReferenceMarkdown() between its marker lines
//     (KVWATCH_UPDATE_METRICS_REFERENCE=1 rewrites it, as `kvwatch
//     metrics-reference` prints it);
//   - the catalog's names are unique and follow the naming rules;
//   - every metric-name literal in the sources is a catalog family, so a family
//     declared outside the tables fails here;
//   - every family of the golden scrape (tests/golden/agent_metrics.txt) and of a
//     real agent with every collector kind, the alerts, tenants with isolated
//     curves and policy canaries configured is in the catalog with its type and
//     in docs/metrics.md.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "agent/runtime/metric_catalog.h"
#include "tests/agent/testing_agent.h"

namespace kvwatch::agent {
namespace {

namespace fs = std::filesystem;
using namespace testing_support;  // NOLINT(build/namespaces): test helpers

const fs::path kSource = KVWATCH_SOURCE_DIR;
const std::string kDocs = (kSource / "docs" / "metrics.md").string();
constexpr char kBegin[] = "<!-- metrics-reference:begin -->";
constexpr char kEnd[] = "<!-- metrics-reference:end -->";

// name -> type of every family in the catalog.
std::map<std::string, std::string> Catalog() {
  std::map<std::string, std::string> out;
  for (const MetricTable& table : MetricTables()) {
    for (const base::MetricDef* def : table.defs)
      out[std::string(def->name)] = std::string(base::MetricTypeName(def->type));
  }
  return out;
}

// name -> type of every "# TYPE" line of an exposition.
std::map<std::string, std::string> Families(const std::string& exposition) {
  std::map<std::string, std::string> out;
  static const std::regex kType(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) ([a-z]+)$)");
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, kType)) out[m[1].str()] = m[2].str();
  }
  return out;
}

// Every family of a scrape is in the catalog with the same type and named in
// docs/metrics.md's generated table.
void ExpectDocumented(const std::map<std::string, std::string>& families, const std::string& what) {
  const std::map<std::string, std::string> catalog = Catalog();
  const std::string docs = ReadFile(kDocs);
  for (const auto& [name, type] : families) {
    const auto it = catalog.find(name);
    if (it == catalog.end()) {
      ADD_FAILURE() << what << " exports " << name << " (" << type
                    << "), which no metric table declares: add it to its component's base::MetricDef table "
                       "(agent/runtime/metric_catalog.h lists them) and regenerate docs/metrics.md";
      continue;
    }
    EXPECT_EQ(it->second, type) << what << ": " << name << " is exported as " << type << ", declared as " << it->second;
    EXPECT_NE(docs.find("| `" + name + "` |"), std::string::npos)
        << name << " (" << what << ") is not in " << kDocs << "'s reference table";
  }
}

TEST(MetricsReferenceTest, DocsHoldTheGeneratedReference) {
  const std::string docs = ReadFile(kDocs);
  ASSERT_FALSE(docs.empty()) << "cannot read " << kDocs;
  const std::string how =
      "Regenerate it: run this test with KVWATCH_UPDATE_METRICS_REFERENCE=1 (it rewrites the text between the "
      "marker lines of docs/metrics.md), or paste the output of `kvwatch metrics-reference` between the lines\n  " +
      std::string(kBegin) + "\n  " + kEnd + "\n";
  const std::size_t begin = docs.find(std::string(kBegin) + "\n");
  ASSERT_NE(begin, std::string::npos) << kDocs << " has no line " << kBegin << ". " << how;
  const std::size_t start = begin + std::string(kBegin).size() + 1;
  const std::size_t end = docs.find(kEnd, start);
  ASSERT_NE(end, std::string::npos) << kDocs << " has " << kBegin << " but no " << kEnd << " after it. " << how;
  ASSERT_TRUE(end == start || docs[end - 1] == '\n') << kEnd << " must start a line in " << kDocs;
  const std::string expected = MetricsReferenceMarkdown();
  const std::string actual = docs.substr(start, end - start);
  if (actual != expected && std::getenv("KVWATCH_UPDATE_METRICS_REFERENCE") != nullptr) {
    std::ofstream out(kDocs, std::ios::binary | std::ios::trunc);
    out << docs.substr(0, start) << expected << docs.substr(end);
    ASSERT_TRUE(out.good()) << "cannot write " << kDocs;
    GTEST_SKIP() << "rewrote the metrics reference in " << kDocs;
  }
  EXPECT_EQ(actual, expected) << "The metrics reference in " << kDocs << " is not what the code generates. " << how;
}

TEST(MetricsReferenceTest, TheCommandPrintsTheReference) {
  const CommandResult r = RunCommand({KVWATCH_BINARY, "metrics-reference"}, Millis(20000));
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_EQ(r.out, MetricsReferenceMarkdown());
}

TEST(MetricsReferenceTest, CatalogNamesAreUniqueAndFollowTheRules) {
  std::set<std::string> seen;
  std::size_t n = 0;
  for (const MetricTable& table : MetricTables()) {
    EXPECT_FALSE(table.defs.empty()) << table.title;
    EXPECT_TRUE(fs::is_regular_file(kSource / table.source)) << table.source;
    for (const base::MetricDef* def : table.defs) {
      ++n;
      const std::string name(def->name);
      EXPECT_TRUE(seen.insert(name).second) << name << " is declared twice";
      EXPECT_TRUE(name.rfind("kvwatch_", 0) == 0 || name.rfind("process_", 0) == 0) << name;
      EXPECT_EQ(name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0,
                def->type == base::MetricType::kCounter)
          << name << ": counters, and only counters, end in _total";
      EXPECT_FALSE(def->help.empty()) << name;
      EXPECT_EQ(def->help.back(), '.') << name << ": the help text is a full sentence";
    }
  }
  EXPECT_GE(n, 80u) << "the catalog lost tables";
}

// Every "kvwatch_..." or "process_..." string literal of the non-test sources
// names a catalog family, so a family added outside the tables (a literal name
// passed to MetricsBuilder or a MetricSample) is caught even when no scrape
// below exports it. Literals that are not metric names are listed here.
TEST(MetricsReferenceTest, EveryMetricNameInTheSourcesIsInTheCatalog) {
  const std::set<std::string> not_metrics = {
      "kvwatch_page",  // agent/web/web_page.cc: the raw-string delimiter of the page
  };
  const std::map<std::string, std::string> catalog = Catalog();
  static const std::regex kLiteral(R"re("((?:kvwatch|process)_[a-z0-9_]+))re");
  std::size_t literals = 0;
  for (const char* folder : {"agent", "collectors", "alerts", "curve", "config", "base"}) {
    for (const auto& entry : fs::recursive_directory_iterator(kSource / folder)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
      if (entry.path().string().find("/testing/") != std::string::npos) continue;
      const std::string text = ReadFile(entry.path().string());
      for (auto it = std::sregex_iterator(text.begin(), text.end(), kLiteral); it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1].str();
        ++literals;
        if (not_metrics.count(name)) continue;
        EXPECT_TRUE(catalog.count(name)) << fs::relative(entry.path(), kSource).string() << " names " << name
                                         << ", which no metric table in agent/runtime/metric_catalog.h declares";
      }
    }
  }
  EXPECT_GE(literals, catalog.size()) << "the scan found fewer literals than the catalog has families";
}

TEST(MetricsReferenceTest, GoldenScrapeFamiliesAreDocumented) {
  const auto families = Families(ReadFile((kSource / "tests" / "golden" / "agent_metrics.txt").string()));
  ASSERT_GE(families.size(), 30u);
  ExpectDocumented(families, "tests/golden/agent_metrics.txt");
}

// The real binary with every collector kind: the trace file has records, the
// engine log gets a vLLM stats line (so the engine signals appear), the scraper
// and the KV-events subscriber point at ports where nothing listens (their own
// families appear regardless). Alerts, isolated tenant curves and canaries on.
TEST(MetricsReferenceTest, ALiveAgentWithEveryCollectorKindExportsOnlyDocumentedFamilies) {
  TempDir dir("kvwatch_metrics_reference_test");
  const std::string trace = dir.path() + "/trace.jsonl";
  const std::string log = dir.path() + "/vllm.log";
  std::string records;
  const std::int64_t now = WallNowMs();
  for (const Record& r : SynthRecords(200, 5)) records += Stamped(r.json, now) + "\n";
  ASSERT_TRUE(WriteFile(trace, records));
  const std::string stats_line =
      "INFO 07-28 06:42:09 [loggers.py:118] Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation "
      "throughput: 5.0 tokens/s, Running: 3 reqs, Waiting: 1 reqs, GPU KV cache usage: 12.5%, Prefix cache hit "
      "rate: 40.0%\n";
  ASSERT_TRUE(WriteFile(log, ""));
  const int closed_http = PickFreePort();
  const int closed_zmq = PickFreePort();
  const std::string config =
      "replica: docs\n"
      "bytes_per_token: 131072\n"
      "web: {port: 0}\n"
      "curve:\n  capacities: [200, 2000]\n  policies: [s3fifo, vllm]\n"
      "tenants: {isolated: true}\n"
      "alerts: {evaluation_interval: 1s}\n"
      "collectors:\n"
      "  trace_files:\n    - {name: requests, paths: [\"" +
      trace +
      "\"], start_at: beginning, poll_interval: 50ms}\n"
      "  engine_log:\n    - {name: vllm-log, paths: [\"" +
      log +
      "\"], engine: vllm}\n"
      "  engine_metrics:\n    - {name: vllm-metrics, url: \"http://127.0.0.1:" +
      std::to_string(closed_http) +
      "/metrics\", interval: 1s, timeout: 1s}\n"
      "  kv_events:\n    - {name: vllm-events, endpoints: [\"tcp://127.0.0.1:" +
      std::to_string(closed_zmq) + "\"]}\n";
  std::string error;
  auto agent = AgentProcess::Start(dir.path(), "agent", config, &error);
  ASSERT_NE(agent, nullptr) << error;
  ASSERT_TRUE(agent->WaitForRequests(200)) << agent->Stderr();
  // The log collector starts at the end of its file (every collector has polled
  // once by now): the stats line is a new one.
  ASSERT_TRUE(AppendFile(log, stats_line));
  // The log line parsed and an alert evaluation done: their families are there.
  ASSERT_TRUE(PollUntil(
      [&] {
        return agent->Value("kvwatch_engine_log_lines_total", {{"collector", "vllm-log"}}) >= 1 &&
               agent->Value("kvwatch_alert_evaluations_total") >= 1;
      },
      kIngestTimeout))
      << agent->Stderr();
  const HttpResult scrape = agent->Get("/metrics");
  ASSERT_EQ(scrape.status, 200) << scrape.error;
  const auto families = Families(scrape.body);
  // Not vacuous: each component's families are in this scrape.
  for (const char* name :
       {"kvwatch_page_hit_ratio", "kvwatch_group_isolated_page_hit_ratio", "kvwatch_policy_gain_ratio",
        "kvwatch_engine_kv_cache_usage_ratio", "kvwatch_kv_events_batches_total", "kvwatch_engine_log_lines_total",
        "kvwatch_engine_scrape_backoff_seconds", "kvwatch_alert_state", "process_open_fds"}) {
    EXPECT_TRUE(families.count(name)) << name << " is not in the scrape:\n" << Tail(scrape.body);
  }
  ExpectDocumented(families, "a live agent");
  EXPECT_TRUE(agent->Stop().has_value());
}

}  // namespace
}  // namespace kvwatch::agent
