// `kvwatch replay` for a hybrid model (one whose config.json or preset has KV
// cache groups: sliding-window, chunked-local or linear layers beside full
// attention): the curve under the hybrid hit rule (curve/hybrid_engine.h,
// docs/semantics.md section 8), in bytes, beside what the main curve, which
// counts every layer as full attention, says; and the bytes each group holds.
//
// HybridReplay runs beside the replay's own engine on the same requests; the
// replay's other output is unchanged, and a model without groups never builds
// one. Capacities are counted in units of unit_bytes (the smallest group page),
// reported with their bytes.
//
// Thread safety: a HybridReplay belongs to one thread at a time.
#ifndef KVWATCH_AGENT_CLI_REPLAY_HYBRID_H_
#define KVWATCH_AGENT_CLI_REPLAY_HYBRID_H_

#include <cstdint>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

#include "base/json_writer.h"
#include "curve/curve_accumulator.h"
#include "curve/hybrid_engine.h"
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
};

class HybridReplay {
 public:
  // REQUIRES: options are valid (curve::ValidateHybridOptions).
  // check: keep the requests for --hybrid-check's simulations.
  HybridReplay(const curve::HybridEngineOptions& options, std::vector<curve::KvGroupSizing> groups,
               double coverage_share, bool check = false);

  void Add(std::span<const curve::PageId> pages, std::int64_t input_tokens = -1, std::int64_t output_tokens = -1);
  // The result; report options as the main curve's (capacities, targets, knee),
  // with the bytes per token of one unit.
  ReplayHybrid Result(const curve::ReportOptions& main, double full_count_bytes_per_token) const;

  // The occupancy is sampled after every kSampleEvery requests (and at the end).
  static constexpr std::uint64_t kSampleEvery = 64;

 private:
  // Sums over the samples: rows[k][g] for capacity 2^k units; all[g], each
  // group's whole bytes.
  struct Occupancy {
    std::vector<std::vector<double>> rows;
    std::vector<double> all;
    std::uint64_t samples = 0;
  };
  void Sample(Occupancy* o) const;

  curve::HybridEngine engine_;
  std::vector<curve::KvGroupSizing> groups_;
  curve::CurveAccumulator acc_;
  curve::RequestOutcome outcome_;
  std::uint64_t requests_ = 0;
  Occupancy occupancy_;
  // --hybrid-check: every request's pages (flat), ends and token counts.
  bool check_ = false;
  std::vector<curve::PageId> pages_;
  std::vector<std::size_t> ends_;
  std::vector<std::pair<std::int64_t, std::int64_t>> tokens_;
  void RunCheck(ReplayHybrid* h) const;
};

// The "hybrid" object of the JSON output (docs/replay.md).
void WriteHybridJson(base::JsonWriter& w, const ReplayHybrid& h);
// The hybrid section of the table; main_report is the full-attention count's.
void FormatHybridTable(std::ostringstream& out, const ReplayHybrid& h, const curve::CurveReport& main_report);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_CLI_REPLAY_HYBRID_H_
