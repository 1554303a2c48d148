// The config `kvwatch agent` runs with when no --config is given (scripts/demo.sh):
// a built-in synthetic replica set up so that the first page shows what kvwatch
// does: a model preset (so every capacity is also in bytes per GPU rank), the
// synthetic replica's tenants and request classes, two eviction-policy canaries
// beside the engine's own LRU, and a configured cache size.
//
// It is YAML text parsed like a config file (source name "(built-in config)"), so
// it uses only keys that exist and is validated like any other; docs/configuration.md
// shows it verbatim (tested).
//
// Thread safety: pure functions.
#ifndef KVWATCH_AGENT_RUNTIME_BUILTIN_CONFIG_H_
#define KVWATCH_AGENT_RUNTIME_BUILTIN_CONFIG_H_

#include <string_view>

#include "base/status.h"
#include "config/agent_config.h"

namespace kvwatch::agent {

// The YAML text, comments included; ends with a newline.
std::string_view BuiltInConfigYaml();

// BuiltInConfigYaml() parsed.
base::Result<config::AgentConfig> BuiltInAgentConfig();

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_BUILTIN_CONFIG_H_
