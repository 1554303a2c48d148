// Tenants and classes in the one shared cache: who gets hits, who loses them to
// whom, and the footprint signals admission control watches (issue 11). Numbers
// follow docs/semantics.md sections 2, 3 and 5.
//
// Pieces, in the order a caller (the live agent, `kvwatch replay`) uses them:
//
// 1. Labels. SanitizeLabel() makes any name a safe metric label. A request's
//    class is ClassOf(): the record's own class (Request::request_class) when it
//    has one, otherwise the built-in class derived from the page stream by
//    RequestClassifier (curve/policy_replay.h): "first" (it starts a new chain,
//    whatever system prompt it shares), "turn2", "turn3-4", "turn5-8", "turn9+"
//    (it extends the full pages of an earlier request that added content of its
//    own, whose turn + 1 it is).
//    The classifier sees only the requests without a record class.
//
// 2. Folding (TenantFolder). Bounded cardinality: at most K named groups plus
//    "other". Group ids are 0..K-1 (named slots) and K ("other"). Volume is page
//    references, counted with Space-Saving heavy hitters over a fixed table of
//    `table_size` names (memory bounded whatever the number of distinct names;
//    every name with more than 1/table_size of the volume is found, and counts
//    are overestimates by at most volume/table_size).
//    When a label changes, exactly:
//      - a name seen while some slot is free takes the lowest free slot at once
//        (so a stream with at most K names never folds anything);
//      - at Refresh() (every `refresh_every` observations, and on demand) the top
//        K names of the table are computed; an owner still in the top K keeps its
//        slot; an owner that left it frees its slot (its later requests go to
//        "other"), and each newcomer to the top K takes the lowest free slot.
//      A slot's label changes only at such a refresh, and only after its previous
//      owner left the top K. Refresh() returns the slots whose label changed, so
//      callers reset what they keep per slot (isolated engines, exported series).
//    The label of "other" is "other"; a tenant literally named "other" is
//    sanitized to "_other" so the two never merge.
//
// 3. Group decomposition of stack distance: StackDistanceEngine with
//    EngineOptions::group_dimensions (curve/stack_distance.h) records for every
//    tracked page the group (per dimension: tenant group, class group) of its
//    latest reference, so d(p) = sum_g d_g(p), d_g(p) = the distinct pages
//    referenced since p's last use whose latest reference was by group g.
//    RequestOutcome::decomposed lists the pages whose distance set a new prefix
//    maximum at or above EngineOptions::decompose_from (with their d_g), which is
//    every page that can set the prefix maximum of a capacity miss at a capacity
//    >= decompose_from. Cost: O(total groups * log(pages)) per listed page.
//
// 4. Accounting. GroupTracker (stateful: the optional isolated engines) turns one
//    request plus the SHARED engine's outcome into a GroupRequest; GroupCurves
//    (an additive summary with Clear/Merge, so it works as a SlidingWindows slice
//    like WindowedCurves' BucketedCurve) adds GroupRequests. For every tenant
//    group and every class group a GroupCurves keeps:
//      - a BucketedCurve of its requests' outcomes in the shared cache (page hit
//        ratio and request coverage at every bucket bound);
//      - with isolated curves on (tenants only): a BucketedCurve of the same
//        requests in an LRU cache of their own (one engine per tenant group; the
//        "other" group's engine holds every folded tenant together);
//      - at each configured capacity C (exact, not bucketed): shared page hits,
//        capacity misses = unlimited hits - hits(C) (references that would hit at
//        unlimited capacity but miss at C; beyond-tracked references count here);
//        with isolated curves, isolated hits, and lost hits = isolated - shared
//        (signed: sharing prefixes with other tenants can make it negative);
//      - the evictor matrix at each C, victim group x evictor group (per
//        dimension): every capacity miss of a victim's page reference at C is
//        split over groups in proportion d_g(q) / d(q), where q is the page of the
//        same request whose distance set the prefix maximum of the missed page
//        (the references standing between q's last use and its reuse, by owner
//        group). A victim's own group appears too (self-eviction). Misses whose
//        prefix maximum is beyond tracked cannot be decomposed: they are counted
//        as `unattributed`. Each row of the matrix plus unattributed sums to the
//        victim's capacity misses at C. Cost: only capacity-miss pages do work,
//        O(groups) per run of pages with one prefix-maximum setter and capacity.
//      - footprint: per class group, the projected peak KV of each request with
//        token counts, (input_tokens + output_tokens) * bytes_per_token, in fixed
//        log2 buckets: bucket k counts footprints <= 2^k bytes (and above 2^(k-1)),
//        k = 0..63, cumulative like a Prometheus histogram's le="2^k".
//    Group ids index the vectors directly; which label a group id carries is the
//    folder's business (a GroupCurves does not know names).
//
// 5. RunningKv: from arrival and end times (curve::ApplyLifetime gives ends from
//    output tokens and the decode rate) the time-weighted mean and the peak of
//    the KV bytes held by running requests. A running request is charged its
//    projected peak footprint for its whole lifetime (what admission reserves):
//    an upper bound of the KV it actually holds while decoding.
//
// The live agent's loop, per request (costs per call):
//   t = tenant_folder.Observe(request.tenant, pages.size());   // O(log table_size)
//   turn = DerivedTurn(request, pages, classifier);
//   c = class_folder.Observe(ClassOf(request, turn), pages.size());
//   for (g : tenant_folder.changed()) tracker.ResetTenant(g), reset g's series;  then ClearChanged()
//   engine.Process(pages, {t, c}, &outcome);  // engine built with GroupTracker::SharedEngineOptions
//   RememberClass(request, pages, turn, page_tokens, outcome.unlimited_hits, &classifier);
//   const GroupRequest& r = tracker.Observe(t, c, request, pages, outcome);
//   windows.Add(now, [&](GroupCurves& slice) { slice.Add(r); });  // SlidingWindows<GroupCurves>
// and at scrape time windows.Window(i, GroupCurves(&layout)) (O(slices x groups^2 x capacities)).
// Checkpoints: GroupCurves and TenantFolder have Serialize/Deserialize; the engine's
// own Serialize keeps the page owners (magic KVWSDE02 with groups).
//
// Series count with the defaults (K = 8, 5 derived classes + up to 3 record
// classes folded to at most 8 + "other"): 9 tenant groups and at most 9 class
// groups per metric family; the evictor matrix has at most 9 x 9 series per
// dimension and configured capacity.
//
// Thread safety: none; one instance per stream, callers serialize.
#ifndef KVWATCH_CURVE_TENANTS_H_
#define KVWATCH_CURVE_TENANTS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "curve/bucketed_curve.h"
#include "curve/policy_replay.h"
#include "curve/request.h"
#include "curve/stack_distance.h"

