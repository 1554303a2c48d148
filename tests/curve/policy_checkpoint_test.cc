// Checkpoints of the eviction-policy canaries (curve/policy_canaries.h) and of each
// policy's cache (PolicyCache::Serialize/Deserialize):
//   - exactness: two identical canary sets are driven with the same random stream
//     (repeated prefixes, conversations, tenants with priorities, derived classes,
//     output lengths that keep sglang/vllm requests running across the cut, times
//     crossing many window slices); one is serialized mid-stream and restored into
//     a fresh set, and from then on the restored set and the untouched twin agree
//     on every canary's lifetime totals, window totals and hit ratios;
//   - a cold set fed the same rest does not agree (the test has teeth);
//   - canaries that take their queue in batches agree with canaries read (and so
//     settled) after every request;
//   - each cache on its own, restored mid-stream, gives the same hits and
//     preemptions request by request;
//   - truncated, garbage and mismatched-options bytes are refused and leave the
//     canaries unchanged; a huge count is refused before anything is allocated;
//     every single-byte corruption of a cache's bytes is refused or gives a cache
//     that runs without crashing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "curve/policy.h"
#include "curve/policy_canaries.h"
#include "curve/policy_replay.h"
#include "curve/stack_distance.h"

namespace kvwatch::curve {
namespace {

constexpr PolicyKind kOnline[] = {
    PolicyKind::kLru,    PolicyKind::kFifo, PolicyKind::kLfu,      PolicyKind::kArc,           PolicyKind::kS3Fifo,
    PolicyKind::kSglang, PolicyKind::kVllm, PolicyKind::kPriority, PolicyKind::kWorkloadAware, PolicyKind::kSieve};

// A stream with conversations that extend their own prompts, shared system
// prompts, one-shot requests, a page repeated now and then, tenants, and times
// advancing 0..3 s a request (a few without a timestamp).
std::vector<Request> Stream(std::uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<Request> out;
  std::vector<std::vector<PageId>> chains;
  PageId next = 1000;
  double t = 100;
  const std::vector<std::string> tenants = {"", "a", "b"};
  for (int i = 0; i < n; ++i) {
    Request r;
    t += std::uniform_real_distribution<double>(0, 3)(rng);
    if (rng() % 20 != 0) r.timestamp_s = t;
    r.tenant = tenants[rng() % tenants.size()];
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 5 && !chains.empty()) {
      auto& chain = chains[rng() % chains.size()];
      const int extra = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < extra; ++k) chain.push_back(next++);
      r.pages = chain;
    } else {
      const int sys = static_cast<int>(rng() % 3);
      r.pages = sys == 0   ? std::vector<PageId>{1, 2, 3}
                : sys == 1 ? std::vector<PageId>{11, 12}
                           : std::vector<PageId>{21};
      const int extra = static_cast<int>(rng() % 5);
      for (int k = 0; k < extra; ++k) r.pages.push_back(next++);
      if (kind < 8) chains.push_back(r.pages);
      if (chains.size() > 16) chains.erase(chains.begin());
    }
    if (rng() % 25 == 0) r.pages.push_back(r.pages.front());  // a repeated page
    r.input_tokens = static_cast<std::int64_t>(r.pages.size() * 16 + rng() % 16);
    r.output_tokens = static_cast<std::int64_t>(rng() % 200);
    out.push_back(std::move(r));
  }
  return out;
}

CanaryOptions Options() {
  CanaryOptions o;
  o.policies.assign(std::begin(kOnline), std::end(kOnline));
  o.capacities = {6, 30, 120};
  o.coverage_share = 0.9;
  o.lifetime.decode_tokens_per_s = 20;  // requests run for up to 10 s: several overlap
  o.priorities = ParsePriorityRules("tenant:a=2,class:turn2=1,class:first=-1").value();
  o.windows_s = {60, 600};  // slices of 1 s and 10 s
  return o;
}

