// Engine log-line parsing: one text line of a vLLM or SGLang log (or of the
// uvicorn access log they print) to a typed record. Formats follow vLLM V1's
// periodic stats line, LoggingStatLogger.log in vllm/v1/metrics/loggers.py (v0.9-
// v0.10 and newer: the optional fields, e.g. Preemptions from PR #28522; real lines
// from v0.22.0, LMCache issue #3532), and SGLang's scheduler log lines
// (python/sglang/srt/managers/scheduler_metrics_mixin.py, older scheduler.py).
//
// Recognised lines:
//   vLLM periodic stats      "... Engine 000: Avg prompt throughput: 34.9 tokens/s, ...
//                            Running: 0 reqs, ..., GPU KV cache usage: 0.0%, ..."
//                            (also "2 Engines Aggregated: ...")
//   vLLM V0 preemption       "... Sequence group 147 is preempted by PreemptionMode.RECOMPUTE
//                            mode ... total_num_cumulative_preemption=1" (V0 only)
//   SGLang prefill / decode  "[2025-02-14 00:42:22 DP2 TP2] Decode batch. #running-req: 1, ..."
//   SGLang retraction        "KV cache pool is full. Retract requests. #retracted_reqs: 1, ..."
//   HTTP access log          "INFO:     127.0.0.1:53412 - \"POST /v1/completions HTTP/1.1\" 200 OK"
// The stats lines drift between versions, so their bodies are read as
// "key: value" lists split on ", ": unknown keys are ignored, missing ones stay
// nullopt, and a key may appear anywhere. Percentages ("93.9%") are returned as
// fractions (0.939), like the engines' Prometheus gauges. An absurd value is
// unknown (nullopt, as if the key were absent), never parsed into a number:
// a negative one, NaN or Inf, a count above 2^40, another number above 2^53, a
// usage or hit rate outside [0, 1].
//
// Contract: pure functions of the line (a trailing "\r" or "\n" is ignored).
// A line that is not one of the above gives std::nullopt, never an error.
// Thread safety: stateless; safe to call concurrently.
#ifndef KVWATCH_COLLECTORS_ENGINE_LOG_PARSER_H_
#define KVWATCH_COLLECTORS_ENGINE_LOG_PARSER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace kvwatch::collectors {

// The wall-clock time printed at the start of a line. vLLM prints no year
// ("06-04 15:12:20"); SGLang prints a full date ("2025-02-14 00:42:22").
// Neither prints a timezone.
struct LogTimestamp {
  std::optional<int> year;
  int month = 0;
  int day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
  bool operator==(const LogTimestamp&) const = default;
};

// What precedes the message: "(APIServer pid=58) INFO 06-04 15:12:20 [file:line] "
// for vLLM, "[2025-02-14 00:42:22 DP2 TP2] " for SGLang. Fields the line does not
// carry stay empty.
struct LogLinePrefix {
  std::optional<LogTimestamp> timestamp;
  std::string process;         // vLLM process tag without parentheses: "APIServer pid=58"
  std::string level;           // "INFO", "DEBUG", "WARNING", ... when printed
  std::optional<int> dp_rank;  // SGLang "DPn"
  std::optional<int> tp_rank;  // SGLang "TPn"
  std::optional<int> ep_rank;  // SGLang "EPn"
  std::optional<int> pp_rank;  // SGLang "PPn"
};

// vLLM's periodic "Engine NNN:" stats line (LoggingStatLogger).
struct VllmStatsRecord {
  LogLinePrefix prefix;
  std::optional<int> engine_index;        // "Engine 000"
  std::optional<int> aggregated_engines;  // "2 Engines Aggregated"
  std::optional<double> prompt_throughput_tokens_per_s;
  std::optional<double> generation_throughput_tokens_per_s;
  std::optional<std::int64_t> running_reqs;
  std::optional<std::int64_t> waiting_reqs;
  std::optional<std::int64_t> deferred_reqs;  // newer releases, only when > 0
  std::optional<std::int64_t> preemptions;    // PR #28522, often never printed (#38452)
  std::optional<std::int64_t> corrupted_reqs;
  std::optional<double> gpu_kv_cache_usage;              // fraction
  std::optional<double> prefix_cache_hit_rate;           // fraction, sliding window
  std::optional<double> external_prefix_cache_hit_rate;  // fraction
  std::optional<double> mm_cache_hit_rate;               // fraction
};

