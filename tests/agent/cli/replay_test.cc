// `kvwatch replay`: the command-line contract (section 7 of the curve semantics),
// its errors, and its numbers on the real Mooncake traces against an independent
// computation.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <sys/wait.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "agent/cli/replay_command.h"
#include "collectors/trace_reader.h"
#include "curve/tenants.h"

namespace kvwatch::agent {
namespace {

namespace fs = std::filesystem;

struct ShellResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the real binary with a shell command line (arguments are test-controlled).
ShellResult RunKvwatch(const std::string& args, const std::string& stdin_file = "") {
  const fs::path dir = fs::temp_directory_path() / ("kvwatch_replay_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string out = (dir / "out").string(), err = (dir / "err").string();
  std::string cmd = std::string(KVWATCH_BINARY) + " " + args + " >" + out + " 2>" + err;
  if (!stdin_file.empty()) cmd += " <" + stdin_file;
  const int status = std::system(cmd.c_str());
  ShellResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream o(out), e(err);
  std::stringstream so, se;
  so << o.rdbuf();
  se << e.rdbuf();
  r.out = so.str();
  r.err = se.str();
  return r;
}

class ReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvwatch_replay_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  fs::path dir_;
};

// The worked example of the semantics: A B C A D B A.
const char* kWorkedExample =
    "{\"timestamp\": 0, \"hash_ids\": [1]}\n"
    "{\"timestamp\": 1, \"hash_ids\": [2]}\n"
    "{\"timestamp\": 2, \"hash_ids\": [3]}\n"
    "{\"timestamp\": 3, \"hash_ids\": [1]}\n"
    "{\"timestamp\": 4, \"hash_ids\": [4]}\n"
    "{\"timestamp\": 5, \"hash_ids\": [2]}\n"
    "{\"timestamp\": 6, \"hash_ids\": [1]}\n";

TEST_F(ReplayTest, JsonFollowsTheContract) {
  const std::string trace = Write("t.jsonl", kWorkedExample);
  ShellResult r = RunKvwatch("replay --format json --capacities 3,4 --model llama-2-7b " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS) << r.out;
  EXPECT_EQ(uint64_t(doc["requests"]), 7u);
  EXPECT_EQ(uint64_t(doc["page_refs"]), 7u);
  EXPECT_EQ(uint64_t(doc["distinct_pages"]), 4u);
  EXPECT_EQ(uint64_t(doc["unlimited_page_hits"]), 3u);
  simdjson::dom::array points = doc["points"];
  ASSERT_EQ(points.size(), 2u);
  std::vector<std::uint64_t> hits;
  for (simdjson::dom::element p : points) {
    hits.push_back(uint64_t(p["page_hits"]));
    EXPECT_TRUE(p["page_hit_ratio"].is_number());
    EXPECT_TRUE(p["request_coverage"].is_number());
    EXPECT_TRUE(p["reused_tokens"].is_number());
    // Llama 2 7B: 524,288 bytes per token, 16 tokens per page.
    EXPECT_DOUBLE_EQ(double(p["capacity_bytes"]), double(uint64_t(p["capacity_pages"])) * 16 * 524288);
  }
  EXPECT_EQ(hits, (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(uint64_t(doc["points"].at(0)["reused_tokens"]), 32u);
  simdjson::dom::array ws = doc["working_set"];
  std::set<std::string> targets;
  for (simdjson::dom::element e : ws) {
    targets.insert(std::string(std::string_view(e["target"])));
    EXPECT_TRUE(e["fraction"].is_number());
    EXPECT_TRUE(e["capacity_pages"].is_uint64() || e["capacity_pages"].is_null());
    EXPECT_TRUE(e["bytes"].is_number() || e["bytes"].is_null());
  }
  EXPECT_EQ(targets, (std::set<std::string>{"page_hit", "request_coverage"}));
  EXPECT_EQ(ws.size(), 12u);  // the six standard targets on both metrics
  EXPECT_TRUE(doc["knee"]["capacity_pages"].is_uint64() || doc["knee"]["capacity_pages"].is_null());
}

TEST_F(ReplayTest, NotConvergedIsNullInJson) {
  // Three distinct pages cycled with M = 2: every reuse is beyond tracked.
  const std::string trace = Write("t.jsonl",
                                  "{\"hash_ids\":[1]}\n{\"hash_ids\":[2]}\n{\"hash_ids\":[3]}\n"
                                  "{\"hash_ids\":[1]}\n{\"hash_ids\":[2]}\n{\"hash_ids\":[3]}\n");
  ShellResult r = RunKvwatch("replay --format json --max-pages 2 " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r.out);
  EXPECT_EQ(uint64_t(doc["unlimited_page_hits"]), 3u);
  EXPECT_EQ(uint64_t(doc["beyond_tracked"]), 3u);
  for (simdjson::dom::element e : simdjson::dom::array(doc["working_set"])) {
    if (std::string_view(e["target"]) == "page_hit") {
      EXPECT_TRUE(e["capacity_pages"].is_null());
    }
  }
  ShellResult table = RunKvwatch("replay --max-pages 2 " + trace);
  EXPECT_NE(table.out.find("not converged"), std::string::npos) << table.out;
}

TEST_F(ReplayTest, ReadsGzipAndStdinAlike) {
  const std::string plain = Write("t.jsonl", kWorkedExample);
  const std::string gz = (dir_ / "t.jsonl.gz").string();
  gzFile f = gzopen(gz.c_str(), "wb");
  gzputs(f, kWorkedExample);
  gzclose(f);
  ShellResult a = RunKvwatch("replay --format csv " + plain);
  ShellResult b = RunKvwatch("replay --format csv " + gz);
  ShellResult c = RunKvwatch("replay --format csv -", plain);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out, c.out);
  EXPECT_EQ(a.out.substr(0, a.out.find('\n')),
            "tenant,capacity_pages,capacity_bytes,page_hits,page_hit_ratio,request_coverage,reused_tokens,"
            "avoided_prefill_flops,avoided_prefill_seconds");
}

TEST_F(ReplayTest, BadLinesAreReportedWithFileAndLineAndSkipped) {
  const std::string trace = Write("bad.jsonl",
                                  "{\"hash_ids\": [1, 2]}\n"
                                  "not json\n"
                                  "{\"timestamp\": 5}\n"
                                  "{\"hash_ids\": [1, -2]}\n"
                                  "{\"hash_ids\": [1, 2.5]}\n"
                                  "{\"hash_ids\": [1, 2]}\n");
  ShellResult r = RunKvwatch("replay --format json " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int line : {2, 3, 4, 5}) {
    EXPECT_NE(r.err.find("bad.jsonl:" + std::to_string(line) + ":"), std::string::npos) << r.err;
  }
  EXPECT_NE(r.err.find("skipped 4 bad lines of 6"), std::string::npos) << r.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r.out);
  EXPECT_EQ(uint64_t(doc["requests"]), 2u);
  EXPECT_EQ(uint64_t(doc["input"]["bad_lines"]), 4u);

  ShellResult strict = RunKvwatch("replay --strict " + trace);
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_NE(strict.err.find("bad.jsonl:2"), std::string::npos) << strict.err;
}

TEST_F(ReplayTest, ImpossibleSettingsNameTheOption) {
  const std::string trace = Write("t.jsonl", kWorkedExample);
  struct Case {
    std::string args;
    std::string option;
  };
  for (const Case& c : std::vector<Case>{
           {"--coverage-share 1.5", "--coverage-share"},
           {"--coverage-share 0", "--coverage-share"},
           {"--max-pages 0", "--max-pages"},
           {"--model llama-3-8b --tensor-parallel 3", "--tensor-parallel"},
           {"--model no-such-model", "--model"},
           {"--touch-order sideways", "--touch-order"},
           {"--format xml", "--format"},
           {"--sample-rate 2", "--sample-rate"},
           {"--tier dram", "--tier"},
           {"--page-hit-targets 0.5,1.2", "--page-hit-targets"},
           {"--no-such-option", "--no-such-option"},
       }) {
    ShellResult r = RunKvwatch("replay " + c.args + " " + trace);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.err.find(c.option), std::string::npos) << c.args << ": " << r.err;
  }
  // Absurd capacities: the flag and the entry named, before anything runs (a tier of
  // 1e300 pages was cast to 64 bits; --capacities 0 or 2^64 - 1 drew a curve).
  for (const Case& c : std::vector<Case>{
           {"--tier hbm:1e300",
            "--tier: tier 'hbm:1e300': capacity must be a whole number of pages from 1 to "
            "9007199254740992"},
           {"--tier hbm:18446744073709551615", "--tier: tier 'hbm:18446744073709551615': capacity must be"},
           {"--tier hbm:0", "--tier: tier 'hbm:0': capacity must be"},
           {"--capacities 5,0", "--capacities: entry 2 is 0: each capacity must be from 1 to 9007199254740992 pages"},
           {"--capacities 18446744073709551615", "--capacities: entry 1 is 18446744073709551615"},
           {"--capacities 10,4294967295 --policy lru",
            "--capacities: entry 2 is 4294967295: each capacity must be from 1 to 4294967293 pages with --policy"},
       }) {
    ShellResult r = RunKvwatch("replay " + c.args + " " + trace);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_NE(r.err.find("kvwatch replay: " + c.option), std::string::npos) << c.args << ": " << r.err;
  }
  ShellResult huge_tier = RunKvwatch("replay --tier hbm:9007199254740992 " + trace);
  EXPECT_EQ(huge_tier.exit_code, 0) << huge_tier.err;
  ShellResult missing = RunKvwatch("replay " + (dir_ / "absent.jsonl").string());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("absent.jsonl"), std::string::npos) << missing.err;
}

