#include "collectors/engine_metrics_collector.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kvwatch::collectors {
namespace {

using std::chrono::milliseconds;

// An engine's /metrics on 127.0.0.1 at a port picked at run time. Request i gets
// response i of the script; once the script is used up, the last one again.
// Block() makes every request wait in the handler until Release(); HoldFrom(n)
// only requests n and later (0-based).
class FakeEngine {
 public:
  explicit FakeEngine(std::vector<std::pair<int, std::string>> script) : script_(std::move(script)) {
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      std::unique_lock<std::mutex> lock(mu_);
      const std::size_t i = std::min(requests_, script_.size() - 1);
      ++requests_;
      ++entered_;
      cv_.notify_all();
      cv_.wait(lock, [this, i] { return i < hold_from_; });
      res.status = script_[i].first;
      res.set_content(script_[i].second, "text/plain; version=0.0.4");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() is a no-op until the server runs: wait for it (bounded).
    for (int i = 0; i < 6000 && !server_.is_running(); ++i) std::this_thread::sleep_for(milliseconds(5));
  }
  ~FakeEngine() {
    Release();
    server_.stop();
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/metrics"; }
  int port() const { return port_; }
  void Block() { HoldFrom(0); }
  void Release() { HoldFrom(kNone); }
  void HoldFrom(std::size_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      hold_from_ = n;
    }
    cv_.notify_all();
  }
  bool blocked() {
    std::lock_guard<std::mutex> lock(mu_);
    return hold_from_ != kNone;
  }
  // Waits until a request reached the handler (bounded, so a broken collector
  // fails the test instead of hanging it).
  bool WaitEntered(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return entered_ >= n; });
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<int, std::string>> script_;
  std::size_t requests_ = 0;
  std::size_t entered_ = 0;
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t hold_from_ = kNone;
};

class NullSink : public RequestSink {
 public:
  void OnRequest(const curve::Request&) override { ++calls; }
  int calls = 0;
};

// Waits (bounded) for the collector's worker to finish n scrapes.
bool WaitScrapes(const EngineMetricsCollector& c, std::uint64_t n) {
  for (int i = 0; i < 6000 && c.scrapes() < n; ++i) std::this_thread::sleep_for(milliseconds(5));
  return c.scrapes() >= n;
}

std::map<std::string, double> Samples(const Collector& c) {
  std::vector<MetricSample> out;
  c.AppendSamples(&out);
  std::map<std::string, double> m;
  for (const MetricSample& s : out) {
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) {
      if (k != "collector") key += "{" + k + "=" + v + "}";
    }
    m[key] = s.value;
  }
  return m;
}

std::unique_ptr<EngineMetricsCollector> Make(const std::string& url, milliseconds interval = milliseconds(5),
                                             std::uint32_t page_tokens = 16, milliseconds timeout = milliseconds(10000),
                                             std::vector<std::string>* logged = nullptr) {
  EngineMetricsCollectorOptions o;
  o.name = "engine-0";
  o.url = url;
  o.interval = interval;
  o.timeout = timeout;
  o.page_tokens = page_tokens;
  CollectorLog log = nullptr;
  if (logged != nullptr) log = [logged](std::string_view, std::string_view message) { logged->emplace_back(message); };
  auto c = EngineMetricsCollector::Create(std::move(o), std::move(log));
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error());
  return std::move(c).value();
}

// One scrape every minute, its log lines kept in *logged.
std::unique_ptr<EngineMetricsCollector> MakeLogged(const std::string& url, std::vector<std::string>* logged) {
  return Make(url, milliseconds(60000), 16, milliseconds(10000), logged);
}

struct VllmValues {
  double preemptions, queries, hits, usage, running, waiting, aborted, admission;
};

std::string VllmBody(const VllmValues& v) {
  const std::string l = "{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}";
  auto num = [](double x) { return std::to_string(x); };
  return "# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.\n"
         "# TYPE vllm:num_preemptions_total counter\n"
         "vllm:num_preemptions_total" +
         l + " " + num(v.preemptions) + "\n" +
         "# TYPE vllm:prefix_cache_queries_total counter\n"
         "vllm:prefix_cache_queries_total" +
         l + " " + num(v.queries) + "\n" +
         "# TYPE vllm:prefix_cache_hits_total counter\n"
         "vllm:prefix_cache_hits_total" +
         l + " " + num(v.hits) + "\n" +
         "# TYPE vllm:kv_cache_usage_perc gauge\n"
         "vllm:kv_cache_usage_perc" +
         l + " " + num(v.usage) + "\n" + "vllm:num_requests_running" + l + " " + num(v.running) + "\n" +
         "vllm:num_requests_waiting" + l + " " + num(v.waiting) + "\n" +
         "# TYPE vllm:request_success_total counter\n"
         "vllm:request_success_total{engine=\"0\",finished_reason=\"abort\",model_name=\"meta-llama/"
         "Llama-3.1-8B-Instruct\"} " +
         num(v.aborted) + "\n" +
         "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"meta-llama/"
         "Llama-3.1-8B-Instruct\"} 100.0\n"
         "# TYPE vllm:admission_rejections_total counter\n"
         "vllm:admission_rejections_total{model_name=\"meta-llama/Llama-3.1-8B-Instruct\",reason=\""
         "max_num_queued_reqs\"} " +
         num(v.admission) + "\n" +
         "# TYPE vllm:cache_config_info gauge\n"
         "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",engine=\"0\",gpu_memory_utilization="
         "\"0.9\",num_gpu_blocks=\"27730\",prefix_caching_hash_algo=\"sha256\"} 1.0\n";
}

