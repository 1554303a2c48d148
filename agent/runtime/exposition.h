// The agent's /metrics: its metric families (one table each, for the agent and
// for the policy canaries; metrics.h lists every other component's table) and the
// text of a scrape rendered from a snapshot (snapshot.h). Which family says what
// is in docs/metrics.md, generated from these tables (metric_catalog.h).
//
// Thread safety: stateless; RenderMetricsText runs on the HTTP handler's thread,
// outside the agent's mutex.
#ifndef KVWATCH_AGENT_RUNTIME_EXPOSITION_H_
#define KVWATCH_AGENT_RUNTIME_EXPOSITION_H_

#include <string>

#include "agent/runtime/snapshot.h"
#include "base/metric_def.h"

namespace kvwatch::agent {

struct AgentOptions;  // agent.h
class AlertRunner;    // alert_runner.h

// The agent's own metric families (curves, windows, collectors' stats, state)
// and the policy canaries', in exposition order, for the metrics reference.
base::MetricDefs AgentMetricDefs();
base::MetricDefs CanaryMetricDefs();

// The whole /metrics text (Prometheus text format 0.0.4): the agent's families
// from `snapshot` (which must hold its windows and canaries), the tenants' and
// classes' (group_metrics.h), the collectors' samples, the alert runner's
// (`alerts`, null when alerts are off) and the process_* families.
std::string RenderMetricsText(const AgentOptions& options, const AgentSnapshot& snapshot, const AlertRunner* alerts);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_EXPOSITION_H_
