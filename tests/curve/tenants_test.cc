// curve/tenants.h against deliberately simple oracles: per-capacity list-based LRU
// caches with the prefix rule (both touch orders) that attribute each hit to its
// request's group, single-tenant replays for the isolated curves, a Mattson list
// for the group decomposition and the evictor attribution, and a hand-worked
// trace where a single-turn flood evicts a conversation.
#include "curve/tenants.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "curve/curve_accumulator.h"
#include "curve/sliding_windows.h"

namespace kvwatch::curve {
namespace {

struct TraceRequest {
  std::string tenant;
  std::vector<PageId> pages;
};

// Multi-tenant trace with shared prefixes: each tenant has a system prompt, some
// tenants share a global prefix, conversations extend their previous prompt, and
// one tenant floods single-turn requests.
std::vector<TraceRequest> RandomTrace(std::uint32_t seed, std::size_t requests, std::size_t tenants) {
  std::mt19937_64 rng(seed);
  PageId next = 1;
  std::vector<PageId> global;
  for (int i = 0; i < 3; ++i) global.push_back(next++);
  std::vector<std::vector<PageId>> system(tenants);
  for (std::size_t t = 0; t < tenants; ++t) {
    if (t % 2 == 0) system[t] = global;  // shared across tenants
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) system[t].push_back(next++);
  }
  struct Conversation {
    std::size_t tenant;
    std::vector<PageId> prompt;
  };
  std::vector<Conversation> open;
  std::vector<TraceRequest> out;
  for (std::size_t r = 0; r < requests; ++r) {
    const std::uint64_t pick = rng() % 10;
    if (pick < 4 && !open.empty()) {
      Conversation& c = open[rng() % open.size()];
      const int add = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < add; ++i) c.prompt.push_back(next++);
      out.push_back({"tenant-" + std::to_string(c.tenant), c.prompt});
      if (c.prompt.size() > 40) c = open.back(), open.pop_back();
      continue;
    }
    const std::size_t t = pick < 7 ? rng() % tenants : tenants - 1;  // the last tenant floods
    Conversation c{t, system[t]};
    const int add = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < add; ++i) c.prompt.push_back(next++);
    out.push_back({"tenant-" + std::to_string(t), c.prompt});
    if (t != tenants - 1 && open.size() < 12) open.push_back(std::move(c));
  }
  return out;
}

// A list-based LRU cache of `capacity` pages with the prefix rule: hits stop at
// the first page not in the cache (read before the request touches anything),
// then every page is referenced once in the touch order.
class OracleLru {
 public:
  explicit OracleLru(std::size_t capacity) : capacity_(capacity) {}
  std::uint32_t Process(const std::vector<PageId>& pages, TouchOrder order) {
    std::uint32_t hits = 0;
    for (PageId p : pages) {
      if (where_.count(p) == 0) break;
      ++hits;
    }
    auto touch = [&](PageId p) {
      if (auto it = where_.find(p); it != where_.end()) list_.erase(it->second);
      list_.push_front(p);
      where_[p] = list_.begin();
      if (list_.size() > capacity_) {
        where_.erase(list_.back());
        list_.pop_back();
      }
    };
    if (order == TouchOrder::kTailFirst) {
      for (auto it = pages.rbegin(); it != pages.rend(); ++it) touch(*it);
    } else {
      for (PageId p : pages) touch(p);
    }
    return hits;
  }

 private:
  std::size_t capacity_;
  std::list<PageId> list_;
  std::unordered_map<PageId, std::list<PageId>::iterator> where_;
};

// The Mattson stack as a plain list (front = most recent) with the groups of each
// page's latest reference: d(p) and d_g(p) by counting.
class OracleStack {
 public:
  struct Entry {
    PageId page;
    std::uint32_t group[2];
  };
  // Distance of p and its per-group decomposition; false when never seen.
  bool Decompose(PageId p, std::uint32_t* d, std::vector<std::uint32_t> parts[2], std::uint32_t groups[2]) const {
    parts[0].assign(groups[0], 0);
    parts[1].assign(groups[1], 0);
    std::uint32_t n = 0;
    for (const Entry& e : list_) {
      if (e.page == p) {
        *d = n;
        return true;
      }
      ++n;
      ++parts[0][e.group[0]];
      ++parts[1][e.group[1]];
    }
    return false;
  }
  void Touch(PageId p, std::uint32_t tenant, std::uint32_t cls) {
    list_.remove_if([&](const Entry& e) { return e.page == p; });
    list_.push_front(Entry{p, {tenant, cls}});
  }
  void Forget(PageId p) {
    list_.remove_if([&](const Entry& e) { return e.page == p; });
  }
  void Truncate(std::size_t n) {
    while (list_.size() > n) list_.pop_back();
  }