TEST(RunningTotalTest, AddsIncreasesAndTreatsADecreaseAsAReset) {
  RunningTotal t;
  EXPECT_FALSE(t.seen());
  EXPECT_EQ(t.Observe(10), 10);
  EXPECT_EQ(t.Observe(15), 5);
  EXPECT_EQ(t.Observe(15), 0);
  EXPECT_EQ(t.Observe(3), 3);  // restart: 3 since the restart
  EXPECT_EQ(t.total(), 18);
  EXPECT_EQ(t.resets(), 1u);
}

TEST(ParseScrapeUrlTest, SplitsOriginAndPath) {
  auto a = ParseScrapeUrl("http://127.0.0.1:8000/metrics");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value().origin, "http://127.0.0.1:8000");
  EXPECT_EQ(a.value().path, "/metrics");
  auto b = ParseScrapeUrl("https://engine.example:443");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value().path, "/metrics");
  EXPECT_FALSE(ParseScrapeUrl("ftp://x/metrics").ok());
  EXPECT_FALSE(ParseScrapeUrl("127.0.0.1:8000").ok());
  EXPECT_FALSE(ParseScrapeUrl("http:///metrics").ok());
}

TEST(EngineMetricsCollectorTest, VllmCountersStayMonotonicAcrossAnEngineRestart) {
  FakeEngine engine({
      {200, VllmBody({3, 100, 40, 0.5, 2, 1, 1, 0})},
      {200, VllmBody({5, 300, 190, 0.75, 8, 3, 2, 4})},
      {200, VllmBody({1, 50, 10, 0.1, 1, 0, 0, 0})},  // restarted: every counter went back
      {200, VllmBody({2, 50, 10, 0.2, 1, 0, 0, 0})},  // no queries in this interval
  });
  auto c = Make(engine.url(), milliseconds(5), 32);
  ASSERT_TRUE(WaitScrapes(*c, 6));  // the script, then the last body again
  NullSink sink;
  c->Poll(sink, 0);
  const auto m = Samples(*c);
  EXPECT_EQ(m.at("kvwatch_engine_preemptions_total"), 3 + 2 + 1 + 1);
  EXPECT_EQ(m.at("kvwatch_engine_rejected_requests_total{reason=abort}"), 1 + 1 + 0 + 0);
  EXPECT_EQ(m.at("kvwatch_engine_rejected_requests_total{reason=admission}"), 0 + 4 + 0 + 0);
  EXPECT_EQ(m.at("kvwatch_engine_counter_resets_total"), 1);
  // Scrape 3's hit ratio, since the restart (10 / 50); scrape 4 had no queries.
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_prefix_cache_hit_ratio"), 0.2);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_kv_cache_usage_ratio"), 0.2);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_requests_running"), 1);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_requests_waiting"), 0);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_capacity_pages"), 27730.0 * 16 / 32);
  EXPECT_EQ(m.count("kvwatch_engine_retracted_requests_total"), 0u) << "not exported by vLLM";
  const CollectorStats s = c->stats();
  EXPECT_TRUE(s.up);
  EXPECT_TRUE(s.errors.empty());
  EXPECT_GT(s.last_success_s, 0);
  EXPECT_EQ(sink.calls, 0);
}

TEST(EngineMetricsCollectorTest, VllmHitRatioIsOverTheLastInterval) {
  FakeEngine engine({
      {200, VllmBody({0, 100, 40, 0.5, 2, 1, 0, 0})},
      {200, VllmBody({0, 300, 190, 0.5, 2, 1, 0, 0})},
  });
  auto c = Make(engine.url());
  ASSERT_TRUE(WaitScrapes(*c, 3));
  const auto m = Samples(*c);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_prefix_cache_hit_ratio"), 150.0 / 200.0);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_capacity_pages"), 27730.0);
}

// vLLM's body with an inter-token latency histogram (seconds, tokens) and, when
// `deprecated_too`, the deprecated per-token histogram with other values.
std::string VllmItlBody(double seconds, double tokens, bool deprecated_too = false) {
  const std::string l = "{engine=\"0\",model_name=\"m\"}";
  auto num = [](double x) { return std::to_string(x); };
  std::string body = VllmBody({0, 100, 40, 0.5, 2, 1, 0, 0}) +
                     "# TYPE vllm:inter_token_latency_seconds histogram\n"
                     "vllm:inter_token_latency_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} " +
                     num(tokens) + "\n" + "vllm:inter_token_latency_seconds_sum" + l + " " + num(seconds) + "\n" +
                     "vllm:inter_token_latency_seconds_count" + l + " " + num(tokens) + "\n";
  if (deprecated_too) {
    body +=
        "vllm:time_per_output_token_seconds_sum" + l + " 1.0\nvllm:time_per_output_token_seconds_count" + l + " 1.0\n";
  }
  return body;
}

