// The agent with a hybrid model (agent/runtime/hybrid_analysis.h), in-process:
// requests go through Agent::OnRequest and the numbers are read from /metrics
// and /api/v1/curve. The kvwatch_hybrid_* series equal a HybridEngine fed the
// same requests (capacities mapped to the same bytes); the dense series are
// those of the same agent without the hybrid model; a dense model, or a sampled
// engine, exports no hybrid series; the hybrid curve survives a restart exactly
// (and starts empty, with the dense curve restored, when its part does not fit);
// the model is resolved from the config; and the KV cache groups an engine
// announces are checked against the model's.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/runtime/agent.h"
#include "agent/runtime/agent_command.h"
#include "agent/runtime/exposition.h"
#include "agent/runtime/hybrid_analysis.h"
#include "agent/runtime/hybrid_metrics.h"
#include "agent/runtime/metrics.h"
#include "collectors/exposition_parser.h"
#include "config/agent_config.h"
#include "curve/curve_accumulator.h"
#include "curve/hybrid_engine.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

constexpr std::uint64_t kPageTokens = 16;
constexpr std::uint32_t kMaxPages = 4000;

std::optional<HybridModel> ModelOf(const std::string& preset, std::uint32_t max_pages = kMaxPages) {
  const curve::ModelSpec spec = curve::LookupModelPreset(preset).value();
  const double per_token = static_cast<double>(curve::BytesPerTokenPerRank(spec, 1).value());
  auto m = HybridModelFor(spec, 1, kPageTokens, curve::TouchOrder::kTailFirst, max_pages, max_pages,
                          per_token * kPageTokens);
  EXPECT_TRUE(m.ok()) << m.error();
  return m.ok() ? m.value() : std::nullopt;
}

AgentOptions Options(const std::string& preset, bool hybrid, const std::string& state_path = "",
                     std::uint32_t max_pages = kMaxPages) {
  AgentOptions o;
  o.replica = "test";
  o.state_path = state_path;
  o.engine.max_pages = max_pages;
  o.engine.remembered_evictions = max_pages;
  o.page_tokens = kPageTokens;
  const curve::ModelSpec spec = curve::LookupModelPreset(preset).value();
  o.bytes_per_token = static_cast<double>(curve::BytesPerTokenPerRank(spec, 1).value());
  o.model_name = spec.name;
  if (hybrid) o.hybrid = ModelOf(preset, max_pages);
  o.curve.windows = {{"24h", 86400}};
  for (std::uint64_t c : {200, 1000, 3000}) {
    if (c <= max_pages) o.curve.capacities.push_back(c);  // as the config requires
  }
  o.http.port = 0;
  return o;
}

std::unique_ptr<Agent> MakeAgent(AgentOptions o) {
  auto agent = Agent::Create(std::move(o));
  EXPECT_TRUE(agent.ok()) << agent.error();
  return agent.ok() ? std::move(agent).value() : nullptr;
}

// Requests that share long prefixes (documents of up to 40 pages, 640 tokens:
// longer than gpt-oss's window of 128), with a few unique pages each, and token
// counts that end inside the last page.
std::vector<curve::Request> Trace(std::size_t n, std::uint64_t from = 0) {
  std::vector<curve::Request> out;
  for (std::uint64_t i = from; i < from + n; ++i) {
    curve::Request r;
    const std::uint64_t doc = (i * 2654435761u) % 37;
    const std::uint64_t shared = 4 + (i * 7919) % 36;
    for (std::uint64_t k = 0; k < shared; ++k) r.pages.push_back(doc * 1000 + k);
    for (std::uint64_t k = 0; k < 3; ++k) r.pages.push_back(1'000'000 + i * 4 + k);
    r.input_tokens = static_cast<std::int64_t>(r.pages.size() * kPageTokens - i % kPageTokens);
    r.output_tokens = static_cast<std::int64_t>(i % 200);
    r.timestamp_s = 1000 + static_cast<double>(i) * 0.01;
    out.push_back(std::move(r));
  }
  return out;
}

using Series = std::map<std::string, double>;

// Every sample but the process's, by name{labels}.
Series Samples(const std::string& text, const std::string& prefix = "kvwatch_") {
  Series out;
  const collectors::Exposition e = collectors::ParseExposition(text);
  EXPECT_TRUE(e.errors.empty());
  for (const collectors::Sample& s : e.samples) {
    if (s.name.rfind(prefix, 0) != 0) continue;
    std::string key = s.name + "{";
    const std::map<std::string, std::string> sorted(s.labels.begin(), s.labels.end());
    for (const auto& [k, v] : sorted) key += k + "=" + v + ",";
    out[key + "}"] = s.value;
  }
  return out;
}

