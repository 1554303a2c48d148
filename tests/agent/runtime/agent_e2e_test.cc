// Acceptance test of the live agent, end to end: `kvwatch agent` tails a trace
// file while the test writes it in batches, a real Prometheus scrapes the agent
// every second, and what Prometheus stores must equal what `kvwatch replay`
// computes offline for the same records:
//   - kvwatch_requests_total and kvwatch_page_references_total: replay's requests
//     and page_refs;
//   - kvwatch_page_hit_capacity_pages_bucket{le=X}, for every le the agent
//     exposes: replay's page_hits at capacity X (the prefix rule makes the
//     cumulative histogram exact at its bounds);
//   - kvwatch_request_required_capacity_pages_bucket{le=X}: replay's
//     request_coverage at X times its requests.
// Also: `promtool check metrics` accepts /metrics, /healthz and /readyz answer,
// /api/v1/windows and /api/v1/curve are JSON and the curve's window holds every
// record written.
//
// Records: the first lines of the real Mooncake conversation trace when the
// shared data is present, else `kvwatch synth` output; each record's timestamp
// is the wall time at the test's start, as a live trace carries the time it was
// written. Skips when
// prometheus or promtool is not installed.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/agent/testing_agent.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers

constexpr std::size_t kRecords = 3000;
constexpr std::uint64_t kMaxPages = 1048576;  // engine.max_pages default
constexpr int kBatches = 5;

struct TraceInput {
  std::vector<Record> records;
  std::uint64_t page_tokens = 16;
  std::string source;
};

// The first kRecords lines of the Mooncake conversation trace, or synth output.
TraceInput LoadRecords() {
  TraceInput in;
  const std::string mooncake = std::string(KVWATCH_SHARED_DATA) + "/mooncake/conversation_trace.jsonl";
  if (std::filesystem::exists(mooncake)) {
    std::ifstream f(mooncake);
    std::string text, line;
    for (std::size_t i = 0; i < kRecords && std::getline(f, line); ++i) text += line + "\n";
    if (auto parsed = ParseRecords(text); parsed && parsed->size() == kRecords) {
      in.records = std::move(*parsed);
      in.page_tokens = 512;  // the Mooncake traces' block size
      in.source = mooncake;
      return in;
    }
  }
  CommandResult synth = RunCommand(
      {KVWATCH_BINARY, "synth", "--requests", std::to_string(kRecords), "--duration", "0", "-o", "-"}, Millis(60000));
  if (!synth.Exited(0)) return in;
  if (auto parsed = ParseRecords(synth.out)) in.records = std::move(*parsed);
  in.source = "kvwatch synth";
  return in;
}

// Every finite le of a histogram in the agent's exposition, ascending.
std::vector<std::uint64_t> BucketBounds(const collectors::Exposition& e, const std::string& bucket_name) {
  std::set<std::uint64_t> les;
  for (const collectors::Sample& s : e.samples) {
    if (s.name != bucket_name) continue;
    const auto le = s.Label("le");
    if (!le || *le == "+Inf") continue;
    les.insert(static_cast<std::uint64_t>(std::llround(std::strtod(std::string(*le).c_str(), nullptr))));
  }
  return {les.begin(), les.end()};
}

// Prometheus' samples of one histogram's buckets by their finite le.
std::map<std::uint64_t, double> ByLe(const std::vector<PromSample>& samples, const std::string& bucket_name) {
  std::map<std::uint64_t, double> out;
  for (const PromSample& s : samples) {
    auto name = s.labels.find("__name__");
    auto le = s.labels.find("le");
    if (name == s.labels.end() || name->second != bucket_name || le == s.labels.end() || le->second == "+Inf") {
      continue;
    }
    out[static_cast<std::uint64_t>(std::llround(std::strtod(le->second.c_str(), nullptr)))] = s.value;
  }
  return out;
}

double Named(const std::vector<PromSample>& samples, const std::string& name) {
  for (const PromSample& s : samples) {
    auto n = s.labels.find("__name__");
    if (n != s.labels.end() && n->second == name) return s.value;
  }
  return std::nan("");
}

