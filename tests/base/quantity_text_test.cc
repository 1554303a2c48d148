// base/quantity_text.h: the one duration and size grammar of the config and the command line.
#include "base/quantity_text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

namespace kvwatch::base {
namespace {

TEST(QuantityTextTest, DurationsSumTheirTerms) {
  struct Case {
    const char* text;
    double seconds;
  };
  for (Case c : {Case{"30s", 30}, Case{"5m", 300}, Case{"1h30m", 5400}, Case{"250ms", 0.25}, Case{"20us", 20e-6},
                 Case{"1.5h", 5400}, Case{"2d", 172800}, Case{"1m30s500ms", 90.5}, Case{"2e-3s", 0.002}, Case{"0s", 0},
                 Case{".5s", 0.5}}) {
    for (Bare bare : {Bare::kRefused, Bare::kSeconds}) {
      std::optional<double> v = ParseDuration(c.text, bare);
      ASSERT_TRUE(v.has_value()) << c.text;
      EXPECT_DOUBLE_EQ(*v, c.seconds) << c.text;
    }
  }
}

TEST(QuantityTextTest, ABareNumberIsSecondsOnlyWhereTaken) {
  EXPECT_EQ(ParseDuration("0.5", Bare::kSeconds), std::optional<double>(0.5));
  EXPECT_EQ(ParseDuration("2e-5", Bare::kSeconds), std::optional<double>(2e-5));
  EXPECT_FALSE(ParseDuration("5", Bare::kRefused));
  // A later term always needs its unit.
  EXPECT_FALSE(ParseDuration("1h30", Bare::kSeconds));
}

TEST(QuantityTextTest, BadDurationsAreRefused) {
  for (const char* text :
       {"", "5x", "m5", "-5m", "+5m", "5 m", " 5s", "h", "1..5s", "inf", "nan", "infs", "5e", "1e999s", "s"}) {
    EXPECT_FALSE(ParseDuration(text, Bare::kSeconds)) << text;
    EXPECT_FALSE(ParseDuration(text, Bare::kRefused)) << text;
  }
}

TEST(QuantityTextTest, SizesTakeBinaryAndDecimalUnits) {
  struct Case {
    const char* text;
    double bytes;
  };
  for (Case c : {Case{"65536", 65536}, Case{"64KiB", 65536}, Case{"1 MiB", 1048576}, Case{"18.5GiB", 18.5 * (1 << 30)},
                 Case{"2e10", 2e10}, Case{"20GB", 20e9}, Case{"1TiB", 1099511627776.0}, Case{"3TB", 3e12},
                 Case{"100B", 100}, Case{"0", 0}}) {
    std::optional<double> v = ParseSize(c.text);
    ASSERT_TRUE(v.has_value()) << c.text;
    EXPECT_DOUBLE_EQ(*v, c.bytes) << c.text;
  }
  for (const char* text : {"", "1Mi", "-1", "MiB", "16EiB", "1  MiB", "1 ", "inf", "1e999", "5 b"}) {
    EXPECT_FALSE(ParseSize(text)) << text;
  }
}

TEST(QuantityTextTest, WholeSizesAreExact) {
  EXPECT_EQ(ParseWholeSize("18446744073709551615"), std::optional<std::uint64_t>(18446744073709551615ull));
  EXPECT_EQ(ParseWholeSize("1.5KiB"), std::optional<std::uint64_t>(1536));
  EXPECT_EQ(ParseWholeSize("16EiB"), std::nullopt);
  EXPECT_EQ(ParseWholeSize("0.5B"), std::nullopt);
  EXPECT_EQ(ParseWholeSize("99999999999999999999"), std::nullopt);   // beyond 2^64 - 1
  EXPECT_EQ(ParseWholeSize("17179869184GiB"), std::nullopt);         // 2^64: the product overflows
  EXPECT_EQ(ParseWholeSize("1.8446744073709552e19"), std::nullopt);  // rounds to 2^64
}

}  // namespace
}  // namespace kvwatch::base
