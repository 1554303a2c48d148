#include "collectors/exposition_parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvwatch::collectors {
namespace {

// A vLLM V1 /metrics body as prometheus_client prints it (text 0.0.4): HELP and
// TYPE lines carry the _total suffix of counters, labels in declaration order
// (model_name, engine), floats in Python repr, _created gauges after each
// counter, two DP engines.
constexpr std::string_view kVllmMetrics = R"(# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 12345.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="Qwen/Qwen3-8B",engine="0"} 3.0
vllm:num_requests_running{model_name="Qwen/Qwen3-8B",engine="1"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="Qwen/Qwen3-8B",engine="0"} 1.0
vllm:num_requests_waiting{model_name="Qwen/Qwen3-8B",engine="1"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="Qwen/Qwen3-8B",engine="0"} 0.4563
vllm:kv_cache_usage_perc{model_name="Qwen/Qwen3-8B",engine="1"} 0.7125
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{model_name="Qwen/Qwen3-8B",engine="0"} 7.0
vllm:num_preemptions_total{model_name="Qwen/Qwen3-8B",engine="1"} 2.0
# HELP vllm:num_preemptions_created Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{model_name="Qwen/Qwen3-8B",engine="0"} 1.7890958088378847e+09
vllm:num_preemptions_created{model_name="Qwen/Qwen3-8B",engine="1"} 1.7890958088378847e+09
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{model_name="Qwen/Qwen3-8B",engine="0"} 1.048576e+06
vllm:prefix_cache_queries_total{model_name="Qwen/Qwen3-8B",engine="1"} 524288.0
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{model_name="Qwen/Qwen3-8B",engine="0"} 262144.0
vllm:prefix_cache_hits_total{model_name="Qwen/Qwen3-8B",engine="1"} 131072.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="Qwen/Qwen3-8B",engine="0"} 786432.0
vllm:prompt_tokens_total{model_name="Qwen/Qwen3-8B",engine="1"} 393216.0
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{model_name="Qwen/Qwen3-8B",engine="0",finished_reason="stop"} 120.0
vllm:request_success_total{model_name="Qwen/Qwen3-8B",engine="0",finished_reason="length"} 30.0
vllm:request_success_total{model_name="Qwen/Qwen3-8B",engine="0",finished_reason="abort"} 4.0
vllm:request_success_total{model_name="Qwen/Qwen3-8B",engine="0",finished_reason="error"} 0.0
vllm:request_success_total{model_name="Qwen/Qwen3-8B",engine="1",finished_reason="stop"} 60.0
vllm:request_success_total{model_name="Qwen/Qwen3-8B",engine="1",finished_reason="abort"} 1.0
# HELP vllm:admission_rejections_total Number of admission attempts rejected
# TYPE vllm:admission_rejections_total counter
vllm:admission_rejections_total{model_name="Qwen/Qwen3-8B",reason="max_num_queued_reqs"} 2.0
vllm:admission_rejections_total{model_name="Qwen/Qwen3-8B",reason="max_num_queued_tokens"} 3.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",gpu_memory_utilization="0.9",num_gpu_blocks="27730",prefix_caching_hash_algo="sha256"} 1.0
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="1",gpu_memory_utilization="0.9",num_gpu_blocks="27730",prefix_caching_hash_algo="sha256"} 1.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",engine="0",le="0.001"} 0.0
vllm:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",engine="0",le="0.5"} 140.0
vllm:time_to_first_token_seconds_bucket{model_name="Qwen/Qwen3-8B",engine="0",le="+Inf"} 154.0
vllm:time_to_first_token_seconds_count{model_name="Qwen/Qwen3-8B",engine="0"} 154.0
vllm:time_to_first_token_seconds_sum{model_name="Qwen/Qwen3-8B",engine="0"} 21.377
)";

