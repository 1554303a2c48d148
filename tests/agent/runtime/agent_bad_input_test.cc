// Acceptance test of the agent against bad input: invalid JSON, binary garbage,
// a 10 MB line (max_line_bytes is 1 MiB by default), negative page ids, records
// without hash_ids or that are not objects, and a glob that matches nothing until
// its directory and file are created while the agent runs. None of it may stop
// the agent: it keeps serving, every good record around the bad ones is counted
// (and parsed intact: the page references add up), kvwatch_collector_errors_total
// counts the bad ones by reason, and stderr names the file and line of each.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/agent/testing_agent.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers

enum class Kind { kGood, kBadRecord, kTooLong };

struct Line {
  std::string text;  // without '\n'
  Kind kind = Kind::kGood;
  std::size_t pages = 0;
  std::size_t number = 0;  // 1-based line number in the file
};

// Deterministic bytes that are neither JSON nor line breaks; not starting with
// NUL (the tailer skips NULs at a line's start) and holding one in the middle.
std::string BinaryGarbage(std::size_t n) {
  std::string out;
  std::uint32_t x = 12345;
  while (out.size() < n) {
    x = x * 1103515245u + 12345u;
    const char c = static_cast<char>((x >> 16) & 0xff);
    if (c == '\n' || c == '\r' || (out.empty() && (c == '\0' || c == ' ' || c == '\t'))) continue;
    out.push_back(c);
  }
  out[n / 2] = '\0';
  return out;
}

// A syntactically valid record of about `bytes` bytes (too long to be read).
std::string HugeRecord(std::size_t bytes) {
  std::string out = "{\"timestamp\": 1, \"hash_ids\": [";
  for (std::uint64_t i = 0; out.size() < bytes; ++i) out += std::to_string(1000000 + i) + ", ";
  return out + "0]}";
}

class AgentBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dir_.ok()); }

  // Appends lines to the trace, numbering them.
  std::string Add(std::vector<Line> lines) {
    std::string bytes;
    for (Line& l : lines) {
      l.number = ++line_count_;
      bytes += l.text + "\n";
      lines_.push_back(l);
    }
    return bytes;
  }
  std::vector<Line> Good(const std::vector<Record>& records, std::size_t begin, std::size_t end) {
    std::vector<Line> out;
    for (std::size_t i = begin; i < end; ++i) {
      out.push_back({Stamped(records[i].json, WallNowMs()), Kind::kGood, records[i].pages});
    }
    return out;
  }
  std::size_t Count(Kind kind) const {
    std::size_t n = 0;
    for (const Line& l : lines_) n += l.kind == kind;
    return n;
  }

  TempDir dir_{"kvwatch_bad_input"};
  std::vector<Line> lines_;
  std::size_t line_count_ = 0;
};