 private:
  std::list<Entry> list_;
};

struct Labelled {
  std::vector<std::uint32_t> tenant, cls;
};

// Runs the folders over the trace once (no automatic refresh) and returns each
// request's groups.
Labelled Label(const std::vector<TraceRequest>& trace, TenantFolder* tenants, TenantFolder* classes) {
  RequestClassifier classifier;
  std::set<PageId> seen;  // the engine's view: each request's unlimited hits
  Labelled out;
  Request req;
  for (const TraceRequest& r : trace) {
    req.request_class.clear();
    out.tenant.push_back(tenants->Observe(r.tenant, r.pages.size()));
    const std::uint32_t turn = DerivedTurn(req, r.pages, classifier);
    out.cls.push_back(classes->Observe(ClassOf(req, turn), r.pages.size()));
    std::uint32_t hits = 0;
    while (hits < r.pages.size() && seen.count(r.pages[hits]) != 0) ++hits;
    seen.insert(r.pages.begin(), r.pages.end());
    RememberClass(req, r.pages, turn, 16, hits, &classifier);
  }
  return out;
}

const std::vector<std::uint64_t> kCapacities = {1, 2, 4, 7, 12, 20, 33, 60, 100, 180};

void CheckAgainstOracles(std::uint32_t seed, TouchOrder order, std::uint32_t top_k) {
  SCOPED_TRACE("seed " + std::to_string(seed) + " top_k " + std::to_string(top_k));
  const auto trace = RandomTrace(seed, 600, 6);
  TenantFolder tenant_folder({.top_k = top_k, .table_size = 64, .refresh_every = 0});
  TenantFolder class_folder({.top_k = 8, .table_size = 64, .refresh_every = 0});
  const Labelled groups = Label(trace, &tenant_folder, &class_folder);

  const std::vector<std::uint64_t> bounds = LogBucketBounds(1024, 4);
  GroupLayout layout;
  layout.tenant_groups = tenant_folder.groups();
  layout.class_groups = class_folder.groups();
  layout.bounds = &bounds;
  layout.capacities = kCapacities;
  layout.isolated = true;
  EngineOptions base;
  base.touch_order = order;
  StackDistanceEngine shared(GroupTracker::SharedEngineOptions(base, layout));
  GroupTracker tracker(&layout, base);
  GroupCurves curves(&layout);
  RequestOutcome outcome;
  CurveAccumulator whole;

  // Oracles: per capacity a shared cache, and one cache per tenant group (isolated).
  std::uint32_t ng[2] = {layout.tenant_groups, layout.class_groups};
  std::vector<OracleLru> shared_lru;
  std::vector<std::vector<OracleLru>> isolated_lru(layout.tenant_groups);
  for (std::uint64_t c : kCapacities) {
    shared_lru.emplace_back(c);
    for (auto& v : isolated_lru) v.emplace_back(c);
  }
  std::vector<std::vector<std::uint64_t>> want_hits[2],
      want_isolated(layout.tenant_groups, std::vector<std::uint64_t>(kCapacities.size()));
  std::vector<std::uint64_t> want_unlimited[2];
  std::vector<double> want_blame[2];
  for (int d = 0; d < 2; ++d) {
    want_hits[d].assign(ng[d], std::vector<std::uint64_t>(kCapacities.size()));
    want_unlimited[d].assign(ng[d], 0);
    want_blame[d].assign(kCapacities.size() * ng[d] * ng[d], 0);
  }
  OracleStack stack;
  std::vector<std::uint32_t> parts[2];

  for (std::size_t r = 0; r < trace.size(); ++r) {
    const auto& pages = trace[r].pages;
    const std::uint32_t g[2] = {groups.tenant[r], groups.cls[r]};
    // Oracle: stack distances and decompositions in the arrival state.
    std::vector<std::uint32_t> dist(pages.size());
    std::vector<std::vector<std::uint32_t>> dec[2];
    std::uint32_t unlimited = 0;
    bool cold = false;
    for (std::size_t i = 0; i < pages.size(); ++i) {
      std::vector<std::uint32_t> p2[2];
      if (!stack.Decompose(pages[i], &dist[i], p2, ng)) {
        dist[i] = kCold;
        cold = true;
      }
      if (!cold) ++unlimited;
      dec[0].push_back(p2[0]);
      dec[1].push_back(p2[1]);
    }
    for (int d = 0; d < 2; ++d) want_unlimited[d][g[d]] += unlimited;
    for (std::size_t c = 0; c < kCapacities.size(); ++c) {
      const std::uint32_t h = shared_lru[c].Process(pages, order);
      for (int d = 0; d < 2; ++d) want_hits[d][g[d]][c] += h;
      want_isolated[g[0]][c] += isolated_lru[g[0]][c].Process(pages, order);
      // Brute-force attribution: each page missing at C but hitting at unlimited is
      // split by the decomposition of the first page reaching its prefix maximum.
      std::uint32_t m = 0;
      std::size_t setter = 0;
      for (std::size_t i = 0; i < unlimited; ++i) {
        if (i == 0 || dist[i] > m) {
          m = dist[i];
          setter = i;
        }
        if (m < kCapacities[c]) continue;
        for (int d = 0; d < 2; ++d) {
          for (std::uint32_t e = 0; e < ng[d]; ++e) {
            want_blame[d][(c * ng[d] + g[d]) * ng[d] + e] += static_cast<double>(dec[d][setter][e]) / m;
          }
        }
      }
    }
    auto touch = [&](PageId p) { stack.Touch(p, g[0], g[1]); };
    if (order == TouchOrder::kTailFirst) {
      for (auto it = pages.rbegin(); it != pages.rend(); ++it) touch(*it);
    } else {
      for (PageId p : pages) touch(p);
    }

    // The library.
    const std::uint8_t tags[2] = {static_cast<std::uint8_t>(g[0]), static_cast<std::uint8_t>(g[1])};
    shared.Process(pages, tags, &outcome);
    ASSERT_EQ(outcome.distance, dist) << "request " << r;
    whole.Add(outcome);
    Request req;
    curves.Add(tracker.Observe(g[0], g[1], req, pages, outcome));
  }

  for (std::size_t c = 0; c < kCapacities.size(); ++c) {
    SCOPED_TRACE("capacity " + std::to_string(kCapacities[c]));
    for (int d = 0; d < 2; ++d) {
      std::uint64_t sum_hits = 0, sum_refs = 0;
      for (std::uint32_t x = 0; x < ng[d]; ++x) {
        EXPECT_EQ(curves.shared_hits(d, x, c), want_hits[d][x][c]) << "dimension " << d << " group " << x;
        EXPECT_EQ(curves.capacity_misses(d, x, c), want_unlimited[d][x] - want_hits[d][x][c]);
        double row = static_cast<double>(curves.unattributed(d, x, c));
        for (std::uint32_t e = 0; e < ng[d]; ++e) {
          const double want = want_blame[d][(c * ng[d] + x) * ng[d] + e];
          EXPECT_NEAR(curves.evicted_by(d, c, x, e), want, 1e-6 * (1 + want)) << "victim " << x << " evictor " << e;
          row += curves.evicted_by(d, c, x, e);
        }
        EXPECT_NEAR(row, static_cast<double>(curves.capacity_misses(d, x, c)), 1e-6);
        sum_hits += curves.shared_hits(d, x, c);
        sum_refs += curves.page_refs(d, x);
        // The bucketed curve agrees at every bound that is a configured capacity.
        const auto& b = curves.shared(d, x).bounds();
        const auto at = std::find(b.begin(), b.end(), kCapacities[c]);
        if (at != b.end()) {
          EXPECT_EQ(curves.shared(d, x).PageHitsAt(static_cast<std::size_t>(at - b.begin())), want_hits[d][x][c]);
        }
      }
      // Folding keeps the totals: the groups sum to the whole stream.
      EXPECT_EQ(sum_hits, whole.PageHits(kCapacities[c]));
      EXPECT_EQ(sum_refs, whole.page_refs());
    }
    for (std::uint32_t x = 0; x < ng[0]; ++x) {
      EXPECT_EQ(curves.isolated_hits(x, c), want_isolated[x][c]) << "tenant group " << x;
      EXPECT_EQ(curves.lost_hits(x, c),
                static_cast<std::int64_t>(want_isolated[x][c]) - static_cast<std::int64_t>(want_hits[0][x][c]));
    }
  }
}

