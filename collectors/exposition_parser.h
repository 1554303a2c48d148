// Prometheus text exposition (format 0.0.4) parsing, and the mapping of vLLM's
// and SGLang's metrics to one EngineSnapshot. Pure functions over a scraped
// body: no HTTP here. Metric names follow vLLM V1's vllm/v1/metrics/loggers.py
// (the names of docs.vllm.ai v0.32.0 usage/metrics; counters gain _total on the
// wire, as prometheus_client writes them) and SGLang's
// python/sglang/srt/metrics/collector.py.
//
// ParseExposition reads every line: "# HELP name text" and "# TYPE name type"
// lines become MetricFamilyInfo, other "#" lines are comments, blank lines are
// skipped, and sample lines `name{label="value",...} value [timestamp_ms]` become
// Samples. Label values may use the escapes \\, \" and \n (HELP text: \\ and \n);
// values may be NaN, +Inf, -Inf or any float; leading and trailing blanks and a
// trailing "\r" are ignored. A malformed line is reported in `errors` with its
// 1-based line number, column and reason, and parsing goes on with the next.
//
// Counters appear with their `_total` suffix on the wire (prometheus_client adds
// it: vllm:num_preemptions -> vllm:num_preemptions_total); the mapper accepts the
// suffixed name and, when that is absent, the bare one.
//
// Thread safety: stateless functions over immutable inputs; safe concurrently.
#ifndef KVWATCH_COLLECTORS_EXPOSITION_PARSER_H_
#define KVWATCH_COLLECTORS_EXPOSITION_PARSER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collectors/collector_options.h"  // EngineSnapshotOptions

namespace kvwatch::collectors {

enum class MetricType { kUntyped, kCounter, kGauge, kHistogram, kSummary };

// "untyped", "counter", "gauge", "histogram", "summary".
std::string_view MetricTypeName(MetricType type);

// Label pairs sorted by name (names are unique within a sample).
using Labels = std::vector<std::pair<std::string, std::string>>;

struct Sample {
  std::string name;
  Labels labels;
  double value = 0.0;
  std::optional<std::int64_t> timestamp_ms;
  std::size_t line = 0;  // 1-based line of the body it came from

  // The value of label `name`, or nullopt when the sample has no such label.
  std::optional<std::string_view> Label(std::string_view name) const;
};

// What the # TYPE and # HELP lines say about one metric family.
struct MetricFamilyInfo {
  std::string name;
  MetricType type = MetricType::kUntyped;  // kUntyped also when there is no TYPE line
  bool has_type = false;
  std::optional<std::string> help;  // unescaped
};

struct ExpositionLineError {
  std::size_t line = 0;    // 1-based
  std::size_t column = 0;  // 1-based column where the problem was found
  std::string reason;      // what was expected
};

struct Exposition {
  std::vector<Sample> samples;             // in body order
  std::vector<MetricFamilyInfo> families;  // in order of first HELP/TYPE line
  std::vector<ExpositionLineError> errors;

  const MetricFamilyInfo* FindFamily(std::string_view name) const;
  // The family of a sample name: the name itself, or the name without one of
  // the suffixes _total, _created, _bucket, _count, _sum, _info. nullptr when
  // no HELP/TYPE line names it.
  const MetricFamilyInfo* FamilyOf(std::string_view sample_name) const;
};

Exposition ParseExposition(std::string_view text);

// ---- Engine metric mapping ---------------------------------------------------------

enum class EngineKind { kUnknown, kVllm, kSglang };

// Where the engine's prompt tokens came from, one engine-neutral name each:
//   compute      vLLM vllm:prompt_tokens_by_source{source="local_compute"},
//                SGLang sglang:prefill_effective_tokens_total{mode="input"}
//   device_hit   vLLM source="local_cache_hit" (its GPU prefix cache), SGLang mode="device_hit"
//   host_hit     SGLang mode="host_hit" (HiCache host memory)
//   storage_hit  SGLang mode="storage_hit" (HiCache storage)
//   external_hit vLLM source="external_kv_transfer" (a KV connector: offloading, LMCache, NIXL)
enum class PromptSource { kCompute, kDeviceHit, kHostHit, kStorageHit, kExternalHit };
inline constexpr std::size_t kPromptSources = 5;
// "compute", "device_hit", "host_hit", "storage_hit", "external_hit".
std::string_view PromptSourceName(PromptSource source);

// One of the engine's histograms, summed over engines: cumulative counts per
// upper bound (ascending, the +Inf bucket last), its _count and _sum.
struct EngineHistogram {
  std::vector<std::pair<double, double>> buckets;  // (le, cumulative count)
  double count = 0;
  double sum = 0;
};

// vLLM's sampled KV-block residency histograms (vllm/v1/metrics/loggers.py, with
// --kv-cache-metrics; observed per sampled block when it is evicted).
enum class ResidencyHistogram { kLifetime, kIdleBeforeEvict, kReuseGap };
inline constexpr std::size_t kResidencyHistograms = 3;

// The engine numbers kvwatch uses, each nullopt when the scrape had no sample
// for it. Counters are summed over label sets (engines, DP ranks, reasons);
// gauges of counts are summed; kv_cache_usage is the maximum over engines.
// A sample of a used metric that is negative, infinite or NaN is not plausible
// (every one is a count, a sum of seconds or a fraction): its field is left
// unset for this scrape (a sum over the other label sets would read as a
// counter reset) and it is counted in bad_values.
struct EngineSnapshot {
  EngineKind engine = EngineKind::kUnknown;  // from the name prefixes seen
  std::vector<std::string> model_names;      // distinct model_name labels, sorted