namespace kvwatch::curve {

inline constexpr std::size_t kMaxLabelBytes = 64;
inline constexpr std::string_view kOtherLabel = "other";

// Characters outside [A-Za-z0-9_.:+-] become '_', the result is cut to
// kMaxLabelBytes bytes, "" becomes "none" and "other" becomes "_other".
std::string SanitizeLabel(std::string_view name);

// Classes in two steps around the engine (the classifier needs the engine's view
// of the request, curve/policy_replay.h). Before: DerivedTurn() is the request's
// derived turn, 0 when it has a record class (the classifier sees only requests
// without one); ClassOf() its class: the record class, else the derived one (not
// sanitized). After the engine's Process: RememberClass() with its outcome's
// unlimited hits (a no-op for turn 0).
std::uint32_t DerivedTurn(const Request& request, std::span<const PageId> pages, const RequestClassifier& classifier);
std::string_view ClassOf(const Request& request, std::uint32_t derived_turn);
void RememberClass(const Request& request, std::span<const PageId> pages, std::uint32_t derived_turn,
                   std::uint64_t page_tokens, std::uint32_t unlimited_hits, RequestClassifier* classifier);

struct TenantFolderOptions {
  std::uint32_t top_k = 8;              // K, at least 1 and at most 254
  std::uint32_t table_size = 1024;      // Space-Saving counters, at least top_k
  std::uint64_t refresh_every = 10000;  // observations between automatic refreshes (0: only on demand)
};

class TenantFolder {
 public:
  explicit TenantFolder(const TenantFolderOptions& options = {});

