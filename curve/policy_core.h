// PolicyCore: one cache of N slots under an eviction policy, which knows which of
// its pages are held. The one eviction order of kvwatch's simulations: the
// simulated replica's KV pool (sim/replica.cc) is a PolicyCore; replay's and the
// canaries' caches drive a core too: CoreCache (curve/policy_core_cache.h: every
// policy but sglang and vllm) one page at a time, and the
// lifetime model of sglang and vllm (curve/policy_lifetime.h) with its running
// requests holding their slots until they finish. So `kvwatch replay --policy`, the
// live canaries and `kvwatch simulate` run each of those orders from this one
// implementation.
//
// A slot is a KV block (the replica) or a page (replay). It is
//   held       its hold count is nonzero (running requests use it): NEVER a victim;
//   free, with a page   hold count 0, still carrying a page id (a prefix cache
//              entry): a candidate victim, in the order the policy keeps;
//   free, empty         hold count 0, no page id: given out before any victim
//              (vllm queues these with the candidates, as vLLM's free queue does).
// A page id is in at most one slot (Find).
//
// Ghosts (arc's B1 and B2, s3fifo's ghost FIFO): page ids an order remembers after
// their slot was reused. They live in the core's page map beside the resident
// pages, as the order's ghost number tagged with kGhostBit, so that a page that
// becomes a ghost, or comes back, rewrites its one entry instead of moving between
// two maps (with a map of its own, replay's arc ran at half the speed). Find never
// answers a ghost; AcquireFor hands the order the ghost number (Incoming), Admit
// overwrites the entry with the slot, and the victim's page becomes a ghost when
// the order says so (Evicted).
//
// The operations, what a caller does:
//   reference  Hold(s): a request uses slot s (a prefix hit, or a page it shares
//              with a running request). A hit for the policy (Reference hooks) and
//              a hold. Reference(s) = Hold(s) then Release(s): a hit that does not
//              keep the page (replay, where nothing runs).
//   admit      AcquireFor(page) then Admit(s, page, ...): a page not resident gets
//              a slot, held once; Acquire() for a slot that carries no page id
//              (generated tokens).
//   release    Release(s): one hold dropped; at zero s becomes a candidate (or an
//              empty free slot).
//   victim     chosen inside Acquire/AcquireFor when no empty slot is left, among
//              the free slots with a page only (sglang: the free leaves);
//              its page id is dropped (Find no longer answers it). EvictOne() drops
//              a victim's page ahead of the admissions that need its slot (sglang's
//              lifetime model: SGLang evicts before it allocates).
//   unnamed    Acquire() then AdmitUnnamed(s, parent): a page the input cannot
//              name (sglang's generated pages) takes the slot like a page, is
//              evicted like one, and is never found.
// When every slot is held, Acquire/AcquireFor return kNoSlot and change nothing:
// the caller learns it and decides (the replica checks Obtainable() first and
// preempts a running request; the lifetime model counts a preemption).
// Release of a slot that is not held, or not a slot, returns false and changes
// nothing (a caller's bug made visible, never a negative count). Holding a slot
// twice needs two releases.
//
// Adding a policy (docs/architecture.md, "Adding things"): one file
// curve/policy_core_<name>.cc with a final EvictionOrder (constructed from
// CoreOptions and the slot table) and its two one-line factories, NewOrder<it>
// (the simulator) and NewCoreCache<it> (replay and the canaries), and one row in
// the registry (kPolicyTable, curve/policy.cc; the enum value in curve/policy.h).
//
// A per-group hybrid simulation (curve/hybrid_sim.h, today its own LRU free queue)
// would drive one PolicyCore per KV-cache group, slots = that group's blocks:
// AcquireFor/Admit for the pages [L, n) of each group, Hold for the hit's blocks,
// Release at finish and for the pages that leave a window (early free); the pool's
// byte capacity splits into per-group slot counts, or one core whose PageIds carry
// the group in their high bits (one free queue across groups, as vLLM's).
//
// Complexity: Find, Hold, Release, Admit O(1) expected; a victim O(1) amortized for
// lru, vllm, fifo, s3fifo, arc, sieve (sieve's hand may pass held slots), O(log n)
// for the heaps (sglang, lfu, belady), O(categories) for workload-aware, O(1)
// amortized for priority (a list per level; levels are few). Memory: about 48
// bytes a slot plus the page map and ghosts.
//
// Thread safety: none; one PolicyCore per simulation (per thread).
#ifndef KVWATCH_CURVE_POLICY_CORE_H_
#define KVWATCH_CURVE_POLICY_CORE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "base/status.h"
#include "curve/page_map.h"
#include "curve/policy.h"
#include "curve/request.h"

