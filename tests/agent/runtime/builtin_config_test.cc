// The config `kvwatch agent` runs with when given none (scripts/demo.sh): valid,
// with what the first page needs (a model, tenants, two canaries, a cache size),
// a cache size that sits inside the synthetic replica's curve, and shown verbatim
// in docs/configuration.md.
#include "agent/runtime/builtin_config.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <variant>

#include "agent/runtime/agent.h"
#include "agent/runtime/agent_command.h"
#include "collectors/synth.h"

namespace kvwatch::agent {
namespace {

ValidatedConfig MustValidate() {
  auto config = BuiltInAgentConfig();
  EXPECT_TRUE(config.ok()) << config.error();
  if (!config.ok()) return {};
  auto validated = ValidateAgentConfig(config.value());
  EXPECT_TRUE(validated.ok()) << validated.error();
  if (!validated.ok()) return {};
  return std::move(validated).value();
}

TEST(BuiltInConfigTest, HasAModelTenantsTwoCanariesACacheSizeAndTheSyntheticReplica) {
  auto config = BuiltInAgentConfig();
  ASSERT_TRUE(config.ok()) << config.error();
  // The web server as documented for the demo: the default port.
  EXPECT_EQ(config.value().web, config::DefaultAgentConfig().web);
  ValidatedConfig v = MustValidate();
  const AgentOptions& o = v.options;
  ASSERT_TRUE(o.bytes_per_token.has_value()) << "no model: the page would show no bytes";
  EXPECT_GT(*o.bytes_per_token, 0);
  EXPECT_TRUE(o.tenants.enabled);
  EXPECT_EQ(o.sample_rate, 1.0) << "tenants need the exact engine";
  ASSERT_EQ(o.curve.capacities.size(), 1u);
  ASSERT_TRUE(o.canaries.has_value());
  EXPECT_EQ(o.canaries->policies.size(), 3u) << "the engine's own policy and two canaries";
  ASSERT_EQ(v.collectors.size(), 1u);
  EXPECT_EQ(v.collectors[0].where, "collectors.synth");
  ASSERT_TRUE(std::holds_alternative<collectors::SynthOptions>(v.collectors[0].options));
  EXPECT_GE(std::get<collectors::SynthOptions>(v.collectors[0].options).tenants, 2);
}

// The page-hit working sets (0.5, 0.95, 0.99) of the agent's 5m window after
// `seconds` of the built-in synthetic replica, ending now.
struct WorkingSets {
  std::uint64_t ws50 = 0, ws95 = 0, ws99 = 0;
  bool knee = false;
};
WorkingSets AfterSeconds(double seconds, std::uint64_t* capacity) {
  WorkingSets out;
  ValidatedConfig v = MustValidate();
  EXPECT_EQ(v.collectors.size(), 1u);
  if (v.collectors.size() != 1) return out;
  collectors::SynthOptions synth = std::get<collectors::SynthOptions>(v.collectors[0].options);
  synth.duration_s = seconds;
  synth.max_requests = 0;
  *capacity = v.options.curve.capacities.at(0);
  v.options.http.port = 0;
  auto agent = Agent::Create(std::move(v.options));
  EXPECT_TRUE(agent.ok()) << agent.error();
  if (!agent.ok()) return out;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto generated = collectors::GenerateSynth(synth, [&](const collectors::SynthRequest& r) {
    curve::Request request = r.request;
    request.timestamp_s += now - seconds - 1;
    agent.value()->OnRequest(request);
  });
  EXPECT_TRUE(generated.ok()) << generated.error();
  const std::string json = agent.value()->RenderCurveJson("5m");
  simdjson::dom::parser parser;
  simdjson::dom::element curve;
  const auto error = parser.parse(json).get(curve);
  EXPECT_EQ(error, simdjson::SUCCESS) << simdjson::error_message(error) << "\n" << json;
  if (error != simdjson::SUCCESS) return out;
  const simdjson::dom::array items = curve["working_set"].get_array().value();  // named: value() of a temporary dangles
  for (simdjson::dom::element e : items) {
    if (std::string_view(e["target"].get_string().value()) != "page_hit") continue;
    const double f = e["fraction"].get_double().value();
    const std::uint64_t pages = e["capacity_pages"].get_uint64().value();
    if (f == 0.5) out.ws50 = pages;
    if (f == 0.95) out.ws95 = pages;
    if (f == 0.99) out.ws99 = pages;
  }
  out.knee = !curve["knee"]["capacity_pages"].is_null();
  return out;
}

// The configured cache is inside the curve: after one minute above the 0.5
// page-hit working set and below the 0.99 one, after five below the 0.95 one, so
// the capacity line, the capacity misses and the canaries' differences all show.
TEST(BuiltInConfigTest, CacheSizeSitsInsideTheSyntheticReplicasCurve) {
  std::uint64_t capacity = 0;
  const WorkingSets minute = AfterSeconds(60, &capacity);
  EXPECT_LT(minute.ws50, capacity);
  EXPECT_GT(minute.ws99, capacity);
  EXPECT_TRUE(minute.knee);
  const WorkingSets five = AfterSeconds(300, &capacity);
  EXPECT_LT(five.ws50, capacity);
  EXPECT_GT(five.ws95, capacity);
  EXPECT_TRUE(five.knee);
}

TEST(BuiltInConfigTest, IsShownVerbatimInTheConfigurationDocs) {
  std::ifstream in(std::string(KVWATCH_SOURCE_DIR) + "/docs/configuration.md", std::ios::binary);
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("```yaml\n" + std::string(BuiltInConfigYaml()) + "```\n"), std::string::npos)
      << "docs/configuration.md must show the built-in config (agent/runtime/builtin_config.cc) in a yaml block:\n"
      << BuiltInConfigYaml();
}

}  // namespace
}  // namespace kvwatch::agent
