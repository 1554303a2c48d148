// `kvwatch replay --policy` as a user runs it: the JSON and CSV fields of the
// contract, the SVG's policy lines, lru equal to the curve's own points, and bad
// options that name the option (exit 2).
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <list>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "curve/policy.h"
#include "tests/agent/testing_agent.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers

class ReplayPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    trace_ = dir_.Sub("trace.jsonl");
    std::ofstream f(trace_);
    for (const Record& r : SynthRecords(800, 3)) f << r.json << "\n";
  }
  CommandResult Replay(std::vector<std::string> args) {
    std::vector<std::string> argv = {KVWATCH_BINARY, "replay", "--progress", "never"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(trace_);
    return RunCommand(argv, Millis(120000));
  }
  TempDir dir_;
  std::string trace_;
};

TEST_F(ReplayPolicyTest, JsonCarriesEveryPolicyAtEveryCapacityAndLruEqualsTheCurve) {
  CommandResult r = Replay({"--format", "json", "--capacities", "50,400", "--policy", "all", "--priority",
                            "tenant:tenant-1=3,class:first=0"});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS);
  simdjson::dom::array results, best, points, names;
  ASSERT_EQ(doc["policies"]["results"].get(results), simdjson::SUCCESS);
  ASSERT_EQ(doc["policies"]["best"].get(best), simdjson::SUCCESS);
  ASSERT_EQ(doc["policies"]["names"].get(names), simdjson::SUCCESS);
  ASSERT_EQ(doc["points"].get(points), simdjson::SUCCESS);
  EXPECT_EQ(names.size(), std::size(curve::kAllPolicies));        // every policy
  EXPECT_EQ(results.size(), 2 * std::size(curve::kAllPolicies));  // 2 capacities
  EXPECT_EQ(best.size(), 2u);
  std::map<std::uint64_t, std::uint64_t> curve_hits;
  for (simdjson::dom::element p : points)
    curve_hits[p["capacity_pages"].get_uint64().value()] = p["page_hits"].get_uint64().value();
  for (simdjson::dom::element x : results) {
    for (const char* field : {"policy", "capacity_pages", "requests", "page_refs", "page_hits", "page_hit_ratio",
                              "request_coverage", "reused_tokens", "preemptions", "tenants", "classes"}) {
      EXPECT_FALSE(x[field].error()) << field;
    }
    if (x["policy"].get_string().value() == "lru") {
      const std::uint64_t cap = x["capacity_pages"].get_uint64().value();
      EXPECT_EQ(x["page_hits"].get_uint64().value(), curve_hits[cap]) << cap;
    }
    simdjson::dom::array tenants;
    ASSERT_EQ(x["tenants"].get(tenants), simdjson::SUCCESS);
    EXPECT_GE(tenants.size(), 2u);
  }
  for (simdjson::dom::element b : best) {
    for (const char* field : {"capacity_pages", "policy", "page_hit_ratio", "lru_page_hit_ratio",
                              "lru_capacity_for_same_hits", "capacity_saved_pages"}) {
      EXPECT_FALSE(b[field].error()) << field;
    }
    EXPECT_NE(b["policy"].get_string().value(), "belady");
  }
}

TEST_F(ReplayPolicyTest, CsvAddsThreeColumnsOnlyWithPolicy) {
  CommandResult plain = Replay({"--format", "csv", "--capacities", "50,400"});
  ASSERT_TRUE(plain.Exited(0)) << plain.Describe();
  EXPECT_EQ(plain.out.substr(0, plain.out.find('\n')),
            "tenant,capacity_pages,capacity_bytes,page_hits,page_hit_ratio,request_coverage,reused_tokens,"
            "avoided_prefill_flops,avoided_prefill_seconds");
  CommandResult with = Replay({"--format", "csv", "--capacities", "50,400", "--policy", "lru,vllm"});
  ASSERT_TRUE(with.Exited(0)) << with.Describe();
  std::istringstream lines(with.out);
  std::string header, line;
  std::getline(lines, header);
  EXPECT_EQ(header,
            "tenant,capacity_pages,capacity_bytes,page_hits,page_hit_ratio,request_coverage,reused_tokens,"
            "avoided_prefill_flops,avoided_prefill_seconds,policy,class,preemptions");
  int policy_rows = 0;
  // The curve section, up to the blank line before the tenant/class sections (a
  // trace with tenants gets those; each has its own header).
  while (std::getline(lines, line) && !line.empty()) {
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), 11) << line;
    if (line.find(",vllm,") != std::string::npos || line.find(",lru,") != std::string::npos) ++policy_rows;
  }
  EXPECT_GE(policy_rows, 4);
}

TEST_F(ReplayPolicyTest, SvgHasALinePerPolicy) {
  const std::string svg = dir_.Sub("plot.svg");
  CommandResult r = Replay({"--capacities", "20,50,100,400", "--policy", "lru,s3fifo,belady", "--svg", svg});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  const std::string text = ReadFile(svg);
  for (const char* p : {"policy-lru", "policy-s3fifo", "policy-belady"}) {
    EXPECT_NE(text.find(std::string("class=\"policy ") + p + "\""), std::string::npos) << p;
  }
  EXPECT_NE(r.out.find("best online policy per capacity"), std::string::npos) << r.out;
}

