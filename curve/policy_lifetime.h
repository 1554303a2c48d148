// The lifetime model of the policies that model running requests, sglang and
// vllm: which requests run, when each ends, and which of the core's slots each
// holds. Their eviction orders are the core's (curve/policy_core.h; SglangOrder
// and ListOrder in curve/policy_core_lists.cc, which instantiates LifetimeCache
// over them): a running request holds its slots in the core, finishing or being
// preempted releases them, and the victim is the order's, among unheld slots. Not
// a public API.
//
// Lifetimes, common to both: a request runs from its arrival until its end
// (SimRequest::end_s; an unknown end means it finishes before the next request
// arrives), and while it runs it holds its prompt pages and output_pages more for
// its generated tokens. Before each arrival at time t, every running request with
// an end at or before t finishes, in order of end (then arrival). The trace cannot
// say which later request would reuse generated tokens, so generated pages take
// capacity but are never hit. A request with no arrival time (a trace without
// timestamps) first finishes every running request.
//
// sglang follows SGLang's RadixCache (sgl-project/sglang at 95769b2,
// python/sglang/srt/mem_cache/radix_cache.py): one node per page, a page's
// parent the page before it in the request that admitted it (the core's tree);
// only leaves nobody holds are evicted, the least recently released first. A
// request holds its resident pages on arrival (inc_lock_ref), and before it
// allocates, what the free slots lack for the pages it lacks and its generated
// pages is evicted up front (ScheduleBatch, python/sglang/srt/managers/
// schedule_batch.py, evicts from the tree before it allocates; its
// _evict_tree_cache_if_needed asks evict(num_tokens) for the whole need when the
// free slots fall short, which can evict a few leaves more than this model's
// shortfall). Its generated pages are cached
// with its path when it finishes (cache_finished_req), as pages no request can
// find (PolicyCore::AdmitUnnamed), and its slots are released in the touch order.
// When every other page is held, the pages that do not fit are not admitted and
// the request counts as preempted (SGLang would hold it back in the queue).
//
// vllm follows vLLM V1's block pool (vllm-project/vllm at c59cb79: vllm/v1/core/block_pool.py
// and kv_cache_manager.py): a request's cached pages are referenced on
// arrival (touch: ref_cnt + 1, out of the free queue); each page it lacks and each
// generated page takes a block from the free queue's head (never-used blocks
// first), evicting the cached page that block held. A request that finishes
// releases its blocks deepest (generated) first; when the free blocks do not cover
// what an arriving request needs, running requests are preempted newest first (V1's
// scheduler pops its running list), their blocks released the same way, each
// counted; if the request still does not fit, it takes what is free and counts as
// preempted itself. A preempted request is not run again. The touch order does not
// apply: release order is vLLM's.
//
// Thread safety: none; one cache per thread.
#ifndef KVWATCH_CURVE_POLICY_LIFETIME_H_
#define KVWATCH_CURVE_POLICY_LIFETIME_H_

#include <array>
#include <cstdint>
#include <memory>
#include <queue>
#include <span>
#include <vector>

#include "base/byte_io.h"
#include "curve/policy.h"
#include "curve/policy_core.h"
#include "curve/policy_core_serialize.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve::policy_internal {

// Running requests: what each holds (core slots), by arrival order, and when each
// ends. Their records are pooled: a request's start allocates nothing in steady
// state (no map node, and its slots buffer is a taken request's).
class RunningSet {
 public:
  struct Running {
    double end = 0;
    std::vector<Slot> slots;  // held slots, generated pages last
  };

  // Adds a request that arrived now; returns its record (its slots empty).
  Running& Start(double end);
  // Takes out the running request that ends first if it ends at or before t (any
  // when t is NaN; ties to the earlier arrival); nullptr when none does. The
  // record taken stays readable until the next Take.
  const Running* TakeFinished(double t);
  // Takes out the most recently started request, as TakeFinished; nullptr when
  // none runs.
  const Running* TakeNewest();
  std::size_t size() const { return size_; }

