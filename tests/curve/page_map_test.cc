// PageMap (curve/page_map.h) in both layouts against std::unordered_map: random
// inserts, finds and erasures over numbered ids (runs of consecutive integers,
// the weka trace's shape, which the runs layout places side by side) and over
// hashed ids, through growth, shrinking and backward-shift deletion.
#include "curve/page_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/mix.h"

namespace kvwatch::curve {
namespace {

struct MapCase {
  PageMapLayout layout;
  bool hashed;  // ids through Mix64 (as engines publish them) or numbered in runs
};

class PageMapTest : public ::testing::TestWithParam<MapCase> {};

TEST_P(PageMapTest, AgreesWithUnorderedMapThroughGrowthAndErasure) {
  const MapCase& c = GetParam();
  PageMap map(c.layout);
  EXPECT_EQ(map.layout(), c.layout);
  std::unordered_map<std::uint64_t, std::uint32_t> oracle;
  std::mt19937_64 rng(c.hashed ? 11 : 5);
  // Keys: runs of 1..40 consecutive ids starting anywhere in a small range (so
  // runs overlap and collide), optionally mixed into 64-bit hashes.
  auto key_of = [&](std::uint64_t id) { return c.hashed ? base::Mix64(id) : id; };
  std::uint64_t grown = 0;
  for (int phase = 0; phase < 2; ++phase) {
    // Phase 0 grows the table to ~20,000 entries; phase 1 erases most of it
    // again (the table shrinks) while inserting a few.
    for (int step = 0; step < (phase == 0 ? 3000 : 10000); ++step) {
      const std::uint64_t start = rng() % 60000, len = 1 + rng() % 40;
      const bool erase = phase == 1 ? rng() % 8 != 0 : rng() % 6 == 0;
      for (std::uint64_t id = start; id < start + len; ++id) {
        const std::uint64_t k = key_of(id);
        std::uint32_t* found = map.Find(k);
        auto it = oracle.find(k);
        ASSERT_EQ(found != nullptr, it != oracle.end()) << "key " << k;
        if (found != nullptr) {
          ASSERT_EQ(*found, it->second) << "key " << k;
        }
        if (erase) {
          ASSERT_EQ(map.Erase(k), it != oracle.end()) << "key " << k;
          if (it != oracle.end()) oracle.erase(it);
        } else if (found == nullptr) {
          const auto v = static_cast<std::uint32_t>(rng() % 1000000);
          map.Insert(k, v);
          oracle.emplace(k, v);
        } else {
          *found += 1;
          ++it->second;
        }
      }
      ASSERT_EQ(map.size(), oracle.size());
    }
    if (phase == 0) grown = map.capacity();
  }
  EXPECT_GT(grown, 16384u);
  EXPECT_LT(map.capacity(), grown);  // erasing most entries shrank it
  std::size_t seen = 0;
  map.ForEach([&](std::uint64_t k, std::uint32_t v) {
    auto it = oracle.find(k);
    ASSERT_NE(it, oracle.end()) << "key " << k;
    EXPECT_EQ(v, it->second);
    ++seen;
  });
  EXPECT_EQ(seen, oracle.size());
  // Every key, including the extremes, after Clear (the layout stays).
  map.Clear();
  EXPECT_EQ(map.layout(), c.layout);
  for (std::uint64_t k : {std::uint64_t{0}, ~std::uint64_t{0}, std::uint64_t{1} << 63, std::uint64_t{3}}) {
    map.Insert(k, 7);
  }
  for (std::uint64_t k : {std::uint64_t{0}, ~std::uint64_t{0}, std::uint64_t{1} << 63, std::uint64_t{3}}) {
    ASSERT_NE(map.Find(k), nullptr) << "key " << k;
    EXPECT_EQ(*map.Find(k), 7u);
  }
  EXPECT_EQ(map.Find(1), nullptr);
}

// A cache's miss path: Find misses, a victim (often on the same cluster) is
// erased, then the missed key is inserted, by Insert or InsertOrAssign, where the
// miss remembered its probe ended (or at the erasure's hole, when that lies on the
// probe). Every key must stay findable from its home afterwards.
TEST_P(PageMapTest, InsertAfterMissAndErasureStaysFindable) {
  const MapCase& c = GetParam();
  PageMap map(c.layout);
  std::unordered_map<std::uint64_t, std::uint32_t> oracle;
  std::vector<std::uint64_t> keys;  // in the map, oldest first (a fifo's victims)
  std::mt19937_64 rng(c.hashed ? 23 : 29);
  auto key_of = [&](std::uint64_t id) { return c.hashed ? base::Mix64(id) : id; };
  // About 600 of 3,000 ids resident in a table of 1,024 entries: long clusters.
  for (int step = 0; step < 200000; ++step) {
    const std::uint64_t k = key_of(rng() % 3000);
    if (map.Find(k) != nullptr) continue;
    ASSERT_EQ(oracle.count(k), 0u);
    if (keys.size() >= 600) {
      // The victim: the oldest, or one at random (any cluster).
      const std::size_t at = rng() % 2 == 0 ? 0 : rng() % keys.size();
      ASSERT_TRUE(map.Erase(keys[at]));
      oracle.erase(keys[at]);
      keys.erase(keys.begin() + static_cast<std::ptrdiff_t>(at));
    }
    const auto v = static_cast<std::uint32_t>(step);
    if (step % 3 == 0) {
      map.InsertOrAssign(k, v);
    } else {
      map.Insert(k, v);
    }
    oracle.emplace(k, v);
    keys.push_back(k);
    if (step % 997 == 0) {
      for (const auto& [key, value] : oracle) {
        const std::uint32_t* found = map.Find(key);
        ASSERT_NE(found, nullptr) << "key " << key << " at step " << step;
        ASSERT_EQ(*found, value);
      }
    }
  }
  ASSERT_EQ(map.size(), oracle.size());
  for (const auto& [key, value] : oracle) {
    const std::uint32_t* found = map.Find(key);
    ASSERT_NE(found, nullptr) << "key " << key;
    EXPECT_EQ(*found, value);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, PageMapTest,
                         ::testing::Values(MapCase{PageMapLayout::kMixed, false}, MapCase{PageMapLayout::kMixed, true},
                                           MapCase{PageMapLayout::kRuns, false}, MapCase{PageMapLayout::kRuns, true}),
                         [](const ::testing::TestParamInfo<MapCase>& info) {
                           return std::string(info.param.layout == PageMapLayout::kRuns ? "Runs" : "Mixed") +
                                  (info.param.hashed ? "Hashed" : "Numbered");
                         });

// The runs layout's point: consecutive ids start their probes side by side.
TEST(PageMapLayoutTest, RunsPutConsecutiveIdsInNeighbouringEntries) {
  PageMap map(PageMapLayout::kRuns);
  map.Reserve(1 << 16);
  const std::uint64_t base_id = 1000 << PageMap::kRunBits;  // a run's first id
  for (std::uint32_t i = 0; i < (1u << PageMap::kRunBits); ++i) map.Insert(base_id + i, i);
  const std::uint32_t* first = map.Find(base_id);
  ASSERT_NE(first, nullptr);
  for (std::uint32_t i = 1; i < (1u << PageMap::kRunBits); ++i) {
    const std::uint32_t* v = map.Find(base_id + i);
    ASSERT_NE(v, nullptr);
    // Values are 12 bytes apart in the packed entries array.
    EXPECT_EQ(reinterpret_cast<const char*>(v) - reinterpret_cast<const char*>(first), 12 * static_cast<long>(i));
  }
}

}  // namespace
}  // namespace kvwatch::curve
