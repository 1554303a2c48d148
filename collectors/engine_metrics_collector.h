// EngineMetricsCollector: scrapes an inference engine's Prometheus endpoint
// (vLLM or SGLang /metrics) on an interval, parses the body with
// ParseExposition + MapEngineSnapshot (exposition_parser.h) and exports the
// engine's signals beside kvwatch's curves. It produces no page references: the
// RequestSink is never called and CollectorStats.records stays 0.
//
// Names as the engines register them in 2026: vLLM vllm/v1/metrics/loggers.py
// (PrometheusStatLogger of the main branch, 2026; the residency histograms
// only with --kv-cache-metrics), SGLang python/sglang/srt/observability/
// metrics_collector.py (SchedulerMetricsCollector: kv_*_tokens, page_size,
// num_pages, prefill_effective_tokens_total); exposition_parser.h maps them.
//
// Scraping. A worker thread owned by the collector does the HTTP GET
// (httplib::Client, connection and read timeout = options.timeout) and the
// parsing, then updates the collector's state under a mutex; Poll, stats() and
// AppendSamples only read that state, so a slow or hung engine never blocks the
// agent's loop. The first scrape starts at construction; the next one starts
// `interval` after a good scrape, or after interval x 2^failures (at most
// interval x max_backoff_factor) after consecutive failed ones. The destructor
// stops the worker, aborts a request in flight (httplib's Client::stop) and
// joins it.
//
// up: the last scrape returned HTTP 2xx with at least one vLLM or SGLang metric.
// Errors by reason (each also a failed scrape, except bad_line and bad_value): "connect"
// (connection refused or timed out), "read" (the connection failed or timed out
// while sending or reading), "http" (other transport errors), "http_status" (not 2xx), "bad_line" (one per
// malformed exposition line; the rest of the body is still used), "bad_value" (one per sample of a
// metric kvwatch uses that is negative, infinite or NaN: that metric is left out of the scrape, the rest is
// used; not a failed scrape),
// "no_engine_metrics" (a body without any vLLM or SGLang metric). Problems are
// logged through CollectorLog from Poll (on the agent's thread).
//
// Counters. The engine's counters restart at 0 when the engine restarts.
// Exported counters must stay monotonic, so each is a running total: the first
// scrape takes the engine's value as is, later scrapes add the increase since
// the previous scrape, and a decrease is a reset (the new value is the increase
// since the restart). Increases between the last scrape before a restart and
// the restart are lost, as with Prometheus' own rate(). A counter the engine
// does not export is not exported.
//
// Signals (engine_signals(), rendered by AppendSamples through engine_signals.h's
// table) and the scraper's own metrics, all labelled collector=<name>:
//   kvwatch_engine_preemptions_total (vllm:num_preemptions_total),
//   kvwatch_engine_retracted_requests_total (sglang:num_retracted_requests_total),
//   kvwatch_engine_rejected_requests_total{reason="admission"|"abort"}
//     (vllm:admission_rejections_total; vLLM finished_reason="abort" or
//     sglang:num_aborted_requests_total),
//   kvwatch_engine_kv_cache_usage_ratio, kvwatch_engine_requests_running,
//   kvwatch_engine_requests_waiting (the last scrape's gauges),
//   kvwatch_engine_prefix_cache_hit_ratio (the increases between the last two
//     scrapes: where the engine counts prompt tokens by source, the GPU cache's
//     share of them (vLLM prompt_tokens_by_source local_cache_hit, SGLang
//     prefill_effective_tokens device_hit, over every source); else vLLM
//     prefix-cache hits / queries, SGLang cached / prompt tokens, which such an
//     engine's ratio no longer falls back to; kept when an interval had no
//     queries or a source went missing for a scrape),
//   kvwatch_engine_prompt_tokens_total{source} (vllm:prompt_tokens_by_source
//     local_compute, local_cache_hit, external_kv_transfer as compute,
//     device_hit, external_hit; sglang:prefill_effective_tokens mode input,
//     device_hit, host_hit, storage_hit as compute, device_hit, host_hit,
//     storage_hit: the engine's own tier hits beside kvwatch's tier curve),
//   kvwatch_engine_external_prefix_cache_hit_ratio (vllm:external_prefix_cache_
//     hits / queries, a KV connector's cache, of the last interval),
//   kvwatch_engine_kv_tokens{state="used"|"evictable"|"available"} (SGLang's
//     kv_used_tokens, kv_evictable_tokens, kv_available_tokens),
//   kvwatch_engine_page_tokens (vLLM block_size, SGLang page_size; when it is
//     not options.page_tokens, logged once per value: kvwatch's pages are then
//     not the engine's blocks),
//   kvwatch_engine_kv_block_lifetime_seconds, ..._idle_before_evict_seconds,
//     ..._reuse_gap_seconds (vLLM's sampled residency histograms, with
//     --kv-cache-metrics, re-exported with their buckets as running totals:
//     per bucket as for counters, a count, sum or bucket going back is a
//     restart of the whole histogram, and other bucket bounds than the last
//     restart the totals at the new bounds),
//   kvwatch_engine_capacity_pages (vLLM num_gpu_blocks x block_size, or SGLang
//     num_pages x page_size, else max_total_num_tokens, over options.page_tokens,
//     rounded down; vLLM without block_size: num_gpu_blocks as is),
//   kvwatch_engine_counter_resets_total (scrapes in which some engine counter
//     went back: engine restarts),
//   kvwatch_engine_scrape_backoff_seconds (the delay before the next scrape).
// Not exported here but handed to the agent in engine_signals(), for the KV load
// factor:
//   the decode rate per sequence, 1 / the inter-token latency histogram's mean
//     over the last scrape interval (IntervalMean: the first scrape, its totals;
//     kept when an interval generated no token, when a value is hostile and when
//     the mean is beyond kMaxInterTokenSeconds);
//   the prefill seconds per request, the mean of the same interval (IntervalMean)
//     of vllm:request_prefill_time_seconds where the engine exports it, else the
//     mean time to first token minus the mean queue time (SGLang, older vLLM),
//     at least 0; kept when an interval finished no prefill, when a value is
//     hostile (not finite, negative, beyond 2^53) and when the mean is beyond
//     kMaxPrefillSeconds.
//
// Thread safety: the public methods may be called from any thread; the agent
// calls them from its loop only (after each Poll it publishes a copy of stats(),
// engine_signals() and AppendSamples() for its scrapes).
#ifndef KVWATCH_COLLECTORS_ENGINE_METRICS_COLLECTOR_H_
#define KVWATCH_COLLECTORS_ENGINE_METRICS_COLLECTOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/metric_def.h"
#include "base/status.h"
#include "collectors/collector.h"
#include "collectors/collector_options.h"  // EngineMetricsCollectorOptions
#include "collectors/exposition_parser.h"

