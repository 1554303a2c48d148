// `kvwatch simulate` end to end: the binary on small hand-made traces (a
// hand-worked run, what is assumed, the pool from a GPU's memory, every output
// format, bad flags) and in-process on its setup; and a smoke run on the Mooncake
// conversation trace when ../shared/data has it.
#include "agent/cli/simulate_command.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "curve/policy.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using testing_support::Millis;
using testing_support::RunCommand;
using testing_support::TempDir;
using testing_support::WriteFile;

testing_support::CommandResult Simulate(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {KVWATCH_BINARY, "simulate", "--progress", "never"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, Millis(120000));
}

// One request: a 32-token prompt in two 16-token pages, 3 output tokens.
const char kOneRequest[] = R"({"timestamp": 0, "input_length": 32, "output_length": 3, "hash_ids": [1, 2]})"
                           "\n";

// Steps of 10 ms plus 1 ms per prefill token.
const char kCoefficients[] = "fixed=10ms,prefill_token=1ms";

TEST(SimulateCommandTest, OneRequestHandWorked) {
  TempDir dir;
  ASSERT_TRUE(WriteFile(dir.Sub("t.jsonl"), kOneRequest));
  auto r = Simulate({dir.Sub("t.jsonl"), "--step-coefficients", kCoefficients, "--pool-blocks", "100", "--admission",
                     "greedy", "--policy", "lru", "--load", "1", "--format", "json"});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS) << r.out;
  simdjson::dom::element run = doc["runs"].at(0);
  // Step 1 prefills 32 tokens: 10 + 32 ms, the first token at 42 ms; two decode
  // steps of 10 ms give the others at 52 and 62 ms.
  EXPECT_NEAR(double(run["ttft_s"]["p50"]), 0.042, 1e-12);
  EXPECT_NEAR(double(run["itl_s"]["p99"]), 0.010, 1e-12);
  EXPECT_NEAR(double(run["simulated_s"]), 0.062, 1e-12);
  EXPECT_NEAR(double(run["output_tokens_per_s"]), 3 / 0.062, 1e-9);
  EXPECT_EQ(uint64_t(run["finished"]), 1u);
  EXPECT_EQ(uint64_t(run["steps"]), 3u);
  EXPECT_TRUE(bool(run["meets_sla"]));
  EXPECT_EQ(uint64_t(doc["settings"]["pool"]["blocks"]), 100u);
  EXPECT_EQ(uint64_t(doc["settings"]["page_tokens"]), 16u);
  EXPECT_EQ(std::string_view(doc["settings"]["page_tokens_source"]), "inferred");
  EXPECT_DOUBLE_EQ(double(doc["combinations"].at(0)["max_load_meeting_sla"]), 1);
}

// Six requests sharing a 2-page system prompt, two tenants, no output lengths.
std::string SmallTrace(bool timestamps) {
  std::ostringstream out;
  for (int i = 0; i < 6; ++i) {
    out << "{";
    if (timestamps) out << "\"timestamp\": " << i * 100 << ", ";
    out << "\"tenant\": \"" << (i % 2 ? "b" : "a") << "\", \"input_length\": 60, \"hash_ids\": [7, 8, " << 100 + i
        << ", " << 200 + i << "]}\n";
  }
  return out.str();
}

// --tier and --tier-of, the SLA tier's spellings before --sla-tier (replay's --tier
// is a cache tier), are still read: the same output, and a note for each.
TEST(SimulateCommandTest, OldTierSpellingsStillReadWithANote) {
  TempDir dir;
  ASSERT_TRUE(WriteFile(dir.Sub("t.jsonl"), SmallTrace(true)));
  const std::vector<std::string> common = {dir.Sub("t.jsonl"),
                                           "--step-coefficients",
                                           kCoefficients,
                                           "--pool-blocks",
                                           "64",
                                           "--admission",
                                           "greedy",
                                           "--policy",
                                           "lru",
                                           "--load",
                                           "1",
                                           "--format",
                                           "json"};
  auto run = [&](const char* tier, const char* tier_of) {
    std::vector<std::string> args = common;
    args.insert(args.end(), {tier, "gold:ttft=1s,itl=50ms", tier, "free:ttft=5s", tier_of, "tenant:b=free"});
    return Simulate(args);
  };
  const auto now = run("--sla-tier", "--sla-tier-of");
  const auto old = run("--tier", "--tier-of");
  ASSERT_TRUE(now.Exited(0)) << now.Describe();
  ASSERT_TRUE(old.Exited(0)) << old.Describe();
  EXPECT_EQ(old.out, now.out);
  EXPECT_NE(now.out.find("\"free\""), std::string::npos) << now.out;
  EXPECT_EQ(now.err.find("deprecated"), std::string::npos) << now.Describe();
  EXPECT_NE(old.err.find("kvwatch simulate: --tier is deprecated; use --sla-tier\n"), std::string::npos)
      << old.Describe();
  EXPECT_NE(old.err.find("kvwatch simulate: --tier-of is deprecated; use --sla-tier-of\n"), std::string::npos)
      << old.Describe();
}

