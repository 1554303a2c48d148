// `kvwatch replay` for a hybrid model (one whose config.json or preset has KV
// cache groups: sliding-window, chunked-local or linear layers beside full
// attention): the curve under the hybrid hit rule (curve/hybrid_engine.h,
// docs/semantics.md section 8), in bytes, beside what the main curve, which
// counts every layer as full attention, says; and the bytes each group holds.
//
// HybridReplay runs beside the replay's own engine on the same requests; the
// replay's other output is unchanged, and a model without groups never builds
// one. Capacities are counted in units of unit_bytes (the smallest group page),
// reported with their bytes. The result and its renderings are
// agent/render/replay_hybrid_output.h's.
//
// Thread safety: a HybridReplay belongs to one thread at a time.
#ifndef KVWATCH_AGENT_CLI_REPLAY_HYBRID_H_
#define KVWATCH_AGENT_CLI_REPLAY_HYBRID_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "agent/render/replay_hybrid_output.h"
#include "curve/curve_accumulator.h"
#include "curve/hybrid_engine.h"
#include "curve/report.h"
#include "curve/sizing.h"

namespace kvwatch::agent {

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

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_CLI_REPLAY_HYBRID_H_
