#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "config/sections.h"

namespace kvwatch::config::internal {

using base::Status;

namespace {

bool SynthRate(double v) { return v > 0 && v <= 1e6; }

bool IsLabelName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

bool IsZmqEndpoint(std::string_view endpoint) {
  return (HasPrefixAndRest(endpoint, "tcp://") || HasPrefixAndRest(endpoint, "ipc://") ||
          HasPrefixAndRest(endpoint, "inproc://")) &&
         !HasWhitespace(endpoint);
}

// collectors.*: one parse of the section; collector names are unique among all
// collectors and a checkpoint file serves one collector only.
class CollectorsParser {
 public:
  explicit CollectorsParser(FieldReader& r) : r_(r) {}

  Status Parse(const Entry& section, CollectorSettings* collectors) {
    return r_.ForEachKey(section, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "collectors.synth") {
        if (!e.node.IsNull() && !e.node.IsMap()) return r_.Expected(e, "a map");
        collectors->synth.emplace();
        return ParseSynth(e, &*collectors->synth);
      }
      if (k == "collectors.trace_files") {
        return r_.ReadMapList(e, &collectors->trace_files,
                             [&](const Entry& item, TraceFileSettings* out) { return ParseTraceFile(item, out); });
      }
      if (k == "collectors.kv_events") {
        return r_.ReadMapList(e, &collectors->kv_events,
                             [&](const Entry& item, KvEventsSettings* out) { return ParseKvEvents(item, out); });
      }
      if (k == "collectors.engine_log") {
        return r_.ReadMapList(e, &collectors->engine_log,
                             [&](const Entry& item, EngineLogSettings* out) { return ParseEngineLog(item, out); });
      }
      if (k == "collectors.engine_metrics") {
        return r_.ReadMapList(e, &collectors->engine_metrics,
                             [&](const Entry& item, EngineMetricsSettings* out) { return ParseEngineMetrics(item, out); });
      }
      return r_.Unhandled(e);
    });
  }

