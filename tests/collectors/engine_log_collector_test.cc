#include "collectors/engine_log_collector.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace kvwatch::collectors {
namespace {

namespace fs = std::filesystem;

// Real lines as users posted them: vLLM's stats lines from LMCache issue #3532
// (v0.22.0), vLLM PR #21809 (mid-2025) and PR #37307; the V0 preemption warning from
// the PR #6102 thread; SGLang's (2024-12 and 2025-02 releases) and its retraction
// line from the SGLang docs.
constexpr const char* kVllmStats1 =
    "(APIServer pid=58) INFO 06-04 15:12:20 [v1/metrics/loggers.py:259] Engine 000: Avg prompt throughput: 34.9 "
    "tokens/s, Avg generation throughput: 1.2 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: "
    "0.0%, Prefix cache hit rate: 0.0%, External prefix cache hit rate: 0.0%";
constexpr const char* kVllmStats2 =
    "INFO 07-28 06:42:09 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
    "throughput: 240.8 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: 93.9%, Prefix cache hit "
    "rate: 0.0%";
constexpr const char* kVllmStats3 =
    "(APIServer pid=11574) INFO 03-17 15:38:10 [loggers.py:259] Engine 000: Avg prompt throughput: 23998.2 "
    "tokens/s, ... Running: 10 reqs, Waiting: 90 reqs, GPU KV cache usage: 19.3%, Prefix cache hit rate: 0.0%";
constexpr const char* kVllmV0Preemption =
    "WARNING 08-20 10:18:39 scheduler.py:1141] Sequence group 147 is preempted by PreemptionMode.RECOMPUTE mode "
    "because there is not enough KV cache space. ... total_num_cumulative_preemption=1";
constexpr const char* kSglangPrefill =
    "[2024-12-20 12:42:16 TP0] Prefill batch. #new-seq: 2, #new-token: 2046, #cached-token: 4, cache hit rate: "
    "0.06%, token usage: 0.00, #running-req: 0, #queue-req: 0";
constexpr const char* kSglangDecode =
    "[2025-02-14 00:42:22 DP2 TP2] Decode batch. #running-req: 1, #token: 210, token usage: 0.00, gen throughput "
    "(token/s): 11.45, #queue-req: 0";
constexpr const char* kSglangRetract =
    "KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.9998 -> 1.0000";
// uvicorn's access-log format, as vLLM and SGLang print it.
constexpr const char* kAccess200 = "INFO:     127.0.0.1:53412 - \"POST /v1/completions HTTP/1.1\" 200 OK";
constexpr const char* kAccess429 =
    "INFO:     127.0.0.1:53413 - \"POST /v1/completions HTTP/1.1\" 429 Too Many Requests";
constexpr const char* kAccess503 =
    "INFO:     10.0.0.7:40112 - \"POST /v1/chat/completions HTTP/1.1\" 503 Service Unavailable";

class NullSink : public RequestSink {
 public:
  void OnRequest(const curve::Request&) override { ++calls; }
  int calls = 0;
};

class EngineLogCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvwatch_engine_log_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "engine.log").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Append(const std::vector<std::string>& lines) {
    std::ofstream out(path_, std::ios::app);
    for (const std::string& l : lines) out << l << "\n";
  }

  std::unique_ptr<EngineLogCollector> Make(EngineLogKind engine = EngineLogKind::kAuto) {
    EngineLogCollectorOptions o;
    o.name = "vllm-0";
    o.tailer.patterns = {path_};
    o.tailer.use_inotify = false;
    o.engine = engine;
    auto c = EngineLogCollector::Create(std::move(o), nullptr);
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error());
    return std::move(c).value();
  }

  // name + sorted extra labels (without "collector") -> value.
  static std::map<std::string, double> Samples(const Collector& c) {
    std::vector<MetricSample> out;
    c.AppendSamples(&out);
    std::map<std::string, double> m;
    for (const MetricSample& s : out) {
      std::string key = s.name;
      for (const auto& [k, v] : s.labels) {
        if (k == "collector") {
          EXPECT_EQ(v, c.name());
          continue;
        }
        key += "{" + k + "=" + v + "}";
      }
      m[key] = s.value;
    }
    return m;
  }

  fs::path dir_;
  std::string path_;
  NullSink sink_;
};

