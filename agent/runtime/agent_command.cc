#include "agent/runtime/agent_command.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "agent/runtime/builtin_config.h"
#include "agent/runtime/collector_registry.h"
#include "agent/web/http_server.h"
#include "config/model_choice.h"
#include "config/web_config.h"
#include "curve/policy_canaries.h"
#include "curve/sizing.h"

namespace kvwatch::agent {

namespace {

using Options = base::Result<AgentOptions>;

// "" when the HTTP server can resolve its listen address as it will when it
// starts (cpp-httplib 0.11.4's getaddrinfo: any family, a stream socket, passive);
// else why not. Whether the port is free is a fact of the run, not of the config.
std::string ListenAddressProblem(const std::string& host, int port, bool resolve_names) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | (resolve_names ? 0 : AI_NUMERICHOST);
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (found != nullptr) ::freeaddrinfo(found);
  if (rc == 0 || (!resolve_names && rc == EAI_NONAME)) return "";
  return "cannot resolve \"" + host + "\": " + ::gai_strerror(rc);
}

// "" when create_directories(path) can make path a directory, checked without
// creating anything: every component that exists is a directory, and the deepest
// existing one is writable when something is left to create.
std::string DirectoryProblem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target = fs::absolute(path, ec);
  if (ec) return "'" + path + "': " + ec.message();
  for (fs::path p = target;; p = p.parent_path()) {
    const fs::file_status st = fs::status(p, ec);
    if (st.type() == fs::file_type::not_found) {
      if (p == p.parent_path()) return "'" + path + "': no existing parent directory";
      continue;
    }
    if (ec) return "'" + p.string() + "': " + ec.message();
    if (st.type() != fs::file_type::directory) {
      return "cannot create '" + path + "': '" + p.string() + "' exists and is not a directory";
    }
    if (p != target && ::access(p.c_str(), W_OK | X_OK) != 0) {
      return "cannot create '" + path + "': '" + p.string() + "': " + std::strerror(errno);
    }
    return "";
  }
}

}  // namespace

