// Agent config: the YAML file of `kvwatch agent --config FILE`, parsed and
// validated at start-up into an AgentConfig with every default filled in.
//
// Single source of truth. One static table of key descriptors (ConfigKeys():
// dotted path, type, default, meaning) drives three things: the parser rejects
// any key that is not in it, the parser reads each value as the type the table
// gives, and ConfigReferenceMarkdown() renders it as the reference table of
// docs/configuration.md. A test checks that every literal default in the table is
// what DefaultAgentConfig() holds, and another that docs/configuration.md carries
// the current rendering, so the code, the defaults and the documentation cannot drift apart.
//
// Layout. The table is in config_keys.{h,cc}; the parser is split by section
// (sections.h: curve_section.cc, web_state_section.cc, collectors_section.cc,
// alerts_section.cc) around a shared reader (field_reader.h), and agent_config.cc
// drives them. alerts.* is read straight into alerts::AlerterOptions, so the
// detectors' defaults are only alerts/'s. collectors.* is read straight into each
// collector's options (collectors/collector_options.h), so the collectors'
// defaults are only collectors/'s (see CollectorSettings).
//
// Paths. Keys nest as YAML maps ("engine.max_pages"); "[]" in a table path
// stands for every item of a list of maps ("collectors.trace_files[].paths").
// Error messages give the concrete path with indices
// ("collectors.trace_files[0].paths[1]").
//
// Value syntax. Durations are strings of <number><unit> terms with units ms, s,
// m, h, d ("250ms", "30s", "1h30m", "1.5h"); bare numbers are errors (no unit).
// Sizes are a plain byte count or <integer><unit> with unit B, KiB, MiB, GiB,
// TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000): 1048576, "1MiB".
// Integers, numbers and booleans must be plain YAML scalars: "8477" in quotes is
// a string and an error where an integer is expected. A key written with no
// value (`state:` or `replica: ~`) means an empty string, list or map; for any
// other type it is an error. Duplicate keys are errors. Lists whose order does
// not matter (curve.windows, curve.*_targets, curve.capacities) are sorted
// ascending, and duplicates in them are errors.
//
// Errors read "SOURCE:LINE: KEY: message", LINE 1-based, e.g.
//   "agent.yaml:7: collectors.trace_files[0].poll_interval: expected a duration
//    such as 250ms, 30s or 1h30m, got \"fast\"".
// A YAML syntax error reads "SOURCE:LINE: invalid YAML: <yaml-cpp's message>".
// Only the first error is reported: the first in the document, or, when every
// value is right on its own, the first rule across sections that fails.
//
// Files named in the config (model_config, web.config_file, trace paths, state)
// are not opened here: the agent does that. Parsing is pure.
//
// Thread safety: pure functions over immutable tables; LoadAgentConfigFile reads
// the file system.
#ifndef KVWATCH_CONFIG_AGENT_CONFIG_H_
#define KVWATCH_CONFIG_AGENT_CONFIG_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "alerts/alerter.h"
#include "base/source_kinds.h"
#include "base/status.h"
#include "collectors/collector_options.h"
#include "config/config_keys.h"
#include "config/web_config.h"
#include "curve/group_accounting.h"
#include "curve/policy_replay.h"
#include "curve/report.h"
#include "curve/stack_distance.h"
#include "curve/window_set.h"

namespace kvwatch::config {

// ------------------------------------------------------------------ The config
// Each field documents its YAML key; defaults are the member initializers and
// match the table (tested). Where a component's options struct that config/ may
// include (curve/, alerts/, base/) has the same default, the initializer reads it
// from there ("= curve::EngineOptions{}.touch_order"), and the agent's options
// (agent/runtime/agent.h) read theirs from here: each default is written once.

struct EngineSettings {
  // engine.max_pages: distinct pages tracked (the largest capacity of interest),
  // 1..2^31. 2^20 (about 58 MB of engine), not curve::EngineOptions' 2^24: the
  // agent runs beside an inference engine for months and a replica's cache is
  // rarely beyond a million pages (see curve/stack_distance.h for the three defaults).
  std::uint32_t max_pages = 1u << 20;
  // engine.touch_order: "tail-first" | "head-first".
  curve::TouchOrder touch_order = curve::EngineOptions{}.touch_order;
  // engine.coverage_share: share s in (0, 1] of a request's reusable pages that
  // counts as "covered".
  double coverage_share = 1.0;
  // engine.remembered_evictions: 0 = unlimited. Default: max_pages (the parser
  // resolves it again when only max_pages is written).
  std::uint64_t remembered_evictions = max_pages;
  // engine.sample_rate: SHARDS spatial sampling rate in (0, 1]; 1 = exact.
  double sample_rate = 1.0;
  // engine.sample_max_pages: fixed-size sampling bound on sampled pages; 0 = off.
  std::uint32_t sample_max_pages = 0;