TEST(TenantCurvesTest, SharedIsolatedAndAttributionMatchOracles) {
  for (TouchOrder order : {TouchOrder::kTailFirst, TouchOrder::kHeadFirst}) {
    for (std::uint32_t seed : {1u, 2u, 3u}) {
      CheckAgainstOracles(seed, order, 8);       // every tenant its own group
      CheckAgainstOracles(seed + 10, order, 3);  // folded into "other"
    }
  }
}

// Isolated curves equal the engine run on that tenant's requests alone.
TEST(TenantCurvesTest, IsolatedEqualsSingleTenantReplay) {
  const auto trace = RandomTrace(7, 500, 4);
  TenantFolder folder({.top_k = 8});
  const std::vector<std::uint64_t> bounds = LogBucketBounds(512, 8);
  GroupLayout layout;
  layout.tenant_groups = folder.groups();
  layout.class_groups = 1;
  layout.bounds = &bounds;
  layout.capacities = {3, 30, 300};
  layout.isolated = true;
  StackDistanceEngine shared(GroupTracker::SharedEngineOptions({}, layout));
  GroupTracker tracker(&layout);
  GroupCurves curves(&layout);
  std::map<std::uint32_t, std::vector<std::vector<PageId>>> by_group;
  RequestOutcome out;
  for (const auto& r : trace) {
    const std::uint32_t g = folder.Observe(r.tenant, r.pages.size());
    by_group[g].push_back(r.pages);
    const std::uint8_t tags[2] = {static_cast<std::uint8_t>(g), 0};
    shared.Process(r.pages, tags, &out);
    curves.Add(tracker.Observe(g, 0, Request{}, r.pages, out));
  }
  for (const auto& [g, requests] : by_group) {
    StackDistanceEngine alone;
    BucketedCurve want(&bounds, 1.0);
    CurveAccumulator exact(1.0);  // exact at every capacity (buckets only at bounds)
    for (const auto& pages : requests) {
      alone.Process(pages, &out);
      want.Add(out);
      exact.Add(out);
    }
    EXPECT_EQ(curves.isolated(g).hits(), want.hits()) << folder.label(g);
    EXPECT_EQ(curves.isolated(g).required(), want.required()) << folder.label(g);
    EXPECT_EQ(curves.isolated(g).page_refs(), want.page_refs());
    for (std::size_t c = 0; c < layout.capacities.size(); ++c) {
      EXPECT_EQ(curves.isolated_hits(g, c), exact.PageHits(layout.capacities[c]));
    }
  }
}