// Feeds the canaries the way the agent does: the stack engine's unlimited hits,
// the request's time (the previous one's when it has none).
class Driver {
 public:
  explicit Driver(const CanaryOptions& options, EngineOptions eo = Unbounded())
      : canaries_(PolicyCanaries::Create(options).value()) {
    eo.touch_order = options.touch_order;
    engine_ = std::make_unique<StackDistanceEngine>(eo);
  }
  void Feed(const Request& r) {
    engine_->Process(r.pages, &outcome_);
    if (r.has_timestamp()) t_ = r.timestamp_s;
    canaries_->Add(r, outcome_.unlimited_hits, t_, &outcome_);
  }
  static EngineOptions Unbounded() {
    EngineOptions eo;
    eo.remembered_evictions = 0;
    return eo;
  }
  PolicyCanaries& canaries() { return *canaries_; }
  std::unique_ptr<PolicyCanaries>& owned() { return canaries_; }

 private:
  std::unique_ptr<PolicyCanaries> canaries_;
  std::unique_ptr<StackDistanceEngine> engine_;
  RequestOutcome outcome_;
  double t_ = 0;
};

void ExpectSameTotals(const PolicyTotals& a, const PolicyTotals& b, const std::string& what) {
  EXPECT_EQ(a.requests, b.requests) << what;
  EXPECT_EQ(a.page_refs, b.page_refs) << what;
  EXPECT_EQ(a.page_hits, b.page_hits) << what;
  EXPECT_EQ(a.covered_requests, b.covered_requests) << what;
  EXPECT_EQ(a.preemptions, b.preemptions) << what;
  EXPECT_EQ(a.PageHitRatio(), b.PageHitRatio()) << what;
  EXPECT_EQ(a.RequestCoverage(), b.RequestCoverage()) << what;
}

void ExpectSame(const PolicyCanaries& a, const PolicyCanaries& b, const std::string& when) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string what = when + " " + std::string(PolicyName(a.kind(i))) + "@" + std::to_string(a.capacity(i));
    ExpectSameTotals(a.Lifetime(i), b.Lifetime(i), what + " lifetime");
    for (std::size_t w = 0; w < a.options().windows_s.size(); ++w) {
      ExpectSameTotals(a.Window(i, w), b.Window(i, w), what + " window " + std::to_string(w));
    }
  }
}

std::vector<std::uint8_t> Bytes(const PolicyCanaries& c) {
  std::vector<std::uint8_t> out;
  c.Serialize(&out);
  return out;
}

