// `kvwatch agent` and `kvwatch check-config`: turn a validated config into the
// agent's resolved options (model geometry, web config, collectors) and run it.
#ifndef KVWATCH_AGENT_AGENT_COMMAND_H_
#define KVWATCH_AGENT_AGENT_COMMAND_H_

#include <string>

#include "agent/runtime/agent.h"
#include "config/agent_config.h"

namespace kvwatch::agent {

// Resolves everything that can fail at start-up (the model, the web config file,
// collectors); errors name the config key.
base::Result<AgentOptions> BuildAgentOptions(const config::AgentConfig& config);

// config_path empty: the built-in default (the synthetic replica). Returns the
// process exit code: 0, or 1 when start-up fails (the message names the key).
int RunAgent(const std::string& config_path);
// Validates a config file as start-up would and exits: 0 valid, 1 not.
int RunCheckConfig(const std::string& config_path);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_AGENT_COMMAND_H_
