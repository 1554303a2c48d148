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

// rate-cap on identical requests with a constant step cost and 1-token blocks, far
// past saturation, against the eviction-free rate of the fluid model (Ao, Dong,
// Luo, Simchi-Levi, arXiv 2606.15555: a request's KV grows from its prompt to
// prompt + output over its output steps, so it holds output x (prompt + output / 2)
// block-steps and the pool sustains pool / that admissions per step). rate-cap
// finishes at least 0.95 of that per step without preempting. Its credits used to
// be capped at max(1, r), which dropped the fraction at each admission: 1 /
// ceil(1 / r) per step, 0.75, 0.70, 0.77 and 0.54 of the rate in these four shapes;
// with the fraction kept but no room left for the swing of the blocks in use, it
// preempted (2, 1, 28 and 150 times).
TEST(AdmissionTest, RateCapAdmitsAtTheEvictionFreeRate) {
  struct Shape {
    std::uint32_t prompt, output;
    std::uint64_t pool;
  };
  for (const Shape& shape : {Shape{100, 100, 10000}, Shape{200, 50, 8000}, Shape{64, 256, 16000}, Shape{10, 20, 370}}) {
    const double rate = static_cast<double>(shape.pool) / (shape.output * (shape.prompt + shape.output / 2.0));
    ReplicaOptions o;
    o.pool_blocks = shape.pool;
    o.block_tokens = 1;
    o.admission = Admission::kRateCap;
    // Enough requests for some 6,000 steps, all waiting from the start.
    const auto n = static_cast<std::uint32_t>(6000 * rate);
    std::vector<ReplicaRequest> reqs;
    for (std::uint32_t i = 0; i < n; ++i) {
      ReplicaRequest r;
      r.prompt_tokens = shape.prompt;
      r.output_tokens = shape.output;
      for (std::uint32_t k = 0; k < shape.prompt; ++k) r.pages.push_back((std::uint64_t{i + 1} << 20) + k);
      reqs.push_back(std::move(r));
    }
    const double step_s = 0.01;
    const LinearStepTime time({step_s, 0, 0, 0, 0});
    std::vector<std::uint32_t> finished;
    ReplicaObserver obs;
    obs.on_step = [&](const StepRecord& s) { finished.push_back(s.finished); };
    auto run = SimulateReplicaObserved(o, reqs, time, {}, obs);
    ASSERT_TRUE(run.ok()) << run.error();
    // Finished per step over the middle half of the steps (past the first
    // finishes, before the queue drains); per second over the whole run.
    const std::size_t lo = finished.size() / 4, hi = finished.size() * 3 / 4;
    std::uint64_t done = 0;
    for (std::size_t k = lo; k < hi; ++k) done += finished[k];
    const double per_step = static_cast<double>(done) / static_cast<double>(hi - lo);
    const std::string what = std::to_string(shape.prompt) + "/" + std::to_string(shape.output) + "/" +
                             std::to_string(shape.pool) + ": rate " + std::to_string(rate) + ", per step " +
                             std::to_string(per_step);
    EXPECT_EQ(run.value().preemptions, 0u) << what;
    EXPECT_EQ(run.value().finished, n) << what;
    EXPECT_GE(per_step, 0.95 * rate) << what;
    EXPECT_GE(run.value().requests_per_s * step_s, 0.9 * rate) << what;  // warm-up and drain included
  }
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
  EXPECT_EQ(cap.Rate(), 0);  // nothing known before the first admission
  cap.StartStep();
  EXPECT_FALSE(cap.CanAdmit());
  cap.Allow();  // the empty replica admits one anyway, on credit
  EXPECT_TRUE(cap.CanAdmit());
  cap.Spend();
  EXPECT_FALSE(cap.CanAdmit());
  cap.Admitted(160);
  // Prior: 100 decode steps x (10 prompt blocks + 100 / 32 of growth on average);
  // half a peak of 10 + 100 / 16 blocks kept free.
  EXPECT_DOUBLE_EQ(cap.Rate(), (1000 - (10 + 100.0 / 16) / 2) / (100 * (10 + 100.0 / 32)));
  cap.Finished(400, 30);
  cap.Finished(600, 10);
  EXPECT_DOUBLE_EQ(cap.Rate(), (1000 - 10) / 500.0);
  // The allowed admission's debt of 1 is paid first: -1 + 1.98 leaves 0.98.
  cap.StartStep();
  EXPECT_FALSE(cap.CanAdmit());
  // Credits: the rate each step, up to the rate + 1.
  cap.StartStep();
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(cap.CanAdmit()) << i;
    cap.Spend();
  }
  EXPECT_FALSE(cap.CanAdmit());
  for (int i = 0; i < 3; ++i) cap.StartStep();  // nothing admitted: the credit stops at 2.98
  for (int i = 0; i < 2; ++i) cap.Spend();
  EXPECT_FALSE(cap.CanAdmit());
  // The fraction is kept: at 0.4 per step, two admissions every five steps (the
  // old cap at max(1, r) gave one every three).
  for (int i = 0; i < 300; ++i) cap.Finished(2500, 0);  // the window keeps the last 256
  EXPECT_DOUBLE_EQ(cap.Rate(), 0.4);
  int admitted = 0;
  for (int step = 0; step < 100; ++step) {
    cap.StartStep();
    while (cap.CanAdmit()) {
      cap.Spend();
      ++admitted;
    }
  }
  EXPECT_GE(admitted, 39);  // 40 up to rounding
  EXPECT_LE(admitted, 40);
}

}  // namespace
}  // namespace kvwatch::sim::internal
