// The eviction-policy simulations (curve/policy.h) against deliberately simple
// second implementations (vectors and linear scans, written from the documented
// semantics), on randomized prefix-sharing traces with tenants, classes,
// timestamps and output lengths; hand-worked examples; lru against the stack
// curve; belady against every online policy.
#include "curve/policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "curve/curve_accumulator.h"
#include "curve/policy_replay.h"
#include "curve/stack_distance.h"

namespace kvwatch::curve {
namespace {

// ---------------------------------------------------------------------------
// Random traces: conversations that extend their own earlier prompts, a few
// shared system prompts, one-shot requests; tenants, timestamps, token counts.
struct TraceSpec {
  std::uint64_t seed = 1;
  int requests = 400;
  bool timestamps = true;
  bool single_page = false;  // no shared prefixes: one page per request
};

std::vector<Request> RandomTrace(const TraceSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  std::vector<Request> out;
  std::vector<std::vector<PageId>> chains;  // open conversations
  PageId next = 1000;
  double t = 0;
  const std::vector<std::string> tenants = {"", "a", "b", "c"};
  for (int i = 0; i < spec.requests; ++i) {
    Request r;
    t += std::uniform_real_distribution<double>(0, 2)(rng);
    if (spec.timestamps) r.timestamp_s = t;
    r.tenant = tenants[rng() % tenants.size()];
    if (spec.single_page) {
      r.pages = {static_cast<PageId>(std::geometric_distribution<int>(0.08)(rng))};
    } else {
      const int kind = static_cast<int>(rng() % 10);
      if (kind < 5 && !chains.empty()) {
        // Continue a conversation: its whole prompt plus a few new pages.
        auto& chain = chains[rng() % chains.size()];
        const int extra = 1 + static_cast<int>(rng() % 3);
        for (int k = 0; k < extra; ++k) chain.push_back(next++);
        r.pages = chain;
      } else {
        // A new chain after one of three system prompts (pages 1..3 / 11..12 / 21).
        const int sys = static_cast<int>(rng() % 3);
        if (sys == 0) r.pages = {1, 2, 3};
        if (sys == 1) r.pages = {11, 12};
        if (sys == 2) r.pages = {21};
        const int extra = static_cast<int>(rng() % 4);
        for (int k = 0; k < extra; ++k) r.pages.push_back(next++);
        if (kind < 8) chains.push_back(r.pages);
        if (chains.size() > 12) chains.erase(chains.begin());
      }
    }
    r.input_tokens = static_cast<std::int64_t>(r.pages.size() * 16 + rng() % 16);
    r.output_tokens = static_cast<std::int64_t>(rng() % 60);
    out.push_back(std::move(r));
  }
  return out;
}

// The facts every policy gets, built the way `kvwatch replay` builds them.
struct Prepared {
  StoredTrace trace;
  std::vector<std::uint32_t> unlimited;
};

Prepared Prepare(const std::vector<Request>& requests, TouchOrder order, const LifetimeOptions& lifetime,
                 const PriorityRules& rules = {}) {
  Prepared p;
  EngineOptions eo;
  eo.touch_order = order;
  eo.remembered_evictions = 0;
  StackDistanceEngine engine(eo);
  RequestClassifier classifier;
  RequestOutcome outcome;
  for (const Request& r : requests) {
    engine.Process(r.pages, &outcome);
    const std::size_t full = RequestClassifier::FullPages(r.pages.size(), r.input_tokens, lifetime.page_tokens);
    p.trace.Add(r, RequestClassifier::ClassOfTurn(classifier.Observe(r.pages, full, outcome.unlimited_hits)),
                outcome.unlimited_hits, lifetime);
    p.unlimited.push_back(outcome.unlimited_hits);
  }
  EXPECT_TRUE(p.trace.AssignPriorities(rules).ok());
  p.trace.ComputeNextUse(order);
  return p;
}

std::vector<std::uint32_t> Order(std::size_t n, TouchOrder order) {
  std::vector<std::uint32_t> idx;
  for (std::size_t i = 0; i < n; ++i) idx.push_back(static_cast<std::uint32_t>(i));
  if (order == TouchOrder::kTailFirst) std::reverse(idx.begin(), idx.end());
  return idx;
}

std::uint32_t Leading(const SimRequest& r, const std::function<bool(PageId)>& resident) {
  std::uint32_t h = 0;
  for (PageId p : r.pages) {
    if (!resident(p)) break;
    ++h;
  }
  return h;
}

// ---------------------------------------------------------------------------
// Simple implementations. Each returns the hits (and preemptions) per request.
struct SimpleResult {
  std::vector<std::uint32_t> hits;
  std::vector<std::uint32_t> preemptions;
};

// A trace whose requests' priorities are replaced (size and At as StoredTrace's).
struct WithPriorities {
  const StoredTrace& trace;
  std::vector<std::int32_t> priority;
  std::size_t size() const { return trace.size(); }
  SimRequest At(std::size_t i) const {
    SimRequest r = trace.At(i);
    r.priority = priority[i];
    return r;
  }
};

// One list of entries; the victim is the entry with the smallest (hi, lo).
template <typename Trace>
SimpleResult SimpleKeyed(const Trace& trace, PolicyKind kind, std::uint64_t cap, TouchOrder order) {
  struct E {
    PageId page;
    std::uint64_t hi, lo, freq;
  };
  std::vector<E> cache;
  std::uint64_t seq = 0, age = 0;
  SimpleResult res;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const SimRequest r = trace.At(i);
    auto find = [&](PageId p) {
      return std::find_if(cache.begin(), cache.end(), [&](const E& e) { return e.page == p; });
    };
    res.hits.push_back(Leading(r, [&](PageId p) { return find(p) != cache.end(); }));
    res.preemptions.push_back(0);
    for (std::uint32_t k : Order(r.pages.size(), order)) {
      ++seq;
      auto it = find(r.pages[k]);
      bool admitted = false;
      if (it == cache.end()) {
        if (cache.size() >= cap) {
          auto victim = std::min_element(cache.begin(), cache.end(), [](const E& a, const E& b) {
            return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo;
          });
          if (kind == PolicyKind::kLfu) age = victim->hi;
          cache.erase(victim);
        }
        cache.push_back(E{r.pages[k], 0, 0, 0});
        it = cache.end() - 1;
        admitted = true;
      }
      ++it->freq;
      if (kind == PolicyKind::kFifo && !admitted) continue;
      it->lo = seq;
      if (kind == PolicyKind::kLfu) it->hi = it->freq + age;
      if (kind == PolicyKind::kPriority) it->hi = static_cast<std::uint64_t>(r.priority + (std::int64_t{1} << 32));
      if (kind == PolicyKind::kBelady) it->hi = kNeverUsed - r.next_use[k];
      if (kind == PolicyKind::kLru || kind == PolicyKind::kFifo) it->hi = 0;
    }
  }
  return res;
}

// SIEVE as the paper's Algorithm 1 (NSDI 2024) reads, on a vector: index 0 is the
// head (newest), the back the tail (oldest); the hand is an index, -1 for none.
SimpleResult SimpleSieve(const StoredTrace& trace, std::uint64_t cap, TouchOrder order) {
  struct E {
    PageId page;
    bool visited;
  };
  std::vector<E> queue;
  std::ptrdiff_t hand = -1;
  SimpleResult res;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const SimRequest r = trace.At(i);
    auto find = [&](PageId p) {
      return std::find_if(queue.begin(), queue.end(), [&](const E& e) { return e.page == p; });
    };
    res.hits.push_back(Leading(r, [&](PageId p) { return find(p) != queue.end(); }));
    res.preemptions.push_back(0);
    for (std::uint32_t k : Order(r.pages.size(), order)) {
      auto it = find(r.pages[k]);
      if (it != queue.end()) {
        it->visited = true;
        continue;
      }
      if (queue.size() >= cap) {
        std::ptrdiff_t o = hand >= 0 ? hand : static_cast<std::ptrdiff_t>(queue.size()) - 1;
        while (queue[o].visited) {
          queue[o].visited = false;
          o = o > 0 ? o - 1 : static_cast<std::ptrdiff_t>(queue.size()) - 1;
        }
        hand = o - 1;  // the neighbour towards the head; -1 (none) at the head
        queue.erase(queue.begin() + o);
      }
      queue.insert(queue.begin(), E{r.pages[k], false});
      if (hand >= 0) ++hand;  // the insertion at the head shifts every index
    }
  }
  return res;
}

