// The policies that keep one eviction order over resident pages: lru, fifo, lfu,
// priority, belady (a keyed min-heap), workload-aware (one LRU list per request
// category) and s3fifo (three FIFO queues). sglang and vllm, which model running
// requests, are in curve/policy_lifetime.cc.
#include "curve/policy.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>

#include "base/byte_io.h"
#include "curve/page_map.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve {

namespace {

constexpr std::string_view kNames[] = {"lru",    "fifo", "lfu",      "s3fifo",         "sglang",
                                       "vllm",   "priority", "workload-aware", "belady"};

// ---------------------------------------------------------------------------
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
// level instead (oldest first): the same order in O(1). lfu and belady use a lazy
// min-heap: a key change pushes a new entry and stale entries are skipped when
// they surface; it is rebuilt when stale entries outnumber live ones.
class KeyedCache final : public PolicyCache {
 public:
  explicit KeyedCache(const PolicyOptions& options)
      : options_(options),
        lists_(options.kind == PolicyKind::kLru || options.kind == PolicyKind::kFifo ||
               options.kind == PolicyKind::kPriority) {}

  SimOutcome Process(const SimRequest& request) override {
    SimOutcome out;
    out.hits = policy_internal::LeadingResident(request.pages, [&](PageId p) { return map_.Find(p) != nullptr; });
    policy_internal::ForEachInTouchOrder(request.pages.size(), options_.touch_order,
                                         [&](std::size_t i) { Reference(request, i); });
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
      if (!base::ReadPod(in, &page) || !base::ReadPod(in, &hi) || !base::ReadPod(in, &lo) || !base::ReadPod(in, &freq)) {
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
  static bool Later(const HeapEntry& a, const HeapEntry& b) {
    return a.hi != b.hi ? a.hi > b.hi : a.lo > b.lo;
  }

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
    List& l = levels_[s.hi];
    s.prev = l.newest;
    s.next = kNone;
    if (l.newest != kNone) slots_[l.newest].next = index; else l.oldest = index;
    l.newest = index;
  }

  void Unlink(std::uint32_t index) {
    Slot& s = slots_[index];
    auto it = levels_.find(s.hi);
    List& l = it->second;
    if (s.prev != kNone) slots_[s.prev].next = s.next; else l.oldest = s.next;
    if (s.next != kNone) slots_[s.next].prev = s.prev; else l.newest = s.prev;
    s.prev = s.next = kNone;
    if (l.oldest == kNone) levels_.erase(it);
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
      if (levels_.empty()) return;
      const std::uint32_t victim = levels_.begin()->second.oldest;
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
  std::map<std::uint64_t, List> levels_;  // list mode: hi -> its pages, oldest first
  PageMap map_;
  policy_internal::SlotPool<Slot> slots_;
  std::vector<HeapEntry> heap_;
  std::uint64_t live_ = 0;
  std::uint64_t seq_ = 0;
  std::uint64_t age_ = 0;  // LFU-DA's L
};

// ---------------------------------------------------------------------------
// WorkloadAwareCache: the workload-aware policy of Wang et al., "KVCache Cache in
// the Wild: Characterizing and Optimizing KVCache Cache at a Large Cloud Provider"
// (USENIX ATC 2025). The paper finds that within one request category the reuse
// probability of a block is predictable and its reuse time roughly exponential,
// and evicts the block least likely to be reused. What is estimated here, online
// from the stream's own past (no look-ahead), per category c (the category of the
// request that referenced the block last):
//   p_c  = (reuses_c + 1) / (references_c + 2): the probability that a block
//          referenced by a category-c request is referenced again. A reuse is
//          observed when a block comes back while it is resident or among the
//          last C evicted blocks (a ghost list), so it is the reuse seen within
//          about twice this cache's reach;
//   mu_c = (sum of those reuses' intervals + 1) / (reuses_c + 1): the mean reuse
//          interval, in requests (the one clock every trace has).
// A block of category c last referenced a requests ago is reused later with
// probability proportional to p_c * exp(-a / mu_c); the block with the smallest
// value is evicted, the least recently referenced one on ties. Within a category
// that order is LRU, so each category keeps an LRU list and an eviction compares
// only the categories' oldest blocks: O(categories) per eviction.
class WorkloadAwareCache final : public PolicyCache {
 public:
  explicit WorkloadAwareCache(const PolicyOptions& options)
      : options_(options), lists_(kMaxCategories), stats_(kMaxCategories) {}

  SimOutcome Process(const SimRequest& request) override {
    ++now_;
    SimOutcome out;
    out.hits = policy_internal::LeadingResident(request.pages, [&](PageId p) { return map_.Find(p) != nullptr; });
    const std::uint32_t category = std::min(request.category, kMaxCategories - 1);
    policy_internal::ForEachInTouchOrder(request.pages.size(), options_.touch_order,
                                         [&](std::size_t i) { Reference(request.pages[i], category); });
    return out;
  }

  std::uint64_t resident() const override { return live_; }
  std::size_t MemoryBytes() const override {
    return map_.MemoryBytes() + ghost_map_.MemoryBytes() + nodes_.MemoryBytes() + ghost_.size() * sizeof(Ghost);
  }

  // The clocks, every category's statistics, the resident blocks by reference seq
  // (each category's list is LRU, i.e. in seq order, so appending them in seq
  // order rebuilds every list), and the live ghosts oldest first (stale ghost
  // entries and ghost ids only pace the compaction: not observable).
  void Serialize(std::vector<std::uint8_t>* out) const override {
    base::AppendPod(out, now_);
    base::AppendPod(out, seq_);
    for (const Stats& st : stats_) {
      base::AppendPod(out, st.references);
      base::AppendPod(out, st.reuses);
      base::AppendPod(out, st.interval_sum);
    }
    std::vector<std::uint32_t> order;
    order.reserve(live_);
    for (std::uint32_t c = 0; c < kMaxCategories; ++c) {
      for (std::uint32_t i = lists_[c].oldest; i != kNil; i = nodes_[i].next) order.push_back(i);
    }
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return nodes_[a].seq < nodes_[b].seq; });
    base::AppendPod<std::uint64_t>(out, order.size());
    for (std::uint32_t i : order) {
      const Node& n = nodes_[i];
      base::AppendPod(out, n.page);
      base::AppendPod(out, n.last);
      base::AppendPod(out, n.seq);
      base::AppendPod(out, n.category);
    }
    std::uint64_t ghosts = 0;
    for (const Ghost& g : ghost_) ghosts += LiveGhost(g) ? 1 : 0;
    base::AppendPod(out, ghosts);
    for (const Ghost& g : ghost_) {
      if (!LiveGhost(g)) continue;
      base::AppendPod(out, g.page);
      base::AppendPod(out, g.last);
      base::AppendPod(out, g.category);
    }
  }

