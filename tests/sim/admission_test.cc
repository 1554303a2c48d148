// The admission rules, each on a case where it decides differently from another.
#include <gtest/gtest.h>

#include "sim/replica.h"

namespace kvwatch::sim {
namespace {

ReplicaRequest Make(double arrival, curve::PageId first_page, std::uint32_t prompt, std::uint32_t output) {
  ReplicaRequest r;
  r.arrival_s = arrival;
  for (std::uint32_t k = 0; k * 4 < prompt; ++k) r.pages.push_back(first_page + k);
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  return r;
}

struct Admissions {
  SimSummary summary;
  std::vector<std::uint32_t> admitted;  // per step
};

Admissions RunWith(ReplicaOptions o, Admission a, const std::vector<ReplicaRequest>& reqs) {
  const LinearStepTime time({1, 0, 0, 0, 0});
  o.admission = a;
  Admissions out;
  ReplicaObserver obs;
  obs.on_step = [&](const StepRecord& s) { out.admitted.push_back(s.admitted); };
  auto r = SimulateReplicaObserved(o, reqs, time, {}, obs);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error());
  if (r.ok()) out.summary = r.value();
  return out;
}

// Three requests of 2 prompt blocks growing to 12 blocks, a pool of 20: greedy
// admits all three at once and preempts later; reserve-max admits one at a time
// (12 + 12 > 20) and never preempts; rate-cap starts with one (its prior: 20 blocks
// / (40 steps x 7 blocks) = 0.07 admissions per step) and preempts less than greedy.
TEST(AdmissionTest, GreedyReserveMaxAndRateCapOnRequestsThatGrow) {
  ReplicaOptions o;
  o.pool_blocks = 20;
  o.block_tokens = 4;
  const std::vector<ReplicaRequest> reqs = {Make(0, 100, 8, 40), Make(0, 200, 8, 40), Make(0, 300, 8, 40)};
  const Admissions greedy = RunWith(o, Admission::kGreedy, reqs);
  const Admissions reserve = RunWith(o, Admission::kReserveMax, reqs);
  const Admissions rate = RunWith(o, Admission::kRateCap, reqs);
  EXPECT_EQ(greedy.admitted[0], 3u);
  EXPECT_GT(greedy.summary.preemptions, 0u);
  EXPECT_EQ(reserve.admitted[0], 1u);
  EXPECT_EQ(reserve.summary.preemptions, 0u);
  EXPECT_EQ(reserve.summary.steps, 3u * 40);  // strictly one after the other
  EXPECT_EQ(rate.admitted[0], 1u);
  EXPECT_LT(rate.summary.preemptions, greedy.summary.preemptions);
  for (const Admissions* a : {&greedy, &reserve, &rate}) EXPECT_EQ(a->summary.finished, 3u);
}

// reserve-quantile learns the class's output lengths: after five requests of 2
// output tokens finish, q = 0.9 of them is 2, so three new ones reserve 3 blocks
// each and are admitted together, while reserve-max (max 40 output tokens)
// still reserves 12 each and takes them one at a time.
TEST(AdmissionTest, ReserveQuantileLearnsFromFinishedRequests) {
  ReplicaOptions o;
  o.pool_blocks = 20;
  o.block_tokens = 4;
  o.max_output_tokens = 40;
  o.class_quantiles = {0.9};
  std::vector<ReplicaRequest> reqs;
  for (int i = 0; i < 5; ++i) reqs.push_back(Make(i * 10.0, 1000 + 10 * i, 8, 2));
  for (int i = 0; i < 3; ++i) reqs.push_back(Make(100, 2000 + 10 * i, 8, 2));
  const Admissions quantile = RunWith(o, Admission::kReserveQuantile, reqs);
  const Admissions max = RunWith(o, Admission::kReserveMax, reqs);
  // Steps 1-10 serve the first five (2 steps each); step 11 starts at t = 100.
  ASSERT_GT(quantile.admitted.size(), 10u);
  EXPECT_EQ(quantile.admitted[10], 3u);
  EXPECT_EQ(max.admitted[10], 1u);
  // Before any finish the quantile rule reserves the max too.
  EXPECT_EQ(quantile.admitted[0], 1u);
  // A class with no quantile given uses 0.9; a bad one is an error.
  o.class_quantiles = {1.5};
  const LinearStepTime time({1, 0, 0, 0, 0});
  EXPECT_FALSE(SimulateReplica(o, reqs, time).ok());
}

}  // namespace
}  // namespace kvwatch::sim