TEST_F(ReplayTest, HelpDocumentsEveryOption) {
  ShellResult r = RunKvwatch("replay --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* option : {"--format",
                             "--capacities",
                             "--coverage-share",
                             "--touch-order",
                             "--max-pages",
                             "--page-tokens",
                             "--page-hit-targets",
                             "--coverage-targets",
                             "--model",
                             "--model-config",
                             "--bytes-per-token",
                             "--kv-dtype",
                             "--tensor-parallel",
                             "--metadata-bytes-per-page",
                             "--reserve",
                             "--prefill-flops-per-second",
                             "--tier",
                             "--sample-rate",
                             "--svg",
                             "--knee-sensitivity",
                             "--strict",
                             "--timestamp-unit",
                             "--tenant-field",
                             "--no-tenants",
                             "--progress",
                             "--policy",
                             "--s3fifo-promotion-hits",
                             "--hybrid-check"}) {
    EXPECT_NE(r.out.find(option), std::string::npos) << option;
  }
}

// One spelling of each model flag in every command that sizes KV (config/model_choice.h);
// --tp, simulate's old spelling, is listed only as deprecated.
TEST_F(ReplayTest, EveryCommandTakesTheSameModelFlags) {
  for (const char* command : {"replay", "simulate", "agent", "check-config"}) {
    ShellResult r = RunKvwatch(std::string(command) + " --help");
    EXPECT_EQ(r.exit_code, 0) << command;
    for (const char* option :
         {"--model ", "--model-config ", "--bytes-per-token ", "--kv-dtype ", "--tensor-parallel "}) {
      EXPECT_NE(r.out.find(option), std::string::npos) << command << " " << option;
    }
    const std::size_t tp = r.out.find("--tp ");
    ASSERT_NE(tp, std::string::npos) << command;
    EXPECT_LT(r.out.find("Deprecated spellings"), tp) << command;
  }
  const std::string trace = Write("t.jsonl", kWorkedExample);
  ShellResult with_tp = RunKvwatch("replay --format json --model llama-3-70b --tp 4 " + trace);
  ShellResult with_tensor_parallel =
      RunKvwatch("replay --format json --model llama-3-70b --tensor-parallel 4 " + trace);
  EXPECT_EQ(with_tp.exit_code, 0) << with_tp.err;
  EXPECT_NE(with_tp.err.find("kvwatch replay: --tp is deprecated; use --tensor-parallel"), std::string::npos)
      << with_tp.err;
  EXPECT_EQ(with_tp.out, with_tensor_parallel.out);
  EXPECT_NE(with_tp.out.find("\"tensor_parallel\":4"), std::string::npos) << with_tp.out;
}

