#include "collectors/engine_log_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace kvwatch::collectors {
namespace {

// ---- vLLM periodic stats: the real lines quoted in engine-formats.md 4.1 ----

// LMCache issue #3532, vLLM v0.22.0.
constexpr std::string_view kVllmV022 =
    "(APIServer pid=58) INFO 06-04 15:12:20 [v1/metrics/loggers.py:259] Engine 000: Avg prompt "
    "throughput: 34.9 tokens/s, Avg generation throughput: 1.2 tokens/s, Running: 0 reqs, Waiting: 0 "
    "reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%, External prefix cache hit rate: 0.0%";
// vLLM PR #21809, mid-2025.
constexpr std::string_view kVllmMid2025 =
    "INFO 07-28 06:42:09 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg "
    "generation throughput: 240.8 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: "
    "93.9%, Prefix cache hit rate: 0.0%";
// vLLM PR #37307 (elided by its author with "...").
constexpr std::string_view kVllmPr37307 =
    "(APIServer pid=11574) INFO 03-17 15:38:10 [loggers.py:259] Engine 000: Avg prompt throughput: "
    "23998.2 tokens/s, ... Running: 10 reqs, Waiting: 90 reqs, GPU KV cache usage: 19.3%, Prefix "
    "cache hit rate: 0.0%";

TEST(VllmStatsLineTest, V022LineWithProcessTagAndExternalHitRate) {
  const auto r = ParseVllmStatsLine(kVllmV022);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->engine_index, 0);
  EXPECT_FALSE(r->aggregated_engines.has_value());
  EXPECT_DOUBLE_EQ(*r->prompt_throughput_tokens_per_s, 34.9);
  EXPECT_DOUBLE_EQ(*r->generation_throughput_tokens_per_s, 1.2);
  EXPECT_EQ(r->running_reqs, 0);
  EXPECT_EQ(r->waiting_reqs, 0);
  EXPECT_DOUBLE_EQ(*r->gpu_kv_cache_usage, 0.0);
  EXPECT_DOUBLE_EQ(*r->prefix_cache_hit_rate, 0.0);
  EXPECT_DOUBLE_EQ(*r->external_prefix_cache_hit_rate, 0.0);
  EXPECT_FALSE(r->preemptions.has_value());
  EXPECT_EQ(r->prefix.process, "APIServer pid=58");
  EXPECT_EQ(r->prefix.level, "INFO");
  ASSERT_TRUE(r->prefix.timestamp.has_value());
  EXPECT_EQ(*r->prefix.timestamp, (LogTimestamp{std::nullopt, 6, 4, 15, 12, 20}));
}

TEST(VllmStatsLineTest, Mid2025LineGivesUsageAsFraction) {
  const auto r = ParseVllmStatsLine(kVllmMid2025);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(*r->generation_throughput_tokens_per_s, 240.8);
  EXPECT_EQ(r->running_reqs, 8);
  EXPECT_NEAR(*r->gpu_kv_cache_usage, 0.939, 1e-12);
  EXPECT_FALSE(r->external_prefix_cache_hit_rate.has_value());
  EXPECT_TRUE(r->prefix.process.empty());
  EXPECT_EQ(*r->prefix.timestamp, (LogTimestamp{std::nullopt, 7, 28, 6, 42, 9}));
}

TEST(VllmStatsLineTest, ElidedPr37307LineStillReadsEveryKeyItHas) {
  const auto r = ParseVllmStatsLine(kVllmPr37307);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(*r->prompt_throughput_tokens_per_s, 23998.2);
  EXPECT_FALSE(r->generation_throughput_tokens_per_s.has_value());
  EXPECT_EQ(r->running_reqs, 10);
  EXPECT_EQ(r->waiting_reqs, 90);
  EXPECT_NEAR(*r->gpu_kv_cache_usage, 0.193, 1e-12);
  EXPECT_EQ(r->prefix.process, "APIServer pid=11574");
}

