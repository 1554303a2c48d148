// The policies that keep one eviction order by a key over resident pages: lru,
// fifo, lfu, priority and belady (curve/policy.h).
#include <algorithm>
#include <map>

#include "base/byte_io.h"
#include "curve/page_map.h"
#include "curve/policy.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve {

namespace {

// KeyedCache: evicts the resident page with the smallest key (hi, lo). Keys are
// set when a page is admitted or referenced, per policy:
//   lru       (0, reference seq): the least recently referenced page first.
//   fifo      (0, admission seq): hits do not change the key.
//   lfu       LFU-DA (Arlitt, Cherkasova et al., "Evaluating content management
//             techniques for Web proxy caches", 2000): key (F + L, reference seq)
//             where F counts the page's references since it was admitted and L,
//             the cache age, is the F + L of the last evicted page. Aging lets a
//             once-hot page leave; ties go to the least recently referenced.
//   priority  (retention priority, reference seq): the page takes the priority of
//             the request that referenced it last (TensorRT-LLM's retention
//             priorities; SGLang's priority eviction): lowest priority first, LRU
//             within a level.
//   belady    (-next use, reference seq): the page used farthest in the future
//             first, pages never used again before all others (Belady, 1966).
// lru, fifo and priority, whose keys only grow within a level, keep one list per
// level instead (oldest first): the same order in O(1). lru and fifo have one
// level (hi is 0), kept as a plain member rather than in the map of levels: a
// tree lookup per reference was a third of their time (issue 26). lfu and belady use a lazy
// min-heap: a key change pushes a new entry and stale entries are skipped when
// they surface; it is rebuilt when stale entries outnumber live ones.
class KeyedCache final : public PolicyCache {
 public:
  explicit KeyedCache(const PolicyOptions& options)
      : options_(options),
        lists_(options.kind == PolicyKind::kLru || options.kind == PolicyKind::kFifo ||
               options.kind == PolicyKind::kPriority),
        one_level_(options.kind == PolicyKind::kLru || options.kind == PolicyKind::kFifo) {}

  SimOutcome Process(const SimRequest& request) override {
    SimOutcome out;
    const std::span<const PageId> pages = request.pages;
    out.hits = policy_internal::LeadingResidentIn(map_, pages);
    policy_internal::ForEachInTouchOrder(pages.size(), options_.touch_order, [&](std::size_t i) {
      policy_internal::PrefetchAhead(map_, pages, i, options_.touch_order);
      Reference(request, i);
    });
    return out;
  }

  std::uint64_t resident() const override { return live_; }
  std::size_t MemoryBytes() const override {
    return map_.MemoryBytes() + slots_.MemoryBytes() + heap_.capacity() * sizeof(HeapEntry);
  }