namespace kvwatch::curve {

using Slot = std::uint32_t;
inline constexpr Slot kNoSlot = 0xffffffffu;
// In the core's page map, the bit that marks a ghost's number (slots are below it).
inline constexpr std::uint32_t kGhostBit = 0x80000000u;
inline constexpr std::uint32_t kNoGhost = kNoSlot;

// One slot. The policy fields are used by whichever EvictionOrder the core has.
// The fields the list orders touch at every reference and eviction (lru, vllm and
// fifo: the page, the holds, the links, the flags) come first, in the first 24
// bytes, so that a slot's hot part lies in one cache line for three slots in four;
// 48 bytes in all (with the fields in declaration order it was 56, and the hot ones
// spread over 50 of them).
struct CoreSlot {
  PageId page = 0;
  std::uint32_t holds = 0;       // running requests holding it
  std::uint32_t prev = kNoSlot;  // list orders
  std::uint32_t next = kNoSlot;
  bool has_page = false;      // carries a page (in the page map, unless unnamed)
  bool unnamed = false;       // its page has no id (AdmitUnnamed): never in the page map
  bool in_order = false;      // a candidate in the EvictionOrder
  std::uint8_t freq = 0;      // s3fifo: hits, at most 3; sieve: the visited bit
  bool in_main = false;       // s3fifo: in the main queue; arc: in T2
  std::uint8_t category = 0;  // workload-aware: the category of the last referrer (< 64)
  std::uint32_t version = 0;  // lazy heaps and queues: entries of an older version are stale
  // fifo: OrderKey; sglang: release order; lfu: references since admitted;
  // priority: the retention priority + 2^32; belady: the next use;
  // workload-aware: the request clock at the last reference.
  std::uint64_t key = 0;
  std::uint32_t parent = kNoSlot;  // sglang: the slot of the previous prompt page
  std::uint32_t children = 0;      // sglang: slots with a page whose parent this is
};
static_assert(sizeof(CoreSlot) == 48);

// The request the next reference or admission serves (SetReferrer).
struct Referrer {
  std::uint32_t request = 0;   // its index in arrival order
  std::int32_t priority = 0;   // retention priority (priority)
  std::uint32_t category = 0;  // category (workload-aware), < kMaxCategories
  // belady without a NextUseOracle (replay): the next use of the page the next
  // reference or admission is for (SetNextUse), kNeverUsed for none.
  std::uint64_t next_use = kNeverUsed;
};

// Each page's references over a whole input known in advance, for belady: the
// requests' pages in arrival order, each one's pages referenced tail first.
class NextUseOracle {
 public:
  explicit NextUseOracle(std::span<const std::span<const PageId>> requests);
  // The first reference to `page` by a request after request r; kNeverUsed if none.
  std::uint64_t After(PageId page, std::uint32_t r) const;

 private:
  std::vector<std::uint64_t> ends_;   // request r's references are numbered below ends_[r]
  PageMap slots_;                     // page -> its slot
  std::vector<std::uint64_t> start_;  // slot s's references: uses_[start_[s] .. start_[s + 1])
  std::vector<std::uint64_t> uses_;
};

// A policy's eviction order over the free slots with a page (and, for vllm, the
// free empty ones): the one thing a policy file implements. The core calls the
// hooks; every REQUIRES below is the core's to keep.
class EvictionOrder {
 public:
  // Whether a reference to a free candidate leaves the order as it was (Remove,
  // Hit, Add change nothing but the flag and the count they restore: fifo, whose
  // hits do not reorder). A core over the order's own class then skips the three
  // (Reference); the run-time PolicyCore, over this base, calls them.
  static constexpr bool kInertReferences = false;

