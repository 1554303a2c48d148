#include "agent/runtime/builtin_config.h"

namespace kvwatch::agent {

std::string_view BuiltInConfigYaml() {
  // Sizes: at 5 requests/s the synthetic replica's 0.95 page-hit working set is
  // about 1,000 pages after one minute and 2,200 after five, its 0.5 one about 200;
  // 1,024 pages (2 GiB per rank with llama-3-8b at 16 tokens a page) sits between,
  // so the capacity line, the capacity misses and the canaries' differences show
  // from the first minute on (builtin_config_test checks this).
  return R"yaml(# kvwatch agent with no --config: a synthetic replica serving llama-3-8b.
replica: demo
model: llama-3-8b          # KV bytes per token per GPU rank: sizes in bytes too
page_tokens: 16
curve:
  capacities: [1024]       # the replica's cache: 1,024 pages (2 GiB per rank)
  policies: [s3fifo, lfu]  # eviction canaries beside the engine's own lru
tenants:
  enabled: true            # tenant and class rows (the synth has 4 tenants)
collectors:
  synth:
    rate: 5                # requests per second
    tenants: 4
)yaml";
}

base::Result<config::AgentConfig> BuiltInAgentConfig() {
  return config::ParseAgentConfig(BuiltInConfigYaml(), "(built-in config)");
}

}  // namespace kvwatch::agent
