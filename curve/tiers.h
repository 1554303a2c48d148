// Tiers: an exclusive LRU hierarchy (HBM, DRAM, SSD, ...) read off the stack
// distances, as in docs/semantics.md section 6.
//
// Tiers with capacities C1, C2, ... behave as one LRU cache of C1 + C2 + ... pages;
// a page at distance d sits in tier k when C1 + ... + C(k-1) <= d < C1 + ... + Ck.
// Page i of a request is a prefix hit from the hierarchy when m(i) is below the
// total capacity, and is served from the tier its own d(p(i)) places it in.
//
// "In time": the pages a request would load from a slower tier k >= 2 are moved as
// one transfer taking (their bytes / bandwidth + latency); that is worth it only if
// it is faster than recomputing them (their prefill FLOPs / throughput). When it is
// not, those pages are misses on the in-time curve, and so is every later page of
// the request (the prefix rule: reuse stops at the first missing page). The first
// tier is where attention runs: its hits are always in time. When the page bytes or
// the prefill cost are unknown, in-time hits are not computed.
//
// Thread safety: none.
#ifndef KVWATCH_CURVE_TIERS_H_
#define KVWATCH_CURVE_TIERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "curve/sizing.h"
#include "curve/stack_distance.h"

namespace kvwatch::curve {

struct TierSpec {
  std::string name;                  // e.g. "hbm", "dram", "ssd"
  std::uint64_t capacity_pages = 0;  // > 0
  double bandwidth_bytes_per_s = 0;  // to the first tier; unused for the first tier
  double latency_s = 0;              // per transfer; unused for the first tier
};

// The largest tier capacity accepted, 2^53 pages.
inline constexpr double kMaxTierCapacityPages = 9007199254740992.0;

// Parses "name:capacity_pages[:bandwidth_GBps[:latency_us]]" (GB = 1e9 bytes);
// the capacity a whole number from 1 to 2^53.
base::Result<TierSpec> ParseTierSpec(const std::string& text);

struct TierTotals {
  std::string name;
  std::uint64_t pages_served = 0;
  double bytes_moved = 0;          // 0 for the first tier, and when page bytes are unknown
  std::uint64_t hits_in_time = 0;  // valid when in_time_known
};

class TierAccumulator {
 public:
  // page_bytes: bytes of one page (0 when unknown). cost and flops_per_s: for the
  // in-time test; in-time hits are computed only when all three are known.
  TierAccumulator(std::vector<TierSpec> tiers, double page_bytes, std::uint64_t page_tokens,
                  std::optional<PrefillCost> cost, std::optional<double> flops_per_s);

  void Add(const RequestOutcome& outcome);
  void Merge(const TierAccumulator& other);

  const std::vector<TierTotals>& totals() const { return totals_; }
  std::uint64_t total_capacity() const { return total_capacity_; }
  std::uint64_t prefix_hits() const { return prefix_hits_; }
  bool in_time_known() const { return in_time_known_; }
  std::uint64_t hits_in_time() const { return hits_in_time_; }

 private:
  std::size_t TierOf(std::uint32_t distance) const;

  std::vector<TierSpec> tiers_;
  std::vector<std::uint64_t> bounds_;  // cumulative capacities
  double page_bytes_;
  std::uint64_t page_tokens_;
  std::optional<PrefillCost> cost_;
  std::optional<double> flops_per_s_;
  bool in_time_known_;
  std::uint64_t total_capacity_ = 0;
  std::uint64_t prefix_hits_ = 0;
  std::uint64_t hits_in_time_ = 0;
  std::vector<TierTotals> totals_;
  // Per-request scratch: pages and FLOPs per tier.
  std::vector<std::uint64_t> req_pages_;
  std::vector<double> req_flops_;
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_TIERS_H_
