// The agent's window clock with records that carry their own time base: Mooncake
// and `kvwatch synth` timestamps count from the trace's start, far behind the wall
// clock. Records appended after the agent has been idle must still count in the
// windows (a regression: the wall clock used to run ahead of them, so every such
// record was "late").
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "agent/runtime/agent.h"
#include "collectors/exposition_parser.h"
#include "collectors/time_sanity.h"
#include "tests/agent/testing_agent.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers

TEST(AgentClockTest, RelativeTimestampsCountInWindowsAfterIdle) {
  TempDir dir;
  const std::string trace = (std::filesystem::path(dir.path()) / "trace.jsonl").string();
  ASSERT_TRUE(WriteFile(trace, ""));
  const std::string yaml = "web: {port: 0}\ncurve: {windows: [5m, 1h]}\ncollectors:\n  trace_files:\n" +
                           TraceFileCollectorYaml("trace", trace);
  std::string error;
  auto agent = AgentProcess::Start(dir.path(), "agent", yaml, &error);
  ASSERT_NE(agent, nullptr) << error;
  // Let the loop tick idle for a while before anything arrives.
  ASSERT_TRUE(agent->WaitForRequests(0));
  ASSERT_FALSE(PollUntil([] { return false; }, Millis(300)));

  const std::vector<Record> records = SynthRecords(300);  // timestamps from 0 s on
  std::string text;
  for (const Record& r : records) text += r.json + "\n";
  {
    std::ofstream f(trace, std::ios::app);
    f << text;
  }
  ASSERT_TRUE(agent->WaitForRequests(300)) << agent->Stderr();
  EXPECT_EQ(agent->Value("kvwatch_window_late_requests_total"), 0);
  // The synth records span about 15 s of their own time: all in both windows.
  EXPECT_EQ(agent->Value("kvwatch_window_requests", {{"window", "5m"}}), 300);
  EXPECT_EQ(agent->Value("kvwatch_window_requests", {{"window", "1h"}}), 300);
  EXPECT_EQ(agent->Stop(), 0);
}

// The agent's backstop, for requests that reach it without a collector's check:
// a timestamp beyond wall + curve.max_clock_skew is treated as absent (the request
// counts at the clock's time) and never moves the windows' clock, so the requests
// after it still count in the windows.
TEST(AgentClockTest, FutureTimestampNeverMovesTheWindowsClock) {
  AgentOptions o;
  o.curve.windows = {{"5m", 300}};
  o.curve.max_clock_skew_s = 60;
  o.http.port = 0;
  auto created = Agent::Create(std::move(o));
  ASSERT_TRUE(created.ok()) << created.error();
  Agent& agent = *created.value();
  const double now = collectors::WallNow();
  curve::Request r;
  r.pages = {1, 2, 3};
  r.timestamp_s = now;
  agent.OnRequest(r);
  r.timestamp_s = now + 3600;  // an hour ahead: beyond the skew
  agent.OnRequest(r);
  r.timestamp_s = now + 30;  // within the skew: a real timestamp
  agent.OnRequest(r);
  for (int i = 0; i < 100; ++i) {
    r.timestamp_s = now + 30;
    agent.OnRequest(r);
  }
  const collectors::Exposition e = collectors::ParseExposition(agent.RenderMetrics());
  EXPECT_EQ(SampleValue(e, "kvwatch_requests_total").value_or(-1), 103);
  EXPECT_EQ(SampleValue(e, "kvwatch_window_requests", {{"window", "5m"}}).value_or(-1), 103);
  EXPECT_EQ(SampleValue(e, "kvwatch_window_late_requests_total").value_or(-1), 0);
}

}  // namespace
}  // namespace kvwatch::agent