base::Result<ValidatedConfig> ValidateAgentConfig(const config::AgentConfig& c, const ValidationOptions& options) {
  using R = base::Result<ValidatedConfig>;
  ValidatedConfig v;
  AgentOptions& o = v.options;
  o.replica = c.replica;
  o.engine = config::ToEngineOptions(c.engine);
  o.coverage_share = c.engine.coverage_share;
  o.sample_rate = c.engine.sample_rate;
  o.sample_max_pages = c.engine.sample_max_pages;
  o.page_tokens = static_cast<std::uint64_t>(c.page_tokens);

  // Bytes per token per rank: a preset, a config.json, or given (config/model_choice.h).
  config::ModelChoice model;
  model.model = c.model;
  model.model_config = c.model_config;
  if (c.bytes_per_token) model.bytes_per_token = static_cast<double>(*c.bytes_per_token);
  model.kv_dtype = c.kv_dtype;
  model.tensor_parallel = c.tensor_parallel;
  auto resolved = config::ResolveModel(model, *options.model_names);
  if (!resolved.ok()) return R::Error(resolved.error());
  o.bytes_per_token = resolved.value().bytes_per_token;
  if (resolved.value().spec) {
    o.model_name = resolved.value().spec->name;
    // A hybrid model's groups, bounded as the dense engine is (hybrid_analysis.h).
    auto hybrid = HybridModelFor(*resolved.value().spec, resolved.value().tensor_parallel, o.page_tokens,
                                 o.engine.touch_order, o.engine.max_pages, o.engine.remembered_evictions,
                                 *o.bytes_per_token * static_cast<double>(o.page_tokens));
    if (!hybrid.ok()) return R::Error(resolved.value().spec_source + ": " + hybrid.error());
    o.hybrid = std::move(hybrid).value();
  }

  o.curve = c.curve;
  o.tenants = c.tenants;
  // Agent::Init's checks of the tenant accounting (exact engine only).
  const bool sampled = o.sample_rate < 1.0 || o.sample_max_pages > 0;
  if (o.tenants.enabled && !sampled) {
    if (base::Status s = o.tenants.Validate("tenants."); !s.ok()) return R::Error(s.error());
  }
  if (!c.curve.policies.empty()) {
    // Checked by config/ (online policies, capacities to run at, at most 64
    // canaries); the windows and capacities are filled in by Agent::Init.
    curve::CanaryOptions canaries;
    canaries.policies = c.curve.CanaryPolicies();
    canaries.lifetime.decode_tokens_per_s = c.curve.decode_tokens_per_second;
    canaries.lifetime.page_tokens = o.page_tokens;
    canaries.priorities = c.curve.policy_priorities;
    canaries.s3fifo_promotion_hits = c.curve.s3fifo_promotion_hits;
    o.canaries = std::move(canaries);
  }

  // The HTTP server as Agent::Init creates it: the web config file read, its TLS
  // certificates and key loaded and checked against each other, its users'
  // hashes checked. No socket: HttpServer::Create does not listen.
  o.http.listen_address = c.web.listen_address;
  o.http.port = c.web.port;
  o.http.max_connections = static_cast<std::size_t>(c.web.max_connections);
  if (!c.web.config_file.empty()) {
    auto web = config::ReadWebConfigFile(c.web.config_file);
    if (!web.ok()) return R::Error("web.config_file: " + web.error());
    o.http.web = web.value();
    o.web_config_file = c.web.config_file;  // re-read on SIGHUP
  }
  {
    auto server = HttpServer::Create(o.http);
    if (!server.ok()) return R::Error((o.http.web ? "web.config_file: " : "web: ") + server.error());
  }
  if (std::string problem = ListenAddressProblem(o.http.listen_address, o.http.port, options.resolve_host_names);
      !problem.empty()) {
    return R::Error("web.listen_address: " + problem);
  }
  o.refresh_seconds = c.web.refresh_seconds;
  // state.path is a directory: the agent's state file and the tail positions.
  if (!c.state.path.empty()) {
    if (std::string problem = DirectoryProblem(c.state.path); !problem.empty()) {
      return R::Error("state.path: " + problem);
    }
    v.state_dir = c.state.path;
    o.state_path = (std::filesystem::path(c.state.path) / "state.bin").string();
  }
  o.state_interval = c.state.SaveInterval();

  for (const CollectorSpec& spec : c.collectors.specs) {
    if (base::Status s = ValidateCollector(spec); !s.ok()) return R::Error(spec.where + ": " + s.error());
  }
  v.collectors = c.collectors.specs;
  if (c.alerts.enabled) {
    AlertRunnerContext context;
    context.replica = o.replica;
    context.model = c.model_label.empty() ? o.model_name.value_or("") : c.model_label;
    context.windows = o.curve.windows;
    context.capacities = o.curve.capacities;
    auto alerts = AlertRunnerOptionsFromConfig(c.alerts, context, options.command);
    if (!alerts.ok()) return R::Error(alerts.error());
    if (base::Status s = AlertRunner::ValidateOptions(alerts.value()); !s.ok()) return R::Error(s.error());
    o.alerts = std::move(alerts).value();
  }
  return v;
}

Options BuildAgentOptions(const config::AgentConfig& c, const ValidationOptions& options) {
  auto validated = ValidateAgentConfig(c, options);
  if (!validated.ok()) return Options::Error(validated.error());
  ValidatedConfig& v = validated.value();
  AgentOptions o = std::move(v.options);
  if (!v.state_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(v.state_dir, ec);
    if (ec) return Options::Error("state.path: cannot create '" + v.state_dir + "': " + ec.message());
  }
  auto log = [](std::string_view collector, std::string_view message) {
    std::fprintf(stderr, "kvwatch agent: %.*s: %.*s\n", static_cast<int>(collector.size()), collector.data(),
                 static_cast<int>(message.size()), message.data());
  };
  auto collectors = BuildCollectors(std::move(v.collectors), log);
  if (!collectors.ok()) return Options::Error(collectors.error());
  o.collectors = std::move(collectors).value();
  return o;
}

