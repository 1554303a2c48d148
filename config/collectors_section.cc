// collectors.*: each item read straight into its collector's own options
// (collectors/collector_options.h), whose member initializers are the only
// defaults; ResolveCollectors then fills in what comes from other sections and
// adds the agent's synthetic replica when no collector is configured. The
// registry (agent/runtime/collector_registry.cc) only creates collectors from
// the result. See CollectorSettings in agent_config.h.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "config/sections.h"

namespace kvwatch::config {

collectors::SynthOptions AgentSynthOptions() {
  collectors::SynthOptions o;
  o.rate_per_s = 5;
  o.duration_s = 0;
  o.max_requests = 0;
  return o;
}

namespace internal {

using base::Status;
using collectors::CollectorOptions;
using collectors::CollectorSpec;

namespace {

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

double Seconds(std::chrono::milliseconds ms) { return static_cast<double>(ms.count()) / 1000; }

// At least synth.h's lowest rate (1e-6: slower, the millisecond timestamps would overflow).
bool SynthRate(double v) { return v >= 1e-6 && v <= 1e6; }

bool IsLabelName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

std::string NonEmptyPath(const std::string& path) {
  return path.empty() ? "expected a path or glob, got an empty string" : "";
}

std::string ZmqEndpointProblem(const std::string& endpoint) {
  const bool ok = (HasPrefixAndRest(endpoint, "tcp://") || HasPrefixAndRest(endpoint, "ipc://") ||
                   HasPrefixAndRest(endpoint, "inproc://")) &&
                  !HasWhitespace(endpoint);
  if (ok) return "";
  return "expected a ZeroMQ endpoint starting with tcp://, ipc:// or inproc://, got \"" + endpoint + "\"";
}

// One parse of collectors.*: the reader, and what spans the kinds (collector
// names are unique among all collectors: a collector's part of the agent's state
// file is found by its name).
class SectionParser {
 public:
  explicit SectionParser(FieldReader& r) : r(r) {}

  FieldReader& r;

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
  std::map<std::string, std::string> names_;  // name -> path of its name key
};

// ------------------------------------------------------------------ One parser per kind
// Each reads one item (collectors.synth: the map) into its collector's options,
// starting from their defaults. What other sections decide is ResolveCollectors'.

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
  *out = std::move(o);
  return Status::Ok();
}

Status ParseKvEvents(SectionParser& p, const Entry& item, CollectorOptions* out) {
  collectors::KvEventsCollectorOptions o;
  FieldReader& r = p.r;
  double replay_timeout = Seconds(o.replay_timeout), replay_give_up = Seconds(o.replay_give_up);
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
    if (k == "collectors.kv_events[].replay_timeout" || k == "collectors.kv_events[].replay_give_up") {
      double* seconds = k == "collectors.kv_events[].replay_timeout" ? &replay_timeout : &replay_give_up;
      if (Status s = r.ReadDuration(e, true, seconds); !s.ok()) return s;
      return *seconds >= 0.001 ? Status::Ok() : r.Expected(e, "a duration of at least 1ms");
    }
    if (k == "collectors.kv_events[].bind") return r.ReadBool(e, &o.bind);
    if (k == "collectors.kv_events[].tenant_source") {
      return r.ReadChoice(e, collectors::kKvTenantSourceSpellings, &o.tracker.tenant_source);
    }
    if (k == "collectors.kv_events[].request_group") {
      std::int64_t group = 0;
      if (Status s = r.ReadInt(e, 0, collectors::kKvMaxGroupIdx, &group); !s.ok()) return s;
      o.tracker.request_group = group;
      return Status::Ok();
    }
    return r.Unhandled(e);
  });
  if (!status.ok()) return status;
  if (replay_give_up < replay_timeout) {
    std::string key = item.path + ".replay_give_up";
    return r.Fail(
        key, r.MarkOf(key, item.mark),
        NumberText(replay_give_up) + "s is shorter than replay_timeout (" + NumberText(replay_timeout) + "s)");
  }
  o.replay_timeout = Millis(replay_timeout);
  o.replay_give_up = Millis(replay_give_up);
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
      return IsHttpUrl(o.url) ? Status::Ok() : r.Expected(e, "an http:// or https:// URL");
    }
    if (k == "collectors.engine_metrics[].interval") return r.ReadDuration(e, true, &interval);
    if (k == "collectors.engine_metrics[].timeout") return r.ReadDuration(e, true, &timeout);
    return r.Unhandled(e);
  });
  if (!status.ok()) return status;
  if (timeout > interval) {
    std::string key = item.path + ".timeout";
    return r.Fail(key, r.MarkOf(key, item.mark),
                  NumberText(timeout) + "s is longer than interval (" + NumberText(interval) + "s)");
  }
  o.interval = Millis(interval);
  o.timeout = Millis(timeout);
  *out = std::move(o);
  return Status::Ok();
}