SimpleResult SimpleWorkloadAware(const StoredTrace& trace, std::uint64_t cap, TouchOrder order) {
  struct E {
    PageId page;
    std::uint64_t last, seq;
    std::uint32_t cat;
  };
  struct G {
    PageId page;
    std::uint64_t last;
    std::uint32_t cat;
  };
  std::vector<E> cache;
  std::deque<G> ghost;
  std::vector<double> refs(kMaxCategories), reuses(kMaxCategories), intervals(kMaxCategories);
  std::uint64_t now = 0, seq = 0;
  SimpleResult res;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const SimRequest r = trace.At(i);
    ++now;
    auto find = [&](PageId p) {
      return std::find_if(cache.begin(), cache.end(), [&](const E& e) { return e.page == p; });
    };
    res.hits.push_back(Leading(r, [&](PageId p) { return find(p) != cache.end(); }));
    res.preemptions.push_back(0);
    for (std::uint32_t k : Order(r.pages.size(), order)) {
      ++seq;
      refs[r.category] += 1;
      auto it = find(r.pages[k]);
      if (it != cache.end()) {
        reuses[it->cat] += 1;
        intervals[it->cat] += static_cast<double>(now - it->last);
      } else {
        auto g = std::find_if(ghost.begin(), ghost.end(), [&](const G& x) { return x.page == r.pages[k]; });
        if (g != ghost.end()) {
          reuses[g->cat] += 1;
          intervals[g->cat] += static_cast<double>(now - g->last);
          ghost.erase(g);
        }
        if (cache.size() >= cap) {
          auto score = [&](const E& e) {
            const double p = (reuses[e.cat] + 1) / (refs[e.cat] + 2);
            const double mu = (intervals[e.cat] + 1) / (reuses[e.cat] + 1);
            return std::log(p) - static_cast<double>(now - e.last) / mu;
          };
          auto victim = std::min_element(cache.begin(), cache.end(), [&](const E& a, const E& b) {
            const double sa = score(a), sb = score(b);
            return sa != sb ? sa < sb : a.seq < b.seq;
          });
          ghost.push_back(G{victim->page, victim->last, victim->cat});
          while (ghost.size() > cap) ghost.pop_front();
          cache.erase(victim);
        }
        cache.push_back(E{r.pages[k], 0, 0, 0});
        it = cache.end() - 1;
      }
      it->last = now;
      it->seq = seq;
      it->cat = r.category;
    }
  }
  return res;
}