base::Status CheckConfigText(std::string_view yaml, const std::string& source, const ValidationOptions& options) {
  auto config = config::ParseAgentConfig(yaml, source);
  if (!config.ok()) return config.status();
  auto validated = ValidateAgentConfig(config.value(), options);
  return validated.ok() ? base::Status::Ok() : base::Status::Error(source + ": " + validated.error());
}

base::Status ApplyModelFlags(const AgentFlags& flags, config::AgentConfig* c) {
  const config::ModelChoice& m = flags.model;
  if (!m.model.empty() || !m.model_config.empty() || m.bytes_per_token) {
    c->model = m.model;
    c->model_config = m.model_config;
    c->bytes_per_token.reset();
    if (m.bytes_per_token) {
      const double bytes = *m.bytes_per_token;
      if (!(bytes >= 1 && bytes == std::floor(bytes) && bytes < 18446744073709551616.0)) {
        return base::Status::Error("--bytes-per-token: the agent takes a whole number of bytes >= 1");
      }
      c->bytes_per_token = static_cast<std::uint64_t>(bytes);
    }
  }
  if (!m.kv_dtype.empty()) c->kv_dtype = m.kv_dtype;
  if (flags.tensor_parallel_given) c->tensor_parallel = m.tensor_parallel;
  if (m.parameters || m.total_parameters) {
    return base::Status::Error(std::string(m.parameters ? "--parameters" : "--total-parameters") +
                               ": applies to replay and simulate (the agent has no time model)");
  }
  // As the config refuses tensor_parallel without a model (config/agent_config.cc).
  if (c->tensor_parallel != 1 && c->model.empty() && c->model_config.empty()) {
    return base::Status::Error("--tensor-parallel: applies to --model or --model-config, and neither is set");
  }
  return base::Status::Ok();
}

namespace {

// The config file (or the built-in one) with the model flags applied; the
// validation names the flags when they gave the model.
base::Result<config::AgentConfig> LoadWithFlags(const AgentFlags& flags, ValidationOptions* validation) {
  auto config = flags.config_path.empty() ? BuiltInAgentConfig() : config::LoadAgentConfigFile(flags.config_path);
  if (!config.ok() || !flags.ModelGiven()) return config;
  if (base::Status s = ApplyModelFlags(flags, &config.value()); !s.ok()) {
    return base::Result<config::AgentConfig>::Error(s.error());
  }
  validation->model_names = &config::kModelFlags;
  return config;
}

}  // namespace

int RunAgent(const AgentFlags& flags) {
  // A write to a closed pipe (stderr when journald restarts, a peer gone) returns
  // EPIPE rather than ending the agent silently: systemd counts a death by SIGPIPE
  // as a clean exit, which Restart=on-failure would not restart.
  std::signal(SIGPIPE, SIG_IGN);
  // No config file: the built-in synthetic replica (builtin_config.h).
  ValidationOptions validation;
  auto config = LoadWithFlags(flags, &validation);
  if (!config.ok()) {
    std::fprintf(stderr, "kvwatch agent: %s\n", config.error().c_str());
    return 1;
  }
  auto options = BuildAgentOptions(config.value(), validation);
  if (!options.ok()) {
    std::fprintf(stderr, "kvwatch agent: %s%s\n", flags.config_path.empty() ? "" : (flags.config_path + ": ").c_str(),
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

int RunCheckConfig(const AgentFlags& flags) {
  ValidationOptions validation;
  validation.command = "kvwatch check-config";
  auto config = LoadWithFlags(flags, &validation);
  if (!config.ok()) {
    std::fprintf(stderr, "kvwatch check-config: %s\n", config.error().c_str());
    return 1;
  }
  auto validated = ValidateAgentConfig(config.value(), validation);
  if (!validated.ok()) {
    std::fprintf(stderr, "kvwatch check-config: %s: %s\n", flags.config_path.c_str(), validated.error().c_str());
    return 1;
  }
  std::printf("%s: valid\n", flags.config_path.c_str());
  return 0;
}

}  // namespace kvwatch::agent
