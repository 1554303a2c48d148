// A hybrid model's /metrics families (kvwatch_hybrid_*) and the window reports
// they and the JSON API read: the curve under the hybrid rule
// (hybrid_analysis.h) in bytes per GPU rank. A dense model has none of them.
//
// Thread safety: stateless; runs on the HTTP handler's thread, outside the
// agent's mutex.
#ifndef KVWATCH_AGENT_RUNTIME_HYBRID_METRICS_H_
#define KVWATCH_AGENT_RUNTIME_HYBRID_METRICS_H_

#include "agent/runtime/hybrid_analysis.h"
#include "agent/runtime/metrics.h"
#include "agent/runtime/snapshot.h"
#include "base/metric_def.h"
#include "curve/report.h"

namespace kvwatch::agent {

struct AgentOptions;  // agent.h

base::MetricDefs HybridMetricDefs();

// The report of a hybrid window curve: capacities in units of the snapshot's
// unit_bytes (capacity_pages counts units), bytes per GPU rank, the working
// sets for the configured targets and the knee; points at curve.capacities'
// units, in their order.
curve::CurveReport HybridWindowReport(const AgentOptions& options, const HybridSnapshot& hybrid,
                                      const curve::BucketedCurve& window);

// The kvwatch_hybrid_* families: the model's groups, per window the working
// sets, knee, hit ratio and coverage at curve.capacities and the bytes of each
// group at the working sets, the engine's bound, and per collector whether the
// groups its engine announces match the model (also for a dense model, when a
// KV-event stream announces groups other than full attention).
void AppendHybridMetrics(MetricsBuilder& m, const AgentOptions& options, const AgentSnapshot& snapshot);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_HYBRID_METRICS_H_