TEST(EngineMetricsCollectorTest, DecodeRateIsTokensOverInterTokenSecondsOfTheLastInterval) {
  FakeEngine engine({
      {200, VllmItlBody(10, 400, true)},   // first scrape: its totals, 40 tokens/s
      {200, VllmItlBody(30, 1400, true)},  // +1000 tokens in +20 s: 50 tokens/s
      {200, VllmItlBody(30, 1400, true)},  // nothing generated: kept
  });
  auto c = Make(engine.url());
  ASSERT_TRUE(WaitScrapes(*c, 1));
  // Whichever scrape the worker is at, the rate is one of the script's.
  const std::optional<double> first = c->engine_signals().decode_tokens_per_s;
  ASSERT_TRUE(first);
  EXPECT_TRUE(*first == 40.0 || *first == 50.0) << *first;
  ASSERT_TRUE(WaitScrapes(*c, 4));
  EXPECT_DOUBLE_EQ(*c->engine_signals().decode_tokens_per_s, 50.0);
}

// As for the prefill time: values that are not finite, negative or beyond 2^53,
// and a mean beyond kMaxInterTokenSeconds, never reach the decode rate (an
// infinite sum used to give a rate of 0; a huge one, a restart the next scrape).
TEST(EngineMetricsCollectorTest, HostileInterTokenValuesNeverReachTheDecodeRate) {
  const double inf = std::numeric_limits<double>::infinity();
  FakeEngine engine({
      {200, VllmItlBody(10, 400)},     // 40 tokens/s
      {200, VllmItlBody(inf, 500)},    // skipped
      {200, VllmItlBody(-5, 500)},     // skipped
      {200, VllmItlBody(20, -inf)},    // skipped
      {200, VllmItlBody(1e300, 500)},  // skipped (beyond 2^53)
      {200, VllmItlBody(1e6, 500)},    // +999,990 s over +100 tokens: a mean of 10^4 s, not a decode step
  });
  auto c = Make(engine.url());
  ASSERT_TRUE(WaitScrapes(*c, 8));
  const std::optional<double> rate = c->engine_signals().decode_tokens_per_s;
  ASSERT_TRUE(rate);
  EXPECT_DOUBLE_EQ(*rate, 40.0);
}

TEST(EngineMetricsCollectorTest, NoInterTokenHistogramNoDecodeRate) {
  FakeEngine engine({{200, VllmBody({0, 100, 40, 0.5, 2, 1, 0, 0})}});
  auto c = Make(engine.url());
  ASSERT_TRUE(WaitScrapes(*c, 2));
  EXPECT_FALSE(c->engine_signals().decode_tokens_per_s);
}

std::string SglangBody(double cached, double prompt, double retracted, double aborted, double usage) {
  const std::string l =
      "{engine_type=\"unified\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\",pp_rank=\"0\",tp_rank=\"0\"}";
  auto num = [](double x) { return std::to_string(x); };
  return "# HELP sglang:cached_tokens_total Number of cached prompt tokens.\n"
         "# TYPE sglang:cached_tokens_total counter\n"
         "sglang:cached_tokens_total" +
         l + " " + num(cached) + "\n" +
         "# TYPE sglang:prompt_tokens_total counter\n"
         "sglang:prompt_tokens_total" +
         l + " " + num(prompt) + "\n" +
         "# TYPE sglang:num_retracted_requests_total counter\n"
         "sglang:num_retracted_requests_total" +
         l + " " + num(retracted) + "\n" +
         "# TYPE sglang:num_aborted_requests_total counter\n"
         "sglang:num_aborted_requests_total" +
         l + " " + num(aborted) + "\n" +
         "# TYPE sglang:token_usage gauge\n"
         "sglang:token_usage" +
         l + " " + num(usage) + "\n" + "sglang:num_running_reqs" + l + " 4.0\n" + "sglang:num_queue_reqs" + l +
         " 6.0\n" +
         "# HELP sglang:max_total_num_tokens Maximum total number of tokens in the KV cache pool.\n"
         "# TYPE sglang:max_total_num_tokens gauge\n"
         "sglang:max_total_num_tokens" +
         l + " 439182.0\n";
}

TEST(EngineMetricsCollectorTest, SglangCountersAndHitRatio) {
  FakeEngine engine({
      {200, SglangBody(100, 1000, 2, 1, 0.3)},
      {200, SglangBody(400, 1500, 5, 1, 0.35)},
  });
  auto c = Make(engine.url());
  ASSERT_TRUE(WaitScrapes(*c, 3));
  const auto m = Samples(*c);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_prefix_cache_hit_ratio"), 300.0 / 500.0);
  EXPECT_EQ(m.at("kvwatch_engine_retracted_requests_total"), 5);
  EXPECT_EQ(m.at("kvwatch_engine_rejected_requests_total{reason=abort}"), 1);
  EXPECT_EQ(m.count("kvwatch_engine_preemptions_total"), 0u);
  EXPECT_EQ(m.count("kvwatch_engine_rejected_requests_total{reason=admission}"), 0u);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_kv_cache_usage_ratio"), 0.35);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_requests_running"), 4);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_requests_waiting"), 6);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_capacity_pages"), std::floor(439182.0 / 16));
}

// A number as the exposition writes it: +Inf, -Inf and NaN by name.
std::string ExpositionNumber(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "+Inf" : "-Inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", x);
  return text;
}

// A histogram's _sum and _count lines (the buckets are not read).
std::string HistogramLines(const std::string& name, const std::string& labels, double sum, double count) {
  return "# TYPE " + name + " histogram\n" + name + "_sum" + labels + " " + ExpositionNumber(sum) + "\n" + name +
         "_count" + labels + " " + ExpositionNumber(count) + "\n";
}