  bool Deserialize(std::span<const std::uint8_t>* in) override {
    if (live_ != 0 || !base::ReadPod(in, &now_) || !base::ReadPod(in, &seq_)) return false;
    for (Stats& st : stats_) {
      if (!base::ReadPod(in, &st.references) || !base::ReadPod(in, &st.reuses) || !base::ReadPod(in, &st.interval_sum)) {
        return false;
      }
    }
    constexpr std::size_t kNodeBytes = sizeof(PageId) + 2 * sizeof(std::uint64_t) + sizeof(std::uint32_t);
    std::uint64_t n = 0;
    if (!base::ReadCount(in, &n, kNodeBytes) || n > options_.capacity) return false;
    map_.Reserve(n);
    std::uint64_t prev_seq = 0;
    for (std::uint64_t k = 0; k < n; ++k) {
      Node node;
      if (!base::ReadPod(in, &node.page) || !base::ReadPod(in, &node.last) || !base::ReadPod(in, &node.seq) ||
          !base::ReadPod(in, &node.category)) {
        return false;
      }
      if (node.category >= kMaxCategories || node.last > now_ || node.seq > seq_ || (k > 0 && node.seq <= prev_seq) ||
          map_.Find(node.page) != nullptr) {
        return false;
      }
      prev_seq = node.seq;
      const std::uint32_t index = nodes_.Allocate();
      nodes_[index] = node;
      map_.Insert(node.page, index);
      ++live_;
      Append(index);
    }
    constexpr std::size_t kGhostBytes = sizeof(PageId) + sizeof(std::uint64_t) + sizeof(std::uint32_t);
    std::uint64_t ghosts = 0;
    if (!base::ReadCount(in, &ghosts, kGhostBytes) || ghosts > options_.capacity) return false;
    ghost_map_.Reserve(ghosts);
    for (std::uint64_t k = 0; k < ghosts; ++k) {
      Ghost g{};
      if (!base::ReadPod(in, &g.page) || !base::ReadPod(in, &g.last) || !base::ReadPod(in, &g.category)) return false;
      // A block that came back is no longer a ghost.
      if (g.category >= kMaxCategories || g.last > now_ || map_.Find(g.page) != nullptr ||
          ghost_map_.Find(g.page) != nullptr) {
        return false;
      }
      g.id = ghost_.size();
      ghost_.push_back(g);
      ghost_map_.Insert(g.page, static_cast<std::uint32_t>(g.id));
    }
    return true;
  }

