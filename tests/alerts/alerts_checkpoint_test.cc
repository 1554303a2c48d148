// Checkpoints of the Alerter (Alerter::Serialize/Deserialize): every detector
// enabled, driven for hours of fake time through a knee shift, a working set over
// capacity, an eviction-rate jump (rate shift and CUSUM) and rising capacity
// misses with evictor cells. One Alerter is checkpointed while one alert is
// pending and another firing (and again later, in the middle of the CUSUM's and
// the rate shift's episodes), restored into a fresh Alerter of the same options,
// and from then on the restored one and an untouched twin give identical
// evaluations (every alert's status), events and Alertmanager items. Truncated
// and garbage bytes and bytes of other alerts are refused, leaving the Alerter
// unchanged; retuned thresholds are accepted.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "alerts/alerter.h"
#include "tests/alerts/testing_alerts.h"

namespace kvwatch::alerts {
namespace {

using testing::TestRng;

constexpr int kStepSeconds = 15;
constexpr int kSteps = 6 * 3600 / kStepSeconds;  // six hours

AlerterOptions Options() {
  AlerterOptions o;
  o.replica = "r1";
  o.model = "m";
  o.extra_labels = {{"cluster", "c1"}};
  o.change_tests[0].cusum.warmup_samples = 30;  // learned within the first half hour
  o.capacity_miss_share.every_capacity = true;
  return o;
}

// The observations of step i: a knee shift from 2h to 2h40m, a working set over
// capacity from 1h to 3h, the eviction rate tripling at 4h, capacity misses
// quadrupling at 4h; seeded noise on the counters.
class Inputs {
 public:
  explicit Inputs(std::uint64_t seed) : rng_(seed) {}

  AlertInputs At(int i) {
    const double t = static_cast<double>(i) * kStepSeconds;
    AlertInputs in;
    in.time = TimePoint{} + std::chrono::hours(24 * 365 * 50) + std::chrono::seconds(i * kStepSeconds);
    in.baseline_knee_pages = 1000;
    in.short_knee_pages = (t >= 2 * 3600 && t < 2 * 3600 + 40 * 60) ? 1400 : 1000 + 20 * rng_.Gaussian();
    in.short_window_requests = 10000;
    in.baseline_window_requests = 100000;
    in.capacity_pages = 1000;
    in.tracked_pages = 4000;
    in.working_set_pages = (t >= 3600 && t < 3 * 3600) ? 1100 : 900;
    in.bytes_per_page = 65536;
    in.working_set_target = "page_hit 0.95";
    const double step = kStepSeconds;
    evicted_ += step * ((t >= 4 * 3600 ? 60 : 20) + 2 * rng_.Gaussian());
    rejected_ += rng_.Uniform() < 0.1 ? 1 : 0;
    requests_ += step * 5;
    references_ += step * 200;
    misses_small_ += step * (t >= 4 * 3600 ? 40 : 10) * (0.9 + 0.2 * rng_.Uniform());
    misses_large_ += step * 2;
    cell_a_ += step * (t >= 4 * 3600 ? 30 : 5);
    cell_b_ += step * 3;
    in.counters.evicted_blocks = evicted_;
    in.counters.rejected_requests = rejected_;
    in.counters.requests = requests_;
    if (i % 7 != 3) in.counters.preemptions = static_cast<double>(i / 10);  // sometimes missing
    in.capacity_misses.page_references = references_;
    in.capacity_misses.capacity_misses = {{500, misses_small_}, {2000, misses_large_}};
    in.capacity_misses.evicted_by = {{"class", "turn2", "first", 500, cell_a_}, {"tenant", "b", "a", 500, cell_b_}};
    return in;
  }