  virtual ~EvictionOrder() = default;
  // Slot s became free (holds 0). REQUIRES: s has a page, or TakesEmpty().
  virtual void Add(Slot s) = 0;
  // Slot s, free and in the order, is held again.
  virtual void Remove(Slot s) = 0;
  // The victim, taken out of the order. REQUIRES: size() > 0. kNoSlot (nothing
  // changes) only when no candidate can be taken now: sglang's, when every free
  // node has a held descendant.
  virtual Slot Pop() = 0;
  // Candidates in the order.
  virtual std::uint64_t size() const = 0;
  // Whether free empty slots are queued here too (vllm).
  virtual bool TakesEmpty() const { return false; }
  // A slot is about to be acquired for `page` (not resident), before any Pop for
  // it; Filled for that slot follows (arc's ghost check, workload-aware's counts).
  // ghost: the page's ghost number when it is one of this order's ghosts, else
  // kNoGhost (always, unless KeepsGhosts).
  virtual void Incoming(PageId page, std::uint32_t ghost) {}
  // Whether the order keeps ghosts in the core's page map (arc, s3fifo).
  virtual bool KeepsGhosts() const { return false; }
  // The victim s, just popped, still carries its page id: the ghost number
  // (< kGhostBit) the page keeps in the map, or kNoGhost to forget the page.
  // Called only when KeepsGhosts.
  virtual std::uint32_t Evicted(Slot s) { return kNoGhost; }
  // Slot s just got its page id.
  virtual void Filled(Slot s) {}
  // A request referenced slot s (held or free).
  virtual void Hit(Slot s) {}
  // sglang: slot s lost a child with a page; it may have become an evictable leaf.
  virtual void MaybeLeaf(Slot s) {}
  // Whether the core keeps parents and children (sglang).
  virtual bool KeepsTree() const { return false; }
  // Checkpoint of the order's own state (the core writes the slots): needed by every
  // order replay and the canaries drive (CoreCache, curve/policy_core_cache.h); the
  // replica never checkpoints. Deserialize returns false on malformed bytes.
  virtual void SerializeOrder(std::vector<std::uint8_t>* out) const {}
  // The slot the next Pop would most likely return, or kNoSlot: the core reads
  // its page and prefetches its map entry while the current eviction runs (a hint
  // only; an order whose victim is not at hand answers kNoSlot).
  virtual Slot PeekVictim() const { return kNoSlot; }
  // Bytes of the order's own structures (heaps, queues, ghosts; not the slots).
  virtual std::size_t MemoryBytes() const { return 0; }
  virtual bool DeserializeOrder(std::span<const std::uint8_t>* in) { return true; }

  // The core's page map, where ghosts are kept (the core sets it at construction).
  void AttachPages(PageMap* pages) { pages_ = pages; }

  void SetReferrer(const Referrer& referrer) { referrer_ = referrer; }
  void SetNextUse(std::uint64_t next_use) { referrer_.next_use = next_use; }
  // fifo's clock: it moves at each admission (PolicyCore::NewEpoch) and each
  // requeue of a held slot (one clock for both, so that the order is total).
  std::uint64_t NewEpoch() { return ++epoch_; }
  std::uint64_t epoch() const { return epoch_; }
  void set_epoch(std::uint64_t epoch) { epoch_ = epoch; }

 protected:
  const Referrer& referrer() const { return referrer_; }
  // A ghost forgotten: its page leaves the core's page map.
  void ForgetGhostPage(PageId page) { pages_->Erase(page); }
  // A restored ghost's page (DeserializeOrder); false when the map has the page.
  bool RestoreGhostPage(PageId page, std::uint32_t ghost) {
    if (pages_->Find(page) != nullptr || ghost >= kGhostBit) return false;
    pages_->Insert(page, kGhostBit | ghost);
    return true;
  }

