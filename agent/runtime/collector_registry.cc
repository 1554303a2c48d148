#include "agent/runtime/collector_registry.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "base/source_kinds.h"
#include "collectors/kv_event_tracker.h"
#include "collectors/synth_collector.h"
#include "config/field_reader.h"

namespace kvwatch::agent {
namespace {

using base::Status;
using config::internal::Entry;
using config::internal::FieldReader;
using Made = base::Result<std::unique_ptr<collectors::Collector>>;

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

double Seconds(std::chrono::milliseconds ms) { return static_cast<double>(ms.count()) / 1000; }

bool SynthRate(double v) { return v > 0 && v <= 1e6; }

bool IsLabelName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

std::string NonEmptyPath(const std::string& path) {
  return path.empty() ? "expected a path or glob, got an empty string" : "";
}

std::string ZmqEndpointProblem(const std::string& endpoint) {
  using config::internal::HasPrefixAndRest;
  const bool ok = (HasPrefixAndRest(endpoint, "tcp://") || HasPrefixAndRest(endpoint, "ipc://") ||
                   HasPrefixAndRest(endpoint, "inproc://")) &&
                  !config::internal::HasWhitespace(endpoint);
  if (ok) return "";
  return "expected a ZeroMQ endpoint starting with tcp://, ipc:// or inproc://, got \"" + endpoint + "\"";
}

// One parse of collectors.*: the reader, and what spans the rows (collector
// names are unique among all collectors).
class SectionParser {
 public:
  explicit SectionParser(const config::AgentConfig& config) : config(config), r(config.collectors.source) {}

  const config::AgentConfig& config;
  FieldReader r;

  // A list item: its keys through visit, then its required keys.
  Status Item(const Entry& item, std::initializer_list<std::string_view> required, const FieldReader::Visitor& visit) {
    if (Status s = r.ForEachKey(item, visit); !s.ok()) return s;
    return r.RequireKeys(item, required);
  }

  // Checks and registers a collector name.
  Status Name(const Entry& e, std::string* name) {
    if (Status s = r.ReadString(e, name); !s.ok()) return s;
    if (!IsLabelName(*name)) {
      return r.Expected(e, "a name of 1 to 64 characters from A-Z a-z 0-9 _ . - (not starting with .)");
    }
    if (*name == "synth") return r.Fail(e, "the name synth is reserved for collectors.synth");
    if (auto [it, added] = names_.emplace(*name, e.path); !added) {
      return r.Fail(e, "the name \"" + *name + "\" is already used by " + it->second);
    }
    return Status::Ok();
  }

  // Files or globs to tail: at least one, none empty.
  Status Paths(const Entry& e, std::vector<std::string>* paths) {
    if (Status s = r.ReadStringList(e, paths, NonEmptyPath); !s.ok()) return s;
    return r.RequireNonEmptyList(e, paths->empty());
  }

