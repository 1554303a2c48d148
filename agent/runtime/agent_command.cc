#include "agent/runtime/agent_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "collectors/engine_log_collector.h"
#include "collectors/engine_metrics_collector.h"
#include "collectors/kv_events_collector.h"
#include "collectors/synth_collector.h"
#include "collectors/trace_file_collector.h"
#include "config/model_config.h"
#include "config/web_config.h"
#include "curve/sizing.h"

namespace kvwatch::agent {

using collectors::WallNow;
namespace {

using Options = base::Result<AgentOptions>;

// The synthetic replica: `kvwatch synth`'s workload, unbounded, played in real time.
collectors::SynthOptions SynthOptionsOf(const config::SynthSettings& s, int page_tokens) {
  collectors::SynthOptions o;
  o.page_tokens = page_tokens;
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
  return o;
}

}  // namespace

Options BuildAgentOptions(const config::AgentConfig& c) {
  AgentOptions o;
  o.replica = c.replica;
  o.engine = config::ToEngineOptions(c.engine);
  o.coverage_share = c.engine.coverage_share;
  o.sample_rate = c.engine.sample_rate;
  o.sample_max_pages = c.engine.sample_max_pages;
  o.page_tokens = static_cast<std::uint64_t>(c.page_tokens);

  // Bytes per token per rank: a preset, a config.json, or given.
  std::optional<curve::ModelSpec> spec;
  if (!c.model.empty()) {
    auto preset = curve::LookupModelPreset(c.model);
    if (!preset.ok()) return Options::Error("model: " + preset.error());
    spec = preset.value();
  } else if (!c.model_config.empty()) {
    auto parsed = config::ReadModelConfigFile(c.model_config);
    if (!parsed.ok()) return Options::Error("model_config: " + parsed.error());
    spec = parsed.value();
  }
  if (spec) {
    if (!c.kv_dtype.empty()) {
      auto bytes = curve::DtypeBytes(c.kv_dtype);
      if (!bytes.ok()) return Options::Error("kv_dtype: " + bytes.error());
      spec->bytes_per_element = bytes.value();
    }
    auto bpt = curve::BytesPerTokenPerRank(*spec, c.tensor_parallel);
    if (!bpt.ok()) return Options::Error("tensor_parallel: " + bpt.error());
    o.bytes_per_token = static_cast<double>(bpt.value());
    o.model_name = spec->name;
  } else if (c.bytes_per_token) {
    o.bytes_per_token = static_cast<double>(*c.bytes_per_token);
  }

  for (const auto& w : c.curve.windows) o.windows.push_back(WindowSpec{w.name, w.seconds});
  o.buckets_per_octave = c.curve.buckets_per_octave;
  o.page_hit_targets = c.curve.page_hit_targets;
  o.coverage_targets = c.curve.coverage_targets;
  o.capacities = c.curve.capacities;
  o.knee_sensitivity = c.curve.knee_sensitivity;
  o.knee_min_requests = c.curve.knee_window_min_requests;
  if (!c.curve.policies.empty()) {
    // The engine's own policy first, so every canary compares with canary (0, capacity).
    curve::CanaryOptions canaries;
    std::vector<std::string> names = {c.curve.engine_policy};
    for (const std::string& p : c.curve.policies) {
      if (std::find(names.begin(), names.end(), p) == names.end()) names.push_back(p);
    }
    for (const std::string& name : names) {
      auto kind = curve::ParsePolicyName(name);
      if (!kind.ok()) return Options::Error("curve.policies: " + kind.error());
      canaries.policies.push_back(kind.value());
    }
    canaries.lifetime.decode_tokens_per_s = c.curve.decode_tokens_per_second;
    canaries.lifetime.page_tokens = o.page_tokens;
    auto rules = curve::ParsePriorityRules(c.curve.policy_priorities);
    if (!rules.ok()) return Options::Error("curve.policy_priorities: " + rules.error());
    canaries.priorities = rules.value();
    o.canaries = std::move(canaries);
    o.engine_policy = c.curve.engine_policy;
  }

  o.http.listen_address = c.web.listen_address;
  o.http.port = c.web.port;
  if (!c.web.config_file.empty()) {
    auto web = config::ReadWebConfigFile(c.web.config_file);
    if (!web.ok()) return Options::Error("web.config_file: " + web.error());
    o.http.web = web.value();
  }
  o.refresh_seconds = c.web.refresh_seconds;
  // state.path is a directory: the agent's state file and the tail positions.
  if (!c.state.path.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(c.state.path, ec);
    if (ec) return Options::Error("state.path: cannot create '" + c.state.path + "': " + ec.message());
    o.state_path = (std::filesystem::path(c.state.path) / "state.bin").string();
  }
  o.state_interval = std::chrono::milliseconds(static_cast<std::int64_t>(c.state.interval_seconds * 1000));

  auto log = [](std::string_view collector, std::string_view message) {
    std::fprintf(stderr, "kvwatch agent: %.*s: %.*s\n", static_cast<int>(collector.size()), collector.data(),
                 static_cast<int>(message.size()), message.data());
  };
  for (std::size_t i = 0; i < c.collectors.trace_files.size(); ++i) {
    const config::TraceFileSettings& t = c.collectors.trace_files[i];
    collectors::TraceFileCollectorOptions to;
    to.name = t.name;
    to.tailer.patterns = t.paths;
    to.tailer.start_position = t.start_at == config::StartAt::kEnd ? collectors::TailStartPosition::kEnd
                                                                   : collectors::TailStartPosition::kBeginning;
    to.tailer.max_line_bytes = t.max_line_bytes;
    to.tailer.checkpoint_path = t.checkpoint;
    if (to.tailer.checkpoint_path.empty() && !c.state.path.empty()) {
      to.tailer.checkpoint_path = (std::filesystem::path(c.state.path) / ("tail-" + t.name + ".ckpt")).string();
    }
    to.record.timestamp_unit = t.timestamp_unit;
    to.record.tenant_fields = t.tenant_fields;
    to.poll_interval = std::chrono::milliseconds(static_cast<std::int64_t>(t.poll_interval_seconds * 1000));
    auto collector = collectors::TraceFileCollector::Create(std::move(to), log);
    if (!collector.ok()) {
      return Options::Error("collectors.trace_files[" + std::to_string(i) + "]: " + collector.error());
    }
    o.collectors.push_back(std::move(collector).value());
  }
  for (std::size_t i = 0; i < c.collectors.kv_events.size(); ++i) {
    const config::KvEventsSettings& k = c.collectors.kv_events[i];
    collectors::KvEventsCollectorOptions ko;
    ko.name = k.name;
    ko.endpoints = k.endpoints;
    ko.topic = k.topic;
    ko.replay_endpoint = k.replay_endpoint;
    ko.bind = k.bind;
    // Page ids are scoped by the model (curve-semantics.md section 1); the parent
    // map is bounded at 4x the tracked pages (see collectors/kv_event_tracker.h).
    ko.tracker.scope = c.model.empty() ? c.model_label : c.model;
    ko.tracker.parent_map_max_entries = std::size_t{4} * c.engine.max_pages;
    auto collector = collectors::KvEventsCollector::Create(std::move(ko), log);
    if (!collector.ok()) {
      return Options::Error("collectors.kv_events[" + std::to_string(i) + "]: " + collector.error());
    }
    o.collectors.push_back(std::move(collector).value());
  }
  for (std::size_t i = 0; i < c.collectors.engine_log.size(); ++i) {
    const config::EngineLogSettings& e = c.collectors.engine_log[i];
    collectors::EngineLogCollectorOptions eo;
    eo.name = e.name;
    eo.tailer.patterns = e.paths;
    eo.engine = e.engine == config::LogEngine::kVllm     ? collectors::EngineLogKind::kVllm
                : e.engine == config::LogEngine::kSglang ? collectors::EngineLogKind::kSglang
                                                         : collectors::EngineLogKind::kAuto;
    auto collector = collectors::EngineLogCollector::Create(std::move(eo), log);
    if (!collector.ok()) {
      return Options::Error("collectors.engine_log[" + std::to_string(i) + "]: " + collector.error());
    }
    o.collectors.push_back(std::move(collector).value());
  }
  for (std::size_t i = 0; i < c.collectors.engine_metrics.size(); ++i) {
    const config::EngineMetricsSettings& e = c.collectors.engine_metrics[i];
    collectors::EngineMetricsCollectorOptions mo;
    mo.name = e.name;
    mo.url = e.url;
    mo.interval = std::chrono::milliseconds(static_cast<std::int64_t>(e.interval_seconds * 1000));
    mo.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(e.timeout_seconds * 1000));
    mo.page_tokens = static_cast<std::uint32_t>(c.page_tokens);
    auto collector = collectors::EngineMetricsCollector::Create(std::move(mo), log);
    if (!collector.ok()) {
      return Options::Error("collectors.engine_metrics[" + std::to_string(i) + "]: " + collector.error());
    }
    o.collectors.push_back(std::move(collector).value());
  }
  if (c.alerts.enabled) {
    auto alerts = AlertRunnerOptionsFromConfig(c, o.model_name.value_or(""));
    if (!alerts.ok()) return Options::Error(alerts.error());
    o.alerts = std::move(alerts).value();
  }
  if (c.collectors.synth || !c.collectors.HasAnyCollector()) {
    auto synth = collectors::SynthCollector::Create(
        "synth", SynthOptionsOf(c.collectors.synth.value_or(config::SynthSettings{}), c.page_tokens), WallNow());
    if (!synth.ok()) return Options::Error("collectors.synth: " + synth.error());
    o.collectors.push_back(std::move(synth).value());
  }
  return o;
}

