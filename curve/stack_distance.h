// StackDistanceEngine: Mattson's LRU stack-distance algorithm, incremental, with
// the prefix rule of docs/semantics.md section 2.
//
// For each request the engine reads every page's stack distance d(p) against the
// cache state left by earlier requests (the arrival state), computes the prefix
// maximum m(i) = max(d(p(0)), ..., d(p(i))), and only then references every page
// once in the configured touch order. Page i of the request is a hit in an LRU
// cache of C pages exactly when m(i) < C, for every C at once.
//
// Data structure: every reference gets a new "time slot". A bitmap marks the slots
// that hold the latest reference of a tracked page; a Fenwick tree over 64-slot
// blocks of that bitmap counts live slots, so d(p) = number of live slots newer
// than p's slot, in O(log(slots / 64)) plus one popcount. A flat hash map maps a
// page id to its slot. When the slots run out they are compacted (live slots
// renumbered in order), so memory stays proportional to the number of tracked
// pages however long the stream runs. An array mapping a slot back to its page is
// kept only from the first eviction from tracking on (the oldest slot's page must
// then be found); until then a slot costs about 1/6 byte, and eight slots per
// page make compactions rare (three per page once that array is kept, or with
// groups, whose per-slot cost is larger).
//
// Bounded tracking: at most max_pages distinct pages are tracked. Inserting one
// more evicts the least recently used; a later reference to it has an unknown
// distance >= max_pages and is counted as "beyond tracked", apart from cold misses.
// Every number is exact for capacities C <= max_pages.
//
// Thread safety: none. One engine per stream; callers serialize.
#ifndef KVWATCH_CURVE_STACK_DISTANCE_H_
#define KVWATCH_CURVE_STACK_DISTANCE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "curve/page_map.h"
#include "curve/request.h"

namespace kvwatch::curve {

// Distances are page counts below kBeyondTracked. Two sentinels stand for the
// distances the engine cannot give: a page referenced before but pushed beyond
// the tracked range (its distance is >= max_pages: a miss at every tracked
// capacity, a hit at unlimited capacity), and a page never referenced before (a
// miss at every capacity). kBeyondTracked < kCold, so a prefix maximum orders them
// as the prefix rule needs.
inline constexpr std::uint32_t kCold = std::numeric_limits<std::uint32_t>::max();
inline constexpr std::uint32_t kBeyondTracked = kCold - 1;

enum class TouchOrder {
  kTailFirst,  // p(n-1) first, p(0) last: the chain's head is most recent (default).
  kHeadFirst,  // p(0) first, as in the KVSET reference implementation.
};

struct EngineOptions {
  // M: the largest number of distinct pages tracked (the largest capacity of
  // interest). Must be at least 1 and below kBeyondTracked. Memory is about 55
  // bytes per tracked page once pages have been evicted from tracking, about 31
  // before (docs/performance.md); the sizes below are the full ones. Three defaults, for three
  // uses: this one, 2^24 (about 0.9 GB), is for code that sets nothing (tests,
  // benchmarks, fuzzers); the agent's engine.max_pages is 2^20 (about 58 MB, in
  // config/agent_config.h: a process beside an inference engine for months,
  // sized to a replica's cache); replay's --max-pages is 2^26 (agent/cli/
  // replay_command.h: one offline run, exact on the largest traces it is given).
  std::uint32_t max_pages = 1u << 24;
  TouchOrder touch_order = TouchOrder::kTailFirst;
  // How many pages evicted from tracking are remembered, so that a later
  // reference is told apart as "beyond tracked" rather than "cold". 0 means
  // unlimited (exact, memory grows with the distinct pages of the stream: what
  // offline replay uses); otherwise the most recent evictions, between this
  // number and twice it, are remembered and older ones look cold again.
  std::uint64_t remembered_evictions = 0;
  // Group decomposition (off when empty; the plain engine's cost is unchanged):
  // the number of groups in each dimension (for example {tenant groups, class
  // groups}), each in 1..255. Every tracked page then records the group of its
  // latest reference per dimension (Process with groups), and
  // d(p) = sum over groups g of d_g(p), d_g(p) = the distinct pages referenced
  // since p's last use whose latest reference was by group g. Costs one more
  // Fenwick walk per reference and about (1 + total groups / 16) bytes per slot.
  std::vector<std::uint32_t> group_dimensions;
  // With groups: RequestOutcome::decomposed lists the pages whose finite
  // distance sets a new prefix maximum >= decompose_from, with their d_g.
  std::uint32_t decompose_from = 1;
  // The page map's layout (curve/page_map.h): kRuns when a request's page ids
  // come in runs of consecutive integers (trace formats that number pages, as
  // replay and the agent's trace collectors read); on hashed ids (KV events) it
  // probes as kMixed does. Results never depend on it; only speed does. Not part
  // of a checkpoint.
  PageMapLayout page_layout = PageMapLayout::kMixed;
};

// k = ceil(share * unlimited_hits), capped at unlimited_hits: the prefix hits a
// request must keep to count as covered at coverage share `share`
// (docs/semantics.md section 3). Guarded against share * T landing a hair above
// an integer.
std::uint32_t RequiredHits(double share, std::uint32_t unlimited_hits);

// What the engine says about one request. Vectors are indexed by page position.
struct RequestOutcome {
  // d(p(i)) read in the arrival state; kBeyondTracked or kCold when unknown.
  std::vector<std::uint32_t> distance;
  // m(i), the prefix maximum of distance; page i hits at capacity C iff m(i) < C.
  std::vector<std::uint32_t> prefix_max;
  std::uint32_t cold_misses = 0;     // pages never referenced before
  std::uint32_t beyond_tracked = 0;  // pages referenced before but evicted from tracking
  // T = h(infinity): pages before the first cold page. Includes pages whose
  // prefix is only beyond tracked, which hit at unlimited but no tracked capacity.
  std::uint32_t unlimited_hits = 0;
  // With group decomposition only (EngineOptions::group_dimensions): the pages
  // (indices) whose distance is finite, at least decompose_from, and above the
  // prefix maximum of the pages before them: the setters of every prefix maximum
  // >= decompose_from. For the k-th of them, group_distance[k * total_groups ...]
  // holds d_g for every group of dimension 0, then of dimension 1, ...; the
  // groups of each dimension sum to its distance.
  std::vector<std::uint32_t> decomposed;
  std::vector<std::uint32_t> group_distance;