TEST(SimulateCommandTest, TableSaysWhatIsAssumedAndScoresEveryCombination) {
  TempDir dir;
  ASSERT_TRUE(WriteFile(dir.Sub("t.jsonl"), SmallTrace(false)));
  auto r = Simulate({dir.Sub("t.jsonl"),
                     "--step-coefficients",
                     kCoefficients,
                     "--pool-blocks",
                     "64",
                     "--admission",
                     "greedy,reserve-max",
                     "--policy",
                     "lru,s3fifo",
                     "--load",
                     "1,2",
                     "--rate",
                     "4",
                     "--output-tokens",
                     "5",
                     "--sla-tier",
                     "gold:ttft=1s,itl=50ms",
                     "--sla-tier",
                     "free:ttft=5s",
                     "--sla-tier-of",
                     "tenant:b=free"});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  const std::string& t = r.out;
  EXPECT_NE(t.find("assumed: no record has a timestamp: arrivals evenly spaced at 4.000 requests/s (--rate)"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("assumed: 6 of 6 records have no output_length: 5 output tokens assumed (--output-tokens)"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("gold (TTFT <= 1 s, ITL <= 50 ms: every request not in another tier (3 requests))"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("free (TTFT <= 5 s, ITL <= 100 ms: tenant b (3 requests))"), std::string::npos) << t;
  EXPECT_NE(t.find("KV pool: 64 blocks of 16 tokens per rank (given with --pool-blocks)"), std::string::npos) << t;
  for (const char* row : {"greedy       lru", "greedy       s3fifo", "reserve-max  lru", "reserve-max  s3fifo"}) {
    EXPECT_NE(t.find(row), std::string::npos) << row << "\n" << t;
  }
  EXPECT_NE(t.find("highest load meeting the SLA"), std::string::npos) << t;
}

TEST(SimulateCommandTest, CsvAndSvg) {
  TempDir dir;
  ASSERT_TRUE(WriteFile(dir.Sub("t.jsonl"), SmallTrace(true)));
  auto r = Simulate({dir.Sub("t.jsonl"), "--step-coefficients", kCoefficients, "--pool-blocks", "64", "--load",
                     "0.5,1,3", "--csv", "--svg", dir.Sub("plot.svg")});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  std::istringstream in(r.out);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header.rfind("admission,policy,load,requests,finished,rejected,", 0), 0u) << header;
  EXPECT_EQ(header.substr(header.rfind(',') + 1), "attainment_all");
  std::size_t rows = 0;
  for (std::string line; std::getline(in, line);) ++rows;
  EXPECT_EQ(rows, 3u * 3u * 3u);  // the default 3 admissions x 3 policies, 3 loads
  const std::string svg = testing_support::ReadFile(dir.Sub("plot.svg"));
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("</svg>\n"), std::string::npos);
  std::size_t lines = 0;
  for (std::size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++lines;
  EXPECT_EQ(lines, 2u * 9u);
}

TEST(SimulateCommandTest, PoolFromTheGpuMemorySubtractsTheWeights) {
  TempDir dir;
  ASSERT_TRUE(WriteFile(dir.Sub("t.jsonl"), kOneRequest));
  auto r = Simulate({dir.Sub("t.jsonl"), "--gpu", "h100", "--model", "llama-3-70b", "--tensor-parallel", "4",
                     "--admission", "greedy", "--policy", "lru", "--load", "1", "--format", "json"});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_EQ(r.err.find("deprecated"), std::string::npos) << r.err;
  // The old spelling still reads, with a note, and gives the same run.
  auto old = Simulate({dir.Sub("t.jsonl"), "--gpu", "h100", "--model", "llama-3-70b", "--tp", "4", "--admission",
                       "greedy", "--policy", "lru", "--load", "1", "--format", "json"});
  ASSERT_TRUE(old.Exited(0)) << old.Describe();
  EXPECT_NE(old.err.find("kvwatch simulate: --tp is deprecated; use --tensor-parallel"), std::string::npos) << old.err;
  EXPECT_EQ(old.out, r.out);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS) << r.out;
  // (80 GiB x 0.9 - 70.6e9 x 2 / 4 bytes) / (16 tokens x 81,920 bytes) = 32,050.3.
  EXPECT_EQ(uint64_t(doc["settings"]["pool"]["blocks"]), 32050u);
  EXPECT_EQ(std::string_view(doc["settings"]["pool"]["source"]), "gpu-memory");
  EXPECT_DOUBLE_EQ(double(doc["settings"]["pool"]["kv_bytes_per_token"]), 81920);
  EXPECT_EQ(std::string_view(doc["settings"]["time_model"]["kind"]), "roofline");
}

// Every policy replay knows runs in the replica too (--policy all), in replay's order.
TEST(SimulateCommandTest, EveryPolicyRunsInTheReplica) {
  TempDir dir;
  ASSERT_TRUE(WriteFile(dir.Sub("t.jsonl"), SmallTrace(true)));
  auto r = Simulate({dir.Sub("t.jsonl"), "--step-coefficients", kCoefficients, "--pool-blocks", "16", "--admission",
                     "greedy", "--policy", "all", "--load", "1", "--format", "json"});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS) << r.out;
  simdjson::dom::array runs = doc["runs"];
  ASSERT_EQ(runs.size(), std::size(curve::kAllPolicies));
  std::size_t i = 0;
  for (simdjson::dom::element run : runs) {
    EXPECT_EQ(std::string_view(run["policy"]), curve::PolicyName(curve::kAllPolicies[i++]));
    EXPECT_EQ(uint64_t(run["finished"]), 6u);
    // A request's KV takes 13 of the 16 blocks (60 + 128 - 1 tokens in pages of 15),
    // so blocks are reused; the shared 2-page system prompt hits for requests 2..6.
    EXPECT_GT(double(run["prefix_hit_ratio"]), 0.3) << std::string_view(run["policy"]);
  }
  // Without --priority rules the priority policy is lru, and the output says so.
  bool said = false;
  for (simdjson::dom::element a : doc["settings"]["assumptions"].get_array()) {
    said = said || std::string_view(a).find("no --priority rules") != std::string_view::npos;
  }
  EXPECT_TRUE(said) << r.out;
}

