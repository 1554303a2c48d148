// What `kvwatch replay` found for a hybrid model (agent/cli/replay_hybrid.h runs
// it): the curve under the hybrid hit rule in bytes, the groups' sizes, the bytes
// each group holds per pool size and --hybrid-check's rows; and its renderings,
// the "hybrid" object of the JSON output (docs/replay.md) and the table's hybrid
// section.
//
// Thread safety: pure functions over values.
#ifndef KVWATCH_AGENT_RENDER_REPLAY_HYBRID_OUTPUT_H_
#define KVWATCH_AGENT_RENDER_REPLAY_HYBRID_OUTPUT_H_

#include <cstdint>
#include <sstream>
#include <vector>

#include "base/json_writer.h"
#include "curve/report.h"
#include "curve/sizing.h"

namespace kvwatch::agent {

// The bytes the groups hold in a pool of one capacity, averaged over the run.
struct HybridOccupancy {
  std::uint64_t capacity_units = 0;
  double capacity_bytes = 0;
  std::vector<double> group_bytes;  // mean over the samples, per group
};

// --hybrid-check: the page hit ratio at one capacity under the one-pass model
// and the step-level simulation with each of vLLM's behaviours (curve/hybrid_sim.h).
struct HybridCheckRow {
  double fraction = 0;  // the hybrid page-hit working set this capacity is
  std::uint64_t capacity_units = 0;
  double capacity_bytes = 0;
  // In kHybridCheckVariants order: one_pass (the curve), then the simulations.
  std::vector<double> page_hit_ratio;
  std::uint64_t vllm_overflows = 0;  // requests larger than the pool, vllm variant
};
// one_pass (the curve: every page referenced, early frees first), touch_all
// (the same simulated: equal), no_early_frees (every page referenced at finish),
// no_skipped_touches (a hit references only the pages its rule needs),
// prompt_cap (at most prompt - 1 tokens hit), vllm (the last two together).
inline constexpr const char* kHybridCheckVariants[] = {"one_pass",           "touch_all",  "no_early_frees",
                                                       "no_skipped_touches", "prompt_cap", "vllm"};

struct ReplayHybrid {
  std::vector<curve::KvGroupSizing> groups;
  double unit_bytes = 0;
  // The curve under the hybrid rule: capacity_pages are units of unit_bytes.
  curve::CurveReport report;
  // Bytes per token of the same model counted as all full attention (the main
  // curve's), per rank.
  double full_count_bytes_per_token = 0;
  std::vector<HybridOccupancy> occupancy;  // capacities 1, 2, 4, ... units
  std::uint64_t samples = 0;               // states the occupancy is averaged over
  std::uint64_t engine_bytes = 0;
  std::vector<HybridCheckRow> check;  // --hybrid-check only
  // --hybrid-pool-shares: a pool per group, each this share of the capacity;
  // empty: one pool for every group.
  std::vector<std::uint64_t> pool_shares;
};

// The "hybrid" object of the JSON output (docs/replay.md).
void WriteHybridJson(base::JsonWriter& w, const ReplayHybrid& h);
// The hybrid section of the table; main_report is the full-attention count's.
void FormatHybridTable(std::ostringstream& out, const ReplayHybrid& h, const curve::CurveReport& main_report);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RENDER_REPLAY_HYBRID_OUTPUT_H_
