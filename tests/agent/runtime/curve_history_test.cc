// The agent's history of its windows (agent/runtime/curve_history.h): when a sample
// is due, how the kept samples thin out, how working sets are matched to targets,
// its JSON (GET /api/v1/history), and the agent sampling its real windows.
#include "agent/runtime/curve_history.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <string>
#include <vector>

#include "agent/render/api_json.h"
#include "agent/runtime/agent.h"
#include "collectors/synth.h"
#include "curve/report.h"

namespace kvwatch::agent {
namespace {

// A report whose requests, knee and page-hit working sets (0.9, 0.95) are given.
curve::CurveReport Report(std::uint64_t requests, std::optional<std::uint64_t> knee, std::uint64_t ws90,
                          std::optional<std::uint64_t> ws95) {
  curve::CurveReport r;
  r.requests = requests;
  if (knee) r.knee = curve::CapacityKnee{*knee};
  // Out of the targets' order, and with a target the history does not keep.
  r.working_set.push_back({"page_hit", 0.95, ws95, std::nullopt});
  r.working_set.push_back({"request_coverage", 0.9, 7, std::nullopt});
  r.working_set.push_back({"page_hit", 0.9, ws90, std::nullopt});
  return r;
}

std::vector<HistoryApiContext::Target> Targets() { return {{"page_hit", 0.9}, {"page_hit", 0.95}}; }

TEST(CurveHistoryTest, TargetsAreThePageHitThenTheCoverageOnes) {
  const auto targets = HistoryTargets({0.5, 0.9}, {0.99});
  ASSERT_EQ(targets.size(), 3u);
  EXPECT_EQ(targets[0].target, "page_hit");
  EXPECT_EQ(targets[1].fraction, 0.9);
  EXPECT_EQ(targets[2].target, "request_coverage");
  EXPECT_EQ(targets[2].fraction, 0.99);
}

TEST(CurveHistoryTest, DueFirstThenEveryInterval) {
  CurveHistory h(1, Targets(), 10, 5);
  EXPECT_TRUE(h.Due(1000));
  h.Record(1000, {Report(1, std::nullopt, 10, 20)});
  EXPECT_FALSE(h.Due(1000));
  EXPECT_FALSE(h.Due(1004.9));
  EXPECT_TRUE(h.Due(1005));
  EXPECT_TRUE(h.Due(999)) << "a clock that stepped back must not stop the sampling";
}

TEST(CurveHistoryTest, SamplesMatchTargetsByTargetAndFraction) {
  CurveHistory h(2, Targets(), 10, 5);
  h.Record(100, {Report(40, 123, 300, std::nullopt), Report(90, std::nullopt, 500, 800)});
  const auto w0 = h.Points(0), w1 = h.Points(1);
  ASSERT_EQ(w0.size(), 1u);
  ASSERT_EQ(w1.size(), 1u);
  EXPECT_EQ(w0[0].time_s, 100);
  EXPECT_EQ(w0[0].sample.requests, 40u);
  EXPECT_EQ(w0[0].sample.knee_pages, std::optional<std::uint64_t>(123));
  ASSERT_EQ(w0[0].sample.working_set_pages.size(), 2u);
  EXPECT_EQ(w0[0].sample.working_set_pages[0], std::optional<std::uint64_t>(300));
  EXPECT_EQ(w0[0].sample.working_set_pages[1], std::nullopt);  // not converged
  EXPECT_EQ(w1[0].sample.knee_pages, std::nullopt);
  EXPECT_EQ(w1[0].sample.working_set_pages[1], std::optional<std::uint64_t>(800));
  EXPECT_TRUE(h.Points(2).empty());
}

TEST(CurveHistoryTest, AMissingReportIsAnEmptyWindow) {
  CurveHistory h(2, Targets(), 10, 5);
  h.Record(100, {Report(40, 123, 300, 400)});
  const auto w1 = h.Points(1);
  ASSERT_EQ(w1.size(), 1u);
  EXPECT_EQ(w1[0].sample.requests, 0u);
  EXPECT_EQ(w1[0].sample.working_set_pages.size(), 2u);
}

TEST(CurveHistoryTest, WhenFullEveryOtherSampleGoesAndTheIntervalDoubles) {
  CurveHistory h(1, Targets(), 4, 5);
  for (int k = 0; k < 4; ++k) h.Record(5.0 * k, {Report(static_cast<std::uint64_t>(k), std::nullopt, 1, 1)});
  EXPECT_EQ(h.Points(0).size(), 4u);
  EXPECT_EQ(h.interval_s(), 5);
  h.Record(20, {Report(4, std::nullopt, 1, 1)});
  auto points = h.Points(0);
  ASSERT_EQ(points.size(), 3u);  // 0 and 10 kept, 20 added
  EXPECT_EQ(points[0].time_s, 0);
  EXPECT_EQ(points[1].time_s, 10);
  EXPECT_EQ(points[2].time_s, 20);
  EXPECT_EQ(points[1].sample.requests, 2u);
  EXPECT_EQ(h.interval_s(), 10);
  EXPECT_FALSE(h.Due(25));
  EXPECT_TRUE(h.Due(30));
  // Bounded however long it runs; the oldest sample stays.
  for (int k = 0; k < 1000; ++k) h.Record(30.0 + 1e4 * k, {Report(1, std::nullopt, 1, 1)});
  points = h.Points(0);
  EXPECT_LE(points.size(), 4u);
  EXPECT_EQ(points.front().time_s, 0);
  for (std::size_t i = 1; i < points.size(); ++i) EXPECT_LT(points[i - 1].time_s, points[i].time_s);
}

TEST(CurveHistoryTest, AClockThatStepsBackStartsAgain) {
  CurveHistory h(1, Targets(), 10, 5);
  h.Record(100, {Report(1, std::nullopt, 1, 1)});
  h.Record(105, {Report(2, std::nullopt, 1, 1)});
  h.Record(50, {Report(3, std::nullopt, 1, 1)});
  const auto points = h.Points(0);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].time_s, 50);
}

