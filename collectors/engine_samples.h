// The names and help texts of the engine metrics that several collectors
// export (EngineLogCollector, EngineMetricsCollector), so that one metric family
// has one help text whichever collector reports it, and a helper appending a
// collector-labelled MetricSample.
//
// Thread safety: constants and a stateless function.
#ifndef KVWATCH_COLLECTORS_ENGINE_SAMPLES_H_
#define KVWATCH_COLLECTORS_ENGINE_SAMPLES_H_

#include <string>
#include <utility>
#include <vector>

#include "collectors/collector.h"

namespace kvwatch::collectors {

inline constexpr const char* kEnginePreemptionsName = "kvwatch_engine_preemptions_total";
inline constexpr const char* kEnginePreemptionsHelp =
    "Engine preemptions: the engine's vllm:num_preemptions_total when scraped (a running total across engine "
    "restarts), else from its log lines (vLLM V0 preemption warnings and the stats line's Preemptions field, "
    "which vLLM V1 may never print).";
inline constexpr const char* kEngineRetractedName = "kvwatch_engine_retracted_requests_total";
inline constexpr const char* kEngineRetractedHelp =
    "Requests the engine retracted (SGLang's preemption analogue), from its metric or its log lines.";
inline constexpr const char* kEngineRejectedName = "kvwatch_engine_rejected_requests_total";
inline constexpr const char* kEngineRejectedHelp =
    "Requests the engine refused: admission rejections and aborted requests from its metrics (reason admission, "
    "abort), HTTP 429 and 503 responses from its access log (reason http_429, http_503).";
inline constexpr const char* kEngineKvUsageName = "kvwatch_engine_kv_cache_usage_ratio";
inline constexpr const char* kEngineKvUsageHelp =
    "The engine's KV-cache usage as it reports it (a fraction; it excludes evictable cached blocks, so it is not "
    "a working-set size).";
inline constexpr const char* kEngineHitRatioName = "kvwatch_engine_prefix_cache_hit_ratio";
inline constexpr const char* kEngineHitRatioHelp =
    "The engine's prefix-cache hit ratio as it reports it: from metrics, hits over queries (vLLM) or cached over "
    "prompt tokens (SGLang) of the counter increases of the last scrape interval; from logs, its printed rate.";
inline constexpr const char* kEngineRunningName = "kvwatch_engine_requests_running";
inline constexpr const char* kEngineRunningHelp = "Requests the engine is running.";
inline constexpr const char* kEngineWaitingName = "kvwatch_engine_requests_waiting";
inline constexpr const char* kEngineWaitingHelp = "Requests waiting in the engine's queue.";
inline constexpr const char* kEngineCapacityName = "kvwatch_engine_capacity_pages";
inline constexpr const char* kEngineCapacityHelp =
    "The engine's KV-cache capacity in kvwatch pages: vLLM num_gpu_blocks x block_size (cache_config_info), or "
    "SGLang max_total_num_tokens, over the configured tokens per page.";

// Appends {name, help, counter, labels = collector=<collector> + extra, value}.
inline void AppendEngineSample(std::vector<MetricSample>* out, const std::string& collector, const char* name,
                               const char* help, bool counter, double value,
                               std::vector<std::pair<std::string, std::string>> extra = {}) {
  MetricSample s;
  s.name = name;
  s.help = help;
  s.counter = counter;
  s.labels.emplace_back("collector", collector);
  for (auto& l : extra) s.labels.push_back(std::move(l));
  s.value = value;
  out->push_back(std::move(s));
}

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_ENGINE_SAMPLES_H_