// vLLM's body with the prefill histogram (seconds, requests) and, to show that
// it wins, a time to first token and a queue time that would say 10 s.
std::string VllmPrefillBody(double seconds, double requests) {
  const std::string l = "{engine=\"0\",model_name=\"m\"}";
  return VllmBody({0, 100, 40, 0.5, 2, 1, 0, 0}) +
         HistogramLines("vllm:request_prefill_time_seconds", l, seconds, requests) +
         HistogramLines("vllm:time_to_first_token_seconds", l, 11 * requests, requests) +
         HistogramLines("vllm:request_queue_time_seconds", l, requests, requests);
}

// SGLang's body with time to first token and queue time (seconds, requests).
std::string SglangTtftBody(double ttft_s, double ttft_n, double queue_s, double queue_n) {
  const std::string l = "{model_name=\"m\",tp_rank=\"0\"}";
  return SglangBody(100, 1000, 2, 1, 0.3) + HistogramLines("sglang:time_to_first_token_seconds", l, ttft_s, ttft_n) +
         HistogramLines("sglang:queue_time_seconds", l, queue_s, queue_n);
}

TEST(IntervalMeanTest, MeanOfTheIncreasesWithResetsAndHostileValuesSkipped) {
  IntervalMean m;
  EXPECT_FALSE(m.Observe(std::nullopt, 1));
  EXPECT_FALSE(m.Observe(0, 0)) << "no observation yet";
  EXPECT_DOUBLE_EQ(*m.Observe(2, 10), 0.2) << "the first interval: the totals";
  EXPECT_DOUBLE_EQ(*m.Observe(5, 20), 0.3);
  EXPECT_FALSE(m.Observe(5, 20)) << "no observation in the interval";
  const double inf = std::numeric_limits<double>::infinity();
  for (auto [sum, count] : {std::pair{inf, 30.0},
                            {-inf, 30.0},
                            {std::nan(""), 30.0},
                            {-1.0, 30.0},
                            {8.0, inf},
                            {8.0, -2.0},
                            {8.0, std::nan("")},
                            {1e300, 30.0},
                            {8.0, 1e300}}) {
    EXPECT_FALSE(m.Observe(sum, count)) << sum << " " << count;
  }
  // Every hostile pair was skipped: the interval runs from (5, 20).
  EXPECT_DOUBLE_EQ(*m.Observe(8, 30), 0.3);
  // A restart: both went back; the mean is of everything since it.
  EXPECT_DOUBLE_EQ(*m.Observe(3, 2), 1.5);
  EXPECT_DOUBLE_EQ(*m.Observe(13, 12), 1.0);
  // A restart that only the sum shows (more requests since than before, in less
  // time): both values as they are, not the count's apparent increase (1 / 8).
  EXPECT_DOUBLE_EQ(*m.Observe(1, 20), 1.0 / 20);
}

TEST(EngineMetricsCollectorTest, PrefillIsTheMeanOfVllmsPrefillHistogramOverTheLastInterval) {
  FakeEngine engine({
      {200, VllmPrefillBody(2, 10)},  // first scrape: its totals, 0.2 s
      {200, VllmPrefillBody(5, 20)},  // +3 s over +10 requests: 0.3 s
      {200, VllmPrefillBody(5, 20)},  // no request prefilled: kept
  });
  auto c = Make(engine.url());
  ASSERT_TRUE(WaitScrapes(*c, 1));
  // Whichever scrape the worker is at, the mean is one of the script's.
  const std::optional<double> first = c->engine_signals().prefill_seconds;
  ASSERT_TRUE(first);
  EXPECT_TRUE(*first == 0.2 || *first == 0.3) << *first;
  ASSERT_TRUE(WaitScrapes(*c, 4));
  EXPECT_DOUBLE_EQ(*c->engine_signals().prefill_seconds, 0.3);
}

TEST(EngineMetricsCollectorTest, PrefillIsTimeToFirstTokenMinusQueueTimeWithoutThePrefillHistogram) {
  FakeEngine engine({
      {200, SglangTtftBody(10, 10, 4, 10)},  // 1 - 0.4 = 0.6 s
      {200, SglangTtftBody(40, 30, 9, 30)},  // 30 / 20 - 5 / 20 = 1.25 s
      {200, SglangTtftBody(40, 30, 9, 30)},  // nothing new: kept
  });
  auto c = Make(engine.url());
  ASSERT_TRUE(WaitScrapes(*c, 4));
  EXPECT_DOUBLE_EQ(*c->engine_signals().prefill_seconds, 1.25);
}

TEST(EngineMetricsCollectorTest, PrefillIsNeverBelowZero) {
  // Queue time above time to first token (histograms observed at other moments): 0, not negative.
  FakeEngine engine({{200, SglangTtftBody(10, 10, 12, 10)}});
  auto c = Make(engine.url());
  ASSERT_TRUE(WaitScrapes(*c, 2));
  EXPECT_EQ(c->engine_signals().prefill_seconds, 0.0);
}

TEST(EngineMetricsCollectorTest, PrefillAcrossAnEngineRestartIsSinceTheRestart) {
  FakeEngine engine({
      {200, VllmPrefillBody(100, 100)}, {200, VllmPrefillBody(3, 2)},  // restarted: 3 s over 2 requests since
  });
  auto c = Make(engine.url());
  ASSERT_TRUE(WaitScrapes(*c, 3));
  EXPECT_DOUBLE_EQ(*c->engine_signals().prefill_seconds, 1.5);
}

