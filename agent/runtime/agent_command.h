// `kvwatch agent` and `kvwatch check-config`: one validation of a config (what
// start-up checks, creating nothing), then, for the agent, the resolved options
// (model geometry, web config, collectors) and the run.
#ifndef KVWATCH_AGENT_AGENT_COMMAND_H_
#define KVWATCH_AGENT_AGENT_COMMAND_H_

#include <string>
#include <string_view>
#include <vector>

#include "agent/runtime/agent.h"
#include "agent/runtime/collector_registry.h"
#include "config/agent_config.h"
#include "config/model_choice.h"

namespace kvwatch::agent {

// What start-up resolves from a config before it creates anything: the agent's
// options without collectors, the state directory still to be created, and the
// collectors' parsed options.
struct ValidatedConfig {
  AgentOptions options;   // options.collectors is empty
  std::string state_dir;  // state.path; empty: none
  std::vector<CollectorSpec> collectors;
};

// Every check start-up makes on a config, and only checks: the model (preset or
// config.json read), the canary policies, the tenant accounting, the web config
// file read and its TLS certificate and key loaded and parsed (HttpServer::Create,
// which does not listen), the listen address resolved, the state directory
// creatable, every collector's settings parsed and checked as its Create() would
// (ValidateCollector), the alerts and notifiers. It creates no socket, thread,
// file or directory. Errors name the config key. Both `kvwatch agent` (through
// BuildAgentOptions) and `kvwatch check-config` run it, so they agree on every
// config; what only the run can tell (a busy port, a ZeroMQ endpoint that cannot
// be bound, an unreachable URL) is not a config error.
struct ValidationOptions {
  // Resolve web.listen_address as the server will (getaddrinfo, which may ask
  // DNS). false: numeric addresses only are checked, names are accepted unseen
  // (the fuzz target, which must not query DNS for every input).
  bool resolve_host_names = true;
  // How errors name the model inputs: the config keys, or the flags when the
  // command line gave the model (ApplyModelFlags).
  const config::ModelNames* model_names = &config::kModelKeys;
  // The command the notes on stderr name ("kvwatch agent: alerts: ...").
  std::string_view command = "kvwatch agent";
};
base::Result<ValidatedConfig> ValidateAgentConfig(const config::AgentConfig& config,
                                                  const ValidationOptions& options = {});

// Start-up: ValidateAgentConfig, then create the state directory and the
// collectors (which may bind or connect sockets and start threads).
base::Result<AgentOptions> BuildAgentOptions(const config::AgentConfig& config, const ValidationOptions& options = {});

// `kvwatch agent` and `kvwatch check-config`: the config file and the model flags
// every command takes (config/model_choice.h), which override the config's keys
// (model, model_config, bytes_per_token: all three when one is given; kv_dtype;
// tensor_parallel).
struct AgentFlags {
  std::string config_path;  // empty: the built-in config (agent only)
  config::ModelChoice model;
  bool tensor_parallel_given = false;
  bool ModelGiven() const { return model.Given() || tensor_parallel_given; }
};
// The config with the flags' model in place of its own. Errors name the flag:
// a bytes per token that is not a whole number, a tensor-parallel size without a
// model (as the config refuses it).
base::Status ApplyModelFlags(const AgentFlags& flags, config::AgentConfig* config);

// `kvwatch check-config` on a document held in memory (source names it in
// errors): parse and ValidateAgentConfig, touching nothing. The fuzz target's
// entry point.
base::Status CheckConfigText(std::string_view yaml, const std::string& source, const ValidationOptions& options = {});

// flags.config_path empty: the built-in config (builtin_config.h: the synthetic replica
// with a model, tenants, two canaries and a cache size). Returns the
// process exit code: 0, or 1 when start-up fails (the message names the key).
int RunAgent(const AgentFlags& flags);
// Validates a config file (with the model flags) as start-up would and exits: 0 valid, 1 not.
int RunCheckConfig(const AgentFlags& flags);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_AGENT_COMMAND_H_