TEST_F(AgentBadInputTest, BadLinesAreCountedAndLoggedAndNeverStopTheAgent) {
  const std::vector<Record> records = SynthRecords(200);
  ASSERT_EQ(records.size(), 200u);
  const std::string trace = dir_.Sub("bad.jsonl");
  const std::string late_dir = dir_.Sub("late");  // does not exist yet
  const std::string late_glob = late_dir + "/*.jsonl";

  // Before the agent starts: good lines around invalid JSON.
  auto with = [&](std::vector<Line> a, std::vector<Line> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  std::string phase1 = Add(Good(records, 0, 50));
  phase1 += Add({{"{\"timestamp\": 1, \"hash_ids\": [1, 2", Kind::kBadRecord}});
  phase1 += Add(Good(records, 50, 80));
  ASSERT_TRUE(WriteFile(trace, phase1));

  const std::string config = "web: {port: 0}\ncurve: {windows: [\"1h\"]}\ncollectors:\n  trace_files:\n" +
                             TraceFileCollectorYaml("bad", trace) + TraceFileCollectorYaml("late", late_glob);
  std::string error;
  auto agent = AgentProcess::Start(dir_.path(), "agent", config, &error);
  ASSERT_NE(agent, nullptr) << error;
  ASSERT_TRUE(agent->WaitForRequests(80)) << "kvwatch_requests_total=" << agent->Value("kvwatch_requests_total") << "\n"
                                          << Tail(agent->Stderr());

  // While it runs: garbage, a 10 MB line, negative ids, a record without
  // hash_ids and a JSON array, each between good records.
  std::string phase2 = Add(with({{BinaryGarbage(3000), Kind::kBadRecord}}, Good(records, 80, 100)));
  phase2 += Add(with({{HugeRecord(10u << 20), Kind::kTooLong}}, Good(records, 100, 120)));
  phase2 += Add(with({{"{\"timestamp\": 5, \"hash_ids\": [7, -3, 9]}", Kind::kBadRecord}}, Good(records, 120, 150)));
  phase2 += Add(with({{"{\"timestamp\": 6, \"input_length\": 5}", Kind::kBadRecord}}, Good(records, 150, 170)));
  phase2 += Add(with({{"[\"not\", \"an\", \"object\"]", Kind::kBadRecord}}, Good(records, 170, 200)));
  ASSERT_TRUE(AppendFile(trace, phase2));
  ASSERT_TRUE(agent->WaitForRequests(200)) << "the agent should count all 200 good records; kvwatch_requests_total="
                                           << agent->Value("kvwatch_requests_total") << "\n"
                                           << Tail(agent->Stderr());
  EXPECT_EQ(agent->Get("/healthz").status, 200);

  // The glob's directory and file appear only now.
  const std::vector<Record> late = SynthRecords(40, 2);
  ASSERT_TRUE(std::filesystem::create_directories(late_dir));
  ASSERT_TRUE(WriteFile(late_dir + "/requests.jsonl", JsonLines(late, 0, late.size(), WallNowMs())));
  ASSERT_TRUE(agent->WaitForRequests(240))
      << "the late file's 40 records should be read; kvwatch_requests_total=" << agent->Value("kvwatch_requests_total")
      << "\n"
      << Tail(agent->Stderr());

  // Counters, by collector and reason.
  auto metrics = agent->Metrics(&error);
  ASSERT_TRUE(metrics.has_value()) << error;
  const collectors::Exposition& m = *metrics;
  auto value = [&](const std::string& name, const LabelMap& labels) {
    return SampleValue(m, name, labels).value_or(-1);
  };
  ASSERT_EQ(Count(Kind::kGood), 200u);
  EXPECT_EQ(value("kvwatch_collector_records_total", {{"collector", "bad"}}), 200);
  EXPECT_EQ(value("kvwatch_collector_errors_total", {{"collector", "bad"}, {"reason", "bad_record"}}),
            static_cast<double>(Count(Kind::kBadRecord)));
  EXPECT_EQ(value("kvwatch_collector_errors_total", {{"collector", "bad"}, {"reason", "line_too_long"}}),
            static_cast<double>(Count(Kind::kTooLong)));
  EXPECT_EQ(value("kvwatch_collector_up", {{"collector", "bad"}}), 1);
  EXPECT_EQ(value("kvwatch_collector_records_total", {{"collector", "late"}}), 40);
  EXPECT_EQ(value("kvwatch_collector_up", {{"collector", "late"}}), 1);
  for (const collectors::Sample& s : m.samples) {
    if (s.name == "kvwatch_collector_errors_total" && s.Label("collector") == "late") {
      ADD_FAILURE() << "the late collector reported errors: reason=" << *s.Label("reason") << " " << s.value;
    }
  }
  // The good records were parsed intact, before and after each bad line.
  std::uint64_t pages = TotalPages(late, 0, late.size());
  for (const Line& l : lines_) pages += l.pages;
  EXPECT_EQ(value("kvwatch_page_references_total", {}), static_cast<double>(pages));
  EXPECT_EQ(value("kvwatch_requests_total", {}), 240);

  // stderr names the file and line of each bad line.
  const std::string log = agent->Stderr();
  for (const Line& l : lines_) {
    if (l.kind == Kind::kBadRecord) {
      const std::string where = trace + ":" + std::to_string(l.number) + ":";
      EXPECT_NE(log.find(where), std::string::npos) << "stderr should say " << where << "\n" << Tail(log);
    } else if (l.kind == Kind::kTooLong) {
      const std::string where = trace + ": line " + std::to_string(l.number) + " ";
      EXPECT_NE(log.find(where), std::string::npos) << "stderr should say " << where << "\n" << Tail(log);
    }
  }

  // Still serving, and it stops cleanly.
  EXPECT_TRUE(agent->Running());
  EXPECT_EQ(agent->Get("/healthz").status, 200);
  EXPECT_EQ(agent->Get("/readyz").status, 200);
  EXPECT_EQ(agent->Get("/api/v1/curve?window=1h").status, 200);
  EXPECT_EQ(agent->Value("kvwatch_window_requests", {{"window", "1h"}}), 240);
  EXPECT_EQ(DescribeWaitStatus(agent->Stop()), "exit 0") << Tail(agent->Stderr());
}

// One record from the far future (1e15 ms: the year 33658) among 2,000 good ones
// in files found by a glob: it is bad input, counted and logged with its file's
// path and line, and the windows' clock stays with the good records, so every one
// of them counts in the window (it used to count 1 after 2,001 requests). A bad
// line in the glob's second file is logged with that file's path, not the glob.
TEST_F(AgentBadInputTest, FarFutureRecordIsRejectedAndEveryGoodRecordCountsInTheWindows) {
  const std::vector<Record> records = SynthRecords(2000);
  ASSERT_EQ(records.size(), 2000u);
  const std::string traces = dir_.Sub("traces");
  ASSERT_TRUE(std::filesystem::create_directories(traces));
  const std::string first = traces + "/a.jsonl", second = traces + "/b.jsonl";
  const std::int64_t now_ms = WallNowMs();
  auto good = [&](std::size_t begin, std::size_t end) { return JsonLines(records, begin, end, now_ms); };
  // a.jsonl: 2 good records, the future one (line 3), 998 good ones.
  ASSERT_TRUE(WriteFile(first, good(0, 2) + "{\"timestamp\": 1e15, \"hash_ids\": [10]}\n" + good(2, 1000)));
  // b.jsonl: 500 good records, a broken one (line 501), 500 good ones.
  ASSERT_TRUE(WriteFile(second, good(1000, 1500) + "{\"timestamp\": 1, \"hash_ids\": [1,\n" + good(1500, 2000)));

  const std::string config =
      "web: {port: 0}\ncurve: {windows: [\"5m\", \"1h\"], max_clock_skew: 1m}\n"
      "collectors:\n  trace_files:\n" +
      TraceFileCollectorYaml("glob", traces + "/*.jsonl");
  std::string error;
  auto agent = AgentProcess::Start(dir_.path(), "agent", config, &error);
  ASSERT_NE(agent, nullptr) << error;
  ASSERT_TRUE(agent->WaitForRequests(2000))
      << "kvwatch_requests_total=" << agent->Value("kvwatch_requests_total") << "\n"
      << Tail(agent->Stderr());
  auto metrics = agent->Metrics(&error);
  ASSERT_TRUE(metrics.has_value()) << error;
  auto value = [&](const std::string& name, const LabelMap& labels) {
    return SampleValue(*metrics, name, labels).value_or(-1);
  };
  EXPECT_EQ(value("kvwatch_requests_total", {}), 2000);
  EXPECT_EQ(value("kvwatch_window_requests", {{"window", "5m"}}), 2000);
  EXPECT_EQ(value("kvwatch_window_requests", {{"window", "1h"}}), 2000);
  EXPECT_EQ(value("kvwatch_collector_errors_total", {{"collector", "glob"}, {"reason", "future_timestamp"}}), 1);
  EXPECT_EQ(value("kvwatch_collector_errors_total", {{"collector", "glob"}, {"reason", "bad_record"}}), 1);
  EXPECT_EQ(value("kvwatch_page_references_total", {}), static_cast<double>(TotalPages(records, 0, 2000)));

  const std::string log = agent->Stderr();
  EXPECT_NE(log.find(first + ":3: timestamp 1000000000000 s is "), std::string::npos) << Tail(log);
  EXPECT_NE(log.find("curve.max_clock_skew 60 s"), std::string::npos) << Tail(log);
  EXPECT_NE(log.find(second + ":501: "), std::string::npos) << Tail(log);
  EXPECT_EQ(log.find("*.jsonl:"), std::string::npos) << "a bad line is logged with its file, not the glob\n"
                                                     << Tail(log);
  EXPECT_EQ(DescribeWaitStatus(agent->Stop()), "exit 0") << Tail(agent->Stderr());
}

}  // namespace
}  // namespace kvwatch::agent