TEST(EngineMetricsCollectorTest, NoPrefillHistogramsOrNoRequestsNoPrefillTime) {
  FakeEngine vllm({{200, VllmBody({0, 100, 40, 0.5, 2, 1, 0, 0})}});
  auto a = Make(vllm.url());
  // Time to first token without a queue time is not enough.
  FakeEngine ttft_only(
      {{200, SglangBody(100, 1000, 2, 1, 0.3) + HistogramLines("sglang:time_to_first_token_seconds", "", 10, 10)}});
  auto b = Make(ttft_only.url());
  FakeEngine idle({{200, VllmPrefillBody(0, 0)}});  // no request prefilled yet
  auto d = Make(idle.url());
  ASSERT_TRUE(WaitScrapes(*a, 2));
  ASSERT_TRUE(WaitScrapes(*b, 2));
  ASSERT_TRUE(WaitScrapes(*d, 2));
  EXPECT_FALSE(a->engine_signals().prefill_seconds);
  EXPECT_FALSE(b->engine_signals().prefill_seconds);
  EXPECT_FALSE(d->engine_signals().prefill_seconds);
}

TEST(EngineMetricsCollectorTest, HostilePrefillValuesNeverReachTheSignal) {
  const double inf = std::numeric_limits<double>::infinity();
  FakeEngine engine({
      {200, VllmPrefillBody(2, 10)},             // 0.2 s
      {200, VllmPrefillBody(inf, 20)},           // skipped
      {200, VllmPrefillBody(-5, 20)},            // skipped
      {200, VllmPrefillBody(4, -inf)},           // skipped
      {200, VllmPrefillBody(1e300, 20)},         // skipped (beyond 2^53)
      {200, VllmPrefillBody(std::nan(""), 20)},  // the parser drops the NaN sum: kept
      {200, VllmPrefillBody(1e7, 20)},           // a mean of 10^6 s: not a prefill
  });
  auto c = Make(engine.url());
  ASSERT_TRUE(WaitScrapes(*c, 9));
  const std::optional<double> p = c->engine_signals().prefill_seconds;
  ASSERT_TRUE(p);
  EXPECT_DOUBLE_EQ(*p, 0.2);
}

TEST(EngineMetricsCollectorTest, DownEngineIsDownAndBacksOffToEightIntervals) {
  int port = 0;
  {
    FakeEngine gone({{200, ""}});
    port = gone.port();
  }  // closed: connections are refused
  auto c = Make("http://127.0.0.1:" + std::to_string(port) + "/metrics", milliseconds(2));
  ASSERT_TRUE(WaitScrapes(*c, 1));
  EXPECT_FALSE(c->stats().up);
  ASSERT_TRUE(WaitScrapes(*c, 5));
  // 1 failure: 2x, 2: 4x, 3 and more: capped at 8x.
  EXPECT_EQ(c->next_delay(), milliseconds(16));
  const CollectorStats s = c->stats();
  EXPECT_FALSE(s.up);
  EXPECT_GE(s.errors.at("connect"), 5u);
  EXPECT_EQ(s.last_success_s, 0);
  const auto m = Samples(*c);
  EXPECT_EQ(m.count("kvwatch_engine_preemptions_total"), 0u);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_scrape_backoff_seconds"), 0.016);
}

TEST(EngineMetricsCollectorTest, BackoffGrowsOnFailuresAndResetsOnSuccess) {
  FakeEngine engine({
      {503, "busy"},
      {503, "busy"},
      {200, VllmBody({1, 0, 0, 0, 0, 0, 0, 0})},
  });
  // Each step is read while the engine holds the next request, so the worker
  // cannot move on meanwhile.
  engine.HoldFrom(1);
  auto c = Make(engine.url(), milliseconds(3));
  ASSERT_TRUE(engine.WaitEntered(2));
  EXPECT_EQ(c->scrapes(), 1u);
  EXPECT_EQ(c->next_delay(), milliseconds(6));
  EXPECT_FALSE(c->stats().up);
  engine.HoldFrom(2);
  ASSERT_TRUE(engine.WaitEntered(3));
  EXPECT_EQ(c->scrapes(), 2u);
  EXPECT_EQ(c->next_delay(), milliseconds(12));
  engine.Release();
  ASSERT_TRUE(WaitScrapes(*c, 3));
  EXPECT_TRUE(c->stats().up);
  EXPECT_EQ(c->next_delay(), milliseconds(3));
  EXPECT_EQ(c->stats().errors.at("http_status"), 2u);
}

TEST(EngineMetricsCollectorTest, GarbageBodyCountsErrors) {
  FakeEngine engine({{200, "<html>not metrics</html>\nfoo{bar 1\n"}});
  std::vector<std::string> logged;
  auto c = MakeLogged(engine.url(), &logged);
  ASSERT_TRUE(WaitScrapes(*c, 1));
  const CollectorStats s = c->stats();
  EXPECT_FALSE(s.up);
  EXPECT_EQ(s.errors.at("bad_line"), 2u);
  EXPECT_EQ(s.errors.at("no_engine_metrics"), 1u);
  EXPECT_EQ(c->next_delay(), milliseconds(120000)) << "a garbage scrape is a failed one";
  NullSink sink;
  EXPECT_TRUE(logged.empty()) << "logs go out from Poll, on the caller's thread";
  c->Poll(sink, 0);
  ASSERT_EQ(logged.size(), 3u);
  EXPECT_NE(logged[0].find("line 1"), std::string::npos) << logged[0];
}

