#include "agent/runtime/collector_registry.h"

#include <chrono>
#include <filesystem>
#include <string>
#include <utility>

#include "collectors/engine_log_collector.h"
#include "collectors/engine_metrics_collector.h"
#include "collectors/kv_events_collector.h"
#include "collectors/synth_collector.h"
#include "collectors/trace_file_collector.h"

namespace kvwatch::agent {
namespace {

using Made = base::Result<std::unique_ptr<collectors::Collector>>;

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

// A created collector of a concrete type as a Collector.
template <class T>
Made Upcast(base::Result<std::unique_ptr<T>> created) {
  if (!created.ok()) return Made::Error(created.error());
  return std::unique_ptr<collectors::Collector>(std::move(created).value());
}

Made MakeTraceFile(const config::AgentConfig& c, std::size_t index, const collectors::CollectorLog& log) {
  const config::TraceFileSettings& t = c.collectors.trace_files[index];
  collectors::TraceFileCollectorOptions o;
  o.name = t.name;
  o.tailer.patterns = t.paths;
  o.tailer.start_position = t.start_at == config::StartAt::kEnd ? collectors::TailStartPosition::kEnd
                                                                : collectors::TailStartPosition::kBeginning;
  o.tailer.max_line_bytes = t.max_line_bytes;
  o.tailer.checkpoint_path = t.checkpoint;
  if (o.tailer.checkpoint_path.empty() && !c.state.path.empty()) {
    o.tailer.checkpoint_path = (std::filesystem::path(c.state.path) / ("tail-" + t.name + ".ckpt")).string();
  }
  o.record.timestamp_unit = t.timestamp_unit;
  o.record.tenant_fields = t.tenant_fields;
  o.poll_interval = Millis(t.poll_interval_seconds);
  return Upcast(collectors::TraceFileCollector::Create(std::move(o), log));
}

Made MakeKvEvents(const config::AgentConfig& c, std::size_t index, const collectors::CollectorLog& log) {
  const config::KvEventsSettings& k = c.collectors.kv_events[index];
  collectors::KvEventsCollectorOptions o;
  o.name = k.name;
  o.endpoints = k.endpoints;
  o.topic = k.topic;
  o.replay_endpoint = k.replay_endpoint;
  o.bind = k.bind;
  // Page ids are scoped by the model (curve-semantics.md section 1); the parent
  // map is bounded at 4x the tracked pages (see collectors/kv_event_tracker.h).
  o.tracker.scope = c.model.empty() ? c.model_label : c.model;
  o.tracker.parent_map_max_entries = std::size_t{4} * c.engine.max_pages;
  return Upcast(collectors::KvEventsCollector::Create(std::move(o), log));
}

Made MakeEngineLog(const config::AgentConfig& c, std::size_t index, const collectors::CollectorLog& log) {
  const config::EngineLogSettings& e = c.collectors.engine_log[index];
  collectors::EngineLogCollectorOptions o;
  o.name = e.name;
  o.tailer.patterns = e.paths;
  o.engine = e.engine;
  return Upcast(collectors::EngineLogCollector::Create(std::move(o), log));
}

Made MakeEngineMetrics(const config::AgentConfig& c, std::size_t index, const collectors::CollectorLog& log) {
  const config::EngineMetricsSettings& e = c.collectors.engine_metrics[index];
  collectors::EngineMetricsCollectorOptions o;
  o.name = e.name;
  o.url = e.url;
  o.interval = Millis(e.interval_seconds);
  o.timeout = Millis(e.timeout_seconds);
  o.page_tokens = static_cast<std::uint32_t>(c.page_tokens);
  return Upcast(collectors::EngineMetricsCollector::Create(std::move(o), log));
}

// The synthetic replica: `kvwatch synth`'s workload, unbounded, played in real time.
Made MakeSynth(const config::AgentConfig& c, std::size_t, const collectors::CollectorLog&) {
  const config::SynthSettings s = c.collectors.synth.value_or(config::SynthSettings{});
  collectors::SynthOptions o;
  o.page_tokens = c.page_tokens;
  o.seed = s.seed;
  o.rate_per_s = s.rate_per_s;
  o.duration_s = 0;
  o.max_requests = 0;
  o.tenants = s.tenants;
  o.active_sessions = s.sessions;
  o.one_shot_fraction = s.one_shot_fraction;
  if (s.shift_start_seconds && s.shift_end_seconds) {
    o.shift.start_s = *s.shift_start_seconds;
    o.shift.end_s = *s.shift_end_seconds;
  }
  return Upcast(collectors::SynthCollector::Create("synth", o, collectors::WallNow()));
}

constexpr CollectorKind kCollectorKinds[] = {
    {"collectors.trace_files", true, [](const config::AgentConfig& c) { return c.collectors.trace_files.size(); },
     MakeTraceFile},
    {"collectors.kv_events", true, [](const config::AgentConfig& c) { return c.collectors.kv_events.size(); },
     MakeKvEvents},
    {"collectors.engine_log", true, [](const config::AgentConfig& c) { return c.collectors.engine_log.size(); },
     MakeEngineLog},
    {"collectors.engine_metrics", true,
     [](const config::AgentConfig& c) { return c.collectors.engine_metrics.size(); }, MakeEngineMetrics},
    {"collectors.synth", false,
     [](const config::AgentConfig& c) -> std::size_t {
       return c.collectors.synth || !c.collectors.HasAnyCollector() ? 1 : 0;
     },
     MakeSynth},
};

}  // namespace

std::span<const CollectorKind> CollectorKinds() { return kCollectorKinds; }

base::Result<std::vector<std::unique_ptr<collectors::Collector>>> BuildCollectors(
    const config::AgentConfig& config, const collectors::CollectorLog& log) {
  using R = base::Result<std::vector<std::unique_ptr<collectors::Collector>>>;
  std::vector<std::unique_ptr<collectors::Collector>> out;
  for (const CollectorKind& kind : kCollectorKinds) {
    const std::size_t count = kind.count(config);
    for (std::size_t i = 0; i < count; ++i) {
      Made collector = kind.make(config, i, log);
      if (!collector.ok()) {
        const std::string where =
            std::string(kind.key) + (kind.is_list ? "[" + std::to_string(i) + "]" : std::string());
        return R::Error(where + ": " + collector.error());
      }
      out.push_back(std::move(collector).value());
    }
  }
  return out;
}

}  // namespace kvwatch::agent