// A hybrid model (gpt-oss-20b: 12 sliding-window layers of 128 tokens, 12 full)
// adds the "hybrid" object beside the main curve, which stays the full-attention
// count; a dense model's output has none.
TEST_F(ReplayTest, HybridModelAddsItsCurveBesideTheFullCount) {
  std::string text;
  for (int r = 0; r < 300; ++r) {
    const int doc = r % 7, shared = 4 + r % 9;
    text += "{\"timestamp\": " + std::to_string(r) + ", \"input_length\": " + std::to_string((shared + 2) * 16) +
            ", \"output_length\": " + std::to_string(r % 40) + ", \"hash_ids\": [";
    for (int i = 0; i < shared; ++i) text += std::to_string(doc * 1000 + i) + ", ";
    text += std::to_string(100000 + 2 * r) + ", " + std::to_string(100001 + 2 * r) + "]}\n";
  }
  const std::string trace = Write("t.jsonl", text);
  ShellResult r = RunKvwatch("replay --format json --page-tokens 16 --model gpt-oss-20b --hybrid-check " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS) << r.out;
  // The main curve: every layer full attention, 2 * 24 * 8 * 64 * 2 bytes per token.
  EXPECT_EQ(double(doc["settings"]["bytes_per_token"]), 49152.0);
  simdjson::dom::element h = doc["hybrid"];
  EXPECT_EQ(double(h["full_attention_bytes_per_token"]), 49152.0);
  EXPECT_EQ(double(h["unit_bytes"]), 16.0 * 24576);
  simdjson::dom::array groups = h["groups"];
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(std::string_view(groups.at(0)["kind"]), "sliding_window");
  EXPECT_EQ(std::uint64_t(groups.at(0)["window_tokens"]), 128u);
  EXPECT_EQ(std::uint64_t(groups.at(0)["bytes_per_token"]), 24576u);
  EXPECT_EQ(std::string_view(groups.at(1)["kind"]), "full");
  EXPECT_TRUE(groups.at(1)["window_tokens"].is_null());
  // Every page is referenced in both counts: the same reusable pages.
  EXPECT_EQ(double(h["unlimited_page_hits"]), double(doc["unlimited_page_hits"]));
  EXPECT_GT(double(h["unlimited_page_hits"]), 0.0);
  for (simdjson::dom::element e : simdjson::dom::array(h["working_set"])) {
    if (e["capacity_pages"].is_null()) continue;
    EXPECT_EQ(double(e["bytes"]), double(std::uint64_t(e["capacity_pages"])) * 16 * 24576);
  }
  // The groups' bytes add up to at most the pool, and to everything once it holds all.
  simdjson::dom::array rows = h["group_bytes"]["rows"];
  ASSERT_GT(rows.size(), 0u);
  for (simdjson::dom::element row : rows) {
    double sum = 0;
    for (simdjson::dom::element b : simdjson::dom::array(row["bytes"])) sum += double(b);
    EXPECT_LE(sum, double(row["capacity_bytes"]) + 1e-6);
  }
  // --hybrid-check: the simulated touch-all pool is the one-pass curve.
  simdjson::dom::array check = h["check"];
  ASSERT_GT(check.size(), 0u);
  for (simdjson::dom::element row : check) {
    EXPECT_EQ(double(row["page_hit_ratio"]["touch_all"]), double(row["page_hit_ratio"]["one_pass"]));
    EXPECT_GT(double(row["page_hit_ratio"]["vllm"]), 0.0);
  }

  // The table has the section; a dense model has neither it nor the JSON object.
  ShellResult table = RunKvwatch("replay --page-tokens 16 --model gpt-oss-20b " + trace);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("hybrid KV cache groups"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("sliding_window"), std::string::npos);
  ShellResult dense = RunKvwatch("replay --format json --page-tokens 16 --model llama-3-8b " + trace);
  ASSERT_EQ(dense.exit_code, 0) << dense.err;
  EXPECT_EQ(dense.out.find("\"hybrid\""), std::string::npos);
  ShellResult no_groups = RunKvwatch("replay --hybrid-check --model llama-3-8b " + trace);
  EXPECT_EQ(no_groups.exit_code, 2);
  EXPECT_NE(no_groups.err.find("--hybrid-check: needs a hybrid model"), std::string::npos) << no_groups.err;

  // --hybrid-pool-shares: a pool per group (SGLang, TensorRT-LLM). Each group then
  // has its share only, so a working set needs at least the one pool's bytes.
  ShellResult split =
      RunKvwatch("replay --format json --page-tokens 16 --model gpt-oss-20b --hybrid-pool-shares 8,10 " + trace);
  ASSERT_EQ(split.exit_code, 0) << split.err;
  simdjson::dom::parser split_parser;  // doc and h stay the first parser's
  simdjson::dom::element sdoc;
  ASSERT_EQ(split_parser.parse(split.out).get(sdoc), simdjson::SUCCESS) << split.out;
  simdjson::dom::array shares = sdoc["hybrid"]["pool_shares"];
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_EQ(std::uint64_t(shares.at(0)), 8u);
  EXPECT_TRUE(h["pool_shares"].error() == simdjson::NO_SUCH_FIELD);  // one pool: no field
  double one_pool = 0, split_pools = 0;
  for (simdjson::dom::element e : simdjson::dom::array(doc["hybrid"]["working_set"])) {
    if (std::string_view(e["target"]) == "page_hit" && double(e["fraction"]) == 0.9) one_pool = double(e["bytes"]);
  }
  for (simdjson::dom::element e : simdjson::dom::array(sdoc["hybrid"]["working_set"])) {
    if (std::string_view(e["target"]) == "page_hit" && double(e["fraction"]) == 0.9) split_pools = double(e["bytes"]);
  }
  EXPECT_GT(one_pool, 0.0);
  EXPECT_GE(split_pools, one_pool);
  for (const char* bad : {"--hybrid-pool-shares 8 --model gpt-oss-20b", "--hybrid-pool-shares 0,1 --model gpt-oss-20b",
                          "--hybrid-pool-shares 8,10 --model llama-3-8b",
                          "--hybrid-pool-shares 8,10 --hybrid-check --model gpt-oss-20b"}) {
    ShellResult r = RunKvwatch(std::string("replay ") + bad + " " + trace);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--hybrid-pool-shares: "), std::string::npos) << bad << ": " << r.err;
  }

  // The same model from its config.json gives the same hybrid curve.
  std::string types;
  for (int i = 0; i < 24; ++i)
    types += std::string(i ? ", " : "") + (i % 2 ? "\"full_attention\"" : "\"sliding_attention\"");
  const std::string config = Write("config.json", R"({"model_type": "gpt_oss", "num_hidden_layers": 24,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "sliding_window": 128,
    "torch_dtype": "bfloat16", "layer_types": [)" + types +
                                                      "]}");
  ShellResult from_config = RunKvwatch("replay --format json --page-tokens 16 --model-config " + config + " " + trace);
  ASSERT_EQ(from_config.exit_code, 0) << from_config.err;
  simdjson::dom::parser parser2;
  simdjson::dom::element doc2;
  ASSERT_EQ(parser2.parse(from_config.out).get(doc2), simdjson::SUCCESS);
  // (A config.json has no parameter count: no avoided prefill, so the working sets are compared.)
  EXPECT_EQ(simdjson::to_string(doc2["hybrid"]["working_set"]), simdjson::to_string(h["working_set"]));
  EXPECT_EQ(double(doc2["hybrid"]["unlimited_page_hits"]), double(h["unlimited_page_hits"]));
  // A tensor-parallel size that does not split the KV heads is refused, naming the option.
  ShellResult bad_tp = RunKvwatch("replay --model qwen3-next-80b-a3b --tensor-parallel 32 " + trace);
  EXPECT_EQ(bad_tp.exit_code, 2);
}