// A conversation's first turn [1 2 3] (tail-first: 1 is most recent), then a flood
// of single-turn requests [10] [11] [12] from another tenant, then the second turn
// [1 2 3 4]. Arrival distances of the second turn: d(1) = 3 ({12,11,10}),
// d(2) = 4 ({12,11,10,1}), d(3) = 5 ({12,11,10,1,2}), 4 cold; prefix maxima 3 4 5.
// At C = 3 all three reusable pages miss: page 0 is set by itself (3 api of 3),
// page 1 by page 1 (3 api + 1 chat of 4), page 2 by page 2 (3 api + 2 chat of 5):
//   api: 1 + 3/4 + 3/5 = 2.35, chat: 1/4 + 2/5 = 0.65.
// At C = 4 page 0 hits; api: 3/4 + 3/5 = 1.35, chat: 0.65.
// Alone, the conversation hits all three at both capacities: lost hits 3 and 2.
// By class every earlier reference is class "first" (each flood request starts a
// new chain), and the second turn is "turn2": "first" evicts "turn2".
TEST(TenantCurvesTest, FloodEvictsConversationHandWorked) {
  TenantFolder tenants({.top_k = 8});
  TenantFolder classes({.top_k = 8});
  RequestClassifier classifier;
  GroupLayout layout;
  layout.tenant_groups = tenants.groups();
  layout.class_groups = classes.groups();
  layout.capacities = {3, 4};
  layout.isolated = true;
  StackDistanceEngine shared(GroupTracker::SharedEngineOptions({}, layout));
  GroupTracker tracker(&layout);
  GroupCurves curves(&layout);
  RequestOutcome out;
  const std::vector<std::pair<std::string, std::vector<PageId>>> trace = {
      {"chat", {1, 2, 3}}, {"api", {10}}, {"api", {11}}, {"api", {12}}, {"chat", {1, 2, 3, 4}}};
  for (const auto& [tenant, pages] : trace) {
    Request req;
    req.tenant = tenant;
    const std::uint32_t t = tenants.Observe(tenant, pages.size());
    const std::uint32_t turn = DerivedTurn(req, pages, classifier);
    const std::uint32_t c = classes.Observe(ClassOf(req, turn), pages.size());
    const std::uint8_t tags[2] = {static_cast<std::uint8_t>(t), static_cast<std::uint8_t>(c)};
    shared.Process(pages, tags, &out);
    RememberClass(req, pages, turn, 16, out.unlimited_hits, &classifier);
    curves.Add(tracker.Observe(t, c, req, pages, out));
  }
  const std::uint32_t chat = tenants.GroupOf("chat"), api = tenants.GroupOf("api");
  const std::uint32_t first = classes.GroupOf("first"), turn2 = classes.GroupOf("turn2");
  ASSERT_NE(chat, api);
  ASSERT_NE(first, turn2);
  EXPECT_EQ(out.distance, (std::vector<std::uint32_t>{3, 4, 5, kCold}));
  EXPECT_EQ(curves.capacity_misses(0, chat, 0), 3u);
  EXPECT_EQ(curves.capacity_misses(0, chat, 1), 2u);
  EXPECT_NEAR(curves.evicted_by(0, 0, chat, api), 2.35, 1e-12);
  EXPECT_NEAR(curves.evicted_by(0, 0, chat, chat), 0.65, 1e-12);
  EXPECT_NEAR(curves.evicted_by(0, 1, chat, api), 1.35, 1e-12);
  EXPECT_NEAR(curves.evicted_by(0, 1, chat, chat), 0.65, 1e-12);
  EXPECT_EQ(curves.capacity_misses(0, api, 0), 0u);
  EXPECT_EQ(curves.shared_hits(0, chat, 0), 0u);
  EXPECT_EQ(curves.shared_hits(0, chat, 1), 1u);
  EXPECT_EQ(curves.isolated_hits(chat, 0), 3u);
  EXPECT_EQ(curves.lost_hits(chat, 0), 3);
  EXPECT_EQ(curves.lost_hits(chat, 1), 2);
  EXPECT_EQ(curves.lost_hits(api, 0), 0);
  EXPECT_NEAR(curves.evicted_by(1, 0, turn2, first), 3.0, 1e-12);
  EXPECT_NEAR(curves.evicted_by(1, 1, turn2, first), 2.0, 1e-12);
  EXPECT_EQ(curves.capacity_misses(1, first, 0), 0u);
}

