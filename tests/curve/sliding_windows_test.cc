// curve/sliding_windows.h: a window's value is the merge of its slices; the cached
// merge of the older slices must never make a read differ from merging them all,
// whatever the order of adds (late ones included), clock moves and reads.
#include "curve/sliding_windows.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace kvwatch::curve {
namespace {

// A slice that remembers which values were added (as a sum and a count).
struct Counts {
  std::uint64_t sum = 0;
  std::uint64_t n = 0;
  void Clear() { sum = n = 0; }
  void Merge(const Counts& o) {
    sum += o.sum;
    n += o.n;
  }
  bool operator==(const Counts&) const = default;
};

Counts MergeAll(const SlidingWindows<Counts>& w, std::size_t i) {
  Counts out;
  for (const Counts& slice : std::as_const(w).rings()[i].ring) out.Merge(slice);
  return out;
}

TEST(SlidingWindowsTest, CachedReadsEqualMergingEverySlice) {
  std::mt19937_64 rng(5);
  SlidingWindows<Counts> w({60, 600, 3600}, Counts{});
  double t = 1000;
  for (int step = 0; step < 20000; ++step) {
    const int action = static_cast<int>(rng() % 10);
    if (action < 6) {
      // Mostly now, sometimes late (up to 15 minutes back).
      const double at = rng() % 4 == 0 ? t - static_cast<double>(rng() % 900) : t;
      const std::uint64_t v = rng() % 100;
      w.Add(at, [&](Counts& c) { c.sum += v, ++c.n; });
    } else if (action < 8) {
      t += static_cast<double>(rng() % 30) * 0.5;
      w.Advance(t);
    } else {
      const std::size_t i = rng() % 3;
      ASSERT_EQ(w.Window(i, Counts{}), MergeAll(w, i)) << "step " << step << " window " << i;
    }
  }
}

TEST(SlidingWindowsTest, EditsThroughRingsAreSeen) {
  SlidingWindows<Counts> w({60}, Counts{});
  for (int s = 0; s < 30; ++s) w.Add(100 + s, [](Counts& c) { c.sum += 1, ++c.n; });
  EXPECT_EQ(w.Window(0, Counts{}).n, 30u);  // fills the cache
  for (Counts& slice : w.rings()[0].ring) slice.Clear();
  EXPECT_EQ(w.Window(0, Counts{}).n, 0u);
}

}  // namespace
}  // namespace kvwatch::curve
