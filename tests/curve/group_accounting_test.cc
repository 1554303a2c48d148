// curve/group_accounting.h: the live agent's tenants and classes. The numbers
// themselves are tested against oracles in tenants_test.cc; here: the
// accounting's lifetime and windows equal GroupTracker + GroupCurves driven by
// hand, a hand-worked flood is attributed to the flooding class and tenant, a
// relabelled slot starts from zero, windows expire while the lifetime keeps
// counting, and a checkpoint restores the same numbers.
#include "curve/group_accounting.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "curve/bucketed_curve.h"

namespace kvwatch::curve {
namespace {

struct Fixture {
  std::vector<std::uint64_t> bounds = LogBucketBounds(4096, 4);
  GroupAccountingOptions Options(std::vector<std::uint64_t> capacities, std::vector<double> windows = {60, 3600}) {
    for (std::uint64_t c : capacities) bounds.push_back(c);
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    GroupAccountingOptions o;
    o.engine.max_pages = 4096;
    o.bounds = &bounds;
    o.capacities = std::move(capacities);
    o.windows_s = std::move(windows);
    o.bytes_per_token = 1024;
    return o;
  }
};

Request Make(std::string tenant, std::vector<PageId> pages, std::string cls = "") {
  Request r;
  r.tenant = std::move(tenant);
  r.request_class = std::move(cls);
  r.pages = std::move(pages);
  r.input_tokens = static_cast<std::int64_t>(r.pages.size()) * 16;
  r.output_tokens = 100;
  return r;
}

// Runs requests through an engine with the accounting's options, one second apart.
class Driver {
 public:
  explicit Driver(GroupAccountingOptions options)
      : accounting(std::move(options)), engine(accounting.SharedEngineOptions()) {}
  void Add(const Request& r, double t) {
    const GroupTags tags = accounting.Classify(r);
    engine.Process(r.pages, tags, &outcome);
    accounting.Add(r, tags, outcome, t);
  }
  GroupAccounting accounting;
  StackDistanceEngine engine;
  RequestOutcome outcome;
};

std::vector<Request> RandomRequests(std::uint32_t seed, std::size_t n) {
  std::mt19937 rng(seed);
  std::vector<Request> out;
  std::vector<std::vector<PageId>> chats(6);
  PageId next = 1000;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t t = rng() % 5;
    if (rng() % 3 == 0) {
      std::vector<PageId> flood = {1, 2};  // a shared system prompt
      for (int k = 0; k < 4; ++k) flood.push_back(next++);
      out.push_back(Make("bulk", flood));
    } else {
      std::vector<PageId>& chat = chats[rng() % chats.size()];
      if (chat.size() > 30) chat.clear();
      for (int k = 0; k < 3; ++k) chat.push_back(next++);
      out.push_back(Make("tenant-" + std::to_string(t), chat));
    }
  }
  return out;
}

TEST(GroupAccountingTest, LifetimeAndWindowsEqualTheTrackerDrivenByHand) {
  Fixture f;
  GroupAccountingOptions o = f.Options({16, 64, 256});
  Driver d(o);
  // The same by hand: folders that never fold (K >= names), the tracker, one GroupCurves.
  GroupLayout layout;
  layout.tenant_groups = 9;
  layout.class_groups = 9;
  layout.capacities = {16, 64, 256};
  layout.bytes_per_token = 1024;
  GroupTracker tracker(&layout, o.engine);
  GroupCurves expected(&layout);
  TenantFolder tenants, classes;
  RequestClassifier classifier;
  StackDistanceEngine engine(GroupTracker::SharedEngineOptions(o.engine, layout));
  RequestOutcome outcome;
  const std::vector<Request> requests = RandomRequests(7, 3000);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    d.Add(r, static_cast<double>(i) * 0.01);  // 30 s: within both windows
    const std::uint32_t t = tenants.Observe(r.tenant, r.pages.size());
    const std::uint32_t turn = DerivedTurn(r, r.pages, classifier);
    const std::uint32_t c = classes.Observe(ClassOf(r, turn), r.pages.size());
    const std::uint8_t tags[2] = {static_cast<std::uint8_t>(t), static_cast<std::uint8_t>(c)};
    engine.Process(r.pages, tags, &outcome);
    RememberClass(r, r.pages, turn, o.page_tokens, outcome.unlimited_hits, &classifier);
    expected.Add(tracker.Observe(t, c, r, r.pages, outcome));
  }
  const GroupAccounting::View v = d.accounting.Snapshot(true);
  ASSERT_EQ(v.windows.size(), 2u);
  EXPECT_EQ(v.tenant_labels, tenants.labels());
  EXPECT_EQ(v.class_labels, classes.labels());
  std::uint64_t misses = 0;
  for (std::uint32_t dim = 0; dim < 2; ++dim) {
    for (std::uint32_t g = 0; g < 9; ++g) {
      EXPECT_EQ(v.lifetime.requests(dim, g), expected.requests(dim, g));
      EXPECT_EQ(v.lifetime.page_refs(dim, g), expected.page_refs(dim, g));
      EXPECT_EQ(v.windows[0].requests(dim, g), expected.requests(dim, g));
      for (std::size_t c = 0; c < 3; ++c) {
        EXPECT_EQ(v.lifetime.shared_hits(dim, g, c), expected.shared_hits(dim, g, c));
        EXPECT_EQ(v.lifetime.capacity_misses(dim, g, c), expected.capacity_misses(dim, g, c));
        EXPECT_EQ(v.windows[1].capacity_misses(dim, g, c), expected.capacity_misses(dim, g, c));
        misses += expected.capacity_misses(dim, g, c);
        for (std::uint32_t e = 0; e < 9; ++e) {
          EXPECT_DOUBLE_EQ(v.lifetime.evicted_by(dim, c, g, e), expected.evicted_by(dim, c, g, e));
        }
        // The window's bucketed curve agrees with the exact counters at the capacity.
        if (expected.page_refs(dim, g) > 0) {
          EXPECT_EQ(v.windows[0].shared(dim, g).PageHits(layout.capacities[c]), expected.shared_hits(dim, g, c));
        }
      }
    }
  }
  EXPECT_GT(misses, 0u);  // the workload does evict
}