Series Without(const Series& all, const std::string& prefix) {
  Series out;
  for (const auto& [k, v] : all) {
    if (k.rfind(prefix, 0) != 0 && k.rfind("kvwatch_engine_memory_bytes", 0) != 0) out[k] = v;
  }
  return out;
}

TEST(HybridAgentTest, TheHybridSeriesAreTheEnginesOnTheSameRequests) {
  const std::optional<HybridModel> model = ModelOf("gpt-oss-20b");
  ASSERT_TRUE(model);
  std::unique_ptr<Agent> agent = MakeAgent(Options("gpt-oss-20b", true));
  ASSERT_TRUE(agent);
  curve::HybridEngine engine(model->engine);
  curve::CurveAccumulator acc(1.0);
  curve::RequestOutcome out;
  for (const curve::Request& r : Trace(3000)) {
    agent->OnRequest(r);
    engine.Process(r.pages, r.input_tokens, r.output_tokens, &out);
    acc.Add(out);
  }
  const Series s = Samples(agent->RenderMetrics(), "kvwatch_hybrid_");
  // The pool of 200 pages of the full-attention count holds the bytes of 400
  // units (gpt-oss: two groups of 12 layers each, a unit is half a page).
  const double full_page =
      16.0 * curve::BytesPerTokenPerRank(curve::LookupModelPreset("gpt-oss-20b").value(), 1).value();
  ASSERT_EQ(engine.unit_bytes() * 2, static_cast<std::uint64_t>(full_page));
  const double refs = static_cast<double>(acc.page_refs());
  for (std::uint64_t pages : {200, 1000, 3000}) {
    const std::string key = "kvwatch_hybrid_page_hit_ratio{capacity_pages=" + std::to_string(pages) + ",window=24h,}";
    ASSERT_TRUE(s.count(key)) << key;
    EXPECT_DOUBLE_EQ(s.at(key), static_cast<double>(acc.PageHits(pages * 2)) / refs) << key;
    const std::string cov =
        "kvwatch_hybrid_request_coverage_ratio{capacity_pages=" + std::to_string(pages) + ",window=24h,}";
    EXPECT_DOUBLE_EQ(s.at(cov), acc.RequestCoverage(pages * 2)) << cov;
  }
  // Every document's pages are referenced between two uses of one: hits from
  // about 37 documents x 20 pages x 2 groups on.
  EXPECT_EQ(s.at("kvwatch_hybrid_page_hit_ratio{capacity_pages=200,window=24h,}"), 0);
  EXPECT_GT(s.at("kvwatch_hybrid_page_hit_ratio{capacity_pages=3000,window=24h,}"), 0.3);
  // The groups, the bound, the working sets, and the bytes each group holds there.
  EXPECT_EQ(s.at("kvwatch_hybrid_group_page_bytes{group=0,kind=sliding_window,window_tokens=128,}"), full_page / 2);
  EXPECT_EQ(s.at("kvwatch_hybrid_group_page_bytes{group=1,kind=full,window_tokens=0,}"), full_page / 2);
  EXPECT_EQ(s.at("kvwatch_hybrid_tracked_bytes_limit{}"), kMaxPages * full_page);
  EXPECT_EQ(s.at("kvwatch_hybrid_tracked_bytes{}"), static_cast<double>(engine.total_bytes()));
  for (const char* f : {"0.5", "0.9"}) {
    const std::string labels = std::string("{fraction=") + f + ",target=page_hit,window=24h,}";
    const double hybrid = s.at("kvwatch_hybrid_working_set_bytes" + labels);
    // A whole number of units that reaches the target (within a bucket: 2^(1/8) - 1).
    const double units = hybrid / static_cast<double>(engine.unit_bytes());
    ASSERT_EQ(units, std::floor(units));
    const double want = std::stod(f) * static_cast<double>(acc.unlimited_page_hits());
    EXPECT_GE(static_cast<double>(acc.PageHits(static_cast<std::uint64_t>(units))), want) << f;
    EXPECT_LT(static_cast<double>(acc.PageHits(static_cast<std::uint64_t>(units / 1.0906) - 1)), want) << f;
    const double window = s.at("kvwatch_hybrid_group_bytes{fraction=" + std::string(f) +
                               ",group=0,kind=sliding_window,target=page_hit,window=24h,}");
    const double full = s.at("kvwatch_hybrid_group_bytes{fraction=" + std::string(f) +
                             ",group=1,kind=full,target=page_hit,window=24h,}");
    EXPECT_LE(window + full, hybrid);
    EXPECT_GT(full, window) << "the full layers keep more of every prefix";
  }
  // The JSON API has the same curve in its "hybrid" object.
  const std::string json = agent->RenderCurveJson("24h");
  EXPECT_NE(json.find("\"hybrid\":{\"unit_bytes\":"), std::string::npos);
  EXPECT_NE(json.find("\"kind\":\"sliding_window\",\"layers\":12,\"window_tokens\":128"), std::string::npos);
  EXPECT_NE(json.find("\"group_bytes\":[{\"target\":\"page_hit\""), std::string::npos);
}

