#include "agent/runtime/collector_registry.h"

#include <string>
#include <utility>
#include <variant>

#include "collectors/engine_log_collector.h"
#include "collectors/engine_metrics_collector.h"
#include "collectors/kv_events_collector.h"
#include "collectors/synth.h"
#include "collectors/synth_collector.h"
#include "collectors/trace_file_collector.h"

namespace kvwatch::agent {
namespace {

using base::Status;
using Made = base::Result<std::unique_ptr<collectors::Collector>>;

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// A created collector of a concrete type as a Collector.
template <class T>
Made Upcast(base::Result<std::unique_ptr<T>> created) {
  if (!created.ok()) return Made::Error(created.error());
  return std::unique_ptr<collectors::Collector>(std::move(created).value());
}

}  // namespace

Status ValidateCollector(const CollectorSpec& spec) {
  return std::visit(Overloaded{
                        [](const collectors::TraceFileCollectorOptions& o) {
                          return collectors::FileTailer::ValidateOptions(o.tailer);
                        },
                        [](const collectors::KvEventsCollectorOptions& o) {
                          // KvEventsCollector::Create's checks before its sockets.
                          if (o.endpoints.empty())
                            return Status::Error("endpoints: expected at least one ZeroMQ endpoint");
                          if (o.replay_endpoint.empty()) return Status::Ok();
                          for (std::size_t i = 0; i < o.endpoints.size(); ++i) {
                            base::Result<std::string> replay = collectors::OffsetKvEndpoint(o.replay_endpoint, i);
                            if (!replay.ok()) return Status::Error("replay_endpoint: " + replay.error());
                          }
                          return Status::Ok();
                        },
                        [](const collectors::EngineLogCollectorOptions& o) {
                          if (o.name.empty()) return Status::Error("engine_log collector: a name is required");
                          Status s = collectors::FileTailer::ValidateOptions(o.tailer);
                          return s.ok() ? s : Status::Error("engine_log collector '" + o.name + "': " + s.error());
                        },
                        [](const collectors::EngineMetricsCollectorOptions& o) {
                          return collectors::EngineMetricsCollector::ValidateOptions(o);
                        },
                        [](const collectors::SynthOptions& o) {
                          base::Result<collectors::SynthGenerator> generator = collectors::SynthGenerator::Create(o);
                          return generator.ok() ? Status::Ok() : Status::Error(generator.error());
                        },
                    },
                    spec.options);
}

Made MakeCollector(CollectorSpec spec, const collectors::CollectorLog& log) {
  return std::visit(Overloaded{
                        [&](collectors::TraceFileCollectorOptions& o) {
                          return Upcast(collectors::TraceFileCollector::Create(std::move(o), log));
                        },
                        [&](collectors::KvEventsCollectorOptions& o) {
                          return Upcast(collectors::KvEventsCollector::Create(std::move(o), log));
                        },
                        [&](collectors::EngineLogCollectorOptions& o) {
                          return Upcast(collectors::EngineLogCollector::Create(std::move(o), log));
                        },
                        [&](collectors::EngineMetricsCollectorOptions& o) {
                          return Upcast(collectors::EngineMetricsCollector::Create(std::move(o), log));
                        },
                        [&](collectors::SynthOptions& o) {
                          return Upcast(collectors::SynthCollector::Create("synth", o, collectors::WallNow()));
                        },
                    },
                    spec.options);
}

base::Result<std::vector<std::unique_ptr<collectors::Collector>>> BuildCollectors(std::vector<CollectorSpec> specs,
                                                                                  const collectors::CollectorLog& log) {
  using R = base::Result<std::vector<std::unique_ptr<collectors::Collector>>>;
  std::vector<std::unique_ptr<collectors::Collector>> out;
  for (CollectorSpec& spec : specs) {
    const std::string where = spec.where;
    Made collector = MakeCollector(std::move(spec), log);
    if (!collector.ok()) return R::Error(where + ": " + collector.error());
    out.push_back(std::move(collector).value());
  }
  return out;
}

}  // namespace kvwatch::agent