int RunAgent(const std::string& config_path) {
  auto config = config_path.empty() ? base::Result<config::AgentConfig>(config::DefaultAgentConfig())
                                    : config::LoadAgentConfigFile(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "kvwatch agent: %s\n", config.error().c_str());
    return 1;
  }
  auto options = BuildAgentOptions(config.value());
  if (!options.ok()) {
    std::fprintf(stderr, "kvwatch agent: %s%s\n", config_path.empty() ? "" : (config_path + ": ").c_str(),
                 options.error().c_str());
    return 1;
  }
  auto agent = Agent::Create(std::move(options).value());
  if (!agent.ok()) {
    std::fprintf(stderr, "kvwatch agent: %s\n", agent.error().c_str());
    return 1;
  }
  return agent.value()->Run();
}

int RunCheckConfig(const std::string& config_path) {
  auto config = config::LoadAgentConfigFile(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "kvwatch check-config: %s\n", config.error().c_str());
    return 1;
  }
  auto options = BuildAgentOptions(config.value());
  if (!options.ok()) {
    std::fprintf(stderr, "kvwatch check-config: %s: %s\n", config_path.c_str(), options.error().c_str());
    return 1;
  }
  std::printf("%s: valid\n", config_path.c_str());
  return 0;
}

}  // namespace kvwatch::agent
