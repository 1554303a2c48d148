// The core's list and queue eviction orders (curve/policy_core.h): lru, vllm,
// fifo, sglang (arc: policy_core_arc.cc; s3fifo: policy_core_s3fifo.cc; lfu,
// priority, belady, workload-aware: policy_core_keyed.cc). "Block" below is a slot of the core; a
// block is "released" when its hold count drops to zero.
#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "base/byte_io.h"
#include "curve/index_list.h"
#include "curve/policy_core.h"
#include "curve/policy_core_cache.h"
#include "curve/policy_internal.h"
#include "curve/policy_lifetime.h"

namespace kvwatch::curve::policy_internal {

namespace {

// lru: free cached blocks in release order, the least recently released first.
// A request releases its blocks tail first, so its prefix is released last and
// outlives its tail, as in curve/'s lru with its tail-first touch order.
// vllm: the same queue, but every free block is in it, cached or not (vLLM's
// free_block_queue): a freed generated block at the tail does not spare a cached
// block at the head.
class ListOrder final : public EvictionOrder {
 public:
  ListOrder(const CoreOptions& options, std::vector<CoreSlot>* blocks)
      : blocks_(*blocks), takes_empty_(options.kind == PolicyKind::kVllm) {}

  void Add(std::uint32_t b) override {
    list_.PushBack(blocks_, b);
    blocks_[b].in_order = true;
  }
  void Remove(std::uint32_t b) override {
    list_.Erase(blocks_, b);
    blocks_[b].in_order = false;
  }
  std::uint32_t Pop() override {
    const std::uint32_t b = list_.PopFront(blocks_);
    blocks_[b].in_order = false;
    return b;
  }
  std::uint64_t size() const override { return list_.size(); }
  Slot PeekVictim() const override { return list_.front(); }
  bool TakesEmpty() const override { return takes_empty_; }

  // The queue, front (the next victim) first.
  void SerializeOrder(std::vector<std::uint8_t>* out) const override {
    base::AppendPod<std::uint64_t>(out, list_.size());
    for (std::uint32_t b = list_.front(); b != kIndexNil; b = blocks_[b].next) base::AppendPod(out, b);
  }
  bool DeserializeOrder(std::span<const std::uint8_t>* in) override {
    std::uint64_t n = 0;
    if (!list_.empty() || !base::ReadCount(in, &n, sizeof(std::uint32_t))) return false;
    for (std::uint64_t k = 0; k < n; ++k) {
      std::uint32_t b = 0;
      // A slot once, free, and with a page unless the queue takes empty ones (the
      // core checks after that every candidate is listed).
      if (!base::ReadPod(in, &b) || b >= blocks_.size() || blocks_[b].in_order || blocks_[b].holds != 0 ||
          (!blocks_[b].has_page && !takes_empty_)) {
        return false;
      }
      Add(b);
    }
    return true;
  }

 private:
  std::vector<CoreSlot>& blocks_;
  bool takes_empty_;
  IndexList list_;  // released first at the front
};

// fifo: cached blocks, held or free, in the order their pages were computed:
// by the admission of the request that computed them, then tail first within it
// (curve/'s fifo admits a request's pages in its tail-first touch order). A hit
// does not change it. Eviction takes the oldest free one; a held block met first is
// requeued as computed now (curve/'s fifo evicts such a page and admits it again
// when the request touches it, after the request's other pages).
class FifoOrder final : public EvictionOrder {
 public:
  static constexpr bool kInertReferences = true;  // a hit does not change the order
  FifoOrder(const CoreOptions&, std::vector<CoreSlot>* blocks) : blocks_(*blocks) {}
  void Filled(std::uint32_t b) override {
    ++listed_;
    Push(b);
  }
  void Add(std::uint32_t b) override {
    blocks_[b].in_order = true;
    ++size_;
  }
  void Remove(std::uint32_t b) override {
    blocks_[b].in_order = false;
    --size_;
  }
  std::uint32_t Pop() override {
    for (;;) {
      const std::uint32_t b = PopMin();
      CoreSlot& x = blocks_[b];
      if (x.in_order) {
        Remove(b);
        ++x.version;  // unlisted
        --listed_;
        return b;
      }
      x.key = PolicyCore::OrderKey(NewEpoch(), 0);
      Push(b);
    }
  }
  std::uint64_t size() const override { return size_; }
  Slot PeekVictim() const override { return run_.front(); }
  std::size_t MemoryBytes() const override { return heap_.MemoryBytes(); }