// vLLM V0's per-preemption WARNING (removed in V1).
struct VllmV0PreemptionRecord {
  LogLinePrefix prefix;
  std::optional<std::int64_t> sequence_group;
  std::string mode;  // "PreemptionMode.RECOMPUTE" or "PreemptionMode.SWAP"
  std::optional<std::int64_t> cumulative_preemptions;
};

// Token-usage fields shared by SGLang's prefill and decode lines (fractions).
struct SglangTokenUsage {
  std::optional<double> token_usage;
  std::optional<double> full_token_usage;  // hybrid models
  std::optional<double> swa_token_usage;
  std::optional<double> mamba_usage;
};

// SGLang "Prefill batch" line.
struct SglangPrefillRecord {
  LogLinePrefix prefix;
  std::optional<std::int64_t> forward_iter;  // "Prefill batch [N]" (SGLANG_LOG_FORWARD_ITERS)
  std::optional<std::int64_t> new_seq;
  std::optional<std::int64_t> new_token;
  std::optional<std::int64_t> cached_token;
  std::optional<double> cache_hit_rate;  // fraction; 2024 format only
  SglangTokenUsage usage;
  std::optional<std::int64_t> running_req;
  std::optional<std::int64_t> queue_req;
  std::optional<std::int64_t> prealloc_req;  // PD prefill mode
  std::optional<std::int64_t> inflight_req;
  std::optional<double> input_throughput_tokens_per_s;
};

// SGLang "Decode batch" line.
struct SglangDecodeRecord {
  LogLinePrefix prefix;
  std::optional<std::int64_t> forward_iter;
  std::optional<std::int64_t> running_req;
  std::optional<std::int64_t> num_tokens;  // "#token"
  SglangTokenUsage usage;
  std::optional<double> accept_len;  // speculative decoding
  std::optional<double> accept_rate;
  std::optional<double> pre_allocated_usage;  // PD decode mode
  std::optional<std::int64_t> prealloc_req;
  std::optional<std::int64_t> transfer_req;
  std::optional<std::int64_t> retracted_req;
  std::optional<bool> cuda_graph;  // "cuda graph: True"; nullopt for "cpu graph: ..."
  std::optional<double> gen_throughput_tokens_per_s;
  std::optional<std::int64_t> queue_req;
};

// SGLang "KV cache pool is full. Retract requests." (the preemption analogue).
struct SglangRetractRecord {
  LogLinePrefix prefix;
  std::int64_t retracted_reqs = 0;
  std::optional<double> new_token_ratio_before;
  std::optional<double> new_token_ratio_after;
};

// One uvicorn access-log line.
struct HttpAccessRecord {
  LogLinePrefix prefix;
  std::string client;        // "127.0.0.1:53412"
  std::string method;        // "POST"
  std::string path;          // "/v1/completions" (with any query string)
  std::string http_version;  // "1.1"
  int status = 0;
  std::string reason;  // "OK", "Too Many Requests", ...; may be empty
  // 429 (rate limited) and 503 (vLLM admission control) are rejections.
  bool is_rejection() const { return status == 429 || status == 503; }
};

using EngineLogRecord = std::variant<VllmStatsRecord, VllmV0PreemptionRecord, SglangPrefillRecord, SglangDecodeRecord,
                                     SglangRetractRecord, HttpAccessRecord>;

// Tries every parser below in turn.
std::optional<EngineLogRecord> ParseEngineLogLine(std::string_view line);

std::optional<VllmStatsRecord> ParseVllmStatsLine(std::string_view line);
std::optional<VllmV0PreemptionRecord> ParseVllmV0PreemptionLine(std::string_view line);
std::optional<SglangPrefillRecord> ParseSglangPrefillLine(std::string_view line);
std::optional<SglangDecodeRecord> ParseSglangDecodeLine(std::string_view line);
std::optional<SglangRetractRecord> ParseSglangRetractLine(std::string_view line);
std::optional<HttpAccessRecord> ParseHttpAccessLine(std::string_view line);

// The prefix parser used by the functions above, for lines of any kind:
// `head` is the text before the message. Unparsable parts are left empty.
LogLinePrefix ParseLogLinePrefix(std::string_view head);

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_ENGINE_LOG_PARSER_H_