  std::size_t size() const { return distance.size(); }
  // Smallest capacity at which page i hits, m(i) + 1; 0 when it hits at no
  // tracked capacity.
  std::uint32_t hit_capacity(std::size_t i) const { return prefix_max[i] >= kBeyondTracked ? 0 : prefix_max[i] + 1; }
  // R at share s in (0, 1]: 0 when k = ceil(s * T) is 0, else m(k - 1) + 1 pages;
  // kBeyondTracked when m(k - 1) is beyond the tracked range.
  std::uint32_t Requirement(double share) const;
};

class StackDistanceEngine {
 public:
  explicit StackDistanceEngine(const EngineOptions& options = {});
  StackDistanceEngine(const StackDistanceEngine&) = delete;
  StackDistanceEngine& operator=(const StackDistanceEngine&) = delete;

  // Processes one request: fills *out (reusing its storage), then references its
  // pages. pages may be empty.
  void Process(std::span<const PageId> pages, RequestOutcome* out);
  // With group decomposition: groups[d] is the request's group in dimension d
  // (every page it references is then owned by those groups). Also fills
  // out->decomposed and out->group_distance. Without groups configured it is
  // Process(pages, out).
  void Process(std::span<const PageId> pages, std::span<const std::uint8_t> groups, RequestOutcome* out);
  // The decomposition of a tracked page's distance in the current state: out
  // gets total_groups() values (d_g per group, dimension after dimension).
  // Returns false (out untouched) when the page is not tracked or groups are off.
  // O(total groups * log(pages)).
  bool DistanceByGroup(PageId page, std::span<std::uint32_t> out) const;
  std::uint32_t total_groups() const { return total_groups_; }

  // Sizes the tables for about `pages` tracked pages (capped at max_pages) up
  // front, so that a stream of known size does not grow them step by step. A
  // hint: no result depends on it, only MemoryBytes().
  void Reserve(std::uint64_t pages);

  // Hints the CPU to fetch the map entries of the first pages of a request that
  // Process will be given soon (no effect on any result).
  void Prefetch(std::span<const PageId> pages) const {
    const std::size_t n = std::min<std::size_t>(pages.size(), kPrefetchAhead);
    for (std::size_t i = 0; i < n; ++i) {
      if (!near_) {
        map_.Prefetch(pages[i]);
      } else if (i == 0 || pages[i] >> PageMap::kRunBits != pages[i - 1] >> PageMap::kRunBits) {
        map_.Prefetch(pages[i], kRunPrefetchLines);  // see ProcessImpl
      }
    }
  }

  // Forgets every page (for example when an engine clears its cache).
  void Clear();
  // Forgets one page: it stops being tracked (no longer counts in other pages'
  // distances) and is not remembered as evicted, so a later reference is cold.
  // Not counted in evicted_pages(). Returns whether the page was tracked. Used by
  // fixed-size sampling when a page leaves the sample.
  bool Forget(PageId page);

  const EngineOptions& options() const { return options_; }
  std::uint32_t tracked_pages() const { return live_; }
  // Pages evicted from tracking so far (each later reference is "beyond tracked").
  std::uint64_t evicted_pages() const { return evicted_pages_; }
  // Bytes held by the engine's data structures (capacity, not size).
  std::size_t MemoryBytes() const;

