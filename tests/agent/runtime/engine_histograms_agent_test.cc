// An engine's histograms re-exported through the agent's /metrics (vLLM's
// residency histograms, collectors/engine_signals.h): an in-process agent with a
// collector that reports them must serve each as a histogram family (TYPE line,
// cumulative _bucket lines ending in +Inf, _sum, _count) labelled with the
// collector, beside the other 2026 engine families; a collector without them
// serves none.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/runtime/agent.h"
#include "collectors/engine_signals.h"
#include "collectors/exposition_parser.h"
#include "tests/agent/testing_agent.h"

namespace kvwatch::agent {
namespace {

using testing_support::SampleValue;

// Reports fixed engine signals and renders them as the engine collectors do.
class HistogramEngine : public testing_support::FixedSignalsCollector {
 public:
  using FixedSignalsCollector::FixedSignalsCollector;
  void AppendSamples(std::vector<collectors::MetricSample>* out) const override {
    collectors::AppendEngineCounterSamples(engine_signals(), name(), out);
    collectors::AppendEngineGaugeSamples(engine_signals(), name(), out);
  }
};

AgentOptions Options(collectors::EngineSignals signals) {
  AgentOptions o;
  o.engine.max_pages = 1u << 12;
  o.curve.windows = {{"5m", 300}};
  o.curve.capacities = {100};
  o.page_tokens = 16;
  o.http.port = 0;
  o.collectors.push_back(std::make_unique<HistogramEngine>(std::move(signals), "vllm"));
  return o;
}

collectors::Exposition Render(collectors::EngineSignals signals) {
  auto created = Agent::Create(Options(std::move(signals)));
  EXPECT_TRUE(created.ok()) << (created.ok() ? "" : created.error());
  if (!created.ok()) return {};
  return collectors::ParseExposition(created.value()->RenderMetrics());
}

TEST(EngineHistogramsAgentTest, ReuseGapsAreServedAsAHistogramBesideThe2026Families) {
  collectors::EngineSignals s;
  const double inf = std::numeric_limits<double>::infinity();
  s.residency[static_cast<std::size_t>(collectors::ResidencyHistogram::kReuseGap)] =
      collectors::EngineHistogramSignal{{{1.0, 4}, {60.0, 9}, {inf, 10}}, 10, 70.5};
  s.prompt_tokens = {{"compute", 200}, {"device_hit", 700}};
  s.kv_evictable_tokens = 250000;
  s.page_tokens = 16;
  const collectors::Exposition e = Render(std::move(s));
  ASSERT_TRUE(e.errors.empty());
  const std::string family = "kvwatch_engine_kv_block_reuse_gap_seconds";
  const collectors::MetricFamilyInfo* info = e.FindFamily(family);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->type, collectors::MetricType::kHistogram);
  EXPECT_EQ(SampleValue(e, family + "_bucket", {{"collector", "vllm"}, {"le", "1"}}), 4);
  EXPECT_EQ(SampleValue(e, family + "_bucket", {{"collector", "vllm"}, {"le", "60"}}), 9);
  EXPECT_EQ(SampleValue(e, family + "_bucket", {{"collector", "vllm"}, {"le", "+Inf"}}), 10);
  EXPECT_EQ(SampleValue(e, family + "_count", {{"collector", "vllm"}}), 10);
  EXPECT_EQ(SampleValue(e, family + "_sum", {{"collector", "vllm"}}), 70.5);
  EXPECT_FALSE(e.FindFamily("kvwatch_engine_kv_block_lifetime_seconds")) << "not reported";
  EXPECT_EQ(SampleValue(e, "kvwatch_engine_prompt_tokens_total", {{"collector", "vllm"}, {"source", "device_hit"}}),
            700);
  EXPECT_EQ(SampleValue(e, "kvwatch_engine_kv_tokens", {{"collector", "vllm"}, {"state", "evictable"}}), 250000);
  EXPECT_FALSE(SampleValue(e, "kvwatch_engine_kv_tokens", {{"collector", "vllm"}, {"state", "used"}}));
  EXPECT_EQ(SampleValue(e, "kvwatch_engine_page_tokens", {{"collector", "vllm"}}), 16);
}

TEST(EngineHistogramsAgentTest, AnEngineWithoutThemServesNone) {
  const collectors::Exposition e = Render(collectors::EngineSignals{});
  ASSERT_TRUE(e.errors.empty());
  for (const char* family : {"kvwatch_engine_kv_block_reuse_gap_seconds", "kvwatch_engine_kv_block_lifetime_seconds",
                             "kvwatch_engine_kv_block_idle_before_evict_seconds", "kvwatch_engine_prompt_tokens_total",
                             "kvwatch_engine_kv_tokens", "kvwatch_engine_page_tokens"}) {
    EXPECT_FALSE(e.FindFamily(family)) << family;
  }
}

}  // namespace
}  // namespace kvwatch::agent