TEST(EngineMetricsCollectorTest, BadLinesBesideGoodMetricsAreCountedAndTheRestUsed) {
  FakeEngine engine({{200, VllmBody({7, 0, 0, 0, 0, 0, 0, 0}) + "vllm:broken{ 1\n"}});
  auto c = Make(engine.url(), milliseconds(1000));
  ASSERT_TRUE(WaitScrapes(*c, 1));
  EXPECT_TRUE(c->stats().up);
  EXPECT_EQ(c->stats().errors.at("bad_line"), 1u);
  EXPECT_EQ(Samples(*c).at("kvwatch_engine_preemptions_total"), 7);
}

// A sample of a metric kvwatch uses that is negative, infinite or NaN is dropped
// with its whole metric for the scrape, counted as bad_value and logged; the rest
// of the body is used and the scrape is a good one. Before, -3 preemptions were
// exported as a counter and +Inf waiting requests as a gauge.
TEST(EngineMetricsCollectorTest, ImplausibleValuesAreDroppedCountedAndLogged) {
  FakeEngine engine({{200, VllmBody({-3, 100, 40, 0.5, 2, 1, 0, 0}) +
                               "vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} +Inf\n"
                               "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} NaN\n"}});
  std::vector<std::string> logged;
  auto c = MakeLogged(engine.url(), &logged);
  ASSERT_TRUE(WaitScrapes(*c, 1));
  const CollectorStats s = c->stats();
  EXPECT_TRUE(s.up);
  ASSERT_TRUE(s.errors.count("bad_value"));
  EXPECT_EQ(s.errors.at("bad_value"), 3u);
  const auto m = Samples(*c);
  EXPECT_FALSE(m.count("kvwatch_engine_preemptions_total"));
  EXPECT_FALSE(m.count("kvwatch_engine_requests_waiting")) << "one engine's +Inf drops the sum";
  EXPECT_FALSE(m.count("kvwatch_engine_kv_cache_usage_ratio"));
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_requests_running"), 2);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_capacity_pages"), 27730);
  NullSink sink;
  c->Poll(sink, 0);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].find("3 sample(s) negative, infinite or NaN"), std::string::npos) << logged[0];
  EXPECT_NE(logged[0].find("vllm:num_preemptions_total is -3"), std::string::npos) << logged[0];
}

// ---- The engine /metrics of 2026 ---------------------------------------------------------

// The histogram sample of `name` (re-exported engine histograms), or nullptr.
std::optional<MetricSample> HistogramSample(const Collector& c, const std::string& name) {
  std::vector<MetricSample> out;
  c.AppendSamples(&out);
  for (MetricSample& s : out) {
    if (s.name == name && s.histogram) return std::move(s);
  }
  return std::nullopt;
}

struct Vllm2026 {
  double compute, cache_hit, external, ext_queries, ext_hits;
  double gap_le1, gap_le60, gap_count, gap_sum;  // cumulative reuse-gap buckets (le=1, le=60), count, sum
};

// vLLM 2026 (vllm/v1/metrics/loggers.py): prompt tokens by source, the external
// prefix cache, and the reuse-gap histogram of --kv-cache-metrics; block_size 16.
std::string Vllm2026Body(const Vllm2026& v) {
  const std::string m = "model_name=\"meta-llama/Llama-3.1-8B-Instruct\",engine=\"0\"";
  auto n = [](double x) { return ExpositionNumber(x); };
  auto source = [&](const char* name, double x) {
    return "vllm:prompt_tokens_by_source_total{" + m + ",source=\"" + name + "\"} " + n(x) + "\n";
  };
  auto gap = [&](const char* le, double x) {
    return "vllm:kv_block_reuse_gap_seconds_bucket{engine=\"0\",le=\"" + std::string(le) +
           "\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} " + n(x) + "\n";
  };
  return "# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.\n"
         "# TYPE vllm:prompt_tokens_by_source_total counter\n" +
         source("local_compute", v.compute) + source("local_cache_hit", v.cache_hit) +
         source("external_kv_transfer", v.external) +
         "# TYPE vllm:external_prefix_cache_queries_total counter\n"
         "vllm:external_prefix_cache_queries_total{" +
         m + "} " + n(v.ext_queries) + "\n" +
         "# TYPE vllm:external_prefix_cache_hits_total counter\n"
         "vllm:external_prefix_cache_hits_total{" +
         m + "} " + n(v.ext_hits) + "\n" + "# TYPE vllm:kv_block_reuse_gap_seconds histogram\n" +
         gap("1.0", v.gap_le1) + gap("60.0", v.gap_le60) + gap("+Inf", v.gap_count) +
         "vllm:kv_block_reuse_gap_seconds_count{" + m + "} " + n(v.gap_count) + "\n" +
         "vllm:kv_block_reuse_gap_seconds_sum{" + m + "} " + n(v.gap_sum) + "\n" +
         // The older hit counters, which the sources replace (they would say 10%).
         "vllm:prefix_cache_queries_total{" + m + "} " + n(10 * (v.compute + v.cache_hit)) + "\n" +
         "vllm:prefix_cache_hits_total{" + m + "} " + n(v.compute + v.cache_hit) + "\n" +
         "vllm:cache_config_info{block_size=\"16\",engine=\"0\",num_gpu_blocks=\"27730\"} 1.0\n";
}