  bool operator==(const EngineSettings&) const = default;
};

// The curve::EngineOptions of these settings.
curve::EngineOptions ToEngineOptions(const EngineSettings& engine);

struct CurveSettings {
  // curve.windows: names as written and lengths, sorted by length, distinct, each > 0.
  curve::WindowSet windows = {{"5m", 300}, {"1h", 3600}, {"24h", 86400}};
  // curve.buckets_per_octave, 4..64.
  std::uint32_t buckets_per_octave = 8;
  // curve.page_hit_targets and curve.coverage_targets: fractions in (0, 1], sorted, distinct.
  std::vector<double> page_hit_targets = {0.5, 0.9, 0.95, 0.99};
  std::vector<double> coverage_targets = {0.5, 0.9, 0.95, 0.99};
  // curve.capacities: cache sizes in pages, each 1..engine.max_pages, sorted, distinct.
  std::vector<std::uint64_t> capacities;
  // curve.knee_sensitivity: Kneedle's S, > 0.
  double knee_sensitivity = curve::ReportOptions{}.knee_sensitivity;
  // curve.knee_window_min_requests: below this many requests in a window, no knee.
  std::uint64_t knee_window_min_requests = 100;
  // curve.policies: eviction policies run as canaries at curve.capacities (the
  // online policies of curve/policy.h), as written; a repeated name runs once.
  std::vector<curve::PolicyKind> policies;
  // curve.engine_policy: the policy the engine runs; the gain gauges compare with it.
  curve::PolicyKind engine_policy = curve::PolicyKind::kLru;
  // curve.decode_tokens_per_second: sglang and vllm canaries' request lifetimes, and the
  // KV load factor's decode rate when no engine /metrics gives one, > 0.
  double decode_tokens_per_second = curve::LifetimeOptions{}.decode_tokens_per_s;
  // curve.prefill_seconds: the KV load factor's prefill time per request when no
  // engine /metrics gives one, >= 0 (finite).
  double prefill_seconds = 0;
  // curve.policy_priorities: the priority canary's rules ("tenant:NAME=P,class:NAME=P").
  curve::PriorityRules policy_priorities;
  // curve.s3fifo_promotion_hits: the s3fifo canaries' promotion threshold, 1..3
  // (curve::PolicyOptions::s3fifo_promotion_hits).
  std::uint32_t s3fifo_promotion_hits = curve::PolicyOptions{}.s3fifo_promotion_hits;
  // curve.max_clock_skew: how far ahead of the agent's wall clock a record's
  // timestamp may be, in seconds, > 0; a record further ahead is bad input (it
  // would move every window past all later records). Given to the collectors
  // that check timestamps.
  double max_clock_skew_s = collectors::kDefaultMaxClockSkewS;

  // The canaries' policies in the order they run: curve.engine_policy first, so
  // that canary (0, capacity) is the engine's own, then each of curve.policies
  // not already listed. Empty without curve.policies.
  std::vector<curve::PolicyKind> CanaryPolicies() const;

  bool operator==(const CurveSettings&) const = default;
};

// The listen address and port defaults are web_config.h's, which the HTTP server's
// options (agent/web/http_server.h) read too.
struct WebSettings {
  std::string listen_address{kDefaultListenAddress};  // web.listen_address, non-empty
  int port = kDefaultPort;                            // web.port, 0..65535 (0: any free port)
  std::string config_file;                            // web.config_file: exporter-toolkit web config
  int refresh_seconds = 5;                            // web.refresh_seconds, >= 1
  int max_connections = kDefaultMaxConnections;       // web.max_connections, 1..1048576

  bool operator==(const WebSettings&) const = default;
};

struct StateSettings {
  std::string path;              // state.path: empty = no persistence
  double interval_seconds = 60;  // state.interval, > 0

  // interval_seconds in whole milliseconds (truncated): the agent's save period.
  std::chrono::milliseconds SaveInterval() const {
    return std::chrono::milliseconds(static_cast<std::int64_t>(interval_seconds * 1000));
  }

  bool operator==(const StateSettings&) const = default;
};

// collectors.*: every collector the config asks for, each parsed straight into
// its collector's own options (collectors/collector_options.h, a header of plain
// structs: their member initializers are the only defaults), with what other
// sections decide filled in (curve.max_clock_skew, the model's page-id scope,
// engine.max_pages' bound of the KV-event parent map, page_tokens). The agent's
// collector registry (agent/runtime/collector_registry.h) only creates the live
// collectors from these specs. Collector names are unique among all collectors:
// a collector's part of the agent's state file is found by its name.
struct CollectorSettings {
  // In the order the agent creates them: trace_files, kv_events, engine_log,
  // engine_metrics, synth; when no collector is configured, the agent's
  // synthetic replica (AgentSynthOptions()) alone, where "collectors.synth".
  std::vector<collectors::CollectorSpec> specs;
  // Collectors configured: 1 for collectors.synth when present (even empty), plus
  // the items of the lists.
  std::size_t configured = 0;

