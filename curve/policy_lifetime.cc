// The policies that model running requests: sglang (a radix tree whose running
// paths are locked) and vllm (a block pool whose running blocks are referenced).
//
// Lifetimes, common to both: a request runs from its arrival until its end
// (SimRequest::end_s; an unknown end means it finishes before the next request
// arrives), and while it runs it holds its prompt pages and output_pages more for
// its generated tokens. Before each arrival at time t, every running request with
// an end at or before t finishes, in order of end (then arrival). The trace cannot
// say which later request would reuse generated tokens, so generated pages take
// capacity but are never hit. A request with no arrival time (a trace without
// timestamps) first finishes every running request.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <span>
#include <vector>

#include "base/byte_io.h"
#include "curve/index_list.h"
#include "curve/page_map.h"
#include "curve/policy.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve::policy_internal {

namespace {

constexpr std::uint32_t kNil = 0xffffffffu;

// Running requests: what each holds, by arrival order, and when each ends.
class RunningSet {
 public:
  struct Running {
    double end = 0;
    std::vector<std::uint32_t> slots;  // held pages, prefix order, generated pages last
  };

  // Adds a request that arrived now; returns its record.
  Running& Start(double end) {
    const std::uint64_t order = next_order_++;
    Running& r = running_[order];
    r.end = end;
    r.slots.clear();
    ends_.push(End{end, order});
    return r;
  }

  // Calls release(running) for every request that ends at or before t (all of
  // them when t is NaN), in order of end, and forgets them.
  template <typename Release>
  void FinishUpTo(double t, Release&& release) {
    while (!ends_.empty()) {
      const End e = ends_.top();
      if (!std::isnan(t) && e.end > t) break;
      ends_.pop();
      auto it = running_.find(e.order);
      if (it == running_.end()) continue;  // preempted earlier
      release(it->second);
      running_.erase(it);
    }
  }

  // Releases and forgets the most recently started request; false when none runs.
  template <typename Release>
  bool PreemptNewest(Release&& release) {
    if (running_.empty()) return false;
    auto it = std::prev(running_.end());
    release(it->second);
    running_.erase(it);
    return true;
  }

  std::size_t size() const { return running_.size(); }

  // Checkpoint: the next order, then every running request (order, end, its held
  // slots as map_slot(slot)). The end heap is not written: it is rebuilt from the
  // running requests (its entries of preempted requests are skipped anyway).
  template <typename MapSlot>
  void Serialize(std::vector<std::uint8_t>* out, MapSlot&& map_slot) const {
    base::AppendPod(out, next_order_);
    base::AppendPod<std::uint64_t>(out, running_.size());
    for (const auto& [order, r] : running_) {
      base::AppendPod(out, order);
      base::AppendPod(out, r.end);
      base::AppendPod<std::uint64_t>(out, r.slots.size());
      for (std::uint32_t slot : r.slots) base::AppendPod<std::uint32_t>(out, map_slot(slot));
    }
  }
  // Consumes what Serialize wrote; every slot must be below `slots`, and
  // hold(slot) is called once per holding. REQUIRES: nothing runs.
  template <typename Hold>
  bool Deserialize(std::span<const std::uint8_t>* in, std::uint32_t slots, Hold&& hold) {
    std::uint64_t n = 0;
    // Orders are counted from 0 and never wrap in practice; a larger one is corrupt.
    if (!running_.empty() || !base::ReadPod(in, &next_order_) || next_order_ > (std::uint64_t{1} << 62) ||
        !base::ReadCount(in, &n, 3 * sizeof(std::uint64_t))) {
      return false;
    }
    for (std::uint64_t k = 0; k < n; ++k) {
      std::uint64_t order = 0, held = 0;
      double end = 0;
      if (!base::ReadPod(in, &order) || !base::ReadPod(in, &end) || std::isnan(end) || order >= next_order_ ||
          (!running_.empty() && order <= std::prev(running_.end())->first) ||
          !base::ReadCount(in, &held, sizeof(std::uint32_t))) {
        return false;
      }
      Running& r = running_[order];
      r.end = end;
      r.slots.resize(held);
      for (std::uint32_t& slot : r.slots) {
        if (!base::ReadPod(in, &slot) || slot >= slots) return false;
        hold(slot);
      }
      ends_.push(End{end, order});
    }
    return true;
  }

  std::size_t MemoryBytes() const {
    std::size_t bytes = ends_.size() * sizeof(End);
    for (const auto& [order, r] : running_) bytes += sizeof(r) + r.slots.capacity() * sizeof(std::uint32_t) + 48;
    return bytes;
  }

