// sieve: SIEVE (Zhang, Yang, Yue, Vigfusson and Rashmi, "SIEVE is Simpler than
// LRU: an Efficient Turn-Key Eviction Algorithm for Web Caches", NSDI 2024,
// Algorithm 1), as an eviction order of the core (curve/policy_core.h). The
// first policy added by the recipe of docs/architecture.md: this file (the order
// and its two one-line factories) and one row in kPolicyTable; replay, the
// canaries and the simulator run it through the core.
//
// The paper: one FIFO queue of the cached objects, each with a visited bit, and a
// hand. A hit sets the bit and moves nothing. A miss inserts the object at the head
// with the bit clear. To evict, the hand starts where it stopped (at the tail the
// first time); while the object under it is visited, the bit is cleared and the
// hand moves one step towards the head (from the head back to the tail); the
// object under it is evicted and the hand stays at its neighbour towards the head.
//
// Here: the queue holds every slot with a page, held or free, in admission order
// (the front of the IndexList is the paper's tail). Held slots cannot be evicted:
// the hand passes over them leaving their bit alone (a held slot is in use, so it
// is not judged; it is judged when the hand comes back after it is released). A
// victim exists when some free slot with a page does (the core's REQUIRES); the
// hand then finds one within two turns, as the first clears every free slot's bit.
//
// Fields used: prev/next (the queue), freq (the visited bit), in_order (free).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/byte_io.h"
#include "curve/index_list.h"
#include "curve/policy_core.h"
#include "curve/policy_core_cache.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve::policy_internal {

namespace {

class SieveOrder final : public EvictionOrder {
 public:
  SieveOrder(const CoreOptions&, std::vector<CoreSlot>* slots) : slots_(*slots) {}

  void Filled(Slot s) override {
    slots_[s].freq = 0;
    queue_.PushBack(slots_, s);
  }
  void Hit(Slot s) override { slots_[s].freq = 1; }
  void Add(Slot s) override {
    slots_[s].in_order = true;
    ++free_;
  }
  void Remove(Slot s) override {
    slots_[s].in_order = false;
    --free_;
  }
  Slot Pop() override {
    Slot o = hand_ != kNoSlot ? hand_ : queue_.front();
    for (;;) {
      CoreSlot& x = slots_[o];
      if (x.in_order && x.freq == 0) break;
      if (x.in_order) x.freq = 0;
      o = x.next != kNoSlot ? x.next : queue_.front();
    }
    hand_ = slots_[o].next;
    queue_.Erase(slots_, o);
    Remove(o);
    return o;
  }
  std::uint64_t size() const override { return free_; }

  // The queue from the paper's tail, then the hand.
  void SerializeOrder(std::vector<std::uint8_t>* out) const override {
    base::AppendPod<std::uint64_t>(out, queue_.size());
    for (Slot s = queue_.front(); s != kNoSlot; s = slots_[s].next) base::AppendPod(out, s);
    base::AppendPod(out, hand_);
  }
  bool DeserializeOrder(std::span<const std::uint8_t>* in) override {
    std::uint64_t n = 0;
    if (!queue_.empty() || !base::ReadCount(in, &n, sizeof(Slot))) return false;
    std::uint64_t with_page = 0;
    for (const CoreSlot& x : slots_) with_page += x.has_page ? 1 : 0;
    if (n != with_page) return false;
    std::vector<bool> seen(slots_.size(), false);
    for (std::uint64_t k = 0; k < n; ++k) {
      Slot s = 0;
      if (!base::ReadPod(in, &s) || s >= slots_.size() || seen[s] || !slots_[s].has_page || slots_[s].freq > 1) {
        return false;
      }
      seen[s] = true;
      CoreSlot& x = slots_[s];
      x.prev = x.next = kNoSlot;
      queue_.PushBack(slots_, s);
      if (x.holds == 0) Add(s);
    }
    return base::ReadPod(in, &hand_) && (hand_ == kNoSlot || (hand_ < slots_.size() && seen[hand_]));
  }

 private:
  std::vector<CoreSlot>& slots_;
  IndexList queue_;      // every slot with a page; front: the oldest (the paper's tail)
  Slot hand_ = kNoSlot;  // kNoSlot: start at the front
  std::uint64_t free_ = 0;
};

}  // namespace

std::unique_ptr<EvictionOrder> MakeSieveOrder(const CoreOptions& options, std::vector<CoreSlot>* slots) {
  return NewOrder<SieveOrder>(options, slots);
}
std::unique_ptr<PolicyCache> MakeSieveCache(const PolicyOptions& options) { return NewCoreCache<SieveOrder>(options); }

}  // namespace kvwatch::curve::policy_internal