// Conversation pages are pushed out by a single-turn flood: the misses of the
// conversation's next turn are attributed to class "first" and tenant "bulk".
TEST(GroupAccountingTest, HandWorkedFloodIsAttributedToTheFloodingClassAndTenant) {
  Fixture f;
  Driver d(f.Options({4}));
  d.Add(Make("chat", {1, 2}), 0);                                // first
  d.Add(Make("chat", {1, 2, 3}), 1);                             // turn2
  for (PageId p = 10; p < 15; ++p) d.Add(Make("bulk", {p}), 2);  // five one-page "first" requests
  d.Add(Make("chat", {1, 2, 3, 4}), 3);                          // turn3-4: pages 1, 2, 3 are 5 pages deep, beyond 4
  const GroupAccounting::View v = d.accounting.Snapshot(false);
  auto group = [](const std::vector<std::string>& labels, const std::string& name) {
    return static_cast<std::uint32_t>(std::find(labels.begin(), labels.end(), name) - labels.begin());
  };
  const std::uint32_t turn34 = group(v.class_labels, "turn3-4"), first = group(v.class_labels, "first");
  const std::uint32_t chat = group(v.tenant_labels, "chat"), bulk = group(v.tenant_labels, "bulk");
  ASSERT_LT(turn34, v.class_labels.size());
  ASSERT_LT(bulk, v.tenant_labels.size());
  // Tail-first, the stack before the third turn is 14 13 12 11 10 1 2 3: pages 1, 2, 3
  // are 5, 6, 7 deep. Page 1's 5 are all "bulk"/"first"; page 2's 6 add page 1
  // ("chat"/"turn2"); page 3's 7 add pages 1 and 2. Misses at 4: 1 + 5/6 + 5/7 to
  // the flood, 1/6 + 2/7 to the conversation itself.
  const double flood = 1 + 5.0 / 6 + 5.0 / 7, self = 1.0 / 6 + 2.0 / 7;
  const std::uint32_t turn2 = group(v.class_labels, "turn2");
  EXPECT_EQ(v.lifetime.capacity_misses(1, turn34, 0), 3u);
  EXPECT_DOUBLE_EQ(v.lifetime.evicted_by(1, 0, turn34, first), flood);
  EXPECT_DOUBLE_EQ(v.lifetime.evicted_by(1, 0, turn34, turn2), self);
  EXPECT_EQ(v.lifetime.capacity_misses(0, chat, 0), 3u);
  EXPECT_DOUBLE_EQ(v.lifetime.evicted_by(0, 0, chat, bulk), flood);
  EXPECT_DOUBLE_EQ(v.lifetime.evicted_by(0, 0, chat, chat), self);
  EXPECT_EQ(v.lifetime.unattributed(0, chat, 0), 0u);
  // Footprints: (pages x 16 + 100) x 1024 bytes, in class "first" for the five floods and the first turn.
  std::uint64_t firsts = 0;
  for (std::uint64_t n : v.lifetime.footprint_buckets(first)) firsts += n;
  EXPECT_EQ(firsts, 6u);
  EXPECT_DOUBLE_EQ(v.lifetime.footprint_sum(first), (5.0 * (16 + 100) + (32 + 100)) * 1024);
}