SimpleResult SimpleS3Fifo(const StoredTrace& trace, std::uint64_t cap, TouchOrder order, int promotion_hits = 1) {
  struct E {
    PageId page;
    int freq;
  };
  std::deque<E> small, main;
  std::deque<PageId> ghost;
  const std::uint64_t small_target = std::max<std::uint64_t>(1, std::llround(0.1 * static_cast<double>(cap)));
  const std::uint64_t main_target = cap > small_target ? cap - small_target : 0;
  const std::uint64_t ghost_target = std::max<std::uint64_t>(1, main_target);
  auto find = [](std::deque<E>& q, PageId p) {
    return std::find_if(q.begin(), q.end(), [&](const E& e) { return e.page == p; });
  };
  auto evict_main = [&] {
    while (!main.empty()) {
      E e = main.front();
      main.pop_front();
      if (e.freq > 0) {
        --e.freq;
        main.push_back(e);
      } else {
        return;
      }
    }
  };
  auto evict = [&] {
    if (small.size() >= small_target || main.empty()) {
      while (!small.empty()) {
        E e = small.front();
        small.pop_front();
        if (e.freq >= promotion_hits) {
          e.freq = 0;
          main.push_back(e);
          if (main.size() > main_target) {
            evict_main();
            return;
          }
        } else {
          ghost.push_back(e.page);
          while (ghost.size() > ghost_target) ghost.pop_front();
          return;
        }
      }
      evict_main();
    } else {
      evict_main();
    }
  };
  SimpleResult res;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const SimRequest r = trace.At(i);
    res.hits.push_back(
        Leading(r, [&](PageId p) { return find(small, p) != small.end() || find(main, p) != main.end(); }));
    res.preemptions.push_back(0);
    for (std::uint32_t k : Order(r.pages.size(), order)) {
      const PageId p = r.pages[k];
      auto s = find(small, p);
      auto m = find(main, p);
      if (s != small.end() || m != main.end()) {
        E& e = s != small.end() ? *s : *m;
        e.freq = std::min(e.freq + 1, 3);
        continue;
      }
      while (small.size() + main.size() >= cap) evict();
      auto g = std::find(ghost.begin(), ghost.end(), p);
      if (g != ghost.end()) {
        ghost.erase(g);
        main.push_back(E{p, 0});
      } else {
        small.push_back(E{p, 0});
      }
    }
  }
  return res;
}

// ARC as Megiddo and Modha's Figure 4 states it, on four std::lists (front = LRU).
SimpleResult SimpleArc(const StoredTrace& trace, std::uint64_t cap, TouchOrder order) {
  std::list<PageId> t1, t2, b1, b2;
  double p = 0;
  const double c = static_cast<double>(cap);
  auto in = [](std::list<PageId>& l, PageId x) { return std::find(l.begin(), l.end(), x); };
  auto replace = [&](bool x_in_b2) {
    const double n1 = static_cast<double>(t1.size());
    if (!t1.empty() && (n1 > p || (x_in_b2 && n1 == p))) {
      b1.push_back(t1.front());
      t1.pop_front();
    } else if (!t2.empty()) {
      b2.push_back(t2.front());
      t2.pop_front();
    }
  };
  SimpleResult res;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const SimRequest r = trace.At(i);
    res.hits.push_back(Leading(r, [&](PageId x) { return in(t1, x) != t1.end() || in(t2, x) != t2.end(); }));
    res.preemptions.push_back(0);
    for (std::uint32_t k : Order(r.pages.size(), order)) {
      const PageId x = r.pages[k];
      if (auto it = in(t1, x); it != t1.end()) {  // I
        t1.erase(it);
        t2.push_back(x);
      } else if (auto it2 = in(t2, x); it2 != t2.end()) {  // I
        t2.erase(it2);
        t2.push_back(x);
      } else if (auto g1 = in(b1, x); g1 != b1.end()) {  // II
        const double d = b1.size() >= b2.size() ? 1.0 : static_cast<double>(b2.size()) / static_cast<double>(b1.size());
        p = std::min(c, p + d);
        replace(false);
        b1.erase(g1);
        t2.push_back(x);
      } else if (auto g2 = in(b2, x); g2 != b2.end()) {  // III
        const double d = b2.size() >= b1.size() ? 1.0 : static_cast<double>(b1.size()) / static_cast<double>(b2.size());
        p = std::max(0.0, p - d);
        replace(true);
        b2.erase(g2);
        t2.push_back(x);
      } else {  // IV
        const std::size_t l1 = t1.size() + b1.size();
        const std::size_t all = l1 + t2.size() + b2.size();
        if (l1 == cap) {
          if (t1.size() < cap) {
            b1.pop_front();
            replace(false);
          } else {
            t1.pop_front();
          }
        } else if (all >= cap) {
          if (all == 2 * cap) b2.pop_front();
          replace(false);
        }
        t1.push_back(x);
      }
    }
  }
  return res;
}

// Running requests for the two lifetime policies: a list in arrival order.
struct SimpleRun {
  double end;
  std::vector<int> held;  // node or block indices, prefix order
};

double EndOf(const SimRequest& r) {
  if (std::isnan(r.end_s) || std::isnan(r.arrival_s)) return -std::numeric_limits<double>::infinity();
  return r.end_s;
}

// Finishes the running requests that end by t, in (end, arrival) order.
template <typename Release>
void FinishBy(std::vector<SimpleRun>& running, double t, Release&& release) {
  while (true) {
    int best = -1;
    for (int k = 0; k < static_cast<int>(running.size()); ++k) {
      if (!std::isnan(t) && running[k].end > t) continue;
      if (best < 0 || running[k].end < running[best].end) best = k;
    }
    if (best < 0) return;
    release(running[best]);
    running.erase(running.begin() + best);
  }
}