 private:
  PageMap* pages_ = nullptr;
  Referrer referrer_;
  std::uint64_t epoch_ = 0;
};

struct CoreOptions {
  PolicyKind kind = PolicyKind::kLru;
  std::uint64_t slots = 0;  // >= 1
  // belady only: the whole input's future (must outlive the core); without one
  // (replay), each reference's next use comes from SetNextUse.
  const NextUseOracle* future = nullptr;
  // s3fifo: the small FIFO's share of the slots and the hits that promote a page
  // out of it (PolicyOptions's fields of the same names).
  double s3fifo_small_fraction = 0.1;
  std::uint32_t s3fifo_promotion_hits = 1;
  // The page map's layout (curve/page_map.h): kRuns where page ids come in runs of
  // consecutive numbers (replay's trace formats), so a request's pages share lines.
  PageMapLayout page_layout = PageMapLayout::kMixed;
};

namespace policy_internal {
// The order of options.kind from the registry (curve/policy.cc).
std::unique_ptr<EvictionOrder> MakeEvictionOrder(const CoreOptions& options, std::vector<CoreSlot>* slots);
}  // namespace policy_internal

// The core over an eviction order of type Order. PolicyCore (Order = EvictionOrder,
// the order chosen at run time from the registry) is what the simulator's replica
// drives; replay's and the canaries' caches (curve/policy_core_cache.h) drive a
// core over the order's own final class, so that the hooks are direct calls the
// compiler inlines, not a virtual call per reference. Same code, same semantics.
// A concrete Order is constructed as Order(const CoreOptions&, std::vector<CoreSlot>*).
template <class Order>
class BasicPolicyCore {
 public:
  // REQUIRES: HasCore(options.kind), 1 <= slots < kNoSlot (<= kGhostBit when the
  // order keeps ghosts), and belady's future (MakePolicyCore checks).
  explicit BasicPolicyCore(const CoreOptions& options)
      : slots_(options.slots),
        order_(MakeOrder(options, &table_)),
        tree_(order_->KeepsTree()),
        ghosts_(order_->KeepsGhosts()),
        map_(options.page_layout) {
    order_->AttachPages(&map_);
    // Slots are materialized as they are first used; reserve what a small core needs.
    const std::uint64_t expected = std::min<std::uint64_t>(slots_, 1u << 19);
    table_.reserve(static_cast<std::size_t>(expected));
    // Twice the pages a full core holds: the linear-probing map then stays at most
    // 3/8 full, so that dropping a page (every eviction) scans short clusters.
    // (Sized for the pages alone, replay's lru took 1.4-1.8x the CPU time,
    // bench/policy_bench Policy/policy:0, and the canaries did not gain.)
    map_.Reserve(static_cast<std::size_t>(2 * expected));
  }
  BasicPolicyCore(const BasicPolicyCore&) = delete;
  BasicPolicyCore& operator=(const BasicPolicyCore&) = delete;

  std::uint64_t slots() const { return slots_; }
  // Slots Acquire can give now: never used, free empty, and candidates.
  // (sglang: at most; a free node with a held descendant counts but cannot be taken
  // yet, and Acquire then returns kNoSlot.)
  std::uint64_t Obtainable() const { return (slots_ - table_.size()) + empty_.size() + order_->size(); }
  std::uint64_t held() const { return held_; }
  std::uint64_t free_with_page() const { return free_with_page_; }
  std::uint64_t resident() const { return resident_; }
  // Changes whenever a page id is given to or dropped from a slot (Find's answers).
  std::uint64_t page_version() const { return page_version_; }

  Slot Find(PageId page) const {
    const std::uint32_t* s = map_.Find(page);
    if (ghosts_) {  // remembered for AcquireFor(page), which then needs no probe of its own
      looked_up_ = page;
      looked_up_value_ = s == nullptr ? kNoGhost : *s;
      looked_up_generation_ = map_.generation();
    }
    return s == nullptr || (*s & kGhostBit) != 0 ? kNoSlot : *s;
  }
  // Hints the CPU to fetch what Find(page) reads.
  void Prefetch(PageId page) const { map_.Prefetch(page); }
  // Hints the CPU to fetch slot s (from Find).
  void PrefetchSlot(Slot s) const { __builtin_prefetch(&table_[s]); }
  // Whether slot s (any earlier answer of Find) still carries `page`.
  bool Carries(Slot s, PageId page) const { return table_[s].has_page && table_[s].page == page; }
  bool IsFree(Slot s) const { return table_[s].holds == 0; }
  std::uint32_t holds(Slot s) const { return s < table_.size() ? table_[s].holds : 0; }
  const CoreSlot& slot(Slot s) const { return table_[s]; }

