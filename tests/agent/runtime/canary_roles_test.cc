// The policy canaries' roles (agent/runtime/snapshot.h, CanaryRole): the engine
// policy's canaries are marked as such in /api/v1/curve, and every canary's gain,
// in the JSON and in /metrics, is measured against the engine policy's canary at
// its own capacity. An in-process agent, the engine policy first as
// BuildAgentOptions lists it, two capacities whose hit ratios differ.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <map>
#include <string>
#include <utility>

#include "agent/runtime/agent.h"
#include "collectors/exposition_parser.h"
#include "collectors/synth.h"
#include "tests/agent/testing_agent.h"

namespace kvwatch::agent {
namespace {

using testing_support::SampleValue;

TEST(CanaryRolesTest, GainIsAgainstTheEnginePolicyAtTheSameCapacity) {
  AgentOptions o;
  o.engine.max_pages = 1u << 16;
  o.engine.remembered_evictions = 1u << 16;
  o.curve.windows = {{"5m", 300}};
  o.curve.capacities = {200, 2000};
  curve::CanaryOptions canaries;
  // fifo is the engine's policy here (first); lru and s3fifo are compared with it.
  canaries.policies = {curve::PolicyKind::kFifo, curve::PolicyKind::kLru, curve::PolicyKind::kS3Fifo};
  o.canaries = canaries;
  o.http.port = 0;
  auto created = Agent::Create(std::move(o));
  ASSERT_TRUE(created.ok()) << created.error();
  Agent& agent = *created.value();
  collectors::SynthOptions so;
  so.seed = 5;
  so.duration_s = 0;
  so.max_requests = 3000;
  auto generator = collectors::SynthGenerator::Create(so);
  ASSERT_TRUE(generator.ok()) << generator.error();
  collectors::SynthRequest r;
  while (generator.value().Next(&r)) agent.OnRequest(r.request);

  const std::string json = agent.RenderCurveJson("5m");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  simdjson::dom::array policies;
  ASSERT_EQ(doc["policies"].get(policies), simdjson::SUCCESS) << json;
  struct Row {
    double ratio = 0;
    double gain = 0;
    bool engine = false;
  };
  std::map<std::pair<std::string, std::uint64_t>, Row> rows;
  for (simdjson::dom::element p : policies) {
    std::string_view policy;
    std::uint64_t capacity = 0;
    Row row;
    ASSERT_EQ(p["policy"].get(policy), simdjson::SUCCESS);
    ASSERT_EQ(p["capacity_pages"].get(capacity), simdjson::SUCCESS);
    ASSERT_EQ(p["page_hit_ratio"].get(row.ratio), simdjson::SUCCESS);
    ASSERT_EQ(p["gain"].get(row.gain), simdjson::SUCCESS);
    ASSERT_EQ(p["engine_policy"].get(row.engine), simdjson::SUCCESS);
    rows[{std::string(policy), capacity}] = row;
  }
  ASSERT_EQ(rows.size(), 6u) << json;
  auto ratio = [&rows](const std::string& policy, std::uint64_t capacity) {
    return rows.at(std::make_pair(policy, capacity)).ratio;
  };
  // Not a trivial workload: the capacities and the policies differ.
  ASSERT_NE(ratio("fifo", 200), ratio("fifo", 2000));
  ASSERT_NE(ratio("lru", 200), ratio("fifo", 200));

  const collectors::Exposition metrics = collectors::ParseExposition(agent.RenderMetrics());
  for (const auto& [key, row] : rows) {
    const auto& [policy, capacity] = key;
    SCOPED_TRACE(policy + " at " + std::to_string(capacity));
    EXPECT_EQ(row.engine, policy == "fifo");
    const double expected = row.ratio - ratio("fifo", capacity);
    EXPECT_NEAR(row.gain, expected, 1e-9);
    const auto gauge =
        SampleValue(metrics, "kvwatch_policy_gain_ratio",
                    {{"policy", policy}, {"capacity_pages", std::to_string(capacity)}, {"window", "5m"}});
    ASSERT_TRUE(gauge.has_value());
    EXPECT_NEAR(*gauge, expected, 1e-9);
  }
}

}  // namespace
}  // namespace kvwatch::agent