  // Checkpoint: the next order, then every running request (order, end, its held
  // slots). The end heap is not written: it is rebuilt from the running requests.
  void Serialize(std::vector<std::uint8_t>* out) const;
  // Consumes what Serialize wrote; every slot must be below `slots`, and
  // (*holdings)[slot] counts each holding. REQUIRES: nothing runs.
  bool Deserialize(std::span<const std::uint8_t>* in, std::uint64_t slots, std::vector<std::uint32_t>* holdings);
  std::size_t MemoryBytes() const;

 private:
  // A pooled record: the request started `order`-th, while live.
  struct Record {
    std::uint64_t order = 0;
    bool live = false;
    Running run;
  };
  // A request, by its order and record (stale once the record is taken).
  struct Ref {
    std::uint64_t order;
    std::uint32_t record;
  };
  struct End {
    double end;
    Ref ref;
    bool operator>(const End& o) const { return end != o.end ? end > o.end : ref.order > o.ref.order; }
  };
  bool Live(const Ref& r) const { return records_[r.record].live && records_[r.record].order == r.order; }
  Running& Add(std::uint64_t order, double end);
  const Running* Take(const Ref& r);

  SlotPool<Record> records_;
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends_;  // stale entries skipped
  // The requests in start order (increasing orders), taken ones dropped from the
  // back as they surface and all at once when they outnumber the live ones.
  std::vector<Ref> started_;
  std::uint64_t next_order_ = 0;
  std::size_t size_ = 0;     // live records
  Running taken_;            // the request taken last
  std::vector<Slot> spare_;  // the buffer of the one taken before it, for the next Start
};

// When a request ends for its lifetime: an unknown end finishes before the next
// arrival (-inf is at or before any time).
double EndOf(const SimRequest& r);

// sglang's (Order = SglangOrder) or vllm's (Order = ListOrder) replay and canary
// cache: the lifetime model above driving a core over Order.
template <class Order>
class LifetimeCache final : public PolicyCache {
 public:
  explicit LifetimeCache(const PolicyOptions& options)
      : options_(options),
        sglang_(options.kind == PolicyKind::kSglang),
        // The runs layout, as CoreCache's for the orders without ghosts: trace formats
        // number a request's pages consecutively, so its lookups and its evicted
        // pages' erasures share map lines (hashed ids probe as in the mixed layout).
        core_(CoreOptions{options.kind, options.capacity, nullptr, options.s3fifo_small_fraction,
                          options.s3fifo_promotion_hits, PageMapLayout::kRuns}) {}

  SimOutcome Process(const SimRequest& request) override {
    while (const RunningSet::Running* finished = running_.TakeFinished(request.arrival_s)) Release(*finished);
    // One lookup per page: the hits are the leading pages found, and every page
    // found is held before anything is evicted, so that no victim can be one of
    // them. Held after all the lookups, whose prefetches have brought the slots in
    // (holding each as it was found waited on its slot's cache miss).
    const std::span<const PageId> pages = request.pages;
    SimOutcome out;
    const std::uint64_t missing = FindPages(pages, &out.hits);
    for (const Slot s : found_) {
      if (s != kNoSlot) core_.Hold(s);
    }
    // Duplicated missing pages take one slot; counting them twice only evicts or
    // preempts a little early, in a case real engines do not produce.
    const std::uint64_t need = missing + request.output_pages;
    if (sglang_) {
      while (core_.slots() - core_.resident() < need && core_.EvictOne()) {
      }
      out.preempted = AdmitSglang(request, running_.Start(EndOf(request)));
    } else {
      while (core_.Obtainable() < need) {
        const RunningSet::Running* newest = running_.TakeNewest();
        if (newest == nullptr) break;
        Release(*newest);
        ++out.preempted_running;
      }
      out.preempted = core_.Obtainable() < need;
      AdmitVllm(request, running_.Start(EndOf(request)));
    }
    return out;
  }