// The decomposition sums to d(p) and equals a brute-force count, through
// evictions from tracking, Forget, compactions and a checkpoint round trip.
TEST(GroupDecompositionTest, MatchesBruteForce) {
  for (TouchOrder order : {TouchOrder::kTailFirst, TouchOrder::kHeadFirst}) {
    std::mt19937_64 rng(42);
    EngineOptions options;
    options.touch_order = order;
    options.max_pages = 300;
    options.group_dimensions = {3, 5};
    auto engine = std::make_unique<StackDistanceEngine>(options);
    OracleStack stack;
    RequestOutcome out;
    std::uint32_t ng[2] = {3, 5};
    std::vector<std::uint32_t> got(8);
    std::vector<std::uint32_t> parts[2];
    for (int r = 0; r < 6000; ++r) {
      std::vector<PageId> pages;
      const PageId base = rng() % 500;
      const int n = 1 + static_cast<int>(rng() % 12);
      for (int i = 0; i < n; ++i) pages.push_back(base * 8 + static_cast<PageId>(i));
      // A page twice in one request: the engine gathers a request's moves of the
      // group tree per pair of blocks and previous owners, and the repeat's
      // previous owner is the request itself.
      if (rng() % 4 == 0) pages.push_back(pages[rng() % pages.size()]);
      std::vector<std::vector<std::uint32_t>> want_parts;  // per page: both dimensions
      for (PageId p : pages) {
        std::uint32_t d = 0;
        const bool tracked = stack.Decompose(p, &d, parts, ng);
        want_parts.push_back(parts[0]);
        want_parts.back().insert(want_parts.back().end(), parts[1].begin(), parts[1].end());
        ASSERT_EQ(engine->DistanceByGroup(p, got), tracked) << "request " << r;
        if (!tracked) continue;
        std::uint32_t sum[2] = {0, 0};
        for (std::uint32_t g = 0; g < 3; ++g) sum[0] += got[g];
        for (std::uint32_t g = 0; g < 5; ++g) sum[1] += got[3 + g];
        ASSERT_EQ(sum[0], d);
        ASSERT_EQ(sum[1], d);
        ASSERT_EQ(std::vector<std::uint32_t>(got.begin(), got.begin() + 3), parts[0]) << "request " << r;
        ASSERT_EQ(std::vector<std::uint32_t>(got.begin() + 3, got.end()), parts[1]) << "request " << r;
      }
      const std::uint8_t g[2] = {static_cast<std::uint8_t>(rng() % 3), static_cast<std::uint8_t>(rng() % 5)};
      engine->Process(pages, g, &out);
      // The setters reported in the outcome carry the same decomposition.
      ASSERT_EQ(out.group_distance.size(), out.decomposed.size() * 8);
      for (std::size_t k = 0; k < out.decomposed.size(); ++k) {
        ASSERT_EQ(
            std::vector<std::uint32_t>(out.group_distance.begin() + 8 * k, out.group_distance.begin() + 8 * (k + 1)),
            want_parts[out.decomposed[k]])
            << "request " << r << " setter " << k;
      }
      if (order == TouchOrder::kTailFirst) {
        for (auto it = pages.rbegin(); it != pages.rend(); ++it) stack.Touch(*it, g[0], g[1]);
      } else {
        for (PageId p : pages) stack.Touch(p, g[0], g[1]);
      }
      stack.Truncate(options.max_pages);
      if (r % 97 == 0) {
        const PageId victim = (rng() % 500) * 8;
        engine->Forget(victim);
        stack.Forget(victim);
      }
      if (r % 2500 == 2499) {  // rarely enough that compactions happen in between
        auto restored = std::make_unique<StackDistanceEngine>();
        ASSERT_TRUE(restored->Deserialize(engine->Serialize()));
        EXPECT_EQ(restored->total_groups(), 8u);
        engine = std::move(restored);
      }
    }
  }
}