  // The request the next Hold, Acquire and Admit calls serve.
  void SetReferrer(const Referrer& referrer) { order_->SetReferrer(referrer); }
  // belady without an oracle: the next use of the page the next Hold or Admit is for.
  void SetNextUse(std::uint64_t next_use) { order_->SetNextUse(next_use); }
  // A reference that holds: a hit. REQUIRES: s came from Find or Acquire.
  void Hold(Slot s) {
    CoreSlot& x = table_[s];
    if (x.holds == 0) {
      if (x.in_order) order_->Remove(s);
      if (x.has_page) --free_with_page_;
      ++held_;
    }
    ++x.holds;
    order_->Hit(s);
  }
  // A hit that does not keep the page: Hold then Release.
  void Reference(Slot s) {
    if constexpr (Order::kInertReferences) {
      if (table_[s].holds == 0) return;  // free, in the order, and staying where it is
    }
    Hold(s);
    Release(s);
  }
  // Drops one hold; false (nothing changes) when s is not a held slot.
  bool Release(Slot s) {
    if (s >= table_.size() || table_[s].holds == 0) return false;
    CoreSlot& x = table_[s];
    if (--x.holds != 0) return true;
    --held_;
    if (x.has_page) {
      ++free_with_page_;
      order_->Add(s);
    } else if (order_->TakesEmpty()) {
      order_->Add(s);
    } else {
      empty_.push_back(s);
    }
    return true;
  }
  // Releases each slot, last first (a request releases its tail first).
  void ReleaseAll(std::span<const Slot> slots) {
    for (std::size_t i = slots.size(); i-- > 0;) Release(slots[i]);
  }
  // A slot held once and carrying no page id: a free empty one, else a never-used
  // one, else the victim (its page dropped); kNoSlot when every slot is held.
  Slot Acquire() {
    Slot s;
    if (!empty_.empty()) {
      s = empty_.back();
      empty_.pop_back();
    } else if (table_.size() < slots_) {
      s = static_cast<Slot>(table_.size());
      table_.emplace_back();
    } else if (order_->size() > 0) {
      s = order_->Pop();
      if (s == kNoSlot) return kNoSlot;  // sglang: every free node has a held descendant
      // The next victim's page and map entry, fetched while this one is dropped.
      if (const Slot next = order_->PeekVictim(); next != kNoSlot) map_.Prefetch(table_[next].page);
      if (table_[s].has_page) {
        --free_with_page_;
        DropPage(s);
      }
    } else {
      return kNoSlot;  // every slot is held
    }
    table_[s].holds = 1;
    ++held_;
    return s;
  }
  // Acquire for a slot that will carry `page` (Admit next): the order sees the page
  // first. REQUIRES: Find(page) == kNoSlot.
  Slot AcquireFor(PageId page) {
    if (Obtainable() == 0) return kNoSlot;
    std::uint32_t ghost = kNoGhost;
    if (ghosts_) {
      // Not resident: a ghost when found. The last Find's answer when it was for this
      // page and no entry has moved since (a ghost's entry changes only by erasure).
      std::uint32_t v = looked_up_value_;
      if (looked_up_ != page || looked_up_generation_ != map_.generation()) {
        const std::uint32_t* found = map_.Find(page);
        v = found == nullptr ? kNoGhost : *found;
      }
      if (v != kNoGhost) ghost = v & ~kGhostBit;
    }
    order_->Incoming(page, ghost);
    return Acquire();
  }
  // Evicts the next victim ahead of the admissions that will need its slot (SGLang
  // evicts what a request needs before allocating it): its page is dropped and the
  // slot becomes free and empty. False when there is no victim. REQUIRES: the
  // order does not take empty slots (not vllm).
  bool EvictOne() {
    const Slot s = order_->size() > 0 ? order_->Pop() : kNoSlot;
    if (s == kNoSlot) return false;
    --free_with_page_;
    DropPage(s);
    empty_.push_back(s);
    return true;
  }
  // A new admission's epoch (fifo's order, OrderKey).
  std::uint64_t NewEpoch() { return order_->NewEpoch(); }
  // fifo's order: the key of page k of a request admitted at `epoch` (tail first).
  static std::uint64_t OrderKey(std::uint64_t epoch, std::uint64_t page_index) {
    constexpr std::uint64_t kMax = (std::uint64_t{1} << 24) - 1;
    return (epoch << 24) | (kMax - std::min(page_index, kMax));
  }
  // Gives held slot s (from AcquireFor(page)) its page id; parent: the slot of the
  // previous prompt page (kNoSlot for the first); the page is page `index` of a
  // request admitted at `epoch`. REQUIRES: Find(page) == kNoSlot.
  void Admit(Slot s, PageId page, Slot parent, std::uint64_t epoch, std::uint64_t index) {
    CoreSlot& x = table_[s];
    x.key = OrderKey(epoch, index);
    x.page = page;
    x.has_page = true;
    if (ghosts_) {
      map_.InsertOrAssign(page, s);  // a ghost's entry becomes the slot's
    } else {
      map_.Insert(page, s);
    }
    ++resident_;
    ++page_version_;
    if (tree_ && parent != kNoSlot) {
      x.parent = parent;
      ++table_[parent].children;
    }
    order_->Filled(s);
  }