  // Counts `weight` (page references) for the name and returns its group id. May
  // refresh (every refresh_every observations); changed() then lists the slots
  // whose label changed. Cost: one sanitize, two hash lookups, O(log table_size).
  std::uint32_t Observe(std::string_view name, std::uint64_t weight);
  // The group of a name without counting anything.
  std::uint32_t GroupOf(std::string_view name) const;
  // Recomputes the top K (see the header comment); returns the slots whose label
  // changed (also kept in changed() until the next refresh). O(table_size log).
  const std::vector<std::uint32_t>& Refresh();
  // Slots relabelled by the last refresh; cleared by ClearChanged().
  const std::vector<std::uint32_t>& changed() const { return changed_; }
  void ClearChanged() { changed_.clear(); }

  std::uint32_t groups() const { return options_.top_k + 1; }  // K + 1
  std::uint32_t other() const { return options_.top_k; }       // the "other" group id
  // The group's label: a sanitized name, "other", or "" for a slot never owned.
  const std::string& label(std::uint32_t group) const { return labels_[group]; }
  const std::vector<std::string>& labels() const { return labels_; }
  // Estimated volume of a name (Space-Saving count, an overestimate); 0 when untracked.
  std::uint64_t Volume(std::string_view name) const;
  std::uint64_t observations() const { return observations_; }
  std::size_t distinct_tracked() const { return entries_.size(); }
  std::size_t MemoryBytes() const;

  // Checkpoint encoding (appends / consumes): the counters, the slot owners and
  // the refresh clock; false (folder unchanged) when malformed or laid out for
  // another K.
  void Serialize(std::vector<std::uint8_t>* out) const;
  bool Deserialize(std::span<const std::uint8_t>* in);

 private:
  struct Entry {
    std::string name;
    std::uint64_t count = 0;
    std::uint64_t error = 0;
  };
  void SiftDown(std::size_t heap_index);
  void Count(const std::string& name, std::uint64_t weight);

  TenantFolderOptions options_;
  std::vector<Entry> entries_;                             // Space-Saving counters
  std::vector<std::uint32_t> heap_;                        // min-heap of entry indices by count
  std::vector<std::uint32_t> heap_pos_;                    // entry -> heap index
  std::unordered_map<std::string, std::uint32_t> index_;   // name -> entry
  std::vector<std::string> labels_;                        // slot -> owner ("" free); [K] = "other"
  std::unordered_map<std::string, std::uint32_t> owners_;  // owner name -> slot
  std::vector<std::uint32_t> changed_;
  std::uint64_t observations_ = 0;
  std::uint64_t since_refresh_ = 0;
  std::string scratch_;
};

// What a GroupCurves is laid out for. The pointers must outlive the curves.
struct GroupLayout {
  std::uint32_t tenant_groups = 9;  // TenantFolder::groups()
  std::uint32_t class_groups = 9;
  // LogBucketBounds; null: no bucketed curves (offline replay keeps exact
  // per-group CurveAccumulators itself and uses only the rest).
  const std::vector<std::uint64_t>* bounds = nullptr;
  double coverage_share = 1.0;
  std::vector<std::uint64_t> capacities;  // configured capacities, increasing, each >= 1
  bool isolated = false;                  // keep isolated curves per tenant group
  double bytes_per_token = 0;             // 0: no footprint
};

inline constexpr std::uint32_t kFootprintBuckets = 64;  // bucket k: footprint <= 2^k bytes
// The log2 bucket of a footprint in bytes: the smallest k with bytes <= 2^k (63 at most).
std::uint32_t FootprintBucket(double bytes);

// One request's contribution, computed once by GroupTracker::Observe and added to
// as many GroupCurves (window slices) as needed. Refers to the tracker's storage:
// valid until the next Observe.
struct GroupRequest {
  std::uint32_t tenant = 0;  // group ids
  std::uint32_t cls = 0;
  const RequestOutcome* shared = nullptr;
  const RequestOutcome* isolated = nullptr;  // null without isolated curves
  std::uint64_t weight = 1;
  // Per configured capacity: the request's shared hits, isolated hits, and the
  // misses it cannot attribute.
  std::vector<std::uint32_t> shared_hits;
  std::vector<std::uint32_t> isolated_hits;
  std::vector<std::uint32_t> unattributed;
  // Attributed capacity misses, sparse: (capacity index, dimension, evictor group, pages).
  struct Blame {
    std::uint32_t capacity_index;
    std::uint32_t dimension;  // 0 tenant, 1 class
    std::uint32_t evictor;
    double pages;
  };
  std::vector<Blame> blame;
  // (input_tokens + max(output_tokens, 0)) * bytes_per_token; < 0 when unknown
  // (no input_tokens, or no bytes per token).
  double footprint_bytes = -1;
};

class GroupCurves {
 public:
  GroupCurves() = default;
  explicit GroupCurves(const GroupLayout* layout);

