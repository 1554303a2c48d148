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

#include "sim/admission.h"

namespace kvwatch::sim::internal {
namespace {

TEST(AdmissionEstimatorTest, OutputQuantilesRoundUpToTheirBucket) {
  OutputQuantiles q(kMaxClasses);
  EXPECT_EQ(q.count(3), 0u);
  for (std::uint32_t v = 100; v >= 1; --v) q.Add(3, v);
  EXPECT_EQ(q.count(3), 100u);
  EXPECT_EQ(q.Quantile(3, 0.2), 20u);  // exact below 32
  EXPECT_EQ(q.Quantile(3, 0.5), 50u);
  const std::uint32_t p90 = q.Quantile(3, 0.9);
  EXPECT_GE(p90, 90u);
  EXPECT_LE(p90, 92u);  // within 2.2%
  q.Add(3, 1000000);
  EXPECT_GE(q.Quantile(3, 1.0), 1000000u);
  EXPECT_LE(q.Quantile(3, 1.0), 1022000u);
}

TEST(AdmissionEstimatorTest, RateCapFromItsPriorThenFromFinishedRequests) {
  RateCap cap(1000, 16, 100);
  cap.Admitted(160);
  // Prior: 100 decode steps x (10 prompt blocks + 100 / 32 of growth on average).
  EXPECT_DOUBLE_EQ(cap.Rate(), 1000 / (100 * (10 + 100.0 / 32)));
  cap.Finished(400);
  cap.Finished(600);
  EXPECT_DOUBLE_EQ(cap.Rate(), 2);
  // Credits: one to start, plus the rate each step, up to a step's worth.
  cap.StartStep();
  EXPECT_TRUE(cap.CanAdmit());
  cap.Spend();
  EXPECT_TRUE(cap.CanAdmit());
  cap.Spend();
  EXPECT_FALSE(cap.CanAdmit());
  for (int i = 0; i < 300; ++i) cap.Finished(4000);  // the window keeps the last 256
  EXPECT_DOUBLE_EQ(cap.Rate(), 0.25);
  cap.StartStep();
  EXPECT_FALSE(cap.CanAdmit());
  for (int i = 0; i < 3; ++i) cap.StartStep();
  EXPECT_TRUE(cap.CanAdmit());
}

}  // namespace
}  // namespace kvwatch::sim::internal
