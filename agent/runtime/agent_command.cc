#include "agent/runtime/agent_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "agent/runtime/collector_registry.h"
#include "config/model_config.h"
#include "config/web_config.h"
#include "curve/sizing.h"

namespace kvwatch::agent {

namespace {

using Options = base::Result<AgentOptions>;

// The config file, with collectors.* read too (collector_registry.h), so that
// every error in the file reads "SOURCE:LINE: KEY: message".
base::Result<config::AgentConfig> LoadConfig(const std::string& path) {
  auto config = config::LoadAgentConfigFile(path);
  if (!config.ok()) return config;
  auto collectors = ParseCollectors(config.value());
  if (!collectors.ok()) return base::Result<config::AgentConfig>::Error(collectors.error());
  return config;
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

  o.curve = c.curve;
  o.tenants = c.tenants;
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
  }

  o.http.listen_address = c.web.listen_address;
  o.http.port = c.web.port;
  o.http.max_connections = static_cast<std::size_t>(c.web.max_connections);
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
  o.state_interval = c.state.SaveInterval();

  auto log = [](std::string_view collector, std::string_view message) {
    std::fprintf(stderr, "kvwatch agent: %.*s: %.*s\n", static_cast<int>(collector.size()), collector.data(),
                 static_cast<int>(message.size()), message.data());
  };
  auto collectors = BuildCollectors(c, log);
  if (!collectors.ok()) return Options::Error(collectors.error());
  o.collectors = std::move(collectors).value();
  if (c.alerts.enabled) {
    AlertRunnerContext context;
    context.replica = o.replica;
    context.model = c.model_label.empty() ? o.model_name.value_or("") : c.model_label;
    for (const WindowSpec& w : o.curve.windows) context.window_seconds.push_back(w.seconds);
    context.capacities = o.curve.capacities;
    auto alerts = AlertRunnerOptionsFromConfig(c.alerts, context);
    if (!alerts.ok()) return Options::Error(alerts.error());
    o.alerts = std::move(alerts).value();
  }
  return o;
}

int RunAgent(const std::string& config_path) {
  auto config = config_path.empty() ? base::Result<config::AgentConfig>(config::DefaultAgentConfig())
                                    : LoadConfig(config_path);
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
  auto config = LoadConfig(config_path);
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