TEST(GroupDecompositionTest, OffByDefaultAndPlainSerializationUnchanged) {
  StackDistanceEngine engine;
  RequestOutcome out;
  const std::vector<PageId> pages = {1, 2, 3};
  const std::uint8_t g[2] = {1, 1};
  engine.Process(pages, g, &out);
  engine.Process(pages, &out);
  EXPECT_EQ(engine.total_groups(), 0u);
  EXPECT_TRUE(out.decomposed.empty());
  std::vector<std::uint32_t> got(2);
  EXPECT_FALSE(engine.DistanceByGroup(1, got));
  const auto bytes = engine.Serialize();
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "KVWSDE01");
}

TEST(TenantFolderTest, SanitizesAndBoundsLabels) {
  EXPECT_EQ(SanitizeLabel(""), "none");
  EXPECT_EQ(SanitizeLabel("acme corp/α"), "acme_corp___");
  EXPECT_EQ(SanitizeLabel("a.b:c-d_e9"), "a.b:c-d_e9");
  EXPECT_EQ(SanitizeLabel("turn9+"), "turn9+");  // the built-in classes read as they are
  EXPECT_EQ(SanitizeLabel("other"), "_other");
  EXPECT_EQ(SanitizeLabel(std::string(200, 'x')).size(), kMaxLabelBytes);
}

TEST(TenantFolderTest, HundredThousandNamesStayBounded) {
  TenantFolder folder({.top_k = 8, .table_size = 1024, .refresh_every = 5000});
  std::mt19937_64 rng(5);
  std::size_t memory_after_warmup = 0;
  std::map<std::uint32_t, std::string> heavy_slot;
  for (int i = 0; i < 300000; ++i) {
    std::string name;
    if (i % 3 == 0) {
      name = "heavy-" + std::to_string(rng() % 4);  // four heavy hitters, 1/12 of the volume each
    } else {
      name = "tenant-" + std::to_string(i) + std::string(80, 'p');  // 200,000 distinct, long names
    }
    const std::uint32_t g = folder.Observe(name, 10);
    ASSERT_LE(g, folder.other());
    if (i == 20000) memory_after_warmup = folder.MemoryBytes();
  }
  folder.Refresh();
  std::set<std::string> labels;
  for (std::uint32_t g = 0; g < folder.groups(); ++g) {
    if (!folder.label(g).empty()) labels.insert(folder.label(g));
  }
  EXPECT_LE(labels.size(), 9u);
  EXPECT_LE(folder.distinct_tracked(), 1024u);
  EXPECT_LE(folder.MemoryBytes(), 2 * memory_after_warmup);
  EXPECT_LT(folder.MemoryBytes(), 512u * 1024u);
  // The heavy hitters own slots, and keep them across refreshes.
  for (int h = 0; h < 4; ++h) {
    const std::string name = "heavy-" + std::to_string(h);
    const std::uint32_t g = folder.GroupOf(name);
    ASSERT_NE(g, folder.other()) << name;
    EXPECT_EQ(folder.label(g), name);
    heavy_slot[g] = name;
  }
  for (int i = 0; i < 20000; ++i)
    folder.Observe(i % 2 ? "heavy-" + std::to_string(i % 4) : "x" + std::to_string(i), 10);
  for (const auto& [g, name] : heavy_slot) EXPECT_EQ(folder.GroupOf(name), g);
}

