#include "collectors/engine_signals.h"

#include <cmath>
#include <cstdint>
#include <iterator>
#include <utility>

#include "collectors/metric_sample.h"

namespace kvwatch::collectors {

const base::MetricDef kEngineSignalMetrics[20] = {
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
     "The engine's prefix-cache hit ratio as it reports it, of the counter increases of the last scrape interval: "
     "prompt tokens hit in its GPU cache over all prompt tokens (vLLM prompt_tokens_by_source local_cache_hit, "
     "SGLang prefill_effective_tokens device_hit), else hits over queries (older vLLM) or cached over prompt "
     "tokens (older SGLang); from logs, its printed rate.",
     "collector"},
    {"kvwatch_engine_requests_running", base::MetricType::kGauge, "Requests the engine is running.", "collector"},
    {"kvwatch_engine_requests_waiting", base::MetricType::kGauge, "Requests waiting in the engine's queue.",
     "collector"},
    {"kvwatch_engine_capacity_pages", base::MetricType::kGauge,
     "The engine's KV-cache capacity in kvwatch pages: vLLM num_gpu_blocks x block_size (cache_config_info), or "
     "SGLang num_pages x page_size (else max_total_num_tokens), over the configured tokens per page.",
     "collector"},
    {"kvwatch_engine_prompt_tokens_total", base::MetricType::kCounter,
     "Prompt tokens by where the engine got them: source compute (computed), device_hit (its GPU prefix cache), "
     "host_hit and storage_hit (SGLang HiCache tiers), external_hit (vLLM KV connector transfers). From "
     "vllm:prompt_tokens_by_source or sglang:prefill_effective_tokens; a running total across engine restarts.",
     "collector,source"},
    {"kvwatch_engine_external_prefix_cache_hit_ratio", base::MetricType::kGauge,
     "Hit ratio of the engine's external prefix cache (a vLLM KV connector: offloading, LMCache): "
     "vllm:external_prefix_cache_hits over queries, of the counter increases of the last scrape interval.",
     "collector"},
    {"kvwatch_engine_kv_tokens", base::MetricType::kGauge,
     "The engine's KV pool in tokens by state: used (held by running requests), evictable (cached, free to "
     "evict), available (free). SGLang kv_used_tokens, kv_evictable_tokens, kv_available_tokens, summed over "
     "DP ranks.",
     "collector,state"},
    {"kvwatch_engine_page_tokens", base::MetricType::kGauge,
     "The engine's KV page (block) size in tokens: vLLM cache_config_info block_size or SGLang page_size. When "
     "it differs from page_tokens, kvwatch's pages are not the engine's blocks (logged).",
     "collector"},
    {"kvwatch_engine_kv_block_lifetime_seconds", base::MetricType::kHistogram,
     "vLLM's sampled KV-block lifetimes, allocation to eviction (vllm:kv_block_lifetime_seconds, with "
     "--kv-cache-metrics), its buckets re-exported as a running total across engine restarts.",
     "collector"},
    {"kvwatch_engine_kv_block_idle_before_evict_seconds", base::MetricType::kHistogram,
     "vLLM's sampled idle time of a KV block before its eviction, last access to eviction "
     "(vllm:kv_block_idle_before_evict_seconds): how long the engine's cache keeps a block nobody uses.",
     "collector"},
    {"kvwatch_engine_kv_block_reuse_gap_seconds", base::MetricType::kHistogram,
     "vLLM's sampled gaps between consecutive accesses of a cached KV block, observed at its eviction "
     "(vllm:kv_block_reuse_gap_seconds): the reuse times of the engine's hits, beside kvwatch's reuse distances "
     "in pages (kvwatch_page_hit_capacity_pages).",
     "collector"},
};
static_assert(std::size(kEngineSignalMetrics) == static_cast<std::size_t>(EngineMetric::kBlockReuseGap) + 1);

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
  for (const EngineRejection& r : g.rejections)
    add(EngineMetric::kRejectedRequests, r.requests, {{"reason", r.reason}});
  for (const EnginePromptTokens& p : g.prompt_tokens)
    add(EngineMetric::kPromptTokens, p.tokens, {{"source", p.source}});
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
  add(EngineMetric::kExternalPrefixCacheHitRatio, g.external_prefix_cache_hit_ratio);
  const std::pair<const char*, const std::optional<double>*> pool[] = {
      {"used", &g.kv_used_tokens}, {"evictable", &g.kv_evictable_tokens}, {"available", &g.kv_available_tokens}};
  for (const auto& [state, value] : pool) {
    if (*value) out->push_back(MakeSample(EngineMetricDef(EngineMetric::kKvTokens), c, **value, {{"state", state}}));
  }
  add(EngineMetric::kPageTokens, g.page_tokens);
  const EngineMetric histograms[] = {EngineMetric::kBlockLifetime, EngineMetric::kBlockIdleBeforeEvict,
                                     EngineMetric::kBlockReuseGap};
  for (std::size_t i = 0; i < g.residency.size(); ++i) {
    if (!g.residency[i]) continue;
    const EngineHistogramSignal& h = *g.residency[i];
    std::vector<std::pair<double, std::uint64_t>> buckets;
    for (const auto& [le, n] : h.buckets) {
      if (!std::isinf(le)) buckets.emplace_back(le, static_cast<std::uint64_t>(n));
    }
    out->push_back(MakeHistogramSample(EngineMetricDef(histograms[i]), c, std::move(buckets),
                                       static_cast<std::uint64_t>(h.count), h.sum));
  }
}

}  // namespace kvwatch::collectors