// The oracleGeneral dump (agent/cli/reference_dump.h) is the sequence the policies
// simulate: an LRU and a FIFO written here from the dump alone, under the prefix
// rule (a request's records read backwards are its pages), find replay's hits.
TEST_F(ReplayPolicyTest, DumpReferencesIsTheSequenceThePoliciesSimulate) {
  const std::string dump = dir_.Sub("refs.oracleGeneral");
  CommandResult r =
      Replay({"--format", "json", "--capacities", "50", "--policy", "lru,fifo", "--dump-references", dump});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS);
  std::map<std::string, std::uint64_t> hits;
  std::uint64_t refs = 0, requests = 0;
  for (simdjson::dom::element x : doc["policies"]["results"].get_array().value()) {
    hits[std::string(x["policy"].get_string().value())] = x["page_hits"].get_uint64().value();
    refs = x["page_refs"].get_uint64().value();
    requests = x["requests"].get_uint64().value();
  }
  const std::string bytes = ReadFile(dump);
  ASSERT_EQ(bytes.size(), refs * 24);
  struct Record {
    std::uint32_t time;
    std::uint64_t id;
    std::uint32_t size;
    std::int64_t next;
  };
  std::vector<Record> rec(refs);
  for (std::size_t k = 0; k < refs; ++k) {
    const char* at = bytes.data() + 24 * k;
    std::memcpy(&rec[k].time, at, 4);
    std::memcpy(&rec[k].id, at + 4, 8);
    std::memcpy(&rec[k].size, at + 12, 4);
    std::memcpy(&rec[k].next, at + 16, 8);
  }
  // Sizes 1, request numbers from 1 rising, next uses pointing at the next record of the id.
  std::map<std::uint64_t, std::int64_t> later;
  for (std::size_t k = refs; k-- > 0;) {
    EXPECT_EQ(rec[k].size, 1u);
    if (k > 0) {
      EXPECT_LE(rec[k - 1].time, rec[k].time);
    }
    auto it = later.find(rec[k].id);
    EXPECT_EQ(rec[k].next, it == later.end() ? -1 : it->second) << k;
    later[rec[k].id] = static_cast<std::int64_t>(k);
  }
  ASSERT_GT(refs, 0u);
  EXPECT_EQ(rec.front().time, 1u);
  for (bool lru : {true, false}) {
    std::list<std::uint64_t> order;  // front: the next victim
    std::map<std::uint64_t, std::list<std::uint64_t>::iterator> where;
    std::uint64_t found = 0, groups = 0;
    for (std::size_t begin = 0; begin < refs;) {
      std::size_t end = begin + 1;
      while (end < refs && rec[end].time == rec[begin].time) ++end;
      ++groups;
      for (std::size_t k = end; k-- > begin && where.contains(rec[k].id);) ++found;
      for (std::size_t k = begin; k < end; ++k) {
        auto it = where.find(rec[k].id);
        if (it != where.end()) {
          if (lru) order.splice(order.end(), order, it->second);
          continue;
        }
        if (order.size() == 50) {
          where.erase(order.front());
          order.pop_front();
        }
        where[rec[k].id] = order.insert(order.end(), rec[k].id);
      }
      begin = end;
    }
    EXPECT_EQ(found, hits[lru ? "lru" : "fifo"]) << (lru ? "lru" : "fifo");
    EXPECT_EQ(groups, requests);  // every synthetic request has pages
  }
}

TEST_F(ReplayPolicyTest, BadOptionsNameTheOption) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--policy", "lru,clock"}, "--policy: unknown policy 'clock'"},
           {{"--policy", "lru", "--capacities", "0,10"}, "--capacities"},
           {{"--policy", "priority", "--priority", "nobody=2"}, "--priority: tenant 'nobody' does not appear"},
           {{"--policy", "priority"}, "--priority"},
           {{"--policy", "lru", "--decode-tokens-per-second", "0"}, "--decode-tokens-per-second"},
           {{"--policy", "lru", "--sample-rate", "0.1"}, "--policy"},
           {{"--priority", "a=1"}, "--priority: applies to --policy priority"},
           {{"--dump-references", dir_.Sub("refs")}, "--dump-references: writes the references --policy simulates"},
       }) {
    CommandResult r = Replay(c.args);
    EXPECT_TRUE(r.Exited(2)) << c.message << ": " << r.Describe();
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
}

TEST_F(ReplayPolicyTest, DumpReferencesToAnUnwritablePathNamesIt) {
  const std::string path = dir_.Sub("no-such-folder/refs");
  CommandResult r = Replay({"--policy", "lru", "--capacities", "50", "--dump-references", path});
  EXPECT_TRUE(r.Exited(1)) << r.Describe();
  EXPECT_NE(r.err.find("--dump-references: cannot create '" + path + "'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvwatch::agent
