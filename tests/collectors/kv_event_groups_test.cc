// KvEventTracker with KV cache groups (kv_event_tracker.h, "KV cache groups"): a
// hybrid model's stream (full + sliding window, GPU and CPU stores) rebuilt per
// group with requests from the full-attention group only; vLLM's full report
// mode across groups; streams without group fields or kinds read as before;
// hostile group fields counted and noted once; session tenants; the groups kept
// across a restore.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectors/kv_event_tracker.h"

namespace kvwatch::collectors {
namespace {

struct CaptureSink : RequestSink {
  std::vector<curve::Request> requests;
  void OnRequest(const curve::Request& r) override { requests.push_back(r); }
};

constexpr std::int64_t kBlock = 4;  // tokens per block

// A vLLM store of one group: tokens present (GPU, or a self-describing CPU store).
BlockStored Store(std::vector<std::uint64_t> hashes, std::optional<std::uint64_t> parent, std::optional<std::int64_t> group,
                  std::optional<std::string> kind = std::nullopt, std::optional<std::int64_t> window = std::nullopt,
                  std::string medium = "GPU") {
  BlockStored e;
  e.block_hashes = std::move(hashes);
  e.parent_block_hash = parent;
  e.token_ids.assign(e.block_hashes.size() * kBlock, 7);
  e.block_size = kBlock;
  e.medium = std::move(medium);
  e.group_idx = group;
  e.kv_cache_spec_kind = std::move(kind);
  e.kv_cache_spec_sliding_window = window;
  return e;
}

// gpt-oss's layout as vLLM groups it: group 0 sliding window (8 tokens: 2 blocks here), group 1 full.
BlockStored Sliding(std::vector<std::uint64_t> hashes, std::optional<std::uint64_t> parent, std::string medium = "GPU") {
  return Store(std::move(hashes), parent, 0, "sliding_window", 8, std::move(medium));
}
BlockStored Full(std::vector<std::uint64_t> hashes, std::optional<std::uint64_t> parent, std::string medium = "GPU") {
  return Store(std::move(hashes), parent, 1, "full_attention", std::nullopt, std::move(medium));
}

BlockRemoved Remove(std::vector<std::uint64_t> hashes, std::optional<std::int64_t> group, std::string medium = "GPU") {
  BlockRemoved e;
  e.block_hashes = std::move(hashes);
  e.medium = std::move(medium);
  e.group_idx = group;
  return e;
}

KvEventBatch Batch(std::vector<KvEvent> events, double ts = 100.0) {
  KvEventBatch b;
  b.ts = ts;
  b.events = std::move(events);
  return b;
}

std::vector<curve::PageId> Ids(const std::vector<std::uint64_t>& hashes) {
  const std::uint64_t s = KvEventScope(KvBaseScope(""), BlockStored{});
  std::vector<curve::PageId> out;
  for (std::uint64_t h : hashes) out.push_back(KvScopedPageId(s, 0, h));
  return out;
}

const KvGroupCounters* Find(const std::vector<KvGroupCounters>& all, const std::string& medium, std::int64_t group) {
  for (const KvGroupCounters& c : all) {
    if (c.medium == medium && c.spec.group == group) return &c;
  }
  return nullptr;
}

KvEventTrackerOptions WithRequestGroup(std::int64_t group) {
  KvEventTrackerOptions o;
  o.request_group = group;
  return o;
}

KvEventTrackerOptions WithTenants(KvTenantSource source) {
  KvEventTrackerOptions o;
  o.tenant_source = source;
  return o;
}

std::uint64_t Anomalies(const KvEventTracker& t, KvGroupAnomaly a) {
  return t.counters().group_anomalies[static_cast<std::size_t>(a)];
}

// Two groups for the same tokens (vLLM publishes one store per group, in group
// order), GPU stores and an offloading connector's CPU stores: one request per
// chain, from the full group, and each group's own retention per medium.
TEST(KvEventGroupsTest, HybridStreamIsReconstructedPerGroup) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  // Request A: 4 blocks. Group 0 announces sliding_window first: not a request group.
  t.Apply(p, Batch({Sliding({1, 2, 3, 4}, std::nullopt), Full({1, 2, 3, 4}, std::nullopt)}, 10.0), sink);
  ASSERT_EQ(sink.requests.size(), 1u);
  EXPECT_EQ(sink.requests[0].pages, Ids({1, 2, 3, 4}));
  EXPECT_EQ(sink.requests[0].input_tokens, 4 * kBlock);
  EXPECT_EQ(t.RequestGroup(), std::optional<std::int64_t>(1));