// Built from the newer log_parts format string in engine-formats.md 4.1
// (Deferred, Preemptions, Corrupted, MM cache hit rate), aggregated form.
TEST(VllmStatsLineTest, NewerOptionalFieldsAndAggregatedEngines) {
  const auto r = ParseVllmStatsLine(
      "(APIServer pid=7) INFO 11-02 09:00:01 [v1/metrics/loggers.py:301] 2 Engines Aggregated: Avg "
      "prompt throughput: 100.0 tokens/s, Avg generation throughput: 50.5 tokens/s, Running: 3 reqs, "
      "Waiting: 4 reqs, Deferred: 2 reqs, Preemptions: 5, GPU KV cache usage: 88.0%, Prefix cache hit "
      "rate: 42.5%, Corrupted: 1 reqs, MM cache hit rate: 10.0%\n");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->aggregated_engines, 2);
  EXPECT_FALSE(r->engine_index.has_value());
  EXPECT_EQ(r->deferred_reqs, 2);
  EXPECT_EQ(r->preemptions, 5);
  EXPECT_EQ(r->corrupted_reqs, 1);
  EXPECT_NEAR(*r->prefix_cache_hit_rate, 0.425, 1e-12);
  EXPECT_NEAR(*r->mm_cache_hit_rate, 0.1, 1e-12);
  EXPECT_EQ(r->prefix.timestamp->month, 11);
}

TEST(VllmStatsLineTest, EngineCoreTagIsNotAnAnchor) {
  const auto r = ParseVllmStatsLine(
      "(EngineCore_DP1 pid=90) INFO 01-02 03:04:05 [loggers.py:259] Engine 001: Running: 2 reqs, "
      "Waiting: 0 reqs, GPU KV cache usage: 1.5%");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->engine_index, 1);
  EXPECT_EQ(r->prefix.process, "EngineCore_DP1 pid=90");
}

TEST(VllmStatsLineTest, OtherLinesAreNotStats) {
  EXPECT_FALSE(ParseVllmStatsLine("INFO 06-04 15:12:20 [core.py:100] Engine 000: started").has_value());
  EXPECT_FALSE(ParseVllmStatsLine("INFO 06-04 15:12:20 [api_server.py:1] Starting vLLM API server").has_value());
  EXPECT_FALSE(ParseVllmStatsLine("").has_value());
  EXPECT_FALSE(ParseVllmStatsLine("Engine : Running: 1 reqs").has_value());
}

// Absurd values (negative, NaN, Inf, overflowing, huge, a fraction above 1) are
// unknown, as if the key were absent; the line's sane keys are still read.
// Before, "Running: -5" gave a gauge of -5, "Preemptions: 9000000000000000000"
// a running total of 9e18, "GPU KV cache usage: inf%" an infinite usage.
TEST(VllmStatsLineTest, AbsurdValuesAreUnknown) {
  const auto r = ParseVllmStatsLine(
      "INFO 06-04 15:12:20 [loggers.py:259] Engine 000: Avg prompt throughput: 3.0 tokens/s, Avg generation "
      "throughput: -nan tokens/s, Running: -5 reqs, Waiting: 99999999999999999999 reqs, Preemptions: "
      "9000000000000000000, GPU KV cache usage: inf%, Prefix cache hit rate: 250.0%, "
      "MM cache hit rate: 1e400%, External prefix cache hit rate: 42.0%");
  ASSERT_TRUE(r.has_value()) << "the keys are recognised";
  EXPECT_EQ(r->prompt_throughput_tokens_per_s, 3.0);
  EXPECT_FALSE(r->generation_throughput_tokens_per_s.has_value());
  EXPECT_FALSE(r->running_reqs.has_value());
  EXPECT_FALSE(r->waiting_reqs.has_value());
  EXPECT_FALSE(r->preemptions.has_value());
  EXPECT_FALSE(r->gpu_kv_cache_usage.has_value());
  EXPECT_FALSE(r->prefix_cache_hit_rate.has_value());
  EXPECT_FALSE(r->mm_cache_hit_rate.has_value());
  ASSERT_TRUE(r->external_prefix_cache_hit_rate.has_value());
  EXPECT_NEAR(*r->external_prefix_cache_hit_rate, 0.42, 1e-12);

  const auto s = ParseSglangPrefillLine(
      "[2024-12-20 12:42:16 TP0] Prefill batch. #new-seq: 2, #new-token: 9223372036854775807, #cached-token: "
      "9223372036854775807, cache hit rate: -1.0%, token usage: 1e308, #running-req: -1, #queue-req: 4");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->new_seq, 2);
  EXPECT_FALSE(s->new_token.has_value()) << "a sum of two would overflow";
  EXPECT_FALSE(s->cached_token.has_value());
  EXPECT_FALSE(s->cache_hit_rate.has_value());
  EXPECT_FALSE(s->usage.token_usage.has_value());
  EXPECT_FALSE(s->running_req.has_value());
  EXPECT_EQ(s->queue_req, 4);
  EXPECT_FALSE(ParseSglangRetractLine("KV cache pool is full. Retract requests. #retracted_reqs: 5000000000000000, "
                                      "#new_token_ratio: 0.7->1.0")
                   .has_value());
  EXPECT_FALSE(ParseSglangRetractLine("KV cache pool is full. Retract requests. #retracted_reqs: -2").has_value());
  const auto d = ParseSglangDecodeLine(
      "[2025-02-14 00:42:22 TP0] Decode batch. #running-req: 1, #token: -210, token usage: -0.5, "
      "gen throughput (token/s): inf, #queue-req: 0");
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->num_tokens.has_value());
  EXPECT_FALSE(d->usage.token_usage.has_value());
  EXPECT_FALSE(d->gen_throughput_tokens_per_s.has_value());
}