// Adding the hybrid curve changes no other series: they are the dense agent's.
TEST(HybridAgentTest, TheDenseSeriesDoNotChangeAndADenseModelExportsNoHybridSeries) {
  std::unique_ptr<Agent> hybrid = MakeAgent(Options("gpt-oss-20b", true));
  std::unique_ptr<Agent> dense = MakeAgent(Options("gpt-oss-20b", false));
  std::unique_ptr<Agent> llama = MakeAgent(Options("llama-3-8b", true));  // no groups: no hybrid model
  ASSERT_TRUE(hybrid && dense && llama);
  for (const curve::Request& r : Trace(1500)) {
    hybrid->OnRequest(r);
    dense->OnRequest(r);
    llama->OnRequest(r);
  }
  const Series h = Samples(hybrid->RenderMetrics());
  EXPECT_EQ(Without(h, "kvwatch_hybrid_"), Without(Samples(dense->RenderMetrics()), "kvwatch_hybrid_"));
  EXPECT_GT(h.size(), Without(h, "kvwatch_hybrid_").size());
  for (Agent* a : {dense.get(), llama.get()}) {
    EXPECT_EQ(a->RenderMetrics().find("kvwatch_hybrid_"), std::string::npos);
    EXPECT_EQ(a->RenderCurveJson("24h").find("\"hybrid\""), std::string::npos);
  }
  EXPECT_FALSE(ModelOf("llama-3-8b").has_value());
}

TEST(HybridAgentTest, ASampledEngineRunsNoHybridCurve) {
  AgentOptions o = Options("gpt-oss-20b", true);
  o.sample_rate = 0.5;
  std::unique_ptr<Agent> agent = MakeAgent(std::move(o));
  ASSERT_TRUE(agent);
  for (const curve::Request& r : Trace(100)) agent->OnRequest(r);
  EXPECT_EQ(agent->RenderMetrics().find("kvwatch_hybrid_"), std::string::npos);
}

// A state saved half way restores to the curve of an uninterrupted agent; a
// state whose hybrid part was saved with another model (or by a dense model)
// restores the dense curve and starts the hybrid one empty.
TEST(HybridAgentTest, TheHybridCurveSurvivesARestart) {
  testing_support::TempDir dir;
  const std::string state = dir.Sub("state.bin");
  // A bound of 1,500 pages: the deepest document pages come back after more.
  std::unique_ptr<Agent> first = MakeAgent(Options("gpt-oss-20b", true, state, 1500));
  std::unique_ptr<Agent> through = MakeAgent(Options("gpt-oss-20b", true, "", 1500));
  ASSERT_TRUE(first && through);
  for (const curve::Request& r : Trace(4000)) {
    first->OnRequest(r);
    through->OnRequest(r);
  }
  ASSERT_TRUE(first->SaveState().ok());
  auto curves = [](Agent* a) {
    Series s = Samples(a->RenderMetrics(), "kvwatch_hybrid_");
    s.erase("kvwatch_hybrid_engine_memory_bytes{}");  // capacity, not state
    return s;
  };
  const Series before = curves(first.get());
  EXPECT_GT(before.at("kvwatch_hybrid_tracking_evictions_total{}"), 0) << "the bound should bind";
  EXPECT_GT(before.at("kvwatch_hybrid_page_beyond_tracked_total{}"), 0);
  first.reset();
  std::unique_ptr<Agent> restored = MakeAgent(Options("gpt-oss-20b", true, state, 1500));
  ASSERT_TRUE(restored);
  EXPECT_EQ(curves(restored.get()), before);
  for (const curve::Request& r : Trace(2000, 4000)) {
    restored->OnRequest(r);
    through->OnRequest(r);
  }
  EXPECT_EQ(curves(restored.get()), curves(through.get()));
  ASSERT_TRUE(restored->SaveState().ok());
  const double requests = Samples(restored->RenderMetrics()).at("kvwatch_requests_total{}");
  restored.reset();
  // Another hybrid model: the dense curve is restored, the hybrid one starts empty.
  std::unique_ptr<Agent> other = MakeAgent(Options("gpt-oss-120b", true, state, 1500));
  ASSERT_TRUE(other);
  const Series o = Samples(other->RenderMetrics());
  EXPECT_EQ(o.at("kvwatch_requests_total{}"), requests);
  EXPECT_EQ(o.at("kvwatch_hybrid_tracked_bytes{}"), 0);
  EXPECT_EQ(o.at("kvwatch_state_restore{outcome=restored,}"), 1);
}