 private:
  struct End {
    double end;
    std::uint64_t order;
    bool operator>(const End& o) const { return end != o.end ? end > o.end : order > o.order; }
  };
  std::map<std::uint64_t, Running> running_;
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends_;
  std::uint64_t next_order_ = 0;
};

double EndOf(const SimRequest& r) {
  // An unknown end finishes before the next arrival: -inf is at or before any time.
  if (std::isnan(r.end_s) || std::isnan(r.arrival_s)) return -std::numeric_limits<double>::infinity();
  return r.end_s;
}

// ---------------------------------------------------------------------------
// SglangCache: SGLang's RadixCache (python/sglang/srt/mem_cache/radix_cache.py),
// one node per page. A page's parent is the page before it in the request that
// admitted it (page ids are prefix-chained, so that is the same in every request).
// Only leaves (nodes with no resident child) are evictable, the least recently used
// leaf first, and a node locked by a running request (lock_ref > 0) is not
// evictable. A request locks every one of its resident pages on arrival and the
// pages it admits; when it finishes, its whole path, generated pages included (as
// SGLang's cache_finished_req inserts them), is marked used at that moment in the
// touch order and unlocked. When every other page is locked, the pages that do not
// fit are not admitted and the request counts as preempted (SGLang would hold it
// back in the queue).
class SglangCache final : public PolicyCache {
 public:
  explicit SglangCache(const PolicyOptions& options) : options_(options) {}

  SimOutcome Process(const SimRequest& request) override {
    running_.FinishUpTo(request.arrival_s, [&](RunningSet::Running& r) { Finish(r); });
    SimOutcome out;
    RunningSet::Running& run = running_.Start(EndOf(request));
    // One lookup per page: the hits are the leading pages found, and the pages
    // found stay resident below (locked, so never evicted): found_ keeps their nodes.
    const std::span<const PageId> pages = request.pages;
    found_.assign(pages.size(), kNil);
    out.hits = static_cast<std::uint32_t>(pages.size());
    std::uint64_t missing = 0;
    PrefetchHead(map_, pages);
    for (std::size_t i = 0; i < pages.size(); ++i) {
      PrefetchAhead(map_, pages, i, TouchOrder::kHeadFirst);
      if (std::uint32_t* s = map_.Find(pages[i])) {
        found_[i] = *s;
        ++nodes_[*s].lock;
        run.slots.push_back(*s);
      } else {
        if (missing == 0) out.hits = static_cast<std::uint32_t>(i);
        ++missing;
      }
    }
    const std::uint64_t need = missing + request.output_pages;
    while (options_.capacity - live_ < need && EvictOne()) {
    }
    std::uint32_t parent = kNil;
    bool full = false;
    for (std::size_t i = 0; i < pages.size(); ++i) {
      const PageId p = pages[i];
      if (found_[i] != kNil) {
        parent = found_[i];
        continue;
      }
      if (std::uint32_t* s = map_.Find(p)) {  // a page repeated in this request
        parent = *s;
        continue;
      }
      if (full || live_ >= options_.capacity) {
        full = true;
        break;
      }
      parent = NewNode(p, false, parent);
      map_.Insert(p, parent);
      run.slots.push_back(parent);
    }
    for (std::uint32_t k = 0; k < request.output_pages && !full; ++k) {
      if (live_ >= options_.capacity) {
        full = true;
        break;
      }
      parent = NewNode(0, true, parent);
      run.slots.push_back(parent);
    }
    out.preempted = full;
    return out;
  }

  std::uint64_t resident() const override { return live_; }
  std::size_t MemoryBytes() const override {
    return map_.MemoryBytes() + nodes_.MemoryBytes() + heap_.capacity() * sizeof(Leaf) + running_.MemoryBytes();
  }

