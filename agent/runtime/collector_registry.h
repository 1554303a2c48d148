// The collector registry: one row per kind of collector (its config key, whether
// the key is a list of maps, and its section parser). Each row reads its items of
// the agent config's collectors.* section (kept as written by config/, see
// CollectorSettings in config/agent_config.h) with config/'s FieldReader straight
// into the collector's own options struct, so every default of a collector is
// written once, in collectors/ (the agent's synthetic replica's, which differ from
// `kvwatch synth`'s, in AgentSynthOptions()). ParseCollectors() walks the rows,
// BuildCollectors() creates what they parsed: a new kind is one row, one parser.
//
// Errors are the config's: "SOURCE:LINE: KEY: message", e.g.
// "agent.yaml:9: collectors.kv_events[1].endpoints: expected at least one item".
// Collector names are unique among all collectors: a collector's part of the
// agent's state file is found by its name.
//
// Thread safety: the table is immutable; the functions are pure except that
// MakeCollector() and BuildCollectors() create collectors; any thread.
#ifndef KVWATCH_AGENT_RUNTIME_COLLECTOR_REGISTRY_H_
#define KVWATCH_AGENT_RUNTIME_COLLECTOR_REGISTRY_H_

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"
#include "collectors/collector.h"
#include "collectors/engine_log_collector.h"
#include "collectors/engine_metrics_collector.h"
#include "collectors/kv_events_collector.h"
#include "collectors/synth.h"
#include "collectors/trace_file_collector.h"
#include "config/agent_config.h"

namespace kvwatch::agent {

// The options of one collector, of its kind.
using CollectorOptions =
    std::variant<collectors::TraceFileCollectorOptions, collectors::KvEventsCollectorOptions,
                 collectors::EngineLogCollectorOptions, collectors::EngineMetricsCollectorOptions,
                 collectors::SynthOptions>;

// One collector the config asks for, parsed but not created.
struct CollectorSpec {
  std::string where;  // "collectors.kv_events[1]", "collectors.synth"
  CollectorOptions options;
};

// The agent's synthetic replica before collectors.synth.*: unbounded, played in
// real time at 5 requests/s (the rest are SynthOptions' defaults); page_tokens is
// the config's.
collectors::SynthOptions AgentSynthOptions(const config::AgentConfig& config);

// Every collector the config asks for, in the order the agent creates them:
// trace_files, kv_events, engine_log, engine_metrics, synth (synth also, with its
// defaults, when no collector at all is configured).
base::Result<std::vector<CollectorSpec>> ParseCollectors(const config::AgentConfig& config);

// The checks the collector's Create() makes on spec's options, creating nothing
// (no socket, thread, descriptor or file): what `kvwatch check-config` runs.
// Whether a ZeroMQ endpoint can be bound or reached, a URL answers or a file
// exists are facts of the run, not of the config, and are not checked.
base::Status ValidateCollector(const CollectorSpec& spec);

// Creates (does not start) the collector of spec; errors are the collector's.
base::Result<std::unique_ptr<collectors::Collector>> MakeCollector(CollectorSpec spec,
                                                                   const collectors::CollectorLog& log);

// ParseCollectors, then MakeCollector for each; creation errors name the item
// ("collectors.kv_events[1]: ...").
base::Result<std::vector<std::unique_ptr<collectors::Collector>>> BuildCollectors(
    const config::AgentConfig& config, const collectors::CollectorLog& log);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_COLLECTOR_REGISTRY_H_
