#include "collectors/engine_log_collector.h"

#include <string>
#include <type_traits>
#include <utility>

namespace kvwatch::collectors {
namespace {

// The collector's own metric family (the engine's are engine_signals.h's).
constexpr base::MetricDef kLogLines{"kvwatch_engine_log_lines_total", base::MetricType::kCounter,
                                    "Engine log lines recognised (stats, preemption, retraction and access lines).",
                                    "collector"};

bool IsVllm(const EngineLogRecord& r) {
  return std::holds_alternative<VllmStatsRecord>(r) || std::holds_alternative<VllmV0PreemptionRecord>(r);
}

bool IsSglang(const EngineLogRecord& r) {
  return std::holds_alternative<SglangPrefillRecord>(r) || std::holds_alternative<SglangDecodeRecord>(r) ||
         std::holds_alternative<SglangRetractRecord>(r);
}

void SetIf(std::optional<double>* gauge, std::optional<std::int64_t> value) {
  if (value) *gauge = static_cast<double>(*value);
}

}  // namespace

base::Result<std::unique_ptr<EngineLogCollector>> EngineLogCollector::Create(EngineLogCollectorOptions options,
                                                                             CollectorLog log) {
  using R = base::Result<std::unique_ptr<EngineLogCollector>>;
  if (options.name.empty()) return R::Error("engine_log collector: a name is required");
  auto tailer = FileTailer::Create(options.tailer);
  if (!tailer.ok()) return R::Error("engine_log collector '" + options.name + "': " + tailer.error());
  return std::unique_ptr<EngineLogCollector>(
      new EngineLogCollector(std::move(options), std::move(tailer).value(), std::move(log)));
}

EngineLogCollector::EngineLogCollector(EngineLogCollectorOptions options, std::unique_ptr<FileTailer> tailer,
                                       CollectorLog log)
    : options_(std::move(options)), tailer_(std::move(tailer)), log_(options_.name, std::move(log)) {}

void EngineLogCollector::Poll(RequestSink& /*sink*/, double wall_now_s) {
  TailCallbacks callbacks;
  callbacks.on_line = [&](std::string_view, std::string_view, std::uint64_t, std::string_view line) {
    const std::optional<EngineLogRecord> record = ParseEngineLogLine(line);
    if (record && Apply(*record)) stats_.last_success_s = wall_now_s;
  };
  bool read_error = false;
  callbacks.on_event = [&](const TailEvent& e) { read_error = CountTailEvent(e, &stats_, log_) || read_error; };
  tailer_->Poll(callbacks);
  // Up while the files read without errors (no file yet is not an error).
  stats_.up = !read_error;
}

bool EngineLogCollector::Apply(const EngineLogRecord& record) {
  if (options_.engine == EngineLogKind::kVllm && IsSglang(record)) return false;
  if (options_.engine == EngineLogKind::kSglang && IsVllm(record)) return false;
  ++signals_.lines;
  std::visit(
      [&](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, VllmStatsRecord>) {
          ApplyVllmStats(r);
        } else if constexpr (std::is_same_v<T, VllmV0PreemptionRecord>) {
          ++signals_.preemptions;
        } else if constexpr (std::is_same_v<T, SglangPrefillRecord>) {
          ApplySglangUsage(r.usage);
          SetIf(&signals_.requests_running, r.running_req);
          SetIf(&signals_.requests_waiting, r.queue_req);
          if (r.cache_hit_rate) {
            signals_.prefix_cache_hit_ratio = *r.cache_hit_rate;
          } else if (r.new_token && r.cached_token && *r.new_token + *r.cached_token > 0) {
            signals_.prefix_cache_hit_ratio =
                static_cast<double>(*r.cached_token) / static_cast<double>(*r.new_token + *r.cached_token);
          }
        } else if constexpr (std::is_same_v<T, SglangDecodeRecord>) {
          ApplySglangUsage(r.usage);
          SetIf(&signals_.requests_running, r.running_req);
          SetIf(&signals_.requests_waiting, r.queue_req);
        } else if constexpr (std::is_same_v<T, SglangRetractRecord>) {
          if (r.retracted_reqs > 0) signals_.retracted_requests += static_cast<std::uint64_t>(r.retracted_reqs);
        } else if constexpr (std::is_same_v<T, HttpAccessRecord>) {
          if (r.status == 429) ++signals_.rejected_http_429;
          if (r.status == 503) ++signals_.rejected_http_503;
        }
      },
      record);
  return true;
}

void EngineLogCollector::ApplyVllmStats(const VllmStatsRecord& r) {
  if (r.preemptions && *r.preemptions > 0) signals_.preemptions += static_cast<std::uint64_t>(*r.preemptions);
  if (r.gpu_kv_cache_usage) signals_.kv_cache_usage = *r.gpu_kv_cache_usage;
  if (r.prefix_cache_hit_rate) signals_.prefix_cache_hit_ratio = *r.prefix_cache_hit_rate;
  SetIf(&signals_.requests_running, r.running_reqs);
  SetIf(&signals_.requests_waiting, r.waiting_reqs);
}

void EngineLogCollector::ApplySglangUsage(const SglangTokenUsage& usage) {
  if (usage.token_usage) {
    signals_.kv_cache_usage = *usage.token_usage;
  } else if (usage.full_token_usage) {
    signals_.kv_cache_usage = *usage.full_token_usage;
  }
}

EngineSignals EngineLogCollector::engine_signals() const {
  const EngineLogSignals& l = signals_;
  EngineSignals g;
  g.preemptions = static_cast<double>(l.preemptions);
  g.retracted_requests = static_cast<double>(l.retracted_requests);
  g.rejections = {{"http_429", static_cast<double>(l.rejected_http_429)},
                  {"http_503", static_cast<double>(l.rejected_http_503)}};
  g.kv_cache_usage = l.kv_cache_usage;
  g.prefix_cache_hit_ratio = l.prefix_cache_hit_ratio;
  g.requests_running = l.requests_running;
  g.requests_waiting = l.requests_waiting;
  return g;
}

void EngineLogCollector::AppendSamples(std::vector<MetricSample>* out) const {
  const EngineSignals g = engine_signals();
  AppendEngineCounterSamples(g, options_.name, out);
  out->push_back(MakeSample(kLogLines, options_.name, static_cast<double>(signals_.lines)));
  AppendEngineGaugeSamples(g, options_.name, out);
}

base::MetricDefs EngineLogMetricDefs() { return {&kLogLines}; }

}  // namespace kvwatch::collectors
