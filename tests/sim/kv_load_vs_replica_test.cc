// The live KV load factor (curve/kv_load.h, what the agent exports) against the
// simulated replica (sim/replica.h): on a synthetic stream at rising load, greedy
// admission's preemptions must start within 15% of rho = 1 (issue 19's acceptance).
// rho is computed from the stream with the agent's own functions (KvTokenSeconds,
// KvLoadFactor), with the decode rate the replica's step time gives (one token per
// sequence per step) and its pool as the capacity.
//
// Scale matters: rho is a mean, and greedy admission preempts as soon as the KV the
// running requests hold touches the pool. With Poisson arrivals that KV fluctuates
// by about 1/sqrt(concurrency) around rho, so the first preemption comes below
// rho = 1 by a few of those. Measured with this stream: a pool of 2,000 blocks
// (about 100 requests running at rho 1) first preempts at rho 0.75; a pool of
// 20,000 (about 800 running, a large replica's batch) at rho 0.95. The test uses
// the second; docs/tenants.md states both.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "curve/kv_load.h"
#include "sim/replica.h"

namespace kvwatch::sim {
namespace {

constexpr std::uint32_t kBlock = 16;
constexpr std::uint64_t kPool = 20000;  // blocks: 320,000 tokens, some 800 requests at rho 1
constexpr double kStepS = 0.01;         // every step 10 ms: 100 tokens/s per sequence
constexpr std::uint32_t kRequests = 16000;

struct Stream {
  std::vector<ReplicaRequest> requests;
  double rho = 0;
};

// Poisson arrivals at `rate`, prompts of 128..384 tokens and outputs of 64..192
// (uniform), every prompt its own pages (no prefix sharing: rho is exact, not an
// upper bound). The same seed at every rate: only the arrival times scale.
Stream MakeStream(double rate) {
  std::mt19937_64 rng(20261202);
  auto uniform = [&rng]() { return (static_cast<double>(rng() >> 11) + 0.5) / 9007199254740992.0; };
  Stream s;
  double t = 0;
  double token_seconds = 0;
  curve::PageId next_page = 1;
  for (std::uint32_t i = 0; i < kRequests; ++i) {
    t += -std::log(uniform()) / rate;
    ReplicaRequest r;
    r.arrival_s = t;
    r.prompt_tokens = 128 + static_cast<std::uint32_t>(uniform() * 257);
    r.output_tokens = 64 + static_cast<std::uint32_t>(uniform() * 129);
    for (std::uint32_t p = 0; p < (r.prompt_tokens + kBlock - 1) / kBlock; ++p) r.pages.push_back(next_page++);
    // The prompt is computed in one step (the budget covers it), then one token per step.
    token_seconds += curve::KvTokenSeconds(r.prompt_tokens, r.output_tokens, 1 / kStepS, kStepS);
    s.requests.push_back(std::move(r));
  }
  const double arrivals_per_s = kRequests / t;
  s.rho = curve::KvLoadFactor(arrivals_per_s, token_seconds / kRequests, static_cast<double>(kPool * kBlock));
  return s;
}

TEST(KvLoadVersusReplicaTest, GreedyPreemptionsStartWithin15PercentOfRhoOne) {
  ReplicaOptions options;
  options.pool_blocks = kPool;
  options.block_tokens = kBlock;
  options.max_batched_tokens = 8192;
  options.max_running = 4096;  // memory, not the sequence cap, is what binds
  options.admission = Admission::kGreedy;
  const LinearStepTime time(LinearStepCoefficients{kStepS, 0, 0, 0, 0});

  double first_rho_with_preemptions = NAN;
  double last_rho = 0;
  std::uint64_t preemptions_at_top = 0;
  for (double rate = 400; rate <= 1200; rate += 20) {
    const Stream s = MakeStream(rate);
    base::Result<SimSummary> summary = SimulateReplica(options, s.requests, time);
    ASSERT_TRUE(summary.ok()) << summary.error();
    std::printf("rate %5.1f/s  rho %.3f  preemptions %llu\n", rate, s.rho,
                static_cast<unsigned long long>(summary.value().preemptions));
    ASSERT_GT(s.rho, last_rho);  // rho rises with the rate
    last_rho = s.rho;
    if (summary.value().preemptions > 0 && std::isnan(first_rho_with_preemptions)) first_rho_with_preemptions = s.rho;
    preemptions_at_top = summary.value().preemptions;
  }
  ASSERT_FALSE(std::isnan(first_rho_with_preemptions)) << "no preemptions up to rho " << last_rho;
  RecordProperty("first_rho_with_preemptions", std::to_string(first_rho_with_preemptions));
  EXPECT_GE(first_rho_with_preemptions, 0.85);
  EXPECT_LE(first_rho_with_preemptions, 1.15);
  // Past the limit the replica keeps preempting: rho above 1 is not a fluke.
  EXPECT_GT(last_rho, 1.2);
  EXPECT_GT(preemptions_at_top, 10u);
}

}  // namespace
}  // namespace kvwatch::sim