TEST(TenantFolderTest, SlotsAreReusedOnlyAfterTheOwnerLeaves) {
  TenantFolder folder({.top_k = 2, .table_size = 8, .refresh_every = 0});
  EXPECT_EQ(folder.Observe("a", 1), 0u);  // free slots are taken at once
  EXPECT_EQ(folder.Observe("b", 1), 1u);
  EXPECT_EQ(folder.Observe("c", 100), 2u);  // no free slot: other
  EXPECT_EQ(folder.label(2), "other");
  folder.Observe("a", 50);
  const auto changed = folder.Refresh();  // top 2: c (100), a (51): b leaves, c takes its slot
  EXPECT_EQ(changed, (std::vector<std::uint32_t>{1}));
  EXPECT_EQ(folder.GroupOf("a"), 0u);
  EXPECT_EQ(folder.GroupOf("c"), 1u);
  EXPECT_EQ(folder.GroupOf("b"), 2u);
  EXPECT_TRUE(folder.Refresh().empty());  // nothing changed: no relabel
}

TEST(FootprintTest, BucketsRunningKvAndQuantiles) {
  EXPECT_EQ(FootprintBucket(1), 0u);
  EXPECT_EQ(FootprintBucket(2), 1u);
  EXPECT_EQ(FootprintBucket(3), 2u);
  EXPECT_EQ(FootprintBucket(1024), 10u);
  EXPECT_EQ(FootprintBucket(1025), 11u);
  // Two requests of 100 and 50 bytes over [0, 10) and [5, 20): level 100 on
  // [0, 5), 150 on [5, 10), 50 on [10, 20): peak 150, mean (500 + 750 + 500) / 20.
  RunningKv kv;
  kv.Add(0, 10, 100);
  kv.Add(5, 20, 50);
  kv.Finish();
  EXPECT_DOUBLE_EQ(kv.peak_bytes(), 150);
  EXPECT_DOUBLE_EQ(kv.mean_bytes(), 1750.0 / 20);
  std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_EQ(NearestRankQuantile(&v, 0.5), 3);
  EXPECT_EQ(NearestRankQuantile(&v, 1.0), 5);
  EXPECT_EQ(NearestRankQuantile(&v, 0.2), 1);
}

TEST(GroupCurvesTest, FootprintPerClassAndWindowMerge) {
  GroupLayout layout;
  layout.tenant_groups = 2;
  layout.class_groups = 2;
  layout.capacities = {2};
  layout.bytes_per_token = 1000;
  GroupTracker tracker(&layout);
  GroupCurves a(&layout), b(&layout), sum(&layout);
  StackDistanceEngine engine(GroupTracker::SharedEngineOptions({}, layout));
  RequestOutcome out;
  Request req;
  req.input_tokens = 1000;
  req.output_tokens = 48;  // 1,048,000 bytes: bucket 20 (2^20 = 1,048,576)
  const std::vector<PageId> pages = {1, 2};
  const std::uint8_t g[2] = {0, 1};
  engine.Process(pages, g, &out);
  a.Add(tracker.Observe(0, 1, req, pages, out));
  engine.Process(pages, g, &out);
  b.Add(tracker.Observe(0, 1, req, pages, out));
  sum.Merge(a);
  sum.Merge(b);
  EXPECT_EQ(sum.footprint_buckets(1)[20], 2u);
  EXPECT_EQ(sum.footprint_buckets(0)[20], 0u);
  EXPECT_DOUBLE_EQ(sum.footprint_sum(1), 2 * 1048000.0);
  EXPECT_EQ(sum.shared_hits(0, 0, 0), 2u);
  EXPECT_EQ(sum.requests(1, 1), 2u);
  sum.Clear();
  EXPECT_EQ(sum.requests(1, 1), 0u);
}