 private:
  static constexpr std::uint32_t kNil = 0xffffffffu;
  struct Node {
    PageId page = 0;
    std::uint64_t last = 0;     // request clock at the last reference
    std::uint64_t seq = 0;      // reference seq, for ties
    std::uint32_t category = 0;
    std::uint32_t prev = kNil;  // towards the list's oldest
    std::uint32_t next = kNil;
  };
  struct List {
    std::uint32_t oldest = kNil;
    std::uint32_t newest = kNil;
  };
  struct Stats {
    std::uint64_t references = 0;
    std::uint64_t reuses = 0;
    double interval_sum = 0;
  };
  struct Ghost {
    PageId page;
    std::uint64_t last;
    std::uint32_t category;
    std::uint64_t id;  // matches ghost_map_ while this is the page's live ghost
  };

  void Reference(PageId page, std::uint32_t category) {
    ++seq_;
    ++stats_[category].references;
    std::uint32_t* found = map_.Find(page);
    std::uint32_t index;
    if (found != nullptr) {
      index = *found;
      Node& n = nodes_[index];
      Observe(n.category, n.last);
      Unlink(index);
    } else {
      if (std::uint32_t* g = ghost_map_.Find(page)) {
        const Ghost& ghost = ghost_[static_cast<std::uint32_t>(*g - static_cast<std::uint32_t>(ghost_base_))];
        Observe(ghost.category, ghost.last);
        ghost_map_.Erase(page);
      }
      if (live_ >= options_.capacity) EvictOne();
      index = nodes_.Allocate();
      nodes_[index].page = page;
      map_.Insert(page, index);
      ++live_;
    }
    Node& n = nodes_[index];
    n.last = now_;
    n.seq = seq_;
    n.category = category;
    Append(index);
  }

  void Observe(std::uint32_t category, std::uint64_t last) {
    Stats& s = stats_[category];
    ++s.reuses;
    s.interval_sum += static_cast<double>(now_ - last);
  }

  // log(p_c) - age / mu_c for the category's oldest block.
  double Score(std::uint32_t category, const Node& n) const {
    const Stats& s = stats_[category];
    const double p = (static_cast<double>(s.reuses) + 1) / (static_cast<double>(s.references) + 2);
    const double mu = (s.interval_sum + 1) / (static_cast<double>(s.reuses) + 1);
    return std::log(p) - static_cast<double>(now_ - n.last) / mu;
  }

  void EvictOne() {
    std::uint32_t victim = kNil;
    double best = 0;
    for (std::uint32_t c = 0; c < kMaxCategories; ++c) {
      const std::uint32_t head = lists_[c].oldest;
      if (head == kNil) continue;
      const double score = Score(c, nodes_[head]);
      if (victim == kNil || score < best || (score == best && nodes_[head].seq < nodes_[victim].seq)) {
        victim = head;
        best = score;
      }
    }
    if (victim == kNil) return;
    Node& n = nodes_[victim];
    Unlink(victim);
    map_.Erase(n.page);
    nodes_.Release(victim);
    --live_;
    // Remember the block among the last C evicted.
    ghost_.push_back(Ghost{n.page, n.last, n.category, ghost_base_ + ghost_.size()});
    if (std::uint32_t* g = ghost_map_.Find(n.page)) {
      *g = static_cast<std::uint32_t>(ghost_.back().id);
    } else {
      ghost_map_.Insert(n.page, static_cast<std::uint32_t>(ghost_.back().id));
    }
    while (ghost_map_.size() > options_.capacity) {
      const Ghost& old = ghost_.front();
      if (LiveGhost(old)) ghost_map_.Erase(old.page);
      ghost_.pop_front();
      ++ghost_base_;
    }
    if (ghost_.size() > 2 * options_.capacity + 16) CompactGhosts();
  }

