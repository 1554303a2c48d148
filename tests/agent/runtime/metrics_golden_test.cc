// /metrics byte for byte on a fixed workload: an in-process agent (two windows,
// two configured capacities, bytes per token, two policy canaries) fed 3,000
// requests of the `kvwatch synth` generator (seed 11, their own timestamps), then
// rendered. Everything but kvwatch_build_info and the process_* series (which
// depend on the build and the machine) must equal tests/golden/agent_metrics.txt,
// so a refactoring that means to change no behaviour can show it changed none.
// Regenerate after an intended change with KVWATCH_UPDATE_GOLDEN=1 and review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "agent/runtime/agent.h"
#include "collectors/synth.h"

namespace kvwatch::agent {
namespace {

const std::string kGolden = std::string(KVWATCH_SOURCE_DIR) + "/tests/golden/agent_metrics.txt";

std::string Render() {
  AgentOptions o;
  o.replica = "golden";
  o.engine.max_pages = 1u << 16;
  o.engine.remembered_evictions = 1u << 16;
  o.curve.windows = {{"5m", 300}, {"1h", 3600}};
  o.curve.capacities = {200, 2000};
  o.bytes_per_token = 131072;
  o.page_tokens = 16;
  o.curve.page_hit_targets = {0.5, 0.9};
  o.curve.coverage_targets = {0.9};
  curve::CanaryOptions canaries;
  canaries.policies = {curve::PolicyKind::kLru, curve::PolicyKind::kS3Fifo};
  o.canaries = canaries;
  o.http.port = 0;
  auto agent = Agent::Create(std::move(o));
  if (!agent.ok()) return "create: " + agent.error();
  collectors::SynthOptions so;
  so.seed = 11;
  so.duration_s = 0;
  so.max_requests = 3000;
  auto generator = collectors::SynthGenerator::Create(so);
  if (!generator.ok()) return "synth: " + generator.error();
  collectors::SynthRequest r;
  while (generator.value().Next(&r)) agent.value()->OnRequest(r.request);
  // Drop what depends on the build or the machine: build_info and process_*.
  std::istringstream in(agent.value()->RenderMetrics());
  std::string line, out;
  while (std::getline(in, line)) {
    const bool machine = line.find("kvwatch_build_info") != std::string::npos || line.rfind("process_", 0) == 0 ||
                         line.find(" process_") != std::string::npos;
    if (!machine) out += line + "\n";
  }
  return out;
}

TEST(MetricsGoldenTest, MetricsOfAFixedWorkloadAreUnchanged) {
  const std::string now = Render();
  ASSERT_EQ(now, Render()) << "the rendering is not deterministic";
  if (std::getenv("KVWATCH_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(kGolden, std::ios::binary) << now;
    GTEST_SKIP() << "rewrote " << kGolden;
  }
  std::ifstream in(kGolden, std::ios::binary);
  ASSERT_TRUE(in) << "no " << kGolden << " (run with KVWATCH_UPDATE_GOLDEN=1)";
  std::stringstream golden;
  golden << in.rdbuf();
  // Line by line, so a failure names the first line that moved.
  std::istringstream a(golden.str()), b(now);
  std::string la, lb;
  int line = 0;
  while (true) {
    const bool ga = static_cast<bool>(std::getline(a, la));
    const bool gb = static_cast<bool>(std::getline(b, lb));
    ++line;
    if (!ga && !gb) break;
    ASSERT_EQ(ga, gb) << "line " << line << ": one output ends first";
    ASSERT_EQ(lb, la) << "line " << line << " of " << kGolden;
  }
}

}  // namespace
}  // namespace kvwatch::agent
