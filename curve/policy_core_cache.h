// CoreCache<Order>: replay's and the canaries' PolicyCache (curve/policy.h) for a
// policy whose eviction order is Order, a final EvictionOrder of the core
// (curve/policy_core.h). The one simulation of a policy in `kvwatch replay
// --policy` and the live canaries: the curve's prefix rule (the leading resident
// pages at arrival are the hits), then each page in the touch order referenced
// (resident: a hit for the order) or admitted (a slot acquired, the victim chosen
// by the order), and released at once: in replay no request runs, so nothing
// stays held. (sglang and vllm, which model running requests, drive the core from
// their lifetime model, LifetimeCache in curve/policy_lifetime.h.)
//
// The core is over the order's own final class, so the hooks are direct, inlined
// calls: no virtual call per reference. An order's file instantiates it in its
// cache factory (NewCoreCache<Order>, one line), beside its order factory.
//
// Thread safety: none; one cache per thread.
#ifndef KVWATCH_CURVE_POLICY_CORE_CACHE_H_
#define KVWATCH_CURVE_POLICY_CORE_CACHE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/byte_io.h"
#include "curve/policy.h"
#include "curve/policy_core.h"
#include "curve/policy_core_serialize.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve::policy_internal {

template <class Order>
class CoreCache final : public PolicyCache {
 public:
  explicit CoreCache(const PolicyOptions& options)
      : options_(options),
        belady_(options.kind == PolicyKind::kBelady),
        core_(CoreOptions{options.kind, options.capacity, nullptr, options.s3fifo_small_fraction,
                          options.s3fifo_promotion_hits, Layout(options.kind)}) {}

  SimOutcome Process(const SimRequest& request) override {
    const std::span<const PageId> pages = request.pages;
    SimOutcome out;
    out.hits = LeadingSlots(pages);
    core_.SetReferrer({requests_, request.priority, request.category});
    const std::uint64_t epoch = core_.NewEpoch();
    const std::size_t n = pages.size();
    const bool tail_first = options_.touch_order == TouchOrder::kTailFirst;
    ForEachInTouchOrder(n, options_.touch_order, [&](std::size_t i) {
      PrefetchAhead(core_, pages, i, options_.touch_order);
      const PageId page = pages[i];
      if (belady_) core_.SetNextUse(request.next_use.empty() ? kNeverUsed : request.next_use[i]);
      // A leading page's slot from the prefix pass, unless the request's own
      // admissions since then reused it.
      Slot s = i < out.hits && core_.Carries(lead_[i], page) ? lead_[i] : core_.Find(page);
      if (s != kNoSlot) {
        core_.Reference(s);
        return;
      }
      s = core_.AcquireFor(page);  // never kNoSlot: nothing is held between pages
      // The page's rank in the touch order, as OrderKey counts (tail first): fifo
      // evicts a request's pages in the order they were admitted.
      core_.Admit(s, page, kNoSlot, epoch, tail_first ? i : n - 1 - i);
      core_.Release(s);
    });
    ++requests_;
    return out;
  }

  std::uint64_t resident() const override { return core_.resident(); }
  std::size_t MemoryBytes() const override { return core_.MemoryBytes(); }

  // The request clock, then the core (its slots, then the order's state).
  void Serialize(std::vector<std::uint8_t>* out) const override {
    base::AppendPod(out, requests_);
    core_.Serialize(out);
  }
  bool Deserialize(std::span<const std::uint8_t>* in) override {
    return requests_ == 0 && base::ReadPod(in, &requests_) && core_.Deserialize(in);
  }

 private:
  // The prefix rule (LeadingResidentIn) keeping each leading page's slot in lead_,
  // its line prefetched for the touch pass.
  std::uint32_t LeadingSlots(std::span<const PageId> pages) {
    PrefetchHead(core_, pages);
    if (lead_.size() < pages.size()) lead_.resize(pages.size());
    std::uint32_t hits = 0;
    for (std::size_t i = 0; i < pages.size(); ++i) {
      PrefetchAhead(core_, pages, i, TouchOrder::kHeadFirst);
      const Slot s = core_.Find(pages[i]);
      if (s == kNoSlot) break;
      core_.PrefetchSlot(s);
      lead_[i] = s;
      ++hits;
    }
    return hits;
  }

  // Runs (trace formats number a request's pages consecutively; hashed ids lose
  // nothing), except for the orders that keep ghosts: their ghosts fill the map up
  // to 3/4, where runs that collide make clusters long, and arc ran about a fifth
  // slower in runs (bench/policy_bench Policy/policy:3).
  static PageMapLayout Layout(PolicyKind kind) {
    return OrderKeepsGhosts(kind) ? PageMapLayout::kMixed : PageMapLayout::kRuns;
  }

  PolicyOptions options_;
  bool belady_;  // each reference's next use read from the request
  BasicPolicyCore<Order> core_;
  std::uint32_t requests_ = 0;  // the request clock (Referrer::request)
  std::vector<Slot> lead_;      // the leading resident pages' slots (LeadingSlots)
};

// A policy's replay/canary cache, for its registry row (options checked).
template <class Order>
std::unique_ptr<PolicyCache> NewCoreCache(const PolicyOptions& options) {
  return std::make_unique<CoreCache<Order>>(options);
}
// A policy's order for the replica's core (PolicyCore), for its registry row.
template <class Order>
std::unique_ptr<EvictionOrder> NewOrder(const CoreOptions& options, std::vector<CoreSlot>* slots) {
  return std::make_unique<Order>(options, slots);
}

}  // namespace kvwatch::curve::policy_internal

#endif  // KVWATCH_CURVE_POLICY_CORE_CACHE_H_