TEST(AgentEndToEndTest, PrometheusSeriesEqualReplayOfTheSameRecords) {
  const std::string promtool = FindProgram("promtool");
  if (!PrometheusProcess::Available() || promtool.empty()) {
    GTEST_SKIP() << "prometheus and promtool are not installed (Debian: prometheus)";
  }
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const TraceInput input = LoadRecords();
  ASSERT_EQ(input.records.size(), kRecords) << "could not read records from " << input.source;
  std::printf("records: %zu from %s\n", input.records.size(), input.source.c_str());

  // The agent starts on an empty file that the test then writes.
  const std::string trace = dir.Sub("trace.jsonl");
  ASSERT_TRUE(WriteFile(trace, ""));
  const std::string config = "web: {port: 0}\npage_tokens: " + std::to_string(input.page_tokens) +
                             "\ncurve:\n  windows: [\"5m\", \"1h\"]\n  capacities: [100, 1000, 3000]\n"
                             "collectors:\n  trace_files:\n" +
                             TraceFileCollectorYaml("trace", trace);
  std::string error;
  auto agent = AgentProcess::Start(dir.path(), "agent", config, &error);
  ASSERT_NE(agent, nullptr) << error;
  auto prometheus = PrometheusProcess::Start(dir.path(), {agent->port()}, &error);
  ASSERT_NE(prometheus, nullptr) << error;

  // Write the records in batches whose boundaries fall inside a line: the agent
  // must count exactly the complete lines after each batch.
  std::string all;
  for (std::size_t i = 0; i < input.records.size(); ++i) all += Stamped(input.records[i].json, WallNowMs()) + "\n";
  std::size_t written = 0;
  for (int b = 1; b <= kBatches; ++b) {
    std::size_t end = all.size() * b / kBatches;
    if (b < kBatches) end = all.find('\n', end) + 10;  // a few bytes into the next line
    ASSERT_TRUE(AppendFile(trace, all.substr(written, end - written)));
    written = end;
    const auto complete = static_cast<double>(std::count(all.begin(), all.begin() + written, '\n'));
    ASSERT_TRUE(agent->WaitForRequests(complete))
        << "after batch " << b << " the agent should count the " << complete
        << " complete lines; kvwatch_requests_total=" << agent->Value("kvwatch_requests_total") << "\nstderr:\n"
        << Tail(agent->Stderr());
  }

  // The agent's own view, and what replay computes at every one of its bounds.
  auto exposition = agent->Metrics(&error);
  ASSERT_TRUE(exposition.has_value()) << error;
  EXPECT_TRUE(exposition->errors.empty())
      << "exposition line " << exposition->errors.front().line << ": " << exposition->errors.front().reason;
  const std::vector<std::uint64_t> hit_bounds = BucketBounds(*exposition, "kvwatch_page_hit_capacity_pages_bucket");
  const std::vector<std::uint64_t> req_bounds =
      BucketBounds(*exposition, "kvwatch_request_required_capacity_pages_bucket");
  ASSERT_GT(hit_bounds.size(), 100u);
  ASSERT_EQ(hit_bounds, req_bounds);
  EXPECT_EQ(hit_bounds.back(), kMaxPages);
  for (std::uint64_t c : {100u, 1000u, 3000u}) {
    EXPECT_TRUE(std::binary_search(hit_bounds.begin(), hit_bounds.end(), c)) << "curve.capacities " << c;
  }
  auto replay = RunReplay(trace, hit_bounds, input.page_tokens, kMaxPages);
  ASSERT_TRUE(replay.ok()) << replay.error();
  const ReplayCurve& want = replay.value();
  ASSERT_EQ(want.requests, kRecords);
  ASSERT_EQ(want.page_hits.size(), hit_bounds.size());

  // Prometheus: wait for a scrape that saw every record, then read every series
  // from that one evaluation.
  double scraped = std::nan("");
  ASSERT_TRUE(PollUntil(
      [&] {
        auto q = prometheus->Query("kvwatch_requests_total");
        scraped = q.ok() && q.value().size() == 1 ? q.value()[0].value : std::nan("");
        return scraped == static_cast<double>(kRecords);
      },
      kIngestTimeout, Millis(200)))
      << "Prometheus did not scrape kvwatch_requests_total=" << kRecords << " (last: " << scraped << ")\nlog:\n"
      << Tail(prometheus->Log());
  auto up = prometheus->Query("up{job=\"kvwatch\"}");
  ASSERT_TRUE(up.ok()) << up.error();
  ASSERT_EQ(up.value().size(), 1u);
  EXPECT_EQ(up.value()[0].value, 1.0);
  auto series = prometheus->Query(
      "{__name__=~\"kvwatch_requests_total|kvwatch_page_references_total|kvwatch_page_cold_misses_total|"
      "kvwatch_page_beyond_tracked_total|kvwatch_page_hit_capacity_pages_bucket|"
      "kvwatch_request_required_capacity_pages_bucket|kvwatch_request_required_capacity_pages_count\"}");
  ASSERT_TRUE(series.ok()) << series.error();
  const std::vector<PromSample>& got = series.value();

  EXPECT_EQ(Named(got, "kvwatch_requests_total"), static_cast<double>(want.requests));
  EXPECT_EQ(Named(got, "kvwatch_request_required_capacity_pages_count"), static_cast<double>(want.requests));
  EXPECT_EQ(Named(got, "kvwatch_page_references_total"), static_cast<double>(want.page_refs));
  EXPECT_EQ(Named(got, "kvwatch_page_references_total"),
            static_cast<double>(TotalPages(input.records, 0, input.records.size())));
  EXPECT_EQ(Named(got, "kvwatch_page_cold_misses_total"), static_cast<double>(want.cold_misses));
  EXPECT_EQ(Named(got, "kvwatch_page_beyond_tracked_total"), static_cast<double>(want.beyond_tracked));

  const auto hits = ByLe(got, "kvwatch_page_hit_capacity_pages_bucket");
  const auto covered = ByLe(got, "kvwatch_request_required_capacity_pages_bucket");
  ASSERT_EQ(hits.size(), hit_bounds.size()) << "Prometheus lacks some le series of the page hit histogram";
  ASSERT_EQ(covered.size(), hit_bounds.size()) << "Prometheus lacks some le series of the coverage histogram";
  int mismatches = 0;
  for (std::uint64_t le : hit_bounds) {
    const double want_hits = static_cast<double>(want.page_hits.at(le));
    const double want_covered = std::round(want.request_coverage.at(le) * static_cast<double>(want.requests));
    if (hits.at(le) != want_hits || covered.at(le) != want_covered) ++mismatches;
    EXPECT_EQ(hits.at(le), want_hits) << "page hits at le=" << le;
    EXPECT_EQ(covered.at(le), want_covered) << "covered requests at le=" << le;
    if (mismatches > 10) break;
  }
  // The curve is not trivial: some capacity hits less than the unlimited cache.
  EXPECT_LT(hits.at(hit_bounds.front()), hits.at(hit_bounds.back()));

  // Window gauges at the configured capacities: every record is in both windows.
  for (std::uint64_t c : {100u, 1000u, 3000u}) {
    for (const char* w : {"5m", "1h"}) {
      const auto ratio =
          SampleValue(*exposition, "kvwatch_page_hit_ratio", {{"window", w}, {"capacity_pages", std::to_string(c)}});
      ASSERT_TRUE(ratio.has_value()) << "kvwatch_page_hit_ratio{window=" << w << ",capacity_pages=" << c << "}";
      EXPECT_NEAR(*ratio, want.page_hit_ratio.at(c), 1e-12) << "window " << w << " capacity " << c;
    }
  }

  // promtool's linter accepts the exposition.
  const HttpResult metrics = agent->Get("/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.error;
  EXPECT_NE(metrics.content_type.find("text/plain"), std::string::npos) << metrics.content_type;
  EXPECT_NE(metrics.content_type.find("version=0.0.4"), std::string::npos) << metrics.content_type;
  const std::string body_file = dir.Sub("metrics.prom");
  ASSERT_TRUE(WriteFile(body_file, metrics.body));
  CommandResult lint = RunCommand({promtool, "check", "metrics"}, Millis(60000), body_file);
  EXPECT_TRUE(lint.Exited(0)) << "promtool check metrics: " << lint.Describe();

  // Health, readiness and the JSON API.
  const HttpResult health = agent->Get("/healthz");
  EXPECT_EQ(health.status, 200) << health.error;
  const HttpResult ready = agent->Get("/readyz");
  EXPECT_EQ(ready.status, 200) << ready.error;
  simdjson::dom::parser parser;
  const HttpResult windows = agent->Get("/api/v1/windows");
  ASSERT_EQ(windows.status, 200) << windows.error;
  simdjson::dom::array window_names;
  ASSERT_EQ(parser.parse(windows.body)["windows"].get(window_names), simdjson::SUCCESS) << windows.body;
  std::vector<std::string> names;
  for (simdjson::dom::element n : window_names) names.emplace_back(std::string_view(n));
  EXPECT_EQ(names, (std::vector<std::string>{"5m", "1h"}));
  for (const std::string& w : names) {
    const HttpResult curve = agent->Get("/api/v1/curve?window=" + w);
    ASSERT_EQ(curve.status, 200) << curve.error;
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(curve.body).get(doc), simdjson::SUCCESS) << Tail(curve.body, 400);
    std::string_view window;
    std::uint64_t requests = 0, page_refs = 0;
    simdjson::dom::array points, plot;
    ASSERT_EQ(doc["window"].get(window), simdjson::SUCCESS);
    ASSERT_EQ(doc["requests"].get(requests), simdjson::SUCCESS);
    ASSERT_EQ(doc["page_refs"].get(page_refs), simdjson::SUCCESS);
    ASSERT_EQ(doc["points"].get(points), simdjson::SUCCESS);
    ASSERT_EQ(doc["plot"].get(plot), simdjson::SUCCESS);
    EXPECT_EQ(window, w);
    EXPECT_EQ(requests, kRecords) << "window " << w << " should hold every record written";
    EXPECT_EQ(page_refs, want.page_refs) << "window " << w;
    EXPECT_EQ(points.size(), 3u) << "one point per curve.capacities entry";
    EXPECT_GT(plot.size(), 0u);
  }
  EXPECT_EQ(agent->Get("/api/v1/curve?window=7d").status, 404);

  const auto agent_exit = agent->Stop();
  EXPECT_EQ(DescribeWaitStatus(agent_exit), "exit 0") << Tail(agent->Stderr());
  const auto prom_exit = prometheus->Stop();
  EXPECT_EQ(DescribeWaitStatus(prom_exit), "exit 0") << Tail(prometheus->Log());
}

}  // namespace
}  // namespace kvwatch::agent