SimpleResult SimpleSglang(const StoredTrace& trace, std::uint64_t cap, TouchOrder order) {
  struct Node {
    PageId page;
    bool anon, live;
    int parent;
    int lock;
    std::uint64_t last;
  };
  std::vector<Node> nodes;
  std::vector<SimpleRun> running;
  std::uint64_t seq = 0;
  auto live_count = [&] { return std::count_if(nodes.begin(), nodes.end(), [](const Node& n) { return n.live; }); };
  auto find = [&](PageId p) {
    for (int k = 0; k < static_cast<int>(nodes.size()); ++k) {
      if (nodes[k].live && !nodes[k].anon && nodes[k].page == p) return k;
    }
    return -1;
  };
  auto evict_one = [&] {
    int best = -1;
    for (int k = 0; k < static_cast<int>(nodes.size()); ++k) {
      if (!nodes[k].live || nodes[k].lock > 0) continue;
      bool leaf = true;
      for (const Node& c : nodes) leaf = leaf && !(c.live && c.parent == k);
      if (leaf && (best < 0 || nodes[k].last < nodes[best].last)) best = k;
    }
    if (best < 0) return false;
    nodes[best].live = false;
    return true;
  };
  SimpleResult res;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const SimRequest r = trace.At(i);
    FinishBy(running, r.arrival_s, [&](SimpleRun& run) {
      for (std::uint32_t k : Order(run.held.size(), order)) nodes[run.held[k]].last = ++seq;
      for (int h : run.held) --nodes[h].lock;
    });
    res.hits.push_back(Leading(r, [&](PageId p) { return find(p) >= 0; }));
    SimpleRun run{EndOf(r), {}};
    std::uint64_t missing = 0;
    for (PageId p : r.pages) {
      const int k = find(p);
      if (k >= 0) {
        ++nodes[k].lock;
        run.held.push_back(k);
      } else {
        ++missing;
      }
    }
    while (cap - static_cast<std::uint64_t>(live_count()) < missing + r.output_pages && evict_one()) {
    }
    bool full = false;
    int parent = -1;
    auto add = [&](PageId p, bool anon) {
      nodes.push_back(Node{p, anon, true, parent, 1, ++seq});
      parent = static_cast<int>(nodes.size()) - 1;
      run.held.push_back(parent);
    };
    for (PageId p : r.pages) {
      const int k = find(p);
      if (k >= 0) {
        parent = k;
        continue;
      }
      if (static_cast<std::uint64_t>(live_count()) >= cap) {
        full = true;
        break;
      }
      add(p, false);
    }
    for (std::uint32_t k = 0; k < r.output_pages && !full; ++k) {
      if (static_cast<std::uint64_t>(live_count()) >= cap) {
        full = true;
        break;
      }
      add(0, true);
    }
    res.preemptions.push_back(full ? 1 : 0);
    running.push_back(std::move(run));
  }
  return res;
}

SimpleResult SimpleVllm(const StoredTrace& trace, std::uint64_t cap) {
  struct Block {
    PageId page;
    bool cached;
    int ref;
  };
  std::vector<Block> blocks;
  std::vector<int> queue;  // front = head
  std::vector<SimpleRun> running;
  auto find = [&](PageId p) {
    for (int k = 0; k < static_cast<int>(blocks.size()); ++k) {
      if (blocks[k].cached && blocks[k].page == p) return k;
    }
    return -1;
  };
  auto release = [&](SimpleRun& run) {
    for (auto it = run.held.rbegin(); it != run.held.rend(); ++it) {
      if (--blocks[*it].ref == 0) queue.push_back(*it);
    }
  };
  auto free_blocks = [&] { return (cap - blocks.size()) + queue.size(); };
  auto take = [&] {
    int k;
    if (blocks.size() < cap) {
      blocks.push_back(Block{0, false, 0});
      k = static_cast<int>(blocks.size()) - 1;
    } else {
      k = queue.front();
      queue.erase(queue.begin());
    }
    blocks[k] = Block{0, false, 1};
    return k;
  };
  SimpleResult res;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const SimRequest r = trace.At(i);
    FinishBy(running, r.arrival_s, release);
    res.hits.push_back(Leading(r, [&](PageId p) { return find(p) >= 0; }));
    std::vector<int> held(r.pages.size(), -1);
    std::uint64_t missing = 0;
    for (std::size_t k = 0; k < r.pages.size(); ++k) {
      const int b = find(r.pages[k]);
      if (b < 0) {
        ++missing;
        continue;
      }
      held[k] = b;
      if (blocks[b].ref++ == 0) queue.erase(std::find(queue.begin(), queue.end(), b));
    }
    std::uint32_t preempted = 0;
    while (free_blocks() < missing + r.output_pages && !running.empty()) {
      release(running.back());
      running.pop_back();
      ++preempted;
    }
    if (free_blocks() < missing + r.output_pages) ++preempted;
    SimpleRun run{EndOf(r), {}};
    for (std::size_t k = 0; k < r.pages.size(); ++k) {
      if (held[k] >= 0) {
        run.held.push_back(held[k]);
        continue;
      }
      const int b = find(r.pages[k]);
      if (b >= 0) {
        if (blocks[b].ref++ == 0) queue.erase(std::find(queue.begin(), queue.end(), b));
        run.held.push_back(b);
        continue;
      }
      if (free_blocks() == 0) continue;
      const int nb = take();
      blocks[nb].page = r.pages[k];
      blocks[nb].cached = true;
      run.held.push_back(nb);
    }
    for (std::uint32_t k = 0; k < r.output_pages && free_blocks() > 0; ++k) run.held.push_back(take());
    res.preemptions.push_back(preempted);
    running.push_back(std::move(run));
  }
  return res;
}

SimpleResult Simple(const StoredTrace& trace, PolicyKind kind, std::uint64_t cap, TouchOrder order) {
  switch (kind) {
    case PolicyKind::kWorkloadAware:
      return SimpleWorkloadAware(trace, cap, order);
    case PolicyKind::kS3Fifo:
      return SimpleS3Fifo(trace, cap, order);
    case PolicyKind::kArc:
      return SimpleArc(trace, cap, order);
    case PolicyKind::kSglang:
      return SimpleSglang(trace, cap, order);
    case PolicyKind::kVllm:
      return SimpleVllm(trace, cap);
    case PolicyKind::kSieve:
      return SimpleSieve(trace, cap, order);
    default:
      return SimpleKeyed(trace, kind, cap, order);
  }
}