TEST(HistoryApiJsonTest, CarriesTargetsPointsBytesAndCapacities) {
  HistoryApiContext c;
  c.window = "5m";
  c.window_seconds = 300;
  c.replica = "r";
  c.interval_seconds = 5;
  c.bytes_per_page = 2097152;
  c.capacities = {2048};
  c.targets = Targets();
  c.points.push_back({1700000000.5, {12, 300, {400, std::nullopt}}});
  c.points.push_back({1700000005.5, {30, std::nullopt, {410, 900}}});
  const std::string json = RenderHistoryApiJson(c);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  EXPECT_EQ(std::string_view(doc["window"].get_string().value()), "5m");
  EXPECT_EQ(doc["interval_seconds"].get_double().value(), 5);
  EXPECT_EQ(doc["bytes_per_page"].get_double().value(), 2097152);
  EXPECT_EQ(doc["capacity_pages_configured"].at(0).get_uint64().value(), 2048u);
  EXPECT_EQ(std::string_view(doc["targets"].at(1)["target"].get_string().value()), "page_hit");
  EXPECT_EQ(doc["targets"].at(1)["fraction"].get_double().value(), 0.95);
  simdjson::dom::array points = doc["points"].get_array().value();
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points.at(0)["time"].get_double().value(), 1700000000.5);
  EXPECT_EQ(points.at(0)["requests"].get_uint64().value(), 12u);
  EXPECT_EQ(points.at(0)["knee_pages"].get_uint64().value(), 300u);
  EXPECT_TRUE(points.at(0)["working_set_pages"].at(1).is_null());
  EXPECT_TRUE(points.at(1)["knee_pages"].is_null());
  EXPECT_EQ(points.at(1)["working_set_pages"].at(1).get_uint64().value(), 900u);
  c.bytes_per_page.reset();
  EXPECT_NE(RenderHistoryApiJson(c).find("\"bytes_per_page\":null"), std::string::npos);
}

// The agent samples its own windows: the reports /api/v1/curve would give.
TEST(AgentHistoryTest, SamplesTheWindowsKneeAndWorkingSets) {
  AgentOptions o;
  o.curve.windows = {{"5m", 300}, {"1h", 3600}};
  o.curve.page_hit_targets = {0.9};
  o.curve.coverage_targets = {};
  o.bytes_per_token = 131072;
  o.http.port = 0;
  auto created = Agent::Create(std::move(o));
  ASSERT_TRUE(created.ok()) << created.error();
  Agent& agent = *created.value();
  collectors::SynthOptions so;
  so.duration_s = 0;
  so.max_requests = 2000;
  auto generator = collectors::SynthGenerator::Create(so);
  ASSERT_TRUE(generator.ok());
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  collectors::SynthRequest r;
  std::vector<curve::Request> requests;
  while (generator.value().Next(&r)) requests.push_back(r.request);
  const double first = requests.front().timestamp_s, last = requests.back().timestamp_s;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    requests[i].timestamp_s += now - 1 - last;  // the stream ends a second ago
    agent.OnRequest(requests[i]);
    if (i == 99) agent.RecordHistory(requests[i].timestamp_s);
  }
  agent.RecordHistory(now);
  ASSERT_GT(last - first, 0);

  simdjson::dom::parser parser;
  const std::string json = agent.RenderHistoryJson("5m");
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  EXPECT_EQ(doc["bytes_per_page"].get_double().value(), 131072.0 * 16);
  ASSERT_EQ(doc["targets"].get_array().value().size(), 1u);
  simdjson::dom::array points = doc["points"].get_array().value();
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points.at(0)["requests"].get_uint64().value(), 100u);
  EXPECT_GT(points.at(1)["requests"].get_uint64().value(), 100u);
  // The last sample says what the curve API says now.
  simdjson::dom::parser curve_parser;
  simdjson::dom::element curve;
  ASSERT_EQ(curve_parser.parse(agent.RenderCurveJson("5m")).get(curve), simdjson::SUCCESS);
  EXPECT_EQ(points.at(1)["requests"].get_uint64().value(), curve["requests"].get_uint64().value());
  EXPECT_EQ(points.at(1)["knee_pages"].get_uint64().value(), curve["knee"]["capacity_pages"].get_uint64().value());
  EXPECT_EQ(points.at(1)["working_set_pages"].at(0).get_uint64().value(),
            curve["working_set"].at(0)["capacity_pages"].get_uint64().value());
  EXPECT_TRUE(agent.RenderHistoryJson("2h").empty());
}

}  // namespace
}  // namespace kvwatch::agent
