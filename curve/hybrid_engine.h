// HybridEngine: the capacity curve of a hybrid model, whose KV cache groups
// (full attention, sliding window, chunked local, linear/Mamba) keep different
// parts of a prefix, in one pass for every capacity (docs/semantics.md section 8).
//
// The request-level model. A request of n pages (page ids p(0..n-1), P tokens
// each) references, in every group g, the item (g, p(i)) of every position i.
// All items share one LRU pool measured in bytes, as vLLM's block pool is one
// free queue for every group (vllm/v1/core/block_pool.py); an item of group g
// weighs that group's page bytes (P tokens of its layers, or one state of a
// linear group). A prefix of L pages hits when every group's rule holds, as
// vLLM's managers test it (vllm/v1/core/single_type_kv_cache_manager.py and
// kv_cache_coordinator.py, main branch of 2026):
//   full:           pages [0, L) cached in the group;
//   sliding W:      the k = ceil((W - 1) / P) pages before L, [max(0, L - k), L)
//                   (SlidingWindowManager's sliding_window_contiguous_blocks: the
//                   next token sees the W - 1 tokens before it);
//   chunked C:      the pages from the start of the chunk that token L*P falls in
//                   up to L, [floor(floor(L*P / C) * C / P), L) (none when L*P
//                   starts a chunk);
//   linear:         the state at L, the group's item at position L - 1.
// The hit is the largest L for which all hold (vLLM's HybridKVCacheCoordinator
// iterates to exactly that fixed point). After the test every item of every
// group is referenced ("touch-all") in the order vLLM frees a request's blocks:
// with early_free, first each sliding or chunked group's pages that fell out of
// its window or chunk (remove_skipped_blocks: when the prompt is computed, the
// last of them first; then one a step while the output is decoded), then at
// finish group after group in the model's group order, each in the configured
// touch order (vLLM's managers in order, each tail first). The order depends on
// the request's token counts, never on the capacity.
//
// Why one pass is exact. An LRU pool of C bytes holds the most recently used
// items whose sizes add up to at most C, and so holds item x exactly when D(x) =
// (bytes of the distinct items used since x) + size(x) <= C: the stack inclusion
// property of Mattson et al. (1970), which holds for sizes in bytes because
// evictions take the least recent item until the newcomer fits. Every item is
// touched whatever the hit (touch-all), so the reference stream, and each D(x),
// does not depend on C. The hit L needs the items of Req(L); with D(L) = max
// over Req(L) of D(x), L hits at C when D(L) <= C, and the request's hit at C is
// the largest such L. With S(L) = min over L' >= L of D(L') (suffix minima),
// page i is a hit at C exactly when S(i + 1) <= C: one histogram entry per page
// gives every capacity at once, as the prefix maximum m(i) does for one full
// group (for which S(i + 1) = (m(i) + 1) * page bytes: today's curve).
//
// What the model leaves out (vLLM's step-level behaviour): a hit does not touch
// the window pages before L - k, which makes the touches depend on C (no
// one-pass method is exact then); hits are capped at prompt length - 1 tokens;
// Mamba may cache states only where steps end (mamba_cache_mode). Page sizes are
// the groups' own (vLLM pads every group to one block size); capacity is
// measured in bytes. curve/hybrid_sim.h simulates the first two per capacity.
//
// Split pools. SGLang (SWARadixCache) and TensorRT-LLM (one pool per window
// size) give each kind of layer a pool of its own, sized at start-up. With
// pool_shares, group g's items are an LRU pool of P_g = floor(C * w_g / W) bytes
// (W the sum of the weights) that no other group's items touch. An item of g is
// then held exactly when D_g(x) <= P_g, with D_g the bytes of g's own distinct
// items since x, plus x: a stack distance within g's stream, which does not
// depend on C either. Since g's items all weigh page_bytes(g), D_g is a multiple
// of it and D_g <= floor(C w_g / W) exactly when C >= ceil(D_g W / w_g): that
// value takes D(x)'s place above, and the curve is again exact in one pass.
//
// Capacities are reported in units of unit_bytes (default: the smallest group
// page), so the CurveAccumulator's integer axis serves: RequestOutcome.prefix_max
// [i] = ceil(S(i + 1) / unit) - 1, and page i hits at C units (C * unit bytes)
// exactly when prefix_max[i] < C.
//
// Bounded tracking (max_bytes > 0, the agent's engine; 0, offline replay's
// exact mode, tracks every item): at most max_bytes bytes of items are tracked.
// A reference that takes the tracked bytes above max_bytes evicts the least
// recently used items from tracking until they fit again (evicted_items()
// counts them). An evicted item x had D(x) > max_bytes (the items newer than it
// and x itself no longer fit), and D(x) only grows until x is referenced again,
// while every tracked item's D is exact (the items referenced since it are all
// tracked). So a later reference to x has an unknown D beyond the tracked range
// (kBeyondTracked: a miss at every tracked capacity, a hit at unlimited
// capacity, apart from cold misses), and every number is exact for capacities
// C <= max_bytes (in units: C <= max_units()): hits, coverage, working sets,
// the knee and GroupBytesAt. RequestOutcome.beyond_tracked counts the pages
// with an item beyond tracked and none cold. remembered_evictions bounds the
// evicted items remembered (0: all), as the dense engine's does: older ones
// look cold again (still a miss at every tracked capacity).
//
// Thread safety: none; one engine per stream.
#ifndef KVWATCH_CURVE_HYBRID_ENGINE_H_
#define KVWATCH_CURVE_HYBRID_ENGINE_H_

