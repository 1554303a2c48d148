// The agent with a sampled engine (engine.sample_rate, engine.sample_max_pages),
// in-process: every request goes through Agent::OnRequest and the numbers are read
// from its /metrics text. On the Mooncake conversation trace (../shared/data,
// skipped when absent) the lifetime page-hit ratio at every bucket bound
// (kvwatch_page_hit_capacity_pages_bucket{le=X} / kvwatch_page_references_total)
// stays within a stated error of the exact agent's; on a flood of 2 M unique pages
// with sample_max_pages 1000 the tracked pages stay under the bound, the exported
// rate falls and the engine's memory stays flat; and a bad sampling value stops
// `kvwatch agent` at start-up with a message naming the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/runtime/agent.h"
#include "collectors/exposition_parser.h"
#include "collectors/trace_reader.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using testing_support::Millis;

std::unique_ptr<Agent> MakeAgent(double rate, std::uint32_t max_sampled, const std::string& state_path = "",
                                 bool canaries = false) {
  AgentOptions o;
  if (canaries) {
    curve::CanaryOptions c;
    c.policies = {curve::PolicyKind::kLru, curve::PolicyKind::kFifo};
    o.canaries = c;
  }
  o.state_path = state_path;
  o.replica = "test";
  o.engine.max_pages = 1u << 20;
  o.engine.remembered_evictions = 1u << 20;
  o.sample_rate = rate;
  o.sample_max_pages = max_sampled;
  o.curve.windows = {{"24h", 86400}};
  o.curve.capacities = {10, 100, 1000, 3000, 10000, 30000, 100000};
  o.http.port = 0;
  auto agent = Agent::Create(std::move(o));
  EXPECT_TRUE(agent.ok()) << agent.error();
  return agent.ok() ? std::move(agent).value() : nullptr;
}

struct Scrape {
  std::map<double, double> hit_buckets;           // le -> cumulative page hits (finite bounds)
  std::map<std::string, double> values;           // unlabelled samples
  std::map<std::string, double> window_ratio;     // capacity_pages -> kvwatch_page_hit_ratio{window="24h"}
  std::map<std::string, double> window_coverage;  // capacity_pages -> kvwatch_request_coverage_ratio{...}
  std::map<std::string, double> policy_ratio;     // "policy/capacity" -> kvwatch_policy_page_hit_ratio
  std::map<std::string, double> policy_coverage;  // "policy/capacity" -> kvwatch_policy_request_coverage_ratio
};

Scrape Read(Agent* agent) {
  Scrape s;
  const collectors::Exposition e = collectors::ParseExposition(agent->RenderMetrics());
  EXPECT_TRUE(e.errors.empty());
  for (const collectors::Sample& sample : e.samples) {
    if (sample.name == "kvwatch_page_hit_capacity_pages_bucket") {
      const std::string le(sample.Label("le").value_or("+Inf"));
      if (le != "+Inf") s.hit_buckets[std::stod(le)] = sample.value;
    } else if (sample.name == "kvwatch_page_hit_ratio") {
      s.window_ratio[std::string(sample.Label("capacity_pages").value_or(""))] = sample.value;
    } else if (sample.name == "kvwatch_request_coverage_ratio") {
      s.window_coverage[std::string(sample.Label("capacity_pages").value_or(""))] = sample.value;
    } else if (sample.name == "kvwatch_policy_page_hit_ratio" ||
               sample.name == "kvwatch_policy_request_coverage_ratio") {
      const std::string key = std::string(sample.Label("policy").value_or("")) + "/" +
                              std::string(sample.Label("capacity_pages").value_or(""));
      (sample.name == "kvwatch_policy_page_hit_ratio" ? s.policy_ratio : s.policy_coverage)[key] = sample.value;
    } else if (sample.labels.empty()) {
      s.values[sample.name] = sample.value;
    }
  }
  return s;
}