template <typename Trace>
SimpleResult Fast(const Trace& trace, PolicyKind kind, std::uint64_t cap, TouchOrder order,
                  std::uint32_t s3fifo_promotion_hits = 1) {
  PolicyOptions o;
  o.kind = kind;
  o.capacity = cap;
  o.touch_order = order;
  o.s3fifo_promotion_hits = s3fifo_promotion_hits;
  auto cache = MakePolicyCache(o);
  EXPECT_TRUE(cache.ok());
  SimpleResult res;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const SimOutcome out = cache.value()->Process(trace.At(i));
    res.hits.push_back(out.hits);
    res.preemptions.push_back(out.preempted_running + (out.preempted ? 1 : 0));
    EXPECT_LE(cache.value()->resident(), cap);
  }
  return res;
}

// ---------------------------------------------------------------------------

TEST(PolicyTest, EveryPolicyEqualsItsSimpleImplementation) {
  const PriorityRules rules = ParsePriorityRules("a=2,tenant:b=-1,class:turn2=1").value();
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    for (bool timestamps : {true, false}) {
      const auto requests = RandomTrace({seed, 300, timestamps, false});
      for (TouchOrder order : {TouchOrder::kTailFirst, TouchOrder::kHeadFirst}) {
        LifetimeOptions lifetime;
        lifetime.decode_tokens_per_s = 20;  // long enough that requests overlap
        const Prepared p = Prepare(requests, order, lifetime, rules);
        std::map<std::uint64_t, std::uint64_t> preemptions;
        std::map<std::uint64_t, std::set<std::uint64_t>> totals;  // capacity -> distinct hit totals
        for (PolicyKind kind : kAllPolicies) {
          for (std::uint64_t cap : {1u, 3u, 8u, 20u, 60u, 400u}) {
            SCOPED_TRACE(std::string(PolicyName(kind)) + " cap " + std::to_string(cap) + " seed " +
                         std::to_string(seed) + (timestamps ? " timed" : " untimed") +
                         (order == TouchOrder::kTailFirst ? " tail-first" : " head-first"));
            const SimpleResult simple = Simple(p.trace, kind, cap, order);
            const SimpleResult fast = Fast(p.trace, kind, cap, order);
            ASSERT_EQ(fast.hits, simple.hits);
            ASSERT_EQ(fast.preemptions, simple.preemptions);
            std::uint64_t sum = 0;
            for (std::uint32_t h : fast.hits) sum += h;
            totals[cap].insert(sum);
            if (kind == PolicyKind::kVllm) {
              for (std::uint32_t x : fast.preemptions) preemptions[cap] += x;
            }
          }
        }
        // The traces tell the policies apart, and vllm preempts at small sizes.
        EXPECT_GE(totals[20].size(), 4u);
        EXPECT_GT(preemptions[3], 0u);
      }
    }
  }
}

// priority keeps one list per level and prunes its empty levels when it has 64
// (curve/policy_core_keyed.cc): with 150 levels, negative ones among them, which
// empty and come back, it still equals the simple implementation.
TEST(PolicyTest, PriorityWithManyLevelsEqualsItsSimpleImplementation) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const auto requests = RandomTrace({seed, 400, false, false});
    for (TouchOrder order : {TouchOrder::kTailFirst, TouchOrder::kHeadFirst}) {
      const Prepared p = Prepare(requests, order, LifetimeOptions{});
      WithPriorities trace{p.trace, {}};
      std::mt19937_64 rng(seed);
      for (std::size_t i = 0; i < p.trace.size(); ++i)
        trace.priority.push_back(static_cast<std::int32_t>(rng() % 150) - 75);
      for (std::uint64_t cap : {1u, 3u, 8u, 20u, 60u, 400u}) {
        SCOPED_TRACE("cap " + std::to_string(cap) + " seed " + std::to_string(seed) +
                     (order == TouchOrder::kTailFirst ? " tail-first" : " head-first"));
        const SimpleResult fast = Fast(trace, PolicyKind::kPriority, cap, order);
        ASSERT_EQ(fast.hits, SimpleKeyed(trace, PolicyKind::kPriority, cap, order).hits);
        // Against lru: the priorities decide.
        if (cap == 20) {
          EXPECT_NE(fast.hits, Fast(p.trace, PolicyKind::kLru, cap, order).hits);
        }
      }
    }
  }
}

// The S3-FIFO promotion threshold (PolicyOptions::s3fifo_promotion_hits): each
// setting equals its simple implementation, and the settings differ.
TEST(PolicyTest, S3FifoPromotionThresholdEqualsItsSimpleImplementation) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const auto requests = RandomTrace({seed, 300, false, false});
    const Prepared p = Prepare(requests, TouchOrder::kTailFirst, {});
    for (std::uint64_t cap : {1u, 8u, 20u, 60u}) {
      std::set<std::uint64_t> totals;
      for (int hits = 1; hits <= 3; ++hits) {
        SCOPED_TRACE("cap " + std::to_string(cap) + " promotion hits " + std::to_string(hits));
        const SimpleResult simple = SimpleS3Fifo(p.trace, cap, TouchOrder::kTailFirst, hits);
        const SimpleResult fast =
            Fast(p.trace, PolicyKind::kS3Fifo, cap, TouchOrder::kTailFirst, static_cast<std::uint32_t>(hits));
        ASSERT_EQ(fast.hits, simple.hits);
        std::uint64_t sum = 0;
        for (std::uint32_t h : fast.hits) sum += h;
        totals.insert(sum);
      }
      if (cap >= 20) {
        EXPECT_GE(totals.size(), 2u);
      }
    }
  }
  PolicyOptions o;
  o.kind = PolicyKind::kS3Fifo;
  o.capacity = 10;
  o.s3fifo_promotion_hits = 0;
  EXPECT_NE(MakePolicyCache(o).error().find("s3fifo promotion hits"), std::string::npos);
  o.s3fifo_promotion_hits = 4;
  EXPECT_FALSE(MakePolicyCache(o).ok());
}

