// The replica on hand-worked schedules (exact step times and states), Little's law
// on its outputs, and its options' checks.
#include "sim/replica.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace kvwatch::sim {
namespace {

ReplicaRequest Req(double arrival, std::vector<curve::PageId> pages, std::uint32_t prompt, std::uint32_t output) {
  ReplicaRequest r;
  r.arrival_s = arrival;
  r.pages = std::move(pages);
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  return r;
}

struct SimRun {
  SimSummary summary;
  std::vector<StepRecord> steps;
  std::vector<RequestOutcome> outcomes;
};

SimRun Simulate(const ReplicaOptions& o, const std::vector<ReplicaRequest>& reqs, const StepTimeModel& time) {
  SimRun run;
  ReplicaObserver obs;
  obs.on_step = [&](const StepRecord& s) { run.steps.push_back(s); };
  obs.outcomes = &run.outcomes;
  auto r = SimulateReplicaObserved(o, reqs, time, {}, obs);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error());
  if (r.ok()) run.summary = r.value();
  return run;
}

// A 10-token prompt in blocks of 4 with a budget of 8: a chunk of 8, then the last
// 2 with the first token, then two decode steps. B arrives during the first step,
// shares A's first two pages (a prefix hit of 8 tokens) and prefills only its last 2.
TEST(ReplicaTest, ChunkedPrefillPrefixHitAndDecodeStepByStep) {
  LinearStepCoefficients c;
  c.fixed_s = 1;
  c.per_prefill_token_s = 0.01;
  c.per_attention_pair_s = 0.001;
  c.per_decode_sequence_s = 0.1;
  c.per_context_token_s = 0.01;
  const LinearStepTime time(c);
  ReplicaOptions o;
  o.pool_blocks = 8;
  o.block_tokens = 4;
  o.max_batched_tokens = 8;
  const std::vector<ReplicaRequest> reqs = {Req(0, {1, 2, 3}, 10, 3), Req(0.5, {1, 2, 13}, 10, 3)};
  const SimRun run = Simulate(o, reqs, time);
  ASSERT_EQ(run.steps.size(), 4u);
  // Step 1: A's first chunk (8 tokens, 2 blocks).
  EXPECT_EQ(run.steps[0].work.prefill_tokens, 8u);
  EXPECT_EQ(run.steps[0].work.prefill_attention_token_pairs, 0u);
  EXPECT_DOUBLE_EQ(run.steps[0].seconds, 1.08);
  EXPECT_EQ(run.steps[0].held_blocks, 2u);
  EXPECT_EQ(run.steps[0].admitted, 1u);
  // Step 2: A's last 2 tokens after 8 in KV, B's last 2 after its 8 hit tokens.
  EXPECT_EQ(run.steps[1].work.prefill_tokens, 4u);
  EXPECT_EQ(run.steps[1].work.prefill_attention_token_pairs, 32u);
  EXPECT_DOUBLE_EQ(run.steps[1].seconds, 1 + 0.04 + 0.032);
  EXPECT_EQ(run.steps[1].held_blocks, 4u);  // pages 1 and 2 shared
  EXPECT_EQ(run.steps[1].running, 2u);
  // Steps 3 and 4: two decodes over 11 and then 12 tokens of context each.
  EXPECT_EQ(run.steps[2].work.decode_sequences, 2u);
  EXPECT_EQ(run.steps[2].work.decode_context_tokens, 22u);
  EXPECT_DOUBLE_EQ(run.steps[2].seconds, 1 + 0.2 + 0.22);
  EXPECT_DOUBLE_EQ(run.steps[3].seconds, 1 + 0.2 + 0.24);
  EXPECT_EQ(run.steps[3].finished, 2u);
  const double t1 = 1.08, t2 = t1 + 1.072, t3 = t2 + 1.42, t4 = t3 + 1.44;
  EXPECT_DOUBLE_EQ(run.outcomes[0].first_token_s, t2);
  EXPECT_DOUBLE_EQ(run.outcomes[1].first_token_s, t2);
  EXPECT_DOUBLE_EQ(run.outcomes[0].finish_s, t4);
  EXPECT_EQ(run.outcomes[0].hit_pages, 0u);
  EXPECT_EQ(run.outcomes[1].hit_pages, 2u);
  EXPECT_EQ(run.outcomes[1].hit_tokens, 8u);
  EXPECT_DOUBLE_EQ(run.summary.simulated_s, t4);
  EXPECT_DOUBLE_EQ(run.summary.prefix_hit_ratio, 8.0 / 20.0);
  EXPECT_EQ(run.summary.finished, 2u);
  EXPECT_EQ(run.summary.preemptions, 0u);
  EXPECT_DOUBLE_EQ(run.summary.output_tokens_per_s, 6 / t4);
  // TTFT: A t2, B t2 - 0.5 (nearest rank: p50 of two is the smaller).
  EXPECT_DOUBLE_EQ(run.summary.ttft.p50, t2 - 0.5);
  EXPECT_DOUBLE_EQ(run.summary.ttft.p99, t2);
  // ITL: 1.42 twice, 1.44 twice.
  EXPECT_DOUBLE_EQ(run.summary.itl.p50, 1.42);
  EXPECT_DOUBLE_EQ(run.summary.itl.p90, 1.44);
  EXPECT_EQ(run.summary.steps, 4u);
  // Blocks: A's 3 blocks from step 2 on, B's 1 more; the mean over the run.
  EXPECT_NEAR(run.summary.mean_running_blocks, (2 * 1.08 + 4 * (t4 - t1)) / t4, 1e-12);
  // After both finish their 3 distinct pages stay cached; nothing cached before.
  EXPECT_DOUBLE_EQ(run.summary.mean_cached_blocks, 0);
}