TEST(HybridAgentTest, TheConfiguredModelIsResolvedIntoItsGroups) {
  auto validated = [](const std::string& yaml) {
    auto config = config::ParseAgentConfig(yaml, "test.yaml");
    EXPECT_TRUE(config.ok()) << config.error();
    ValidationOptions v;
    v.resolve_host_names = false;
    return ValidateAgentConfig(config.value(), v);
  };
  auto hybrid = validated("model: gpt-oss-120b\npage_tokens: 16\nweb: {port: 0}\nengine: {max_pages: 1000}\n");
  ASSERT_TRUE(hybrid.ok()) << hybrid.error();
  ASSERT_TRUE(hybrid.value().options.hybrid);
  const HybridModel& m = *hybrid.value().options.hybrid;
  ASSERT_EQ(m.groups.size(), 2u);
  EXPECT_EQ(m.engine.max_bytes, static_cast<std::uint64_t>(1000 * 16 * *hybrid.value().options.bytes_per_token));
  EXPECT_EQ(m.engine.remembered_evictions, 2000u);  // engine.remembered_evictions (max_pages) per group
  auto dense = validated("model: llama-3-8b\nweb: {port: 0}\n");
  ASSERT_TRUE(dense.ok()) << dense.error();
  EXPECT_FALSE(dense.value().options.hybrid);
}

// The groups a KV-event stream announces against the model's: a different
// window, a kind the model lacks, a kind it has that none announces.
TEST(HybridAgentTest, AnnouncedGroupsAreCheckedAgainstTheModel) {
  const std::optional<HybridModel> gpt = ModelOf("gpt-oss-20b");
  ASSERT_TRUE(gpt);
  using G = collectors::EngineKvGroup;
  EXPECT_EQ(HybridGroupMismatch(&*gpt, {}), "");
  EXPECT_EQ(HybridGroupMismatch(&*gpt, {{0, "sliding_window", 128}, {1, "full", 0}}), "");
  EXPECT_EQ(HybridGroupMismatch(&*gpt, {{0, "unannounced", 0}}), "");
  // vLLM may split a kind over several groups of equal layers.
  EXPECT_EQ(HybridGroupMismatch(&*gpt, {{0, "sliding_window", 128}, {1, "full", 0}, {2, "sliding_window", 128}}), "");
  const std::string window = HybridGroupMismatch(&*gpt, {{0, "sliding_window", 4096}, {1, "full", 0}});
  EXPECT_NE(window.find("group 0 announces a sliding window of 4096 tokens"), std::string::npos) << window;
  EXPECT_NE(window.find("sliding_window 128"), std::string::npos) << window;
  EXPECT_NE(HybridGroupMismatch(&*gpt, {{0, "linear", 0}, {1, "full", 0}}).find("announces kind linear"),
            std::string::npos);
  EXPECT_NE(HybridGroupMismatch(&*gpt, {G{0, "full", 0}}).find("no KV cache group announces kind sliding_window"),
            std::string::npos);
  // A dense model: only full attention matches.
  EXPECT_EQ(HybridGroupMismatch(nullptr, {G{0, "full", 0}}), "");
  EXPECT_NE(HybridGroupMismatch(nullptr, {{0, "sliding_window", 128}, {1, "full", 0}}).find("full attention"),
            std::string::npos);

  // On /metrics: 1 for the mismatched collector, 0 for the matching one; a dense
  // model's matching or silent collector adds nothing.
  AgentOptions options = Options("gpt-oss-20b", true);
  AgentSnapshot snapshot;
  snapshot.collectors.push_back({"good", {}, {}, {}});
  snapshot.collectors.back().signals.kv_groups = {{0, "sliding_window", 128}, {1, "full", 0}};
  snapshot.collectors.push_back({"bad", {}, {}, {}});
  snapshot.collectors.back().signals.kv_groups = {{0, "sliding_window", 4096}, {1, "full", 0}};
  snapshot.collectors.push_back({"silent", {}, {}, {}});
  auto render = [&] {
    MetricsBuilder m;
    AppendHybridMetrics(m, options, snapshot);
    return Samples(m.Serialize(), "kvwatch_hybrid_");
  };
  const Series s = render();
  EXPECT_EQ(s.at("kvwatch_hybrid_model_mismatch{collector=good,}"), 0);
  EXPECT_EQ(s.at("kvwatch_hybrid_model_mismatch{collector=bad,}"), 1);
  EXPECT_EQ(s.count("kvwatch_hybrid_model_mismatch{collector=silent,}"), 0u);
  options.hybrid.reset();
  snapshot.collectors.resize(1);
  snapshot.collectors[0].signals.kv_groups = {G{0, "full", 0}};
  EXPECT_TRUE(render().empty());
  snapshot.collectors[0].signals.kv_groups = {{0, "sliding_window", 128}, {1, "full", 0}};
  EXPECT_EQ(render().at("kvwatch_hybrid_model_mismatch{collector=good,}"), 1);
}

}  // namespace
}  // namespace kvwatch::agent