// ARC by hand, capacity 2, one page per request: [1] [2] [1] (1 to T2) [3]
// (REPLACE: |T1| = 1 > p = 0, 2 to B1) [2] (a B1 hit: p = 1, REPLACE: |T1| = 1 is
// not > p, so T2's LRU 1 goes to B2; 2 to T2) [1] (a B2 hit: p = 0, REPLACE: 3
// to B1) [3] (a B1 hit: p = 1; REPLACE evicts T2's LRU 2) [2]: a miss on B2.
TEST(PolicyTest, ArcHandWorked) {
  PolicyOptions o;
  o.kind = PolicyKind::kArc;
  o.capacity = 2;
  auto cache = MakePolicyCache(o);
  ASSERT_TRUE(cache.ok());
  std::vector<std::uint32_t> hits;
  for (PageId page : {1, 2, 1, 3, 2, 1, 3, 2, 3, 1}) {
    const PageId pages[1] = {page};
    SimRequest r;
    r.pages = pages;
    hits.push_back(cache.value()->Process(r).hits);
    EXPECT_LE(cache.value()->resident(), 2u);
  }
  // T2 after [3]: {1, 3}; [2] misses (a B2 hit, p = 0, 1 to B2); [3] hits; [1] misses.
  EXPECT_EQ(hits, (std::vector<std::uint32_t>{0, 0, 1, 0, 0, 0, 0, 0, 1, 0}));
}

TEST(PolicyTest, LruEqualsTheStackCurveAtEveryCapacity) {
  for (TouchOrder order : {TouchOrder::kTailFirst, TouchOrder::kHeadFirst}) {
    const auto requests = RandomTrace({7, 600, true, false});
    EngineOptions eo;
    eo.touch_order = order;
    eo.remembered_evictions = 0;
    StackDistanceEngine engine(eo);
    CurveAccumulator acc(0.5);
    RequestOutcome outcome;
    for (const Request& r : requests) {
      engine.Process(r.pages, &outcome);
      acc.Add(outcome);
    }
    const Prepared p = Prepare(requests, order, {});
    for (std::uint64_t cap = 1; cap <= acc.MaxCapacity() + 2; ++cap) {
      PolicyOptions o;
      o.capacity = cap;
      o.touch_order = order;
      auto run = RunPolicy(p.trace, o, 0.5);
      ASSERT_TRUE(run.ok());
      ASSERT_EQ(run.value().total.page_hits, acc.PageHits(cap)) << cap;
      ASSERT_DOUBLE_EQ(run.value().total.RequestCoverage(), acc.RequestCoverage(cap)) << cap;
    }
  }
}

TEST(PolicyTest, BeladyIsAtOrAboveEveryOnlinePolicyWithoutSharedPrefixes) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const auto requests = RandomTrace({seed, 2000, false, true});
    const Prepared p = Prepare(requests, TouchOrder::kTailFirst, {});
    for (std::uint64_t cap : {1u, 2u, 5u, 10u, 20u, 40u}) {
      PolicyOptions o;
      o.capacity = cap;
      o.kind = PolicyKind::kBelady;
      const std::uint64_t belady = RunPolicy(p.trace, o, 1.0).value().total.page_hits;
      for (PolicyKind kind : kAllPolicies) {
        o.kind = kind;
        EXPECT_LE(RunPolicy(p.trace, o, 1.0).value().total.page_hits, belady) << PolicyName(kind) << " at " << cap;
      }
    }
  }
}

// --- Hand-worked examples -------------------------------------------------------

SimRequest Req(const std::vector<PageId>& pages, double arrival, double end, std::uint32_t out = 0) {
  SimRequest r;
  r.pages = pages;
  r.arrival_s = arrival;
  r.end_s = end;
  r.output_pages = out;
  return r;
}

std::unique_ptr<PolicyCache> Make(PolicyKind kind, std::uint64_t cap) {
  PolicyOptions o;
  o.kind = kind;
  o.capacity = cap;
  return std::move(MakePolicyCache(o).value());
}

TEST(PolicyTest, VllmPinsRunningBlocksReleasesDeepestFirstAndPreempts) {
  auto vllm = Make(PolicyKind::kVllm, 4);
  const std::vector<PageId> a = {1, 2}, b = {3, 4}, c = {5}, a2 = {1, 2}, d = {6, 7, 8};
  // A runs 0..10 and holds 1, 2; B arrives at 1 and runs to 2.
  EXPECT_EQ(vllm->Process(Req(a, 0, 10)).hits, 0u);
  EXPECT_EQ(vllm->Process(Req(b, 1, 2)).hits, 0u);
  // At 3, B has finished: its blocks are queued 4 then 3 (deepest first). Every
  // block has been used, so C takes the queue's head: 4 is evicted.
  EXPECT_EQ(vllm->Process(Req(c, 3, 3)).hits, 0u);
  // A still runs, so 1 and 2 are pinned: a request for 1,2 hits both; 3 is still cached.
  const std::vector<PageId> three = {3};
  EXPECT_EQ(vllm->Process(Req(a2, 4, 4)).hits, 2u);
  EXPECT_EQ(vllm->Process(Req(three, 4.5, 4.5)).hits, 1u);
  const std::vector<PageId> four = {4};
  EXPECT_EQ(vllm->Process(Req(four, 4.6, 4.6)).hits, 0u);  // 4 was evicted first
  // D needs 3 blocks while A (still running until 10) pins 1 and 2: only 2 are
  // free, so A, the newest running request that holds blocks, is preempted.
  const SimOutcome out = vllm->Process(Req(d, 5, 6));
  EXPECT_EQ(out.preempted_running, 1u);
  EXPECT_FALSE(out.preempted);
  // A's blocks went back deepest first (2, then 1) behind 3 and 4, so D's three
  // blocks evicted 3, 4 and 2, and 1 is still cached.
  const std::vector<PageId> one = {1}, two = {2};
  EXPECT_EQ(vllm->Process(Req(one, 7, 7)).hits, 1u);
  EXPECT_EQ(vllm->Process(Req(two, 8, 8)).hits, 0u);
}

