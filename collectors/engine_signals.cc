#include "collectors/engine_signals.h"

#include <iterator>

#include "collectors/metric_sample.h"

namespace kvwatch::collectors {

const base::MetricDef kEngineSignalMetrics[13] = {
    {"kvwatch_engine_stored_blocks_total", base::MetricType::kCounter,
     "Blocks the engine reported stored (KV events BlockStored, tier moves included, reuse reports not).",
     "collector,medium"},
    {"kvwatch_engine_evicted_blocks_total", base::MetricType::kCounter,
     "Blocks the engine reported evicted (KV events BlockRemoved).", "collector,medium"},
    {"kvwatch_engine_resident_blocks", base::MetricType::kGauge,
     "Distinct block hashes resident per the engine's KV events, summed over publishers and groups.",
     "collector,medium"},
    {"kvwatch_engine_reused_blocks_total", base::MetricType::kCounter,
     "Blocks the engine reported reused from its prefix cache (kv_cache_report_mode full).", "collector,medium"},
    {"kvwatch_engine_tier_moved_blocks_total", base::MetricType::kCounter,
     "Stored blocks that were moves from another tier (offload placeholders, cache-level updates).",
     "collector,medium"},
    {"kvwatch_engine_preemptions_total", base::MetricType::kCounter,
     "Engine preemptions: the engine's vllm:num_preemptions_total when scraped (a running total across engine "
     "restarts), else from its log lines (vLLM V0 preemption warnings and the stats line's Preemptions field, "
     "which vLLM V1 may never print).",
     "collector"},
    {"kvwatch_engine_retracted_requests_total", base::MetricType::kCounter,
     "Requests the engine retracted (SGLang's preemption analogue), from its metric or its log lines.", "collector"},
    {"kvwatch_engine_rejected_requests_total", base::MetricType::kCounter,
     "Requests the engine refused: admission rejections and aborted requests from its metrics (reason admission, "
     "abort), HTTP 429 and 503 responses from its access log (reason http_429, http_503).",
     "collector,reason"},
    {"kvwatch_engine_kv_cache_usage_ratio", base::MetricType::kGauge,
     "The engine's KV-cache usage as it reports it (a fraction; it excludes evictable cached blocks, so it is not "
     "a working-set size).",
     "collector"},
    {"kvwatch_engine_prefix_cache_hit_ratio", base::MetricType::kGauge,
     "The engine's prefix-cache hit ratio as it reports it: from metrics, hits over queries (vLLM) or cached over "
     "prompt tokens (SGLang) of the counter increases of the last scrape interval; from logs, its printed rate.",
     "collector"},
    {"kvwatch_engine_requests_running", base::MetricType::kGauge, "Requests the engine is running.", "collector"},
    {"kvwatch_engine_requests_waiting", base::MetricType::kGauge, "Requests waiting in the engine's queue.", "collector"},
    {"kvwatch_engine_capacity_pages", base::MetricType::kGauge,
     "The engine's KV-cache capacity in kvwatch pages: vLLM num_gpu_blocks x block_size (cache_config_info), or "
     "SGLang max_total_num_tokens, over the configured tokens per page.",
     "collector"},
};
static_assert(std::size(kEngineSignalMetrics) == static_cast<std::size_t>(EngineMetric::kCapacityPages) + 1);

const base::MetricDef& EngineMetricDef(EngineMetric metric) {
  return kEngineSignalMetrics[static_cast<std::size_t>(metric)];
}

void AppendEngineCounterSamples(const EngineSignals& g, const std::string& c, std::vector<MetricSample>* out) {
  auto add = [&](EngineMetric metric, double value, Labels extra = {}) {
    out->push_back(MakeSample(EngineMetricDef(metric), c, value, std::move(extra)));
  };
  for (const EngineBlockSignals& b : g.blocks) {
    const Labels medium = {{"medium", b.medium}};
    add(EngineMetric::kStoredBlocks, b.stored, medium);
    add(EngineMetric::kEvictedBlocks, b.evicted, medium);
    add(EngineMetric::kResidentBlocks, b.resident, medium);
    add(EngineMetric::kReusedBlocks, b.reused, medium);
    add(EngineMetric::kTierMovedBlocks, b.tier_moved, medium);
  }
  if (g.preemptions) add(EngineMetric::kPreemptions, *g.preemptions);
  if (g.retracted_requests) add(EngineMetric::kRetractedRequests, *g.retracted_requests);
  for (const EngineRejection& r : g.rejections) add(EngineMetric::kRejectedRequests, r.requests, {{"reason", r.reason}});
}

void AppendEngineGaugeSamples(const EngineSignals& g, const std::string& c, std::vector<MetricSample>* out) {
  auto add = [&](EngineMetric metric, const std::optional<double>& value) {
    if (value) out->push_back(MakeSample(EngineMetricDef(metric), c, *value));
  };
  add(EngineMetric::kKvCacheUsage, g.kv_cache_usage);
  add(EngineMetric::kPrefixCacheHitRatio, g.prefix_cache_hit_ratio);
  add(EngineMetric::kRequestsRunning, g.requests_running);
  add(EngineMetric::kRequestsWaiting, g.requests_waiting);
  add(EngineMetric::kCapacityPages, g.capacity_pages);
}

}  // namespace kvwatch::collectors