  // The live nodes renumbered densely (page, last use, parent, anonymous), then
  // the running requests. Children and locks are not written: a node's children
  // are the live nodes naming it as parent, its lock the running requests holding
  // it. The leaf heap is rebuilt from the evictable nodes: among valid entries it
  // orders by last use, which is unique, so slot numbers are not observable.
  void Serialize(std::vector<std::uint8_t>* out) const override {
    base::AppendPod(out, seq_);
    std::vector<std::uint32_t> remap(nodes_.size(), kNil);
    std::uint32_t n = 0;
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].live) remap[i] = n++;
    }
    base::AppendPod<std::uint64_t>(out, n);
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
      const Node& node = nodes_[i];
      if (!node.live) continue;
      base::AppendPod(out, node.page);
      base::AppendPod(out, node.last);
      base::AppendPod<std::uint32_t>(out, node.parent == kNil ? kNil : remap[node.parent]);
      base::AppendPod<std::uint8_t>(out, node.anonymous ? 1 : 0);
    }
    running_.Serialize(out, [&](std::uint32_t slot) { return remap[slot]; });
  }

  bool Deserialize(std::span<const std::uint8_t>* in) override {
    constexpr std::size_t kNodeBytes = sizeof(PageId) + sizeof(std::uint64_t) + sizeof(std::uint32_t) + 1;
    std::uint64_t n = 0;
    if (live_ != 0 || nodes_.size() != 0 || !base::ReadPod(in, &seq_) || !base::ReadCount(in, &n, kNodeBytes) ||
        n > options_.capacity) {
      return false;
    }
    map_.Reserve(n);
    for (std::uint64_t k = 0; k < n; ++k) {
      const std::uint32_t index = nodes_.Allocate();  // k: the pool is fresh
      Node& node = nodes_[index];
      std::uint8_t anonymous = 0;
      if (!base::ReadPod(in, &node.page) || !base::ReadPod(in, &node.last) || !base::ReadPod(in, &node.parent) ||
          !base::ReadPod(in, &anonymous) || anonymous > 1 || node.last > seq_ ||
          (node.parent != kNil && (node.parent >= n || node.parent == index))) {
        return false;
      }
      node.anonymous = anonymous != 0;
      node.live = true;
      if (!node.anonymous) {
        if (map_.Find(node.page) != nullptr) return false;
        map_.Insert(node.page, index);
      }
    }
    live_ = n;
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].parent != kNil) ++nodes_[nodes_[i].parent].children;
    }
    if (!running_.Deserialize(in, nodes_.size(), [&](std::uint32_t slot) { ++nodes_[slot].lock; })) return false;
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
      if (Evictable(nodes_[i])) heap_.push_back(Leaf{nodes_[i].last, i});
    }
    std::make_heap(heap_.begin(), heap_.end(), std::greater<Leaf>());
    return true;
  }

 private:
  struct Node {
    PageId page = 0;
    std::uint64_t last = 0;
    std::uint32_t parent = kNil;
    std::uint32_t children = 0;
    std::uint32_t lock = 0;
    bool anonymous = false;
    bool live = false;
  };
  struct Leaf {
    std::uint64_t last;
    std::uint32_t slot;
    bool operator>(const Leaf& o) const { return last > o.last; }
  };

  std::uint32_t NewNode(PageId page, bool anonymous, std::uint32_t parent) {
    const std::uint32_t index = nodes_.Allocate();
    Node& n = nodes_[index];
    n = Node{};
    n.page = page;
    n.anonymous = anonymous;
    n.parent = parent;
    n.lock = 1;
    n.live = true;
    n.last = ++seq_;
    if (parent != kNil) ++nodes_[parent].children;
    ++live_;
    return index;
  }

  bool Evictable(const Node& n) const { return n.live && n.children == 0 && n.lock == 0; }

  void PushIfEvictable(std::uint32_t slot) {
    const Node& n = nodes_[slot];
    if (!Evictable(n)) return;
    heap_.push_back(Leaf{n.last, slot});
    std::push_heap(heap_.begin(), heap_.end(), std::greater<Leaf>());
  }

  bool EvictOne() {
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<Leaf>());
      const Leaf leaf = heap_.back();
      heap_.pop_back();
      Node& n = nodes_[leaf.slot];
      if (!Evictable(n) || n.last != leaf.last) continue;  // stale
      if (!n.anonymous) map_.Erase(n.page);
      n.live = false;
      nodes_.Release(leaf.slot);
      --live_;
      if (n.parent != kNil) {
        --nodes_[n.parent].children;
        PushIfEvictable(n.parent);
      }
      return true;
    }
    return false;
  }

  void Finish(RunningSet::Running& r) {
    ForEachInTouchOrder(r.slots.size(), options_.touch_order, [&](std::size_t i) {
      Node& n = nodes_[r.slots[i]];
      n.last = ++seq_;
    });
    for (std::uint32_t slot : r.slots) --nodes_[slot].lock;
    for (std::uint32_t slot : r.slots) PushIfEvictable(slot);
    if (heap_.size() > 4 * static_cast<std::size_t>(live_) + 1024) {
      std::vector<Leaf> kept;
      for (const Leaf& leaf : heap_) {
        const Node& n = nodes_[leaf.slot];
        if (Evictable(n) && n.last == leaf.last) kept.push_back(leaf);
      }
      heap_ = std::move(kept);
      std::make_heap(heap_.begin(), heap_.end(), std::greater<Leaf>());
    }
  }

  PolicyOptions options_;
  PageMap map_;
  SlotPool<Node> nodes_;
  std::vector<Leaf> heap_;  // candidate leaves, lazily validated
  std::uint64_t live_ = 0;
  std::uint64_t seq_ = 0;
  RunningSet running_;
  std::vector<std::uint32_t> found_;  // per page position of the request: its node when resident, or kNil
};