  // vllm:num_preemptions_total.
  std::optional<double> preemptions_total;
  // sglang:num_retracted_requests_total (SGLang's preemption analogue).
  std::optional<double> retracted_requests_total;
  // vllm:prefix_cache_queries_total / hits_total, in tokens (the pre-0.9
  // vllm:gpu_prefix_cache_* names, which vLLM no longer registers, are not read).
  std::optional<double> prefix_cache_queries_tokens_total;
  std::optional<double> prefix_cache_hits_tokens_total;
  // vllm:prompt_tokens_total or sglang:prompt_tokens_total.
  std::optional<double> prompt_tokens_total;
  // sglang:cached_tokens_total (hit ratio = cached / prompt).
  std::optional<double> cached_tokens_total;
  // vllm:request_success_total over every finished_reason, or sglang:num_requests_total.
  std::optional<double> requests_finished_total;
  // vllm:request_success_total{finished_reason="abort"} or sglang:num_aborted_requests_total.
  std::optional<double> aborted_requests_total;
  // vllm:admission_rejections_total (newer vLLM; rejected requests get HTTP 503).
  std::optional<double> admission_rejections_total;
  // sglang:evicted_tokens_total (HiCache GPU -> CPU).
  std::optional<double> evicted_tokens_total;

  // vllm:kv_cache_usage_perc (not the pre-0.9 vllm:gpu_cache_usage_perc), or
  // sglang:token_usage: a fraction, maximum over engines. Not a working-set size.
  std::optional<double> kv_cache_usage;
  // vllm:num_requests_running / waiting, or sglang:num_running_reqs / num_queue_reqs.
  std::optional<double> requests_running;
  std::optional<double> requests_waiting;
  // sglang:max_total_num_tokens, summed over DP ranks.
  std::optional<double> max_total_num_tokens;
  // vllm:cache_config_info labels num_gpu_blocks (summed over engines) and
  // block_size (the first seen), when that info metric carries them.
  std::optional<double> num_gpu_blocks;
  std::optional<double> block_size;
  // The inter-token latency histogram's _sum (seconds) and _count (tokens), summed
  // over engines: vllm:inter_token_latency_seconds or
  // sglang:inter_token_latency_seconds, else the older
  // vllm:time_per_output_token_seconds or sglang:time_per_output_token_seconds,
  // else vLLM's per-request vllm:request_time_per_output_token_seconds. The mean
  // decode rate per sequence is count / sum.
  std::optional<double> inter_token_latency_sum_s;
  std::optional<double> inter_token_latency_count;
  // Per-request latency histograms' _sum (seconds) and _count (requests), summed
  // over engines, for the mean prefill time: vLLM's prefill phase
  // (vllm:request_prefill_time_seconds, from scheduling to the first token), else
  // the time to first token (vllm: or sglang:time_to_first_token_seconds) minus
  // the queue time (vllm:request_queue_time_seconds, sglang:queue_time_seconds).
  std::optional<double> prefill_time_sum_s;
  std::optional<double> prefill_time_count;
  std::optional<double> time_to_first_token_sum_s;
  std::optional<double> time_to_first_token_count;
  std::optional<double> queue_time_sum_s;
  std::optional<double> queue_time_count;

  // Prompt tokens by source (PromptSource): vllm:prompt_tokens_by_source_total
  // (vLLM's main branch, 2026) or sglang:prefill_effective_tokens_total (SGLang with the
  // tiered prefill counters), each source summed over engines.
  std::array<std::optional<double>, kPromptSources> prompt_tokens_by_source{};
  // vllm:external_prefix_cache_queries_total / _hits_total (a KV connector's
  // prefix cache, in tokens).
  std::optional<double> external_prefix_cache_queries_total;
  std::optional<double> external_prefix_cache_hits_total;
  // SGLang's KV pool in tokens, summed over DP ranks: sglang:kv_used_tokens
  // (held by running requests), sglang:kv_evictable_tokens (cached, free to
  // evict), sglang:kv_available_tokens (free).
  std::optional<double> kv_used_tokens;
  std::optional<double> kv_evictable_tokens;
  std::optional<double> kv_available_tokens;
  // SGLang's page size in tokens (sglang:page_size, the first seen) and pages
  // (sglang:num_pages, summed over DP ranks).
  std::optional<double> page_size;
  std::optional<double> num_pages;
  // vllm:kv_block_lifetime_seconds, vllm:kv_block_idle_before_evict_seconds,
  // vllm:kv_block_reuse_gap_seconds (by ResidencyHistogram); nullopt when the
  // engine does not export it or a bucket is hostile (negative, NaN, not
  // cumulative), counted in bad_values.
  std::array<std::optional<EngineHistogram>, kResidencyHistograms> residency{};

  std::size_t matched_samples = 0;  // samples that fed any field above
  std::size_t bad_values = 0;       // samples of used metrics dropped as implausible
  std::string first_bad_value;      // the first of them, "vllm:num_requests_running is -3.000000"
};

EngineSnapshot MapEngineSnapshot(const Exposition& exposition, const EngineSnapshotOptions& options = {});

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_EXPOSITION_PARSER_H_