// Pool of 5 blocks of 4 tokens, one-second steps. A and B (8-token prompts, 6
// output tokens) both fit at first (4 blocks); at step 2 each needs a third block
// and only one is free: A takes it and B, the newest, preempts itself. B cannot come
// back (its 2 cached pages plus a block for its generated token: 3 > 2 free) until A
// finishes; A's fourth block at step 6 evicts B's page 22 (released first, so least
// recently), so B gets back only its first page and recomputes the other 4 tokens
// at step 7. C (arrived at 0.5) waits behind B and times out after 2.5 s at step 5.
TEST(ReplicaTest, PreemptionByRecomputeEvictionAndTimeout) {
  LinearStepCoefficients c;
  c.fixed_s = 1;
  const LinearStepTime time(c);
  ReplicaOptions o;
  o.pool_blocks = 5;
  o.block_tokens = 4;
  o.max_batched_tokens = 64;
  o.queue_timeout_s = 2.5;
  const std::vector<ReplicaRequest> reqs = {Req(0, {11, 12}, 8, 6), Req(0, {21, 22}, 8, 6), Req(0.5, {31, 32}, 8, 1)};
  const SimRun run = Simulate(o, reqs, time);
  ASSERT_EQ(run.steps.size(), 11u);
  EXPECT_EQ(run.steps[0].admitted, 2u);
  EXPECT_EQ(run.steps[0].work.prefill_tokens, 16u);
  EXPECT_EQ(run.steps[1].preempted, 1u);
  EXPECT_EQ(run.steps[1].admitted, 0u);
  EXPECT_EQ(run.steps[1].work.decode_sequences, 1u);
  EXPECT_EQ(run.steps[1].running, 1u);
  EXPECT_EQ(run.steps[1].waiting, 2u);  // B first, then C
  EXPECT_EQ(run.steps[1].cached_free_blocks, 2u);
  for (int k = 2; k < 5; ++k) EXPECT_EQ(run.steps[k].admitted, 0u) << k;
  EXPECT_EQ(run.steps[4].waiting, 1u);  // C rejected at the start of step 5 (t = 4)
  EXPECT_EQ(run.steps[5].held_blocks, 4u);
  EXPECT_EQ(run.steps[5].cached_free_blocks, 1u);  // page 21 left; 22 evicted
  EXPECT_EQ(run.steps[5].finished, 1u);
  EXPECT_EQ(run.steps[6].admitted, 1u);
  EXPECT_EQ(run.steps[6].work.prefill_tokens, 5u);  // page 22's 4 tokens and the generated one
  EXPECT_EQ(run.steps[6].work.prefill_attention_token_pairs, 20u);
  for (int k = 7; k < 11; ++k) EXPECT_EQ(run.steps[k].work.decode_sequences, 1u) << k;
  EXPECT_EQ(run.outcomes[0].finish_s, 6);
  EXPECT_EQ(run.outcomes[1].first_token_s, 1);
  EXPECT_EQ(run.outcomes[1].finish_s, 11);
  EXPECT_EQ(run.outcomes[1].preemptions, 1u);
  EXPECT_EQ(run.outcomes[1].recomputed_tokens, 4u);
  EXPECT_TRUE(run.outcomes[2].rejected);
  EXPECT_EQ(run.outcomes[2].finish_s, 4);
  EXPECT_EQ(run.summary.preemptions, 1u);
  EXPECT_EQ(run.summary.recomputed_tokens, 4u);
  EXPECT_EQ(run.summary.rejected, 1u);
  EXPECT_EQ(run.summary.finished, 2u);
  EXPECT_DOUBLE_EQ(run.summary.simulated_s, 11);
  // ITL of B: 6 s across the preemption, then 1 s; A: 1 s each.
  EXPECT_DOUBLE_EQ(run.summary.itl.p99, 6);
  EXPECT_DOUBLE_EQ(run.summary.itl.p90, 1);
  // In the system: A 6 s, B 11 s, C 3.5 s.
  EXPECT_DOUBLE_EQ(run.summary.mean_in_system, (6 + 11 + 3.5) / 11);
}