  std::uint64_t resident() const override { return core_.resident(); }
  std::size_t MemoryBytes() const override {
    return core_.MemoryBytes() + running_.MemoryBytes() + found_.capacity() * sizeof(Slot) +
           repeats_.capacity() * sizeof(std::size_t) + sizeof(missing_seen_);
  }

  // The core (its slots, holds and tree, then the order), then the running
  // requests, whose holdings must be exactly the core's hold counts.
  void Serialize(std::vector<std::uint8_t>* out) const override {
    core_.Serialize(out);
    running_.Serialize(out);
  }
  bool Deserialize(std::span<const std::uint8_t>* in) override {
    std::vector<std::uint32_t> holdings;
    if (!core_.Deserialize(in) || !running_.Deserialize(in, core_.slots(), &holdings)) return false;
    std::uint64_t held = 0;
    for (Slot s = 0; s < holdings.size(); ++s) {
      if (holdings[s] != core_.holds(s)) return false;
      held += holdings[s] != 0 ? 1 : 0;
    }
    return held == core_.held();
  }

 private:
  // Looks every page up into found_ (its slot, prefetched for the Hold that
  // follows, or kNoSlot), sets *hits to the leading pages found, and returns the
  // pages missing. A page missing twice in the request is admitted at its first
  // position and found at the next, which the admission learns by a second
  // lookup; that lookup is only needed where a missing page may repeat an earlier
  // missing one (a page found is found at every position): repeats_ lists those
  // positions, from a filter of the missing pages' bits, exact up to collisions.
  std::uint64_t FindPages(std::span<const PageId> pages, std::uint32_t* hits) {
    found_.resize(pages.size());
    repeats_.clear();
    missing_seen_.fill(0);
    *hits = static_cast<std::uint32_t>(pages.size());
    std::uint64_t missing = 0;
    PrefetchHead(core_, pages);
    for (std::size_t i = 0; i < pages.size(); ++i) {
      PrefetchAhead(core_, pages, i, TouchOrder::kHeadFirst);
      const Slot s = core_.Find(pages[i]);
      found_[i] = s;
      if (s != kNoSlot) {
        core_.PrefetchSlot(s);
        continue;
      }
      if (missing == 0) *hits = static_cast<std::uint32_t>(i);
      ++missing;
      // Fibonacci hashing: consecutive ids (a run) and hashed ids both spread.
      const std::uint64_t bit = (pages[i] * 0x9e3779b97f4a7c15u) >> (64 - kMissingSeenLog2);
      std::uint64_t& word = missing_seen_[bit / 64];
      const std::uint64_t mask = std::uint64_t{1} << (bit % 64);
      if ((word & mask) != 0) repeats_.push_back(i);
      word |= mask;
    }
    return missing;
  }

  // Whether missing page i may repeat an earlier missing page (FindPages); *next
  // walks repeats_ as the admission walks the pages.
  bool MayRepeat(std::size_t i, std::size_t* next) const {
    if (*next == repeats_.size() || repeats_[*next] != i) return false;
    ++*next;
    return true;
  }

  // The pages found were held on arrival; the pages missing each take a slot (the
  // victims were evicted up front), under the previous page as parent, then the
  // generated pages as unnamed pages. True when a page did not fit.
  bool AdmitSglang(const SimRequest& request, RunningSet::Running& run) {
    Slot* const held = SizeHeld(request, run);
    std::size_t n = 0;
    for (std::size_t i = 0; i < found_.size(); ++i) {
      if (found_[i] != kNoSlot) held[n++] = found_[i];
    }
    Slot parent = kNoSlot;
    std::size_t next_repeat = 0;
    bool preempted = false;
    for (std::size_t i = 0; i < request.pages.size(); ++i) {
      const PageId p = request.pages[i];
      if (found_[i] != kNoSlot) {
        parent = found_[i];
        continue;
      }
      const Slot again = MayRepeat(i, &next_repeat) ? core_.Find(p) : kNoSlot;
      if (again != kNoSlot) {  // a page repeated in this request: held once
        parent = again;
        continue;
      }
      const Slot s = core_.AcquireFor(p);
      if (s == kNoSlot) {
        preempted = true;
        break;
      }
      core_.Admit(s, p, parent, 0, 0);
      held[n++] = s;
      parent = s;
    }
    for (std::uint32_t k = 0; k < request.output_pages && !preempted; ++k) {
      const Slot s = core_.Acquire();
      if (s == kNoSlot) {
        preempted = true;
        break;
      }
      core_.AdmitUnnamed(s, parent);
      held[n++] = s;
      parent = s;
    }
    run.slots.resize(n);
    return preempted;
  }