TEST_F(ReplayTest, SvgPlotIsWritten) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "{\"hash_ids\": [" + std::to_string(i % 37) + "]}\n";
  const std::string trace = Write("t.jsonl", text);
  const std::string svg = (dir_ / "plot.svg").string();
  ShellResult r = RunKvwatch("replay --bytes-per-token 131072 --svg " + svg + " " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream f(svg);
  std::stringstream s;
  s << f.rdbuf();
  const std::string plot = s.str();
  EXPECT_NE(plot.find("<svg"), std::string::npos);
  EXPECT_NE(plot.find("class=\"page-hit-ratio\""), std::string::npos);
  EXPECT_NE(plot.find("class=\"request-coverage\""), std::string::npos);
  EXPECT_NE(plot.find("class=\"knee\""), std::string::npos);
  EXPECT_NE(plot.find("MiB"), std::string::npos);  // the bytes axis
}

TEST_F(ReplayTest, TenantsAreBrokenDown) {
  const std::string trace = Write("t.jsonl",
                                  "{\"hash_ids\": [1, 2], \"tenant\": \"a\"}\n"
                                  "{\"hash_ids\": [1, 3], \"tenant\": \"b\"}\n"
                                  "{\"hash_ids\": [1, 2], \"tenant\": \"a\"}\n");
  ShellResult r = RunKvwatch("replay --format json " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r.out);
  EXPECT_EQ(uint64_t(doc["tenants"]["a"]["requests"]), 2u);
  EXPECT_EQ(uint64_t(doc["tenants"]["a"]["unlimited_page_hits"]), 2u);
  EXPECT_EQ(uint64_t(doc["tenants"]["b"]["unlimited_page_hits"]), 1u);
}

