// EngineSignals: what a collector knows of the inference engine it watches
// (block stores and evictions from KV events, preemptions, retractions,
// rejections, KV-cache usage, hit ratio, running and waiting requests,
// capacity, decode rate, prefill time), typed, each unknown until the collector
// learns it. The agent reads them for the alert detectors
// (agent/runtime/alert_runner.h: GPU evictions, rejections, preemptions), the
// curve's prediction at the engine's capacity and the KV load factor;
// /metrics renders them through the one table below, so one metric family has
// one name, help text and label set whichever collector reports it.
//
// Thread safety: plain values, constant tables and stateless functions.
#ifndef KVWATCH_COLLECTORS_ENGINE_SIGNALS_H_
#define KVWATCH_COLLECTORS_ENGINE_SIGNALS_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/metric_def.h"
#include "collectors/metric_sample.h"

namespace kvwatch::collectors {

// Block counters of one storage medium ("GPU", "CPU", ...), from KV events.
struct EngineBlockSignals {
  std::string medium;
  double stored = 0;      // BlockStored (tier moves included, reuse reports not)
  double evicted = 0;     // BlockRemoved
  double resident = 0;    // distinct resident block hashes now
  double reused = 0;      // reuse reports (kv_cache_report_mode full)
  double tier_moved = 0;  // stores that were moves from another tier
};

// Requests the engine refused, by reason: "admission", "abort" (its metrics),
// "http_429", "http_503" (its access log).
struct EngineRejection {
  std::string reason;
  double requests = 0;
};

// Prompt tokens by where they came from (engine /metrics): source is
// exposition_parser.h's PromptSourceName ("compute", "device_hit", "host_hit",
// "storage_hit", "external_hit").
struct EnginePromptTokens {
  std::string source;
  double tokens = 0;
};

// One of the engine's histograms as a running total across engine restarts:
// cumulative counts per upper bound (the last +Inf), count and sum.
struct EngineHistogramSignal {
  std::vector<std::pair<double, double>> buckets;
  double count = 0;
  double sum = 0;
};

// Counters are running totals, monotonic over the agent's life.
// A KV cache group as a KV-event stream announces it (kv_event_tracker.h's
// KvGroupSpec): its group_idx, kind (KvSpecKindName: "full", "sliding_window",
// "chunked_local", "linear", "other", "unannounced") and window in tokens (0:
// none or not published). The agent checks them against the configured model.
struct EngineKvGroup {
  std::int64_t group = 0;
  std::string kind;
  std::int64_t window_tokens = 0;
  bool operator==(const EngineKvGroup&) const = default;
};

struct EngineSignals {
  std::vector<EngineBlockSignals> blocks;  // per medium; empty: no KV events
  std::vector<EngineKvGroup> kv_groups;    // KV events with group fields only
  std::optional<double> preemptions;
  std::optional<double> retracted_requests;  // SGLang's preemption analogue
  std::vector<EngineRejection> rejections;
  std::optional<double> kv_cache_usage;  // fraction, as the engine reports it
  std::optional<double> prefix_cache_hit_ratio;
  std::optional<double> requests_running;
  std::optional<double> requests_waiting;
  std::optional<double> capacity_pages;  // in kvwatch pages
  // Decode rate per sequence, tokens/s: 1 / the mean inter-token latency (engine
  // /metrics). Not an exported family of its own: the agent's KV load factor uses
  // it (kvwatch_kv_load_decode_tokens_per_second).
  std::optional<double> decode_tokens_per_s;
  // Prefill seconds per request, >= 0: the mean of the engine's last scrape
  // interval of vLLM's vllm:request_prefill_time_seconds, else of the time to
  // first token minus the queue time (SGLang, older vLLM); engine /metrics only.
  // Not an exported family of its own: the agent's KV load factor charges the
  // prompt for it (kvwatch_kv_load_prefill_seconds).
  std::optional<double> prefill_seconds;
  // Engine /metrics of 2026 (engine_metrics_collector.h says which names):
  std::vector<EnginePromptTokens> prompt_tokens;          // running totals by source
  std::optional<double> external_prefix_cache_hit_ratio;  // a KV connector's, of the last interval
  std::optional<double> kv_used_tokens;                   // SGLang's pool: held by running requests
  std::optional<double> kv_evictable_tokens;              // cached and free to evict
  std::optional<double> kv_available_tokens;              // free
  std::optional<double> page_tokens;                      // the engine's page (block) size in tokens
  // vLLM's sampled residency histograms, by ResidencyHistogram (lifetime, idle
  // before eviction, reuse gap); nullopt: not exported by the engine.
  std::array<std::optional<EngineHistogramSignal>, 3> residency{};
};

// The engine-signal metric families, in one table.
enum class EngineMetric {
  kStoredBlocks,
  kEvictedBlocks,
  kResidentBlocks,
  kReusedBlocks,
  kTierMovedBlocks,
  kPreemptions,
  kRetractedRequests,
  kRejectedRequests,
  kKvCacheUsage,
  kPrefixCacheHitRatio,
  kRequestsRunning,
  kRequestsWaiting,
  kCapacityPages,
  kPromptTokens,
  kExternalPrefixCacheHitRatio,
  kKvTokens,
  kPageTokens,
  kBlockLifetime,
  kBlockIdleBeforeEvict,
  kBlockReuseGap,
};
extern const base::MetricDef kEngineSignalMetrics[20];
const base::MetricDef& EngineMetricDef(EngineMetric metric);

// Appends the samples of `signals`, labelled collector=<collector>: the counters
// (per medium the block families, then preemptions, retractions, rejections by
// reason, prompt tokens by source) and the gauges (usage, hit ratios, running,
// waiting, capacity, the KV pool by state, page size) and the residency
// histograms. Unknown signals are not exported.
void AppendEngineCounterSamples(const EngineSignals& signals, const std::string& collector,
                                std::vector<MetricSample>* out);
void AppendEngineGaugeSamples(const EngineSignals& signals, const std::string& collector,
                              std::vector<MetricSample>* out);

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_ENGINE_SIGNALS_H_