  // Every policy here evicts the page with the smallest key (hi, lo), and keys are
  // unique (lo is a reference sequence number). So the live pages sorted by key are
  // the eviction order, and appending them in that order to fresh lists (or a fresh
  // heap) rebuilds the same cache: slot numbers and stale heap entries are not
  // observable.
  void Serialize(std::vector<std::uint8_t>* out) const override {
    base::AppendPod(out, seq_);
    base::AppendPod(out, age_);
    std::vector<std::uint32_t> order;
    order.reserve(live_);
    for (std::uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].live) order.push_back(i);
    }
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      const Slot& x = slots_[a];
      const Slot& y = slots_[b];
      return x.hi != y.hi ? x.hi < y.hi : x.lo < y.lo;
    });
    base::AppendPod<std::uint64_t>(out, order.size());
    for (std::uint32_t i : order) {
      const Slot& s = slots_[i];
      base::AppendPod(out, s.page);
      base::AppendPod(out, s.hi);
      base::AppendPod(out, s.lo);
      base::AppendPod(out, s.freq);
    }
  }

  bool Deserialize(std::span<const std::uint8_t>* in) override {
    std::uint64_t n = 0;
    if (live_ != 0 || !base::ReadPod(in, &seq_) || !base::ReadPod(in, &age_) ||
        !base::ReadCount(in, &n, 4 * sizeof(std::uint64_t)) || n > options_.capacity) {
      return false;
    }
    map_.Reserve(n);
    bool first = true;
    std::uint64_t prev_hi = 0, prev_lo = 0;
    for (std::uint64_t k = 0; k < n; ++k) {
      PageId page = 0;
      std::uint64_t hi = 0, lo = 0, freq = 0;
      if (!base::ReadPod(in, &page) || !base::ReadPod(in, &hi) || !base::ReadPod(in, &lo) ||
          !base::ReadPod(in, &freq)) {
        return false;
      }
      // Strictly increasing keys (the eviction order, no ties), none newer than
      // the sequence, and each page once.
      if ((!first && (hi < prev_hi || (hi == prev_hi && lo <= prev_lo))) || lo > seq_ || map_.Find(page) != nullptr) {
        return false;
      }
      first = false;
      prev_hi = hi;
      prev_lo = lo;
      const std::uint32_t index = slots_.Allocate();
      Slot& s = slots_[index];
      s = Slot{};
      s.page = page;
      s.hi = hi;
      s.lo = lo;
      s.freq = freq;
      s.live = true;
      map_.Insert(page, index);
      ++live_;
      if (lists_) {
        Append(index);
      } else {
        heap_.push_back(HeapEntry{hi, lo, index, 0});
      }
    }
    if (!lists_) std::make_heap(heap_.begin(), heap_.end(), Later);
    return true;
  }

 private:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  struct Slot {
    PageId page = 0;
    std::uint64_t hi = 0;
    std::uint64_t lo = 0;
    std::uint64_t freq = 0;
    std::uint32_t version = 0;
    std::uint32_t prev = kNone;  // list mode: towards the level's oldest
    std::uint32_t next = kNone;
    bool live = false;
  };
  struct List {
    std::uint32_t oldest = kNone;
    std::uint32_t newest = kNone;
  };
  struct HeapEntry {
    std::uint64_t hi;
    std::uint64_t lo;
    std::uint32_t slot;
    std::uint32_t version;
  };
  // std::push_heap builds a max-heap; this ordering puts the smallest key on top.
  static bool Later(const HeapEntry& a, const HeapEntry& b) { return a.hi != b.hi ? a.hi > b.hi : a.lo > b.lo; }

  void Reference(const SimRequest& request, std::size_t i) {
    const PageId page = request.pages[i];
    const std::uint64_t seq = ++seq_;
    std::uint32_t* found = map_.Find(page);
    std::uint32_t index;
    bool admitted = false;
    if (found != nullptr) {
      index = *found;
      if (lists_ && options_.kind != PolicyKind::kFifo) Unlink(index);  // before its level changes
    } else {
      if (live_ >= options_.capacity) EvictOne();
      index = slots_.Allocate();
      Slot& s = slots_[index];
      s.page = page;
      s.live = true;
      s.freq = 0;
      map_.Insert(page, index);
      ++live_;
      admitted = true;
    }
    Slot& s = slots_[index];
    ++s.freq;
    switch (options_.kind) {
      case PolicyKind::kLru:
        s.hi = 0;
        s.lo = seq;
        break;
      case PolicyKind::kFifo:
        if (!admitted) return;  // a hit keeps the admission order
        s.hi = 0;
        s.lo = seq;
        break;
      case PolicyKind::kLfu:
        s.hi = s.freq + age_;
        s.lo = seq;
        break;
      case PolicyKind::kPriority:
        s.hi = static_cast<std::uint64_t>(static_cast<std::int64_t>(request.priority) + (std::int64_t{1} << 32));
        s.lo = seq;
        break;
      case PolicyKind::kBelady:
        s.hi = kNeverUsed - (request.next_use.empty() ? kNeverUsed : request.next_use[i]);
        s.lo = seq;
        break;
      default:
        break;
    }
    if (lists_) {
      Append(index);
      return;
    }
    ++s.version;
    Push(index);
  }

  // List mode: the level of hi, appended as its newest.
  void Append(std::uint32_t index) {
    Slot& s = slots_[index];
    List& l = one_level_ ? level_ : levels_[s.hi];
    s.prev = l.newest;
    s.next = kNone;
    if (l.newest != kNone)
      slots_[l.newest].next = index;
    else
      l.oldest = index;
    l.newest = index;
  }

  void Unlink(std::uint32_t index) {
    Slot& s = slots_[index];
    if (one_level_) {
      UnlinkFrom(level_, s);
      return;
    }
    auto it = levels_.find(s.hi);
    UnlinkFrom(it->second, s);
    if (it->second.oldest == kNone) levels_.erase(it);
  }
  void UnlinkFrom(List& l, Slot& s) {
    if (s.prev != kNone)
      slots_[s.prev].next = s.next;
    else
      l.oldest = s.next;
    if (s.next != kNone)
      slots_[s.next].prev = s.prev;
    else
      l.newest = s.prev;
    s.prev = s.next = kNone;
  }

  void Push(std::uint32_t index) {
    const Slot& s = slots_[index];
    heap_.push_back(HeapEntry{s.hi, s.lo, index, s.version});
    std::push_heap(heap_.begin(), heap_.end(), Later);
    if (heap_.size() > 2 * static_cast<std::size_t>(live_) + 1024) Rebuild();
  }

  void Rebuild() {
    heap_.clear();
    for (std::uint32_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = slots_[i];
      if (s.live) heap_.push_back(HeapEntry{s.hi, s.lo, i, s.version});
    }
    std::make_heap(heap_.begin(), heap_.end(), Later);
  }

  void Remove(std::uint32_t index) {
    Slot& s = slots_[index];
    s.live = false;
    map_.Erase(s.page);
    slots_.Release(index);
    --live_;
  }

  void EvictOne() {
    if (lists_) {
      if (one_level_ ? level_.oldest == kNone : levels_.empty()) return;
      const std::uint32_t victim = one_level_ ? level_.oldest : levels_.begin()->second.oldest;
      Unlink(victim);
      Remove(victim);
      return;
    }
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Later);
      const HeapEntry top = heap_.back();
      heap_.pop_back();
      Slot& s = slots_[top.slot];
      if (!s.live || s.version != top.version) continue;  // stale
      if (options_.kind == PolicyKind::kLfu) age_ = s.hi;
      Remove(top.slot);
      return;
    }
  }

  PolicyOptions options_;
  bool lists_;
  bool one_level_;  // lru, fifo: every page in level_
  List level_;
  std::map<std::uint64_t, List> levels_;  // other list modes: hi -> its pages, oldest first
  PageMap map_;
  policy_internal::SlotPool<Slot> slots_;
  std::vector<HeapEntry> heap_;
  std::uint64_t live_ = 0;
  std::uint64_t seq_ = 0;
  std::uint64_t age_ = 0;  // LFU-DA's L
};

}  // namespace

namespace policy_internal {

std::unique_ptr<PolicyCache> MakeKeyedCache(const PolicyOptions& options) {
  return std::make_unique<KeyedCache>(options);
}

}  // namespace policy_internal

}  // namespace kvwatch::curve