  // The sliding group's blocks before the window are freed, then evicted; the
  // full group keeps them. Request B extends A by two blocks in both groups.
  t.Apply(p, Batch({Remove({1, 2}, 0), Sliding({5, 6}, 4), Full({5, 6}, 4)}, 11.0), sink);
  ASSERT_EQ(sink.requests.size(), 2u);
  EXPECT_EQ(sink.requests[1].pages, Ids({1, 2, 3, 4, 5, 6}));  // the chain from the full group
  EXPECT_EQ(t.counters().chains_truncated, 0u);

  // The offloading connector stores to CPU, self-describing (tokens, group, kind):
  // the full group's whole prefix, the sliding group's window.
  t.Apply(p, Batch({Full({1, 2, 3, 4, 5, 6}, std::nullopt, "CPU"), Sliding({5, 6}, 4, "CPU")}, 12.0), sink);
  EXPECT_EQ(sink.requests.size(), 2u);  // CPU stores make no request
  t.Apply(p, Batch({Remove({1}, 1, "CPU")}, 13.0), sink);

  EXPECT_EQ(t.ResidentBlocks(p, "GPU", 0), 4u);  // 3, 4, 5, 6
  EXPECT_EQ(t.ResidentBlocks(p, "GPU", 1), 6u);
  EXPECT_EQ(t.ResidentBlocks(p, "CPU", 0), 2u);
  EXPECT_EQ(t.ResidentBlocks(p, "CPU", 1), 5u);
  EXPECT_EQ(t.References(p, "GPU", 0, 1), 0u);
  EXPECT_EQ(t.References(p, "GPU", 1, 1), 1u);

  ASSERT_TRUE(t.grouped());
  const std::vector<KvGroupSpec> specs = t.GroupSpecs();
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0], (KvGroupSpec{.group = 0, .kind = KvSpecKind::kSlidingWindow, .window_tokens = 8}));
  EXPECT_EQ(specs[1], (KvGroupSpec{.group = 1, .kind = KvSpecKind::kFull, .window_tokens = 0}));

  const std::vector<KvGroupCounters> groups = t.GroupCounters();
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0].medium, "GPU");  // media in MediumCounters' order, groups ascending
  EXPECT_EQ(groups[0].spec.group, 0);
  EXPECT_EQ(groups[3].medium, "CPU");
  EXPECT_EQ(groups[3].spec.group, 1);
  const KvGroupCounters* gpu_sliding = Find(groups, "GPU", 0);
  ASSERT_NE(gpu_sliding, nullptr);
  EXPECT_EQ(gpu_sliding->spec.kind, KvSpecKind::kSlidingWindow);
  EXPECT_EQ(gpu_sliding->stored_blocks, 6u);
  EXPECT_EQ(gpu_sliding->evicted_blocks, 2u);
  EXPECT_EQ(gpu_sliding->resident_blocks, 4u);
  const KvGroupCounters* gpu_full = Find(groups, "GPU", 1);
  ASSERT_NE(gpu_full, nullptr);
  EXPECT_EQ(gpu_full->stored_blocks, 6u);
  EXPECT_EQ(gpu_full->evicted_blocks, 0u);
  EXPECT_EQ(gpu_full->resident_blocks, 6u);
  const KvGroupCounters* cpu_full = Find(groups, "CPU", 1);
  ASSERT_NE(cpu_full, nullptr);
  EXPECT_EQ(cpu_full->stored_blocks, 6u);
  EXPECT_EQ(cpu_full->evicted_blocks, 1u);
  EXPECT_EQ(cpu_full->resident_blocks, 5u);
  EXPECT_EQ(Find(groups, "CPU", 0)->resident_blocks, 2u);

  // The per-medium totals are the groups' sums, as before groups.
  const std::vector<KvMediumCounters> media = t.MediumCounters();
  ASSERT_EQ(media.size(), 2u);
  EXPECT_EQ(media[0].resident_blocks, 10u);
  EXPECT_EQ(media[1].medium, "CPU");
  EXPECT_EQ(media[1].stored_blocks, 8u);
  EXPECT_EQ(media[1].tier_moves, 0u);  // self-describing CPU stores carry their tokens
  for (std::uint64_t a : t.counters().group_anomalies) EXPECT_EQ(a, 0u);
  EXPECT_TRUE(t.TakeNotes().empty());
}