TEST(EngineMetricsCollectorTest, Vllm2026SourcesExternalHitsAndReuseGapsAcrossAnEngineRestart) {
  FakeEngine engine({
      {200, Vllm2026Body({100, 300, 0, 50, 0, 2, 5, 6, 40})},
      {200, Vllm2026Body({200, 700, 100, 250, 100, 4, 9, 10, 70})},
      {200, Vllm2026Body({50, 150, 0, 20, 5, 1, 1, 1, 0.5})},  // restarted: every counter went back
  });
  auto c = Make(engine.url());
  ASSERT_TRUE(WaitScrapes(*c, 4));  // the script, then the last body again
  const auto m = Samples(*c);
  EXPECT_EQ(m.at("kvwatch_engine_prompt_tokens_total{source=compute}"), 200 + 50);
  EXPECT_EQ(m.at("kvwatch_engine_prompt_tokens_total{source=device_hit}"), 700 + 150);
  EXPECT_EQ(m.at("kvwatch_engine_prompt_tokens_total{source=external_hit}"), 100 + 0);
  EXPECT_FALSE(m.count("kvwatch_engine_prompt_tokens_total{source=host_hit}"));
  // Scrape 3, since the restart: 150 of 200 prompt tokens from the GPU cache (not
  // the older counters' 10%); the external cache hit 5 of 20.
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_prefix_cache_hit_ratio"), 150.0 / 200.0);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_external_prefix_cache_hit_ratio"), 5.0 / 20.0);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_page_tokens"), 16);
  EXPECT_EQ(m.at("kvwatch_engine_counter_resets_total"), 1);
  const std::optional<MetricSample> gap = HistogramSample(*c, "kvwatch_engine_kv_block_reuse_gap_seconds");
  ASSERT_TRUE(gap.has_value());
  // Running totals: the first scrape's, the increase to the second, the third's since the restart.
  const std::vector<std::pair<double, std::uint64_t>> buckets = {{1.0, 4 + 1}, {60.0, 9 + 1}};
  EXPECT_EQ(gap->buckets, buckets);
  EXPECT_EQ(gap->count, 10u + 1u);
  EXPECT_DOUBLE_EQ(gap->value, 70 + 0.5);
  EXPECT_FALSE(HistogramSample(*c, "kvwatch_engine_kv_block_lifetime_seconds").has_value())
      << "not exported by this engine";
}

// SGLang 2026 (python/sglang/srt/observability/metrics_collector.py): the pool by
// state, its pages, and the prefill tokens by tier.
std::string Sglang2026Body(double input, double device, double host, double storage, double used, double page) {
  const std::string l = "{engine_type=\"unified\",model_name=\"m\",tp_rank=\"0\",pp_rank=\"0\"}";
  auto n = [](double x) { return ExpositionNumber(x); };
  auto mode = [&](const char* name, double x) {
    return "sglang:prefill_effective_tokens_total{engine_type=\"unified\",mode=\"" + std::string(name) +
           "\",model_name=\"m\",tp_rank=\"0\",pp_rank=\"0\"} " + n(x) + "\n";
  };
  return SglangBody(100, 1000, 2, 1, 0.3) + "# TYPE sglang:prefill_effective_tokens_total counter\n" +
         mode("input", input) + mode("device_hit", device) + mode("host_hit", host) + mode("storage_hit", storage) +
         "sglang:kv_used_tokens" + l + " " + n(used) + "\n" + "sglang:kv_evictable_tokens" + l + " 250000.0\n" +
         "sglang:kv_available_tokens" + l + " " + n(439104 - 250000 - used) + "\n" + "sglang:page_size" + l + " " +
         n(page) + "\n" + "sglang:num_pages" + l + " " + n(std::floor(439104 / page)) + "\n";
}

TEST(EngineMetricsCollectorTest, Sglang2026TierHitsPoolAndPages) {
  FakeEngine engine({
      {200, Sglang2026Body(1000, 2000, 500, 0, 40000, 16)},
      {200, Sglang2026Body(1400, 2600, 900, 100, 60000, 16)},
  });
  auto c = Make(engine.url());
  ASSERT_TRUE(WaitScrapes(*c, 3));
  const auto m = Samples(*c);
  // 600 of 1500 prompt tokens of the interval hit the GPU cache (the older
  // cached/prompt counters of SglangBody would say 0).
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_prefix_cache_hit_ratio"), 600.0 / 1500.0);
  EXPECT_EQ(m.at("kvwatch_engine_prompt_tokens_total{source=compute}"), 1400);
  EXPECT_EQ(m.at("kvwatch_engine_prompt_tokens_total{source=host_hit}"), 900);
  EXPECT_EQ(m.at("kvwatch_engine_prompt_tokens_total{source=storage_hit}"), 100);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_kv_tokens{state=used}"), 60000);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_kv_tokens{state=evictable}"), 250000);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_kv_tokens{state=available}"), 439104 - 250000 - 60000);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_page_tokens"), 16);
  // num_pages x page_size (439104 tokens), not max_total_num_tokens (439182).
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_capacity_pages"), 439104.0 / 16);
  EXPECT_FALSE(m.count("kvwatch_engine_external_prefix_cache_hit_ratio"));
}