// Largest |page hit ratio difference| over the bucket bounds.
double MaxRatioError(const Scrape& a, const Scrape& b) {
  const double refs_a = a.values.at("kvwatch_page_references_total");
  const double refs_b = b.values.at("kvwatch_page_references_total");
  double worst = 0;
  for (const auto& [le, hits] : a.hit_buckets) {
    worst = std::max(worst, std::fabs(hits / refs_a - b.hit_buckets.at(le) / refs_b));
  }
  return worst;
}

// Largest |difference| of a window gauge over the capacities.
double MaxWindowError(const std::map<std::string, double>& a, const std::map<std::string, double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto& [c, value] : a) worst = std::max(worst, std::fabs(value - b.at(c)));
  return worst;
}

// Stated errors on the Mooncake conversation trace (182,790 distinct pages), max
// |page hit ratio difference| over the lifetime histogram's bounds, and over the
// 24h window's kvwatch_page_hit_ratio at 10 to 100,000 pages: rate 0.1 within
// 0.03; fixed size 20,000 sampled pages (the rate falls to about 0.11) within
// 0.03; fixed size 2,000 (about 0.01) within 0.05. The window's request coverage
// at the same capacities: within 0.05, 0.05 and 0.08.
TEST(SampledAgentTest, LifetimeCurveIsWithinTheStatedErrorOfTheExactOneOnMooncake) {
  const std::string path = std::string(KVWATCH_SHARED_DATA) + "/mooncake/conversation_trace.jsonl";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no trace at " << path;
  std::unique_ptr<Agent> exact = MakeAgent(1.0, 0);
  std::unique_ptr<Agent> rate = MakeAgent(0.1, 0);
  std::unique_ptr<Agent> big = MakeAgent(1.0, 20000);
  std::unique_ptr<Agent> small = MakeAgent(1.0, 2000);
  ASSERT_TRUE(exact && rate && big && small);
  std::uint64_t refs = 0, requests = 0;
  collectors::TraceCallbacks callbacks;
  callbacks.on_request = [&](curve::Request& request) {
    refs += request.pages.size();
    ++requests;
    for (Agent* a : {exact.get(), rate.get(), big.get(), small.get()}) a->OnRequest(request);
  };
  auto summary = collectors::ReadTrace(path, collectors::TraceReaderOptions{}, callbacks);
  ASSERT_TRUE(summary.ok()) << summary.error();

  const Scrape e = Read(exact.get()), r = Read(rate.get()), b = Read(big.get()), s = Read(small.get());
  EXPECT_EQ(e.values.at("kvwatch_engine_sample_rate"), 1.0);
  EXPECT_EQ(r.values.at("kvwatch_engine_sample_rate"), 0.1);
  EXPECT_LT(b.values.at("kvwatch_engine_sample_rate"), 0.2);
  EXPECT_LT(s.values.at("kvwatch_engine_sample_rate"), 0.02);
  EXPECT_LE(b.values.at("kvwatch_tracked_pages"), 20000);
  EXPECT_LE(s.values.at("kvwatch_tracked_pages"), 2000);
  // SHARDS-adj sets the reference count to the true one, and the request count
  // is set to the true one too.
  for (const Scrape* x : {&e, &r, &b, &s}) {
    EXPECT_NEAR(x->values.at("kvwatch_page_references_total"), static_cast<double>(refs), 1.0);
    EXPECT_NEAR(x->values.at("kvwatch_requests_total"), static_cast<double>(requests), 1.0);
  }
  const double err_rate = MaxRatioError(r, e), err_big = MaxRatioError(b, e), err_small = MaxRatioError(s, e);
  std::printf("max |error| vs exact: rate 0.1 %.4f; bound 20000 (rate %.4f) %.4f; bound 2000 (rate %.4f) %.4f\n",
              err_rate, b.values.at("kvwatch_engine_sample_rate"), err_big, s.values.at("kvwatch_engine_sample_rate"),
              err_small);
  EXPECT_LE(err_rate, 0.03);
  EXPECT_LE(err_big, 0.03);
  EXPECT_LE(err_small, 0.05);
  const double w_rate = MaxWindowError(r.window_ratio, e.window_ratio);
  const double w_big = MaxWindowError(b.window_ratio, e.window_ratio);
  const double w_small = MaxWindowError(s.window_ratio, e.window_ratio);
  const double c_rate = MaxWindowError(r.window_coverage, e.window_coverage);
  const double c_big = MaxWindowError(b.window_coverage, e.window_coverage);
  const double c_small = MaxWindowError(s.window_coverage, e.window_coverage);
  std::printf("window request coverage max |error| vs exact: rate 0.1 %.4f; bound 20000 %.4f; bound 2000 %.4f\n",
              c_rate, c_big, c_small);
  EXPECT_LE(c_rate, 0.05);
  EXPECT_LE(c_big, 0.05);
  EXPECT_LE(c_small, 0.08);
  std::printf("window max |error| vs exact: rate 0.1 %.4f; bound 20000 %.4f; bound 2000 %.4f\n", w_rate, w_big,
              w_small);
  EXPECT_LE(w_rate, 0.03);
  EXPECT_LE(w_big, 0.03);
  EXPECT_LE(w_small, 0.05);
}

