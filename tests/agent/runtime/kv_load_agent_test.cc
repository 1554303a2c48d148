// The KV load factor end to end through the agent (agent/runtime/load_metrics.h):
// an in-process agent fed a small hand-made trace with timestamps, token counts
// and classes; /metrics must show rho per window, the mean KV token-seconds, the
// decode rate and capacity with their sources, the per-class output-length
// quantiles, and the KV load alert's input, each equal to the value worked out by
// hand. A trace without output lengths (as KV events give) has no rho at all.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/runtime/agent.h"
#include "agent/runtime/load_metrics.h"
#include "collectors/exposition_parser.h"
#include "tests/agent/testing_agent.h"

namespace kvwatch::agent {
namespace {

using testing_support::SampleValue;

curve::Request Req(double t, std::int64_t prompt, std::int64_t output, const char* cls, curve::PageId first) {
  curve::Request r;
  r.timestamp_s = t;
  r.input_tokens = prompt;
  r.output_tokens = output;
  r.request_class = cls;
  r.tenant = "t";
  for (curve::PageId p = 0; p < 4; ++p) r.pages.push_back(first + p);
  return r;
}

AgentOptions Options() {
  AgentOptions o;
  o.engine.max_pages = 1u << 12;
  o.engine.remembered_evictions = 1u << 12;
  o.curve.windows = {{"1m", 60}, {"5m", 300}};
  o.curve.capacities = {100};  // x 16 tokens: 1600 tokens of KV
  o.page_tokens = 16;
  o.curve.decode_tokens_per_second = 50;
  o.http.port = 0;
  return o;
}

// The trace: at t = 900 a "code" request (P 1000, O 100: S = 1000 x 2 + 100^2 /
// 100 = 2100 token-seconds); at 1000, 1010, 1020, 1030 a "chat" request each (P
// 100, O 50: S = 100 x 1 + 50^2 / 100 = 125); at 1040 a "chat" request without
// an output length. The clock is at 1040.
void Feed(Agent& agent) {
  agent.OnRequest(Req(900, 1000, 100, "code", 1000));
  for (int i = 0; i < 4; ++i) agent.OnRequest(Req(1000 + 10 * i, 100, 50, "chat", 10 * i));
  agent.OnRequest(Req(1040, 100, -1, "chat", 500));
}

TEST(KvLoadAgentTest, MetricsShowTheHandWorkedLoadFactorPerWindow) {
  auto created = Agent::Create(Options());
  ASSERT_TRUE(created.ok()) << created.error();
  Feed(*created.value());
  const collectors::Exposition e = collectors::ParseExposition(created.value()->RenderMetrics());
  ASSERT_TRUE(e.errors.empty());
  // 5m (slices of 5 s; the oldest starts at 745): every request, spread over 140 s
  // since the first; 5 sized ones, S = 4 x 125 + 2100 = 2600, mean 520.
  const double rho_5m = (6.0 / 140) * (2600.0 / 5) / 1600;
  // 1m (the oldest slice starts at 981): the 5 requests from 1000, over 59 s; 4 sized, mean 125.
  const double rho_1m = (5.0 / 59) * 125 / 1600;
  EXPECT_DOUBLE_EQ(SampleValue(e, "kvwatch_kv_load_factor", {{"window", "5m"}}).value_or(-1), rho_5m);
  EXPECT_DOUBLE_EQ(SampleValue(e, "kvwatch_kv_load_factor", {{"window", "1m"}}).value_or(-1), rho_1m);
  EXPECT_EQ(SampleValue(e, "kvwatch_kv_load_requests", {{"window", "5m"}}), 5);
  EXPECT_EQ(SampleValue(e, "kvwatch_kv_load_requests", {{"window", "1m"}}), 4);
  EXPECT_DOUBLE_EQ(SampleValue(e, "kvwatch_kv_token_seconds_per_request", {{"window", "5m"}}).value_or(-1), 520);
  EXPECT_DOUBLE_EQ(SampleValue(e, "kvwatch_kv_token_seconds_per_request", {{"window", "1m"}}).value_or(-1), 125);
  EXPECT_EQ(SampleValue(e, "kvwatch_kv_load_decode_tokens_per_second", {{"source", "config"}}), 50);
  EXPECT_EQ(SampleValue(e, "kvwatch_kv_load_capacity_tokens", {{"source", "config"}}), 1600);
  // Output lengths: chat's are all 50 (bucket 50..51), code's one is 100 (bucket 100..103).
  for (const char* q : {"0.5", "0.9", "0.99"}) {
    EXPECT_EQ(SampleValue(e, "kvwatch_class_output_tokens", {{"window", "5m"}, {"class", "chat"}, {"fraction", q}}),
              51);
    EXPECT_EQ(SampleValue(e, "kvwatch_class_output_tokens", {{"window", "5m"}, {"class", "code"}, {"fraction", q}}),
              103);
  }
  EXPECT_FALSE(
      SampleValue(e, "kvwatch_class_output_tokens", {{"window", "1m"}, {"class", "code"}, {"fraction", "0.5"}}))
      << "the code request is older than the 1m window";
}

TEST(KvLoadAgentTest, TheCurveApiCarriesTheWindowsLoad) {
  auto created = Agent::Create(Options());
  ASSERT_TRUE(created.ok()) << created.error();
  Feed(*created.value());
  const std::string json = created.value()->RenderCurveJson("5m");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  simdjson::dom::element k = doc["kv_load"];
  EXPECT_DOUBLE_EQ(double(k["load_factor"]), (6.0 / 140) * (2600.0 / 5) / 1600) << json;
  EXPECT_EQ(std::uint64_t(k["requests"]), 6u);
  EXPECT_EQ(std::uint64_t(k["sized_requests"]), 5u);
  EXPECT_DOUBLE_EQ(double(k["span_seconds"]), 140);
  EXPECT_DOUBLE_EQ(double(k["mean_kv_token_seconds"]), 520);
  EXPECT_EQ(std::string_view(k["capacity_source"]), "config");
  EXPECT_EQ(std::uint64_t(k["output_tokens"]["code"]["0.99"]), 103u);
  EXPECT_EQ(std::uint64_t(k["output_tokens"]["chat"]["0.5"]), 51u);
}

TEST(KvLoadAgentTest, TheAlertReadsItsWindowsLoadFactor) {
  AgentOptions o = Options();
  config::AlertSettings settings;
  settings.alerter.kv_load.window = std::chrono::seconds(300);
  auto alerts = AlertRunnerOptionsFromConfig(settings, {"", "", o.curve.windows, o.curve.capacities});
  ASSERT_TRUE(alerts.ok()) << alerts.error();
  o.alerts = std::move(alerts).value();
  auto created = Agent::Create(std::move(o));
  ASSERT_TRUE(created.ok()) << created.error();
  Feed(*created.value());
  const alerts::AlertInputs in = created.value()->AlertInputsAt(std::chrono::system_clock::now());
  ASSERT_TRUE(in.kv_load);
  EXPECT_DOUBLE_EQ(in.kv_load->load_factor, (6.0 / 140) * (2600.0 / 5) / 1600);
  EXPECT_EQ(in.kv_load->sized_requests, 5);
  EXPECT_EQ(in.kv_load->capacity_tokens, 1600);
  EXPECT_EQ(in.kv_load->decode_tokens_per_s, 50);
}

TEST(KvLoadAgentTest, TheEnginesDecodeRateAndCapacityWinOverTheConfigs) {
  const AgentOptions o = Options();  // 50 tokens/s, 100 pages x 16 tokens
  std::vector<CollectorCopy> collectors(3);
  collectors[0].name = "trace";  // knows neither
  collectors[1].name = "log";
  collectors[1].signals.capacity_pages = 0;  // not a capacity
  collectors[2].name = "vllm";
  collectors[2].signals.decode_tokens_per_s = 40;
  collectors[2].signals.capacity_pages = 1000;
  KvLoadSources s = KvLoadSourcesOf(o, collectors);
  EXPECT_EQ(s.decode_tokens_per_s, 40);
  EXPECT_EQ(s.decode_source, "engine");
  EXPECT_EQ(s.capacity_tokens, 16000);
  EXPECT_EQ(s.capacity_source, "engine");
  collectors.pop_back();
  s = KvLoadSourcesOf(o, collectors);
  EXPECT_EQ(s.decode_tokens_per_s, 50);
  EXPECT_EQ(s.decode_source, "config");
  EXPECT_EQ(s.capacity_tokens, 1600);
  EXPECT_EQ(s.capacity_source, "config");
  // rho follows: the same window at 40 tokens/s in 16000 tokens.
  AnalysisSnapshot::LoadWindow w;
  w.slice.Add({100, 50, "chat"});  // 100 x 50 / 40 + 2500 / 80 = 156.25 token-seconds
  w.span_s = 10;
  collectors.push_back({});
  collectors.back().signals.decode_tokens_per_s = 40;
  collectors.back().signals.capacity_pages = 1000;
  EXPECT_DOUBLE_EQ(WindowKvLoad(w, KvLoadSourcesOf(o, collectors))->load_factor, 0.1 * 156.25 / 16000);
}

// An engine /metrics collector that has learned a prefill time (and nothing else).
std::unique_ptr<collectors::Collector> PrefillEngine(double prefill_s) {
  collectors::EngineSignals s;
  s.prefill_seconds = prefill_s;
  return std::make_unique<testing_support::FixedSignalsCollector>(s);
}

// With a prefill time T each prompt is held T seconds longer: the trace's chat
// requests hold 125 + 100 T token-seconds, the code request 2100 + 1000 T.
TEST(KvLoadAgentTest, TheEnginesPrefillTimeIsChargedToEveryPrompt) {
  AgentOptions o = Options();
  o.curve.prefill_seconds = 2;  // the engine's wins
  o.collectors.push_back(PrefillEngine(0.5));
  auto created = Agent::Create(std::move(o));
  ASSERT_TRUE(created.ok()) << created.error();
  Feed(*created.value());
  const collectors::Exposition e = collectors::ParseExposition(created.value()->RenderMetrics());
  ASSERT_TRUE(e.errors.empty());
  // T = 0.5: chat 175, code 2600; 5m mean (4 x 175 + 2600) / 5 = 660, 1m mean 175.
  EXPECT_DOUBLE_EQ(SampleValue(e, "kvwatch_kv_token_seconds_per_request", {{"window", "5m"}}).value_or(-1), 660);
  EXPECT_DOUBLE_EQ(SampleValue(e, "kvwatch_kv_token_seconds_per_request", {{"window", "1m"}}).value_or(-1), 175);
  EXPECT_DOUBLE_EQ(SampleValue(e, "kvwatch_kv_load_factor", {{"window", "5m"}}).value_or(-1), (6.0 / 140) * 660 / 1600);
  EXPECT_DOUBLE_EQ(SampleValue(e, "kvwatch_kv_load_factor", {{"window", "1m"}}).value_or(-1), (5.0 / 59) * 175 / 1600);
  EXPECT_EQ(SampleValue(e, "kvwatch_kv_load_prefill_seconds", {{"source", "engine"}}), 0.5);
  EXPECT_FALSE(SampleValue(e, "kvwatch_kv_load_prefill_seconds", {{"source", "config"}}));

  const std::string json = created.value()->RenderCurveJson("5m");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  simdjson::dom::element k = doc["kv_load"];
  EXPECT_DOUBLE_EQ(double(k["mean_kv_token_seconds"]), 660) << json;
  EXPECT_DOUBLE_EQ(double(k["load_factor"]), (6.0 / 140) * 660 / 1600);
  EXPECT_DOUBLE_EQ(double(k["prefill_seconds"]), 0.5);
  EXPECT_EQ(std::string_view(k["prefill_source"]), "engine");
  EXPECT_EQ(std::string_view(k["decode_source"]), "config");
}

TEST(KvLoadAgentTest, WithoutAnEnginesPrefillTimeTheConfigsIsCharged) {
  AgentOptions o = Options();
  o.curve.prefill_seconds = 2;
  auto created = Agent::Create(std::move(o));
  ASSERT_TRUE(created.ok()) << created.error();
  Feed(*created.value());
  const collectors::Exposition e = collectors::ParseExposition(created.value()->RenderMetrics());
  // T = 2: chat 325, code 4100; 5m mean (4 x 325 + 4100) / 5 = 1080, 1m mean 325.
  EXPECT_DOUBLE_EQ(SampleValue(e, "kvwatch_kv_token_seconds_per_request", {{"window", "5m"}}).value_or(-1), 1080);
  EXPECT_DOUBLE_EQ(SampleValue(e, "kvwatch_kv_token_seconds_per_request", {{"window", "1m"}}).value_or(-1), 325);
  EXPECT_DOUBLE_EQ(SampleValue(e, "kvwatch_kv_load_factor", {{"window", "5m"}}).value_or(-1),
                   (6.0 / 140) * 1080 / 1600);
  EXPECT_DOUBLE_EQ(SampleValue(e, "kvwatch_kv_load_factor", {{"window", "1m"}}).value_or(-1), (5.0 / 59) * 325 / 1600);
  EXPECT_EQ(SampleValue(e, "kvwatch_kv_load_prefill_seconds", {{"source", "config"}}), 2);
  const std::string json = created.value()->RenderCurveJson("1m");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  EXPECT_DOUBLE_EQ(double(doc["kv_load"]["prefill_seconds"]), 2) << json;
  EXPECT_EQ(std::string_view(doc["kv_load"]["prefill_source"]), "config");
}

// Two data-parallel engines scraped one by one: their requests all reach the
// agent, so the KV capacities add up; decode rates and prefill times are averaged.
TEST(KvLoadAgentTest, SeveralEnginesAddTheirCapacitiesAndAverageTheirRates) {
  const AgentOptions o = Options();  // 50 tokens/s, 100 pages x 16 tokens
  std::vector<CollectorCopy> collectors(3);
  collectors[0].signals.decode_tokens_per_s = 40;
  collectors[0].signals.prefill_seconds = 0.5;
  collectors[0].signals.capacity_pages = 1000;
  collectors[1].name = "trace";  // knows none of them
  collectors[2].signals.decode_tokens_per_s = 60;
  collectors[2].signals.prefill_seconds = 1.5;
  collectors[2].signals.capacity_pages = 3000;
  const KvLoadSources s = KvLoadSourcesOf(o, collectors);
  EXPECT_EQ(s.decode_tokens_per_s, 50);
  EXPECT_EQ(s.prefill_s, 1);
  EXPECT_EQ(s.capacity_tokens, 64000);
  EXPECT_EQ(s.decode_source, "engine");
  EXPECT_EQ(s.prefill_source, "engine");
  EXPECT_EQ(s.capacity_source, "engine");
}

TEST(KvLoadAgentTest, UsablePrefillTimesAreTheEnginesAndZeroIsOne) {
  AgentOptions o = Options();
  o.curve.prefill_seconds = 2;
  std::vector<CollectorCopy> collectors(4);
  collectors[0].signals.prefill_seconds = std::nan("");
  collectors[1].signals.prefill_seconds = -1;
  collectors[2].signals.prefill_seconds = std::numeric_limits<double>::infinity();
  KvLoadSources s = KvLoadSourcesOf(o, collectors);
  EXPECT_EQ(s.prefill_s, 2);
  EXPECT_EQ(s.prefill_source, "config");
  collectors[3].signals.prefill_seconds = 0;  // the engine says prefill is instant: not the config's 2
  s = KvLoadSourcesOf(o, collectors);
  EXPECT_EQ(s.prefill_s, 0);
  EXPECT_EQ(s.prefill_source, "engine");
  // The alert reads the same load: 1 request of P 100, O 50 at 50 tokens/s with
  // a 2 s prefill holds 100 x 3 + 25 = 325 token-seconds.
  AnalysisSnapshot::LoadWindow w;
  w.slice.Add({100, 50, "chat"});
  w.span_s = 10;
  collectors.pop_back();
  EXPECT_DOUBLE_EQ(WindowKvLoad(w, KvLoadSourcesOf(o, collectors))->mean_token_seconds, 325);
}

TEST(KvLoadAgentTest, WithoutOutputLengthsThereIsNoLoadFactor) {
  auto created = Agent::Create(Options());
  ASSERT_TRUE(created.ok()) << created.error();
  // What a KV-event source gives: pages and times, no token counts.
  for (int i = 0; i < 20; ++i) created.value()->OnRequest(Req(1000 + i, -1, -1, "", 10 * i));
  const collectors::Exposition e = collectors::ParseExposition(created.value()->RenderMetrics());
  EXPECT_FALSE(e.FindFamily("kvwatch_kv_load_factor")) << "absent, not 0";
  EXPECT_FALSE(e.FindFamily("kvwatch_kv_token_seconds_per_request"));
  EXPECT_FALSE(e.FindFamily("kvwatch_class_output_tokens"));
  EXPECT_EQ(SampleValue(e, "kvwatch_kv_load_requests", {{"window", "1m"}}), 0);
  EXPECT_EQ(SampleValue(e, "kvwatch_kv_load_capacity_tokens", {{"source", "config"}}), 1600);
}

TEST(KvLoadAgentTest, WithoutACapacityThereIsNoLoadFactorButTheMeanStays) {
  AgentOptions o = Options();
  o.curve.capacities.clear();
  auto created = Agent::Create(std::move(o));
  ASSERT_TRUE(created.ok()) << created.error();
  Feed(*created.value());
  const collectors::Exposition e = collectors::ParseExposition(created.value()->RenderMetrics());
  EXPECT_FALSE(e.FindFamily("kvwatch_kv_load_factor"));
  EXPECT_FALSE(e.FindFamily("kvwatch_kv_load_capacity_tokens"));
  EXPECT_DOUBLE_EQ(SampleValue(e, "kvwatch_kv_token_seconds_per_request", {{"window", "1m"}}).value_or(-1), 125);
}

}  // namespace
}  // namespace kvwatch::agent