  // In prefix order: the pages found (held on arrival), the pages missing each in
  // a block while any is free, then the generated pages in blocks with no page id.
  void AdmitVllm(const SimRequest& request, RunningSet::Running& run) {
    Slot* const held = SizeHeld(request, run);
    std::size_t n = 0;
    std::size_t next_repeat = 0;
    for (std::size_t i = 0; i < request.pages.size(); ++i) {
      if (found_[i] != kNoSlot) {
        held[n++] = found_[i];
        continue;
      }
      const PageId p = request.pages[i];
      const Slot again = MayRepeat(i, &next_repeat) ? core_.Find(p) : kNoSlot;
      if (again != kNoSlot) {  // a page repeated in this request: held again
        core_.Hold(again);
        held[n++] = again;
        continue;
      }
      const Slot s = core_.AcquireFor(p);
      if (s == kNoSlot) continue;
      core_.Admit(s, p, kNoSlot, 0, 0);
      held[n++] = s;
    }
    for (std::uint32_t k = 0; k < request.output_pages; ++k) {
      const Slot s = core_.Acquire();
      if (s == kNoSlot) break;
      held[n++] = s;
    }
    run.slots.resize(n);
  }

  // The request's held slots, sized for at most one a page (its prompt's and
  // generated ones) and cut to those held after the admission fills them:
  // push_back stayed an out-of-line call per page.
  static Slot* SizeHeld(const SimRequest& request, RunningSet::Running& run) {
    run.slots.resize(request.pages.size() + request.output_pages);
    return run.slots.data();
  }

  // A finished or preempted request's slots released: sglang's in the touch order
  // (the order SGLang's cache_finished_req marks them used), vllm's deepest first.
  // Each release reads its slot, a cache miss: the slot kPrefetchAhead releases
  // later is prefetched.
  void Release(const RunningSet::Running& r) {
    const std::span<const Slot> slots = r.slots;
    const TouchOrder order = sglang_ ? options_.touch_order : TouchOrder::kTailFirst;
    ForEachInTouchOrder(slots.size(), order, [&](std::size_t i) {
      if (order == TouchOrder::kTailFirst) {
        if (i >= kPrefetchAhead) core_.PrefetchSlot(slots[i - kPrefetchAhead]);
      } else if (i + kPrefetchAhead < slots.size()) {
        core_.PrefetchSlot(slots[i + kPrefetchAhead]);
      }
      core_.Release(slots[i]);
    });
  }

  PolicyOptions options_;
  bool sglang_;
  BasicPolicyCore<Order> core_;
  RunningSet running_;
  std::vector<Slot> found_;  // per page position of the request: its slot when resident, or kNoSlot
  // FindPages's filter of the request's missing pages (2^kMissingSeenLog2 bits),
  // and the positions of the missing pages whose bit was already set.
  static constexpr int kMissingSeenLog2 = 12;
  std::array<std::uint64_t, (std::size_t{1} << kMissingSeenLog2) / 64> missing_seen_{};
  std::vector<std::size_t> repeats_;
};

template <class Order>
std::unique_ptr<PolicyCache> NewLifetimeCache(const PolicyOptions& options) {
  return std::make_unique<LifetimeCache<Order>>(options);
}

}  // namespace kvwatch::curve::policy_internal

#endif  // KVWATCH_CURVE_POLICY_LIFETIME_H_