// An SGLang /metrics body (--enable-metrics), two DP ranks.
constexpr std::string_view kSglangMetrics = R"(# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 4.0
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 5.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="0",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 2.0
sglang:num_queue_reqs{dp_rank="1",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 0.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="0",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 0.27
sglang:token_usage{dp_rank="1",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 0.31
# HELP sglang:max_total_num_tokens Maximum total number of tokens in the KV cache pool.
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{dp_rank="0",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 439182.0
sglang:max_total_num_tokens{dp_rank="1",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 439182.0
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{dp_rank="0",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 0.0
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{dp_rank="0",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 1.2e+06
sglang:prompt_tokens_total{dp_rank="1",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 800000.0
# HELP sglang:cached_tokens_total Number of cached prompt tokens.
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{dp_rank="0",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 600000.0
sglang:cached_tokens_total{dp_rank="1",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 200000.0
# HELP sglang:num_requests_total Number of requests processed.
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{dp_rank="0",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 900.0
# HELP sglang:num_aborted_requests_total Number of requests aborted.
# TYPE sglang:num_aborted_requests_total counter
sglang:num_aborted_requests_total{dp_rank="0",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 6.0
# HELP sglang:num_retracted_requests_total Number of retracted requests.
# TYPE sglang:num_retracted_requests_total counter
sglang:num_retracted_requests_total{dp_rank="0",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 11.0
sglang:num_retracted_requests_total{dp_rank="1",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 1.0
# HELP sglang:evicted_tokens_total The number of tokens evicted from GPU to CPU.
# TYPE sglang:evicted_tokens_total counter
sglang:evicted_tokens_total{dp_rank="0",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 4096.0
)";

TEST(ExpositionParserTest, ParsesVllmBodyWithFamiliesAndSortedLabels) {
  const Exposition e = ParseExposition(kVllmMetrics);
  EXPECT_TRUE(e.errors.empty()) << e.errors.front().reason;
  ASSERT_EQ(e.samples.size(), 32u);
  const Sample& first = e.samples[0];
  EXPECT_EQ(first.name, "python_gc_objects_collected_total");
  EXPECT_EQ(first.line, 3u);
  const Sample& running = e.samples[1];
  EXPECT_EQ(running.name, "vllm:num_requests_running");
  EXPECT_EQ(running.labels, (Labels{{"engine", "0"}, {"model_name", "Qwen/Qwen3-8B"}}));
  EXPECT_EQ(running.Label("model_name"), "Qwen/Qwen3-8B");
  EXPECT_FALSE(running.Label("le").has_value());
  EXPECT_DOUBLE_EQ(running.value, 3.0);
  EXPECT_FALSE(running.timestamp_ms.has_value());

  const MetricFamilyInfo* preempt = e.FindFamily("vllm:num_preemptions_total");
  ASSERT_NE(preempt, nullptr);
  EXPECT_EQ(preempt->type, MetricType::kCounter);
  EXPECT_EQ(preempt->help, "Cumulative number of preemption from the engine.");
  const MetricFamilyInfo* ttft = e.FamilyOf("vllm:time_to_first_token_seconds_bucket");
  ASSERT_NE(ttft, nullptr);
  EXPECT_EQ(ttft->type, MetricType::kHistogram);
  EXPECT_EQ(e.FamilyOf("vllm:num_preemptions_total"), preempt);
  EXPECT_EQ(e.FamilyOf("nope_total"), nullptr);
  const Sample& inf_bucket = e.samples[29];
  EXPECT_EQ(inf_bucket.Label("le"), "+Inf");
  EXPECT_EQ(e.samples[9].name, "vllm:num_preemptions_created");
  EXPECT_DOUBLE_EQ(e.samples[9].value, 1.7890958088378847e+09);
}

TEST(ExpositionParserTest, MapsVllmSnapshot) {
  const EngineSnapshot s = MapEngineSnapshot(ParseExposition(kVllmMetrics));
  EXPECT_EQ(s.engine, EngineKind::kVllm);
  EXPECT_EQ(s.model_names, std::vector<std::string>{"Qwen/Qwen3-8B"});
  EXPECT_EQ(s.preemptions_total, 9.0);
  EXPECT_EQ(s.prefix_cache_queries_tokens_total, 1048576.0 + 524288.0);
  EXPECT_EQ(s.prefix_cache_hits_tokens_total, 262144.0 + 131072.0);
  EXPECT_EQ(s.prompt_tokens_total, 786432.0 + 393216.0);
  EXPECT_EQ(s.requests_finished_total, 215.0);
  EXPECT_EQ(s.aborted_requests_total, 5.0);
  EXPECT_EQ(s.admission_rejections_total, 5.0);
  EXPECT_EQ(s.kv_cache_usage, 0.7125);
  EXPECT_EQ(s.requests_running, 5.0);
  EXPECT_EQ(s.requests_waiting, 1.0);
  EXPECT_EQ(s.num_gpu_blocks, 2 * 27730.0);
  EXPECT_EQ(s.block_size, 16.0);
  EXPECT_FALSE(s.retracted_requests_total.has_value());
  EXPECT_FALSE(s.cached_tokens_total.has_value());
  EXPECT_FALSE(s.evicted_tokens_total.has_value());
  EXPECT_FALSE(s.max_total_num_tokens.has_value());
  EXPECT_EQ(s.time_to_first_token_sum_s, 21.377);
  EXPECT_EQ(s.time_to_first_token_count, 154.0);
  EXPECT_FALSE(s.queue_time_count.has_value());
  EXPECT_FALSE(s.prefill_time_count.has_value());
  EXPECT_EQ(s.matched_samples, 26u);  // 24, and the time to first token's _sum and _count
}

TEST(ExpositionParserTest, MapsSglangSnapshot) {
  const Exposition e = ParseExposition(kSglangMetrics);
  EXPECT_TRUE(e.errors.empty());
  const EngineSnapshot s = MapEngineSnapshot(e);
  EXPECT_EQ(s.engine, EngineKind::kSglang);
  EXPECT_EQ(s.model_names, std::vector<std::string>{"meta-llama/Llama-3.1-8B-Instruct"});
  EXPECT_EQ(s.requests_running, 9.0);
  EXPECT_EQ(s.requests_waiting, 2.0);
  EXPECT_EQ(s.kv_cache_usage, 0.31);
  EXPECT_EQ(s.max_total_num_tokens, 878364.0);
  EXPECT_EQ(s.prompt_tokens_total, 2.0e6);
  EXPECT_EQ(s.cached_tokens_total, 800000.0);
  EXPECT_EQ(s.requests_finished_total, 900.0);
  EXPECT_EQ(s.aborted_requests_total, 6.0);
  EXPECT_EQ(s.retracted_requests_total, 12.0);
  EXPECT_EQ(s.evicted_tokens_total, 4096.0);
  EXPECT_FALSE(s.preemptions_total.has_value());
  EXPECT_FALSE(s.prefix_cache_hits_tokens_total.has_value());
}

TEST(ExpositionParserTest, DeadVllmNamesAreNotReadAndBareCounterNamesAreFallbacksOnly) {
  // v0.8-era body: the gpu_* names vLLM no longer registers (their replacements
  // exist since 0.9), and a bare counter name as an exporter without the _total
  // suffix would print it.
  const Exposition old = ParseExposition(
      "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.25\n"
      "vllm:gpu_prefix_cache_queries_total{model_name=\"m\"} 100\n"
      "vllm:gpu_prefix_cache_hits_total{model_name=\"m\"} 40\n"
      "vllm:num_preemptions{model_name=\"m\"} 3\n");
  const EngineSnapshot s = MapEngineSnapshot(old);
  EXPECT_FALSE(s.kv_cache_usage.has_value());
  EXPECT_FALSE(s.prefix_cache_queries_tokens_total.has_value());
  EXPECT_FALSE(s.prefix_cache_hits_tokens_total.has_value());
  EXPECT_EQ(s.preemptions_total, 3.0);
  EXPECT_EQ(s.matched_samples, 1u);
  // Both spellings of a counter: the suffixed one wins and nothing is summed twice.
  const Exposition both = ParseExposition(
      "vllm:prefix_cache_queries_total{model_name=\"m\"} 7\n"
      "vllm:prefix_cache_queries{model_name=\"m\"} 100\n"
      "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.5\n");
  const EngineSnapshot b = MapEngineSnapshot(both);
  EXPECT_EQ(b.kv_cache_usage, 0.5);
  EXPECT_EQ(b.prefix_cache_queries_tokens_total, 7.0);
}

TEST(ExpositionParserTest, InterTokenLatencyPrefersThePerTokenHistogram) {
  // vLLM V1 exports both the per-token histogram and the per-request mean: the
  // per-token one wins; SGLang's own name maps the same way.
  const Exposition vllm = ParseExposition(
      "vllm:request_time_per_output_token_seconds_sum{engine=\"0\"} 9\n"
      "vllm:request_time_per_output_token_seconds_count{engine=\"0\"} 3\n"
      "vllm:inter_token_latency_seconds_sum{engine=\"0\"} 2\n"
      "vllm:inter_token_latency_seconds_sum{engine=\"1\"} 3\n"
      "vllm:inter_token_latency_seconds_count{engine=\"0\"} 100\n"
      "vllm:inter_token_latency_seconds_count{engine=\"1\"} 150\n");
  const EngineSnapshot v = MapEngineSnapshot(vllm);
  EXPECT_EQ(v.inter_token_latency_sum_s, 5.0);
  EXPECT_EQ(v.inter_token_latency_count, 250.0);
  const EngineSnapshot per_request = MapEngineSnapshot(ParseExposition(
      "vllm:request_time_per_output_token_seconds_sum 9\nvllm:request_time_per_output_token_seconds_count 3\n"));
  EXPECT_EQ(per_request.inter_token_latency_sum_s, 9.0);
  EXPECT_EQ(per_request.inter_token_latency_count, 3.0);
  const EngineSnapshot sglang =
      MapEngineSnapshot(ParseExposition("sglang:inter_token_latency_seconds_sum{tp_rank=\"0\"} 4\n"
                                        "sglang:inter_token_latency_seconds_count{tp_rank=\"0\"} 80\n"));
  EXPECT_EQ(sglang.engine, EngineKind::kSglang);
  EXPECT_EQ(sglang.inter_token_latency_sum_s, 4.0);
  EXPECT_EQ(sglang.inter_token_latency_count, 80.0);
  EXPECT_FALSE(MapEngineSnapshot(ParseExposition("vllm:num_requests_running 1\n")).inter_token_latency_count);
}

TEST(ExpositionParserTest, PrefillQueueAndFirstTokenHistogramsAreSummedOverEngines) {
  const EngineSnapshot v = MapEngineSnapshot(
      ParseExposition("vllm:request_prefill_time_seconds_sum{engine=\"0\"} 2\n"
                      "vllm:request_prefill_time_seconds_sum{engine=\"1\"} 3\n"
                      "vllm:request_prefill_time_seconds_count{engine=\"0\"} 10\n"
                      "vllm:request_prefill_time_seconds_count{engine=\"1\"} 15\n"
                      "vllm:time_to_first_token_seconds_sum 30\nvllm:time_to_first_token_seconds_count 25\n"
                      "vllm:request_queue_time_seconds_sum 7\nvllm:request_queue_time_seconds_count 25\n"));
  EXPECT_EQ(v.prefill_time_sum_s, 5.0);
  EXPECT_EQ(v.prefill_time_count, 25.0);
  EXPECT_EQ(v.time_to_first_token_sum_s, 30.0);
  EXPECT_EQ(v.time_to_first_token_count, 25.0);
  EXPECT_EQ(v.queue_time_sum_s, 7.0);
  EXPECT_EQ(v.queue_time_count, 25.0);
  const EngineSnapshot sglang =
      MapEngineSnapshot(ParseExposition("sglang:time_to_first_token_seconds_sum{tp_rank=\"0\"} 4\n"
                                        "sglang:time_to_first_token_seconds_count{tp_rank=\"0\"} 8\n"
                                        "sglang:queue_time_seconds_sum{tp_rank=\"0\"} 1\n"
                                        "sglang:queue_time_seconds_count{tp_rank=\"0\"} 8\n"));
  EXPECT_EQ(sglang.engine, EngineKind::kSglang);
  EXPECT_FALSE(sglang.prefill_time_sum_s);
  EXPECT_EQ(sglang.time_to_first_token_sum_s, 4.0);
  EXPECT_EQ(sglang.time_to_first_token_count, 8.0);
  EXPECT_EQ(sglang.queue_time_sum_s, 1.0);
  EXPECT_EQ(sglang.queue_time_count, 8.0);
}

TEST(ExpositionParserTest, ModelFilterAndNaNSamples) {
  const Exposition e = ParseExposition(
      "vllm:num_requests_running{model_name=\"a\",engine=\"0\"} 2\n"
      "vllm:num_requests_running{model_name=\"b\",engine=\"0\"} 5\n"
      "vllm:num_requests_waiting{model_name=\"a\",engine=\"0\"} NaN\n"
      "vllm:num_preemptions_total{engine=\"0\"} 1\n");
  EngineSnapshotOptions only_a;
  only_a.model_name = "a";
  const EngineSnapshot a = MapEngineSnapshot(e, only_a);
  EXPECT_EQ(a.requests_running, 2.0);
  EXPECT_FALSE(a.requests_waiting.has_value());
  EXPECT_EQ(a.preemptions_total, 1.0);  // no model_name label: kept
  EXPECT_EQ(a.model_names, std::vector<std::string>{"a"});
  const EngineSnapshot all = MapEngineSnapshot(e);
  EXPECT_EQ(all.requests_running, 7.0);
  EXPECT_EQ(all.model_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(MapEngineSnapshot(ParseExposition("up 1\n")).engine, EngineKind::kUnknown);
}

// Negative, infinite and NaN samples of used metrics drop the metric for the
// scrape (not a partial sum) and are counted; unused metrics are not looked at.
TEST(ExpositionParserTest, ImplausibleValuesDropTheirMetricAndAreCounted) {
  const EngineSnapshot s =
      MapEngineSnapshot(ParseExposition("vllm:num_requests_running{engine=\"0\"} 2\n"
                                        "vllm:num_requests_running{engine=\"1\"} -1\n"
                                        "vllm:num_preemptions_total{engine=\"0\"} -Inf\n"
                                        "vllm:num_preemptions{engine=\"0\"} 4\n"
                                        "vllm:num_requests_waiting{engine=\"0\"} 3\n"
                                        "vllm:request_success_total{engine=\"0\",finished_reason=\"abort\"} NaN\n"
                                        "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\"} 9\n"
                                        "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"-5\"} 1\n"
                                        "vllm:unused_gauge -7\n"));
  EXPECT_FALSE(s.requests_running.has_value()) << "not 2 of the two engines' sum";
  EXPECT_FALSE(s.preemptions_total.has_value()) << "nor the older name's value";
  EXPECT_FALSE(s.aborted_requests_total.has_value());
  EXPECT_FALSE(s.requests_finished_total.has_value());
  EXPECT_FALSE(s.num_gpu_blocks.has_value());
  EXPECT_EQ(s.block_size, 16.0);
  EXPECT_EQ(s.requests_waiting, 3.0);
  EXPECT_EQ(s.bad_values, 4u);
  EXPECT_EQ(s.first_bad_value, "vllm:num_requests_running is -1.000000");
  EXPECT_EQ(MapEngineSnapshot(ParseExposition("vllm:num_requests_running 2\n")).bad_values, 0u);
}

TEST(ExpositionParserTest, SpecialValuesTimestampsEscapesAndWhitespace) {
  const Exposition e = ParseExposition(
      "\n"
      "  # a plain comment\n"
      "#   TYPE   x_total   counter   \r\n"
      "# HELP x_total Line one\\nwith \\\\ backslash\n"
      "x_total{path=\"C:\\\\dir\",quote=\"say \\\"hi\\\"\",nl=\"a\\nb\",} 1.5e3 1700000000000\n"
      "\t  y NaN  \n"
      "y{k=\"+\"} +Inf\n"
      "y{k=\"-\"} -Inf -5\n"
      "z {a=\"}\",b=\",\"} 0x1p4\n"
      "z{} Infinity\n"
      "z_ 1e999\n");
  ASSERT_TRUE(e.errors.empty()) << e.errors.front().line << ": " << e.errors.front().reason;
  ASSERT_EQ(e.samples.size(), 7u);
  const Sample& x = e.samples[0];
  EXPECT_EQ(x.labels, (Labels{{"nl", "a\nb"}, {"path", "C:\\dir"}, {"quote", "say \"hi\""}}));
  EXPECT_DOUBLE_EQ(x.value, 1500.0);
  EXPECT_EQ(x.timestamp_ms, 1700000000000);
  EXPECT_EQ(x.line, 5u);
  const MetricFamilyInfo* f = e.FindFamily("x_total");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->type, MetricType::kCounter);
  EXPECT_EQ(f->help, "Line one\nwith \\ backslash");
  EXPECT_TRUE(std::isnan(e.samples[1].value));
  EXPECT_EQ(e.samples[2].value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(e.samples[3].value, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(e.samples[3].timestamp_ms, -5);
  EXPECT_EQ(e.samples[4].labels, (Labels{{"a", "}"}, {"b", ","}}));
  EXPECT_EQ(e.samples[4].value, 16.0);
  EXPECT_EQ(e.samples[5].value, std::numeric_limits<double>::infinity());
  EXPECT_TRUE(e.samples[5].labels.empty());
  EXPECT_EQ(e.samples[6].value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(MetricTypeName(MetricType::kSummary), "summary");
}

TEST(ExpositionParserTest, MalformedLinesAreReportedAndSkipped) {
  const Exposition e = ParseExposition(
      "good 1\n"                 // 1
      "bad-name 1\n"             // 2
      "m{a=\"unterminated} 1\n"  // 3
      "m{a=\"x\\t\"} 1\n"        // 4 invalid escape
      "m{a=\"x\" b=\"y\"} 1\n"   // 5 missing comma
      "m{1a=\"x\"} 1\n"          // 6 bad label name
      "m{a=\"x\",a=\"y\"} 1\n"   // 7 duplicate label
      "m\n"                      // 8 no value
      "m one\n"                  // 9 bad value
      "m 1 12.5\n"               // 10 bad timestamp
      "m 1 12 extra\n"           // 11 trailing text
      "# TYPE m bogus\n"         // 12 bad type
      "# TYPE m gauge\n"         // 13 ok
      "# TYPE m counter\n"       // 14 second TYPE
      "# HELP\n"                 // 15 no name
      "m{a=\"x\"\n"              // 16 unterminated set
      "m{a\"x\"} 1\n"            // 17 missing '='
      "m{a=x} 1\n"               // 18 unquoted value
      "m 1 2\n");                // 19 good
  ASSERT_EQ(e.samples.size(), 2u);
  EXPECT_EQ(e.samples[0].line, 1u);
  EXPECT_EQ(e.samples[1].line, 19u);
  EXPECT_EQ(e.samples[1].timestamp_ms, 2);
  std::vector<std::size_t> lines;
  for (const ExpositionLineError& err : e.errors) {
    lines.push_back(err.line);
    EXPECT_FALSE(err.reason.empty());
    EXPECT_GE(err.column, 1u);
  }
  EXPECT_EQ(lines, (std::vector<std::size_t>{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17, 18}));
  EXPECT_EQ(e.FindFamily("m")->type, MetricType::kGauge);
  EXPECT_NE(e.errors[2].reason.find("escape"), std::string::npos) << e.errors[2].reason;
  EXPECT_NE(e.errors[5].reason.find("duplicate"), std::string::npos) << e.errors[5].reason;
  EXPECT_EQ(e.errors[7].column, 3u);  // "m one": the value starts at column 3
}

TEST(ExpositionParserTest, EmptyAndCommentOnlyBodies) {
  EXPECT_TRUE(ParseExposition("").samples.empty());
  const Exposition e = ParseExposition("# just a comment\n\n   \n");
  EXPECT_TRUE(e.samples.empty());
  EXPECT_TRUE(e.errors.empty());
  EXPECT_TRUE(e.families.empty());
  const EngineSnapshot s = MapEngineSnapshot(e);
  EXPECT_EQ(s.engine, EngineKind::kUnknown);
  EXPECT_EQ(s.matched_samples, 0u);
  EXPECT_FALSE(s.kv_cache_usage.has_value());
}

// ---- The engine /metrics of 2026 ------------------------------------------------------

// vLLM's newer families as prometheus_client prints them (vllm/v1/metrics/loggers.py
// of 2026: prompt_tokens_by_source, the KV connector's external prefix cache, and the
// residency histograms of --kv-cache-metrics with their buckets), two DP engines.
constexpr std::string_view kVllm2026 = R"(# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.
# TYPE vllm:prompt_tokens_by_source_total counter
vllm:prompt_tokens_by_source_total{model_name="Qwen/Qwen3-8B",engine="0",source="local_compute"} 1200.0
vllm:prompt_tokens_by_source_total{model_name="Qwen/Qwen3-8B",engine="1",source="local_compute"} 800.0
vllm:prompt_tokens_by_source_total{model_name="Qwen/Qwen3-8B",engine="0",source="local_cache_hit"} 2400.0
vllm:prompt_tokens_by_source_total{model_name="Qwen/Qwen3-8B",engine="1",source="local_cache_hit"} 1600.0
vllm:prompt_tokens_by_source_total{model_name="Qwen/Qwen3-8B",engine="0",source="external_kv_transfer"} 300.0
vllm:prompt_tokens_by_source_total{model_name="Qwen/Qwen3-8B",engine="1",source="external_kv_transfer"} 0.0
# HELP vllm:prompt_tokens_by_source_created Number of prompt tokens by source.
# TYPE vllm:prompt_tokens_by_source_created gauge
vllm:prompt_tokens_by_source_created{model_name="Qwen/Qwen3-8B",engine="0",source="local_compute"} 1.7646e+09
# HELP vllm:external_prefix_cache_queries_total External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.
# TYPE vllm:external_prefix_cache_queries_total counter
vllm:external_prefix_cache_queries_total{model_name="Qwen/Qwen3-8B",engine="0"} 1000.0
vllm:external_prefix_cache_queries_total{model_name="Qwen/Qwen3-8B",engine="1"} 600.0
# HELP vllm:external_prefix_cache_hits_total External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.
# TYPE vllm:external_prefix_cache_hits_total counter
vllm:external_prefix_cache_hits_total{model_name="Qwen/Qwen3-8B",engine="0"} 300.0
vllm:external_prefix_cache_hits_total{model_name="Qwen/Qwen3-8B",engine="1"} 0.0
# HELP vllm:kv_block_reuse_gap_seconds Histogram of time gaps between consecutive KV cache block accesses. Only the most recent accesses are recorded (ring buffer). Sampled metrics (controlled by --kv-cache-metrics-sample).
# TYPE vllm:kv_block_reuse_gap_seconds histogram
vllm:kv_block_reuse_gap_seconds_bucket{engine="0",le="0.1",model_name="Qwen/Qwen3-8B"} 2.0
vllm:kv_block_reuse_gap_seconds_bucket{engine="0",le="1.0",model_name="Qwen/Qwen3-8B"} 5.0
vllm:kv_block_reuse_gap_seconds_bucket{engine="0",le="60.0",model_name="Qwen/Qwen3-8B"} 9.0
vllm:kv_block_reuse_gap_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-8B"} 10.0
vllm:kv_block_reuse_gap_seconds_count{engine="0",model_name="Qwen/Qwen3-8B"} 10.0
vllm:kv_block_reuse_gap_seconds_sum{engine="0",model_name="Qwen/Qwen3-8B"} 130.5
vllm:kv_block_reuse_gap_seconds_bucket{engine="1",le="0.1",model_name="Qwen/Qwen3-8B"} 1.0
vllm:kv_block_reuse_gap_seconds_bucket{engine="1",le="1.0",model_name="Qwen/Qwen3-8B"} 1.0
vllm:kv_block_reuse_gap_seconds_bucket{engine="1",le="60.0",model_name="Qwen/Qwen3-8B"} 3.0
vllm:kv_block_reuse_gap_seconds_bucket{engine="1",le="+Inf",model_name="Qwen/Qwen3-8B"} 3.0
vllm:kv_block_reuse_gap_seconds_count{engine="1",model_name="Qwen/Qwen3-8B"} 3.0
vllm:kv_block_reuse_gap_seconds_sum{engine="1",model_name="Qwen/Qwen3-8B"} 40.25
# HELP vllm:kv_block_reuse_gap_seconds_created Histogram of time gaps between consecutive KV cache block accesses.
# TYPE vllm:kv_block_reuse_gap_seconds_created gauge
vllm:kv_block_reuse_gap_seconds_created{engine="0",model_name="Qwen/Qwen3-8B"} 1.7646e+09
# TYPE vllm:kv_block_idle_before_evict_seconds histogram
vllm:kv_block_idle_before_evict_seconds_bucket{engine="0",le="30.0",model_name="Qwen/Qwen3-8B"} 4.0
vllm:kv_block_idle_before_evict_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-8B"} 6.0
vllm:kv_block_idle_before_evict_seconds_count{engine="0",model_name="Qwen/Qwen3-8B"} 6.0
vllm:kv_block_idle_before_evict_seconds_sum{engine="0",model_name="Qwen/Qwen3-8B"} 300.0
)";

TEST(ExpositionParserTest, MapsVllm2026PromptSourcesExternalCacheAndResidency) {
  const EngineSnapshot s = MapEngineSnapshot(ParseExposition(kVllm2026));
  EXPECT_EQ(s.engine, EngineKind::kVllm);
  EXPECT_EQ(s.bad_values, 0u);
  const auto source = [&](PromptSource p) { return s.prompt_tokens_by_source[static_cast<std::size_t>(p)]; };
  EXPECT_EQ(source(PromptSource::kCompute), 2000.0);
  EXPECT_EQ(source(PromptSource::kDeviceHit), 4000.0);
  EXPECT_EQ(source(PromptSource::kExternalHit), 300.0);
  EXPECT_FALSE(source(PromptSource::kHostHit).has_value());
  EXPECT_EQ(s.external_prefix_cache_queries_total, 1600.0);
  EXPECT_EQ(s.external_prefix_cache_hits_total, 300.0);
  const auto& gap = s.residency[static_cast<std::size_t>(ResidencyHistogram::kReuseGap)];
  ASSERT_TRUE(gap.has_value());
  const std::vector<std::pair<double, double>> summed = {
      {0.1, 3}, {1.0, 6}, {60.0, 12}, {std::numeric_limits<double>::infinity(), 13}};
  EXPECT_EQ(gap->buckets, summed);
  EXPECT_EQ(gap->count, 13.0);
  EXPECT_EQ(gap->sum, 170.75);
  const auto& idle = s.residency[static_cast<std::size_t>(ResidencyHistogram::kIdleBeforeEvict)];
  ASSERT_TRUE(idle.has_value());
  EXPECT_EQ(idle->count, 6.0);
  EXPECT_FALSE(s.residency[static_cast<std::size_t>(ResidencyHistogram::kLifetime)].has_value());
}

// SGLang's pool gauges, page geometry and tiered prefill counters
// (python/sglang/srt/observability/metrics_collector.py of 2026), two DP ranks.
constexpr std::string_view kSglang2026 =
    R"(# HELP sglang:kv_used_tokens Number of actively used token slots in the KV cache pool.
# TYPE sglang:kv_used_tokens gauge
sglang:kv_used_tokens{engine_type="unified",model_name="m",dp_rank="0",tp_rank="0",pp_rank="0"} 30000.0
sglang:kv_used_tokens{engine_type="unified",model_name="m",dp_rank="1",tp_rank="0",pp_rank="0"} 20000.0
# HELP sglang:kv_evictable_tokens Number of evictable (radix-cached) token slots in the KV cache pool.
# TYPE sglang:kv_evictable_tokens gauge
sglang:kv_evictable_tokens{engine_type="unified",model_name="m",dp_rank="0",tp_rank="0",pp_rank="0"} 100000.0
sglang:kv_evictable_tokens{engine_type="unified",model_name="m",dp_rank="1",tp_rank="0",pp_rank="0"} 50000.0
# HELP sglang:kv_available_tokens Number of free token slots in the KV cache pool.
# TYPE sglang:kv_available_tokens gauge
sglang:kv_available_tokens{engine_type="unified",model_name="m",dp_rank="0",tp_rank="0",pp_rank="0"} 70000.0
sglang:kv_available_tokens{engine_type="unified",model_name="m",dp_rank="1",tp_rank="0",pp_rank="0"} 130000.0
# HELP sglang:page_size KV cache page size in tokens.
# TYPE sglang:page_size gauge
sglang:page_size{engine_type="unified",model_name="m",dp_rank="0",tp_rank="0",pp_rank="0"} 64.0
sglang:page_size{engine_type="unified",model_name="m",dp_rank="1",tp_rank="0",pp_rank="0"} 64.0
# HELP sglang:num_pages Number of KV cache pages.
# TYPE sglang:num_pages gauge
sglang:num_pages{engine_type="unified",model_name="m",dp_rank="0",tp_rank="0",pp_rank="0"} 3125.0
sglang:num_pages{engine_type="unified",model_name="m",dp_rank="1",tp_rank="0",pp_rank="0"} 3125.0
# HELP sglang:prefill_effective_tokens_total Effective prefill tokens by mode.
# TYPE sglang:prefill_effective_tokens_total counter
sglang:prefill_effective_tokens_total{engine_type="unified",mode="input",model_name="m",dp_rank="0",tp_rank="0",pp_rank="0"} 5000.0
sglang:prefill_effective_tokens_total{engine_type="unified",mode="device_hit",model_name="m",dp_rank="0",tp_rank="0",pp_rank="0"} 12000.0
sglang:prefill_effective_tokens_total{engine_type="unified",mode="host_hit",model_name="m",dp_rank="0",tp_rank="0",pp_rank="0"} 2500.0
sglang:prefill_effective_tokens_total{engine_type="unified",mode="storage_hit",model_name="m",dp_rank="0",tp_rank="0",pp_rank="0"} 500.0
sglang:prefill_effective_tokens_total{engine_type="unified",mode="speculative",model_name="m",dp_rank="0",tp_rank="0",pp_rank="0"} 77.0
)";

TEST(ExpositionParserTest, MapsSglang2026PoolPagesAndTierHits) {
  const EngineSnapshot s = MapEngineSnapshot(ParseExposition(kSglang2026));
  EXPECT_EQ(s.engine, EngineKind::kSglang);
  EXPECT_EQ(s.bad_values, 0u);
  EXPECT_EQ(s.kv_used_tokens, 50000.0);
  EXPECT_EQ(s.kv_evictable_tokens, 150000.0);
  EXPECT_EQ(s.kv_available_tokens, 200000.0);
  EXPECT_EQ(s.page_size, 64.0) << "the same on every rank, not summed";
  EXPECT_EQ(s.num_pages, 6250.0);
  const auto source = [&](PromptSource p) { return s.prompt_tokens_by_source[static_cast<std::size_t>(p)]; };
  EXPECT_EQ(source(PromptSource::kCompute), 5000.0);
  EXPECT_EQ(source(PromptSource::kDeviceHit), 12000.0);
  EXPECT_EQ(source(PromptSource::kHostHit), 2500.0);
  EXPECT_EQ(source(PromptSource::kStorageHit), 500.0);
  EXPECT_FALSE(source(PromptSource::kExternalHit).has_value()) << "an unknown mode is not a source";
}

TEST(ExpositionParserTest, Hostile2026ValuesDropTheirMetricAndAreCounted) {
  const EngineSnapshot s = MapEngineSnapshot(
      ParseExposition("vllm:prompt_tokens_by_source_total{engine=\"0\",source=\"local_compute\"} 10\n"
                      "vllm:prompt_tokens_by_source_total{engine=\"1\",source=\"local_compute\"} NaN\n"
                      "vllm:prompt_tokens_by_source_total{engine=\"0\",source=\"local_cache_hit\"} 30\n"
                      "vllm:external_prefix_cache_hits_total{engine=\"0\"} -4\n"
                      "vllm:kv_block_reuse_gap_seconds_bucket{engine=\"0\",le=\"1.0\"} 5\n"
                      "vllm:kv_block_reuse_gap_seconds_bucket{engine=\"0\",le=\"+Inf\"} +Inf\n"
                      "vllm:kv_block_reuse_gap_seconds_count{engine=\"0\"} 5\n"
                      "vllm:kv_block_lifetime_seconds_bucket{engine=\"0\",le=\"1.0\"} 5\n"
                      "vllm:kv_block_lifetime_seconds_bucket{engine=\"0\",le=\"+Inf\"} 3\n"
                      "vllm:kv_block_lifetime_seconds_count{engine=\"0\"} 3\n"
                      "vllm:kv_block_idle_before_evict_seconds_bucket{engine=\"0\",le=\"1.0\"} 2\n"
                      "vllm:kv_block_idle_before_evict_seconds_count{engine=\"0\"} 2\n"
                      "sglang:kv_used_tokens{dp_rank=\"0\"} -1\n"
                      "sglang:page_size{dp_rank=\"0\"} +Inf\n"));
  const auto source = [&](PromptSource p) { return s.prompt_tokens_by_source[static_cast<std::size_t>(p)]; };
  EXPECT_FALSE(source(PromptSource::kCompute).has_value()) << "not 10 of the two engines' sum";
  EXPECT_EQ(source(PromptSource::kDeviceHit), 30.0);
  EXPECT_FALSE(s.external_prefix_cache_hits_total.has_value());
  EXPECT_FALSE(s.residency[static_cast<std::size_t>(ResidencyHistogram::kReuseGap)].has_value());
  EXPECT_FALSE(s.residency[static_cast<std::size_t>(ResidencyHistogram::kLifetime)].has_value())
      << "buckets that are not cumulative";
  EXPECT_FALSE(s.residency[static_cast<std::size_t>(ResidencyHistogram::kIdleBeforeEvict)].has_value())
      << "no +Inf bucket";
  EXPECT_FALSE(s.kv_used_tokens.has_value());
  EXPECT_FALSE(s.page_size.has_value());
  // NaN, -4, +Inf, the non-cumulative lifetime, -1, +Inf.
  EXPECT_EQ(s.bad_values, 6u);
  EXPECT_EQ(s.first_bad_value, "vllm:prompt_tokens_by_source_total is NaN");
}

}  // namespace
}  // namespace kvwatch::collectors