// GroupCurves as a SlidingWindows slice (as WindowedCurves uses BucketedCurve), and
// the checkpoint encodings of GroupCurves and TenantFolder.
TEST(GroupCurvesTest, WindowsAndCheckpoints) {
  const auto trace = RandomTrace(9, 300, 4);
  const std::vector<std::uint64_t> bounds = LogBucketBounds(256, 4);
  TenantFolder folder({.top_k = 2, .table_size = 16, .refresh_every = 50});
  GroupLayout layout;
  layout.tenant_groups = folder.groups();
  layout.class_groups = 1;
  layout.bounds = &bounds;
  layout.capacities = {4, 16, 64};
  layout.isolated = true;
  StackDistanceEngine shared(GroupTracker::SharedEngineOptions({}, layout));
  GroupTracker tracker(&layout);
  SlidingWindows<GroupCurves> windows({60.0, 3600.0}, GroupCurves(&layout));
  GroupCurves whole(&layout);
  RequestOutcome out;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const std::uint32_t g = folder.Observe(trace[i].tenant, trace[i].pages.size());
    for (std::uint32_t changed : folder.changed()) tracker.ResetTenant(changed);
    folder.ClearChanged();
    const std::uint8_t tags[2] = {static_cast<std::uint8_t>(g), 0};
    shared.Process(trace[i].pages, tags, &out);
    const GroupRequest& r = tracker.Observe(g, 0, Request{}, trace[i].pages, out);
    windows.Add(static_cast<double>(i), [&](GroupCurves& slice) { slice.Add(r); });
    whole.Add(r);
  }
  // The hour window holds everything; the minute window only the last minute.
  const GroupCurves hour = windows.Window(1, GroupCurves(&layout));
  const GroupCurves minute = windows.Window(0, GroupCurves(&layout));
  std::uint64_t hour_refs = 0, minute_requests = 0;
  for (std::uint32_t g = 0; g < layout.tenant_groups; ++g) {
    EXPECT_EQ(hour.shared_hits(0, g, 1), whole.shared_hits(0, g, 1));
    EXPECT_NEAR(hour.evicted_by(0, 2, g, 0), whole.evicted_by(0, 2, g, 0), 1e-9);  // summed in another order
    EXPECT_EQ(hour.shared(0, g).hits(), whole.shared(0, g).hits());
    hour_refs += hour.page_refs(0, g);
    minute_requests += minute.requests(0, g);
  }
  EXPECT_GT(hour_refs, 0u);
  EXPECT_GE(minute_requests, 59u);
  EXPECT_LE(minute_requests, 60u);

  std::vector<std::uint8_t> bytes;
  whole.Serialize(&bytes);
  folder.Serialize(&bytes);
  GroupCurves restored(&layout);
  TenantFolder restored_folder({.top_k = 2, .table_size = 16, .refresh_every = 50});
  std::span<const std::uint8_t> in(bytes);
  ASSERT_TRUE(restored.Deserialize(&in));
  ASSERT_TRUE(restored_folder.Deserialize(&in));
  EXPECT_TRUE(in.empty());
  for (std::uint32_t g = 0; g < layout.tenant_groups; ++g) {
    for (std::size_t c = 0; c < 3; ++c) {
      EXPECT_EQ(restored.capacity_misses(0, g, c), whole.capacity_misses(0, g, c));
      EXPECT_EQ(restored.lost_hits(g, c), whole.lost_hits(g, c));
      for (std::uint32_t e = 0; e < layout.tenant_groups; ++e) {
        EXPECT_EQ(restored.evicted_by(0, c, g, e), whole.evicted_by(0, c, g, e));
      }
    }
    EXPECT_EQ(restored.isolated(g).required(), whole.isolated(g).required());
    EXPECT_EQ(restored_folder.label(g), folder.label(g));
  }
  for (int t = 0; t < 4; ++t) {
    const std::string name = "tenant-" + std::to_string(t);
    EXPECT_EQ(restored_folder.GroupOf(name), folder.GroupOf(name));
    EXPECT_EQ(restored_folder.Volume(name), folder.Volume(name));
  }
  EXPECT_EQ(restored_folder.observations(), folder.observations());
  std::span<const std::uint8_t> truncated(bytes.data(), bytes.size() / 2);
  GroupCurves broken(&layout);
  EXPECT_FALSE(broken.Deserialize(&truncated) && restored_folder.Deserialize(&truncated));
}

}  // namespace
}  // namespace kvwatch::curve