  // Gives held slot s (from Acquire) a page no request can find: a page the input
  // cannot name that still takes its slot (sglang: a generated page, which SGLang
  // caches with the request's path). Resident, and a candidate like any page once
  // free; Find never answers it. parent: as for Admit. REQUIRES: the order reads
  // no page ids (sglang, lru, vllm).
  void AdmitUnnamed(Slot s, Slot parent) {
    CoreSlot& x = table_[s];
    x.page = 0;
    x.has_page = true;
    x.unnamed = true;
    ++resident_;
    if (tree_ && parent != kNoSlot) {
      x.parent = parent;
      ++table_[parent].children;
    }
    order_->Filled(s);
  }

  std::size_t MemoryBytes() const {
    return table_.capacity() * sizeof(CoreSlot) + empty_.capacity() * sizeof(Slot) + map_.MemoryBytes() +
           order_->MemoryBytes();
  }
  // The slots (pages, holds, tree), then the order's state.
  void Serialize(std::vector<std::uint8_t>* out) const;
  // REQUIRES: fresh. False on malformed bytes (then discard the core).
  bool Deserialize(std::span<const std::uint8_t>* in);

 private:
  static std::unique_ptr<Order> MakeOrder(const CoreOptions& options, std::vector<CoreSlot>* table) {
    if constexpr (std::is_same_v<Order, EvictionOrder>) {
      return policy_internal::MakeEvictionOrder(options, table);
    } else {
      return std::make_unique<Order>(options, table);
    }
  }
  void DropPage(Slot s) {
    CoreSlot& x = table_[s];
    if (x.unnamed) {
      x.unnamed = false;
    } else {
      const std::uint32_t ghost = ghosts_ ? order_->Evicted(s) : kNoGhost;
      if (ghost != kNoGhost) {
        *map_.Find(x.page) = kGhostBit | ghost;
      } else {
        map_.Erase(x.page);
      }
      ++page_version_;
    }
    x.has_page = false;
    --resident_;
    if (tree_ && x.parent != kNoSlot) {
      const Slot parent = x.parent;
      --table_[parent].children;
      x.parent = kNoSlot;
      order_->MaybeLeaf(parent);
    }
  }

  std::uint64_t slots_;
  std::vector<CoreSlot> table_;   // grows up to slots_ (never-used slots are not materialized)
  std::unique_ptr<Order> order_;  // over table_
  bool tree_;
  bool ghosts_;              // the order keeps ghosts in map_
  std::vector<Slot> empty_;  // free slots with no page id (not under vllm)
  // page -> its slot, or kGhostBit | the order's ghost number. Mutable: a Find that
  // misses leaves the map its probe's end, for the Admit of the page that follows.
  mutable PageMap map_;
  // Apart, so that the compiler does not update two at once with a 16-byte load and
  // store: an eviction changes them one by one just before the admission that
  // follows, and the wide load then waits for the narrow stores (a failed store
  // forward: replay's fifo spent 4% of its time there).
  alignas(16) std::uint64_t held_ = 0;
  alignas(16) std::uint64_t free_with_page_ = 0;
  alignas(16) std::uint64_t resident_ = 0;
  alignas(16) std::uint64_t page_version_ = 0;
  // The last Find, for AcquireFor (ghost orders only).
  mutable PageId looked_up_ = 0;
  mutable std::uint32_t looked_up_value_ = kNoGhost;
  mutable std::uint64_t looked_up_generation_ = ~std::uint64_t{0};
};

// Serialize and Deserialize are in curve/policy_core_serialize.h, instantiated
// for EvictionOrder in curve/policy_core.cc and for a concrete order in its file.
extern template class BasicPolicyCore<EvictionOrder>;
using PolicyCore = BasicPolicyCore<EvictionOrder>;

// Whether `kind` has an eviction order in the core (every policy does; the
// simulator refuses one that does not).
bool HasCore(PolicyKind kind);
// Whether `kind`'s order keeps ghosts in the page map: its core then has at most
// kGhostBit slots (MakePolicyCore and MakePolicyCache check).
bool OrderKeepsGhosts(PolicyKind kind);
// A core for `options`; an error naming the option when it is invalid.
base::Result<std::unique_ptr<PolicyCore>> MakePolicyCore(const CoreOptions& options);

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_POLICY_CORE_H_