// The full group need not be group 0 nor come first: requests wait for it.
TEST(KvEventGroupsTest, RequestsWaitForTheGroupThatAnnouncesFullAttention) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  t.Apply(p, Batch({Sliding({1, 2}, std::nullopt)}), sink);
  EXPECT_TRUE(sink.requests.empty());
  EXPECT_EQ(t.RequestGroup(), std::nullopt);
  // Two full groups (vLLM splits the full layers when they outnumber the
  // windowed ones): the first announced takes the requests, once.
  t.Apply(p, Batch({Store({1, 2}, std::nullopt, 2, "mla_attention"), Store({1, 2}, std::nullopt, 3, "full_attention")}),
          sink);
  ASSERT_EQ(sink.requests.size(), 1u);
  EXPECT_EQ(t.RequestGroup(), std::optional<std::int64_t>(2));
  t.Apply(p, Batch({Store({3}, 2, 3, "full_attention"), Store({3}, 2, 2, "mla_attention")}), sink);
  ASSERT_EQ(sink.requests.size(), 2u);
  EXPECT_EQ(sink.requests[1].pages, Ids({1, 2, 3}));
}

// vLLM's full report mode across groups: each group reports the whole hit, a
// sliding group also the positions it holds no block for. The reports move no
// reference count, and the full group's report merges with its new blocks.
TEST(KvEventGroupsTest, FullReportModeReportsEveryGroupAndMovesNoReferenceCount) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  t.Apply(p, Batch({Sliding({1, 2, 3, 4}, std::nullopt), Full({1, 2, 3, 4}, std::nullopt)}), sink);
  t.Apply(p, Batch({Remove({1, 2}, 0)}), sink);
  // The hit of 4 blocks reported per group, then the new block 5 per group.
  t.Apply(p, Batch({Sliding({1, 2, 3, 4}, std::nullopt), Full({1, 2, 3, 4}, std::nullopt), Sliding({5}, 4), Full({5}, 4)}),
          sink);
  ASSERT_EQ(sink.requests.size(), 2u);
  EXPECT_EQ(sink.requests[1].pages, Ids({1, 2, 3, 4, 5}));
  EXPECT_EQ(t.counters().reuse_reports, 2u);
  EXPECT_EQ(t.counters().merged_chains, 1u);
  EXPECT_EQ(t.References(p, "GPU", 0, 1), 0u);  // not re-added by the report
  EXPECT_EQ(t.References(p, "GPU", 0, 3), 1u);
  EXPECT_EQ(t.References(p, "GPU", 1, 1), 1u);
  EXPECT_EQ(t.ResidentBlocks(p, "GPU", 0), 3u);  // 3, 4, 5
  EXPECT_EQ(t.ResidentBlocks(p, "GPU", 1), 5u);
  const KvGroupCounters* sliding = Find(t.GroupCounters(), "GPU", 0);
  ASSERT_NE(sliding, nullptr);
  EXPECT_EQ(sliding->reused_blocks, 4u);
  EXPECT_EQ(sliding->stored_blocks, 5u);
}

// The same events without any group field, and with group_idx but no kinds
// (vLLM between PRs #37688 and #40984): group 0 makes the requests, as before
// groups; no group series. request_group overrides for the latter.
TEST(KvEventGroupsTest, StreamsWithoutKindsReadAsBeforeAndRequestGroupOverrides) {
  auto feed = [](KvEventTracker& t, bool with_group) {
    const std::size_t p = t.AddPublisher();
    CaptureSink sink;
    auto g = [&](std::int64_t group) { return with_group ? std::optional<std::int64_t>(group) : std::nullopt; };
    t.Apply(p, Batch({Store({1, 2}, std::nullopt, g(0)), Store({1, 2}, std::nullopt, g(1))}), sink);
    t.Apply(p, Batch({Remove({1}, g(0)), Store({3}, 2, g(0)), Store({3}, 2, g(1))}), sink);
    return sink.requests;
  };
  KvEventTracker plain;
  const std::vector<curve::Request> before = feed(plain, false);
  ASSERT_EQ(before.size(), 4u);  // every store is group 0's: 4 requests, as before groups
  EXPECT_FALSE(plain.grouped());
  EXPECT_TRUE(plain.GroupCounters().empty());
  EXPECT_EQ(plain.RequestGroup(), std::optional<std::int64_t>(0));

  KvEventTracker indexed;
  const std::vector<curve::Request> requests = feed(indexed, true);
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].pages, Ids({1, 2}));
  EXPECT_EQ(requests[1].pages, Ids({2, 3}));  // 2's parent 1 left group 0: truncated
  EXPECT_TRUE(indexed.grouped());
  EXPECT_EQ(indexed.RequestGroup(), std::optional<std::int64_t>(0));
  EXPECT_EQ(indexed.GroupSpecs()[1].kind, KvSpecKind::kUnannounced);

  KvEventTracker overridden(WithRequestGroup(1));
  const std::vector<curve::Request> from_one = feed(overridden, true);
  ASSERT_EQ(from_one.size(), 2u);
  EXPECT_EQ(from_one[1].pages, Ids({1, 2, 3}));  // group 1 still holds 1
  EXPECT_EQ(overridden.RequestGroup(), std::optional<std::int64_t>(1));
}