// The policy canaries simulate every page whether the engine samples or not: their
// page-hit ratios are the exact agent's. Their request coverage needs each
// request's unlimited hits, which only the exact engine knows: estimated from the
// sampled pages (a lower bound) it was off by up to 0.15 at rate 0.1 on this
// trace (0.27 with sample_max_pages 2000), so a sampled agent does not export it.
TEST(SampledAgentTest, PolicyCanariesSeeEveryRequestWhenSampled) {
  const std::string path = std::string(KVWATCH_SHARED_DATA) + "/mooncake/conversation_trace.jsonl";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no trace at " << path;
  std::unique_ptr<Agent> exact = MakeAgent(1.0, 0, "", true);
  std::unique_ptr<Agent> sampled = MakeAgent(0.1, 0, "", true);
  ASSERT_TRUE(exact && sampled);
  collectors::TraceCallbacks callbacks;
  callbacks.on_request = [&](curve::Request& request) {
    exact->OnRequest(request);
    sampled->OnRequest(request);
  };
  ASSERT_TRUE(collectors::ReadTrace(path, collectors::TraceReaderOptions{}, callbacks).ok());
  const Scrape e = Read(exact.get()), s = Read(sampled.get());
  ASSERT_EQ(e.policy_ratio.size(), 14u);  // 2 policies x 7 capacities
  EXPECT_EQ(s.policy_ratio, e.policy_ratio);
  EXPECT_EQ(e.policy_coverage.size(), 14u);
  EXPECT_TRUE(s.policy_coverage.empty()) << "a sampled agent exports canary coverage it cannot know";
}

TEST(SampledAgentTest, SampleMaxPagesBoundsTrackedPagesAndMemoryOnAUniqueFlood) {
  constexpr std::uint32_t kBound = 1000;
  constexpr std::uint64_t kPages = 2'000'000;
  constexpr std::uint64_t kPerRequest = 16;
  std::unique_ptr<Agent> agent = MakeAgent(1.0, kBound);
  ASSERT_TRUE(agent);
  curve::Request request;
  double memory_first_part = 0, memory_max_later = 0;
  std::uint64_t next = 0;
  for (std::uint64_t i = 0; next < kPages; ++i) {
    request.pages.clear();
    for (std::uint64_t k = 0; k < kPerRequest; ++k) request.pages.push_back(next++);
    request.timestamp_s = static_cast<double>(i) * 0.001;
    agent->OnRequest(request);
    if (next % 200'000 == 0) {
      const Scrape s = Read(agent.get());
      ASSERT_LE(s.values.at("kvwatch_tracked_pages"), kBound) << "after " << next << " pages";
      const double memory = s.values.at("kvwatch_engine_memory_bytes");
      if (next == 200'000) {
        memory_first_part = memory;
      } else {
        memory_max_later = std::max(memory_max_later, memory);
      }
    }
  }
  const Scrape s = Read(agent.get());
  const double expected = static_cast<double>(kBound) / static_cast<double>(kPages);
  EXPECT_NEAR(s.values.at("kvwatch_engine_sample_rate"), expected, expected * 0.15);
  EXPECT_GT(memory_first_part, 0);
  EXPECT_LE(memory_max_later, memory_first_part) << "engine memory grew after the first 10% of the flood";
  EXPECT_NEAR(s.values.at("kvwatch_page_references_total"), static_cast<double>(kPages), 1.0);
}