// ---------------------------------------------------------------------------
// VllmCache: vLLM V1's block pool (vllm/v1/core/block_pool.py and
// kv_cache_manager.py). C blocks; a block is cached while it keeps its page id
// (in the hash map), whether a running request references it or it waits in the
// free queue. On arrival a request's cached pages are referenced (ref_cnt + 1, out
// of the free queue); each page it lacks and each generated page takes a block
// from the free queue's head (never-used blocks first), evicting the cached page
// that block held. When a request finishes its blocks are released in reverse
// order, deepest (generated) first, and those whose ref_cnt drops to 0 are
// appended to the queue's tail: eviction takes the least recently released block.
// Preemption: when the free blocks do not cover what an arriving request needs,
// running requests are preempted newest first (V1's scheduler pops its running
// list), their blocks released the same way, each counted; if the request still
// does not fit, it takes what is free and counts as preempted itself. A preempted
// request is not run again. The touch order does not apply: release order is
// vLLM's.
class VllmCache final : public PolicyCache {
 public:
  explicit VllmCache(const PolicyOptions& options) : options_(options) {}

  SimOutcome Process(const SimRequest& request) override {
    running_.FinishUpTo(request.arrival_s, [&](RunningSet::Running& r) { Release(r); });
    SimOutcome out;
    // The request's cached pages first leave the free queue, so that nothing it
    // frees below can evict them. One lookup per page: the hits are the leading
    // pages found (Reference moves a block in the queue, never out of the map).
    held_.assign(request.pages.size(), kNil);
    out.hits = static_cast<std::uint32_t>(request.pages.size());
    std::uint64_t missing = 0;
    PrefetchHead(map_, request.pages);
    for (std::size_t i = 0; i < request.pages.size(); ++i) {
      PrefetchAhead(map_, request.pages, i, TouchOrder::kHeadFirst);
      if (std::uint32_t* s = map_.Find(request.pages[i])) {
        held_[i] = *s;
        Reference(*s);
      } else {
        if (missing == 0) out.hits = static_cast<std::uint32_t>(i);
        ++missing;
      }
    }
    // Duplicated missing pages take one block; counting them twice only preempts
    // a little early in a case real engines do not produce.
    const std::uint64_t need = missing + request.output_pages;
    while (FreeBlocks() < need && running_.PreemptNewest([&](RunningSet::Running& r) { Release(r); })) {
      ++out.preempted_running;
    }
    out.preempted = FreeBlocks() < need;
    RunningSet::Running& run = running_.Start(EndOf(request));
    for (std::size_t i = 0; i < request.pages.size(); ++i) {
      if (held_[i] != kNil) {
        run.slots.push_back(held_[i]);
        continue;
      }
      const PageId p = request.pages[i];
      if (std::uint32_t* s = map_.Find(p)) {  // a page repeated in this request
        Reference(*s);
        run.slots.push_back(*s);
        continue;
      }
      if (FreeBlocks() == 0) continue;
      const std::uint32_t slot = TakeFreeBlock();
      blocks_[slot].page = p;
      blocks_[slot].cached = true;
      map_.Insert(p, slot);
      run.slots.push_back(slot);
    }
    for (std::uint32_t k = 0; k < request.output_pages; ++k) {
      if (FreeBlocks() == 0) break;
      run.slots.push_back(TakeFreeBlock());
    }
    return out;
  }

  std::uint64_t resident() const override { return map_.size(); }
  std::size_t MemoryBytes() const override {
    return map_.MemoryBytes() + blocks_.capacity() * sizeof(Block) + running_.MemoryBytes();
  }

