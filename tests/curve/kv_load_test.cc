// curve/kv_load.h: the KV load factor's formula on hand-worked numbers, its
// windows (span after start-up, expiry), requests without token counts, and the
// output-length buckets and quantiles.
#include "curve/kv_load.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace kvwatch::curve {
namespace {

KvLoadRequest Sized(std::int64_t prompt, std::int64_t output, const char* cls = "") {
  KvLoadRequest r;
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  r.class_label = cls;
  return r;
}

TEST(KvLoadTest, TokenSecondsOfOneRequestByHand) {
  // P = 1000, O = 100, r = 50 tokens/s: lifetime 2 s; the prompt holds 1000 x 2 =
  // 2000 token-seconds, the output grows to 100 over 2 s: 100^2 / (2 x 50) = 100.
  EXPECT_DOUBLE_EQ(KvTokenSeconds(1000, 100, 50), 2100.0);
  // With a 0.5 s prefill the prompt is held 2.5 s: 2500 + 100.
  EXPECT_DOUBLE_EQ(KvTokenSeconds(1000, 100, 50, 0.5), 2600.0);
  // No output: the prompt for the prefill only.
  EXPECT_DOUBLE_EQ(KvTokenSeconds(1000, 0, 50, 0.25), 250.0);
  EXPECT_DOUBLE_EQ(KvTokenSeconds(0, 10, 10), 5.0);
}

TEST(KvLoadTest, LoadFactorIsLittlesLawOverCapacity) {
  // 4 requests/s x 2100 token-seconds = 8400 tokens held on average; in 16800: 0.5.
  EXPECT_DOUBLE_EQ(KvLoadFactor(4, 2100, 16800), 0.5);
  EXPECT_TRUE(std::isnan(KvLoadFactor(4, 2100, 0)));
}

TEST(KvLoadTest, WindowSumsGiveTheMeanOfTheRequests) {
  KvLoadSlice s;
  s.Add(Sized(1000, 100));  // 2100 at 50 tokens/s
  s.Add(Sized(200, 300));   // 200 x 6 + 90000 / 100 = 1200 + 900 = 2100
  s.Add(Sized(0, 50));      // 2500 / 100 = 25
  EXPECT_EQ(s.requests(), 3u);
  EXPECT_EQ(s.sized(), 3u);
  EXPECT_DOUBLE_EQ(s.TokenSeconds(50), 2100.0 + 2100.0 + 25.0);
  // 3 requests in 10 s, mean 4225 / 3: rho = 0.3 x 1408.33.. / 1000 = 0.4225.
  const auto load = KvLoadOf(s, 10, 50, 1000);
  ASSERT_TRUE(load);
  EXPECT_DOUBLE_EQ(load->arrivals_per_s, 0.3);
  EXPECT_DOUBLE_EQ(load->mean_token_seconds, 4225.0 / 3);
  EXPECT_DOUBLE_EQ(load->load_factor, 0.4225);
  // The decode rate applies when read: at 100 tokens/s every S halves (no prefill).
  EXPECT_DOUBLE_EQ(KvLoadOf(s, 10, 100, 1000)->load_factor, 0.4225 / 2);
  // A prefill time charges the prompts: 0.1 s x 1200 prompt tokens = 120 more.
  EXPECT_DOUBLE_EQ(KvLoadOf(s, 10, 50, 1000, 0.1)->load_factor, 0.1 * (4225.0 + 120.0) / 1000);
}

TEST(KvLoadTest, RequestsWithoutTokenCountsCountAsArrivalsOnly) {
  KvLoadSlice s;
  s.Add(Sized(1000, 100));
  s.Add(Sized(-1, -1));   // a KV-event request: no counts
  s.Add(Sized(500, -1));  // no output length
  EXPECT_EQ(s.requests(), 3u);
  EXPECT_EQ(s.sized(), 1u);
  // 3 arrivals in 3 s, each assumed to hold the sized one's 2100: rho = 2100 / 2100.
  EXPECT_DOUBLE_EQ(KvLoadOf(s, 3, 50, 2100)->load_factor, 1.0);
}

TEST(KvLoadTest, NoLoadWithoutOutputLengthsSpanRateOrCapacity) {
  KvLoadSlice events;
  for (int i = 0; i < 10; ++i) events.Add(Sized(-1, -1));
  EXPECT_FALSE(KvLoadOf(events, 60, 50, 1000)) << "KV events carry no lengths: no rho, not 0";
  KvLoadSlice s;
  s.Add(Sized(10, 10));
  EXPECT_FALSE(KvLoadOf(s, 0, 50, 1000));
  EXPECT_FALSE(KvLoadOf(s, 60, 0, 1000));
  EXPECT_FALSE(KvLoadOf(s, 60, 50, 0));
  EXPECT_FALSE(KvLoadOf(KvLoadSlice(), 60, 50, 1000));
}

TEST(KvLoadTest, SpanRunsFromTheFirstRequestUntilTheWindowIsFull) {
  KvLoadWindows w({60});  // slices of 1 s
  EXPECT_EQ(w.Span(0), 0);
  w.Add(Sized(100, 10), 1000.5);
  EXPECT_DOUBLE_EQ(w.Span(0), 0);  // now is the first request
  w.Add(Sized(100, 10), 1010.5);
  EXPECT_DOUBLE_EQ(w.Span(0), 10);
  EXPECT_EQ(w.Window(0).requests(), 2u);
  // At 1100.5 the ring holds slices 1041..1100: the span is 59.5 s, the first request gone.
  w.Advance(1100.5);
  EXPECT_DOUBLE_EQ(w.Span(0), 59.5);
  EXPECT_EQ(w.Window(0).requests(), 0u);
  EXPECT_FALSE(KvLoadOf(w.Window(0), w.Span(0), 50, 1000)) << "an expired window has no rho";
}

TEST(KvLoadTest, WindowsExpireTheirOldRequests) {
  KvLoadWindows w({10, 100});                                      // slices of 1/6 s and 5/3 s
  for (int i = 0; i < 50; ++i) w.Add(Sized(1000, 100), 2000 + i);  // one a second
  // Short window: the requests of its last 10 s (slices cover 1039.83.. to now 2049).
  const KvLoadSlice short_window = w.Window(0);
  const KvLoadSlice long_window = w.Window(1);
  EXPECT_EQ(long_window.requests(), 50u);
  EXPECT_EQ(short_window.requests(), 10u);
  EXPECT_DOUBLE_EQ(w.Span(1), 49);             // from the first request
  EXPECT_NEAR(w.Span(0), 10 - 1.0 / 6, 1e-9);  // the full ring
  // Long window: 50 requests in 49 s, 2100 each, in 2100 tokens: rho = 50 / 49.
  EXPECT_DOUBLE_EQ(KvLoadOf(long_window, w.Span(1), 50, 2100)->load_factor, 50.0 / 49);
  w.Advance(2049 + 200);
  EXPECT_EQ(w.Window(0).requests(), 0u);
  EXPECT_EQ(w.Window(1).requests(), 0u);
}

TEST(KvLoadTest, CheckpointRestoresEveryWindowAndItsSpan) {
  KvLoadWindows a({60, 600});
  a.Add(Sized(1000, 100, "code"), 500);
  for (int i = 0; i < 30; ++i) a.Add(Sized(100 + i, 50 + i, i % 2 ? "chat" : ""), 520 + i);
  a.Add(Sized(-1, -1), 555);
  std::vector<std::uint8_t> bytes;
  a.Serialize(&bytes);
  KvLoadWindows b({60, 600});
  std::span<const std::uint8_t> in(bytes);
  ASSERT_TRUE(b.Deserialize(&in));
  EXPECT_TRUE(in.empty());
  for (std::size_t i = 0; i < 2; ++i) {
    const KvLoadSlice wa = a.Window(i), wb = b.Window(i);
    EXPECT_EQ(wb.requests(), wa.requests());
    EXPECT_EQ(wb.sized(), wa.sized());
    EXPECT_EQ(wb.growth_sum(), wa.growth_sum());
    EXPECT_EQ(wb.prompt_sum(), wa.prompt_sum());
    EXPECT_EQ(wb.classes(), wa.classes());
    EXPECT_EQ(b.Span(i), a.Span(i));
  }
  // Both go on alike.
  a.Add(Sized(10, 10, "chat"), 600);
  b.Add(Sized(10, 10, "chat"), 600);
  EXPECT_EQ(b.Window(0).requests(), a.Window(0).requests());
  EXPECT_EQ(b.Span(1), a.Span(1));
  // Other window lengths, or truncated bytes, are refused.
  KvLoadWindows other({60});
  std::span<const std::uint8_t> again(bytes);
  EXPECT_FALSE(other.Deserialize(&again));
  for (std::size_t cut : {std::size_t{3}, bytes.size() / 2, bytes.size() - 1}) {
    KvLoadWindows c({60, 600});
    std::span<const std::uint8_t> part(bytes.data(), cut);
    EXPECT_FALSE(c.Deserialize(&part)) << cut;
  }
}

TEST(KvLoadTest, OutputLengthBucketsAreExactBelow32AndNarrowAbove) {
  for (std::uint64_t v = 0; v < 32; ++v) {
    EXPECT_EQ(OutputLengthBucket(v), v);
    EXPECT_EQ(OutputLengthBucketUpper(OutputLengthBucket(v)), v);
  }
  // 32..33 share a bucket of width 2; 100 is in 64 + 9 x 4 .. 64 + 10 x 4 - 1 = [100, 103].
  EXPECT_EQ(OutputLengthBucketUpper(OutputLengthBucket(32)), 33u);
  EXPECT_EQ(OutputLengthBucketUpper(OutputLengthBucket(100)), 103u);
  EXPECT_EQ(OutputLengthBucketUpper(OutputLengthBucket(1000)), 1023u);  // 512 + 15 x 32 = 992 .. 1023
  std::uint32_t previous = 0;
  for (std::uint64_t v = 1; v < (1u << 20); v = v * 17 / 16 + 1) {
    const std::uint32_t b = OutputLengthBucket(v);
    const std::uint64_t upper = OutputLengthBucketUpper(b);
    EXPECT_GE(upper, v);
    EXPECT_LE(static_cast<double>(upper), static_cast<double>(v) * 1.0625) << v;
    EXPECT_GE(b, previous);
    previous = b;
  }
  EXPECT_EQ(OutputLengthBucket(~std::uint64_t{0}), kOutputLengthBuckets - 1);
  EXPECT_EQ(OutputLengthBucketUpper(kOutputLengthBuckets - 1), ~std::uint64_t{0});
}

TEST(KvLoadTest, QuantilesPerClassAreNearestRank) {
  KvLoadSlice a, b;
  // Class "chat": outputs 1..20 (10 in each slice); class "code": 1000 once.
  for (int i = 1; i <= 10; ++i) a.Add(Sized(10, i, "chat"));
  for (int i = 11; i <= 20; ++i) b.Add(Sized(10, i, "chat"));
  b.Add(Sized(10, 1000, "code"));
  b.Add(Sized(10, 7));  // no class: no quantile
  a.Merge(b);
  ASSERT_EQ(a.classes().size(), 2u);
  const OutputLengthHistogram& chat = a.classes().at("chat");
  EXPECT_EQ(OutputLengthQuantile(chat, 0.5), 10u);                      // rank 10 of 20
  EXPECT_EQ(OutputLengthQuantile(chat, 0.9), 18u);                      // rank 18
  EXPECT_EQ(OutputLengthQuantile(chat, 0.99), 20u);                     // rank ceil(19.8) = 20
  EXPECT_EQ(OutputLengthQuantile(a.classes().at("code"), 0.5), 1023u);  // its bucket's upper end
  EXPECT_FALSE(OutputLengthQuantile(OutputLengthHistogram(), 0.5));
  a.Clear();
  EXPECT_TRUE(a.classes().empty());
  EXPECT_EQ(a.requests(), 0u);
}

}  // namespace
}  // namespace kvwatch::curve