  void Add(const GroupRequest& request);
  void Merge(const GroupCurves& other);
  void Clear();
  // Checkpoint encoding (appends / consumes) for the same layout; false when malformed.
  void Serialize(std::vector<std::uint8_t>* out) const;
  bool Deserialize(std::span<const std::uint8_t>* in);

  const GroupLayout& layout() const { return *layout_; }
  // dimension 0: tenant groups; 1: class groups.
  const BucketedCurve& shared(std::uint32_t dimension, std::uint32_t group) const { return shared_[dimension][group]; }
  // Tenant groups only; empty curves without isolated curves.
  const BucketedCurve& isolated(std::uint32_t group) const { return isolated_[group]; }
  // At configured capacity index c.
  std::uint64_t shared_hits(std::uint32_t dimension, std::uint32_t group, std::size_t c) const;
  std::uint64_t capacity_misses(std::uint32_t dimension, std::uint32_t group, std::size_t c) const;
  std::uint64_t isolated_hits(std::uint32_t group, std::size_t c) const;
  std::int64_t lost_hits(std::uint32_t group, std::size_t c) const {
    return static_cast<std::int64_t>(isolated_hits(group, c)) - static_cast<std::int64_t>(shared_hits(0, group, c));
  }
  // Capacity misses of `victim` at capacity index c attributed to `evictor`.
  double evicted_by(std::uint32_t dimension, std::size_t c, std::uint32_t victim, std::uint32_t evictor) const;
  std::uint64_t unattributed(std::uint32_t dimension, std::uint32_t group, std::size_t c) const;
  // Requests, page references and unlimited hits T of a group's requests.
  std::uint64_t requests(std::uint32_t dimension, std::uint32_t group) const { return requests_[dimension][group]; }
  std::uint64_t page_refs(std::uint32_t dimension, std::uint32_t group) const { return page_refs_[dimension][group]; }
  std::uint64_t unlimited_hits(std::uint32_t dimension, std::uint32_t group) const {
    return unlimited_[dimension][group];
  }
  // Per class group: requests per log2 footprint bucket (not cumulative), and
  // the sum of footprints.
  std::span<const std::uint64_t> footprint_buckets(std::uint32_t class_group) const;
  double footprint_sum(std::uint32_t class_group) const { return footprint_sum_[class_group]; }
  // Forgets everything counted for `group` of `dimension`, as a victim and as an
  // evictor (after the folder gave its slot to another label).
  void ClearGroup(std::uint32_t dimension, std::uint32_t group);

 private:
  std::size_t Cell(std::uint32_t dimension, std::uint32_t group, std::size_t c) const;
  std::uint32_t Groups(std::uint32_t dimension) const {
    return dimension == 0 ? layout_->tenant_groups : layout_->class_groups;
  }