  // Nothing of its own: the order is the slots' keys (unique: an epoch and a page
  // index), which the core writes; the run and the heap are rebuilt from them.
  bool DeserializeOrder(std::span<const std::uint8_t>*) override {
    if (listed_ != 0) return false;
    for (std::uint32_t b = 0; b < blocks_.size(); ++b) {
      if (!blocks_[b].has_page) continue;
      Filled(b);
      if (blocks_[b].holds == 0) Add(b);
    }
    return true;
  }

 private:
  bool Listed(const LazyHeap::Entry& e) const {
    const CoreSlot& x = blocks_[e.block];
    return x.has_page && x.version == e.version;
  }
  // Slot b, with its key, joins the order. Keys that arrive in increasing order
  // (replay's admissions, each request's pages ranked in touch order, and every
  // requeue, keyed by a new epoch) append to run_, a list through the slots: O(1)
  // where the heap's pop is O(log n) cache misses, and with no entry to validate,
  // since a slot leaves the order only by Pop (before, a deque of 24-byte heap
  // entries, each validated against its slot's version). The others (the replica
  // admits a request's pages head first, keyed tail first) go to the heap. The
  // smaller of the two fronts is next.
  void Push(std::uint32_t b) {
    CoreSlot& x = blocks_[b];
    if (run_.empty() || x.key > blocks_[run_.back()].key) {
      run_.PushBack(blocks_, b);
      return;
    }
    ++x.version;
    heap_.Push({x.key, 0, b, x.version});
    heap_.MaybeCompact(listed_, [&](const LazyHeap::Entry& e) { return Listed(e); });
  }
  std::uint32_t PopMin() {
    const LazyHeap::Entry* top = heap_.TopValid([&](const LazyHeap::Entry& e) { return Listed(e); });
    if (top != nullptr && (run_.empty() || top->key < blocks_[run_.front()].key)) {
      return heap_.PopValid([&](const LazyHeap::Entry& e) { return Listed(e); });
    }
    return run_.PopFront(blocks_);
  }
  std::vector<CoreSlot>& blocks_;
  LazyHeap heap_;
  IndexList run_;  // increasing keys, front first
  std::uint64_t size_ = 0, listed_ = 0;
};

// sglang: the least recently released free leaf first (SGLang's radix cache evicts
// the least recently used leaf; a node is a leaf when no slot with a page has it as
// parent). Evicting a leaf may make its parent a leaf. A free node with a held
// descendant is a candidate that cannot be evicted yet: with no free leaf, Pop
// has no victim.
class SglangOrder final : public EvictionOrder {
 public:
  SglangOrder(const CoreOptions&, std::vector<CoreSlot>* blocks) : blocks_(*blocks) {}
  bool KeepsTree() const override { return true; }
  void Add(std::uint32_t b) override {
    blocks_[b].key = ++seq_;
    Enlist(b);
  }
  void Remove(std::uint32_t b) override {
    blocks_[b].in_order = false;
    --size_;
  }
  void MaybeLeaf(std::uint32_t b) override {
    const CoreSlot& x = blocks_[b];
    if (x.in_order && x.children == 0) Push({x.key, b});
  }
  std::uint32_t Pop() override {
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Later);
      const Leaf e = heap_.back();
      heap_.pop_back();
      if (Valid(e)) {
        Remove(e.block);
        return e.block;
      }
    }
    return kNoSlot;
  }
  std::uint64_t size() const override { return size_; }
  std::size_t MemoryBytes() const override { return heap_.capacity() * sizeof(Leaf); }