 private:
  TestRng rng_;
  double evicted_ = 0, rejected_ = 0, requests_ = 0, references_ = 0;
  double misses_small_ = 0, misses_large_ = 0, cell_a_ = 0, cell_b_ = 0;
};

// ---------------------------------------------------------------- comparisons

void ExpectSameStatus(const AlertStatus& a, const AlertStatus& b, const std::string& where) {
  EXPECT_EQ(a.labels, b.labels) << where;
  EXPECT_EQ(a.annotations, b.annotations) << where;
  EXPECT_EQ(a.state, b.state) << where;
  EXPECT_EQ(a.observation, b.observation) << where;
  EXPECT_EQ(a.quiet_reason, b.quiet_reason) << where;
  EXPECT_TRUE(a.value == b.value || (std::isnan(a.value) && std::isnan(b.value))) << where;
  EXPECT_EQ(a.active_since, b.active_since) << where;
  EXPECT_EQ(a.fired_at, b.fired_at) << where;
  EXPECT_EQ(a.resolved_at, b.resolved_at) << where;
  EXPECT_EQ(a.last_sent_at, b.last_sent_at) << where;
  EXPECT_EQ(a.resolution_sent, b.resolution_sent) << where;
  EXPECT_EQ(a.evaluated_at, b.evaluated_at) << where;
}

void ExpectSameEvaluation(const Evaluation& a, const Evaluation& b, const std::string& where) {
  ASSERT_EQ(a.alerts.size(), b.alerts.size()) << where;
  for (std::size_t k = 0; k < a.alerts.size(); ++k) ExpectSameStatus(a.alerts[k], b.alerts[k], where);
  ASSERT_EQ(a.events.size(), b.events.size()) << where;
  for (std::size_t k = 0; k < a.events.size(); ++k) {
    EXPECT_EQ(a.events[k].kind, b.events[k].kind) << where;
    EXPECT_EQ(a.events[k].time, b.events[k].time) << where;
    EXPECT_EQ(a.events[k].labels, b.events[k].labels) << where;
    EXPECT_EQ(a.events[k].annotations, b.events[k].annotations) << where;
  }
}

void ExpectSameItems(const std::vector<PostableAlert>& a, const std::vector<PostableAlert>& b,
                     const std::string& where) {
  ASSERT_EQ(a.size(), b.size()) << where;
  for (std::size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].labels, b[k].labels) << where;
    EXPECT_EQ(a[k].annotations, b[k].annotations) << where;
    EXPECT_EQ(a[k].starts_at, b[k].starts_at) << where;
    EXPECT_EQ(a[k].ends_at, b[k].ends_at) << where;
  }
}

std::vector<std::uint8_t> Bytes(const Alerter& a) {
  std::vector<std::uint8_t> out;
  a.Serialize(&out);
  return out;
}

bool HasState(const Alerter& a, AlertState state) {
  for (const AlertStatus& s : a.Statuses()) {
    if (s.state == state) return true;
  }
  return false;
}

// Steps `a` through evaluation i (Evaluate then TakeDue, as the agent does).
std::pair<Evaluation, std::vector<PostableAlert>> Step(Alerter& a, const AlertInputs& in) {
  auto evaluation = a.Evaluate(in);
  EXPECT_TRUE(evaluation.ok()) << (evaluation.ok() ? "" : evaluation.error());
  std::vector<PostableAlert> due = a.TakeDue(in.time);
  return {evaluation.ok() ? std::move(evaluation).value() : Evaluation{}, std::move(due)};
}

TEST(AlertsCheckpointTest, RestoredAlerterContinuesExactlyAsTheOriginal) {
  // Cut 1: the first evaluation with one alert pending and another firing. Cut 2:
  // 4h10m, inside the eviction jump's episodes.
  for (int second_cut : {0, 1}) {
    Inputs feed(11);
    Alerter original = Alerter::Create(Options()).value();
    Alerter twin = Alerter::Create(Options()).value();
    int i = 0;
    for (;; ++i) {
      ASSERT_LT(i, kSteps) << "no evaluation with a pending and a firing alert";
      const AlertInputs in = feed.At(i);
      Step(original, in);
      Step(twin, in);
      const bool both = HasState(original, AlertState::kPending) && HasState(original, AlertState::kFiring);
      if (second_cut == 0 ? both : i == (4 * 3600 + 600) / kStepSeconds) break;
    }
    const std::string cut = "cut at step " + std::to_string(i);
    const std::vector<std::uint8_t> bytes = Bytes(original);
    Alerter restored = Alerter::Create(Options()).value();
    std::span<const std::uint8_t> in(bytes);
    ASSERT_TRUE(restored.Deserialize(&in)) << cut;
    EXPECT_TRUE(in.empty()) << cut;
    const std::vector<AlertStatus> a = restored.Statuses(), b = twin.Statuses();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t k = 0; k < a.size(); ++k) ExpectSameStatus(a[k], b[k], cut);

    int events = 0, items = 0;
    for (++i; i < kSteps; ++i) {
      const AlertInputs inputs = feed.At(i);
      const auto [ea, da] = Step(restored, inputs);
      const auto [eb, db] = Step(twin, inputs);
      const std::string where = cut + ", step " + std::to_string(i);
      ExpectSameEvaluation(ea, eb, where);
      ExpectSameItems(da, db, where);
      events += static_cast<int>(ea.events.size());
      items += static_cast<int>(da.size());
      if (::testing::Test::HasFailure()) return;
    }
    // The continuation has transitions and sends to compare.
    EXPECT_GT(events, 2) << cut;
    EXPECT_GT(items, 10) << cut;
  }
}

