// Tests of curve/hybrid_engine.h: hand-worked examples of the hybrid hit rule
// (full + sliding window, full + chunked local, full + linear), a brute-force
// oracle (explicit LRU pool, vLLM's per-group rules) at every capacity on
// generated traces, and today's curve for a full-attention model.
#include "curve/hybrid_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <list>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "curve/curve_accumulator.h"
#include "curve/hybrid_sim.h"
#include "curve/stack_distance.h"

namespace kvwatch::curve {
namespace {

// The pages of a request that hit at capacity `units` (prefix_max[i] < units).
std::uint32_t HitsAt(const RequestOutcome& out, std::uint64_t units) {
  std::uint32_t hits = 0;
  for (std::size_t i = 0; i < out.size(); ++i) hits += out.prefix_max[i] < units;
  return hits;
}

HybridGroup Full(std::uint64_t bytes = 100) { return {KvGroupKind::kFull, 0, bytes}; }
HybridGroup Sliding(std::uint64_t w, std::uint64_t bytes = 100) { return {KvGroupKind::kSlidingWindow, w, bytes}; }
HybridGroup Chunked(std::uint64_t c, std::uint64_t bytes = 100) { return {KvGroupKind::kChunkedLocal, c, bytes}; }
HybridGroup Linear(std::uint64_t bytes) { return {KvGroupKind::kLinear, 0, bytes}; }

// The hand-worked examples reference every page at finish (no early frees)
// unless they say otherwise.
HybridEngineOptions Options(std::vector<HybridGroup> groups, TouchOrder order, bool early_free = false) {
  HybridEngineOptions o;
  o.groups = std::move(groups);
  o.page_tokens = 16;
  o.touch_order = order;
  o.early_free = early_free;
  return o;
}

// --- The rule of each group ---------------------------------------------------

TEST(HybridRuleTest, EachGroupNeedsThePagesVllmLooksUp) {
  // Sliding window 128 tokens at 16 per page: cdiv(127, 16) = 8 pages before L.
  EXPECT_EQ(RequiredFrom(Sliding(128), 16, 20), 12u);
  EXPECT_EQ(RequiredFrom(Sliding(128), 16, 5), 0u);
  // Window 17: cdiv(16, 16) = 1 page.
  EXPECT_EQ(RequiredFrom(Sliding(17), 16, 20), 19u);
  // Chunk 64 tokens = 4 pages: L = 6 falls in the chunk of pages [4, 8); L = 8
  // starts a chunk and needs nothing.
  EXPECT_EQ(RequiredFrom(Chunked(64), 16, 6), 4u);
  EXPECT_EQ(RequiredFrom(Chunked(64), 16, 8), 8u);
  EXPECT_EQ(RequiredFrom(Chunked(64), 16, 3), 0u);
  // vLLM's example: chunk 8, block 4, max length 15 tokens... in whole pages,
  // L = 3 pages (12 tokens) falls in the chunk starting at token 8: page 2.
  EXPECT_FALSE(HybridOptionsFor(ModelSpec{}, 1, 4, TouchOrder::kTailFirst).ok());  // no groups: an error
  EXPECT_EQ(RequiredFrom({KvGroupKind::kChunkedLocal, 8, 1}, 4, 3), 2u);
  EXPECT_EQ(RequiredFrom(Linear(1), 16, 7), 6u);
  EXPECT_EQ(RequiredFrom(Full(), 16, 7), 0u);
}

// --- Hand-worked examples (capacities in units of 100 bytes) ------------------

// Full + a sliding window of 2 pages (W = 32 tokens, P = 16: cdiv(31, 16) = 2),
// head-first touches, the window group first (as gpt-oss's layer 0 is).
// After (A, B, C, D) the stack, newest first, is fD fC fB fA sD sC sB sA, so
// items' D are full A 4, B 3, C 2, D 1 and window A 8, B 7, C 6, D 5 (units).
// Request (A, B, C, D, E): D(1) = max(4, sA 8) = 8, D(2) = max(4, 8) = 8,
// D(3) = max(4, sB sC 7) = 7, D(4) = max(4, sC sD 6) = 6, D(5) cold. Suffix
// minima 6, 6, 6, 6: all four pages hit from 6 units (the window layers need
// only C and D), none below; counting every layer as full would need 8.
TEST(HybridExampleTest, FullPlusAWindowOfTwoPages) {
  HybridEngine engine(Options({Sliding(32), Full()}, TouchOrder::kHeadFirst));
  RequestOutcome out;
  engine.Process(std::vector<PageId>{1, 2, 3, 4}, &out);
  EXPECT_EQ(out.cold_misses, 4u);
  EXPECT_EQ(out.unlimited_hits, 0u);
  engine.Process(std::vector<PageId>{1, 2, 3, 4, 5}, &out);
  EXPECT_EQ(out.prefix_max, (std::vector<std::uint32_t>{5, 5, 5, 5, kCold}));
  EXPECT_EQ(HitsAt(out, 5), 0u);
  EXPECT_EQ(HitsAt(out, 6), 4u);
  EXPECT_EQ(out.unlimited_hits, 4u);
  EXPECT_EQ(out.cold_misses, 1u);
  EXPECT_EQ(out.Requirement(1.0), 6u);
  // Bytes per group at 6 units after the second request (newest first: fA..fE
  // then sE.. with head-first: the pool holds f E D C B A and s E).
  EXPECT_EQ(engine.GroupBytesAt(600), (std::vector<std::uint64_t>{100, 500}));
  EXPECT_EQ(engine.GroupBytesAt(10'000), (std::vector<std::uint64_t>{500, 500}));
  EXPECT_EQ(engine.total_bytes(), 1000u);
}

// The same pair tail-first: after (A, B, C) the stack is fA fB fC sA sB sC, so
// request (A, B, D) has D(1) = max(1, sA 4) = 4, D(2) = max(2, sB 5) = 5.
TEST(HybridExampleTest, FullPlusAWindowTailFirst) {
  HybridEngine engine(Options({Sliding(32), Full()}, TouchOrder::kTailFirst));
  RequestOutcome out;
  engine.Process(std::vector<PageId>{1, 2, 3}, &out);
  engine.Process(std::vector<PageId>{1, 2, 4}, &out);
  EXPECT_EQ(out.prefix_max, (std::vector<std::uint32_t>{3, 4, kCold}));
  EXPECT_EQ(HitsAt(out, 3), 0u);
  EXPECT_EQ(HitsAt(out, 4), 1u);
  EXPECT_EQ(HitsAt(out, 5), 2u);
}

// Full + a chunk of 4 pages (64 tokens), head-first, the chunked group first.
// After (A..F): full F 1 .. A 6, chunked F 7 .. A 12. Request (A..G):
// D(1..3) = 12 (chunk pages from 0), D(4) = max(6, nothing) = 6 (L = 4 starts a
// chunk), D(5) = max(6, chE 8) = 8, D(6) = 8, D(7) cold. Suffix minima 6, 6, 6,
// 6, 8, 8: four pages hit from 6 units, six from 8.
TEST(HybridExampleTest, FullPlusAChunkOfFourPages) {
  HybridEngine engine(Options({Chunked(64), Full()}, TouchOrder::kHeadFirst));
  RequestOutcome out;
  engine.Process(std::vector<PageId>{1, 2, 3, 4, 5, 6}, &out);
  engine.Process(std::vector<PageId>{1, 2, 3, 4, 5, 6, 7}, &out);
  EXPECT_EQ(out.prefix_max, (std::vector<std::uint32_t>{5, 5, 5, 5, 7, 7, kCold}));
  EXPECT_EQ(HitsAt(out, 5), 0u);
  EXPECT_EQ(HitsAt(out, 6), 4u);
  EXPECT_EQ(HitsAt(out, 7), 4u);
  EXPECT_EQ(HitsAt(out, 8), 6u);
}

// Full (100 bytes a page) + one linear group (a 300-byte state per page
// boundary), tail-first, the linear group first. After (A, B, C), in bytes from
// the newest: fA 100, fB 200, fC 300, linA 600, linB 900, linC 1200. Request
// (A, B, C, D): D(1) = max(100, linA 600) = 600, D(2) = 900, D(3) = 1200.
// In units of 100 bytes: hits 1 from 6, 2 from 9, 3 from 12.
TEST(HybridExampleTest, FullPlusOneLinearGroup) {
  HybridEngine engine(Options({Linear(300), Full(100)}, TouchOrder::kTailFirst));
  EXPECT_EQ(engine.unit_bytes(), 100u);
  RequestOutcome out;
  engine.Process(std::vector<PageId>{1, 2, 3}, &out);
  // Bytes per group after the first request: at 600 the pool holds fA fB fC and
  // linA; at 1000 also linB (linC would need 1200).
  EXPECT_EQ(engine.GroupBytesAt(600), (std::vector<std::uint64_t>{300, 300}));
  EXPECT_EQ(engine.GroupBytesAt(1000), (std::vector<std::uint64_t>{600, 300}));
  EXPECT_EQ(engine.GroupBytesAt(0), (std::vector<std::uint64_t>{0, 0}));
  engine.Process(std::vector<PageId>{1, 2, 3, 4}, &out);
  EXPECT_EQ(out.prefix_max, (std::vector<std::uint32_t>{5, 8, 11, kCold}));
  EXPECT_EQ(HitsAt(out, 6), 1u);
  EXPECT_EQ(HitsAt(out, 9), 2u);
  EXPECT_EQ(HitsAt(out, 12), 3u);
  EXPECT_EQ(out.Requirement(1.0), 12u);
  CurveAccumulator acc;
  acc.Add(out);
  EXPECT_EQ(acc.PageHits(11), 2u);
  EXPECT_EQ(acc.PageHits(12), 3u);
}

// Early frees. Full + a window of one page (W = 17, P = 16: cdiv(16, 16) = 1),
// tail-first, the window group first. Request (A, B, C, D) of 64 tokens: once
// its prompt is computed, 65 - 17 = 48 tokens (3 pages) left the window, so the
// window's C, B, A are referenced first, then the window's D and the full D, C,
// B, A. In units from the newest: fA 1, fB 2, fC 3, fD 4, sD 5, sA 6, sB 7, sC 8.
// Request (A, B, C, D, E) of 80 tokens: D(1) = max(1, sA 6) = 6, D(2) = 7,
// D(3) = 8, D(4) = max(4, sD 5) = 5: suffix minima 5, 5, 5, 5, so all four pages
// hit from 5 units. Referencing every page at finish instead (no early frees)
// leaves the window's A newest of its group: D(4) = max(4, sD 8) = 8, and only
// page A hits at 5 units (D(1) = max(1, sA 5) = 5).
TEST(HybridExampleTest, EarlyFreesAgeTheOutOfWindowPagesFirst) {
  for (bool early : {true, false}) {
    HybridEngine engine(Options({Sliding(17), Full()}, TouchOrder::kTailFirst, early));
    RequestOutcome out;
    engine.Process(std::vector<PageId>{1, 2, 3, 4}, 64, -1, &out);
    engine.Process(std::vector<PageId>{1, 2, 3, 4, 5}, 80, -1, &out);
    if (early) {
      EXPECT_EQ(out.prefix_max, (std::vector<std::uint32_t>{4, 4, 4, 4, kCold}));
    } else {
      EXPECT_EQ(out.prefix_max, (std::vector<std::uint32_t>{4, 5, 6, 7, kCold}));
    }
    EXPECT_EQ(HitsAt(out, 5), early ? 4u : 1u);
  }
  // Output tokens push more pages out of the window while decoding: 64 + 32
  // tokens leave 96 + 1 - 17 = 80 tokens, 5 pages (all 4 of the prompt's).
  EXPECT_EQ(SkippedPages(Sliding(17), 16, 96), 5u);
  EXPECT_EQ(SkippedPages(Chunked(64), 16, 70), 4u);
  EXPECT_EQ(SkippedPages(Full(), 16, 1000), 0u);
  EXPECT_EQ(SkippedPages(Linear(10), 16, 1000), 0u);
}

// --- The oracle ---------------------------------------------------------------

// An LRU pool of explicit items (group, page) of the groups' sizes, capacity in
// bytes, the hit rule tested page by page against its contents. Written from the
// rule's statement, not from the engine: no stack distances. With pool_shares,
// each group has a pool of its own of floor(capacity * w_g / W) bytes.
class OraclePool {
 public:
  OraclePool(const HybridEngineOptions& o, std::uint64_t capacity) : o_(o), capacity_(o.groups.size(), capacity) {
    if (!o.pool_shares.empty()) {
      std::uint64_t sum = 0;
      for (std::uint64_t w : o.pool_shares) sum += w;
      for (std::size_t g = 0; g < o.groups.size(); ++g) capacity_[g] = capacity * o.pool_shares[g] / sum;
    }
  }

  bool Holds(std::size_t g, PageId p) const { return where_.count({g, p}) > 0; }

  // The hit of the request (pages), then every item referenced; prompt and
  // output in tokens.
  std::uint32_t Request(const std::vector<PageId>& pages, std::uint64_t prompt, std::uint64_t output) {
    const std::size_t n = pages.size();
    std::uint32_t hit = 0;
    for (std::size_t l = n; l >= 1 && hit == 0; --l) {
      bool ok = true;
      for (std::size_t g = 0; g < o_.groups.size() && ok; ++g) {
        const HybridGroup& group = o_.groups[g];
        std::size_t from = 0;
        switch (group.kind) {
          case KvGroupKind::kFull:
            from = 0;
            break;
          case KvGroupKind::kSlidingWindow: {
            // The window's W - 1 tokens before token l*P, in whole pages.
            const std::size_t first_token =
                l * o_.page_tokens >= group.window_tokens - 1 ? l * o_.page_tokens - (group.window_tokens - 1) : 0;
            from = first_token / o_.page_tokens;
            break;
          }
          case KvGroupKind::kChunkedLocal:
            from = (l * o_.page_tokens - (l * o_.page_tokens) % group.window_tokens) / o_.page_tokens;
            break;
          case KvGroupKind::kLinear:
            from = l - 1;
            break;
        }
        for (std::size_t i = from; i < l && ok; ++i) ok = Holds(g, pages[i]);
      }
      if (ok) hit = static_cast<std::uint32_t>(l);
    }
    // Early: a window's tokens before computed + 1 - W, a chunk's before the
    // current chunk, once the prompt is computed (last page first) and then as
    // the output is decoded (first page first).
    std::vector<std::size_t> early(o_.groups.size(), 0);
    if (o_.early_free) {
      for (std::size_t g = 0; g < o_.groups.size(); ++g) {
        const HybridGroup& group = o_.groups[g];
        auto gone = [&](std::uint64_t computed) -> std::size_t {
          std::uint64_t tokens = 0;
          if (group.kind == KvGroupKind::kSlidingWindow && computed + 1 > group.window_tokens) {
            tokens = computed + 1 - group.window_tokens;
          }
          if (group.kind == KvGroupKind::kChunkedLocal) tokens = computed - computed % group.window_tokens;
          return std::min<std::size_t>(n, tokens / o_.page_tokens);
        };
        for (std::size_t i = gone(prompt); i > 0; --i) Use(g, pages[i - 1]);
        for (std::size_t i = gone(prompt); i < gone(prompt + output); ++i) Use(g, pages[i]);
        early[g] = gone(prompt + output);
      }
    }
    for (std::size_t g = 0; g < o_.groups.size(); ++g) {
      for (std::size_t k = 0; k < n - early[g]; ++k) {
        const std::size_t i = o_.touch_order == TouchOrder::kTailFirst ? n - 1 - k : early[g] + k;
        Use(g, pages[i]);
      }
    }
    return hit;
  }

  std::vector<std::uint64_t> GroupBytes() const {
    std::vector<std::uint64_t> out(o_.groups.size(), 0);
    for (const auto& pool : lru_) {
      for (const auto& [g, p] : pool) out[g] += o_.groups[g].page_bytes;
    }
    return out;
  }

 private:
  void Use(std::size_t g, PageId p) {
    const std::size_t k = o_.pool_shares.empty() ? 0 : g;  // the pool g's items live in
    auto it = where_.find({g, p});
    if (it != where_.end()) {
      used_[k] -= o_.groups[g].page_bytes;
      lru_[k].erase(it->second);
      where_.erase(it);
    }
    lru_[k].push_front({g, p});
    where_[{g, p}] = lru_[k].begin();
    used_[k] += o_.groups[g].page_bytes;
    while (used_[k] > capacity_[k]) {
      const auto [eg, ep] = lru_[k].back();
      used_[k] -= o_.groups[eg].page_bytes;
      where_.erase({eg, ep});
      lru_[k].pop_back();
    }
  }

  HybridEngineOptions o_;
  std::vector<std::uint64_t> capacity_;  // per pool: one, or one per group
  std::vector<std::uint64_t> used_ = std::vector<std::uint64_t>(o_.groups.size(), 0);
  std::vector<std::list<std::pair<std::size_t, PageId>>> lru_ =
      std::vector<std::list<std::pair<std::size_t, PageId>>>(o_.groups.size());
  std::map<std::pair<std::size_t, PageId>, std::list<std::pair<std::size_t, PageId>>::iterator> where_;
};

// Requests that share prefixes: a few documents, each request a prefix of one
// plus a few unique pages (prefix-chained ids).
std::vector<std::vector<PageId>> SharedPrefixTrace(std::mt19937_64* rng, int requests) {
  std::vector<std::vector<PageId>> out;
  PageId unique = 1'000'000;
  for (int r = 0; r < requests; ++r) {
    const int doc = static_cast<int>((*rng)() % 4);
    const int shared = static_cast<int>((*rng)() % 12);
    const int own = static_cast<int>((*rng)() % 4);
    std::vector<PageId> pages;
    for (int i = 0; i < shared; ++i) pages.push_back(static_cast<PageId>(doc * 1000 + i));
    for (int i = 0; i < own; ++i) pages.push_back(unique++);
    out.push_back(pages);
  }
  return out;
}

void CheckAgainstOracleOnce(const HybridEngineOptions& o, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<std::vector<PageId>> trace = SharedPrefixTrace(&rng, 150);
  // Prompts that end anywhere in their last page, outputs of 0 to 99 tokens.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> tokens;
  for (const auto& pages : trace) {
    const std::uint64_t full = pages.size() * o.page_tokens;
    tokens.emplace_back(full == 0 ? 1 : full - rng() % o.page_tokens, rng() % 100);
  }
  HybridEngine engine(o);
  const std::uint64_t unit = engine.unit_bytes();
  std::vector<OraclePool> pools;
  std::vector<std::uint64_t> capacities;
  for (std::uint64_t c = 0; c <= 90; c += (c < 30 ? 1 : 7)) capacities.push_back(c);
  for (std::uint64_t c : capacities) pools.emplace_back(o, c * unit);
  RequestOutcome out;
  std::uint64_t checked_hits = 0;
  for (std::size_t r = 0; r < trace.size(); ++r) {
    engine.Process(trace[r], static_cast<std::int64_t>(tokens[r].first), static_cast<std::int64_t>(tokens[r].second),
                   &out);
    for (std::size_t k = 0; k < capacities.size(); ++k) {
      const std::uint32_t want = pools[k].Request(trace[r], tokens[r].first, tokens[r].second);
      ASSERT_EQ(HitsAt(out, capacities[k]), want)
          << "request " << r << " at " << capacities[k] << " units (seed " << seed << ", early " << o.early_free << ")";
      checked_hits += want;
      ASSERT_EQ(engine.GroupBytesAt(capacities[k] * unit), pools[k].GroupBytes())
          << "request " << r << " at " << capacities[k] << " units (seed " << seed << ")";
    }
  }
  EXPECT_GT(checked_hits, 0u) << "the trace should reuse something";
}

// Without and with early frees.
void CheckAgainstOracle(HybridEngineOptions o, std::uint64_t seed) {
  for (bool early : {false, true}) {
    o.early_free = early;
    CheckAgainstOracleOnce(o, seed);
  }
}

TEST(HybridOracleTest, FullPlusSlidingWindowAtEveryCapacity) {
  for (std::uint64_t w : {2u, 17u, 32u, 40u, 64u}) {
    for (TouchOrder order : {TouchOrder::kTailFirst, TouchOrder::kHeadFirst}) {
      CheckAgainstOracle(Options({Sliding(w), Full()}, order), w);
    }
  }
}

TEST(HybridOracleTest, FullPlusChunkedLocalAtEveryCapacity) {
  for (std::uint64_t c : {16u, 40u, 64u, 100u}) {
    for (TouchOrder order : {TouchOrder::kTailFirst, TouchOrder::kHeadFirst}) {
      CheckAgainstOracle(Options({Chunked(c), Full()}, order), c + 7);
    }
  }
}

TEST(HybridOracleTest, FullPlusLinearWithUnequalSizesAtEveryCapacity) {
  for (TouchOrder order : {TouchOrder::kTailFirst, TouchOrder::kHeadFirst}) {
    CheckAgainstOracle(Options({Linear(250), Full(100)}, order), 11);
    CheckAgainstOracle(Options({Full(100), Linear(30)}, order), 12);
  }
}

TEST(HybridOracleTest, FourGroupsAtEveryCapacity) {
  CheckAgainstOracle(Options({Sliding(48, 200), Full(100), Chunked(64, 150), Linear(120)}, TouchOrder::kTailFirst), 21);
  CheckAgainstOracle(Options({Chunked(32, 100), Sliding(20, 100), Linear(300), Full(100)}, TouchOrder::kHeadFirst), 22);
}

// --- One full group is today's curve ------------------------------------------

// SGLang's and TensorRT-LLM's pools: each group in a share of the capacity of
// its own. Shares that do not divide the capacities evenly, and unequal sizes.
TEST(HybridOracleTest, SplitPoolsAtEveryCapacity) {
  for (TouchOrder order : {TouchOrder::kTailFirst, TouchOrder::kHeadFirst}) {
    HybridEngineOptions o = Options({Sliding(20), Full()}, order);
    o.pool_shares = {4, 5};  // SGLang's default: the window pool 0.8 of the full pool's tokens
    CheckAgainstOracle(o, 31);
    o = Options({Linear(250), Full(100)}, order);
    o.pool_shares = {3, 7};
    CheckAgainstOracle(o, 32);
    o = Options({Sliding(48, 200), Full(100), Chunked(64, 150), Linear(120)}, order);
    o.pool_shares = {2, 5, 1, 3};
    CheckAgainstOracle(o, 33);
  }
}

TEST(HybridOracleTest, OneGroupInAPoolOfItsOwnIsTheSharedPool) {
  // One group in a pool of its own (any share) is the shared pool: the same curve.
  HybridEngineOptions shared = Options({Full()}, TouchOrder::kTailFirst);
  HybridEngineOptions split = shared;
  split.pool_shares = {3};
  HybridEngine a(shared), b(split);
  std::mt19937_64 rng(5);
  RequestOutcome ra, rb;
  for (const auto& pages : SharedPrefixTrace(&rng, 200)) {
    a.Process(pages, &ra);
    b.Process(pages, &rb);
    ASSERT_EQ(ra.prefix_max, rb.prefix_max);
  }
  EXPECT_EQ(a.BytesToHoldAll(), b.BytesToHoldAll());
}

TEST(HybridOracleTest, SplitPoolOptionsAreChecked) {
  HybridEngineOptions o = Options({Sliding(20), Full()}, TouchOrder::kTailFirst);
  o.pool_shares = {1};
  EXPECT_FALSE(ValidateHybridOptions(o).ok());  // one per group
  o.pool_shares = {1, 0};
  EXPECT_FALSE(ValidateHybridOptions(o).ok());
  o.pool_shares = {1, kMaxPoolShare + 1};
  EXPECT_FALSE(ValidateHybridOptions(o).ok());
  o.pool_shares = {4, 5};
  EXPECT_TRUE(ValidateHybridOptions(o).ok());
  o.max_bytes = 1'000'000;
  EXPECT_FALSE(ValidateHybridOptions(o).ok());  // replay's exact engine only
}

TEST(HybridOracleTest, OneFullGroupIsExactlyTodaysEngine) {
  for (TouchOrder order : {TouchOrder::kTailFirst, TouchOrder::kHeadFirst}) {
    std::mt19937_64 rng(5);
    const std::vector<std::vector<PageId>> trace = SharedPrefixTrace(&rng, 2000);
    HybridEngine hybrid(Options({Full(16 * 1024)}, order));
    EngineOptions eo;
    eo.touch_order = order;
    StackDistanceEngine plain(eo);
    RequestOutcome a, b;
    CurveAccumulator acc_a, acc_b;
    for (const auto& pages : trace) {
      hybrid.Process(pages, &a);
      plain.Process(pages, &b);
      ASSERT_EQ(a.prefix_max, b.prefix_max);
      ASSERT_EQ(a.distance, b.distance);
      ASSERT_EQ(a.unlimited_hits, b.unlimited_hits);
      ASSERT_EQ(a.cold_misses, b.cold_misses);
      ASSERT_EQ(a.beyond_tracked, b.beyond_tracked);
      acc_a.Add(a);
      acc_b.Add(b);
    }
    for (std::uint64_t c = 0; c <= acc_b.MaxCapacity() + 1; ++c) {
      ASSERT_EQ(acc_a.PageHits(c), acc_b.PageHits(c));
      ASSERT_EQ(acc_a.RequestCoverage(c), acc_b.RequestCoverage(c));
    }
  }
}

TEST(HybridOracleTest, OptionsAreChecked) {
  EXPECT_FALSE(ValidateHybridOptions(Options({}, TouchOrder::kTailFirst)).ok());
  EXPECT_FALSE(ValidateHybridOptions(Options({Sliding(0)}, TouchOrder::kTailFirst)).ok());
  EXPECT_FALSE(ValidateHybridOptions(Options({Full(0)}, TouchOrder::kTailFirst)).ok());
  EXPECT_TRUE(ValidateHybridOptions(Options({Full(), Chunked(64)}, TouchOrder::kTailFirst)).ok());
  base::Result<HybridEngineOptions> gpt =
      HybridOptionsFor(LookupModelPreset("gpt-oss-120b").value(), 1, 16, TouchOrder::kTailFirst);
  ASSERT_TRUE(gpt.ok()) << gpt.error();
  EXPECT_EQ(gpt.value().groups.size(), 2u);
  EXPECT_EQ(gpt.value().groups[0].kind, KvGroupKind::kSlidingWindow);
  EXPECT_EQ(gpt.value().groups[0].page_bytes, 16u * 36'864);
}

// --- Bounded tracking (the agent's engine) --------------------------------------

// The same trace as the oracle's, with the token counts it draws.
struct TokenTrace {
  std::vector<std::vector<PageId>> pages;
  std::vector<std::pair<std::int64_t, std::int64_t>> tokens;
};
TokenTrace MakeTokenTrace(std::uint64_t seed, int requests, std::uint64_t page_tokens) {
  std::mt19937_64 rng(seed);
  TokenTrace t;
  t.pages = SharedPrefixTrace(&rng, requests);
  for (const auto& pages : t.pages) {
    const std::uint64_t full = pages.size() * page_tokens;
    t.tokens.emplace_back(static_cast<std::int64_t>(full == 0 ? 1 : full - rng() % page_tokens),
                          static_cast<std::int64_t>(rng() % 100));
  }
  return t;
}

// A bounded engine against the brute-force pools at every capacity up to its
// bound: the same hits and group bytes, and it did evict.
void CheckBoundedAgainstOracle(HybridEngineOptions o, std::uint64_t bound_units, std::uint64_t seed) {
  o.early_free = true;
  HybridEngine probe(o);
  o.max_bytes = bound_units * probe.unit_bytes();
  HybridEngine engine(o);
  ASSERT_EQ(engine.max_units(), bound_units);
  const std::uint64_t unit = engine.unit_bytes();
  const TokenTrace t = MakeTokenTrace(seed, 150, o.page_tokens);
  std::vector<OraclePool> pools;
  for (std::uint64_t c = 0; c <= bound_units; ++c) pools.emplace_back(o, c * unit);
  RequestOutcome out;
  std::uint64_t beyond = 0;
  for (std::size_t r = 0; r < t.pages.size(); ++r) {
    engine.Process(t.pages[r], t.tokens[r].first, t.tokens[r].second, &out);
    beyond += out.beyond_tracked;
    for (std::uint64_t c = 0; c <= bound_units; ++c) {
      const std::uint32_t want = pools[c].Request(t.pages[r], static_cast<std::uint64_t>(t.tokens[r].first),
                                                  static_cast<std::uint64_t>(t.tokens[r].second));
      ASSERT_EQ(HitsAt(out, c), want) << "request " << r << " at " << c << " units (seed " << seed << ")";
      ASSERT_EQ(engine.GroupBytesAt(c * unit), pools[c].GroupBytes()) << "request " << r << " at " << c;
    }
    ASSERT_LE(engine.total_bytes(), o.max_bytes);
  }
  EXPECT_GT(engine.evicted_items(), 0u) << "the bound should bind on this trace";
  EXPECT_GT(beyond, 0u) << "an evicted item should come back";
}

TEST(HybridBoundTest, EqualsTheOracleAtEveryCapacityUpToTheBound) {
  CheckBoundedAgainstOracle(Options({Sliding(32), Full()}, TouchOrder::kTailFirst), 12, 3);
  CheckBoundedAgainstOracle(Options({Chunked(64), Full()}, TouchOrder::kHeadFirst), 9, 4);
  CheckBoundedAgainstOracle(Options({Linear(250), Full(100)}, TouchOrder::kTailFirst), 20, 5);
  CheckBoundedAgainstOracle(
      Options({Sliding(48, 200), Full(100), Chunked(64, 150), Linear(120)}, TouchOrder::kTailFirst), 25, 6);
}

// Against the unbounded engine: below the bound every distance and hit is the
// same; beyond it, exactly the pages whose exact distance reaches the bound are
// "beyond tracked" (the tracked items are an LRU pool of max_bytes), the cold
// ones stay cold, and the unlimited hits are unchanged while every eviction is
// remembered.
TEST(HybridBoundTest, WhatTheBoundDropsIsCountedAsBeyondTracked) {
  HybridEngineOptions o = Options({Sliding(40), Full(100), Linear(60)}, TouchOrder::kTailFirst, true);
  HybridEngine exact(o);
  const std::uint32_t bound = 30;
  o.max_bytes = bound * exact.unit_bytes();
  HybridEngine bounded(o);
  const TokenTrace t = MakeTokenTrace(9, 400, o.page_tokens);
  RequestOutcome a, b;
  std::uint64_t beyond = 0;
  for (std::size_t r = 0; r < t.pages.size(); ++r) {
    exact.Process(t.pages[r], t.tokens[r].first, t.tokens[r].second, &a);
    bounded.Process(t.pages[r], t.tokens[r].first, t.tokens[r].second, &b);
    std::uint32_t want_beyond = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a.distance[i] < bound) {
        ASSERT_EQ(b.distance[i], a.distance[i]) << "request " << r << " page " << i;
      } else if (a.distance[i] != kCold) {
        ASSERT_EQ(b.distance[i], kBeyondTracked) << "request " << r << " page " << i;
        ++want_beyond;
      } else {
        ASSERT_EQ(b.distance[i], kCold);
      }
      ASSERT_EQ(std::min(a.prefix_max[i], bound), std::min(b.prefix_max[i], bound));
    }
    ASSERT_EQ(b.beyond_tracked, want_beyond) << "request " << r;
    ASSERT_EQ(b.unlimited_hits, a.unlimited_hits);
    ASSERT_EQ(b.cold_misses, a.cold_misses);
    beyond += b.beyond_tracked;
  }
  EXPECT_GT(beyond, 0u);
  EXPECT_GT(bounded.evicted_items(), 0u);
  EXPECT_LT(bounded.tracked_items(), exact.tracked_items());
  EXPECT_EQ(exact.evicted_items(), 0u);
}

// With few evictions remembered, the forgotten ones look cold again: the hits
// at every tracked capacity do not change, only the unlimited hits can.
TEST(HybridBoundTest, ForgottenEvictionsLookColdButHitsBelowTheBoundHold) {
  HybridEngineOptions o = Options({Sliding(32), Full()}, TouchOrder::kTailFirst, true);
  o.max_bytes = 10 * 100;
  HybridEngine all(o);
  o.remembered_evictions = 4;
  HybridEngine few(o);
  const TokenTrace t = MakeTokenTrace(13, 300, o.page_tokens);
  RequestOutcome a, b;
  std::uint64_t unlimited_all = 0, unlimited_few = 0;
  for (std::size_t r = 0; r < t.pages.size(); ++r) {
    all.Process(t.pages[r], t.tokens[r].first, t.tokens[r].second, &a);
    few.Process(t.pages[r], t.tokens[r].first, t.tokens[r].second, &b);
    for (std::uint64_t c = 0; c <= 10; ++c) ASSERT_EQ(HitsAt(a, c), HitsAt(b, c));
    unlimited_all += a.unlimited_hits;
    unlimited_few += b.unlimited_hits;
  }
  EXPECT_LT(unlimited_few, unlimited_all);
  EXPECT_EQ(all.evicted_items(), few.evicted_items());
}

// A state saved half way and restored into a new engine goes on exactly as the
// engine that ran through; bad bytes leave the engine cleared.
TEST(HybridBoundTest, SerializedStateGoesOnExactly) {
  for (std::uint64_t max_bytes : {std::uint64_t{0}, std::uint64_t{1500}}) {
    HybridEngineOptions o = Options({Sliding(40), Full(100), Linear(60)}, TouchOrder::kTailFirst, true);
    o.max_bytes = max_bytes;
    o.remembered_evictions = 8;
    HybridEngine through(o);
    HybridEngine first(o);
    const TokenTrace t = MakeTokenTrace(17, 300, o.page_tokens);
    RequestOutcome a, b;
    const std::size_t half = t.pages.size() / 2;
    for (std::size_t r = 0; r < half; ++r) {
      through.Process(t.pages[r], t.tokens[r].first, t.tokens[r].second, &a);
      first.Process(t.pages[r], t.tokens[r].first, t.tokens[r].second, &b);
    }
    const std::vector<std::uint8_t> state = first.Serialize();
    HybridEngine second(o);
    ASSERT_TRUE(second.Deserialize(state));
    EXPECT_EQ(second.tracked_items(), first.tracked_items());
    EXPECT_EQ(second.evicted_items(), first.evicted_items());
    EXPECT_EQ(second.total_bytes(), first.total_bytes());
    if (max_bytes != 0) {
      EXPECT_GT(second.evicted_items(), 0u);
    }
    for (std::size_t r = half; r < t.pages.size(); ++r) {
      through.Process(t.pages[r], t.tokens[r].first, t.tokens[r].second, &a);
      second.Process(t.pages[r], t.tokens[r].first, t.tokens[r].second, &b);
      ASSERT_EQ(a.prefix_max, b.prefix_max) << "request " << r;
      ASSERT_EQ(a.distance, b.distance) << "request " << r;
      ASSERT_EQ(a.beyond_tracked, b.beyond_tracked);
    }
    EXPECT_EQ(through.GroupBytesAt(700), second.GroupBytesAt(700));
    // Truncated, a byte changed in the header, another model's groups.
    std::vector<std::uint8_t> cut(state.begin(), state.end() - 3);
    EXPECT_FALSE(second.Deserialize(cut));
    EXPECT_EQ(second.tracked_items(), 0u);
    std::vector<std::uint8_t> bad = state;
    bad[2] ^= 1;
    EXPECT_FALSE(second.Deserialize(bad));
    HybridEngine other(Options({Full()}, TouchOrder::kTailFirst));
    EXPECT_FALSE(other.Deserialize(state));
  }
}

TEST(HybridBoundTest, TheBoundIsChecked) {
  HybridEngineOptions o = Options({Full(100), Linear(300)}, TouchOrder::kTailFirst);
  o.max_bytes = 299;
  EXPECT_FALSE(ValidateHybridOptions(o).ok());  // cannot hold the largest item
  o.max_bytes = 300;
  EXPECT_TRUE(ValidateHybridOptions(o).ok());
  o.max_bytes = std::uint64_t{100} * kBeyondTracked;
  EXPECT_FALSE(ValidateHybridOptions(o).ok());  // beyond the units' range
}

// --- The step-level simulation (curve/hybrid_sim.h) ---------------------------

HybridSimOptions SimOptions(const HybridEngineOptions& o, bool touch_skipped, bool early_free, bool cap_prompt) {
  HybridSimOptions s;
  s.engine = o;
  s.touch_skipped = touch_skipped;
  s.early_free = early_free;
  s.cap_prompt = cap_prompt;
  return s;
}

// With touch_skipped and no prompt cap, the simulated pool is the one-pass
// model, with or without early frees: the same hits at every capacity.
TEST(HybridSimTest, WithoutVllmsStepBehavioursItIsTheOnePassCurve) {
  for (const HybridEngineOptions& o :
       {Options({Sliding(40), Full()}, TouchOrder::kTailFirst), Options({Chunked(64), Full()}, TouchOrder::kHeadFirst),
        Options({Linear(250), Full(100)}, TouchOrder::kTailFirst),
        Options({Sliding(48, 200), Full(100), Chunked(64, 150), Linear(120)}, TouchOrder::kTailFirst)}) {
    for (bool early : {false, true}) {
      HybridEngineOptions eo = o;
      eo.early_free = early;
      std::mt19937_64 rng(9);
      const std::vector<std::vector<PageId>> trace = SharedPrefixTrace(&rng, 150);
      HybridEngine engine(eo);
      std::vector<HybridPoolSim> sims;
      std::vector<std::uint64_t> capacities = {1, 3, 7, 12, 20, 35, 60, 100};
      for (std::uint64_t c : capacities) sims.emplace_back(SimOptions(eo, true, early, false), c * engine.unit_bytes());
      RequestOutcome out;
      std::uint64_t hits = 0;
      for (std::size_t r = 0; r < trace.size(); ++r) {
        const auto input = static_cast<std::int64_t>(trace[r].size() * 16 - (r % 16));
        const auto output = static_cast<std::int64_t>(r % 50);
        engine.Process(trace[r], input, output, &out);
        for (std::size_t k = 0; k < capacities.size(); ++k) {
          const std::uint32_t got = sims[k].Request(trace[r], input, output);
          ASSERT_EQ(got, HitsAt(out, capacities[k]))
              << "request " << r << " at " << capacities[k] << " units, early " << early;
          hits += got;
        }
      }
      EXPECT_GT(hits, 0u);
    }
  }
}

// Full + a window of one page (W = 17, P = 16), every page 1 unit, tail-first,
// a pool of 5 units. Request (A, B, C, D) of 64 tokens: vLLM frees the window's
// A, B and C once the prompt is computed (65 - 17 = 48 tokens skipped: 3 pages,
// last first), then at finish the window's D and the full D, C, B, A. Queue from
// the head: sC sB sA sD fD fC fB fA; the pool keeps sD fD fC fB fA. Request
// (A, B, C, D, E) then hits all four pages (full A-D, window D). The one-pass
// model references the window's pages at finish too (sD sC sB sA fD fC fB fA),
// keeps sA fD fC fB fA, and hits one page.
TEST(HybridSimTest, EarlyFreesKeepTheFullLayersPagesLonger) {
  const HybridEngineOptions o = Options({Sliding(17), Full()}, TouchOrder::kTailFirst);
  HybridPoolSim vllm(SimOptions(o, false, true, false), 500);
  HybridPoolSim one_pass(SimOptions(o, true, false, false), 500);
  for (HybridPoolSim* sim : {&vllm, &one_pass}) sim->Request(std::vector<PageId>{1, 2, 3, 4}, 64, -1);
  EXPECT_EQ(vllm.Request(std::vector<PageId>{1, 2, 3, 4, 5}, 80, -1), 4u);
  EXPECT_EQ(one_pass.Request(std::vector<PageId>{1, 2, 3, 4, 5}, 80, -1), 1u);
  EXPECT_EQ(vllm.page_hits(), 4u);
  EXPECT_EQ(vllm.page_refs(), 9u);
}

// At most prompt - 1 tokens hit: a repeated 64-token prompt of 4 pages hits 3.
TEST(HybridSimTest, APromptHitsAtMostItsLengthLessOneToken) {
  const HybridEngineOptions o = Options({Sliding(17), Full()}, TouchOrder::kTailFirst);
  HybridPoolSim capped(SimOptions(o, true, false, true), 10'000);
  HybridPoolSim uncapped(SimOptions(o, true, false, false), 10'000);
  for (HybridPoolSim* sim : {&capped, &uncapped}) sim->Request(std::vector<PageId>{1, 2, 3, 4}, 64, -1);
  EXPECT_EQ(capped.Request(std::vector<PageId>{1, 2, 3, 4}, 64, -1), 3u);
  EXPECT_EQ(uncapped.Request(std::vector<PageId>{1, 2, 3, 4}, 64, -1), 4u);
  // 65 tokens: the 4 full pages may all hit.
  EXPECT_EQ(capped.Request(std::vector<PageId>{1, 2, 3, 4}, 65, -1), 4u);
  // A request larger than the pool runs over it (counted) and leaves the pool trimmed.
  HybridPoolSim tiny(SimOptions(o, false, true, true), 300);
  tiny.Request(std::vector<PageId>{1, 2, 3, 4}, 64, -1);
  EXPECT_EQ(tiny.overflows(), 1u);
}

}  // namespace
}  // namespace kvwatch::curve