// A tenant per user: 30 tenants, the ones with more requests first in the table,
// which stops at 20 rows and says how many are left; JSON lists every one with
// its own numbers (each tenant's curve is kept compact, built dense one at a time).
TEST_F(ReplayTest, ManyTenantsFitTheTableAndJsonListsEveryOne) {
  std::string text;
  for (int t = 0; t < 30; ++t) {
    // Tenant t sends t + 1 requests for the same two pages: t hits of each page.
    for (int i = 0; i <= t; ++i) {
      text += "{\"hash_ids\": [" + std::to_string(1000 + 2 * t) + ", " + std::to_string(1001 + 2 * t) +
              "], \"tenant\": \"user" + std::to_string(t) + "\"}\n";
    }
  }
  const std::string trace = Write("t.jsonl", text);
  ShellResult table = RunKvwatch("replay " + trace);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("\nuser29 "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("\nuser10 "), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("\nuser9 "), std::string::npos) << table.out;
  EXPECT_LT(table.out.find("\nuser29 "), table.out.find("\nuser10 "));
  // The ten smallest: 1 + 2 + ... + 10 requests of 2 pages.
  EXPECT_NE(table.out.find("(10 more tenants with 110 page references; --format json or csv lists every one)"),
            std::string::npos)
      << table.out;

  ShellResult json = RunKvwatch("replay --format json " + trace);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(json.out);
  EXPECT_EQ(simdjson::dom::object(doc["tenants"]).size(), 30u);
  for (int t = 0; t < 30; ++t) {
    simdjson::dom::element row = doc["tenants"]["user" + std::to_string(t)];
    EXPECT_EQ(uint64_t(row["requests"]), static_cast<std::uint64_t>(t + 1));
    EXPECT_EQ(uint64_t(row["unlimited_page_hits"]), static_cast<std::uint64_t>(2 * t));
  }
}