TEST(EngineMetricsCollectorTest, AnEnginePageSizeOtherThanPageTokensIsLoggedOnce) {
  FakeEngine engine({{200, Sglang2026Body(1000, 2000, 0, 0, 100, 64)}});
  std::vector<std::string> logged;
  auto c = Make(engine.url(), milliseconds(5), 16, milliseconds(10000), &logged);
  ASSERT_TRUE(WaitScrapes(*c, 3));
  NullSink sink;
  c->Poll(sink, 0);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].find("the engine's pages hold 64 tokens, page_tokens is 16"), std::string::npos) << logged[0];
  const auto m = Samples(*c);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_page_tokens"), 64);
  EXPECT_DOUBLE_EQ(m.at("kvwatch_engine_capacity_pages"), std::floor(439104.0 / 64) * 64 / 16);
  EXPECT_TRUE(c->stats().errors.empty());
}

TEST(EngineMetricsCollectorTest, Hostile2026ValuesAreDroppedForTheScrapeAndCounted) {
  Vllm2026 good{100, 300, 0, 50, 0, 2, 5, 6, 40};
  std::string hostile = Vllm2026Body({100, 300, 0, 50, 0, 2, 5, 6, 40});
  // One engine's NaN drops the source's sum; a negative bucket drops the histogram.
  hostile +=
      "vllm:prompt_tokens_by_source_total{model_name=\"m\",engine=\"1\",source=\"local_cache_hit\"} NaN\n"
      "vllm:kv_block_reuse_gap_seconds_bucket{engine=\"1\",le=\"1.0\",model_name=\"m\"} -2\n";
  good.compute = 200;
  good.cache_hit = 700;
  FakeEngine engine({{200, Vllm2026Body({50, 100, 0, 10, 0, 1, 2, 3, 10})}, {200, hostile}, {200, Vllm2026Body(good)}});
  std::vector<std::string> logged;
  auto c = Make(engine.url(), milliseconds(5), 16, milliseconds(10000), &logged);
  ASSERT_TRUE(WaitScrapes(*c, 4));
  NullSink sink;
  c->Poll(sink, 0);
  const CollectorStats s = c->stats();
  ASSERT_TRUE(s.errors.count("bad_value"));
  EXPECT_EQ(s.errors.at("bad_value"), 2u);
  EXPECT_NE(logged[0].find("vllm:prompt_tokens_by_source_total is NaN"), std::string::npos) << logged[0];
  const auto m = Samples(*c);
  // The hostile scrape left cache_hit out: its total goes from 100 straight to 700.
  EXPECT_EQ(m.at("kvwatch_engine_prompt_tokens_total{source=device_hit}"), 700);
  EXPECT_EQ(m.at("kvwatch_engine_prompt_tokens_total{source=compute}"), 200);
  EXPECT_EQ(m.at("kvwatch_engine_counter_resets_total"), 0);
  const std::optional<MetricSample> gap = HistogramSample(*c, "kvwatch_engine_kv_block_reuse_gap_seconds");
  ASSERT_TRUE(gap.has_value());
  EXPECT_EQ(gap->count, 6u);
}

TEST(EngineMetricsCollectorTest, PollDoesNotWaitForASlowEngine) {
  FakeEngine engine({{200, VllmBody({9, 0, 0, 0, 0, 0, 0, 0})}});
  engine.Block();
  auto c = Make(engine.url(), milliseconds(1000));
  ASSERT_TRUE(engine.WaitEntered(1));  // the scrape is in flight, held by the engine
  NullSink sink;
  c->Poll(sink, 0);  // returns while the engine still holds the answer
  std::vector<MetricSample> samples;
  c->AppendSamples(&samples);
  const CollectorStats s = c->stats();
  EXPECT_TRUE(engine.blocked());
  EXPECT_EQ(c->scrapes(), 0u);
  EXPECT_FALSE(s.up);
  engine.Release();
  ASSERT_TRUE(WaitScrapes(*c, 1));
  EXPECT_TRUE(c->stats().up);
  EXPECT_EQ(Samples(*c).at("kvwatch_engine_preemptions_total"), 9);
}

TEST(EngineMetricsCollectorTest, DestructorAbortsARequestInFlight) {
  FakeEngine engine({{200, VllmBody({9, 0, 0, 0, 0, 0, 0, 0})}});
  engine.Block();
  // A timeout far beyond the test's limit: only aborting the request lets the
  // destructor return (a broken one hangs the test until CTest kills it).
  auto c = Make(engine.url(), milliseconds(1000), 16, milliseconds(24LL * 3600 * 1000));
  ASSERT_TRUE(engine.WaitEntered(1));
  c.reset();  // stops the client, which ends the blocked GET, and joins the worker
  EXPECT_TRUE(engine.blocked()) << "the engine never answered";
}

TEST(EngineMetricsCollectorCreateTest, RejectsBadOptions) {
  EngineMetricsCollectorOptions o;
  o.name = "x";
  o.url = "127.0.0.1:8000";
  EXPECT_FALSE(EngineMetricsCollector::Create(o, nullptr).ok());
  o.url = "http://127.0.0.1:1/metrics";
  o.interval = milliseconds(0);
  EXPECT_FALSE(EngineMetricsCollector::Create(o, nullptr).ok());
  o.interval = milliseconds(100);
  o.timeout = milliseconds(0);
  EXPECT_FALSE(EngineMetricsCollector::Create(o, nullptr).ok());
}

}  // namespace
}  // namespace kvwatch::collectors