  bool LiveGhost(const Ghost& g) const {
    const std::uint32_t* id = ghost_map_.Find(g.page);
    return id != nullptr && *id == static_cast<std::uint32_t>(g.id);
  }

  // Drops the entries of blocks that came back, renumbering the live ones.
  void CompactGhosts() {
    std::deque<Ghost> kept;
    for (const Ghost& g : ghost_) {
      if (!LiveGhost(g)) continue;
      kept.push_back(g);
      kept.back().id = ghost_base_ + kept.size() - 1;
      *ghost_map_.Find(g.page) = static_cast<std::uint32_t>(kept.back().id);
    }
    ghost_ = std::move(kept);
  }

  void Append(std::uint32_t index) {
    Node& n = nodes_[index];
    List& l = lists_[n.category];
    n.prev = l.newest;
    n.next = kNil;
    if (l.newest != kNil) nodes_[l.newest].next = index;
    l.newest = index;
    if (l.oldest == kNil) l.oldest = index;
  }

  void Unlink(std::uint32_t index) {
    Node& n = nodes_[index];
    List& l = lists_[n.category];
    if (n.prev != kNil) nodes_[n.prev].next = n.next; else l.oldest = n.next;
    if (n.next != kNil) nodes_[n.next].prev = n.prev; else l.newest = n.prev;
    n.prev = n.next = kNil;
  }

  PolicyOptions options_;
  PageMap map_;
  policy_internal::SlotPool<Node> nodes_;
  std::vector<List> lists_;
  std::vector<Stats> stats_;
  std::uint64_t live_ = 0;
  std::uint64_t now_ = 0;
  std::uint64_t seq_ = 0;
  // Ghost ids are positions in an endless FIFO; ghost_base_ is the id of its front.
  // They are stored as 32 bits in ghost_map_, which is exact while fewer than 2^32
  // evictions happen between a block's eviction and its lookup (the FIFO holds at
  // most 2C + 16 entries).
  std::deque<Ghost> ghost_;
  std::uint64_t ghost_base_ = 0;
  PageMap ghost_map_;
};

// ---------------------------------------------------------------------------
// S3FifoCache: S3-FIFO (Yang et al., "FIFO queues are all you need for cache
// eviction", SOSP 2023, Algorithm 1; libCacheSim's S3FIFOv0). A small FIFO S of
// 10% of the capacity admits new pages; a main FIFO M holds the rest; a ghost FIFO
// G remembers as many evicted ids as M's share of the capacity. Each resident page
// has a 2-bit frequency, incremented on a hit (at most 3). A miss whose id is in G
// is admitted to M, any other to S. Eviction: when S holds at least its share (or
// M is empty), S's oldest pages are examined in turn: one hit while in S (frequency
// >= 1) moves to M with its frequency reset to 0, and if M is then over its share
// M evicts instead (below); the first one never hit leaves to G. Otherwise M
// evicts: its oldest page is reinserted at M's head with its frequency decremented
// while that is non-zero, and the first with frequency 0 is evicted. One page
// leaves the cache per eviction.
class S3FifoCache final : public PolicyCache {
 public:
  explicit S3FifoCache(const PolicyOptions& options) : options_(options) {
    small_target_ = std::max<std::uint64_t>(
        1, static_cast<std::uint64_t>(std::llround(options.s3fifo_small_fraction * static_cast<double>(options.capacity))));
    ghost_target_ = std::max<std::uint64_t>(1, MainTarget());
  }

  SimOutcome Process(const SimRequest& request) override {
    SimOutcome out;
    out.hits = policy_internal::LeadingResident(request.pages, [&](PageId p) { return map_.Find(p) != nullptr; });
    policy_internal::ForEachInTouchOrder(request.pages.size(), options_.touch_order,
                                         [&](std::size_t i) { Reference(request.pages[i]); });
    return out;
  }

  std::uint64_t resident() const override { return small_.size() + main_.size(); }
  std::size_t MemoryBytes() const override {
    return map_.MemoryBytes() + ghost_map_.MemoryBytes() + nodes_.MemoryBytes() +
           (small_.size() + main_.size()) * sizeof(std::uint32_t) + ghost_.size() * sizeof(GhostEntry);
  }