TEST(SimulateCommandTest, BadFlagsNameTheFlag) {
  TempDir dir;
  ASSERT_TRUE(WriteFile(dir.Sub("t.jsonl"), kOneRequest));
  const std::string trace = dir.Sub("t.jsonl");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--gpu", "v100", "--model", "llama-3-8b"}, "--gpu: unknown GPU 'v100'"},
      {{"--pool-blocks", "10"}, "--gpu: no time model"},
      {{"--step-coefficients", kCoefficients}, "--pool-blocks: no KV pool size"},
      {{"--step-coefficients", "fixed=-1", "--pool-blocks", "10"}, "--step-coefficients: fixed: must be >= 0"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--load", "0"}, "--load: each load factor"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--admission", "fifo"}, "--admission:"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--policy", "lazy"},
       "--policy: unknown policy 'lazy'"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--sla-tier", "gold:ttft=fast"},
       "--sla-tier: tier gold"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--sla-tier-of", "tenant:a=gold"},
       "--sla-tier-of: unknown tier 'gold'"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--block-tokens", "5"}, "--block-tokens: 5"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--page-tokens", "2000000"},
       "--page-tokens: must be between 1 and 1048576"},
      {{"--model-config", "/nonexistent/config.json", "--gpu", "h100"}, "--model-config:"},
      {{"--model", "llama-3-70b", "--gpu", "l40s"}, "--gpu: the weights"},
      {{"--calibrate", "/nonexistent/metrics.txt", "--pool-blocks", "10"}, "--calibrate: /nonexistent/metrics.txt"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--queue-order", "priority"},
       "--queue-order: priority needs --priority"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--class-quantile", "code=1.5"},
       "--class-quantile: expected CLASS=Q"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--class-quantile", "code=0.9,code=0.8"},
       "--class-quantile: class code given twice"},
      // Absurd values: refused naming the flag, never a crash or a run of nonsense.
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--load", "1e-300"},
       "--load: each load factor must be between 1e-06 and 1e+06, got 1e-300"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--load", "1e300"},
       "--load: each load factor must be between 1e-06 and 1e+06"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--load", "nan"}, "--load: each load factor"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--load", "inf"}, "--load: each load factor"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--load", "-1"}, "--load: each load factor"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--rate", "1e-300"},
       "--rate: must be between 1e-06 and 1e+09 requests/s"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "4294967295"},
       "--pool-blocks: must be between 1 and 4294967294, got 4294967295"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "18446744073709551615"},
       "--pool-blocks: must be between 1 and 4294967294"},
      {{"--step-coefficients", kCoefficients, "--model", "llama-3-8b", "--kv-bytes", "1e30"},
       "--kv-bytes: room for 4.768e+23 KV blocks, more than the 4294967294 a pool can have"},
      {{"--step-coefficients", kCoefficients, "--model", "llama-3-8b", "--kv-bytes", "1e300GB"},
       "--kv-bytes: expected a size such as 65536, 64KiB or 1MiB, got '1e300GB'"},
      // The model flags are replay's and the agent's (config/model_choice.h).
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--model", "llama-3-8b", "--bytes-per-token", "5"},
       "--model: give only one of --model, --model-config and --bytes-per-token"},
      {{"--step-coefficients", kCoefficients, "--bytes-per-token", "131072", "--tensor-parallel", "2", "--kv-bytes",
        "1GiB"},
       "--tensor-parallel: applies to --model or --model-config; --bytes-per-token is per rank"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--queue-timeout", "2x"},
       "--queue-timeout: expected a duration such as 250ms, 30s or 1h30m, or seconds, got '2x' or none"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--output-tokens", "16777217"},
       "--output-tokens: must be between 1 and 16777216"},
      {{"--step-coefficients", kCoefficients, "--pool-blocks", "10", "--max-output-tokens", "16777217"},
       "--max-output-tokens: must be at most 16777216"},
      {{"--calibrate", dir.path(), "--pool-blocks", "10"}, "--calibrate: " + dir.path() + ": is a directory"},
      {{"--calibrate", "/dev/zero", "--pool-blocks", "10"},
       "--calibrate: /dev/zero: is larger than 64 MiB (not an engine's /metrics scrape?)"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> argv = {trace};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = Simulate(argv);
    EXPECT_TRUE(r.Exited(2)) << message << "\n" << r.Describe();
    EXPECT_NE(r.err.find("kvwatch simulate: " + message), std::string::npos) << r.err;
  }
}