  Status ParseSynth(const Entry& section, SynthSettings* synth) {
    Status status = r_.ForEachKey(section, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "collectors.synth.rate") {
        return r_.ReadNumber(e, SynthRate, "> 0 and at most 1000000", &synth->rate_per_s);
      }
      if (k == "collectors.synth.seed") {
        return r_.ReadInt(e, 0, std::numeric_limits<std::int64_t>::max(), &synth->seed);
      }
      if (k == "collectors.synth.tenants") return r_.ReadInt(e, 1, 60000, &synth->tenants);
      if (k == "collectors.synth.sessions") return r_.ReadInt(e, 1, 1000000, &synth->sessions);
      if (k == "collectors.synth.one_shot_fraction") {
        return r_.ReadNumber(e, Fraction, "in [0, 1]", &synth->one_shot_fraction);
      }
      if (k == "collectors.synth.shift_start" || k == "collectors.synth.shift_end") {
        double seconds = 0;
        if (Status s = r_.ReadDuration(e, false, &seconds); !s.ok()) return s;
        (k == "collectors.synth.shift_start" ? synth->shift_start_seconds
                                             : synth->shift_end_seconds) = seconds;
        return Status::Ok();
      }
      return r_.Unhandled(e);
    });
    if (!status.ok()) return status;
    const std::string start = section.path + ".shift_start", end = section.path + ".shift_end";
    if (synth->shift_start_seconds.has_value() != synth->shift_end_seconds.has_value()) {
      const std::string& given = synth->shift_start_seconds ? start : end;
      const std::string& missing = synth->shift_start_seconds ? end : start;
      return r_.Fail(given, r_.MarkOf(given, section.mark), "set together with " + missing);
    }
    if (synth->shift_end_seconds && *synth->shift_end_seconds <= *synth->shift_start_seconds) {
      return r_.Fail(end, r_.MarkOf(end, section.mark), "must be after shift_start");
    }
    return Status::Ok();
  }

  // Checks and registers a collector name (unique among all collectors).
  Status ParseCollectorName(const Entry& e, std::string* name) {
    if (Status s = r_.ReadString(e, name); !s.ok()) return s;
    if (!IsLabelName(*name)) {
      return r_.Expected(e,
                      "a name of 1 to 64 characters from A-Z a-z 0-9 _ . - (not starting with .)");
    }
    if (*name == "synth") return r_.Fail(e, "the name synth is reserved for collectors.synth");
    if (auto [it, added] = collector_names_.emplace(*name, e.path); !added) {
      return r_.Fail(e, "the name \"" + *name + "\" is already used by " + it->second);
    }
    return Status::Ok();
  }

  static std::string NonEmptyPath(const std::string& path) {
    return path.empty() ? "expected a path or glob, got an empty string" : "";
  }

  // A list item: its keys through visit, then its required keys.
  Status ParseItem(const Entry& item, std::initializer_list<std::string_view> required,
                   const FieldReader::Visitor& visit) {
    if (Status s = r_.ForEachKey(item, visit); !s.ok()) return s;
    return r_.RequireKeys(item, required);
  }

  // Files or globs to tail: at least one, none empty.
  Status ReadPaths(const Entry& e, std::vector<std::string>* paths) {
    if (Status s = r_.ReadStringList(e, paths, NonEmptyPath); !s.ok()) return s;
    return r_.RequireNonEmptyList(e, paths->empty());
  }

  Status ParseTraceFile(const Entry& item, TraceFileSettings* trace) {
    return ParseItem(item, {"name", "paths"}, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "collectors.trace_files[].name") return ParseCollectorName(e, &trace->name);
      if (k == "collectors.trace_files[].paths") return ReadPaths(e, &trace->paths);
      if (k == "collectors.trace_files[].start_at") {
        return r_.ReadChoice(e, kStartAts, &trace->start_at);
      }
      if (k == "collectors.trace_files[].checkpoint") return ParseCheckpoint(e, &trace->checkpoint);
      if (k == "collectors.trace_files[].timestamp_unit") {
        return r_.ReadChoice(e, base::kTimestampUnitSpellings, &trace->timestamp_unit);
      }
      if (k == "collectors.trace_files[].tenant_fields") {
        return r_.ReadStringList(e, &trace->tenant_fields, [](const std::string& field) {
          bool bad = field.empty() || field.find_first_of("\"\\") != std::string::npos;
          return bad ? std::string("expected a field name without '\"' or '\\'") : std::string();
        });
      }
      if (k == "collectors.trace_files[].max_line_bytes") {
        return r_.ReadSize(e, 1, 1ull << 30, &trace->max_line_bytes);
      }
      if (k == "collectors.trace_files[].poll_interval") {
        return r_.ReadDuration(e, true, &trace->poll_interval_seconds);
      }
      return r_.Unhandled(e);
    });
  }

  // A checkpoint file may serve one collector only.
  Status ParseCheckpoint(const Entry& e, std::string* checkpoint) {
    if (Status s = r_.ReadString(e, checkpoint); !s.ok()) return s;
    if (checkpoint->empty()) return Status::Ok();
    if (auto [it, added] = checkpoints_.emplace(*checkpoint, e.path); !added) {
      return r_.Fail(e, "the checkpoint \"" + *checkpoint + "\" is already used by " + it->second);
    }
    return Status::Ok();
  }

  static std::string ZmqEndpointProblem(const std::string& endpoint) {
    if (IsZmqEndpoint(endpoint)) return "";
    return "expected a ZeroMQ endpoint starting with tcp://, ipc:// or inproc://, got \"" +
           endpoint + "\"";
  }

  Status ParseKvEvents(const Entry& item, KvEventsSettings* events) {
    return ParseItem(item, {"name", "endpoints"}, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "collectors.kv_events[].name") return ParseCollectorName(e, &events->name);
      if (k == "collectors.kv_events[].endpoints") {
        if (Status s = r_.ReadStringList(e, &events->endpoints, ZmqEndpointProblem); !s.ok()) return s;
        return r_.RequireNonEmptyList(e, events->endpoints.empty());
      }
      if (k == "collectors.kv_events[].topic") return r_.ReadString(e, &events->topic);
      if (k == "collectors.kv_events[].replay_endpoint") {
        if (Status s = r_.ReadString(e, &events->replay_endpoint); !s.ok()) return s;
        if (events->replay_endpoint.empty()) return Status::Ok();
        std::string problem = ZmqEndpointProblem(events->replay_endpoint);
        return problem.empty() ? Status::Ok() : r_.Fail(e, problem);
      }
      if (k == "collectors.kv_events[].bind") return r_.ReadBool(e, &events->bind);
      return r_.Unhandled(e);
    });
  }

  Status ParseEngineLog(const Entry& item, EngineLogSettings* log) {
    return ParseItem(item, {"name", "paths"}, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "collectors.engine_log[].name") return ParseCollectorName(e, &log->name);
      if (k == "collectors.engine_log[].paths") return ReadPaths(e, &log->paths);
      if (k == "collectors.engine_log[].engine") {
        return r_.ReadChoice(e, base::kEngineLogKindSpellings, &log->engine);
      }
      return r_.Unhandled(e);
    });
  }

  Status ParseEngineMetrics(const Entry& item, EngineMetricsSettings* metrics) {
    Status status = ParseItem(item, {"name", "url"}, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "collectors.engine_metrics[].name") return ParseCollectorName(e, &metrics->name);
      if (k == "collectors.engine_metrics[].url") {
        if (Status s = r_.ReadString(e, &metrics->url); !s.ok()) return s;
        return IsHttpUrl(metrics->url) ? Status::Ok() : r_.Expected(e, "an http:// or https:// URL");
      }
      if (k == "collectors.engine_metrics[].interval") {
        return r_.ReadDuration(e, true, &metrics->interval_seconds);
      }
      if (k == "collectors.engine_metrics[].timeout") {
        return r_.ReadDuration(e, true, &metrics->timeout_seconds);
      }
      return r_.Unhandled(e);
    });
    if (!status.ok()) return status;
    if (metrics->timeout_seconds > metrics->interval_seconds) {
      std::string timeout = item.path + ".timeout";
      return r_.Fail(timeout, r_.MarkOf(timeout, item.mark),
                     NumberText(metrics->timeout_seconds) + "s is longer than interval (" +
                         NumberText(metrics->interval_seconds) + "s)");
    }
    return Status::Ok();
  }

 private:
  FieldReader& r_;
  std::map<std::string, std::string> collector_names_;  // name -> path of its name key
  std::map<std::string, std::string> checkpoints_;      // checkpoint -> path
};

}  // namespace

Status ParseCollectorsSection(FieldReader& r, const Entry& section, CollectorSettings* collectors) {
  return CollectorsParser(r).Parse(section, collectors);
}

}  // namespace kvwatch::config::internal
