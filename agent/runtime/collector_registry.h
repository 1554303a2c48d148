// The collector registry: one row per kind of collector (its config key, how many
// the config asks for, and the factory that turns one item of the config into a
// running collector). BuildCollectors() walks the table once, so a new kind is one
// row and one factory, not another loop in the agent's wiring.
//
// Thread safety: the table is immutable; BuildCollectors() creates collectors and
// may be called from any thread.
#ifndef KVWATCH_AGENT_RUNTIME_COLLECTOR_REGISTRY_H_
#define KVWATCH_AGENT_RUNTIME_COLLECTOR_REGISTRY_H_

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "collectors/collector.h"
#include "config/agent_config.h"

namespace kvwatch::agent {

struct CollectorKind {
  std::string_view key;  // "collectors.trace_files"; errors name key[index] (key alone for a single map)
  bool is_list;          // whether the key is a list of maps
  // How many collectors of this kind the config asks for.
  std::size_t (*count)(const config::AgentConfig& config);
  // The index-th of them, created (not started).
  base::Result<std::unique_ptr<collectors::Collector>> (*make)(const config::AgentConfig& config, std::size_t index,
                                                               const collectors::CollectorLog& log);
};

// Every kind, in the order the agent creates them: trace_files, kv_events,
// engine_log, engine_metrics, synth (synth also runs, with its defaults, when no
// collector at all is configured).
std::span<const CollectorKind> CollectorKinds();

// Every collector the config asks for; errors name the item ("collectors.kv_events[1]: ...").
base::Result<std::vector<std::unique_ptr<collectors::Collector>>> BuildCollectors(
    const config::AgentConfig& config, const collectors::CollectorLog& log);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_COLLECTOR_REGISTRY_H_
