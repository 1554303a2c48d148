// The README's quickstart: the Prometheus config it starts is valid, loads the
// shipped rules, and scrapes the port the demo's agent (the built-in config,
// which `kvwatch agent` runs with no --config) listens on.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "agent/runtime/builtin_config.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers

TEST(QuickstartTest, DemoPrometheusConfigIsValidAndScrapesTheDefaultPort) {
  const std::string config = std::string(KVWATCH_SOURCE_DIR) + "/packaging/prometheus/demo-prometheus.yml";
  std::ifstream f(config);
  std::stringstream text;
  text << f.rdbuf();
  const auto builtin = BuiltInAgentConfig();
  ASSERT_TRUE(builtin.ok()) << builtin.error();
  const int port = builtin.value().web.port;
  EXPECT_NE(text.str().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << config << " does not scrape the demo agent's port " << port;
  const std::string promtool = FindProgram("promtool");
  if (promtool.empty()) GTEST_SKIP() << "promtool is not installed";
  const std::string cmd = promtool + " check config " + config + " 2>&1";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  const int status = ::pclose(p);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("SUCCESS"), std::string::npos) << out;
  EXPECT_NE(out.find("rules found"), std::string::npos) << out;
}

}  // namespace
}  // namespace kvwatch::agent