// One label set: the tenants map, the interference rows and the policies' rows
// all use the agent's labels (curve::SanitizeLabel), requests without a tenant
// count under "none", and the tenants' requests, references and hits at every
// capacity sum to the trace's.
TEST_F(ReplayTest, TenantLabelsAreTheAgentsAndEveryRequestCounts) {
  const std::vector<std::string> raw = {"a b/c", "other", "", "a b/c", "x", "other", "a_b_c"};
  std::string text;
  for (std::size_t i = 0; i < 60; ++i) {
    const std::string& tenant = raw[i % raw.size()];
    const std::string pages = std::to_string(i % 5) + ", " + std::to_string(100 + i % 9);
    text += "{\"hash_ids\": [" + pages + "]";
    if (i % 11 == 3) {
      text += "}\n";  // no tenant field at all
    } else {
      text += ", \"tenant\": \"" + tenant + "\"}\n";
    }
  }
  const std::string trace = Write("t.jsonl", text);
  ShellResult r = RunKvwatch("replay --format json --capacities 2,4,8 --policy lru,arc " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r.out);
  std::set<std::string> expected;
  for (const std::string& name : raw) expected.insert(curve::SanitizeLabel(name));
  EXPECT_EQ(expected, (std::set<std::string>{"a_b_c", "_other", "none", "x"}));

  // The tenants map: the labels, and sums equal to the trace's.
  std::set<std::string> labels;
  std::uint64_t requests = 0, refs = 0;
  std::map<std::uint64_t, std::uint64_t> hits;  // capacity -> page hits
  for (auto [label, report] : doc["tenants"].get_object()) {
    labels.insert(std::string(label));
    requests += uint64_t(report["requests"]);
    refs += uint64_t(report["page_refs"]);
    for (simdjson::dom::element p : report["points"].get_array()) {
      hits[uint64_t(p["capacity_pages"])] += uint64_t(p["page_hits"]);
    }
  }
  EXPECT_EQ(labels, expected);
  EXPECT_EQ(requests, uint64_t(doc["requests"]));
  EXPECT_EQ(refs, uint64_t(doc["page_refs"]));
  std::size_t points = 0;
  for (simdjson::dom::element p : doc["points"].get_array()) {
    EXPECT_EQ(hits[uint64_t(p["capacity_pages"])], uint64_t(p["page_hits"])) << uint64_t(p["capacity_pages"]);
    ++points;
  }
  EXPECT_EQ(points, 3u);

  // The interference rows: the same labels (fewer than 8 tenants: none folded).
  std::set<std::string> rows;
  std::uint64_t row_requests = 0;
  for (simdjson::dom::element row : doc["interference"]["tenants"].get_array()) {
    rows.insert(std::string(std::string_view(row["name"])));
    row_requests += uint64_t(row["requests"]);
  }
  EXPECT_EQ(rows, expected);
  EXPECT_EQ(row_requests, uint64_t(doc["requests"]));

  // The policies' rows: the same labels, and their hits sum to each run's.
  for (simdjson::dom::element run : doc["policies"]["results"].get_array()) {
    std::set<std::string> names;
    std::uint64_t sum = 0;
    for (simdjson::dom::element t : run["tenants"].get_array()) {
      names.insert(std::string(std::string_view(t["tenant"])));
      sum += uint64_t(t["page_hits"]);
    }
    EXPECT_EQ(names, expected);
    EXPECT_EQ(sum, uint64_t(run["page_hits"]));
  }
}

// Until the first request with a tenant, replay keeps no curve for "none" (it is
// the whole trace's); then "none" starts from the whole trace's curve. Its
// requests, references and hits at every capacity are those of every request
// without a tenant, before and after, as the other tenants' are theirs.
TEST_F(ReplayTest, RequestsBeforeTheFirstTenantCountUnderNone) {
  std::string text;
  std::uint64_t unlabelled = 0, unlabelled_refs = 0;
  for (std::size_t i = 0; i < 90; ++i) {
    const bool labelled = i >= 40 && i % 3 != 0;
    const std::string pages = std::to_string(i % 7) + ", " + std::to_string(50 + i % 13) + ", " + std::to_string(i);
    text += "{\"hash_ids\": [" + pages + "]";
    text += labelled ? ", \"tenant\": \"t" + std::to_string(i % 2) + "\"}\n" : "}\n";
    if (!labelled) {
      ++unlabelled;
      unlabelled_refs += 3;
    }
  }
  const std::string trace = Write("late.jsonl", text);
  ShellResult r = RunKvwatch("replay --format json --capacities 3,10,40 " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r.out);
  simdjson::dom::element none = doc["tenants"]["none"];
  EXPECT_EQ(uint64_t(none["requests"]), unlabelled);
  EXPECT_EQ(uint64_t(none["page_refs"]), unlabelled_refs);
  std::map<std::uint64_t, std::uint64_t> hits;  // capacity -> page hits over the tenants
  std::uint64_t requests = 0;
  for (auto [label, report] : doc["tenants"].get_object()) {
    requests += uint64_t(report["requests"]);
    for (simdjson::dom::element p : report["points"].get_array()) {
      hits[uint64_t(p["capacity_pages"])] += uint64_t(p["page_hits"]);
    }
  }
  EXPECT_EQ(requests, 90u);
  for (simdjson::dom::element p : doc["points"].get_array()) {
    EXPECT_EQ(hits[uint64_t(p["capacity_pages"])], uint64_t(p["page_hits"])) << uint64_t(p["capacity_pages"]);
  }
  EXPECT_GT(uint64_t(none["unlimited_page_hits"]), 0u);
}