#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "curve/request.h"
#include "curve/sizing.h"
#include "curve/stack_distance.h"

namespace kvwatch::curve {

struct HybridGroup {
  KvGroupKind kind = KvGroupKind::kFull;
  // Sliding window W or chunk size C in tokens (0 for full and linear groups).
  std::uint64_t window_tokens = 0;
  // Bytes of one item of the group: page_tokens * bytes per token, or one state.
  std::uint64_t page_bytes = 0;
};

struct HybridEngineOptions {
  std::vector<HybridGroup> groups;  // in the model's group order
  std::uint64_t page_tokens = 16;
  TouchOrder touch_order = TouchOrder::kTailFirst;
  // The capacity unit in bytes; 0: the smallest group page.
  std::uint64_t unit_bytes = 0;
  // Out-of-window and earlier-chunk pages referenced first (see above).
  bool early_free = true;
  // The most bytes of items tracked (see "Bounded tracking"); 0: every item.
  // When set, at least the largest page_bytes, and below kBeyondTracked units.
  std::uint64_t max_bytes = 0;
  // A pool of its own per group, as SGLang and TensorRT-LLM keep (see "Split
  // pools" above): one positive weight per group, in group order; group g's pool
  // is floor(C * pool_shares[g] / sum) bytes of a capacity of C. Empty: one pool
  // for every group (vLLM). Unbounded engines only (max_bytes 0).
  std::vector<std::uint64_t> pool_shares;
  // Evicted items remembered as "beyond tracked"; 0: all. Between this number
  // and twice it are remembered (two generations, as the dense engine keeps).
  std::uint64_t remembered_evictions = 0;
};

// Ok when there is at least one group (at most 255), page_tokens > 0, every
// page_bytes > 0, every sliding or chunked group has a window, max_bytes is 0
// or holds the largest page and stays below kBeyondTracked units, and
// pool_shares is empty or one weight in [1, kMaxPoolShare] per group, with
// max_bytes 0.
base::Status ValidateHybridOptions(const HybridEngineOptions& options);
// The largest pool share accepted (so that D * W stays far inside 128 bits).
inline constexpr std::uint64_t kMaxPoolShare = 1'000'000;
// Ok when there is one share per group, each in [1, kMaxPoolShare].
base::Status ValidatePoolShares(const std::vector<std::uint64_t>& shares, std::size_t groups);

// The hybrid options of a model spec with groups, sized per rank.
base::Result<HybridEngineOptions> HybridOptionsFor(const ModelSpec& spec, int tensor_parallel,
                                                   std::uint64_t page_tokens, TouchOrder touch_order);

// The first page [lo, L) that group `group` needs for a hit of L pages.
std::uint64_t RequiredFrom(const HybridGroup& group, std::uint64_t page_tokens, std::uint64_t hit_pages);

// The whole pages a sliding or chunked group no longer needs once
// computed_tokens tokens are computed (vLLM's get_num_skipped_tokens / P:
// computed + 1 - W for a window, the start of the current chunk for a chunk);
// 0 for full and linear groups.
std::uint64_t SkippedPages(const HybridGroup& group, std::uint64_t page_tokens, std::uint64_t computed_tokens);

class HybridEngine {
 public:
  // REQUIRES: ValidateHybridOptions(options).ok().
  explicit HybridEngine(const HybridEngineOptions& options);