namespace kvwatch::collectors {

// A counter that stays monotonic across resets of the counter it follows.
class RunningTotal {
 public:
  // The followed counter's current value. Returns the increase added.
  double Observe(double value);
  bool seen() const { return last_.has_value(); }
  double total() const { return total_; }
  // Observations below the previous one.
  std::uint64_t resets() const { return resets_; }

 private:
  std::optional<double> last_;
  double total_ = 0;
  std::uint64_t resets_ = 0;
};

// A histogram's mean over the last scrape interval: the increase of its _sum
// over the increase of its _count (the first observation: its totals; when
// either went back, the engine restarted: both values as they are, the
// observations since the restart). A value that is not finite, negative or
// beyond 2^53 is hostile: the pair is not observed, so the next good scrape's
// interval starts at the last good one.
class IntervalMean {
 public:
  // nullopt when a value is absent or hostile, or the interval added no observation.
  std::optional<double> Observe(std::optional<double> sum, std::optional<double> count);

 private:
  RunningTotal sum_, count_;
};

// A mean prefill above this many seconds is not a prefill (a corrupted or
// hostile histogram): ignored.
inline constexpr double kMaxPrefillSeconds = 3600;
// Likewise a mean inter-token latency above this (a decode rate below one token a
// minute per sequence).
inline constexpr double kMaxInterTokenSeconds = 60;

// The scheme://host:port and path of a scrape URL; an error when the URL is
// not http(s)://host[:port][/path].
struct ScrapeTarget {
  std::string origin;  // "http://127.0.0.1:8000"
  std::string path;    // "/metrics"
};
base::Result<ScrapeTarget> ParseScrapeUrl(const std::string& url);

class EngineMetricsCollector : public Collector {
 public:
  static base::Result<std::unique_ptr<EngineMetricsCollector>> Create(EngineMetricsCollectorOptions options,
                                                                      CollectorLog log);
  // The checks of Create() on the options alone, creating nothing (no client, no
  // thread): what `kvwatch check-config` runs.
  static base::Status ValidateOptions(const EngineMetricsCollectorOptions& options);
  ~EngineMetricsCollector() override;
  EngineMetricsCollector(const EngineMetricsCollector&) = delete;
  EngineMetricsCollector& operator=(const EngineMetricsCollector&) = delete;

  const std::string& name() const override { return options_.name; }
  std::string_view kind() const override { return "engine_metrics"; }
  std::chrono::milliseconds poll_interval() const override { return options_.poll_interval; }
  // Never blocks on the engine: logs what the worker found since the last call.
  void Poll(RequestSink& sink, double wall_now_s) override;
  CollectorStats stats() const override;
  EngineSignals engine_signals() const override;
  void AppendSamples(std::vector<MetricSample>* out) const override;

  // Scrapes finished (good or failed) so far.
  std::uint64_t scrapes() const;
  // The worker's delay before its next scrape (interval, or the backoff).
  std::chrono::milliseconds next_delay() const;

 private:
  struct State;
  struct Worker;
  EngineMetricsCollector(EngineMetricsCollectorOptions options, ScrapeTarget target, CollectorLog log);

  EngineMetricsCollectorOptions options_;
  CollectorLog log_;
  std::unique_ptr<State> state_;    // shared with the worker, behind its mutex
  std::unique_ptr<Worker> worker_;  // the thread and its HTTP client
};

// The scraper's own metric families (the engine signals' are engine_signals.h's),
// for the metrics reference.
base::MetricDefs EngineMetricsScrapeMetricDefs();

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_ENGINE_METRICS_COLLECTOR_H_