// Records the replica cannot run (no hash_ids; a prompt beyond 32 bits) are left
// out and said; the others run. Before, one of them stopped the whole command, and
// an input_length of 1e18 crashed it (a page size inferred from it).
TEST(SimulateCommandTest, RecordsItCannotRunAreLeftOutAndSaid) {
  TempDir dir;
  const std::string trace = dir.Sub("t.jsonl");
  ASSERT_TRUE(WriteFile(trace, std::string(kOneRequest) +
                                   R"({"timestamp": 1, "input_length": 0, "output_length": 3, "hash_ids": []})"
                                   "\n"
                                   R"({"timestamp": 2, "input_length": 1e18, "output_length": 3, "hash_ids": [1, 9]})"
                                   "\n"));
  auto r = Simulate({trace, "--step-coefficients", kCoefficients, "--pool-blocks", "10", "--format", "json"});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r.out);
  EXPECT_EQ(uint64_t(doc["settings"]["requests"]), 1u) << r.out;
  std::string assumed;
  for (simdjson::dom::element a : doc["settings"]["assumptions"].get_array())
    assumed += std::string(a.get_string().value()) + "\n";
  EXPECT_NE(assumed.find("1 of 3 records have no hash_ids: left out"), std::string::npos) << assumed;
  EXPECT_NE(assumed.find("1 of 3 records have a prompt over 4,294,967,295 tokens"), std::string::npos) << assumed;
  EXPECT_NE(assumed.find("16 tokens per trace page (inferred"), std::string::npos) << assumed;

  // Nothing left to run: an error that says why, not a crash.
  ASSERT_TRUE(WriteFile(trace, R"({"timestamp": 2, "input_length": 1e18, "output_length": 3, "hash_ids": [1, 9]})"
                               "\n"));
  r = Simulate({trace, "--step-coefficients", kCoefficients, "--pool-blocks", "10"});
  EXPECT_TRUE(r.Exited(1)) << r.Describe();
  EXPECT_NE(r.err.find("kvwatch simulate: no record can be simulated: 0 without hash_ids, 0 with a timestamp beyond "
                       "+-1e11 s, 1 with "
                       "a prompt over"),
            std::string::npos)
      << r.err;
}