TEST(ReplicaTest, RequestLargerThanThePoolIsRejectedOnArrival) {
  const LinearStepTime time({1, 0, 0, 0, 0});
  ReplicaOptions o;
  o.pool_blocks = 2;
  o.block_tokens = 4;
  const std::vector<ReplicaRequest> reqs = {Req(0, {1, 2}, 8, 2), Req(1, {3}, 4, 1)};
  const SimRun run = Simulate(o, reqs, time);
  EXPECT_TRUE(run.outcomes[0].rejected);
  EXPECT_TRUE(run.outcomes[1].finished);
  EXPECT_EQ(run.summary.rejected, 1u);
}

TEST(ReplicaTest, TierAttainmentCountsBothTargetsAndRejections) {
  const LinearStepTime time({1, 0, 0, 0, 0});
  ReplicaOptions o;
  o.pool_blocks = 100;
  o.block_tokens = 4;
  o.tiers = {{"fast", 1.5, 1.0}, {"slow", 10, 0.5}};
  std::vector<ReplicaRequest> reqs = {Req(0, {1}, 4, 3), Req(0, {2}, 4, 3)};
  reqs[1].tier = 1;
  const SimRun run = Simulate(o, reqs, time);
  ASSERT_EQ(run.summary.tiers.size(), 2u);
  // Both: first token at 1 s, then 1 s per token.
  EXPECT_EQ(run.summary.tiers[0].met, 1u);
  EXPECT_DOUBLE_EQ(run.summary.tiers[0].attainment, 1);
  EXPECT_EQ(run.summary.tiers[1].met, 0u);  // TPOT 1 s > 0.5 s
  EXPECT_DOUBLE_EQ(run.summary.tiers[1].attainment, 0);
  EXPECT_DOUBLE_EQ(run.summary.tiers[1].ttft.p50, 1);
}

TEST(ReplicaTest, QueueOrderByTierAndPriority) {
  const LinearStepTime time({1, 0, 0, 0, 0});
  ReplicaOptions o;
  o.pool_blocks = 100;
  o.block_tokens = 4;
  o.max_running = 1;
  o.tiers = {{"a", 100, 100}, {"b", 100, 100}};
  std::vector<ReplicaRequest> reqs = {Req(0, {1}, 4, 1), Req(0, {2}, 4, 1), Req(0, {3}, 4, 1)};
  reqs[0].tier = 1;
  reqs[1].priority = -1;
  reqs[2].priority = 5;
  std::vector<RequestOutcome> outcomes;
  ReplicaObserver obs;
  obs.outcomes = &outcomes;
  o.queue_order = QueueOrder::kTier;
  ASSERT_TRUE(SimulateReplicaObserved(o, reqs, time, {}, obs).ok());
  EXPECT_EQ(outcomes[1].finish_s, 1);
  EXPECT_EQ(outcomes[2].finish_s, 2);
  EXPECT_EQ(outcomes[0].finish_s, 3);
  o.queue_order = QueueOrder::kPriority;
  ASSERT_TRUE(SimulateReplicaObserved(o, reqs, time, {}, obs).ok());
  EXPECT_EQ(outcomes[2].finish_s, 1);
  EXPECT_EQ(outcomes[0].finish_s, 2);
  EXPECT_EQ(outcomes[1].finish_s, 3);
  o.queue_order = QueueOrder::kArrival;
  ASSERT_TRUE(SimulateReplicaObserved(o, reqs, time, {}, obs).ok());
  EXPECT_EQ(outcomes[0].finish_s, 1);
  EXPECT_EQ(outcomes[1].finish_s, 2);
}