TEST(VllmV0PreemptionLineTest, RealV0Warning) {
  const auto r = ParseVllmV0PreemptionLine(
      "WARNING 08-20 10:18:39 scheduler.py:1141] Sequence group 147 is preempted by "
      "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the "
      "end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide "
      "more KV cache memory. total_num_cumulative_preemption=1");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->sequence_group, 147);
  EXPECT_EQ(r->mode, "PreemptionMode.RECOMPUTE");
  EXPECT_EQ(r->cumulative_preemptions, 1);
  EXPECT_EQ(r->prefix.level, "WARNING");
  EXPECT_EQ(*r->prefix.timestamp, (LogTimestamp{std::nullopt, 8, 20, 10, 18, 39}));
}

// ---- SGLang: the real lines quoted in engine-formats.md 5.3 ----

TEST(SglangLineTest, Prefill2024LineWithCacheHitRate) {
  const auto r = ParseSglangPrefillLine(
      "[2024-12-20 12:42:16 TP0] Prefill batch. #new-seq: 2, #new-token: 2046, #cached-token: 4, "
      "cache hit rate: 0.06%, token usage: 0.00, #running-req: 0, #queue-req: 0");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->new_seq, 2);
  EXPECT_EQ(r->new_token, 2046);
  EXPECT_EQ(r->cached_token, 4);
  EXPECT_NEAR(*r->cache_hit_rate, 0.0006, 1e-12);
  EXPECT_DOUBLE_EQ(*r->usage.token_usage, 0.0);
  EXPECT_EQ(r->running_req, 0);
  EXPECT_EQ(r->queue_req, 0);
  EXPECT_FALSE(r->forward_iter.has_value());
  EXPECT_EQ(r->prefix.tp_rank, 0);
  EXPECT_FALSE(r->prefix.dp_rank.has_value());
  EXPECT_EQ(*r->prefix.timestamp, (LogTimestamp{2024, 12, 20, 12, 42, 16}));
}

TEST(SglangLineTest, Decode2025LineWithDpAndTpRanks) {
  const auto r = ParseSglangDecodeLine(
      "[2025-02-14 00:42:22 DP2 TP2] Decode batch. #running-req: 1, #token: 210, token usage: 0.00, "
      "gen throughput (token/s): 11.45, #queue-req: 0");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->running_req, 1);
  EXPECT_EQ(r->num_tokens, 210);
  EXPECT_DOUBLE_EQ(*r->usage.token_usage, 0.0);
  EXPECT_DOUBLE_EQ(*r->gen_throughput_tokens_per_s, 11.45);
  EXPECT_EQ(r->queue_req, 0);
  EXPECT_FALSE(r->cuda_graph.has_value());
  EXPECT_EQ(r->prefix.dp_rank, 2);
  EXPECT_EQ(r->prefix.tp_rank, 2);
  EXPECT_EQ(*r->prefix.timestamp, (LogTimestamp{2025, 2, 14, 0, 42, 22}));
}

TEST(SglangLineTest, DecodeLateN2025LineWithCudaGraph) {
  const auto r = ParseSglangDecodeLine(
      "[2025-11-06 12:11:03] Decode batch. #running-req: 1, #token: 206, token usage: 0.00, cuda "
      "graph: True, gen throughput (token/s): 656.23");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->num_tokens, 206);
  EXPECT_EQ(r->cuda_graph, true);
  EXPECT_DOUBLE_EQ(*r->gen_throughput_tokens_per_s, 656.23);
  EXPECT_FALSE(r->queue_req.has_value());
  EXPECT_FALSE(r->prefix.tp_rank.has_value());
  EXPECT_EQ(r->prefix.timestamp->year, 2025);
}