TEST(PolicyCheckpointTest, RestoredCanariesBehaveExactlyAsTheOriginal) {
  for (std::uint64_t seed : {1, 2, 3}) {
    const std::vector<Request> stream = Stream(seed, 1600);
    for (std::size_t cut : {std::size_t{1}, std::size_t{370}, std::size_t{800}}) {
      const std::string when = "seed " + std::to_string(seed) + " cut " + std::to_string(cut);
      Driver original(Options());
      Driver twin(Options());
      for (std::size_t i = 0; i < cut; ++i) {
        original.Feed(stream[i]);
        twin.Feed(stream[i]);
      }
      const std::vector<std::uint8_t> bytes = Bytes(original.canaries());
      // The restored set continues with the original's engine (the stack engine
      // has its own checkpoint): swap its canaries for restored ones.
      auto restored = PolicyCanaries::Create(Options()).value();
      std::span<const std::uint8_t> in(bytes);
      ASSERT_TRUE(restored->Deserialize(&in)) << when;
      EXPECT_TRUE(in.empty()) << when;
      ExpectSame(*restored, twin.canaries(), when + " at the cut");
      original.owned() = std::move(restored);
      for (std::size_t i = cut; i < stream.size(); ++i) {
        original.Feed(stream[i]);
        twin.Feed(stream[i]);
        if ((i - cut) % 200 == 0)
          ExpectSame(original.canaries(), twin.canaries(), when + " request " + std::to_string(i));
      }
      original.canaries().Advance(stream[stream.size() - 2].timestamp_s + 30);
      twin.canaries().Advance(stream[stream.size() - 2].timestamp_s + 30);
      ExpectSame(original.canaries(), twin.canaries(), when + " at the end");
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// Add queues requests and the canaries take them in batches (kSettleRequests): a
// set read after every request (each read takes the queue, so it runs request by
// request) and a set read only now and then agree, and every read counts every
// request added before it.
TEST(PolicyCheckpointTest, BatchedCanariesEqualCanariesReadAfterEveryRequest) {
  const std::vector<Request> stream = Stream(4, 3 * PolicyCanaries::kSettleRequests + 17);
  Driver each(Options());
  Driver batched(Options());
  double last = 0;
  for (std::size_t i = 0; i < stream.size(); ++i) {
    if (stream[i].has_timestamp()) last = stream[i].timestamp_s;
    each.Feed(stream[i]);
    batched.Feed(stream[i]);
    for (std::size_t k = 0; k < each.canaries().size(); ++k) {
      ASSERT_EQ(each.canaries().Lifetime(k).requests, i + 1) << "canary " << k << " request " << i;
    }
    if (i % 300 == 299) ExpectSame(batched.canaries(), each.canaries(), "request " + std::to_string(i));
  }
  batched.canaries().Advance(last + 30);
  each.canaries().Advance(last + 30);
  ExpectSame(batched.canaries(), each.canaries(), "at the end");
}

// lru canaries read from the engine (CanaryOptions::lru_from_engine) against the
// simulated lru caches: the same totals in every window, request after request,
// in both touch orders, with an engine that forgets pages (max_pages at the
// largest capacity, remembered evictions on) and one that does not.
TEST(PolicyCheckpointTest, LruCanariesReadFromTheEngineEqualTheSimulatedOnes) {
  for (TouchOrder order : {TouchOrder::kTailFirst, TouchOrder::kHeadFirst}) {
    for (bool bounded : {false, true}) {
      CanaryOptions simulated = Options();
      simulated.touch_order = order;
      CanaryOptions derived = simulated;
      derived.lru_from_engine = true;
      EngineOptions eo = Driver::Unbounded();
      if (bounded) {
        eo.max_pages = 120;
        eo.remembered_evictions = 64;
      }
      Driver a(simulated, eo), b(derived, eo);
      const std::vector<Request> stream = Stream(order == TouchOrder::kTailFirst ? 11 : 12, 2500);
      const std::string what = std::string(order == TouchOrder::kTailFirst ? "tail" : "head") + "-first, " +
                               (bounded ? "bounded" : "unbounded") + " engine";
      for (std::size_t i = 0; i < stream.size(); ++i) {
        a.Feed(stream[i]);
        b.Feed(stream[i]);
        if (i % 250 == 0) ExpectSame(a.canaries(), b.canaries(), what + ", request " + std::to_string(i));
      }
      ExpectSame(a.canaries(), b.canaries(), what + ", at the end");
      // lru canaries (the first policy) that hit: the comparison has teeth.
      EXPECT_GT(b.canaries().Lifetime(1).page_hits, 0u) << what;
      // They hold no cache.
      EXPECT_LT(b.canaries().MemoryBytes(), a.canaries().MemoryBytes()) << what;
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// A checkpoint of simulated lru canaries restores into canaries that read the
// engine (an upgrade), and one of those into their like; both then go on as the
// untouched simulated twin.
TEST(PolicyCheckpointTest, LruCanariesReadFromTheEngineRestoreFromEitherCheckpoint) {
  const std::vector<Request> stream = Stream(13, 1600);
  CanaryOptions derived = Options();
  derived.lru_from_engine = true;
  for (bool from_derived : {false, true}) {
    const std::string when = from_derived ? "from lru_from_engine" : "from simulated lru";
    Driver original(from_derived ? derived : Options());
    Driver twin(Options());
    for (std::size_t i = 0; i < 700; ++i) {
      original.Feed(stream[i]);
      twin.Feed(stream[i]);
    }
    const std::vector<std::uint8_t> bytes = Bytes(original.canaries());
    auto restored = PolicyCanaries::Create(derived).value();
    std::span<const std::uint8_t> in(bytes);
    ASSERT_TRUE(restored->Deserialize(&in)) << when;
    EXPECT_TRUE(in.empty()) << when;
    original.owned() = std::move(restored);
    for (std::size_t i = 700; i < stream.size(); ++i) {
      original.Feed(stream[i]);
      twin.Feed(stream[i]);
    }
    ExpectSame(original.canaries(), twin.canaries(), when);
  }
}

TEST(PolicyCheckpointTest, ACanarySetStartedColdDoesNotAgree) {
  const std::vector<Request> stream = Stream(4, 1200);
  Driver warm(Options());
  for (std::size_t i = 0; i < 600; ++i) warm.Feed(stream[i]);
  Driver cold(Options());
  PolicyTotals warm_after[64], cold_after[64];
  const std::size_t n = warm.canaries().size();
  for (std::size_t c = 0; c < n; ++c) warm_after[c] = warm.canaries().Lifetime(c);
  for (std::size_t i = 600; i < stream.size(); ++i) {
    warm.Feed(stream[i]);
    cold.Feed(stream[i]);
  }
  int differing = 0;
  for (std::size_t c = 0; c < n; ++c) {
    const std::uint64_t warm_hits = warm.canaries().Lifetime(c).page_hits - warm_after[c].page_hits;
    cold_after[c] = cold.canaries().Lifetime(c);
    differing += warm_hits != cold_after[c].page_hits ? 1 : 0;
  }
  // Without the cache contents the continuation is different for most canaries.
  EXPECT_GT(differing, static_cast<int>(n) / 2);
}

// One cache at a time: hits and preemptions request by request after a restore.
TEST(PolicyCheckpointTest, EachPolicyCacheRestoresExactly) {
  const std::vector<Request> stream = Stream(5, 1500);
  LifetimeOptions lifetime;
  lifetime.decode_tokens_per_s = 20;
  const PriorityRules rules = ParsePriorityRules("tenant:a=2,tenant:b=-1").value();
  std::vector<SimRequest> sims(stream.size());
  std::vector<std::uint32_t> categories(stream.size());
  RequestClassifier classifier;
  for (std::size_t i = 0; i < stream.size(); ++i) {
    ApplyLifetime(stream[i], stream[i].timestamp_s, lifetime, &sims[i]);
    sims[i].pages = stream[i].pages;
    const std::string_view cls =
        RequestClassifier::ClassOfTurn(classifier.Observe(stream[i].pages, stream[i].pages.size(), 0));
    sims[i].priority = rules.For(stream[i].tenant, cls);
    sims[i].category = static_cast<std::uint32_t>(i % 7);
  }
  for (PolicyKind kind : kOnline) {
    for (TouchOrder order : {TouchOrder::kTailFirst, TouchOrder::kHeadFirst}) {
      for (std::uint64_t capacity : {std::uint64_t{5}, std::uint64_t{64}}) {
        const std::string what = std::string(PolicyName(kind)) + "@" + std::to_string(capacity) +
                                 (order == TouchOrder::kTailFirst ? " tail-first" : " head-first");
        PolicyOptions po;
        po.kind = kind;
        po.capacity = capacity;
        po.touch_order = order;
        auto a = MakePolicyCache(po).value();
        auto b = MakePolicyCache(po).value();
        const std::size_t cut = 700;
        for (std::size_t i = 0; i < cut; ++i) a->Process(sims[i]);
        std::vector<std::uint8_t> bytes;
        a->Serialize(&bytes);
        std::span<const std::uint8_t> in(bytes);
        ASSERT_TRUE(b->Deserialize(&in)) << what;
        EXPECT_TRUE(in.empty()) << what;
        EXPECT_EQ(a->resident(), b->resident()) << what;
        int checked = 0;
        for (std::size_t i = cut; i < sims.size(); ++i) {
          const SimOutcome x = a->Process(sims[i]);
          const SimOutcome y = b->Process(sims[i]);
          ASSERT_EQ(x.hits, y.hits) << what << " request " << i;
          ASSERT_EQ(x.preempted, y.preempted) << what << " request " << i;
          ASSERT_EQ(x.preempted_running, y.preempted_running) << what << " request " << i;
          ASSERT_EQ(a->resident(), b->resident()) << what << " request " << i;
          checked += x.hits > 0 ? 1 : 0;
        }
        EXPECT_GT(checked, 0) << what << ": the continuation never hit";
      }
    }
  }
}

// sglang and vllm: the running requests' holdings are written beside the core's
// hold counts and must agree. The checkpoint ends with the newest request's last
// held slot; naming another slot there leaves one slot held once too often and one
// once too few, which a restore refuses (the untouched bytes restore).
TEST(PolicyCheckpointTest, LifetimeHoldingsThatDisagreeWithTheCoreAreRefused) {
  const std::vector<Request> stream = Stream(8, 400);
  LifetimeOptions lifetime;
  lifetime.decode_tokens_per_s = 20;
  for (PolicyKind kind : {PolicyKind::kSglang, PolicyKind::kVllm}) {
    PolicyOptions po;
    po.kind = kind;
    po.capacity = 64;
    auto a = MakePolicyCache(po).value();
    for (const Request& r : stream) {
      SimRequest sim;
      ApplyLifetime(r, r.timestamp_s, lifetime, &sim);
      sim.pages = r.pages;
      a->Process(sim);
    }
    ASSERT_FALSE(stream.back().pages.empty());
    std::vector<std::uint8_t> bytes;
    a->Serialize(&bytes);
    std::span<const std::uint8_t> in(bytes);
    EXPECT_TRUE(MakePolicyCache(po).value()->Deserialize(&in)) << PolicyName(kind);
    std::uint32_t last = 0;
    std::memcpy(&last, bytes.data() + bytes.size() - sizeof(last), sizeof(last));
    ASSERT_LT(last, po.capacity) << PolicyName(kind);
    const std::uint32_t other = last == 0 ? 1 : last - 1;
    std::memcpy(bytes.data() + bytes.size() - sizeof(other), &other, sizeof(other));
    in = std::span<const std::uint8_t>(bytes);
    EXPECT_FALSE(MakePolicyCache(po).value()->Deserialize(&in)) << PolicyName(kind);
  }
}

TEST(PolicyCheckpointTest, RefusesTruncatedBytesAndStaysUnchanged) {
  const std::vector<Request> stream = Stream(6, 300);
  Driver d(Options());
  for (const Request& r : stream) d.Feed(r);
  const std::vector<std::uint8_t> bytes = Bytes(d.canaries());

  Driver target(Options());
  for (std::size_t i = 0; i < 40; ++i) target.Feed(stream[i]);
  const std::vector<std::uint8_t> before = Bytes(target.canaries());
  // Every length short of the whole, at a stride that still visits every section.
  for (std::size_t len = 0; len < bytes.size(); len += (len < 4096 ? 1 : 37)) {
    std::span<const std::uint8_t> in(bytes.data(), len);
    ASSERT_FALSE(target.canaries().Deserialize(&in)) << "length " << len << " of " << bytes.size();
  }
  EXPECT_EQ(Bytes(target.canaries()), before);
}

TEST(PolicyCheckpointTest, RefusesGarbageAndHugeCounts) {
  auto c = PolicyCanaries::Create(Options()).value();
  const std::vector<std::uint8_t> before = Bytes(*c);
  std::mt19937_64 rng(7);
  for (int k = 0; k < 200; ++k) {
    std::vector<std::uint8_t> garbage(rng() % 4096);
    for (auto& b : garbage) b = static_cast<std::uint8_t>(rng());
    std::span<const std::uint8_t> in(garbage);
    EXPECT_FALSE(c->Deserialize(&in));
  }
  // A valid header and options, then a classifier count of 2^60: refused by the
  // count check (an allocation of that size would abort the test).
  std::vector<std::uint8_t> bytes = before;
  const std::size_t options_size = [&] {
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data() + 8, sizeof(n));
    return static_cast<std::size_t>(n);
  }();
  const std::uint64_t huge = std::uint64_t{1} << 60;
  std::memcpy(bytes.data() + 16 + options_size, &huge, sizeof(huge));
  std::span<const std::uint8_t> in(bytes);
  EXPECT_FALSE(c->Deserialize(&in));
  EXPECT_EQ(Bytes(*c), before);
}

TEST(PolicyCheckpointTest, RefusesBytesOfOtherOptions) {
  const std::vector<Request> stream = Stream(8, 200);
  Driver d(Options());
  for (const Request& r : stream) d.Feed(r);
  const std::vector<std::uint8_t> bytes = Bytes(d.canaries());
  std::vector<CanaryOptions> others(7, Options());
  others[0].capacities = {6, 30, 121};
  others[1].policies = {PolicyKind::kLru};
  others[2].windows_s = {60, 3600};
  others[3].touch_order = TouchOrder::kHeadFirst;
  others[4].coverage_share = 1.0;
  others[5].priorities = ParsePriorityRules("tenant:a=3").value();
  others[6].s3fifo_promotion_hits = 2;
  for (std::size_t k = 0; k < others.size(); ++k) {
    auto c = PolicyCanaries::Create(others[k]).value();
    std::span<const std::uint8_t> in(bytes);
    EXPECT_FALSE(c->Deserialize(&in)) << "options variant " << k;
  }
  auto same = PolicyCanaries::Create(Options()).value();
  std::span<const std::uint8_t> in(bytes);
  EXPECT_TRUE(same->Deserialize(&in));
}

// Every byte of every cache's checkpoint set to 0xff (and to 0x00 after a 0xff):
// either refused, or a cache that keeps running.
TEST(PolicyCheckpointTest, CorruptCacheBytesAreRefusedOrHarmless) {
  const std::vector<Request> stream = Stream(9, 400);
  LifetimeOptions lifetime;
  lifetime.decode_tokens_per_s = 20;
  std::vector<SimRequest> sims(stream.size());
  for (std::size_t i = 0; i < stream.size(); ++i) {
    ApplyLifetime(stream[i], stream[i].timestamp_s, lifetime, &sims[i]);
    sims[i].pages = stream[i].pages;
    sims[i].category = static_cast<std::uint32_t>(i % 3);
    sims[i].priority = static_cast<std::int32_t>(i % 2);
  }
  for (PolicyKind kind : kOnline) {
    PolicyOptions po;
    po.kind = kind;
    po.capacity = 12;
    auto a = MakePolicyCache(po).value();
    for (std::size_t i = 0; i < 300; ++i) a->Process(sims[i]);
    std::vector<std::uint8_t> bytes;
    a->Serialize(&bytes);
    int refused = 0;
    for (std::size_t pos = 0; pos < bytes.size(); ++pos) {
      for (std::uint8_t value : {std::uint8_t{0xff}, std::uint8_t{0x00}}) {
        std::vector<std::uint8_t> bad = bytes;
        if (bad[pos] == value) continue;
        bad[pos] = value;
        auto b = MakePolicyCache(po).value();
        std::span<const std::uint8_t> in(bad);
        if (!b->Deserialize(&in)) {
          ++refused;
          continue;
        }
        for (std::size_t i = 300; i < 330; ++i) b->Process(sims[i]);
        EXPECT_LE(b->resident(), po.capacity) << PolicyName(kind) << " byte " << pos;
      }
    }
    EXPECT_GT(refused, 0) << PolicyName(kind);
  }
}

// The size the header documents: at most 35 bytes a resident page (lru and vllm, a
// slot of their core; vllm plus 4 a running holding), 40 per (window slice, canary), 12 per
// remembered chain. Two policies at capacities of 10,000 and 20,000 pages, full.
// Canaries that never read the derived class (no workload-aware, no priority with
// class rules) skip the classifier: the same totals as beside one that reads it,
// and no chain in their checkpoint.
TEST(PolicyCheckpointTest, CanariesThatIgnoreTheClassSkipTheClassifierAndAgree) {
  CanaryOptions without = Options();
  without.policies = {PolicyKind::kLru, PolicyKind::kSglang, PolicyKind::kVllm, PolicyKind::kS3Fifo,
                      PolicyKind::kPriority};
  without.priorities = ParsePriorityRules("tenant:a=2,tenant:b=-1").value();
  CanaryOptions with = without;
  with.policies.push_back(PolicyKind::kWorkloadAware);
  CanaryOptions class_rules = without;
  class_rules.priorities = Options().priorities;
  Driver a(without), b(with);
  EXPECT_FALSE(a.canaries().uses_class());
  EXPECT_TRUE(b.canaries().uses_class());
  EXPECT_TRUE(PolicyCanaries::Create(class_rules).value()->uses_class());
  for (const Request& r : Stream(21, 3000)) {
    a.Feed(r);
    b.Feed(r);
  }
  for (std::size_t i = 0; i < a.canaries().size(); ++i) {
    const std::string what =
        std::string(PolicyName(a.canaries().kind(i))) + "@" + std::to_string(a.canaries().capacity(i));
    ASSERT_EQ(a.canaries().kind(i), b.canaries().kind(i));
    ExpectSameTotals(a.canaries().Lifetime(i), b.canaries().Lifetime(i), what + " lifetime");
    for (std::size_t w = 0; w < without.windows_s.size(); ++w) {
      ExpectSameTotals(a.canaries().Window(i, w), b.canaries().Window(i, w), what + " window " + std::to_string(w));
    }
  }
  EXPECT_GT(a.canaries().Lifetime(0).page_hits, 0u);
  // The classifier's chain count follows the tag, version and length-prefixed options.
  auto chains = [](const std::vector<std::uint8_t>& bytes) {
    std::uint64_t options = 0, n = 0;
    std::memcpy(&options, bytes.data() + 8, sizeof(options));
    std::memcpy(&n, bytes.data() + 16 + options, sizeof(n));
    return n;
  };
  EXPECT_EQ(chains(Bytes(a.canaries())), 0u);
  EXPECT_GT(chains(Bytes(b.canaries())), 0u);
  // A checkpoint with chains restores into canaries that ignore the class (the
  // options match), which then drop the chains and keep the same totals.
  std::vector<std::uint8_t> bytes = Bytes(a.canaries());
  const std::size_t options_end = 16 + [&] {
    std::uint64_t options = 0;
    std::memcpy(&options, bytes.data() + 8, sizeof(options));
    return static_cast<std::size_t>(options);
  }();
  const std::uint64_t one = 1, page = 77;
  const std::uint32_t turn = 3;
  std::memcpy(bytes.data() + options_end, &one, sizeof(one));
  std::vector<std::uint8_t> chain(sizeof(page) + sizeof(turn));
  std::memcpy(chain.data(), &page, sizeof(page));
  std::memcpy(chain.data() + sizeof(page), &turn, sizeof(turn));
  bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(options_end + sizeof(one)), chain.begin(), chain.end());
  auto restored = PolicyCanaries::Create(without).value();
  std::span<const std::uint8_t> in(bytes);
  ASSERT_TRUE(restored->Deserialize(&in));
  EXPECT_TRUE(in.empty());
  EXPECT_EQ(chains(Bytes(*restored)), 0u);
  ExpectSame(a.canaries(), *restored, "restored");
}

TEST(PolicyCheckpointTest, TypicalCheckpointSizeIsAsDocumented) {
  CanaryOptions o;
  o.policies = {PolicyKind::kLru, PolicyKind::kVllm};
  o.capacities = {10000, 20000};
  o.windows_s = {3600, 86400};
  const std::vector<Request> stream = Stream(10, 30000);
  Driver d(o);
  for (const Request& r : stream) d.Feed(r);
  const std::vector<std::uint8_t> bytes = Bytes(d.canaries());
  std::uint64_t resident = 0;
  for (std::size_t i = 0; i < d.canaries().size(); ++i) resident += d.canaries().capacity(i);
  std::vector<std::uint8_t> classifier;
  RequestClassifier c;
  // Seen prefix unknown (0): every request ends a chain, the largest classifier.
  for (const Request& r : stream) c.Observe(r.pages, r.pages.size(), 0);
  c.Serialize(&classifier);
  const std::size_t windows = 2 * SlidingWindows<int>::kSlicesPerWindow * d.canaries().size() * 40;
  RecordProperty("checkpoint_bytes", static_cast<int>(bytes.size()));
  RecordProperty("classifier_bytes", static_cast<int>(classifier.size()));
  std::printf("canaries checkpoint: %zu bytes (classifier %zu, windows %zu, caches of %llu pages)\n", bytes.size(),
              classifier.size(), windows, static_cast<unsigned long long>(resident));
  EXPECT_LE(bytes.size(), 35 * resident + classifier.size() + windows + 4096);  // lru: 35 a page
  std::span<const std::uint8_t> in(bytes);
  auto restored = PolicyCanaries::Create(o).value();
  EXPECT_TRUE(restored->Deserialize(&in));
}

}  // namespace
}  // namespace kvwatch::curve
