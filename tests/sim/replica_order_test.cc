// Every eviction policy's order exists once, in the policy core
// (curve/policy_core_*.cc). The replica drives it holding a running request's blocks
// (its prompt, then its generated tokens) until the request finishes; replay drives
// it one page at a time, each reference a hold and a release at once. These are
// per-policy properties of the replica's driving, each a fact about one policy:
//   - one-page prompts, one request in flight, instant compute: the replica's order
//     of events (the hit held, or the missing page's block chosen, then released) is
//     replay's, so the hits are replay's, request by request;
//   - longer prompts, one request in flight: replay may evict a page of the request
//     it is processing to admit the next one, which a replica holding the request's
//     KV cannot; how far that moves each policy is stated per policy below;
//   - unlimited memory: nothing is evicted, so every policy's hit ratio is replay's.
// sglang and vllm drive the core from their lifetime model (curve/policy_lifetime.h):
// replay's requests (no timestamps here) finish before the next arrives, so one at a
// time the properties hold for them too. Every other policy's replay is its core
// order driven one page at a time.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <unordered_map>

#include "curve/policy.h"
#include "sim/replica.h"

namespace kvwatch::sim {
namespace {

constexpr std::uint32_t kBlock = 16;

// Requests on a prefix tree: each walks down `depth` levels, taking child j with
// probability ~ 1/(j+1) of `fanout`; page ids name the path. Prompts are whole pages.
std::vector<ReplicaRequest> TreeTrace(std::uint32_t n, std::uint32_t max_depth, std::uint32_t fanout, double gap_s,
                                      std::uint32_t max_output, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> w;
  for (std::uint32_t j = 0; j < fanout; ++j) w.push_back(1.0 / (j + 1));
  std::discrete_distribution<std::uint32_t> child(w.begin(), w.end());
  std::uniform_int_distribution<std::uint32_t> depth(1, max_depth), output(1, max_output);
  std::vector<ReplicaRequest> reqs;
  for (std::uint32_t i = 0; i < n; ++i) {
    ReplicaRequest r;
    r.arrival_s = gap_s * i;
    std::uint64_t id = 0x9e3779b97f4a7c15ull;
    const std::uint32_t d = depth(rng);
    for (std::uint32_t k = 0; k < d; ++k) {
      id = (id ^ (child(rng) + 1)) * 0xff51afd7ed558ccdull;
      id ^= id >> 29;
      r.pages.push_back(id);
    }
    r.prompt_tokens = d * kBlock;
    r.output_tokens = output(rng);
    reqs.push_back(std::move(r));
  }
  return reqs;
}

// Per-request hits of the replica (leading pages found at admission).
std::vector<std::uint32_t> ReplicaHits(const ReplicaOptions& o, const std::vector<ReplicaRequest>& reqs) {
  const LinearStepTime instant({1e-9, 0, 0, 0, 0});
  std::vector<RequestOutcome> outcomes;
  ReplicaObserver obs;
  obs.outcomes = &outcomes;
  auto r = SimulateReplicaObserved(o, reqs, instant, {}, obs);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error());
  std::vector<std::uint32_t> hits;
  for (const RequestOutcome& out : outcomes) hits.push_back(out.hit_pages);
  return hits;
}

// TreeTrace with priorities 0..2 and classes 0..3 drawn per first page (so that a
// subtree has a typical class and priority, as a tenant would).
std::vector<ReplicaRequest> KeyedTreeTrace(std::uint32_t n, std::uint32_t max_depth, std::uint32_t fanout,
                                           std::uint64_t seed) {
  auto reqs = TreeTrace(n, max_depth, fanout, 1.0, 1, seed);
  std::mt19937_64 rng(seed * 7 + 1);
  std::uniform_int_distribution<int> coin(0, 9);
  for (ReplicaRequest& r : reqs) {
    const std::uint64_t root = r.pages.front();
    r.class_id = static_cast<std::uint32_t>(root % 4);
    if (coin(rng) == 0) r.class_id = (r.class_id + 1) % 4;  // some noise
    r.priority = static_cast<std::int32_t>((root >> 8) % 3);
  }
  return reqs;
}

// Replay's hits (curve::MakePolicyCache, the same order driven one page at a time),
// with what the policies read from a request: its priority (priority), its category
// (workload-aware) and each page's next use (belady: numbered as
// curve/policy_replay.cc's ComputeNextUse numbers touches, tail first).
std::vector<std::uint32_t> ReplayHits(curve::PolicyKind kind, std::uint64_t capacity,
                                      const std::vector<ReplicaRequest>& reqs) {
  std::vector<std::vector<std::uint64_t>> next(reqs.size());
  std::uint64_t g = 0;
  for (const ReplicaRequest& r : reqs) g += r.pages.size();
  std::unordered_map<curve::PageId, std::uint64_t> later;
  for (std::size_t i = reqs.size(); i-- > 0;) {
    const auto& pages = reqs[i].pages;
    next[i].assign(pages.size(), curve::kNeverUsed);
    for (std::size_t pos = 0; pos < pages.size(); ++pos) {  // touches backwards: tail first forwards
      --g;
      auto it = later.find(pages[pos]);
      if (it != later.end()) next[i][pos] = it->second;
      later[pages[pos]] = g;
    }
  }
  curve::PolicyOptions po;
  po.kind = kind;
  po.capacity = capacity;
  auto cache = curve::MakePolicyCache(po);
  EXPECT_TRUE(cache.ok());
  std::vector<std::uint32_t> hits;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    curve::SimRequest s;
    s.pages = reqs[i].pages;
    s.priority = reqs[i].priority;
    s.category = reqs[i].class_id;
    s.next_use = next[i];
    hits.push_back(cache.value()->Process(s).hits);
  }
  return hits;
}