 private:
  std::map<std::string, std::string> names_;        // name -> path of its name key
};

// ------------------------------------------------------------------ The rows' parsers
// Each reads one item (collectors.synth: the map) into its collector's options,
// starting from their defaults.

Status ParseTraceFile(SectionParser& p, const Entry& item, CollectorOptions* out) {
  collectors::TraceFileCollectorOptions o;
  FieldReader& r = p.r;
  Status status = p.Item(item, {"name", "paths"}, [&](const Entry& e) -> Status {
    const std::string& k = e.pattern;
    if (k == "collectors.trace_files[].name") return p.Name(e, &o.name);
    if (k == "collectors.trace_files[].paths") return p.Paths(e, &o.tailer.patterns);
    if (k == "collectors.trace_files[].start_at") {
      return r.ReadChoice(e, base::kTailStartPositionSpellings, &o.tailer.start_position);
    }
    if (k == "collectors.trace_files[].timestamp_unit") {
      return r.ReadChoice(e, base::kTimestampUnitSpellings, &o.record.timestamp_unit);
    }
    if (k == "collectors.trace_files[].tenant_fields") {
      return r.ReadStringList(e, &o.record.tenant_fields, [](const std::string& field) {
        bool bad = field.empty() || field.find_first_of("\"\\") != std::string::npos;
        return bad ? std::string("expected a field name without '\"' or '\\'") : std::string();
      });
    }
    if (k == "collectors.trace_files[].max_line_bytes") {
      std::uint64_t bytes = 0;
      if (Status s = r.ReadSize(e, 1, 1ull << 30, &bytes); !s.ok()) return s;
      o.tailer.max_line_bytes = bytes;
      return Status::Ok();
    }
    if (k == "collectors.trace_files[].poll_interval") {
      double seconds = 0;
      if (Status s = r.ReadDuration(e, true, &seconds); !s.ok()) return s;
      o.poll_interval = Millis(seconds);
      return Status::Ok();
    }
    return r.Unhandled(e);
  });
  if (!status.ok()) return status;
  o.max_clock_skew_s = p.config.curve.max_clock_skew_s;
  *out = std::move(o);
  return Status::Ok();
}

Status ParseKvEvents(SectionParser& p, const Entry& item, CollectorOptions* out) {
  collectors::KvEventsCollectorOptions o;
  FieldReader& r = p.r;
  Status status = p.Item(item, {"name", "endpoints"}, [&](const Entry& e) -> Status {
    const std::string& k = e.pattern;
    if (k == "collectors.kv_events[].name") return p.Name(e, &o.name);
    if (k == "collectors.kv_events[].endpoints") {
      if (Status s = r.ReadStringList(e, &o.endpoints, ZmqEndpointProblem); !s.ok()) return s;
      return r.RequireNonEmptyList(e, o.endpoints.empty());
    }
    if (k == "collectors.kv_events[].topic") return r.ReadString(e, &o.topic);
    if (k == "collectors.kv_events[].replay_endpoint") {
      if (Status s = r.ReadString(e, &o.replay_endpoint); !s.ok()) return s;
      if (o.replay_endpoint.empty()) return Status::Ok();
      std::string problem = ZmqEndpointProblem(o.replay_endpoint);
      return problem.empty() ? Status::Ok() : r.Fail(e, problem);
    }
    if (k == "collectors.kv_events[].bind") return r.ReadBool(e, &o.bind);
    if (k == "collectors.kv_events[].tenant_source") {
      return r.ReadChoice(e, collectors::kKvTenantSourceSpellings, &o.tracker.tenant_source);
    }
    return r.Unhandled(e);
  });
  if (!status.ok()) return status;
  // Page ids are scoped by the model (docs/semantics.md section 1); the parent
  // map is bounded at 4x the tracked pages (see collectors/kv_event_tracker.h).
  const config::AgentConfig& c = p.config;
  o.tracker.scope = c.model.empty() ? c.model_label : c.model;
  o.tracker.parent_map_max_entries = std::size_t{4} * c.engine.max_pages;
  o.max_clock_skew_s = c.curve.max_clock_skew_s;
  *out = std::move(o);
  return Status::Ok();
}

Status ParseEngineLog(SectionParser& p, const Entry& item, CollectorOptions* out) {
  collectors::EngineLogCollectorOptions o;
  FieldReader& r = p.r;
  Status status = p.Item(item, {"name", "paths"}, [&](const Entry& e) -> Status {
    const std::string& k = e.pattern;
    if (k == "collectors.engine_log[].name") return p.Name(e, &o.name);
    if (k == "collectors.engine_log[].paths") return p.Paths(e, &o.tailer.patterns);
    if (k == "collectors.engine_log[].engine") return r.ReadChoice(e, base::kEngineLogKindSpellings, &o.engine);
    return r.Unhandled(e);
  });
  if (!status.ok()) return status;
  *out = std::move(o);
  return Status::Ok();
}

Status ParseEngineMetrics(SectionParser& p, const Entry& item, CollectorOptions* out) {
  collectors::EngineMetricsCollectorOptions o;
  FieldReader& r = p.r;
  double interval = Seconds(o.interval), timeout = Seconds(o.timeout);
  Status status = p.Item(item, {"name", "url"}, [&](const Entry& e) -> Status {
    const std::string& k = e.pattern;
    if (k == "collectors.engine_metrics[].name") return p.Name(e, &o.name);
    if (k == "collectors.engine_metrics[].url") {
      if (Status s = r.ReadString(e, &o.url); !s.ok()) return s;
      return config::internal::IsHttpUrl(o.url) ? Status::Ok() : r.Expected(e, "an http:// or https:// URL");
    }
    if (k == "collectors.engine_metrics[].interval") return r.ReadDuration(e, true, &interval);
    if (k == "collectors.engine_metrics[].timeout") return r.ReadDuration(e, true, &timeout);
    return r.Unhandled(e);
  });
  if (!status.ok()) return status;
  if (timeout > interval) {
    std::string key = item.path + ".timeout";
    return r.Fail(key, r.MarkOf(key, item.mark),
                  config::internal::NumberText(timeout) + "s is longer than interval (" +
                      config::internal::NumberText(interval) + "s)");
  }
  o.interval = Millis(interval);
  o.timeout = Millis(timeout);
  o.page_tokens = static_cast<std::uint32_t>(p.config.page_tokens);
  *out = std::move(o);
  return Status::Ok();
}

// The synthetic replica: `kvwatch synth`'s workload, unbounded, played in real time.
Status ParseSynth(SectionParser& p, const Entry& section, CollectorOptions* out) {
  collectors::SynthOptions o = AgentSynthOptions(p.config);
  FieldReader& r = p.r;
  std::optional<double> shift_start, shift_end;
  Status status = r.ForEachKey(section, [&](const Entry& e) -> Status {
    const std::string& k = e.pattern;
    if (k == "collectors.synth.rate") return r.ReadNumber(e, SynthRate, "> 0 and at most 1000000", &o.rate_per_s);
    if (k == "collectors.synth.seed") return r.ReadInt(e, 0, std::numeric_limits<std::int64_t>::max(), &o.seed);
    if (k == "collectors.synth.tenants") return r.ReadInt(e, 1, 60000, &o.tenants);
    if (k == "collectors.synth.sessions") return r.ReadInt(e, 1, 1000000, &o.active_sessions);
    if (k == "collectors.synth.one_shot_fraction") {
      return r.ReadNumber(e, config::internal::Fraction, "in [0, 1]", &o.one_shot_fraction);
    }
    if (k == "collectors.synth.shift_start" || k == "collectors.synth.shift_end") {
      double seconds = 0;
      if (Status s = r.ReadDuration(e, false, &seconds); !s.ok()) return s;
      (k == "collectors.synth.shift_start" ? shift_start : shift_end) = seconds;
      return Status::Ok();
    }
    return r.Unhandled(e);
  });
  if (!status.ok()) return status;
  const std::string start = section.path + ".shift_start", end = section.path + ".shift_end";
  if (shift_start.has_value() != shift_end.has_value()) {
    const std::string& given = shift_start ? start : end;
    const std::string& missing = shift_start ? end : start;
    return r.Fail(given, r.MarkOf(given, section.mark), "set together with " + missing);
  }
  if (shift_end && *shift_end <= *shift_start) {
    return r.Fail(end, r.MarkOf(end, section.mark), "must be after shift_start");
  }
  if (shift_start) {
    o.shift.start_s = *shift_start;
    o.shift.end_s = *shift_end;
  }
  *out = std::move(o);
  return Status::Ok();
}

struct CollectorKind {
  std::string_view key;  // "collectors.trace_files"
  bool is_list;          // a list of maps (else one map)
  Status (*parse)(SectionParser& p, const Entry& item, CollectorOptions* out);
};

// In the order the agent creates them.
constexpr CollectorKind kCollectorKinds[] = {
    {"collectors.trace_files", true, ParseTraceFile},
    {"collectors.kv_events", true, ParseKvEvents},
    {"collectors.engine_log", true, ParseEngineLog},
    {"collectors.engine_metrics", true, ParseEngineMetrics},
    {"collectors.synth", false, ParseSynth},
};
constexpr std::size_t kKinds = std::size(kCollectorKinds);

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

collectors::SynthOptions AgentSynthOptions(const config::AgentConfig& config) {
  collectors::SynthOptions o;
  o.rate_per_s = 5;
  o.duration_s = 0;
  o.max_requests = 0;
  o.page_tokens = config.page_tokens;
  return o;
}

base::Result<std::vector<CollectorSpec>> ParseCollectors(const config::AgentConfig& config) {
  using R = base::Result<std::vector<CollectorSpec>>;
  std::vector<CollectorSpec> by_kind[kKinds];
  if (config.collectors.section) {
    // Document order, so that the first error in the file is the one reported.
    SectionParser p(config);
    Status status = p.r.ForEachKey(*config.collectors.section, [&](const Entry& e) -> Status {
      for (std::size_t kind = 0; kind < kKinds; ++kind) {
        const CollectorKind& row = kCollectorKinds[kind];
        if (e.pattern != row.key) continue;
        std::vector<Entry> items = {e};
        if (row.is_list) {
          base::Result<std::vector<Entry>> listed = p.r.Items(e);
          if (!listed.ok()) return listed.status();
          items = std::move(listed).value();
        }
        for (const Entry& item : items) {
          if (row.is_list && !item.node.IsMap()) return p.r.Expected(item, "a map");
          CollectorSpec spec{item.path, collectors::SynthOptions{}};
          if (Status s = row.parse(p, item, &spec.options); !s.ok()) return s;
          by_kind[kind].push_back(std::move(spec));
        }
        return Status::Ok();
      }
      return p.r.Unhandled(e);
    });
    if (!status.ok()) return R::Error(status.error());
  }
  if (!config.collectors.HasAnyCollector()) {
    by_kind[kKinds - 1].push_back({"collectors.synth", AgentSynthOptions(config)});
  }
  std::vector<CollectorSpec> out;
  for (std::vector<CollectorSpec>& specs : by_kind) {
    for (CollectorSpec& spec : specs) out.push_back(std::move(spec));
  }
  return out;
}

Status ValidateCollector(const CollectorSpec& spec) {
  return std::visit(
      Overloaded{
          [](const collectors::TraceFileCollectorOptions& o) { return collectors::FileTailer::ValidateOptions(o.tailer); },
          [](const collectors::KvEventsCollectorOptions& o) {
            // KvEventsCollector::Create's checks before its sockets.
            if (o.endpoints.empty()) return Status::Error("endpoints: expected at least one ZeroMQ endpoint");
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
  return std::visit(
      Overloaded{
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

base::Result<std::vector<std::unique_ptr<collectors::Collector>>> BuildCollectors(
    const config::AgentConfig& config, const collectors::CollectorLog& log) {
  using R = base::Result<std::vector<std::unique_ptr<collectors::Collector>>>;
  base::Result<std::vector<CollectorSpec>> specs = ParseCollectors(config);
  if (!specs.ok()) return R::Error(specs.error());
  std::vector<std::unique_ptr<collectors::Collector>> out;
  for (CollectorSpec& spec : specs.value()) {
    const std::string where = spec.where;
    Made collector = MakeCollector(std::move(spec), log);
    if (!collector.ok()) return R::Error(where + ": " + collector.error());
    out.push_back(std::move(collector).value());
  }
  return out;
}

}  // namespace kvwatch::agent
