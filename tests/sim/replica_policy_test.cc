// The replica's eviction policies (its pool is a curve::PolicyCore; the policies'
// own hand-worked evictions are in tests/curve/policy_core_test.cc): where vllm's
// one free queue differs from lru, and the pool's accounting under every policy
// and rule on a constrained workload.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <span>

#include "sim/replica.h"

namespace kvwatch::sim {
namespace {

ReplicaRequest One(double arrival, curve::PageId page, std::uint32_t output) {
  ReplicaRequest r;
  r.arrival_s = arrival;
  r.pages = {page};
  r.prompt_tokens = 4;
  r.output_tokens = output;
  return r;
}

std::vector<RequestOutcome> Outcomes(curve::PolicyKind kind, const std::vector<ReplicaRequest>& reqs,
                                     std::uint64_t pool) {
  const LinearStepTime time({1, 0, 0, 0, 0});
  ReplicaOptions o;
  o.pool_blocks = pool;
  o.block_tokens = 4;
  o.eviction = kind;
  std::vector<RequestOutcome> out;
  ReplicaObserver obs;
  obs.outcomes = &out;
  EXPECT_TRUE(SimulateReplicaObserved(o, reqs, time, {}, obs).ok());
  return out;
}

// Page 1 is released before request 2's generated block: vLLM's free queue then
// reuses page 1's block first, lru the empty generated block.
TEST(ReplicaPolicyTest, VllmQueuesEmptyBlocksBehindCachedOnes) {
  const std::vector<ReplicaRequest> reqs = {One(0, 1, 1), One(10, 2, 5), One(100, 4, 1), One(200, 1, 1)};
  EXPECT_EQ(Outcomes(curve::PolicyKind::kLru, reqs, 3)[3].hit_pages, 1u);
  EXPECT_EQ(Outcomes(curve::PolicyKind::kVllm, reqs, 3)[3].hit_pages, 0u);
}

// Under memory pressure, every policy and rule: blocks held plus free blocks make
// the pool at every step, every request finishes, and the prefix cache serves some.
TEST(ReplicaPolicyTest, EveryPolicyAndRuleKeepsThePoolAccountedUnderPressure) {
  std::mt19937_64 rng(42);
  std::exponential_distribution<double> gap(3);
  std::uniform_int_distribution<std::uint32_t> depth(1, 12), child(0, 2), output(1, 200);
  std::vector<ReplicaRequest> reqs;
  double t = 0;
  for (int i = 0; i < 2000; ++i) {
    t += gap(rng);
    ReplicaRequest r;
    r.arrival_s = t;
    std::uint64_t id = 1;
    const std::uint32_t d = depth(rng);
    for (std::uint32_t k = 0; k < d; ++k) {
      id = id * 4 + child(rng) + 1;
      r.pages.push_back(id);
    }
    r.prompt_tokens = d * 16 - 3;  // a partial last page
    r.output_tokens = output(rng);
    reqs.push_back(std::move(r));
  }
  const LinearStepTime time({0.01, 1e-5, 0, 1e-4, 0});
  for (curve::PolicyKind kind : curve::kAllPolicies) {
    for (Admission a : kAllAdmissions) {
      ReplicaOptions o;
      o.pool_blocks = 120;
      o.block_tokens = 16;
      o.max_batched_tokens = 256;
      o.eviction = kind;
      o.admission = a;
      bool accounted = true;
      ReplicaObserver obs;
      obs.on_step = [&](const StepRecord& s) {
        accounted =
            accounted && s.held_blocks + s.free_blocks == o.pool_blocks && s.cached_free_blocks <= s.free_blocks;
      };
      auto r = SimulateReplicaObserved(o, reqs, time, {}, obs);
      ASSERT_TRUE(r.ok()) << r.error();
      const std::string what = std::string(curve::PolicyName(kind)) + "/" + std::string(AdmissionName(a));
      EXPECT_TRUE(accounted) << what;
      EXPECT_EQ(r.value().finished, reqs.size()) << what;
      EXPECT_GT(r.value().prefix_hit_ratio, 0.2) << what;
      EXPECT_LE(r.value().mean_running_blocks + r.value().mean_cached_blocks, 120.0) << what;
    }
  }
}

}  // namespace
}  // namespace kvwatch::sim

namespace kvwatch::sim {
namespace {

// A request holds its whole prefix and releases its tail first, so a free block is
// never released later than its free children: lru's victim is always a leaf, the
// least recently released one, which is sglang's choice. The two coincide here
// (curve's sglang differs from its lru by its lifetimes and touch order).
TEST(ReplicaPolicyTest, SglangChoosesAsLruInThisModel) {
  std::mt19937_64 rng(9);
  std::exponential_distribution<double> gap(5);
  std::uniform_int_distribution<std::uint32_t> depth(1, 10), child(0, 3), output(1, 100);
  std::vector<ReplicaRequest> reqs;
  double t = 0;
  for (int i = 0; i < 3000; ++i) {
    t += gap(rng);
    ReplicaRequest r;
    r.arrival_s = t;
    std::uint64_t id = 7;
    const std::uint32_t d = depth(rng);
    for (std::uint32_t k = 0; k < d; ++k) {
      id = id * 5 + child(rng) + 1;
      r.pages.push_back(id);
    }
    r.prompt_tokens = d * 16;
    r.output_tokens = output(rng);
    reqs.push_back(std::move(r));
  }
  const LinearStepTime time({0.01, 1e-5, 0, 1e-4, 0});
  ReplicaOptions o;
  o.pool_blocks = 150;
  o.block_tokens = 16;
  std::vector<RequestOutcome> lru, sglang;
  ReplicaObserver obs;
  obs.outcomes = &lru;
  ASSERT_TRUE(SimulateReplicaObserved(o, reqs, time, {}, obs).ok());
  o.eviction = curve::PolicyKind::kSglang;
  obs.outcomes = &sglang;
  ASSERT_TRUE(SimulateReplicaObserved(o, reqs, time, {}, obs).ok());
  std::uint64_t hits = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(lru[i].hit_pages, sglang[i].hit_pages) << i;
    ASSERT_EQ(lru[i].finish_s, sglang[i].finish_s) << i;
    hits += lru[i].hit_pages;
  }
  EXPECT_GT(hits, reqs.size());
}

}  // namespace
}  // namespace kvwatch::sim