// A sampled agent's checkpoint restores the sample (rate, sample set, engine) and
// the expected references: the restored agent then counts exactly as one that
// never stopped (memory may differ: capacities are not state).
TEST(SampledAgentTest, SampledStateRestoresToTheSameCurves) {
  testing_support::TempDir dir;
  const std::string state = dir.Sub("state");
  std::unique_ptr<Agent> first = MakeAgent(0.5, 3000, state);
  std::unique_ptr<Agent> uninterrupted = MakeAgent(0.5, 3000);
  ASSERT_TRUE(first && uninterrupted);
  curve::Request request;
  auto feed = [&](std::uint64_t from, std::uint64_t to, std::initializer_list<Agent*> agents) {
    for (std::uint64_t i = from; i < to; ++i) {
      request.pages.clear();
      request.pages.push_back(0);  // a hot shared first page
      for (std::uint64_t k = 1; k < 12; ++k) request.pages.push_back((i * 7 + k * 131) % 20000);
      request.timestamp_s = static_cast<double>(i) * 0.01;
      for (Agent* a : agents) a->OnRequest(request);
    }
  };
  feed(0, 20000, {first.get(), uninterrupted.get()});
  ASSERT_TRUE(first->SaveState().ok());
  first.reset();
  std::unique_ptr<Agent> restored = MakeAgent(0.5, 3000, state);
  ASSERT_TRUE(restored);
  feed(20000, 30000, {restored.get(), uninterrupted.get()});
  const Scrape a = Read(restored.get()), b = Read(uninterrupted.get());
  EXPECT_LT(a.values.at("kvwatch_engine_sample_rate"), 0.5);  // it adapted
  for (const char* name : {"kvwatch_engine_sample_rate", "kvwatch_tracked_pages", "kvwatch_page_references_total",
                           "kvwatch_requests_total"}) {
    EXPECT_EQ(a.values.at(name), b.values.at(name)) << name;
  }
  EXPECT_EQ(a.hit_buckets, b.hit_buckets);
  EXPECT_EQ(a.window_ratio, b.window_ratio);
  // Another sampling setting does not restore it (the restored agent stops
  // first: two agents on one state path are refused).
  restored.reset();
  std::unique_ptr<Agent> other = MakeAgent(0.5, 2999, state);
  ASSERT_TRUE(other);
  EXPECT_EQ(Read(other.get()).values.at("kvwatch_requests_total"), 0);
}

TEST(SampledAgentTest, BadSamplingValuesStopStartUpNamingTheKey) {
  testing_support::TempDir dir;
  struct Case {
    std::string yaml;
    std::string key;
  };
  for (const Case& c : {Case{"engine:\n  sample_rate: 0\n", "engine.sample_rate"},
                        Case{"engine:\n  sample_rate: 2\n", "engine.sample_rate"},
                        Case{"engine:\n  sample_max_pages: -5\n", "engine.sample_max_pages"}}) {
    const std::string config = dir.path() + "/agent.yaml";
    ASSERT_TRUE(testing_support::WriteFile(config, "web:\n  port: 0\n" + c.yaml));
    const testing_support::CommandResult r =
        testing_support::RunCommand({KVWATCH_BINARY, "agent", "--config", config}, Millis(20000));
    EXPECT_FALSE(r.Exited(0)) << r.Describe();
    EXPECT_NE(r.err.find(c.key), std::string::npos) << r.Describe();
  }
}

}  // namespace
}  // namespace kvwatch::agent
