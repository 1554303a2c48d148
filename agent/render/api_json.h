// The JSON of the agent's live API (GET /api/v1/curve) and the curve-report
// fields it shares with `kvwatch replay --format json`. The field names follow the
// contract of docs/semantics.md section 7: fields may be added,
// none renamed. Pure functions: no I/O, no state.
#ifndef KVWATCH_AGENT_RENDER_API_JSON_H_
#define KVWATCH_AGENT_RENDER_API_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/render/curve_point.h"
#include "base/json_writer.h"
#include "curve/report.h"
#include "curve/sizing.h"
#include "curve/tenants.h"

namespace kvwatch::agent {

// The fields every curve report has (requests ... knee), into the object being
// written; shared by the replay output and the agent's /api/v1/curve. Each
// point is WriteCurvePoint's (agent/render/curve_point.h).
void WriteCurveReportFields(base::JsonWriter& w, const curve::CurveReport& r);
// The fields every hybrid curve has, into the object being written (shared by
// replay's "hybrid" object and the agent's): unit_bytes,
// full_attention_bytes_per_token, groups (kind, layers, window_tokens,
// bytes_per_token, state_bytes, page_bytes) and the curve report's fields.
void WriteHybridCurveFields(base::JsonWriter& w, double unit_bytes, double full_attention_bytes_per_token,
                            const std::vector<curve::KvGroupSizing>& groups, const curve::CurveReport& report);

// The agent's GET /api/v1/curve answer for one window: the replay contract's
// fields, plus the window, the `plot` series and the configured capacities.
struct CurveApiContext {
  std::string window;  // as configured: "5m"
  double window_seconds = 0;
  std::string replica;
  std::vector<std::uint64_t> capacities;  // curve.capacities
  std::uint64_t tracked_pages = 0;
  double bucket_relative_error = 0;
  // The live policy canaries over this window (curve.policies); empty without.
  struct Canary {
    std::string policy;
    std::uint64_t capacity_pages = 0;
    double page_hit_ratio = 0;
    std::optional<double> request_coverage;  // nullopt when the engine samples
    double gain = 0;                         // page hit ratio minus the engine policy's
    bool engine = false;                     // this is curve.engine_policy
  };
  std::vector<Canary> policies;
  // The window's KV load factor and what it rests on (agent/runtime/load_metrics.h).
  struct KvLoad {
    std::uint64_t requests = 0;                   // every request of the window
    std::uint64_t sized_requests = 0;             // with prompt and output token counts
    double span_seconds = 0;                      // what the arrival rate is over
    std::optional<double> load_factor;            // nullopt: no sized request or no capacity
    std::optional<double> mean_kv_token_seconds;  // nullopt: no sized request
    double decode_tokens_per_second = 0;
    std::string decode_source;              // "engine" or "config"
    double prefill_seconds = 0;             // charged per prompt on top of the decode time
    std::string prefill_source;             // "engine" or "config"
    std::optional<double> capacity_tokens;  // nullopt: unknown
    std::string capacity_source;
    // Per class label: the output-length quantiles of kOutputQuantiles, in tokens.
    std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::uint64_t>>>> output_tokens;
  };
  KvLoad kv_load;
  // A hybrid model's curve over this window (agent/runtime/hybrid_analysis.h),
  // the "hybrid" object; nullopt (no such key) for a dense model.
  struct Hybrid {
    curve::CurveReport report;  // capacity_pages count units of unit_bytes; bytes per GPU rank
    double unit_bytes = 0;
    double full_attention_bytes_per_token = 0;  // the same model counted as all full attention
    std::vector<curve::KvGroupSizing> groups;
    std::vector<std::uint64_t> capacity_units;  // curve.capacities' bytes, in units, in their order
    struct GroupBytes {
      std::string target;
      double fraction = 0;
      std::uint64_t capacity_units = 0;
      std::vector<std::uint64_t> bytes;  // per group
    };
    std::vector<GroupBytes> group_bytes;  // at each working set reached
    std::uint64_t tracked_bytes = 0;
    std::uint64_t tracked_bytes_limit = 0;
    std::uint64_t evicted_items = 0;
  };
  std::optional<Hybrid> hybrid;
};
std::string RenderCurveApiJson(const curve::CurveReport& r, const CurveApiContext& context);

// The agent's GET /api/v1/groups answer for one window: per dimension ("tenant",
// "class") and labelled group, its requests and page references in the window,
// its curve in the one shared cache at every bucket bound (`points`: page hit
// ratio, request coverage, and with isolated curves the isolated page hit ratio),
// and at each configured capacity (`at_capacities`: page hits, capacity misses,
// unattributed misses, isolated page hits, and `evicted_by`: evictor group ->
// attributed misses). Groups without requests in the window are left out.
struct GroupsApiContext {
  std::string window;
  double window_seconds = 0;
  std::string replica;
  std::vector<std::string> tenant_labels;  // by group id; "" for a slot never owned
  std::vector<std::string> class_labels;
};
std::string RenderGroupsApiJson(const curve::GroupCurves& window, const GroupsApiContext& context);

// What one window's curve said at one time: the history the agent keeps of its
// windows (agent/runtime/curve_history.h) and serves at GET /api/v1/history.
struct HistorySample {
  std::uint64_t requests = 0;
  std::optional<std::uint64_t> knee_pages;  // nullopt: no knee
  // One per HistoryApiContext::targets, in that order; nullopt: not converged.
  std::vector<std::optional<std::uint64_t>> working_set_pages;
};
struct HistoryPoint {
  double time_s = 0;  // Unix time of the sample (the agent's wall clock)
  HistorySample sample;
};

// The agent's GET /api/v1/history answer for one window: `targets` once, then
// `points` oldest first ({time, requests, knee_pages, working_set_pages}), with
// the byte size of a page (null without a model) and the configured capacities,
// so that a reader can draw them against the capacities without another call.
struct HistoryApiContext {
  std::string window;
  double window_seconds = 0;
  std::string replica;
  double interval_seconds = 0;  // between the points now kept (it doubles as they thin out)
  std::optional<double> bytes_per_page;
  std::vector<std::uint64_t> capacities;  // curve.capacities
  struct Target {
    std::string target;  // "page_hit" or "request_coverage"
    double fraction = 0;
  };
  std::vector<Target> targets;
  std::vector<HistoryPoint> points;
};
std::string RenderHistoryApiJson(const HistoryApiContext& context);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RENDER_API_JSON_H_