  const GroupLayout* layout_ = nullptr;
  std::vector<BucketedCurve> shared_[2];
  std::vector<BucketedCurve> isolated_;
  // [dimension][group * capacities + c]
  std::vector<std::uint64_t> hits_[2];
  std::vector<std::uint64_t> requests_[2];  // [dimension][group]
  std::vector<std::uint64_t> page_refs_[2];
  std::vector<std::uint64_t> unlimited_[2];
  std::vector<std::uint64_t> unattributed_[2];
  std::vector<std::uint64_t> isolated_hits_;
  // [dimension][(c * groups + victim) * groups + evictor]
  std::vector<double> blame_[2];
  std::vector<std::uint64_t> footprint_;  // [class group * kFootprintBuckets + k]
  std::vector<double> footprint_sum_;
};

class GroupTracker {
 public:
  // isolated_engine: options of each isolated engine (used with layout.isolated).
  GroupTracker(const GroupLayout* layout, const EngineOptions& isolated_engine = {});
  ~GroupTracker();

  // The shared engine's options for this layout: group dimensions {tenant groups,
  // class groups} and decompose_from = the smallest configured capacity.
  static EngineOptions SharedEngineOptions(EngineOptions base, const GroupLayout& layout);

  // Computes one request's contribution. shared: the outcome of THIS request from
  // the shared engine, run with SharedEngineOptions and Process(pages, {tenant, cls}).
  // pages: the request's pages (fed to the tenant's isolated engine). Cost:
  // O(pages * capacities) comparisons, O(groups) per attributed run, plus the
  // isolated engine's Process when isolated curves are on.
  const GroupRequest& Observe(std::uint32_t tenant, std::uint32_t cls, const Request& request,
                              std::span<const PageId> pages, const RequestOutcome& shared, std::uint64_t weight = 1);
  // Clears a tenant group's isolated engine (after the folder relabelled the slot).
  void ResetTenant(std::uint32_t group);
  std::size_t MemoryBytes() const;

 private:
  const GroupLayout* layout_;
  EngineOptions isolated_options_;
  std::vector<std::unique_ptr<StackDistanceEngine>> isolated_;
  RequestOutcome isolated_outcome_;
  GroupRequest request_;
  std::vector<double> dense_;  // per request: attributed misses [capacity][counter]
};

// Offline: GroupCurves totals kept by LABEL, so that a folder refresh that
// relabels slots never mixes two tenants' numbers. Absorb() adds every group's
// counts under the label its slot carried while they were counted: call it (then
// GroupCurves::Clear) just before each TenantFolder::Refresh and at the end.
// Slots without a label and without counts are skipped.
struct LabelTotals {
  std::uint64_t requests = 0;
  std::uint64_t page_refs = 0;
  std::uint64_t unlimited_hits = 0;
  // Per configured capacity.
  std::vector<std::uint64_t> hits;
  std::vector<std::uint64_t> isolated_hits;
  std::vector<std::uint64_t> unattributed;
  // Evictor label -> capacity misses attributed to it, per configured capacity.
  std::map<std::string, std::vector<double>> evicted_by;
  std::uint64_t capacity_misses(std::size_t c) const { return unlimited_hits - hits[c]; }
};
class LabelledTotals {
 public:
  // labels[g]: the label of group g of `dimension` (TenantFolder::label).
  void Absorb(const GroupCurves& curves, std::uint32_t dimension, const std::vector<std::string>& labels);
  const std::map<std::string, LabelTotals>& rows() const { return rows_; }

 private:
  std::map<std::string, LabelTotals> rows_;
};

// Time-weighted mean and peak of the KV bytes held by running requests. Feed
// requests in arrival order with their end time (>= arrival) and bytes.
class RunningKv {
 public:
  void Add(double arrival_s, double end_s, double bytes);
  // Drains the requests still running (call once at the end, before reading).
  void Finish();
  double peak_bytes() const { return peak_; }
  // Integral of running bytes over time / (last end - first arrival); 0 when empty.
  double mean_bytes() const;
  std::uint64_t requests() const { return requests_; }

 private:
  void AdvanceTo(double t);
  struct End {
    double t;
    double bytes;
    bool operator>(const End& o) const { return t > o.t; }
  };
  std::vector<End> ends_;  // min-heap by time
  double level_ = 0, peak_ = 0, integral_ = 0;
  double first_ = 0, now_ = 0;
  bool started_ = false;
  std::uint64_t requests_ = 0;
};

// Nearest-rank q-quantile (q in (0, 1]) of values; sorts them. NaN when empty.
double NearestRankQuantile(std::vector<double>* values, double q);

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_TENANTS_H_
