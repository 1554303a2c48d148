// The agent's live eviction-policy canaries (curve.policies) against
// `kvwatch replay --policy` on the same records: each canary's page hit ratio and
// request coverage over a window that holds every record equal the replay's.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "tests/agent/testing_agent.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers

constexpr const char* kPolicies = "vllm,lru,fifo,lfu,arc,s3fifo,sglang,priority,workload-aware";
constexpr const char* kPriorities = "tenant:tenant-1=2,class:turn2=1";

TEST(PolicyCanaryTest, LiveGaugesEqualReplayOnTheSameRecords) {
  TempDir dir;
  const std::string trace = (std::filesystem::path(dir.path()) / "trace.jsonl").string();
  const std::vector<Record> records = SynthRecords(1500, 7);
  std::size_t pages = 0;
  {
    std::ofstream f(trace);
    for (const Record& r : records) {
      f << r.json << "\n";
      pages += r.pages;
    }
  }
  const std::string yaml = std::string("web: {port: 0}\n") +
                           "curve:\n  windows: [24h]\n  capacities: [64, 512]\n"
                           "  policies: [lru, fifo, lfu, arc, s3fifo, sglang, priority, workload-aware]\n"
                           "  engine_policy: vllm\n  decode_tokens_per_second: 40\n"
                           "  policy_priorities: \"" +
                           kPriorities +
                           "\"\n"
                           "collectors:\n  trace_files:\n" +
                           TraceFileCollectorYaml("trace", trace);
  std::string error;
  auto agent = AgentProcess::Start(dir.path(), "agent", yaml, &error);
  ASSERT_NE(agent, nullptr) << error;
  ASSERT_TRUE(agent->WaitForRequests(records.size())) << agent->Stderr();

  CommandResult run = RunCommand(
      {KVWATCH_BINARY, "replay", "--format", "json", "--capacities", "64,512", "--policy", kPolicies, "--priority",
       kPriorities, "--decode-tokens-per-second", "40", "--timestamp-unit", "ms", "--progress", "never", trace},
      Millis(120000));
  ASSERT_TRUE(run.Exited(0)) << run.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(run.out).get(doc), simdjson::SUCCESS);
  simdjson::dom::array results;
  ASSERT_EQ(doc["policies"]["results"].get(results), simdjson::SUCCESS) << Tail(run.out, 400);
  std::size_t compared = 0;
  std::map<std::string, double> at64;
  for (simdjson::dom::element r : results) {
    std::string_view policy;
    std::uint64_t capacity = 0;
    double ratio = 0, coverage = 0;
    ASSERT_EQ(r["policy"].get(policy), simdjson::SUCCESS);
    ASSERT_EQ(r["capacity_pages"].get(capacity), simdjson::SUCCESS);
    ASSERT_EQ(r["page_hit_ratio"].get(ratio), simdjson::SUCCESS);
    ASSERT_EQ(r["request_coverage"].get(coverage), simdjson::SUCCESS);
    const LabelMap labels = {
        {"policy", std::string(policy)}, {"capacity_pages", std::to_string(capacity)}, {"window", "24h"}};
    SCOPED_TRACE(std::string(policy) + " at " + std::to_string(capacity));
    EXPECT_NEAR(agent->Value("kvwatch_policy_page_hit_ratio", labels), ratio, 1e-9);
    EXPECT_NEAR(agent->Value("kvwatch_policy_request_coverage_ratio", labels), coverage, 1e-9);
    if (capacity == 64) at64[std::string(policy)] = ratio;
    ++compared;
  }
  EXPECT_EQ(compared, 18u);  // 9 policies x 2 capacities
  // Not a trivial workload: the policies differ, and the gain is against vllm.
  EXPECT_GT(at64["lru"], 0.05);
  std::set<double> distinct;
  for (const auto& [policy, ratio] : at64) distinct.insert(ratio);
  EXPECT_GE(distinct.size(), 3u);
  EXPECT_NEAR(
      agent->Value("kvwatch_policy_gain_ratio", {{"policy", "lru"}, {"capacity_pages", "64"}, {"window", "24h"}}),
      at64["lru"] - at64["vllm"], 1e-9);
  EXPECT_EQ(agent->Stop(), 0);
}

TEST(PolicyCanaryTest, BadPolicyConfigNamesTheKey) {
  TempDir dir;
  for (const auto& [yaml, expected] : std::vector<std::pair<std::string, std::string>>{
           {"curve: {capacities: [10], policies: [lru, clock]}\n", "unknown policy 'clock'"},
           {"curve: {capacities: [10], policies: [belady]}\n", "needs the future"},
           {"curve: {policies: [lru]}\n", "curve.capacities"},
           {"curve: {capacities: [10], policies: [lru], engine_policy: nope}\n", "curve.engine_policy"},
           {"curve: {capacities: [10], policies: [priority], policy_priorities: \"a=high\"}\n",
            "curve.policy_priorities"},
       }) {
    const std::string path = (std::filesystem::path(dir.path()) / "bad.yaml").string();
    ASSERT_TRUE(WriteFile(path, yaml));
    CommandResult r = RunCommand({KVWATCH_BINARY, "check-config", path}, Millis(20000));
    EXPECT_FALSE(r.Exited(0)) << yaml;
    EXPECT_NE((r.out + r.err).find(expected), std::string::npos) << yaml << " -> " << r.err;
    EXPECT_NE((r.out + r.err).find("curve."), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace kvwatch::agent