// A trace without tenants has no tenants map and no per-tenant policy rows.
TEST_F(ReplayTest, NoTenantsMapWithoutTenants) {
  const std::string trace = Write("t.jsonl", kWorkedExample);
  ShellResult r = RunKvwatch("replay --format json --capacities 2 --policy lru " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r.out);
  EXPECT_EQ(doc["tenants"].error(), simdjson::NO_SUCH_FIELD);
  for (simdjson::dom::element run : doc["policies"]["results"].get_array()) {
    EXPECT_EQ(simdjson::dom::array(run["tenants"]).size(), 0u);
  }
}

// The hand-worked flood of tests/curve/tenants_test.cc through the command: the
// interference table, capacity misses, lost hits, footprint and running KV.
TEST_F(ReplayTest, InterferenceFootprintAndRunningKv) {
  const std::string trace = Write(
      "flood.jsonl",
      "{\"timestamp\": 0, \"input_length\": 48, \"output_length\": 16, \"hash_ids\": [1, 2, 3], \"tenant\": \"chat\"}\n"
      "{\"timestamp\": 1000, \"input_length\": 16, \"output_length\": 0, \"hash_ids\": [10], \"tenant\": \"api\"}\n"
      "{\"timestamp\": 2000, \"input_length\": 16, \"output_length\": 0, \"hash_ids\": [11], \"tenant\": \"api\"}\n"
      "{\"timestamp\": 3000, \"input_length\": 16, \"output_length\": 0, \"hash_ids\": [12], \"tenant\": \"api\"}\n"
      "{\"timestamp\": 4000, \"input_length\": 64, \"output_length\": 16, \"hash_ids\": [1, 2, 3, 4], \"tenant\": "
      "\"chat\"}\n");
  ShellResult r = RunKvwatch(
      "replay --format json --capacities 3,4 --isolated --bytes-per-token 100 "
      "--decode-tokens-per-second 8 " +
      trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r.out);
  simdjson::dom::element chat;
  for (simdjson::dom::element row : doc["interference"]["tenants"].get_array()) {
    if (std::string_view(row["name"]) == "chat") chat = row;
  }
  ASSERT_TRUE(chat.is_object());
  simdjson::dom::element at3 = chat["points"].at(0);
  EXPECT_EQ(uint64_t(at3["capacity_pages"]), 3u);
  EXPECT_EQ(uint64_t(at3["capacity_misses"]), 3u);
  EXPECT_NEAR(double(at3["evicted_by"]["api"]), 2.35, 1e-9);
  EXPECT_NEAR(double(at3["evicted_by"]["chat"]), 0.65, 1e-9);
  EXPECT_EQ(double(at3["lost_hits"]), 3.0);
  EXPECT_NEAR(double(chat["points"].at(1)["evicted_by"]["api"]), 1.35, 1e-9);
  // "first" (every flood request starts a chain) evicts "turn2".
  bool found = false;
  for (simdjson::dom::element row : doc["interference"]["classes"].get_array()) {
    if (std::string_view(row["name"]) != "turn2") continue;
    found = true;
    EXPECT_NEAR(double(row["points"].at(0)["evicted_by"]["first"]), 3.0, 1e-9);
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(uint64_t(doc["classes"]["turn2"]["requests"]), 1u);
  // Footprints (input + output) x 100 bytes: first 6,400, 1,600 x 3; turn2 8,000.
  for (simdjson::dom::element f : doc["footprint"].get_array()) {
    if (std::string_view(f["class"]) == "turn2") {
      EXPECT_EQ(double(f["max_bytes"]), 8000.0);
    }
    if (std::string_view(f["class"]) == "first") {
      EXPECT_EQ(double(f["p50_bytes"]), 1600.0);
    }
  }
  // Running: 6,400 bytes on [0, 2) s (16 output tokens at 8/s), 8,000 on [4, 6) s; the
  // flood has no output (no lifetime). Mean over [0, 6): (12,800 + 16,000) / 6.
  EXPECT_EQ(double(doc["running_kv"]["peak_bytes"]), 8000.0);
  EXPECT_NEAR(double(doc["running_kv"]["mean_bytes"]), 28800.0 / 6, 1e-6);
  // The table and the CSV carry the same sections.
  ShellResult table = RunKvwatch("replay --capacities 3,4 --isolated --bytes-per-token 100 " + trace);
  EXPECT_NE(table.out.find("interference by tenant"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("per class"), std::string::npos);
  EXPECT_NE(table.out.find("running requests' KV"), std::string::npos);
  ShellResult csv = RunKvwatch("replay --format csv --capacities 3,4 --isolated " + trace);
  EXPECT_NE(csv.out.find("\ndimension,group,evictor,capacity_pages"), std::string::npos) << csv.out;
  EXPECT_NE(csv.out.find("tenant,chat,api,3,,,,,,,2.35"), std::string::npos) << csv.out;
}

// --- Real traces against an independent computation ------------------------------------

using OrderedTimes = __gnu_pbds::tree<std::uint64_t, __gnu_pbds::null_type, std::less<>, __gnu_pbds::rb_tree_tag,
                                      __gnu_pbds::tree_order_statistics_node_update>;

struct Independent {
  double unlimited_ratio = 0;
  std::vector<std::uint64_t> requirements;  // R per request, head-first, share 1
};

// Stack distances from an order-statistics tree of last-reference times (not the
// engine's Fenwick tree), unlimited hits from a set of seen pages.
Independent ComputeIndependently(const std::vector<std::vector<curve::PageId>>& trace) {
  Independent res;
  std::unordered_map<curve::PageId, std::uint64_t> last;
  OrderedTimes times;
  std::uint64_t now = 0, refs = 0, unlimited = 0;
  for (const auto& r : trace) {
    std::vector<std::uint64_t> d(r.size());
    std::size_t t = 0;
    bool prefix = true;
    for (std::size_t i = 0; i < r.size(); ++i) {
      auto it = last.find(r[i]);
      if (it == last.end()) {
        prefix = false;
        d[i] = UINT64_MAX;
      } else {
        d[i] = times.size() - times.order_of_key(it->second) - 1;
      }
      if (prefix) ++t;
    }
    refs += r.size();
    unlimited += t;
    std::uint64_t m = 0;
    for (std::size_t i = 0; i < t; ++i) m = std::max(m, d[i]);
    res.requirements.push_back(t == 0 ? 0 : m + 1);
    for (curve::PageId p : r) {  // head-first
      auto it = last.find(p);
      if (it != last.end()) times.erase(it->second);
      last[p] = ++now;
      times.insert(now);
    }
  }
  res.unlimited_ratio = static_cast<double>(unlimited) / static_cast<double>(refs);
  return res;
}

class MooncakeTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MooncakeTest, MatchesIndependentComputation) {
  const std::string path = std::string(KVWATCH_SHARED_DATA) + "/mooncake/" + GetParam();
  if (!fs::exists(path)) GTEST_SKIP() << path << " is absent";
  std::vector<std::vector<curve::PageId>> trace;
  collectors::TraceCallbacks cb;
  cb.on_request = [&](curve::Request& r) { trace.push_back(r.pages); };
  auto summary = collectors::ReadTrace(path, {}, cb);
  ASSERT_TRUE(summary.ok()) << summary.error();
  ASSERT_EQ(summary.value().bad_lines, 0u);

  ReplayOptions o;
  o.touch_order = "head-first";
  o.page_tokens = 512;
  auto resolved = ResolveReplayOptions(o);
  ASSERT_TRUE(resolved.ok()) << resolved.error();
  Replayer replayer(resolved.value());
  for (const auto& pages : trace) {
    curve::Request r;
    r.pages = pages;
    replayer.Add(r);
  }
  const Independent ind = ComputeIndependently(trace);
  EXPECT_NEAR(replayer.total().UnlimitedPageHitRatio(), ind.unlimited_ratio, 1e-12);
  std::vector<std::uint64_t> sorted = ind.requirements;
  std::sort(sorted.begin(), sorted.end());
  for (double q : {0.5, 0.8, 0.9, 0.95, 0.99, 0.999, 1.0}) {
    // Nearest rank: the ceil(q N)-th smallest requirement.
    const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size()) - 1e-9));
    const std::uint64_t expected = rank == 0 ? 0 : sorted[rank - 1];
    auto ws = replayer.total().WorkingSetForCoverage(q);
    ASSERT_TRUE(ws.has_value()) << q;
    EXPECT_EQ(*ws, expected) << "coverage target " << q;
  }
}

INSTANTIATE_TEST_SUITE_P(Traces, MooncakeTest,
                         ::testing::Values("conversation_trace.jsonl", "synthetic_trace.jsonl",
                                           "toolagent_trace_hash_ids.jsonl"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           return n.substr(0, n.find('_'));
                         });

}  // namespace
}  // namespace kvwatch::agent