// The synthetic replica: `kvwatch synth`'s workload, unbounded, played in real time.
Status ParseSynth(SectionParser& p, const Entry& section, CollectorOptions* out) {
  collectors::SynthOptions o = AgentSynthOptions();
  FieldReader& r = p.r;
  std::optional<double> shift_start, shift_end;
  Status status = r.ForEachKey(section, [&](const Entry& e) -> Status {
    const std::string& k = e.pattern;
    if (k == "collectors.synth.rate") {
      return r.ReadNumber(e, SynthRate, "at least 0.000001 and at most 1000000", &o.rate_per_s);
    }
    if (k == "collectors.synth.seed") return r.ReadInt(e, 0, std::numeric_limits<std::int64_t>::max(), &o.seed);
    if (k == "collectors.synth.tenants") return r.ReadInt(e, 1, 60000, &o.tenants);
    if (k == "collectors.synth.sessions") return r.ReadInt(e, 1, 1000000, &o.active_sessions);
    if (k == "collectors.synth.one_shot_fraction") {
      return r.ReadNumber(e, Fraction, "in [0, 1]", &o.one_shot_fraction);
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
    {"collectors.trace_files", true, ParseTraceFile}, {"collectors.kv_events", true, ParseKvEvents},
    {"collectors.engine_log", true, ParseEngineLog},  {"collectors.engine_metrics", true, ParseEngineMetrics},
    {"collectors.synth", false, ParseSynth},
};
constexpr std::size_t kKinds = std::size(kCollectorKinds);

}  // namespace

Status ParseCollectorsSection(FieldReader& r, const Entry& section, CollectorSettings* collectors) {
  std::vector<CollectorSpec> by_kind[kKinds];
  std::size_t configured = 0;
  SectionParser p(r);
  // Document order, so that the first error in the file is the one reported.
  Status status = r.ForEachKey(section, [&](const Entry& e) -> Status {
    for (std::size_t kind = 0; kind < kKinds; ++kind) {
      const CollectorKind& row = kCollectorKinds[kind];
      if (e.pattern != row.key) continue;
      std::vector<Entry> items = {e};
      if (row.is_list) {
        base::Result<std::vector<Entry>> listed = r.Items(e);
        if (!listed.ok()) return listed.status();
        items = std::move(listed).value();
      } else if (!e.node.IsNull() && !e.node.IsMap()) {
        return r.Expected(e, "a map");
      }
      for (const Entry& item : items) {
        if (row.is_list && !item.node.IsMap()) return r.Expected(item, "a map");
        CollectorSpec spec{item.path, collectors::SynthOptions{}};
        if (Status s = row.parse(p, item, &spec.options); !s.ok()) return s;
        by_kind[kind].push_back(std::move(spec));
        ++configured;
      }
      return Status::Ok();
    }
    return r.Unhandled(e);
  });
  if (!status.ok()) return status;
  collectors->specs.clear();
  for (std::vector<CollectorSpec>& specs : by_kind) {
    for (CollectorSpec& spec : specs) collectors->specs.push_back(std::move(spec));
  }
  collectors->configured = configured;
  return Status::Ok();
}

void ResolveCollectors(AgentConfig* c) {
  if (!c->collectors.HasAnyCollector()) {
    c->collectors.specs = {CollectorSpec{"collectors.synth", AgentSynthOptions()}};
  }
  for (CollectorSpec& spec : c->collectors.specs) {
    if (auto* o = std::get_if<collectors::TraceFileCollectorOptions>(&spec.options)) {
      o->max_clock_skew_s = c->curve.max_clock_skew_s;
    } else if (auto* o = std::get_if<collectors::KvEventsCollectorOptions>(&spec.options)) {
      // Page ids are scoped by the model (docs/semantics.md section 1); the parent
      // map is bounded at 4x the tracked pages (see collectors/kv_event_tracker.h).
      o->tracker.scope = c->model.empty() ? c->model_label : c->model;
      o->tracker.parent_map_max_entries = std::size_t{4} * c->engine.max_pages;
      o->max_clock_skew_s = c->curve.max_clock_skew_s;
    } else if (auto* o = std::get_if<collectors::EngineMetricsCollectorOptions>(&spec.options)) {
      o->page_tokens = static_cast<std::uint32_t>(c->page_tokens);
    } else if (auto* o = std::get_if<collectors::SynthOptions>(&spec.options)) {
      o->page_tokens = c->page_tokens;
    }
  }
}

}  // namespace internal
}  // namespace kvwatch::config