// Thousands of requests that each finish while a newer one runs, beside one that
// runs throughout: the running set drops their records in bulk, and preemption
// still takes the newest running request, then the oldest.
TEST(PolicyTest, VllmPreemptsNewestFirstAfterManyOverlappingRequests) {
  auto vllm = Make(PolicyKind::kVllm, 10);
  const std::vector<PageId> a = {1, 2, 3};
  vllm->Process(Req(a, 0, 1e9));  // runs throughout
  std::vector<PageId> one(1);
  for (int k = 1; k <= 3000; ++k) {
    one[0] = 100 + static_cast<PageId>(k);
    const SimOutcome out = vllm->Process(Req(one, k, k + 1.5));  // ends after the next arrives
    ASSERT_EQ(out.preempted_running, 0u) << k;
  }
  // Running: a (3 blocks) and request 3000 (1 block); 10 new blocks need both.
  std::vector<PageId> big;
  for (PageId p = 5000; p < 5010; ++p) big.push_back(p);
  const SimOutcome out = vllm->Process(Req(big, 3001.1, 3002));
  EXPECT_EQ(out.preempted_running, 2u);
  EXPECT_FALSE(out.preempted);
}

TEST(PolicyTest, VllmRequestLargerThanTheCacheIsPreempted) {
  auto vllm = Make(PolicyKind::kVllm, 2);
  const std::vector<PageId> big = {1, 2, 3};
  const SimOutcome out = vllm->Process(Req(big, 0, 1));
  EXPECT_TRUE(out.preempted);
  EXPECT_EQ(vllm->resident(), 2u);
}

// A page missing on arrival that the request names again takes one slot: the
// lifetime caches look a missing page up again as they admit it where it may
// repeat an earlier one (no other test fails when that second lookup is left out).
TEST(PolicyTest, SglangAndVllmAdmitAPageRepeatedInARequestOnce) {
  for (PolicyKind kind : {PolicyKind::kSglang, PolicyKind::kVllm}) {
    auto cache = Make(kind, 100);
    std::vector<PageId> pages;
    for (PageId p = 1; p <= 40; ++p) pages.push_back(p);
    pages.insert(pages.end(), {7, 1, 40, 7});
    EXPECT_EQ(cache->Process(Req(pages, 0, 0)).hits, 0u) << PolicyName(kind);
    EXPECT_EQ(cache->resident(), 40u) << PolicyName(kind);
    EXPECT_EQ(cache->Process(Req(pages, 1, 1)).hits, pages.size()) << PolicyName(kind);
    EXPECT_EQ(cache->resident(), 40u) << PolicyName(kind);
  }
}

// More missing pages than the lifetime caches' filter of a request's missing pages
// has bits (4,096): pages whose bit an other page set are looked up again, found
// missing and admitted; the repeats among them are held once.
TEST(PolicyTest, SglangAndVllmAdmitEveryPageOfARequestLargerThanTheirRepeatFilter) {
  for (PolicyKind kind : {PolicyKind::kSglang, PolicyKind::kVllm}) {
    auto cache = Make(kind, 20000);
    std::vector<PageId> pages;
    for (PageId p = 1; p <= 10000; ++p) pages.push_back(p * 7919);
    pages.insert(pages.end(), {5 * 7919, 9999 * 7919, 5 * 7919});
    EXPECT_EQ(cache->Process(Req(pages, 0, 0)).hits, 0u) << PolicyName(kind);
    EXPECT_EQ(cache->resident(), 10000u) << PolicyName(kind);
    EXPECT_EQ(cache->Process(Req(pages, 1, 1)).hits, pages.size()) << PolicyName(kind);
    EXPECT_EQ(cache->resident(), 10000u) << PolicyName(kind);
  }
}

TEST(PolicyTest, SglangEvictsALeafBeforeItsParent) {
  // Head-first touch order leaves the chain's head (the parent) older than its
  // leaf: lru evicts the parent, sglang only ever evicts a leaf.
  PolicyOptions o;
  o.capacity = 2;
  o.touch_order = TouchOrder::kHeadFirst;
  o.kind = PolicyKind::kSglang;
  auto sglang = std::move(MakePolicyCache(o).value());
  o.kind = PolicyKind::kLru;
  auto lru = std::move(MakePolicyCache(o).value());
  const std::vector<PageId> chain = {10, 11}, other = {12}, head = {10}, leaf = {11};
  for (PolicyCache* c : {sglang.get(), lru.get()}) {
    c->Process(Req(chain, 0, 0));
    c->Process(Req(other, 1, 1));  // needs room for one page
  }
  EXPECT_EQ(sglang->Process(Req(head, 2, 2)).hits, 1u);  // the parent stayed
  EXPECT_EQ(lru->Process(Req(head, 2, 2)).hits, 0u);     // lru took the parent
}

TEST(PolicyTest, SglangLocksRunningPaths) {
  auto sglang = Make(PolicyKind::kSglang, 2);
  const std::vector<PageId> a = {1}, b = {2}, c = {3};
  sglang->Process(Req(a, 0, 100));  // runs until 100: locked
  sglang->Process(Req(b, 1, 1));
  sglang->Process(Req(c, 2, 2));  // evicts 2, the only unlocked leaf, though 1 is older
  EXPECT_EQ(sglang->Process(Req(a, 3, 3)).hits, 1u);
}