// Built from the newer f-strings in engine-formats.md 5.3: comma after "batch",
// the optional " [iter]", hybrid usage, PD fields and the trailing ", ".
TEST(SglangLineTest, NewerPrefillFormatWithIterHybridUsageAndPdFields) {
  const auto r = ParseSglangPrefillLine(
      "[2026-09-01 10:00:00 DP0 TP1 EP3] Prefill batch [1234], #new-seq: 1, #new-token: 512, "
      "#cached-token: 256, full token usage: 0.12, swa token usage: 0.05, #running-req: 7, "
      "#queue-req: 3, #prealloc-req: 2, #inflight-req: 1, input throughput (token/s): 8123.40, ");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->forward_iter, 1234);
  EXPECT_EQ(r->cached_token, 256);
  EXPECT_FALSE(r->usage.token_usage.has_value());
  EXPECT_DOUBLE_EQ(*r->usage.full_token_usage, 0.12);
  EXPECT_DOUBLE_EQ(*r->usage.swa_token_usage, 0.05);
  EXPECT_EQ(r->running_req, 7);
  EXPECT_EQ(r->queue_req, 3);
  EXPECT_EQ(r->prealloc_req, 2);
  EXPECT_EQ(r->inflight_req, 1);
  EXPECT_DOUBLE_EQ(*r->input_throughput_tokens_per_s, 8123.40);
  EXPECT_EQ(r->prefix.ep_rank, 3);
}

TEST(SglangLineTest, NewerDecodeFormatWithSpeculativeAndPdFields) {
  const auto r = ParseSglangDecodeLine(
      "[2026-09-01 10:00:01] Decode batch, #running-req: 3, #token: 1200, full token usage: 0.30, mamba "
      "usage: 0.10, accept len: 2.50, accept rate: 0.80, pre-allocated usage: 0.02, #prealloc-req: 1, "
      "#transfer-req: 0, #retracted-req: 2, cuda graph: False, gen throughput (token/s): 300.12, "
      "#queue-req: 5, ");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->num_tokens, 1200);
  EXPECT_DOUBLE_EQ(*r->usage.mamba_usage, 0.10);
  EXPECT_DOUBLE_EQ(*r->accept_len, 2.5);
  EXPECT_DOUBLE_EQ(*r->accept_rate, 0.8);
  EXPECT_DOUBLE_EQ(*r->pre_allocated_usage, 0.02);
  EXPECT_EQ(r->retracted_req, 2);
  EXPECT_EQ(r->cuda_graph, false);
  EXPECT_EQ(r->queue_req, 5);
}

TEST(SglangLineTest, RetractLineFromSglangDocs) {
  const auto r = ParseSglangRetractLine(
      "KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.9998 -> 1.0000");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->retracted_reqs, 1);
  EXPECT_DOUBLE_EQ(*r->new_token_ratio_before, 0.9998);
  EXPECT_DOUBLE_EQ(*r->new_token_ratio_after, 1.0);
  EXPECT_FALSE(r->prefix.timestamp.has_value());
  const auto prefixed = ParseSglangRetractLine(
      "[2025-03-01 08:00:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 12, "
      "#new_token_ratio: 0.7000 -> 0.9500");
  ASSERT_TRUE(prefixed.has_value());
  EXPECT_EQ(prefixed->retracted_reqs, 12);
  EXPECT_EQ(prefixed->prefix.tp_rank, 0);
}

TEST(SglangLineTest, OtherLinesAreNotBatches) {
  EXPECT_FALSE(ParseSglangPrefillLine("[2025-01-01 00:00:00] Prefill batch size too large").has_value());
  EXPECT_FALSE(ParseSglangDecodeLine("Decode batch. nothing here").has_value());
  EXPECT_FALSE(ParseSglangRetractLine("KV cache pool is full. Retract requests.").has_value());
  EXPECT_FALSE(ParseSglangDecodeLine(kVllmV022).has_value());
}

// ---- HTTP access log ----

TEST(HttpAccessLineTest, UvicornLineAsPrinted) {
  const auto r = ParseHttpAccessLine("INFO:     127.0.0.1:53412 - \"POST /v1/completions HTTP/1.1\" 200 OK");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->client, "127.0.0.1:53412");
  EXPECT_EQ(r->method, "POST");
  EXPECT_EQ(r->path, "/v1/completions");
  EXPECT_EQ(r->http_version, "1.1");
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->reason, "OK");
  EXPECT_FALSE(r->is_rejection());
  EXPECT_EQ(r->prefix.level, "INFO");
}