  // Serialization of the full state, for agent checkpoints.
  std::vector<std::uint8_t> Serialize() const;
  // Returns false (and leaves the engine cleared) when the bytes are not a valid state.
  bool Deserialize(std::span<const std::uint8_t> bytes);

 private:
  // How many pages ahead of its lookups Process prefetches map entries.
  static constexpr std::size_t kPrefetchAhead = 16;
  // Cache lines of the map prefetched for a run's first page (runs layout).
  static constexpr int kRunPrefetchLines = 3;
  static constexpr std::uint32_t kNoSlot = std::numeric_limits<std::uint32_t>::max();

  std::uint32_t Distance(std::uint32_t slot) const;
  // Live slots in (lo, hi], REQUIRES lo < hi: the arrival pass derives a page's
  // distance from the previous page's when their slots are this close.
  std::uint32_t LiveBetween(std::uint32_t lo, std::uint32_t hi) const;
  static constexpr std::uint32_t kNearDistanceSlots = 256;
  void ProcessImpl(std::span<const PageId> pages, RequestOutcome* out);
  void ConfigureGroups();
  bool WasEvicted(PageId page) const;
  void ForgetEviction(PageId page);
  void RememberEviction(PageId page);
  // References page once; current is its map entry's value when the caller has
  // it (nullptr: look it up).
  void Touch(PageId page, std::uint32_t* current);
  void SetLive(std::uint32_t slot);
  void ClearLive(std::uint32_t slot);
  void MoveLive(std::uint32_t from, std::uint32_t to);
  void MoveCounts(std::uint32_t from_block, std::uint32_t to_block, std::int32_t count);
  void EvictOldest();
  void KeepSlotPages();
  // The slots to size for `pages` live pages (at compaction, and Reserve).
  std::uint32_t SlotsFor(std::uint64_t pages) const;
  void Compact();
  void Resize(std::uint32_t slots);

  // Group decomposition (empty vectors when off).
  void GroupMove(std::uint32_t from, std::uint32_t to, const std::uint8_t* new_owner);
  void GroupMoveCounts(std::uint32_t bf, std::uint32_t bt, const std::uint8_t* old_owner, const std::uint8_t* new_owner,
                       std::int32_t count);
  void GroupClear(std::uint32_t slot);
  void GroupRebuild();
  void GroupDistance(std::uint32_t slot, std::uint32_t* out) const;
  void PrefetchGroups(std::uint32_t slot) const;
  static constexpr int kPrefetchNodes = 4;  // tree levels PrefetchGroups fetches per path
  void GroupShift(std::uint32_t from, std::uint32_t to, std::uint32_t* out) const;
  // Setters this close below the previous one are decomposed by GroupShift.
  static constexpr std::uint32_t kNearSlots = 96;
  // GroupMoveCounts walks the two update paths together up to this many
  // dimensions; Process gathers the group tree's updates up to as many.
  static constexpr std::size_t kMaxFastDims = 8;
  std::uint32_t total_groups_ = 0;
  std::vector<std::uint32_t> group_offset_;       // dimension -> first counter index
  std::vector<std::uint8_t> owner_;               // [slot * dimensions + d]: group of the latest reference
  std::vector<std::int32_t> group_fenwick_;       // [block node * total_groups + counter]
  std::vector<std::int64_t> group_live_;          // live pages per counter
  const std::uint8_t* current_groups_ = nullptr;  // groups of the request being referenced
  std::vector<std::uint8_t> no_groups_;           // all zero: for Process without groups

  EngineOptions options_;
  // The arrival pass tries the previous page's neighbours first (FindNear):
  // with the runs layout only, where consecutive ids sit side by side.
  bool near_ = false;
  PageMap map_;  // page -> slot of its latest reference
  // slot -> page (valid where live), kept only from the first eviction from
  // tracking on (slot_pages_), the one use that needs it: an offline replay and
  // an agent below its max_pages never pay its 8 bytes per slot.
  std::vector<PageId> slot_page_;
  bool slot_pages_ = false;
  std::vector<std::uint64_t> live_bits_;  // 1 bit per slot
  std::vector<std::int32_t> fenwick_;     // 1-based Fenwick tree over 64-slot blocks
  std::vector<std::uint32_t*> entries_;   // per request: map values found in the arrival pass
  std::uint32_t slots_ = 0;               // number of slots
  std::uint32_t next_slot_ = 0;           // the next unused slot (newest reference + 1)
  std::uint32_t oldest_hint_ = 0;         // no live slot below this
  std::uint32_t live_ = 0;                // tracked pages
  std::uint64_t evicted_pages_ = 0;
  // Pages evicted from tracking, in two generations when remembered_evictions
  // bounds them (a full young generation becomes the old one).
  PageMap evicted_young_;
  PageMap evicted_old_;
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_STACK_DISTANCE_H_