  bool HasAnyCollector() const { return configured > 0; }
  bool operator==(const CollectorSettings&) const = default;
};

// The agent's synthetic replica before collectors.synth.*: unbounded (no
// duration or request limit) and played at 5 requests/s, a replica to watch
// rather than `kvwatch synth`'s 10-minute, 20 requests/s trace; the rest are
// SynthOptions' defaults. Its page_tokens is the config's (set by the parse).
collectors::SynthOptions AgentSynthOptions();

// alerts.over_capacity.target: alerts/'s (alerts/capacity_shortfall.h).
using WorkingSetTarget = alerts::WorkingSetTarget;

// alerts.*. The detectors, the alert windows and the re-send interval are parsed
// straight into the alerter's own options (alerts::AlerterOptions): their defaults
// are the ones alerts/ declares, and nothing copies them again. The key of each:
//   alerts.short_window / baseline_window   alerter.short_window / baseline_window
//   alerts.resend_interval                  alerter.notify.resend_interval (whole
//                                           seconds, rounded up, >= 1)
//   alerts.knee_shift.*                     alerter.knee_shift
//   alerts.evaluation_interval              alerter.evaluation_interval
//   alerts.timeout                          alerter.notify.request_timeout
//   alerts.over_capacity.*                  alerter.capacity_shortfall (target and
//                                           fraction: its working_set)
//   alerts.rate_shift.*                     alerter.eviction_rate_shift, and the same
//                                           values in rejection_ and preemption_rate_shift
//                                           (each keeps its own rate floor)
//   alerts.drift.*                          alerter.change_tests[0]
//   alerts.kv_load.*                        alerter.kv_load (window: its window)
// min_requests -> min_short_window_requests, min_baseline_requests ->
// min_baseline_window_requests, for -> rule.for_duration. alerter.replica and
// alerter.model are the agent's, filled in when the runner is built.
//
// When written, short_window and baseline_window must be among curve.windows (the
// knee and the working set are read from those curves); the defaults need not be
// (those detectors then have no data, and the agent says so at start-up).
struct AlertSettings {
  bool enabled = true;
  std::vector<std::string> alertmanagers;  // base URLs, http:// or https://
  std::vector<std::string> webhooks;       // URLs, http:// or https://
  alerts::AlerterOptions alerter;

  bool operator==(const AlertSettings&) const = default;
};

struct AgentConfig {
  std::string replica;      // replica: label for metrics and alerts
  std::string model_label;  // model_label: label for alerts
  // At most one of model, model_config, bytes_per_token.
  std::string model;                             // model: a curve::LookupModelPreset name, as written
  std::string model_config;                      // model_config: path of a Hugging Face config.json (not read here)
  std::optional<std::uint64_t> bytes_per_token;  // bytes_per_token: KV bytes per token per rank
  std::string kv_dtype;                          // kv_dtype: a curve::DtypeBytes name; with model/model_config only
  int tensor_parallel = 1;                       // tensor_parallel, >= 1; != 1 with model/model_config only
  // page_tokens, >= 1 (curve/'s default page size).
  int page_tokens = static_cast<int>(curve::ReportOptions{}.page_tokens);

  EngineSettings engine;
  CurveSettings curve;
  WebSettings web;
  StateSettings state;
  CollectorSettings collectors;
  AlertSettings alerts;
  // tenants.*, straight into the accounting's own options (curve/group_accounting.h).
  curve::TenantOptions tenants;

  bool operator==(const AgentConfig&) const = default;
};

// ------------------------------------------------------------------ Parsing

// Every default; the same as ParseAgentConfig("", ...).
AgentConfig DefaultAgentConfig();

// Parses and validates the text of a config file. source_name prefixes every
// error (normally the file's path). An empty document is a valid config.
base::Result<AgentConfig> ParseAgentConfig(std::string_view yaml_text, std::string_view source_name);

// Reads the file at path and parses it with the path as source name.
base::Result<AgentConfig> LoadAgentConfigFile(const std::string& path);

// Spellings used in the file.
std::string_view EngineLogKindName(base::EngineLogKind engine);  // "auto", "vllm", "sglang"
using alerts::WorkingSetTargetName;                              // "page_hit", "request_coverage"

}  // namespace kvwatch::config

#endif  // KVWATCH_CONFIG_AGENT_CONFIG_H_