  // S and M in queue order with each page's frequency, then the live ghosts oldest
  // first (stale ghost entries only pace the compaction; ids are renumbered).
  void Serialize(std::vector<std::uint8_t>* out) const override {
    for (const std::deque<std::uint32_t>* q : {&small_, &main_}) {
      base::AppendPod<std::uint64_t>(out, q->size());
      for (std::uint32_t index : *q) {
        base::AppendPod(out, nodes_[index].page);
        base::AppendPod(out, nodes_[index].freq);
      }
    }
    std::uint64_t ghosts = 0;
    for (const GhostEntry& g : ghost_) ghosts += LiveGhost(g) ? 1 : 0;
    base::AppendPod(out, ghosts);
    for (const GhostEntry& g : ghost_) {
      if (LiveGhost(g)) base::AppendPod(out, g.page);
    }
  }

  bool Deserialize(std::span<const std::uint8_t>* in) override {
    if (resident() != 0) return false;
    for (std::deque<std::uint32_t>* q : {&small_, &main_}) {
      std::uint64_t n = 0;
      if (!base::ReadCount(in, &n, sizeof(PageId) + 1) || resident() + n > options_.capacity) return false;
      map_.Reserve(resident() + n);
      for (std::uint64_t k = 0; k < n; ++k) {
        Node node;
        if (!base::ReadPod(in, &node.page) || !base::ReadPod(in, &node.freq) || node.freq > 3 ||
            map_.Find(node.page) != nullptr) {
          return false;
        }
        const std::uint32_t index = nodes_.Allocate();
        nodes_[index] = node;
        map_.Insert(node.page, index);
        q->push_back(index);
      }
    }
    std::uint64_t ghosts = 0;
    if (!base::ReadCount(in, &ghosts, sizeof(PageId)) || ghosts > ghost_target_) return false;
    ghost_map_.Reserve(ghosts);
    for (std::uint64_t k = 0; k < ghosts; ++k) {
      PageId page = 0;
      if (!base::ReadPod(in, &page) || map_.Find(page) != nullptr || ghost_map_.Find(page) != nullptr) return false;
      const std::uint64_t id = ghost_next_++;
      ghost_.push_back(GhostEntry{page, id});
      ghost_map_.Insert(page, static_cast<std::uint32_t>(id));
    }
    return true;
  }

 private:
  struct Node {
    PageId page = 0;
    std::uint8_t freq = 0;
  };
  struct GhostEntry {
    PageId page;
    std::uint64_t id;
  };

  void Reference(PageId page) {
    if (std::uint32_t* found = map_.Find(page)) {
      Node& n = nodes_[*found];
      if (n.freq < 3) ++n.freq;
      return;
    }
    while (resident() >= options_.capacity) Evict();
    const std::uint32_t index = nodes_.Allocate();
    nodes_[index] = Node{page, 0};
    map_.Insert(page, index);
    if (ghost_map_.Find(page) != nullptr) {
      ghost_map_.Erase(page);
      main_.push_back(index);
    } else {
      small_.push_back(index);
    }
  }

  void Evict() {
    if (small_.size() >= small_target_ || main_.empty()) {
      EvictSmall();
    } else {
      EvictMain();
    }
  }

  void EvictSmall() {
    while (!small_.empty()) {
      const std::uint32_t index = small_.front();
      small_.pop_front();
      Node& n = nodes_[index];
      if (n.freq >= 1) {
        // Hit while in S: promoted to M; when M is over its share, M gives up a page.
        n.freq = 0;
        main_.push_back(index);
        if (main_.size() > MainTarget()) {
          EvictMain();
          return;
        }
      } else {
        Remove(index);
        AddGhost(n.page);
        return;
      }
    }
    EvictMain();
  }

  std::uint64_t MainTarget() const {
    return options_.capacity > small_target_ ? options_.capacity - small_target_ : 0;
  }

  void EvictMain() {
    while (!main_.empty()) {
      const std::uint32_t index = main_.front();
      main_.pop_front();
      Node& n = nodes_[index];
      if (n.freq > 0) {
        --n.freq;
        main_.push_back(index);
      } else {
        Remove(index);
        return;
      }
    }
  }