std::vector<ReplicaRequest> RandomWorkload(std::uint32_t n, double rate, std::uint32_t block_tokens,
                                           std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::uniform_int_distribution<std::uint32_t> prompt(1, 600), output(1, 300), shared(0, 4), conv(0, 50);
  std::vector<ReplicaRequest> reqs;
  double t = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    t += gap(rng);
    ReplicaRequest r;
    r.arrival_s = t;
    r.prompt_tokens = prompt(rng);
    r.output_tokens = output(rng);
    const std::uint32_t pages = (r.prompt_tokens + block_tokens - 1) / block_tokens;
    const std::uint64_t c = conv(rng);
    const std::uint32_t common = std::min(pages, shared(rng));
    for (std::uint32_t k = 0; k < pages; ++k) {
      r.pages.push_back(k < common ? (c << 32) + k + 1 : (std::uint64_t{i + 1} << 40) + k);
    }
    r.class_id = static_cast<std::uint32_t>(c % 3);
    reqs.push_back(std::move(r));
  }
  return reqs;
}

// Little's law on the outputs: the time-averaged number in the system (integrated
// over the steps) equals the departure rate times the mean time in the system (from
// each request's own record), with and without requests timing out.
TEST(ReplicaTest, LittlesLawHoldsOnARandomWorkload) {
  const LinearStepTime time({0.01, 2e-5, 1e-9, 1e-4, 1e-7});
  for (double timeout : {std::numeric_limits<double>::infinity(), 0.2}) {
    for (Admission a : kAllAdmissions) {
      ReplicaOptions o;
      o.pool_blocks = 400;
      o.block_tokens = 16;
      o.max_batched_tokens = 1024;
      o.admission = a;
      o.queue_timeout_s = timeout;
      const auto reqs = RandomWorkload(3000, 4, o.block_tokens, 7);
      const SimRun run = Simulate(o, reqs, time);
      double latency = 0;
      for (std::size_t i = 0; i < reqs.size(); ++i) latency += run.outcomes[i].finish_s - reqs[i].arrival_s;
      const double mean_latency = latency / static_cast<double>(reqs.size());
      const double throughput = static_cast<double>(reqs.size()) / run.summary.simulated_s;
      const std::string what = std::string(AdmissionName(a)) + " timeout " + std::to_string(timeout);
      EXPECT_EQ(run.summary.finished + run.summary.rejected, reqs.size()) << what;
      if (std::isinf(timeout)) {
        EXPECT_EQ(run.summary.rejected, 0u) << what;
      } else {
        EXPECT_GT(run.summary.rejected, 0u) << what;  // the timeout does bite
      }
      EXPECT_GT(run.summary.mean_in_system, 1) << what;
      EXPECT_NEAR(run.summary.mean_in_system / (throughput * mean_latency), 1, 0.01) << what;
      // The summary's own mean time in system is the same W, and its parts add up.
      const MeanLatency& m = run.summary.mean_latency;
      EXPECT_NEAR(m.in_system / mean_latency, 1, 1e-9) << what;
      EXPECT_NEAR(run.summary.mean_in_system / (throughput * m.in_system), 1, 0.01) << what;
      EXPECT_NEAR(m.queue_wait + m.prefill + m.decode, m.finished, 1e-9) << what;
      EXPECT_GT(m.queue_wait, 0) << what;
      EXPECT_GT(m.prefill, 0) << what;
      EXPECT_GT(m.decode, 0) << what;
    }
  }
}

