// CurveAccumulator: the numbers of docs/semantics.md section 3 for
// a set of requests (a window, a tenant, a whole trace), exact at every integer
// capacity up to the engine's tracked range.
//
// It keeps three histograms indexed by capacity in pages:
//   hits[c]     page references whose smallest hitting capacity m(i) + 1 is c;
//   depth[c]    the sum of those references' page positions i (for the
//               depth-weighted prefill cost, which is linear in i);
//   required[c] requests whose requirement R at the coverage share is c;
// so page_hits(C) and request_coverage(C) are prefix sums. The histograms grow to
// the largest capacity seen, not to the tracked range.
//
// Thread safety: none; const methods may be called concurrently only while no
// non-const method runs (they fill a lazily built cache).
#ifndef KVWATCH_CURVE_CURVE_ACCUMULATOR_H_
#define KVWATCH_CURVE_CURVE_ACCUMULATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "curve/curve_totals.h"
#include "curve/stack_distance.h"

namespace kvwatch::curve {

class CurveAccumulator {
 public:
  // coverage_share: s in (0, 1], the share of a request's unlimited hits it must
  // keep to count as covered.
  explicit CurveAccumulator(double coverage_share = 1.0);

  void Add(const RequestOutcome& outcome);
  // Adds another accumulator's requests. REQUIRES: the same coverage share.
  void Merge(const CurveAccumulator& other);
  void Clear();

  // For spatial sampling (SHARDS-adj, Waldspurger et al. 2015, section 4.3): sets
  // the reference count to `page_refs`, the expected number of sampled references
  // (all references times the rate), and moves the difference into the hits at
  // the smallest capacities, or out of them when there are more sampled references
  // than expected. The deviation comes mostly from a few very hot pages falling in
  // or out of the sample, and hot pages are the ones with the shortest distances.
  void AdjustReferences(std::uint64_t page_refs);

  double coverage_share() const { return coverage_share_; }
  std::uint64_t requests() const { return totals_.requests; }
  std::uint64_t page_refs() const { return totals_.page_refs; }
  std::uint64_t unlimited_page_hits() const { return totals_.unlimited_page_hits; }
  std::uint64_t cold_misses() const { return totals_.cold_misses; }
  std::uint64_t beyond_tracked() const { return totals_.beyond_tracked; }
  // Requests whose requirement lies beyond the tracked range.
  std::uint64_t requests_beyond_tracked() const { return totals_.requests_beyond; }
  const CurveTotals& totals() const { return totals_; }
  // Unlimited hits / page refs (0 with no references).
  double UnlimitedPageHitRatio() const;

  // The largest capacity at which any page starts to hit or any request becomes
  // covered: every curve is flat beyond it.
  std::uint64_t MaxCapacity() const;

  std::uint64_t PageHits(std::uint64_t capacity) const;
  double PageHitRatio(std::uint64_t capacity) const;
  // Fraction of all requests with R <= capacity (1 with no requests).
  double RequestCoverage(std::uint64_t capacity) const;
  // Sum of the page positions i of the references that hit at capacity.
  std::uint64_t HitDepthSum(std::uint64_t capacity) const;

  // Smallest C with page_hits(C) >= fraction * unlimited_page_hits; nullopt when
  // not reached within the tracked range (not converged).
  std::optional<std::uint64_t> WorkingSetForPageHits(double fraction) const;
  // Smallest C with page_hits(C) >= hits; nullopt when not reached within the
  // tracked range. (How much LRU capacity gives the hits another policy got.)
  std::optional<std::uint64_t> CapacityForPageHits(std::uint64_t hits) const;
  // Smallest C with request_coverage(C) >= fraction; nullopt when not converged.
  std::optional<std::uint64_t> WorkingSetForCoverage(double fraction) const;

 private:
  static void AddAt(std::vector<std::uint64_t>* hist, std::uint64_t index, std::uint64_t amount);
  void BuildPrefixSums() const;
  static std::uint64_t PrefixAt(const std::vector<std::uint64_t>& prefix, std::uint64_t capacity);

