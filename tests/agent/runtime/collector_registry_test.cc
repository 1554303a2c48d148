// The collector registry: live collectors created from the specs config/ parsed
// (agent/runtime/collector_registry.h); the parsing itself is tested in
// tests/config/collectors_section_test.cc.
#include "agent/runtime/collector_registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/agent_config.h"

namespace kvwatch::agent {
namespace {

void NoLog(std::string_view, std::string_view) {}

TEST(CollectorRegistryTest, BuildsWhatTheConfigParsed) {
  base::Result<config::AgentConfig> config = config::ParseAgentConfig(
      "collectors:\n  engine_metrics: [{name: m, url: 'http://127.0.0.1:1/metrics'}]\n  synth: {rate: 10}\n",
      "agent.yaml");
  ASSERT_TRUE(config.ok()) << config.error();
  for (const CollectorSpec& spec : config.value().collectors.specs) {
    EXPECT_TRUE(ValidateCollector(spec).ok()) << spec.where;
  }
  auto built = BuildCollectors(config.value().collectors.specs, NoLog);
  ASSERT_TRUE(built.ok()) << built.error();
  ASSERT_EQ(built.value().size(), 2u);
  EXPECT_EQ(built.value()[0]->name(), "m");
  EXPECT_EQ(built.value()[1]->name(), "synth");
}

// What only a collector's Create() checks (options built in code, not from a
// config) is reported with the item's path.
TEST(CollectorRegistryTest, CreationErrorsNameTheItem) {
  collectors::EngineMetricsCollectorOptions metrics;
  metrics.name = "m";
  metrics.url = "ftp://h/metrics";
  CollectorSpec spec{"collectors.engine_metrics[2]", metrics};
  base::Status invalid = ValidateCollector(spec);
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.error().find("url"), std::string::npos) << invalid.error();
  auto built = BuildCollectors({spec}, NoLog);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.error().rfind("collectors.engine_metrics[2]: ", 0), 0u) << built.error();
}

}  // namespace
}  // namespace kvwatch::agent