TEST(GroupAccountingTest, ARelabelledSlotStartsFromZero) {
  Fixture f;
  GroupAccountingOptions o = f.Options({8});
  o.tenants.top_k = 1;
  o.tenants.refresh_every = 10;
  Driver d(o);
  PageId next = 1;
  for (int i = 0; i < 10; ++i) d.Add(Make("early", {next++}), 0);  // "early" owns the one slot
  EXPECT_EQ(d.accounting.Snapshot(false).tenant_labels[0], "early");
  for (int i = 0; i < 200; ++i) d.Add(Make("late", {next++, next++}), 1);  // "late" overtakes it
  const GroupAccounting::View v = d.accounting.Snapshot(true);
  ASSERT_EQ(v.tenant_labels[0], "late");
  // Slot 0 counts only "late"'s requests since it took the slot; the rest went to "other".
  std::uint64_t total = 0;
  for (std::uint32_t g = 0; g < 2; ++g) total += v.lifetime.requests(0, g);
  EXPECT_EQ(total - v.lifetime.requests(0, 0), v.lifetime.requests(0, 1));
  EXPECT_LT(v.lifetime.requests(0, 0), 200u);
  EXPECT_GT(v.lifetime.requests(0, 0), 100u);
  EXPECT_EQ(v.windows[0].requests(0, 0), v.lifetime.requests(0, 0));
  EXPECT_EQ(v.lifetime.page_refs(0, 0), 2 * v.lifetime.requests(0, 0));
}

TEST(GroupAccountingTest, WindowsExpireWhileTheLifetimeKeepsCounting) {
  Fixture f;
  Driver d(f.Options({8}, {60}));
  for (PageId p = 1; p <= 20; ++p) d.Add(Make("a", {p}), 0);
  d.accounting.Advance(1000);
  const GroupAccounting::View v = d.accounting.Snapshot(true);
  EXPECT_EQ(v.windows[0].requests(0, 0), 0u);
  EXPECT_EQ(v.lifetime.requests(0, 0), 20u);
}

TEST(GroupAccountingTest, CheckpointRestoresTheNumbers) {
  Fixture f;
  GroupAccountingOptions o = f.Options({16, 64});
  Driver a(o);
  std::vector<Request> requests = RandomRequests(3, 600);
  for (Request& r : requests) r.request_class = r.tenant == "bulk" ? "api" : "chat";  // no classifier state
  for (std::size_t i = 0; i < 300; ++i) a.Add(requests[i], static_cast<double>(i));
  std::vector<std::uint8_t> bytes;
  a.accounting.Serialize(&bytes);
  Driver b(o);
  std::span<const std::uint8_t> in(bytes);
  ASSERT_TRUE(b.accounting.Deserialize(&in));
  EXPECT_TRUE(in.empty());
  ASSERT_TRUE(b.engine.Deserialize(a.engine.Serialize()));
  for (std::size_t i = 300; i < requests.size(); ++i) {
    a.Add(requests[i], static_cast<double>(i));
    b.Add(requests[i], static_cast<double>(i));
  }
  std::vector<std::uint8_t> after_a, after_b;
  a.accounting.Serialize(&after_a);
  b.accounting.Serialize(&after_b);
  EXPECT_EQ(after_a, after_b);
  // A checkpoint laid out for another K is refused.
  GroupAccountingOptions other = o;
  other.tenants.top_k = 4;
  Driver c(other);
  std::span<const std::uint8_t> again(bytes);
  EXPECT_FALSE(c.accounting.Deserialize(&again));
}

TEST(GroupAccountingTest, OptionsAreValidated) {
  TenantOptions t;
  EXPECT_TRUE(t.Validate("tenants.").ok());
  t.top_k = 0;
  EXPECT_EQ(t.Validate("tenants.").error(), "tenants.top_k: expected 1 to 254");
  t.top_k = 8;
  t.class_top_k = 255;
  EXPECT_EQ(t.Validate("tenants.").error(), "tenants.class_top_k: expected 1 to 254");
}

}  // namespace
}  // namespace kvwatch::curve