// A request of 0 output tokens (a trace's output_length 0) computes its prompt and
// leaves at the end of that step without a token; its pages stay cached for the
// next request. Steps of 1 s; A: 8 prompt tokens (2 blocks of 4), no output; B at
// t = 0.5: the same 2 pages and 4 more tokens, 2 output tokens.
TEST(ReplicaTest, ZeroOutputTokensIsAPrefillOnlyRequest) {
  const LinearStepTime time({1, 0, 0, 0, 0});
  ReplicaOptions o;
  o.pool_blocks = 10;
  o.block_tokens = 4;
  o.tiers = {{"all", 1.5, 1}};
  const std::vector<ReplicaRequest> reqs = {Req(0, {1, 2}, 8, 0), Req(0.5, {1, 2, 3}, 12, 2)};
  const SimRun run = Simulate(o, reqs, time);
  ASSERT_EQ(run.outcomes.size(), 2u);
  // Step 1 (0-1 s): A's prefill; A finishes at 1 s, with no token.
  EXPECT_TRUE(run.outcomes[0].finished);
  EXPECT_DOUBLE_EQ(run.outcomes[0].finish_s, 1);
  EXPECT_DOUBLE_EQ(run.outcomes[0].first_token_s, 1);
  // Step 2 (1-2 s): B hits A's two cached pages and computes its last 4 tokens,
  // first token at 2 s; step 3: its second at 3 s.
  EXPECT_EQ(run.outcomes[1].hit_pages, 2u);
  EXPECT_DOUBLE_EQ(run.outcomes[1].first_admission_s, 1);
  EXPECT_DOUBLE_EQ(run.outcomes[1].first_token_s, 2);
  EXPECT_DOUBLE_EQ(run.outcomes[1].finish_s, 3);
  const SimSummary& s = run.summary;
  EXPECT_EQ(s.finished, 2u);
  EXPECT_EQ(s.steps, 3u);
  EXPECT_DOUBLE_EQ(s.output_tokens_per_s, 2.0 / 3);  // A's output counts 0
  EXPECT_DOUBLE_EQ(s.ttft.p99, 1.5);                 // B's only: A has no first token
  // A meets the TTFT target of 1.5 s with its prefill (1 s); B too (1.5 s).
  ASSERT_EQ(s.tiers.size(), 1u);
  EXPECT_EQ(s.tiers[0].met, 2u);
  // Means: A waits 0, prefills 1, decodes 0; B waits 0.5, prefills 1, decodes 1.
  EXPECT_DOUBLE_EQ(s.mean_latency.queue_wait, 0.25);
  EXPECT_DOUBLE_EQ(s.mean_latency.prefill, 1);
  EXPECT_DOUBLE_EQ(s.mean_latency.ttft, 1.25);
  EXPECT_DOUBLE_EQ(s.mean_latency.decode, 0.5);
  EXPECT_DOUBLE_EQ(s.mean_latency.finished, 1.75);
  EXPECT_DOUBLE_EQ(s.mean_latency.in_system, 1.75);
}

TEST(ReplicaTest, BadOptionsAndRequestsAreErrorsNamingThem) {
  const LinearStepTime time({1, 0, 0, 0, 0});
  ReplicaOptions o;
  o.pool_blocks = 10;
  std::vector<ReplicaRequest> reqs = {Req(1, {1}, 4, 1), Req(0, {2}, 4, 1)};
  auto r = SimulateReplica(o, reqs, time);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("request 1: arrival_s"), std::string::npos) << r.error();
  reqs[1].arrival_s = 2;
  reqs[0].prompt_tokens = 0;
  r = SimulateReplica(o, reqs, time);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("request 0: prompt_tokens"), std::string::npos) << r.error();
  reqs[0].prompt_tokens = 4;
  // Every policy of curve/ has an evictor (none is an error any more).
  for (curve::PolicyKind kind : curve::kAllPolicies) {
    EXPECT_TRUE(SupportedByReplica(kind)) << curve::PolicyName(kind);
    o.eviction = kind;
    EXPECT_TRUE(SimulateReplica(o, reqs, time).ok()) << curve::PolicyName(kind);
  }
  EXPECT_EQ(SupportedByReplicaNames(),
            "lru, fifo, lfu, arc, s3fifo, sglang, vllm, priority, workload-aware, belady, sieve");
  o.eviction = curve::PolicyKind::kLru;
  o.pool_blocks = 0;
  EXPECT_FALSE(SimulateReplica(o, reqs, time).ok());
  EXPECT_TRUE(ParseAdmission("rate-cap").ok());
  auto bad = ParseAdmission("lazy");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("greedy, reserve-max, reserve-quantile, rate-cap"), std::string::npos) << bad.error();
}

}  // namespace
}  // namespace kvwatch::sim