// Prompts that split into more block ids than a run keeps (2^27: 1 GiB of ids), here
// 300 pages of 2^20 tokens at --block-tokens 1, give an error naming the flag;
// before, the split ran into bad_alloc (SIGABRT).
// output_length 0 reads as 0 (a request that prefills and ends without a token),
// not as missing (it used to get --output-tokens' 128); input_length 0 beside
// pages is a bad line naming the file, line and field (it used to read as missing).
TEST(SimulateCommandTest, ZeroLengthsReadAsZeroOrRefusedNamingTheLine) {
  TempDir dir;
  const std::string trace = dir.Sub("t.jsonl");
  ASSERT_TRUE(WriteFile(trace, std::string(kOneRequest) +
                                   R"({"timestamp": 1, "input_length": 0, "output_length": 3, "hash_ids": [1, 7]})"
                                   "\n"
                                   R"({"timestamp": 2, "input_length": 32, "output_length": 0, "hash_ids": [1, 8]})"
                                   "\n"));
  auto r = Simulate({trace, "--step-coefficients", kCoefficients, "--pool-blocks", "10", "--admission", "greedy",
                     "--policy", "lru", "--load", "1", "--timestamp-unit", "s", "--format", "json"});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_NE(r.err.find(trace + ":2: input_length is 0 but hash_ids has 2 pages"), std::string::npos) << r.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r.out);
  EXPECT_EQ(uint64_t(doc["settings"]["requests"]), 2u) << r.out;
  std::string assumed;
  for (simdjson::dom::element a : doc["settings"]["assumptions"].get_array())
    assumed += std::string(a.get_string().value()) + "\n";
  EXPECT_NE(assumed.find("1 of 2 records have output_length 0: each prefills its prompt and ends without a token"),
            std::string::npos)
      << assumed;
  EXPECT_EQ(assumed.find("no output_length"), std::string::npos) << assumed;
  // The first request's 3 tokens are all the output: the second's prefill (16
  // tokens past its hit on page 1, 26 ms at 2 s) ends the run at 2.026 s.
  simdjson::dom::element run = doc["runs"].at(0);
  EXPECT_EQ(uint64_t(run["finished"]), 2u);
  EXPECT_NEAR(double(run["simulated_s"]), 2.026, 1e-9);
  EXPECT_NEAR(double(run["output_tokens_per_s"]), 3 / 2.026, 1e-9);

  // --strict stops at the line instead.
  r = Simulate({trace, "--step-coefficients", kCoefficients, "--pool-blocks", "10", "--strict"});
  EXPECT_TRUE(r.Exited(1)) << r.Describe();
  EXPECT_NE(r.err.find(trace + ":2: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("input_length is 0"), std::string::npos) << r.err;
}

// Little's law from the JSON alone: for every run, the time-averaged number in the
// system equals the arrival rate (requests / simulated_s) times the mean time in
// the system (mean_latency_s.in_system), rejections by the queue timeout included;
// the finished requests' mean splits into queue wait, prefill and decode.
TEST(SimulateCommandTest, JsonCarriesLittlesLaw) {
  TempDir dir;
  const std::string trace = dir.Sub("t.jsonl");
  std::mt19937_64 rng(11);
  std::exponential_distribution<double> gap(8);  // 8 requests per second
  std::uniform_int_distribution<int> prompt_pages(1, 12), output(1, 200), system(0, 3);
  std::ostringstream text;
  double t = 0;
  for (int i = 0; i < 800; ++i) {
    t += gap(rng);
    const int pages = prompt_pages(rng), shared = std::min(pages, system(rng));
    text << "{\"timestamp\": " << static_cast<long long>(t * 1000) << ", \"input_length\": " << pages * 16
         << ", \"output_length\": " << output(rng) << ", \"hash_ids\": [";
    for (int k = 0; k < pages; ++k) text << (k ? ", " : "") << (k < shared ? k : 1000 * (i + 1) + k);
    text << "]}\n";
  }
  ASSERT_TRUE(WriteFile(trace, text.str()));
  auto r = Simulate({trace, "--step-coefficients", "fixed=10ms,prefill_token=20us,decode_sequence=0.1ms",
                     "--pool-blocks", "150", "--max-batched-tokens", "512", "--queue-timeout", "500ms", "--admission",
                     "greedy,rate-cap", "--policy", "lru", "--load", "0.5,4", "--format", "json"});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS) << r.out;
  std::uint64_t rejected = 0;
  for (simdjson::dom::element run : doc["runs"].get_array()) {
    const std::string what =
        std::string(std::string_view(run["admission"])) + " at " + std::to_string(double(run["load"]));
    const double arrivals_per_s = double(uint64_t(run["requests"])) / double(run["simulated_s"]);
    simdjson::dom::element mean = run["mean_latency_s"];
    EXPECT_GT(double(run["mean_in_system"]), 1) << what;
    EXPECT_NEAR(double(run["mean_in_system"]) / (arrivals_per_s * double(mean["in_system"])), 1, 1e-6) << what;
    EXPECT_NEAR(double(mean["queue_wait"]) + double(mean["prefill"]), double(mean["ttft"]), 1e-9) << what;
    EXPECT_NEAR(double(mean["ttft"]) + double(mean["decode"]), double(mean["finished"]), 1e-9) << what;
    EXPECT_GT(double(mean["decode"]), double(mean["prefill"])) << what;  // 100 tokens a request on average
    rejected += uint64_t(run["rejected"]);
  }
  EXPECT_GT(rejected, 0u);  // the timeout bites at load 4
}

TEST(SimulateCommandTest, TooManyBlocksIsAnErrorNotAnAbort) {
  TempDir dir;
  const std::string trace = dir.Sub("t.jsonl");
  std::string ids;
  for (int i = 0; i < 300; ++i) ids += (i ? ", " : "") + std::to_string(i);
  ASSERT_TRUE(WriteFile(
      trace, R"({"timestamp": 0, "input_length": 314572800, "output_length": 3, "hash_ids": [)" + ids + "]}\n"));
  auto r = Simulate({trace, "--step-coefficients", kCoefficients, "--pool-blocks", "10", "--page-tokens", "1048576",
                     "--block-tokens", "1"});
  EXPECT_TRUE(r.Exited(1)) << r.Describe();
  EXPECT_NE(r.err.find("more than 134,217,728 blocks of 1 tokens by record 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--block-tokens"), std::string::npos) << r.err;
}

