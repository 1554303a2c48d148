// Tests for alerts/counter_rate.h: increases and rates over trailing windows from a
// cumulative counter, counter resets, partial coverage, bounded history.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "alerts/counter_rate.h"

namespace kvwatch::alerts {
namespace {

using std::chrono::seconds;

TimePoint At(int s) { return TimePoint{} + seconds(1'700'000'000 + s); }

TEST(CounterHistoryTest, RateOverWindowUsesAnchorAtWindowStart) {
  CounterHistory history(seconds(3600), seconds(0));
  for (int t = 0; t <= 600; t += 60) ASSERT_TRUE(history.Observe(At(t), 10.0 * t));
  auto w = history.IncreaseOver(At(600), seconds(300));
  ASSERT_TRUE(w.has_value());
  EXPECT_DOUBLE_EQ(w->increase, 3000);
  EXPECT_DOUBLE_EQ(w->seconds, 300);
  EXPECT_DOUBLE_EQ(w->rate(), 10);
  EXPECT_DOUBLE_EQ(w->coverage, 1.0);
}

TEST(CounterHistoryTest, YoungHistoryCoversPartOfTheWindow) {
  CounterHistory history(seconds(86400), seconds(0));
  ASSERT_TRUE(history.Observe(At(0), 5));
  EXPECT_FALSE(history.IncreaseOver(At(0), seconds(3600)).has_value());  // one sample only
  ASSERT_TRUE(history.Observe(At(900), 905));
  auto w = history.IncreaseOver(At(900), seconds(3600));
  ASSERT_TRUE(w.has_value());
  EXPECT_DOUBLE_EQ(w->increase, 900);
  EXPECT_DOUBLE_EQ(w->seconds, 900);
  EXPECT_DOUBLE_EQ(w->coverage, 0.25);
  EXPECT_DOUBLE_EQ(w->rate(), 1.0);
}

TEST(CounterHistoryTest, ResetCountsTheNewValueAsIncrease) {
  CounterHistory history(seconds(3600), seconds(0));
  ASSERT_TRUE(history.Observe(At(0), 100));
  ASSERT_TRUE(history.Observe(At(60), 200));
  ASSERT_TRUE(history.Observe(At(120), 300));
  ASSERT_TRUE(history.Observe(At(180), 40));  // engine restarted: 40 since the restart
  ASSERT_TRUE(history.Observe(At(240), 140));
  EXPECT_EQ(history.resets(), 1u);
  EXPECT_DOUBLE_EQ(history.corrected_total(), 100 + 100 + 100 + 40 + 100);
  auto w = history.IncreaseOver(At(240), seconds(240));
  ASSERT_TRUE(w.has_value());
  EXPECT_DOUBLE_EQ(w->increase, 340);  // never negative across the reset
  EXPECT_DOUBLE_EQ(w->rate(), 340.0 / 240.0);
}

TEST(CounterHistoryTest, RejectsInvalidAndOutOfOrderSamples) {
  CounterHistory history(seconds(3600), seconds(0));
  ASSERT_TRUE(history.Observe(At(60), 10));
  EXPECT_FALSE(history.Observe(At(60), 20));  // same time
  EXPECT_FALSE(history.Observe(At(30), 20));  // earlier
  EXPECT_FALSE(history.Observe(At(90), -1));  // negative
  EXPECT_FALSE(history.Observe(At(90), std::nan("")));
  EXPECT_DOUBLE_EQ(history.corrected_total(), 10);
  EXPECT_EQ(history.resets(), 0u);
}

TEST(CounterHistoryTest, LongRunStaysExactWithThinnedSamples) {
  // One sample a second for 3 hours, stored at most every 10 s, retention 1h.
  CounterHistory history(seconds(3600), seconds(10));
  for (int t = 0; t <= 3 * 3600; ++t) ASSERT_TRUE(history.Observe(At(t), 2.0 * t));
  auto w = history.IncreaseOver(At(3 * 3600), seconds(3600));
  ASSERT_TRUE(w.has_value());
  EXPECT_NEAR(w->seconds, 3600, 10);
  EXPECT_DOUBLE_EQ(w->rate(), 2.0);
  EXPECT_DOUBLE_EQ(w->coverage, 1.0);
  // Older history was pruned: a longer window can reach back only about one hour.
  auto longer = history.IncreaseOver(At(3 * 3600), seconds(7200));
  ASSERT_TRUE(longer.has_value());
  EXPECT_LE(longer->seconds, 3600 + 10);
}

}  // namespace
}  // namespace kvwatch::alerts