  // The release clock; the keys are the slots' (the core writes them), and the
  // candidates and the heap are rebuilt from the slots.
  void SerializeOrder(std::vector<std::uint8_t>* out) const override { base::AppendPod(out, seq_); }
  bool DeserializeOrder(std::span<const std::uint8_t>* in) override {
    if (size_ != 0 || !base::ReadPod(in, &seq_)) return false;
    std::vector<std::uint32_t> children(blocks_.size(), 0);
    for (const CoreSlot& x : blocks_) {
      if (x.parent == kNoSlot) continue;
      if (!x.has_page || !blocks_[x.parent].has_page) return false;  // a page outlives its children
      ++children[x.parent];
    }
    for (std::uint32_t b = 0; b < blocks_.size(); ++b) {
      const CoreSlot& x = blocks_[b];
      if (x.children != children[b] || (x.holds == 0 && x.has_page && x.key > seq_)) return false;
      if (x.holds == 0 && x.has_page) Enlist(b);
    }
    return true;
  }

 private:
  // A heap entry: a leaf's release key when pushed. Keys are unique (the release
  // clock), so an entry is current while its slot is a free leaf with that key (a
  // lazy heap with 16-byte entries compared by key alone: sglang's replay spent a
  // quarter more time with LazyHeap's 24-byte entries).
  struct Leaf {
    std::uint64_t key;
    std::uint32_t block;
  };
  static bool Later(const Leaf& a, const Leaf& b) { return a.key > b.key; }
  bool Valid(const Leaf& e) const {
    const CoreSlot& x = blocks_[e.block];
    return x.in_order && x.key == e.key && x.children == 0;
  }
  void Push(const Leaf& e) {
    heap_.push_back(e);
    std::push_heap(heap_.begin(), heap_.end(), Later);
  }
  // Slot b, with its key, becomes a candidate (in the heap if a leaf); stale
  // entries are dropped when they outnumber the candidates.
  void Enlist(std::uint32_t b) {
    CoreSlot& x = blocks_[b];
    x.in_order = true;
    ++size_;
    if (x.children == 0) Push({x.key, b});
    if (heap_.size() > 2 * size_ + 1024) {
      std::erase_if(heap_, [&](const Leaf& e) { return !Valid(e); });
      std::make_heap(heap_.begin(), heap_.end(), Later);
    }
  }
  std::vector<CoreSlot>& blocks_;
  std::vector<Leaf> heap_;  // candidate leaves, lazily validated
  std::uint64_t size_ = 0, seq_ = 0;
};

}  // namespace

std::unique_ptr<EvictionOrder> MakeListOrder(const CoreOptions& options, std::vector<CoreSlot>* slots) {
  switch (options.kind) {
    case PolicyKind::kLru:
    case PolicyKind::kVllm:
      return NewOrder<ListOrder>(options, slots);
    case PolicyKind::kFifo:
      return NewOrder<FifoOrder>(options, slots);
    case PolicyKind::kSglang:
      return NewOrder<SglangOrder>(options, slots);
    default:
      return nullptr;
  }
}

// lru and fifo in replay and the canaries (sglang and vllm: their lifetime caches,
// curve/policy_lifetime.h, made below).
std::unique_ptr<PolicyCache> MakeListCache(const PolicyOptions& options) {
  return options.kind == PolicyKind::kFifo ? NewCoreCache<FifoOrder>(options) : NewCoreCache<ListOrder>(options);
}

// sglang and vllm in replay and the canaries: the lifetime model driving a core over
// their order (curve/policy_lifetime.h).
std::unique_ptr<PolicyCache> MakeSglangCache(const PolicyOptions& options) {
  return NewLifetimeCache<SglangOrder>(options);
}
std::unique_ptr<PolicyCache> MakeVllmCache(const PolicyOptions& options) {
  return NewLifetimeCache<ListOrder>(options);
}

}  // namespace kvwatch::curve::policy_internal