// A timestamp beyond +-1e11 s (1e300, -1e300: far future and past) and an output
// over 2^24 tokens are left out and said, like a record without hash_ids. Before,
// one far timestamp stretched the run over 1e300 s (every rate 0, every request
// alone), and an output of 1e8 tokens was simulated token by token.
TEST(SimulateCommandTest, FarTimestampsAndHugeOutputsAreLeftOutAndSaid) {
  TempDir dir;
  const std::string trace = dir.Sub("t.jsonl");
  ASSERT_TRUE(
      WriteFile(trace, std::string(kOneRequest) +
                           R"({"timestamp": 1e300, "input_length": 32, "output_length": 3, "hash_ids": [1, 3]})"
                           "\n"
                           R"({"timestamp": -1e300, "input_length": 32, "output_length": 3, "hash_ids": [1, 4]})"
                           "\n"
                           R"({"timestamp": 2, "input_length": 32, "output_length": 100000000, "hash_ids": [1, 5]})"
                           "\n"
                           R"({"timestamp": 3, "input_length": 32, "output_length": 16777216, "hash_ids": [1, 6]})"
                           "\n"));
  auto r = Simulate({trace, "--step-coefficients", kCoefficients, "--pool-blocks", "10", "--admission", "greedy",
                     "--policy", "lru", "--load", "1", "--timestamp-unit", "s", "--format", "json"});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r.out);
  EXPECT_EQ(uint64_t(doc["settings"]["requests"]), 2u) << r.out;
  EXPECT_DOUBLE_EQ(double(doc["settings"]["trace_span_s"]), 3) << r.out;
  std::string assumed;
  for (simdjson::dom::element a : doc["settings"]["assumptions"].get_array())
    assumed += std::string(a.get_string().value()) + "\n";
  EXPECT_NE(assumed.find("2 of 5 records have a timestamp beyond +-1e11 s (over 3,000 years from 1970): left out"),
            std::string::npos)
      << assumed;
  EXPECT_NE(assumed.find("1 of 5 records have an output_length over 16,777,216 tokens: left out"), std::string::npos)
      << assumed;

  // Only a far record had a timestamp: the rest are spaced at --rate, and said so.
  ASSERT_TRUE(WriteFile(trace, R"({"timestamp": 1e300, "input_length": 32, "output_length": 3, "hash_ids": [1, 3]})"
                               "\n"
                               R"({"input_length": 32, "output_length": 3, "hash_ids": [1, 4]})"
                               "\n"));
  r = Simulate({trace, "--step-coefficients", kCoefficients, "--pool-blocks", "10", "--format", "json"});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  doc = parser.parse(r.out);
  assumed.clear();
  for (simdjson::dom::element a : doc["settings"]["assumptions"].get_array())
    assumed += std::string(a.get_string().value()) + "\n";
  EXPECT_NE(assumed.find("no record has a timestamp within +-1e11 s: arrivals evenly spaced"), std::string::npos)
      << assumed;

  // Nothing left to run: an error that counts why.
  ASSERT_TRUE(WriteFile(trace, R"({"timestamp": 1e300, "input_length": 32, "output_length": 3, "hash_ids": [1, 3]})"
                               "\n"));
  r = Simulate({trace, "--step-coefficients", kCoefficients, "--pool-blocks", "10"});
  EXPECT_TRUE(r.Exited(1)) << r.Describe();
  EXPECT_NE(r.err.find("kvwatch simulate: no record can be simulated: 0 without hash_ids, 1 with a timestamp beyond "
                       "+-1e11 s"),
            std::string::npos)
      << r.err;
}