TEST(HttpAccessLineTest, RejectionsAndPrefixes) {
  const auto busy = ParseHttpAccessLine(
      "(APIServer pid=58) INFO:     10.0.0.7:40112 - \"POST /v1/chat/completions HTTP/1.1\" 503 Service "
      "Unavailable\r\n");
  ASSERT_TRUE(busy.has_value());
  EXPECT_EQ(busy->status, 503);
  EXPECT_TRUE(busy->is_rejection());
  EXPECT_EQ(busy->reason, "Service Unavailable");
  EXPECT_EQ(busy->prefix.process, "APIServer pid=58");
  const auto limited = ParseHttpAccessLine(
      "[2025-02-14 00:42:22] INFO:     [::1]:5000 - \"POST /generate?x=1 HTTP/1.1\" 429 Too Many Requests");
  ASSERT_TRUE(limited.has_value());
  EXPECT_TRUE(limited->is_rejection());
  EXPECT_EQ(limited->client, "[::1]:5000");
  EXPECT_EQ(limited->path, "/generate?x=1");
  EXPECT_EQ(limited->prefix.timestamp->year, 2025);
  const auto health = ParseHttpAccessLine("INFO:     127.0.0.1:1 - \"GET /health HTTP/1.1\" 200");
  ASSERT_TRUE(health.has_value());
  EXPECT_EQ(health->reason, "");
}

TEST(HttpAccessLineTest, MalformedAccessLinesAreNotRecords) {
  EXPECT_FALSE(ParseHttpAccessLine("INFO:     127.0.0.1:1 - \"post /x HTTP/1.1\" 200 OK").has_value());
  EXPECT_FALSE(ParseHttpAccessLine("INFO:     127.0.0.1:1 - \"POST /x\" 200 OK").has_value());
  EXPECT_FALSE(ParseHttpAccessLine("INFO:     127.0.0.1:1 - \"POST /x HTTP/1.1\" OK").has_value());
  EXPECT_FALSE(ParseHttpAccessLine("INFO:     127.0.0.1:1 - \"POST /x HTTP/1.1\" 2000 OK").has_value());
  EXPECT_FALSE(ParseHttpAccessLine(" - \"POST /x HTTP/1.1\" 200 OK").has_value());
}

// ---- Dispatch ----

TEST(EngineLogLineTest, DispatchesEachKindAndIgnoresTheRest) {
  EXPECT_TRUE(std::holds_alternative<VllmStatsRecord>(*ParseEngineLogLine(kVllmMid2025)));
  EXPECT_TRUE(std::holds_alternative<SglangDecodeRecord>(*ParseEngineLogLine(
      "[2025-02-14 00:42:22 DP2 TP2] Decode batch. #running-req: 1, #token: 210, token usage: 0.00")));
  EXPECT_TRUE(std::holds_alternative<SglangPrefillRecord>(
      *ParseEngineLogLine("[2024-12-20 12:42:16 TP0] Prefill batch. #new-seq: 2, #new-token: 2046, #cached-token: 4")));
  EXPECT_TRUE(std::holds_alternative<SglangRetractRecord>(*ParseEngineLogLine(
      "KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_token_ratio: 0.5 -> 0.6")));
  EXPECT_TRUE(std::holds_alternative<VllmV0PreemptionRecord>(*ParseEngineLogLine(
      "WARNING 08-20 10:18:39 scheduler.py:1141] Sequence group 9 is preempted by PreemptionMode.SWAP "
      "mode because ... total_num_cumulative_preemption=4")));
  EXPECT_TRUE(std::holds_alternative<HttpAccessRecord>(
      *ParseEngineLogLine("INFO:     127.0.0.1:53412 - \"POST /v1/completions HTTP/1.1\" 200 OK")));
  for (std::string_view other : {
           "",
           "\n",
           "INFO 06-04 15:12:20 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000",
           "[2025-02-14 00:42:22] The server is fired up and ready to roll!",
           "Traceback (most recent call last):",
           "Engine 000:",
           "Prefill batch",
           " - \"",
       }) {
    EXPECT_FALSE(ParseEngineLogLine(other).has_value()) << other;
  }
}

TEST(EngineLogLineTest, EveryPrefixOfRealLinesIsSafe) {
  // Truncated lines (a tail catching a half-written line) never crash and
  // never produce a record that claims fields past the cut.
  for (std::string_view line : {kVllmV022, kVllmMid2025, kVllmPr37307}) {
    for (std::size_t n = 0; n <= line.size(); ++n) {
      const std::string cut(line.substr(0, n));
      (void)ParseEngineLogLine(cut);
    }
  }
  const std::string cut(kVllmMid2025.substr(0, kVllmMid2025.find(", Waiting")));
  const auto r = ParseVllmStatsLine(cut);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->running_reqs, 8);
  EXPECT_FALSE(r->waiting_reqs.has_value());
}

}  // namespace
}  // namespace kvwatch::collectors