ReplicaOptions Pool(curve::PolicyKind kind, std::uint64_t blocks) {
  ReplicaOptions o;
  o.pool_blocks = blocks;
  o.block_tokens = kBlock;
  o.eviction = kind;
  return o;
}

struct Agreement {
  std::uint64_t differ = 0, replica = 0, replay = 0;
};

Agreement Compare(curve::PolicyKind kind, std::uint64_t capacity, const std::vector<ReplicaRequest>& reqs) {
  const auto sim = ReplicaHits(Pool(kind, capacity), reqs);
  const auto ref = ReplayHits(kind, capacity, reqs);
  Agreement a;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    a.differ += sim[i] != ref[i] ? 1 : 0;
    a.replica += sim[i];
    a.replay += ref[i];
  }
  return a;
}

std::string Name(const ::testing::TestParamInfo<curve::PolicyKind>& info) {
  std::string name(curve::PolicyName(info.param));
  std::erase(name, '-');
  return name;
}

// Every policy: its replay drives its core order.
constexpr curve::PolicyKind kOneOrder[] = {
    curve::PolicyKind::kLru,           curve::PolicyKind::kFifo,   curve::PolicyKind::kLfu,
    curve::PolicyKind::kArc,           curve::PolicyKind::kS3Fifo, curve::PolicyKind::kPriority,
    curve::PolicyKind::kWorkloadAware, curve::PolicyKind::kBelady, curve::PolicyKind::kSieve,
    curve::PolicyKind::kSglang,        curve::PolicyKind::kVllm};

class ReplicaOrderTest : public ::testing::TestWithParam<curve::PolicyKind> {};

TEST_P(ReplicaOrderTest, OnePagePromptsOneAtATimeGiveReplaysHits) {
  const curve::PolicyKind kind = GetParam();
  for (std::uint64_t capacity : {4, 16}) {
    const auto reqs = KeyedTreeTrace(4000, 1, 40, 5 + capacity);
    const Agreement a = Compare(kind, capacity, reqs);
    EXPECT_EQ(a.differ, 0u) << "capacity " << capacity;
    EXPECT_EQ(a.replica, a.replay) << "capacity " << capacity;
    EXPECT_GT(a.replay, 500u) << "capacity " << capacity;  // the trace does reuse
  }
  // The policy's own order decides here: lru's hits are not its (a key that is not
  // read, or an order not driven, would pass the above as lru). Not for sglang and
  // vllm: with one-page prompts and no lifetimes they are lru (every page a leaf,
  // the free queue lru's); PolicyTest tells them apart with overlapping lifetimes.
  if (kind != curve::PolicyKind::kLru && kind != curve::PolicyKind::kSglang && kind != curve::PolicyKind::kVllm) {
    const auto reqs = KeyedTreeTrace(4000, 1, 40, 9);
    EXPECT_NE(ReplayHits(kind, 4, reqs), ReplayHits(curve::PolicyKind::kLru, 4, reqs));
  }
}