TEST(SimulateSetupTest, PagesSplitIntoSmallerBlocksKeepPrefixesShared) {
  SimulateOptions o;
  o.traces = {"x"};
  o.step_coefficients = kCoefficients;
  o.pool_blocks = 100;
  o.block_tokens = 4;
  auto setup = ResolveSimulateOptions(o);
  ASSERT_TRUE(setup.ok()) << setup.error();
  ASSERT_TRUE(SettleSimulatePool(&setup.value(), 16).ok());
  std::vector<curve::Request> trace(2);
  trace[0].timestamp_s = 5;
  trace[0].input_tokens = 30;  // two pages of 16, the second partial: 8 blocks of 4
  trace[0].output_tokens = 2;
  trace[0].pages = {1, 2};
  trace[1].timestamp_s = 7;
  trace[1].input_tokens = 16;
  trace[1].pages = {1};
  auto built = BuildReplicaRequests(trace, &setup.value());
  ASSERT_TRUE(built.ok()) << built.error();
  const auto& r = built.value();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].pages.size(), 8u);
  EXPECT_EQ(r[1].pages.size(), 4u);
  EXPECT_TRUE(std::equal(r[1].pages.begin(), r[1].pages.end(), r[0].pages.begin()));
  EXPECT_DOUBLE_EQ(r[0].arrival_s, 0);
  EXPECT_DOUBLE_EQ(r[1].arrival_s, 2);
  EXPECT_EQ(r[1].output_tokens, 128u);  // the default assumption
  EXPECT_EQ(setup.value().settings.block_tokens, 4u);
  bool split_said = false;
  for (const std::string& a : setup.value().settings.assumptions) {
    split_said = split_said || a.find("split into 4 blocks of 4 tokens") != std::string::npos;
  }
  EXPECT_TRUE(split_said);
}

// --class-quantile sets reserve-quantile's q of the named classes (record classes
// here), the others keep --reserve-quantile; a class the trace lacks is an error.
TEST(SimulateSetupTest, ClassQuantilesGoToTheirClassIds) {
  SimulateOptions o;
  o.traces = {"x"};
  o.step_coefficients = kCoefficients;
  o.pool_blocks = 100;
  o.reserve_quantile = 0.8;
  o.class_quantiles = "code=0.99,chat=0.5";
  auto setup = ResolveSimulateOptions(o);
  ASSERT_TRUE(setup.ok()) << setup.error();
  ASSERT_TRUE(SettleSimulatePool(&setup.value(), 16).ok());
  std::vector<curve::Request> trace(3);
  const char* classes[] = {"chat", "batch", "code"};
  for (int i = 0; i < 3; ++i) {
    trace[i].timestamp_s = i;
    trace[i].input_tokens = 16;
    trace[i].output_tokens = 4;
    trace[i].request_class = classes[i];
    trace[i].pages = {static_cast<curve::PageId>(i + 1)};
  }
  auto built = BuildReplicaRequests(trace, &setup.value());
  ASSERT_TRUE(built.ok()) << built.error();
  const auto& r = built.value();
  const auto& q = setup.value().replica.class_quantiles;
  EXPECT_DOUBLE_EQ(q[r[0].class_id], 0.5);   // chat
  EXPECT_DOUBLE_EQ(q[r[1].class_id], 0.8);   // batch: --reserve-quantile
  EXPECT_DOUBLE_EQ(q[r[2].class_id], 0.99);  // code

  o.class_quantiles = "cod=0.99";
  auto typo = ResolveSimulateOptions(o);
  ASSERT_TRUE(typo.ok()) << typo.error();
  ASSERT_TRUE(SettleSimulatePool(&typo.value(), 16).ok());
  auto refused = BuildReplicaRequests(trace, &typo.value());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(
      refused.error().find("--class-quantile: no request of class 'cod' in the trace (its classes: batch, chat, code)"),
      std::string::npos)
      << refused.error();
}

TEST(SimulateCommandTest, MooncakeConversationAtTwoLoads) {
  const std::string path = std::string(KVWATCH_SHARED_DATA) + "/mooncake/conversation_trace.jsonl";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  auto r = Simulate({path, "--gpu", "h100", "--model", "llama-3-70b", "--tensor-parallel", "4", "--admission", "greedy",
                     "--policy", "lru", "--load", "0.1,0.3", "--format", "json"});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS);
  EXPECT_EQ(uint64_t(doc["settings"]["requests"]), 12031u);
  EXPECT_EQ(uint64_t(doc["settings"]["page_tokens"]), 512u);
  simdjson::dom::array runs = doc["runs"];
  ASSERT_EQ(runs.size(), 2u);
  for (simdjson::dom::element run : runs) {
    EXPECT_EQ(uint64_t(run["finished"]) + uint64_t(run["rejected"]), 12031u);
    EXPECT_GT(double(run["prefix_hit_ratio"]), 0);
  }
  // Three times the arrivals: more tokens per second, a longer TTFT tail.
  EXPECT_GT(double(runs.at(1)["output_tokens_per_s"]), double(runs.at(0)["output_tokens_per_s"]));
  EXPECT_GE(double(runs.at(1)["ttft_s"]["p99"]), double(runs.at(0)["ttft_s"]["p99"]));
}

}  // namespace
}  // namespace kvwatch::agent

