// The KV load factor's metric families (issue 19, "Live"): rho per curve window
// (curve/kv_load.h: arrival rate x mean KV token-seconds per request / KV
// capacity in tokens), what it rests on, and each class's output-length
// quantiles; and the same numbers as the KV load alert's input.
//
// Where the inputs come from:
//   decode rate   the mean over the engine /metrics collectors that report one
//                 (1 / the mean inter-token latency of its last scrape
//                 interval), else curve.decode_tokens_per_second (default 50);
//   KV capacity   the sum of the engines' reported capacities
//                 (kvwatch_engine_capacity_pages) x page_tokens, else the largest
//                 of curve.capacities x page_tokens; none: no load factor;
//   prefill time  the mean over the engine /metrics collectors that report one
//                 (the mean prefill seconds of its last scrape interval: vLLM's
//                 request_prefill_time, else time to first token minus queue
//                 time), else curve.prefill_seconds (default 0); each prompt's KV
//                 is charged for it on top of output / decode rate seconds
//                 (curve::KvTokenSeconds; queueing holds no KV).
// A window without a request with both token counts has no load factor and no
// mean (absent, not 0): KV events give no output lengths. The quantiles need the
// classes (tenants.enabled, exact engine) and output lengths.
//
// Series: 3 per window (factor, requests, mean), 3 sources, and at most W x (class_top_k +
// 1) x 3 quantiles (81 with the defaults).
//
// Thread safety: stateless functions over const data.
#ifndef KVWATCH_AGENT_RUNTIME_LOAD_METRICS_H_
#define KVWATCH_AGENT_RUNTIME_LOAD_METRICS_H_

#include <optional>
#include <string>
#include <vector>

#include "agent/render/api_json.h"
#include "agent/runtime/metrics.h"
#include "agent/runtime/snapshot.h"
#include "alerts/inputs.h"
#include "base/metric_def.h"
#include "curve/kv_load.h"

namespace kvwatch::agent {

struct AgentOptions;  // agent.h

// Every family of this file, in exposition order.
extern const base::MetricDef kLoadMetrics[7];

// The quantiles exported per class.
inline constexpr double kOutputQuantiles[] = {0.5, 0.9, 0.99};

// The decode rate, prefill time and KV capacity the load factor uses, and where
// each came from ("engine" or "config"): over the engine /metrics collectors that
// report one, the mean decode rate, the mean prefill time and the sum of the
// capacities (one replica's data-parallel engines); else the config's.
struct KvLoadSources {
  double decode_tokens_per_s = 0;
  std::string decode_source;
  double prefill_s = 0;
  std::string prefill_source;
  std::optional<double> capacity_tokens;  // nullopt: unknown
  std::string capacity_source;
};
KvLoadSources KvLoadSourcesOf(const AgentOptions& options, const std::vector<CollectorCopy>& collectors);

// The load of one window; nullopt as curve::KvLoadOf.
std::optional<curve::KvLoad> WindowKvLoad(const AnalysisSnapshot::LoadWindow& window, const KvLoadSources& sources);

// The families, from a snapshot that holds its windows.
void AppendLoadMetrics(MetricsBuilder& m, const AgentOptions& options, const AgentSnapshot& snapshot);

// /api/v1/curve's kv_load object for window `window` of the snapshot.
CurveApiContext::KvLoad KvLoadApiOf(const AgentOptions& options, const AgentSnapshot& snapshot, std::size_t window);

// The KV load alert's input: window `window` of the snapshot; nullopt without a
// load factor there.
std::optional<alerts::KvLoadSample> KvLoadSampleOf(const AgentOptions& options, const AgentSnapshot& snapshot,
                                                   std::optional<std::size_t> window);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_LOAD_METRICS_H_