TEST_F(EngineLogCollectorTest, VllmLinesAppendedWhilePolling) {
  Append({kVllmStats2, kVllmV0Preemption});  // before the collector starts: skipped (start at end)
  auto c = Make();
  c->Poll(sink_, 100);
  EXPECT_EQ(c->signals().lines, 0u);
  auto m = Samples(*c);
  EXPECT_EQ(m.count("kvwatch_engine_kv_cache_usage_ratio"), 0u) << "no gauge before a line set it";
  EXPECT_EQ(m["kvwatch_engine_preemptions_total"], 0);

  Append({kVllmStats1, "some unrelated line", "", kVllmV0Preemption, kAccess200});
  c->Poll(sink_, 101);
  m = Samples(*c);
  EXPECT_EQ(c->signals().lines, 3u);
  EXPECT_EQ(m["kvwatch_engine_preemptions_total"], 1);
  EXPECT_DOUBLE_EQ(m["kvwatch_engine_kv_cache_usage_ratio"], 0.0);
  EXPECT_DOUBLE_EQ(m["kvwatch_engine_requests_running"], 0);
  EXPECT_EQ(m["kvwatch_engine_rejected_requests_total{reason=http_429}"], 0);

  Append({kVllmStats2, kVllmV0Preemption, kAccess429, kAccess503, kAccess503});
  c->Poll(sink_, 102);
  m = Samples(*c);
  EXPECT_EQ(m["kvwatch_engine_preemptions_total"], 2);
  EXPECT_NEAR(m["kvwatch_engine_kv_cache_usage_ratio"], 0.939, 1e-9);
  EXPECT_DOUBLE_EQ(m["kvwatch_engine_requests_running"], 8);
  EXPECT_DOUBLE_EQ(m["kvwatch_engine_requests_waiting"], 0);
  EXPECT_DOUBLE_EQ(m["kvwatch_engine_prefix_cache_hit_ratio"], 0.0);
  EXPECT_EQ(m["kvwatch_engine_rejected_requests_total{reason=http_429}"], 1);
  EXPECT_EQ(m["kvwatch_engine_rejected_requests_total{reason=http_503}"], 2);
  // The typed signals the alerter reads say the same.
  const EngineSignals g = c->engine_signals();
  EXPECT_EQ(g.preemptions, 2);
  ASSERT_EQ(g.rejections.size(), 2u);
  EXPECT_EQ(g.rejections[0].reason, "http_429");
  EXPECT_EQ(g.rejections[0].requests, 1);
  EXPECT_EQ(g.rejections[1].requests, 2);
  EXPECT_DOUBLE_EQ(g.requests_running.value_or(-1), 8);
  EXPECT_FALSE(g.capacity_pages.has_value()) << "a log does not say the capacity";
  EXPECT_TRUE(g.blocks.empty());

  Append({kVllmStats3});
  c->Poll(sink_, 103);
  m = Samples(*c);
  EXPECT_NEAR(m["kvwatch_engine_kv_cache_usage_ratio"], 0.193, 1e-9);
  EXPECT_DOUBLE_EQ(m["kvwatch_engine_requests_running"], 10);
  EXPECT_DOUBLE_EQ(m["kvwatch_engine_requests_waiting"], 90);
  EXPECT_EQ(sink_.calls, 0) << "engine logs produce no page references";
  EXPECT_TRUE(c->stats().up);
  EXPECT_EQ(c->stats().records, 0u);
  EXPECT_EQ(c->stats().last_success_s, 103);
  EXPECT_TRUE(c->stats().errors.empty());
}

TEST_F(EngineLogCollectorTest, PreemptionsFieldOfTheStatsLineIsAdded) {
  auto c = Make();
  c->Poll(sink_, 1);
  // The newer stats line with the optional fields (PR #28522 and later).
  Append(
      {"(APIServer pid=7) INFO 11-02 09:00:01 [v1/metrics/loggers.py:301] Engine 000: Avg prompt throughput: "
       "100.0 tokens/s, Avg generation throughput: 50.5 tokens/s, Running: 3 reqs, Waiting: 4 reqs, "
       "Preemptions: 5, GPU KV cache usage: 88.0%, Prefix cache hit rate: 42.5%",
       kVllmV0Preemption});
  c->Poll(sink_, 2);
  auto m = Samples(*c);
  EXPECT_EQ(m["kvwatch_engine_preemptions_total"], 6);
  EXPECT_NEAR(m["kvwatch_engine_prefix_cache_hit_ratio"], 0.425, 1e-9);
  EXPECT_NEAR(m["kvwatch_engine_kv_cache_usage_ratio"], 0.88, 1e-9);
}