  // Fills *out for the request (prefix_max in capacity units; see the file
  // comment), then references every item of every group. The token counts
  // order the early frees; <= 0: unknown (a prompt of n * P tokens, no output).
  void Process(std::span<const PageId> pages, std::int64_t input_tokens, std::int64_t output_tokens,
               RequestOutcome* out);
  void Process(std::span<const PageId> pages, RequestOutcome* out) { Process(pages, -1, -1, out); }

  const HybridEngineOptions& options() const { return options_; }
  std::uint64_t unit_bytes() const { return unit_; }
  // Bytes of every item referenced so far.
  std::uint64_t total_bytes() const { return total_; }
  // The smallest capacity that holds every item: total_bytes(), or with split
  // pools the capacity whose every share holds its group.
  std::uint64_t BytesToHoldAll() const;
  // Bytes each group holds at capacity_bytes (in its share, with split pools), in the current state
  // (exact for capacity_bytes <= max_bytes when bounded).
  std::vector<std::uint64_t> GroupBytesAt(std::uint64_t capacity_bytes) const;
  std::size_t MemoryBytes() const;
  // The largest capacity in units at which every number is exact: max_bytes /
  // unit_bytes when bounded, else kBeyondTracked - 1.
  std::uint32_t max_units() const;
  // Items tracked now, and evicted from tracking so far (bounded engines).
  std::uint64_t tracked_items() const { return live_; }
  std::uint64_t evicted_items() const { return evicted_items_; }

  // Forgets every item, every remembered eviction and the eviction count.
  void Clear();
  // The full state, for agent checkpoints: the tracked items in recency order,
  // the remembered evictions and the eviction count. Deserialize returns false
  // (and leaves the engine cleared) when the bytes are not a state of an engine
  // with these options' groups.
  std::vector<std::uint8_t> Serialize() const;
  bool Deserialize(std::span<const std::uint8_t> bytes);

 private:
  static constexpr std::uint64_t kColdBytes = ~std::uint64_t{0};
  static constexpr std::uint64_t kBeyondBytes = kColdBytes - 1;  // evicted from tracking
  std::uint64_t PrefixBytes(std::uint32_t end) const;            // bytes of live slots [0, end)
  void Add(std::vector<std::uint64_t>* tree, std::uint32_t slot, std::int64_t delta);
  void Touch(std::uint32_t group, PageId page);
  void Rebuild(std::uint32_t slots);
  // Bounded: evicts the least recent items until the tracked bytes fit max_bytes.
  void EvictOverBound();
  bool WasEvicted(std::uint32_t group, PageId page) const;
  void ForgetEviction(std::uint32_t group, PageId page);
  void RememberEviction(std::uint32_t group, PageId page);

  HybridEngineOptions options_;
  std::uint64_t unit_ = 1;
  std::vector<std::unordered_map<PageId, std::uint32_t>> slot_of_;  // per group: page -> slot
  std::vector<std::uint64_t> weight_;                               // slot -> bytes (0: not live)
  std::vector<std::uint8_t> group_;                                 // slot -> group
  std::vector<PageId> page_;                                        // slot -> page
  std::vector<std::uint64_t> tree_;                                 // Fenwick tree of weight_ (1-based)
  std::vector<std::vector<std::uint64_t>> group_tree_;              // per group
  std::vector<std::uint64_t> group_total_;
  std::uint32_t next_ = 0;
  std::uint32_t oldest_ = 0;  // no live slot below it
  std::uint64_t live_ = 0;
  std::uint64_t total_ = 0;
  std::uint64_t evicted_items_ = 0;
  std::uint64_t share_sum_ = 0;  // W, the sum of pool_shares; 0: one pool
  // Per group: items evicted from tracking, in two generations when
  // remembered_evictions bounds them (young_count_ items in the young one).
  std::vector<std::unordered_set<PageId>> evicted_young_, evicted_old_;
  std::uint64_t young_count_ = 0;
  // Per request scratch: D of each item (bytes, kColdBytes when cold), [g * n + i].
  std::vector<std::uint64_t> item_;
  std::vector<std::uint64_t> need_;    // D(L), L = 1..n
  std::vector<std::uint32_t> window_;  // the monotonic deque's positions
  std::vector<std::size_t> early_;     // per group: the pages referenced early
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_HYBRID_ENGINE_H_