// Hostile group fields: counted per event, noted once per anomaly with what was
// expected, the first spec kept, never a stop.
TEST(KvEventGroupsTest, HostileGroupFieldsAreCountedNotedOnceAndKeepTheFirstSpec) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  t.Apply(p,
          Batch({Store({1}, std::nullopt, 0, "full_attention"), Store({1}, std::nullopt, 1, "quantum_attention"),
                 Store({1}, std::nullopt, 2, "sliding_window", 0), Store({1}, std::nullopt, 3, "sliding_window",
                                                                         std::int64_t{1} << 40),
                 Store({1}, std::nullopt, 4, "sliding_window"), Store({1}, std::nullopt, 5, "full_attention", 128)}),
          sink);
  EXPECT_EQ(Anomalies(t, KvGroupAnomaly::kUnknownKind), 1u);
  EXPECT_EQ(Anomalies(t, KvGroupAnomaly::kBadWindow), 4u);
  std::vector<std::string> notes = t.TakeNotes();
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("group 1 announces kv_cache_spec_kind 'quantum_attention'; expected one of full_attention"),
            std::string::npos)
      << notes[0];
  EXPECT_NE(notes[0].find("kind=\"unknown_kind\""), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find("group 2 (sliding_window) announces a window of 0 tokens; expected 1 to 67108864"),
            std::string::npos)
      << notes[1];
  const std::vector<KvGroupSpec> specs = t.GroupSpecs();
  ASSERT_EQ(specs.size(), 6u);
  EXPECT_EQ(specs[1].kind, KvSpecKind::kOther);
  EXPECT_EQ(specs[2], (KvGroupSpec{.group = 2, .kind = KvSpecKind::kSlidingWindow, .window_tokens = 0}));
  EXPECT_EQ(specs[3].window_tokens, 0);
  EXPECT_EQ(specs[5], (KvGroupSpec{.group = 5, .kind = KvSpecKind::kFull, .window_tokens = 0}));

  // Mixed kinds for one group_idx: the first kept; a group_idx out of range: ignored.
  t.Apply(p, Batch({Store({2}, 1, 0, "sliding_window", 64), Store({2}, 1, 0, "mamba"), Store({9}, std::nullopt, -3),
                    Remove({9}, 100000), Store({3}, 2, 0, "full_attention")}),
          sink);
  EXPECT_EQ(Anomalies(t, KvGroupAnomaly::kKindChanged), 2u);
  EXPECT_EQ(Anomalies(t, KvGroupAnomaly::kBadGroup), 2u);
  notes = t.TakeNotes();
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("group 0 announced full first, now sliding_window of 64 tokens; expected one spec per group"),
            std::string::npos)
      << notes[0];
  EXPECT_NE(notes[1].find("group_idx -3; expected 0 to 255"), std::string::npos) << notes[1];
  EXPECT_EQ(t.GroupSpecs()[0].kind, KvSpecKind::kFull);
  EXPECT_EQ(t.RequestGroup(), std::optional<std::int64_t>(0));
  // Every store of group 0 still made its request; the ignored ones none.
  ASSERT_EQ(sink.requests.size(), 4u);
  EXPECT_EQ(sink.requests[3].pages, Ids({1, 2, 3}));
  EXPECT_EQ(t.ResidentBlocks(p, "GPU", -3), 0u);
  // Noted once: the same anomalies again add counts, no note.
  t.Apply(p, Batch({Store({4}, std::nullopt, 7, "quantum_attention"), Store({5}, std::nullopt, 300)}), sink);
  EXPECT_EQ(Anomalies(t, KvGroupAnomaly::kUnknownKind), 2u);
  EXPECT_EQ(Anomalies(t, KvGroupAnomaly::kBadGroup), 3u);
  EXPECT_TRUE(t.TakeNotes().empty());
}