  // The blocks in slot order (page, cached), the running requests, then the free
  // queue head first. Reference counts are not written: a block's is the number of
  // running requests holding it, and the queue must hold exactly the used blocks
  // nobody holds.
  void Serialize(std::vector<std::uint8_t>* out) const override {
    base::AppendPod<std::uint64_t>(out, blocks_.size());
    for (const Block& b : blocks_) {
      base::AppendPod(out, b.page);
      base::AppendPod<std::uint8_t>(out, b.cached ? 1 : 0);
    }
    running_.Serialize(out, [](std::uint32_t slot) { return slot; });
    base::AppendPod<std::uint64_t>(out, free_.size());
    for (std::uint32_t slot = free_.front(); slot != kNil; slot = blocks_[slot].next) base::AppendPod(out, slot);
  }

  bool Deserialize(std::span<const std::uint8_t>* in) override {
    std::uint64_t n = 0;
    if (!blocks_.empty() || !base::ReadCount(in, &n, sizeof(PageId) + 1) || n > options_.capacity) return false;
    blocks_.resize(n);
    map_.Reserve(n);
    for (std::uint32_t slot = 0; slot < n; ++slot) {
      Block& b = blocks_[slot];
      std::uint8_t cached = 0;
      if (!base::ReadPod(in, &b.page) || !base::ReadPod(in, &cached) || cached > 1) return false;
      b.cached = cached != 0;
      if (b.cached) {
        if (map_.Find(b.page) != nullptr) return false;
        map_.Insert(b.page, slot);
      }
    }
    if (!running_.Deserialize(in, static_cast<std::uint32_t>(n), [&](std::uint32_t slot) { ++blocks_[slot].ref; })) {
      return false;
    }
    std::uint64_t queued = 0;
    if (!base::ReadCount(in, &queued, sizeof(std::uint32_t)) || queued > n) return false;
    for (std::uint64_t k = 0; k < queued; ++k) {
      std::uint32_t slot = 0;
      if (!base::ReadPod(in, &slot) || slot >= n || blocks_[slot].ref != 0 || blocks_[slot].queued) return false;
      Enqueue(slot);
    }
    for (const Block& b : blocks_) {
      if (b.ref == 0 && !b.queued) return false;  // neither held nor free
    }
    return true;
  }

 private:
  struct Block {
    PageId page = 0;
    std::uint32_t ref = 0;
    std::uint32_t prev = kNil;
    std::uint32_t next = kNil;
    bool cached = false;
    bool queued = false;
  };

  std::uint64_t FreeBlocks() const { return (options_.capacity - blocks_.size()) + free_.size(); }

  // A block for a new page: a never-used one, else the free queue's head (its
  // cached page, if any, is evicted). REQUIRES: FreeBlocks() > 0.
  std::uint32_t TakeFreeBlock() {
    std::uint32_t slot;
    if (blocks_.size() < options_.capacity) {
      slot = static_cast<std::uint32_t>(blocks_.size());
      blocks_.emplace_back();
    } else {
      slot = free_.front();
      Dequeue(slot);
      if (blocks_[slot].cached) map_.Erase(blocks_[slot].page);
    }
    Block& b = blocks_[slot];
    b.cached = false;
    b.ref = 1;
    return slot;
  }

  void Reference(std::uint32_t slot) {
    Block& b = blocks_[slot];
    if (b.ref++ == 0) Dequeue(slot);
  }

  void Release(RunningSet::Running& r) {
    for (std::size_t i = r.slots.size(); i-- > 0;) {
      const std::uint32_t slot = r.slots[i];
      if (--blocks_[slot].ref == 0) Enqueue(slot);
    }
  }

  void Enqueue(std::uint32_t slot) {
    free_.PushBack(blocks_, slot);
    blocks_[slot].queued = true;
  }

  void Dequeue(std::uint32_t slot) {
    free_.Erase(blocks_, slot);
    blocks_[slot].queued = false;
  }

  PolicyOptions options_;
  PageMap map_;
  std::vector<Block> blocks_;
  IndexList free_;  // the free queue: blocks nobody holds, released first at the front
  RunningSet running_;
  std::vector<std::uint32_t> held_;  // per page position: its cached block, or kNil
};

}  // namespace

std::unique_ptr<PolicyCache> MakeSglangCache(const PolicyOptions& options) {
  return std::make_unique<SglangCache>(options);
}

std::unique_ptr<PolicyCache> MakeVllmCache(const PolicyOptions& options) {
  return std::make_unique<VllmCache>(options);
}

}  // namespace kvwatch::curve::policy_internal
