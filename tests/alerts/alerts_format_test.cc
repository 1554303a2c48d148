// Tests for alerts/format.h: the number, byte, duration and time texts used in
// labels and annotations.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "alerts/format.h"

namespace kvwatch::alerts {
namespace {

using std::chrono::seconds;

TEST(FormatTest, Numbers) {
  EXPECT_EQ(FormatNumber(0.25), "0.25");
  EXPECT_EQ(FormatNumber(1.0 / 3.0), "0.3333");
  EXPECT_EQ(FormatNumber(114.71), "114.7");
  EXPECT_EQ(FormatNumber(12345.6), "12346");
  EXPECT_EQ(FormatNumber(1.5e15), "1.5e+15");
  EXPECT_EQ(FormatNumber(0.000012345), "1.234e-05");
  EXPECT_EQ(FormatNumber(std::nan("")), "NaN");
  EXPECT_EQ(FormatNumber(-INFINITY), "-Inf");
  EXPECT_EQ(FormatCount(1234.4), "1234");
  EXPECT_EQ(FormatCount(1234.5), "1235");
  EXPECT_EQ(FormatCount(-0.2), "0");
  EXPECT_EQ(FormatCount(12582912000.0), "12582912000");
  EXPECT_EQ(FormatPercent(0.253), "25.3%");
}

TEST(FormatTest, Bytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(2.0 * 1024 * 1024 * 1024), "2 GiB");
  // docs/semantics.md: 100,000 pages * 16 tokens * 60 KiB = about 91.6 GiB.
  EXPECT_EQ(FormatBytes(100000.0 * 16 * 60 * 1024), "91.6 GiB");
}

TEST(FormatTest, Durations) {
  EXPECT_EQ(FormatDuration(seconds(3600)), "1h");
  EXPECT_EQ(FormatDuration(seconds(86400)), "24h");
  EXPECT_EQ(FormatDuration(seconds(300)), "5m");
  EXPECT_EQ(FormatDuration(seconds(90)), "1m30s");
  EXPECT_EQ(FormatDuration(seconds(0)), "0s");
  EXPECT_EQ(FormatDuration(seconds(5400)), "1h30m");
}

TEST(FormatTest, Rfc3339) {
  const TimePoint t = TimePoint{} + seconds(1'700'000'000);
  EXPECT_EQ(FormatRfc3339(t), "2023-11-14T22:13:20.000Z");
  EXPECT_EQ(FormatRfc3339(t + std::chrono::milliseconds(1999)), "2023-11-14T22:13:21.999Z");
  EXPECT_EQ(FormatRfc3339(t + std::chrono::microseconds(999)), "2023-11-14T22:13:20.000Z");
  EXPECT_EQ(FormatRfc3339(TimePoint{} + seconds(951782400)), "2000-02-29T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339(TimePoint{}), "1970-01-01T00:00:00.000Z");
}

}  // namespace
}  // namespace kvwatch::alerts