  double coverage_share_;
  CurveTotals totals_;
  std::vector<std::uint64_t> hits_;
  std::vector<std::uint64_t> depth_;
  std::vector<std::uint64_t> required_;

  // Prefix sums, rebuilt on the first query after a change.
  mutable bool prefix_valid_ = false;
  mutable std::vector<std::uint64_t> hits_prefix_;
  mutable std::vector<std::uint64_t> depth_prefix_;
  mutable std::vector<std::uint64_t> required_prefix_;

  friend class CompactCurveAccumulator;
};

// CompactCurveAccumulator: the same numbers for one of many groups (a replay's
// tenants and classes), in memory proportional to the distinct capacities its
// requests hit instead of the largest one. CurveAccumulator's histograms are dense
// up to the largest capacity seen, so a group with a handful of requests costs as
// much as the whole trace: 200,000 tenants over a trace whose distances reach
// 5,000 pages held 24 GB. Here each request appends (capacity, count, depth)
// entries, merged (sorted, summed) whenever they double since the last merge, so
// at most about twice the distinct capacities are held. Dense() builds the
// CurveAccumulator to query, for one group at a time.
//
// A busy group turns dense: once it has appended kDenseAfter times as many entries
// as its largest capacity (or holds as many bytes of entries as the dense form
// would), its entries become a CurveAccumulator and later requests go there in
// O(1) per page. The sorts of the merges cost O(log n) per entry: on a large trace
// of few groups they were most of replay's time (issue 26: 43% on the coding-agent
// trace). The dense form then takes at most 24 bytes per capacity times 3/2 (its
// growth), which is at most 18 bytes per entry the group appended: memory stays
// bounded by the trace's size, and a small group (the 200,000 tenants of a few
// requests each) never turns dense.
class CompactCurveAccumulator {
 public:
  explicit CompactCurveAccumulator(double coverage_share = 1.0) : coverage_share_(coverage_share) {}
  // A group whose requests so far are exactly `so_far`'s (replay's "none" tenant
  // when the first request with a tenant comes: every earlier one had none, so
  // its curve is the whole trace's). Dense from the start.
  explicit CompactCurveAccumulator(const CurveAccumulator& so_far);

  // As CurveAccumulator::Add.
  void Add(const RequestOutcome& outcome);
  // A CurveAccumulator with exactly the numbers of the requests added.
  CurveAccumulator Dense() const;

  std::uint64_t requests() const { return dense_ ? dense_->requests() : totals_.requests; }
  bool is_dense() const { return dense_ != nullptr; }
  std::size_t MemoryBytes() const;

  // Entries appended per capacity of the group's range before it turns dense.
  static constexpr std::uint64_t kDenseAfter = 2;

 private:
  // Packed to 20 bytes (a tenant per user holds a few entries each).
#pragma pack(push, 4)
  struct Entry {
    std::uint32_t capacity;
    std::uint64_t count;
    std::uint64_t depth;  // sum of the page positions (hits); unused for requirements
  };
#pragma pack(pop)
  static_assert(sizeof(Entry) == 20);
  // Whether a new entry was appended (else the last one took the count).
  static bool Append(std::vector<Entry>* entries, std::uint32_t* merged_size, std::uint32_t capacity,
                     std::uint64_t count, std::uint64_t depth);
  static void MergeEntries(std::vector<Entry>* entries);
  void Appended() {
    if (appended_ != 0xffffffffu) ++appended_;
  }
  void MaybeTurnDense();

  double coverage_share_;
  CurveTotals totals_;
  std::vector<Entry> hits_;
  std::vector<Entry> required_;
  // 32 bits each: a group holds fewer entries than distinct capacities (< 2^32)
  // before it turns dense.
  std::uint32_t hits_merged_ = 0;  // size after the last merge
  std::uint32_t required_merged_ = 0;
  std::uint32_t appended_ = 0;               // entries appended in the compact form (saturates)
  std::uint32_t largest_ = 0;                // the largest capacity appended
  std::unique_ptr<CurveAccumulator> dense_;  // once busy: every request goes here
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_CURVE_ACCUMULATOR_H_