namespace kvwatch::agent {
namespace {

std::vector<double> Arrivals(bool spread, std::vector<std::string>* assumptions,
                             const std::vector<double>& times = {10, 10, 10, 13}) {
  SimulateOptions o;
  o.traces = {"x"};
  o.step_coefficients = kCoefficients;
  o.pool_blocks = 100;
  o.spread_ties = spread;
  auto setup = ResolveSimulateOptions(o);
  EXPECT_TRUE(setup.ok());
  EXPECT_TRUE(SettleSimulatePool(&setup.value(), 16).ok());
  std::vector<curve::Request> trace(times.size());
  for (std::size_t i = 0; i < trace.size(); ++i) {
    trace[i].timestamp_s = times[i];  // default: three at once, then one 3 s later
    trace[i].input_tokens = 16;
    trace[i].output_tokens = 1;
    trace[i].pages = {i};
  }
  auto built = BuildReplicaRequests(trace, &setup.value());
  EXPECT_TRUE(built.ok());
  *assumptions = setup.value().settings.assumptions;
  std::vector<double> out;
  for (const auto& r : built.value()) out.push_back(r.arrival_s);
  return out;
}

TEST(SimulateSetupTest, TiedArrivalsAreSaidAndSpreadOnlyWhenAsked) {
  std::vector<std::string> said;
  EXPECT_EQ(Arrivals(false, &said), (std::vector<double>{0, 0, 0, 3}));
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said[0].find("3 of 4 requests share an arrival time with another (2 distinct times): each group arrives "
                         "at once"),
            std::string::npos)
      << said[0];
  EXPECT_EQ(Arrivals(true, &said), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_NE(said[0].find("spread evenly up to the next time, the last over the gap before it (--spread-ties)"),
            std::string::npos)
      << said[0];
  // The last group has no next time: it spreads over the gap before it (3 s for
  // three requests). It used to stay at once although the note said spread.
  EXPECT_EQ(Arrivals(true, &said, {10, 13, 13, 13}), (std::vector<double>{0, 3, 4, 5}));
  // One time only: spaced at --rate (1 request/s).
  EXPECT_EQ(Arrivals(true, &said, {10, 10, 10}), (std::vector<double>{0, 1, 2}));
  EXPECT_NE(said[0].find("3 of 3 requests share an arrival time with another (1 distinct times): spread evenly at "
                         "--rate (--spread-ties)"),
            std::string::npos)
      << said[0];
}

}  // namespace
}  // namespace kvwatch::agent

namespace kvwatch::agent {
namespace {

// Two vLLM scrapes an engine with steps of 10 ms + 1e-8 s per context token and
// 1e-4 s per computed prompt token reports (docs/simulate.md "The fit"), at 4 and
// 20 running requests.
const char kScrapeLow[] =
    "vllm:request_prefill_time_seconds_sum 11.0042\nvllm:request_prefill_time_seconds_count 100\n"
    "vllm:inter_token_latency_seconds_sum 99.4158\nvllm:inter_token_latency_seconds_count 9900\n"
    "vllm:prompt_tokens_total 100000\nvllm:generation_tokens_total 10000\nvllm:num_requests_running 4\n";
const char kScrapeHigh[] =
    "vllm:request_prefill_time_seconds_sum 32.084\nvllm:request_prefill_time_seconds_count 200\n"
    "vllm:inter_token_latency_seconds_sum 414.716\nvllm:inter_token_latency_seconds_count 39800\n"
    "vllm:prompt_tokens_total 400000\nvllm:prefix_cache_hits_total 100000\nvllm:generation_tokens_total 40000\n"
    "vllm:num_requests_running 20\n";

TEST(SimulateCommandTest, CalibratedFromTwoScrapes) {
  TempDir dir;
  ASSERT_TRUE(WriteFile(dir.Sub("t.jsonl"), kOneRequest));
  ASSERT_TRUE(WriteFile(dir.Sub("low.prom"), kScrapeLow));
  ASSERT_TRUE(WriteFile(dir.Sub("high.prom"), kScrapeHigh));
  auto r = Simulate({dir.Sub("t.jsonl"), "--calibrate", dir.Sub("low.prom"), "--calibrate", dir.Sub("high.prom"),
                     "--pool-blocks", "100", "--admission", "greedy", "--policy", "lru", "--load", "1", "--json"});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS) << r.out;
  simdjson::dom::element tm = doc["settings"]["time_model"];
  EXPECT_EQ(std::string_view(tm["kind"]), "calibrated");
  EXPECT_NE(std::string_view(tm["detail"]).find("least squares over 2 observations"), std::string_view::npos);
  EXPECT_NEAR(double(tm["coefficients"]["fixed_s"]), 0.01, 1e-9);
  EXPECT_NEAR(double(tm["coefficients"]["per_context_token_s"]), 1e-8, 1e-14);
  EXPECT_NEAR(double(tm["coefficients"]["per_prefill_token_s"]), 1e-4, 1e-10);
  // The one request: 10 ms + 32 x 0.1 ms to its first token.
  EXPECT_NEAR(double(doc["runs"].at(0)["ttft_s"]["p50"]), 0.0132, 1e-9);
}

}  // namespace
}  // namespace kvwatch::agent