  void Remove(std::uint32_t index) {
    map_.Erase(nodes_[index].page);
    nodes_.Release(index);
  }

  void AddGhost(PageId page) {
    const std::uint64_t id = ghost_next_++;
    ghost_.push_back(GhostEntry{page, id});
    if (std::uint32_t* g = ghost_map_.Find(page)) {
      *g = static_cast<std::uint32_t>(id);
    } else {
      ghost_map_.Insert(page, static_cast<std::uint32_t>(id));
    }
    while (ghost_map_.size() > ghost_target_) {
      const GhostEntry& old = ghost_.front();
      if (LiveGhost(old)) ghost_map_.Erase(old.page);
      ghost_.pop_front();
    }
    if (ghost_.size() > 2 * ghost_target_ + 16) {
      std::deque<GhostEntry> kept;
      for (const GhostEntry& g : ghost_) {
        if (LiveGhost(g)) kept.push_back(g);
      }
      ghost_ = std::move(kept);
    }
  }

  bool LiveGhost(const GhostEntry& g) const {
    const std::uint32_t* id = ghost_map_.Find(g.page);
    return id != nullptr && *id == static_cast<std::uint32_t>(g.id);
  }

  PolicyOptions options_;
  std::uint64_t small_target_ = 1;
  std::uint64_t ghost_target_ = 1;
  PageMap map_;
  policy_internal::SlotPool<Node> nodes_;
  std::deque<std::uint32_t> small_;  // front = oldest
  std::deque<std::uint32_t> main_;
  std::deque<GhostEntry> ghost_;
  std::uint64_t ghost_next_ = 0;
  PageMap ghost_map_;
};

}  // namespace

std::string_view PolicyName(PolicyKind kind) { return kNames[static_cast<int>(kind)]; }

base::Result<PolicyKind> ParsePolicyName(std::string_view name) {
  for (PolicyKind kind : kAllPolicies) {
    if (PolicyName(kind) == name) return kind;
  }
  std::string known;
  for (PolicyKind kind : kAllPolicies) {
    if (!known.empty()) known += ", ";
    known += PolicyName(kind);
  }
  return base::Result<PolicyKind>::Error("unknown policy '" + std::string(name) + "' (known: " + known + ")");
}

base::Result<std::vector<PolicyKind>> ParsePolicyList(std::string_view list) {
  std::vector<PolicyKind> out;
  if (list == "all") return std::vector<PolicyKind>(std::begin(kAllPolicies), std::end(kAllPolicies));
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string_view name = list.substr(start, end - start);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name.empty()) return base::Result<std::vector<PolicyKind>>::Error("empty policy name in '" + std::string(list) + "'");
    auto kind = ParsePolicyName(name);
    if (!kind.ok()) return base::Result<std::vector<PolicyKind>>::Error(kind.error());
    if (std::find(out.begin(), out.end(), kind.value()) == out.end()) out.push_back(kind.value());
    start = end + 1;
  }
  return out;
}

base::Result<std::unique_ptr<PolicyCache>> MakePolicyCache(const PolicyOptions& options) {
  using R = base::Result<std::unique_ptr<PolicyCache>>;
  if (options.capacity < 1) return R::Error("capacity: must be at least 1 page, got 0");
  if (options.capacity >= kBeyondTracked) return R::Error("capacity: too large");
  if (!(options.s3fifo_small_fraction > 0 && options.s3fifo_small_fraction < 1)) {
    return R::Error("s3fifo small fraction: must be in (0, 1)");
  }
  std::unique_ptr<PolicyCache> cache;
  switch (options.kind) {
    case PolicyKind::kLru:
    case PolicyKind::kFifo:
    case PolicyKind::kLfu:
    case PolicyKind::kPriority:
    case PolicyKind::kBelady:
      cache = std::make_unique<KeyedCache>(options);
      break;
    case PolicyKind::kWorkloadAware:
      cache = std::make_unique<WorkloadAwareCache>(options);
      break;
    case PolicyKind::kS3Fifo:
      cache = std::make_unique<S3FifoCache>(options);
      break;
    case PolicyKind::kSglang:
      cache = policy_internal::MakeSglangCache(options);
      break;
    case PolicyKind::kVllm:
      cache = policy_internal::MakeVllmCache(options);
      break;
  }
  return cache;
}

}  // namespace kvwatch::curve