TEST(KvEventGroupsTest, AConfiguredRequestGroupThatAnnouncesAnotherKindIsNoted) {
  KvEventTracker t(WithRequestGroup(0));
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  t.Apply(p, Batch({Sliding({1, 2}, std::nullopt), Full({1, 2}, std::nullopt)}), sink);
  ASSERT_EQ(sink.requests.size(), 1u);  // from group 0, as configured
  EXPECT_EQ(t.RequestGroup(), std::optional<std::int64_t>(0));
  EXPECT_EQ(Anomalies(t, KvGroupAnomaly::kRequestGroupNotFull), 1u);
  const std::vector<std::string> notes = t.TakeNotes();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("request_group 0 is configured, but the group announces sliding_window of 8 tokens"),
            std::string::npos)
      << notes[0];
}

TEST(KvEventGroupsTest, SessionIdIsATenantWherePresent) {
  KvEventTracker t(WithTenants(KvTenantSource::kSessionId));
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  BlockStored a = Full({1, 2}, std::nullopt);
  a.session_id = "chat-17";
  BlockStored b = Full({3}, 2);
  t.Apply(p, Batch({Sliding({1, 2}, std::nullopt), a}), sink);
  t.Apply(p, Batch({b}), sink);
  ASSERT_EQ(sink.requests.size(), 2u);
  EXPECT_EQ(sink.requests[0].tenant, "chat-17");
  EXPECT_EQ(sink.requests[1].tenant, "");
  EXPECT_EQ(ParseKvTenantSource("session_id"), KvTenantSource::kSessionId);
  EXPECT_EQ(KvTenantSourceName(KvTenantSource::kSessionId), "session_id");
}

// The groups survive a restore: the restored tracker takes requests from the
// same group before any store announces one again.
TEST(KvEventGroupsTest, GroupsAreKeptAcrossARestore) {
  KvEventTracker original;
  const std::size_t p = original.AddPublisher();
  CaptureSink sink;
  original.Apply(p, Batch({Sliding({1, 2}, std::nullopt), Full({1, 2}, std::nullopt)}), sink);
  std::vector<std::uint8_t> state;
  const std::vector<std::size_t> publishers = {p};
  original.AppendState(publishers, &state);

  KvEventTracker restored;
  const base::Status s = restored.RestoreState(state, 1);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_TRUE(restored.grouped());
  EXPECT_EQ(restored.GroupSpecs(), original.GroupSpecs());
  EXPECT_EQ(restored.RequestGroup(), std::optional<std::int64_t>(1));
  // Stores without kinds (hostile here) still go by the restored groups.
  restored.Apply(0, Batch({Store({3}, 2, 0), Store({3}, 2, 1)}), sink);
  ASSERT_EQ(sink.requests.size(), 2u);
  EXPECT_EQ(sink.requests[1].pages, Ids({1, 2, 3}));

  KvEventTracker other(WithRequestGroup(1));
  const base::Status refused = other.RestoreState(state, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("written for request_group unset, not 1"), std::string::npos) << refused.error();

  // The encoding before groups (the collector's state version 2): the header
  // without the groups part; its request group 0 is what an unset one starts from.
  KvEventTracker plain;
  plain.AddPublisher();
  plain.Apply(0, Batch({Store({1, 2}, std::nullopt, std::nullopt)}), sink);
  std::vector<std::uint8_t> v3;
  plain.AppendState(publishers, &v3);
  std::vector<std::uint8_t> v2 = v3;
  const std::size_t groups_at = 8 + 8 + 8;                  // scope, request group, block size
  v2.erase(v2.begin() + groups_at, v2.begin() + groups_at + 1 + 8 + 4);  // grouped, chosen, no specs
  v2[8] = 0;  // the request group written before groups: 0 (little-endian int64)
  for (int i = 9; i < 16; ++i) v2[static_cast<std::size_t>(i)] = 0;
  KvEventTracker old;
  const base::Status read = old.RestoreState(v2, 1, /*with_groups=*/false);
  ASSERT_TRUE(read.ok()) << read.error();
  EXPECT_FALSE(old.grouped());
  EXPECT_EQ(old.RequestGroup(), std::optional<std::int64_t>(0));
  EXPECT_EQ(old.ResidentBlocks(0, "GPU", 0), 2u);
  KvEventTracker old_other(WithRequestGroup(1));
  const base::Status old_refused = old_other.RestoreState(v2, 1, false);
  ASSERT_FALSE(old_refused.ok());
  EXPECT_NE(old_refused.error().find("written for request_group 0, not 1"), std::string::npos) << old_refused.error();
  EXPECT_TRUE(KvEventTracker(WithRequestGroup(0)).RestoreState(v2, 1, false).ok());
}

}  // namespace
}  // namespace kvwatch::collectors