// Longer prompts (up to 8 pages) one at a time. lru: the replica releases a request's
// blocks tail first, so its prefix outlives its tail, as replay's tail-first touch
// order does: equal at every capacity. priority with one level is lru. sglang and
// vllm: replay's lifetime model holds the whole request while it runs and releases it
// tail first, as the replica does: equal at every capacity too. fifo, arc,
// lfu, workload-aware, belady, sieve: where a request is small against the pool (64
// blocks) replay's evicting the request's own pages rarely matters: fewer than 5% of
// the requests differ, the hits within 1% (fifo: 3% and 1% at 8, 20 and 64 blocks). (With 8 or 20 blocks they part:
// belady at 8 blocks gets 40% fewer hits, as replay's belady drops a request's never-reused pages as it goes. priority
// with levels parts even at 64: a low-priority request's pages are the lowest level, so replay evicts them to admit its
// next pages, while the replica must evict other blocks.) sieve's queue is in the order pages were computed: the
// replica computes a request's missing pages in prefix order, replay admits them tail first, so a request's new pages
// sit in opposite orders and the hand meets them so: at 64 blocks 18% of the requests differ, the hits within 1.4%
// (bounds 20% and 2%).
TEST_P(ReplicaOrderTest, LongerPromptsOneAtATime) {
  const curve::PolicyKind kind = GetParam();
  if (kind == curve::PolicyKind::kLru || kind == curve::PolicyKind::kPriority || kind == curve::PolicyKind::kSglang ||
      kind == curve::PolicyKind::kVllm) {
    for (std::uint64_t capacity : {8, 20, 64}) {
      auto reqs = KeyedTreeTrace(4000, 8, 4, 11 + capacity);
      for (ReplicaRequest& r : reqs) r.priority = 3;  // priority: one level
      const Agreement a = Compare(kind, capacity, reqs);
      EXPECT_EQ(a.differ, 0u) << capacity;
      EXPECT_GT(a.replay, reqs.size() / 2) << capacity;
    }
    return;
  }
  if (kind == curve::PolicyKind::kFifo) {  // also at small pools: the replica requeues a held head as replay re-admits
    for (std::uint64_t capacity : {8, 20, 64}) {
      const auto reqs = KeyedTreeTrace(4000, 8, 4, 11 + capacity);
      const Agreement a = Compare(kind, capacity, reqs);
      EXPECT_LT(a.differ, reqs.size() * 3 / 100) << capacity;
      EXPECT_NEAR(static_cast<double>(a.replica) / static_cast<double>(a.replay), 1, 0.01) << capacity;
    }
    return;
  }
  const auto reqs = KeyedTreeTrace(4000, 8, 4, 75);
  const Agreement a = Compare(kind, 64, reqs);
  if (kind == curve::PolicyKind::kSieve) {
    EXPECT_LT(a.differ, reqs.size() * 20 / 100);
    EXPECT_NEAR(static_cast<double>(a.replica) / static_cast<double>(a.replay), 1, 0.02);
    EXPECT_GT(a.differ, 0u);  // the queues' orders do part
    return;
  }
  EXPECT_LT(a.differ, reqs.size() * 5 / 100);
  EXPECT_NEAR(static_cast<double>(a.replica) / static_cast<double>(a.replay), 1, 0.01);
  EXPECT_GT(a.replay, reqs.size());
}

INSTANTIATE_TEST_SUITE_P(OneOrder, ReplicaOrderTest, ::testing::ValuesIn(kOneOrder), Name);

// Unlimited memory, instant compute, overlapping requests with output tokens: nothing
// is evicted, so under every policy the prefix hit ratio (tokens) is replay's page
// hit ratio.
class ReplicaUnlimitedTest : public ::testing::TestWithParam<curve::PolicyKind> {};

TEST_P(ReplicaUnlimitedTest, HitRatioIsReplays) {
  const curve::PolicyKind kind = GetParam();
  const auto reqs = TreeTrace(3000, 10, 3, 1e-9, 50, 3);
  std::uint64_t refs = 0;
  for (const ReplicaRequest& r : reqs) refs += r.pages.size();
  const std::uint64_t unlimited = refs + 3000 * 50;
  ReplicaOptions o = Pool(kind, unlimited);
  o.max_running = 100000;
  o.max_batched_tokens = 1 << 24;
  const LinearStepTime instant({1e-9, 0, 0, 0, 0});
  auto r = SimulateReplica(o, reqs, instant);
  ASSERT_TRUE(r.ok()) << r.error();
  const auto ref = ReplayHits(kind, unlimited, reqs);
  std::uint64_t hits = 0;
  for (std::uint32_t h : ref) hits += h;
  EXPECT_GT(hits, refs / 2);
  EXPECT_DOUBLE_EQ(r.value().prefix_hit_ratio, static_cast<double>(hits) / static_cast<double>(refs));
  EXPECT_EQ(r.value().preemptions, 0u);
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, ReplicaUnlimitedTest, ::testing::ValuesIn(curve::kAllPolicies), Name);

}  // namespace
}  // namespace kvwatch::sim