TEST_F(EngineLogCollectorTest, SglangLines) {
  auto c = Make();
  c->Poll(sink_, 1);
  Append({kSglangPrefill, kSglangRetract});
  c->Poll(sink_, 2);
  auto m = Samples(*c);
  EXPECT_NEAR(m["kvwatch_engine_prefix_cache_hit_ratio"], 0.0006, 1e-12);
  EXPECT_EQ(m["kvwatch_engine_retracted_requests_total"], 1);
  EXPECT_DOUBLE_EQ(m["kvwatch_engine_kv_cache_usage_ratio"], 0.0);

  // Newer prefill line without "cache hit rate": cached / (new + cached).
  Append(
      {"[2026-09-01 10:00:00 DP0 TP1] Prefill batch, #new-seq: 1, #new-token: 300, #cached-token: 100, "
       "token usage: 0.42, #running-req: 5, #queue-req: 7, ",
       kSglangDecode,
       "[2025-02-14 00:42:23] KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_token_ratio: "
       "0.5000 -> 0.7000"});
  c->Poll(sink_, 3);
  m = Samples(*c);
  EXPECT_DOUBLE_EQ(m["kvwatch_engine_prefix_cache_hit_ratio"], 0.25);
  EXPECT_EQ(m["kvwatch_engine_retracted_requests_total"], 4);
  EXPECT_DOUBLE_EQ(m["kvwatch_engine_kv_cache_usage_ratio"], 0.0) << "the decode line came last";
  EXPECT_DOUBLE_EQ(m["kvwatch_engine_requests_running"], 1);
  EXPECT_DOUBLE_EQ(m["kvwatch_engine_requests_waiting"], 0);
  EXPECT_EQ(m["kvwatch_engine_preemptions_total"], 0);
}

TEST_F(EngineLogCollectorTest, EngineKindFiltersTheOtherEnginesLines) {
  auto c = Make(EngineLogKind::kSglang);
  c->Poll(sink_, 1);
  Append({kVllmStats2, kVllmV0Preemption, kSglangRetract, kAccess503});
  c->Poll(sink_, 2);
  auto m = Samples(*c);
  EXPECT_EQ(c->signals().lines, 2u);
  EXPECT_EQ(m["kvwatch_engine_preemptions_total"], 0);
  EXPECT_EQ(m.count("kvwatch_engine_kv_cache_usage_ratio"), 0u);
  EXPECT_EQ(m["kvwatch_engine_retracted_requests_total"], 1);
  EXPECT_EQ(m["kvwatch_engine_rejected_requests_total{reason=http_503}"], 1);
}

TEST_F(EngineLogCollectorTest, LongLinesAreCountedNotFatal) {
  EngineLogCollectorOptions o;
  o.name = "x";
  o.tailer.patterns = {path_};
  o.tailer.use_inotify = false;
  o.tailer.max_line_bytes = 128;
  auto c = EngineLogCollector::Create(std::move(o), nullptr);
  ASSERT_TRUE(c.ok()) << c.error();
  c.value()->Poll(sink_, 1);
  Append({std::string(200, 'x'), kSglangRetract});
  c.value()->Poll(sink_, 2);
  EXPECT_EQ(c.value()->stats().errors.at("line_too_long"), 1u);
  EXPECT_EQ(c.value()->signals().retracted_requests, 1u);
}

TEST(EngineLogCollectorCreateTest, RejectsBadOptions) {
  EngineLogCollectorOptions o;
  o.name = "x";
  EXPECT_FALSE(EngineLogCollector::Create(o, nullptr).ok()) << "no path";
  o.name.clear();
  o.tailer.patterns = {"/tmp/x.log"};
  EXPECT_FALSE(EngineLogCollector::Create(o, nullptr).ok()) << "no name";
}

}  // namespace
}  // namespace kvwatch::collectors
