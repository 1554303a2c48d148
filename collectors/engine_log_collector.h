// EngineLogCollector: tails an inference engine's log files (vLLM, SGLang, and
// the uvicorn access log they print) with FileTailer, parses every line with
// ParseEngineLogLine (engine_log_parser.h) and keeps the engine's own signals:
// preemptions, SGLang retractions, HTTP rejections, and the latest KV-cache
// usage, prefix-cache hit rate and running/waiting requests. It produces no page
// references: the RequestSink is never called and CollectorStats.records stays 0
// (recognised lines are kvwatch_engine_log_lines_total; last_success_s is the
// wall time of the last one).
//
// Signals (all from the lines as the engine prints them):
//   - preemptions: +1 per vLLM V0 "Sequence group ... is preempted" line, plus
//     the "Preemptions: N" field of vLLM's periodic stats line (the preemptions
//     since the previous stats line) when printed. vLLM V1 may never print that
//     field (engine-formats.md section 4.1, PR #38452): prefer the engine's
//     vllm:num_preemptions_total metric (EngineMetricsCollector) when available;
//   - retractions: the sum of SGLang's "#retracted_reqs: N";
//   - rejections: HTTP access lines with status 429 or 503, by status;
//   - gauges, latest value seen: KV-cache usage (vLLM "GPU KV cache usage", SGLang
//     "token usage" or, on hybrid models, "full token usage"), prefix-cache hit
//     rate (vLLM "Prefix cache hit rate", a sliding window; SGLang's prefill line:
//     "cache hit rate" when printed, else #cached-token / (#new-token +
//     #cached-token) of that batch, the formula of SGLang's own gauge), and
//     running / waiting requests (vLLM "Running"/"Waiting", SGLang
//     "#running-req"/"#queue-req"). A gauge is exported once some line set it.
// Lines that are not engine lines are ignored, never errors. The configured
// `engine` only filters: kVllm ignores SGLang lines and vice versa.
//
// Metrics (AppendSamples; the engine's through engine_signals.h's table), all
// labelled collector=<name>:
//   kvwatch_engine_preemptions_total, kvwatch_engine_retracted_requests_total,
//   kvwatch_engine_rejected_requests_total{reason="http_429"|"http_503"},
//   kvwatch_engine_kv_cache_usage_ratio, kvwatch_engine_prefix_cache_hit_ratio,
//   kvwatch_engine_requests_running, kvwatch_engine_requests_waiting,
//   kvwatch_engine_log_lines_total (recognised lines).
// The counters start at 0 when the agent starts (files are read from their end,
// or from a checkpoint), so they are monotonic over the agent's life.
//
// Errors by reason: "line_too_long", "read_error", "checkpoint_error".
//
// Thread safety: one thread (the agent's loop) calls every method.
#ifndef KVWATCH_COLLECTORS_ENGINE_LOG_COLLECTOR_H_
#define KVWATCH_COLLECTORS_ENGINE_LOG_COLLECTOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/metric_def.h"
#include "base/source_kinds.h"
#include "base/status.h"
#include "collectors/collector.h"
#include "collectors/collector_options.h"  // EngineLogCollectorOptions
#include "collectors/engine_log_parser.h"
#include "collectors/file_tailer.h"

namespace kvwatch::collectors {

using EngineLogKind = base::EngineLogKind;  // base/source_kinds.h, shared with config/

// What the lines said so far.
struct EngineLogSignals {
  std::uint64_t lines = 0;  // recognised engine lines
  std::uint64_t preemptions = 0;
  std::uint64_t retracted_requests = 0;
  std::uint64_t rejected_http_429 = 0;
  std::uint64_t rejected_http_503 = 0;
  std::optional<double> kv_cache_usage;  // fraction
  std::optional<double> prefix_cache_hit_ratio;
  std::optional<double> requests_running;
  std::optional<double> requests_waiting;
};

class EngineLogCollector : public Collector {
 public:
  static base::Result<std::unique_ptr<EngineLogCollector>> Create(EngineLogCollectorOptions options, CollectorLog log);

  const std::string& name() const override { return options_.name; }
  std::string_view kind() const override { return "engine_log"; }
  std::chrono::milliseconds poll_interval() const override { return options_.poll_interval; }
  void Poll(RequestSink& sink, double wall_now_s) override;
  base::Status Checkpoint() override { return tailer_->Checkpoint(); }
  int NotifyFd() const override { return tailer_->NotifyFd(); }
  CollectorStats stats() const override { return stats_; }
  EngineSignals engine_signals() const override;
  void AppendSamples(std::vector<MetricSample>* out) const override;

  const EngineLogSignals& signals() const { return signals_; }

  // Applies one parsed line (Poll calls it for every recognised line); false
  // when the configured engine kind filters the record out.
  bool Apply(const EngineLogRecord& record);

 private:
  EngineLogCollector(EngineLogCollectorOptions options, std::unique_ptr<FileTailer> tailer, CollectorLog log);

  void ApplyVllmStats(const VllmStatsRecord& r);
  void ApplySglangUsage(const SglangTokenUsage& usage);

  EngineLogCollectorOptions options_;
  std::unique_ptr<FileTailer> tailer_;
  RateLimitedLog log_;
  CollectorStats stats_;
  EngineLogSignals signals_;
};

// The log collector's own metric family (the engine signals' are
// engine_signals.h's), for the metrics reference.
base::MetricDefs EngineLogMetricDefs();

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_ENGINE_LOG_COLLECTOR_H_