TEST(PolicyTest, PriorityEvictsTheLowestLevelFirstAndLruWithin) {
  auto cache = Make(PolicyKind::kPriority, 2);
  SimRequest hi = Req({}, 0, 0);
  const std::vector<PageId> one = {1}, two = {2}, three = {3};
  hi.pages = one;
  hi.priority = 5;
  cache->Process(hi);  // 1 at level 5, oldest
  SimRequest lo = Req(two, 1, 1);
  lo.priority = 0;
  cache->Process(lo);  // 2 at level 0
  SimRequest next = Req(three, 2, 2);
  cache->Process(next);  // evicts 2 (lowest level) although 1 is older
  EXPECT_EQ(cache->Process(hi).hits, 1u);
  EXPECT_EQ(cache->Process(lo).hits, 0u);
}

TEST(PolicyTest, WorkloadAwareKeepsTheCategoryThatComesBack) {
  // Category 1 pages come back every other request; category 0 pages never do.
  // After a warm-up, a new category-0 page is evicted before an older category-1 page.
  auto cache = Make(PolicyKind::kWorkloadAware, 3);
  std::vector<std::vector<PageId>> pages;
  PageId fresh = 100;
  for (int i = 0; i < 200; ++i) pages.push_back({fresh++});
  const std::vector<PageId> back1 = {1}, back2 = {2};
  for (int i = 0; i < 100; ++i) {
    SimRequest once = Req(pages[i], i, i);
    once.category = 0;
    cache->Process(once);
    SimRequest again = Req(i % 2 ? back1 : back2, i + 0.5, i + 0.5);
    again.category = 1;
    cache->Process(again);
  }
  SimRequest again = Req(back1, 200, 200);
  again.category = 1;
  EXPECT_EQ(cache->Process(again).hits, 1u);
  again.pages = back2;
  EXPECT_EQ(cache->Process(again).hits, 1u);
  // LRU at the same size also keeps them (they are recent); at size 2 with two
  // one-shot pages in between, only workload-aware keeps both.
  auto wa = Make(PolicyKind::kWorkloadAware, 2);
  auto lru = Make(PolicyKind::kLru, 2);
  std::uint32_t wa_hits = 0, lru_hits = 0;
  for (int i = 0; i < 100; ++i) {
    for (auto* c : {wa.get(), lru.get()}) {
      SimRequest r = Req(back1, i, i);
      r.category = 1;
      const std::uint32_t h = c->Process(r).hits;
      (c == wa.get() ? wa_hits : lru_hits) += h;
      for (int k = 0; k < 2; ++k) {
        SimRequest once = Req(pages[(2 * i + k) % pages.size()], i + 0.1, i + 0.1);
        once.category = 0;
        c->Process(once);
      }
    }
  }
  EXPECT_EQ(lru_hits, 0u);
  EXPECT_GT(wa_hits, 90u);
}

TEST(PolicyTest, LifetimeComesFromTheEndTimestampElseTheDecodeRate) {
  LifetimeOptions lifetime;
  lifetime.decode_tokens_per_s = 10;
  lifetime.page_tokens = 16;
  Request r;
  r.pages = {1, 2};
  r.timestamp_s = 100;
  r.input_tokens = 40;
  r.output_tokens = 50;  // 90 tokens: 6 pages, 4 of them generated
  SimRequest sim;
  ApplyLifetime(r, r.timestamp_s, lifetime, &sim);
  EXPECT_DOUBLE_EQ(sim.end_s, 105);  // 50 tokens at 10/s
  EXPECT_EQ(sim.output_pages, 4u);
  r.end_timestamp_s = 130;
  ApplyLifetime(r, r.timestamp_s, lifetime, &sim);
  EXPECT_DOUBLE_EQ(sim.end_s, 130);
  ApplyLifetime(r, 7, lifetime, &sim);  // the live agent's clock: the same duration
  EXPECT_DOUBLE_EQ(sim.end_s, 37);
  ApplyLifetime(r, std::nan(""), lifetime, &sim);
  EXPECT_TRUE(std::isnan(sim.end_s));
}

TEST(PolicyTest, RequestClassifierFollowsConversations) {
  RequestClassifier c;
  const std::vector<PageId> t1 = {1, 2, 3}, t2 = {1, 2, 3, 4, 5}, t3 = {1, 2, 3, 4, 5, 6}, other = {1, 2, 9};
  // Full pages only; seen prefixes as the engine gives them (tests/curve/request_classes_test.cc: the rest).
  EXPECT_EQ(RequestClassifier::ClassOfTurn(c.Observe(t1, t1.size(), 0)), "first");
  EXPECT_EQ(RequestClassifier::ClassOfTurn(c.Observe(t2, t2.size(), 3)), "turn2");
  EXPECT_EQ(RequestClassifier::ClassOfTurn(c.Observe(t3, t3.size(), 5)), "turn3-4");
  EXPECT_EQ(RequestClassifier::ClassOfTurn(c.Observe(other, other.size(), 2)), "first");  // shares a prefix only
  EXPECT_EQ(RequestClassifier::ClassOfTurn(9), "turn9+");
}

TEST(PolicyTest, BadOptionsNameTheOption) {
  EXPECT_NE(ParsePolicyList("lru,clock").error().find("unknown policy 'clock'"), std::string::npos);
  EXPECT_NE(ParsePolicyList("lru,,fifo").error().find("empty policy name"), std::string::npos);
  PolicyOptions o;
  o.capacity = 0;
  EXPECT_NE(MakePolicyCache(o).error().find("capacity"), std::string::npos);
  EXPECT_FALSE(ParsePriorityRules("a=high").ok());
  const Prepared p = Prepare(RandomTrace({1, 20, true, false}), TouchOrder::kTailFirst, {});
  StoredTrace trace = p.trace;
  const base::Status s = trace.AssignPriorities(ParsePriorityRules("nobody=3").value());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("tenant 'nobody'"), std::string::npos);
  EXPECT_EQ(ParsePolicyList("all").value().size(), std::size(kAllPolicies));
}

}  // namespace
}  // namespace kvwatch::curve
