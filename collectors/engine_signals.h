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

#include <cstddef>
#include <optional>
#include <string>
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

// Counters are running totals, monotonic over the agent's life.
struct EngineSignals {
  std::vector<EngineBlockSignals> blocks;  // per medium; empty: no KV events
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
};
extern const base::MetricDef kEngineSignalMetrics[13];
const base::MetricDef& EngineMetricDef(EngineMetric metric);

// Appends the samples of `signals`, labelled collector=<collector>: the counters
// (per medium the block families, then preemptions, retractions, rejections by
// reason) and the gauges (usage, hit ratio, running, waiting, capacity). Unknown
// signals are not exported.
void AppendEngineCounterSamples(const EngineSignals& signals, const std::string& collector,
                                std::vector<MetricSample>* out);
void AppendEngineGaugeSamples(const EngineSignals& signals, const std::string& collector,
                              std::vector<MetricSample>* out);

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_ENGINE_SIGNALS_H_