TEST(AlertsCheckpointTest, AnAlerterStartedFreshDiffers) {
  Inputs feed(12);
  Alerter original = Alerter::Create(Options()).value();
  int i = 0;
  for (; !(HasState(original, AlertState::kPending) && HasState(original, AlertState::kFiring)); ++i) {
    ASSERT_LT(i, kSteps);
    Step(original, feed.At(i));
  }
  Alerter fresh = Alerter::Create(Options()).value();
  const AlertInputs next = feed.At(i);
  Step(original, next);
  Step(fresh, next);
  // Fresh, the firing alert would be pending again (and nothing sent).
  EXPECT_TRUE(HasState(original, AlertState::kFiring));
  EXPECT_FALSE(HasState(fresh, AlertState::kFiring));
}

class AlertsCheckpointRefusalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Inputs feed(13);
    for (int i = 0; i < (4 * 3600 + 900) / kStepSeconds; ++i) Step(source_, feed.At(i));
    bytes_ = Bytes(source_);
    RecordProperty("checkpoint_bytes", static_cast<int>(bytes_.size()));
    Inputs other(14);
    for (int i = 0; i < 40; ++i) Step(target_, other.At(i));
    before_ = Bytes(target_);
  }

  Alerter source_ = Alerter::Create(Options()).value();
  Alerter target_ = Alerter::Create(Options()).value();
  std::vector<std::uint8_t> bytes_;
  std::vector<std::uint8_t> before_;
};

TEST_F(AlertsCheckpointRefusalTest, TruncatedBytesAreRefusedAndChangeNothing) {
  // Every length up to 4 KiB (the header, the first histories), then a stride
  // that still lands in every section.
  for (std::size_t len = 0; len < bytes_.size(); len += len < 4096 ? 1 : 61) {
    std::span<const std::uint8_t> in(bytes_.data(), len);
    ASSERT_FALSE(target_.Deserialize(&in)) << "length " << len << " of " << bytes_.size();
  }
  EXPECT_EQ(Bytes(target_), before_);
}

TEST_F(AlertsCheckpointRefusalTest, GarbageAndCorruptBytesDoNotCrash) {
  TestRng rng(15);
  for (int k = 0; k < 300; ++k) {
    std::vector<std::uint8_t> garbage(rng.Next() % 2048);
    for (auto& b : garbage) b = static_cast<std::uint8_t>(rng.Next());
    std::span<const std::uint8_t> in(garbage);
    EXPECT_FALSE(target_.Deserialize(&in));
  }
  EXPECT_EQ(Bytes(target_), before_);
  // Single corrupt bytes: refused, or an Alerter that keeps evaluating.
  Inputs feed(16);
  const AlertInputs later = feed.At(5 * 3600 / kStepSeconds);
  int refused = 0;
  for (std::size_t pos = 0; pos < bytes_.size(); pos += pos < 2048 ? 1 : 97) {
    std::vector<std::uint8_t> bad = bytes_;
    bad[pos] ^= 0xff;
    Alerter a = Alerter::Create(Options()).value();
    std::span<const std::uint8_t> in(bad);
    if (!a.Deserialize(&in)) {
      ++refused;
      continue;
    }
    AlertInputs next = later;
    next.time += std::chrono::hours(24 * 365 * 200);  // after any corrupted time
    (void)a.Evaluate(next);
    (void)a.TakeDue(next.time);
  }
  EXPECT_GT(refused, 0);
}

TEST_F(AlertsCheckpointRefusalTest, BytesOfOtherAlertsAreRefused) {
  std::vector<AlerterOptions> others(5, Options());
  others[0].replica = "r2";
  others[1].capacity_shortfall.enabled = false;
  others[2].baseline_window = std::chrono::hours(12);
  others[3].knee_shift.rule.severity = "critical";
  others[4].change_tests[0].cusum.warmup_samples = 10;  // fewer than the samples already learned
  for (std::size_t k = 0; k < others.size(); ++k) {
    Alerter a = Alerter::Create(others[k]).value();
    std::span<const std::uint8_t> in(bytes_);
    EXPECT_FALSE(a.Deserialize(&in)) << "options variant " << k;
  }
}

TEST_F(AlertsCheckpointRefusalTest, RetunedThresholdsAreAccepted) {
  AlerterOptions retuned = Options();
  retuned.knee_shift.fire_threshold = 0.3;
  retuned.capacity_shortfall.rule.for_duration = std::chrono::minutes(5);
  Alerter a = Alerter::Create(retuned).value();
  std::span<const std::uint8_t> in(bytes_);
  ASSERT_TRUE(a.Deserialize(&in));
  const std::vector<AlertStatus> x = a.Statuses(), y = source_.Statuses();
  for (std::size_t k = 0; k < x.size(); ++k) ExpectSameStatus(x[k], y[k], "retuned");
}

}  // namespace
}  // namespace kvwatch::alerts
