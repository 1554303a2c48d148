// KvEventTracker without sockets: block state, counters, reuse reports, the
// request reconstruction from parent links, and KV cache groups.
#include "collectors/kv_event_tracker.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <msgpack.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "collectors/kv_event_decoder.h"
#include "collectors/testing/kv_event_encoder.h"

namespace kvwatch::collectors {
namespace {

struct CaptureSink : RequestSink {
  std::vector<curve::Request> requests;
  void OnRequest(const curve::Request& r) override { requests.push_back(r); }
};

BlockStored Stored(std::vector<std::uint64_t> hashes, std::optional<std::uint64_t> parent,
                   std::optional<std::string> medium = std::nullopt, bool tokens = true) {
  BlockStored e;
  e.block_hashes = std::move(hashes);
  e.parent_block_hash = parent;
  if (tokens) e.token_ids.assign(e.block_hashes.size() * 4, 7);
  e.block_size = tokens ? 4 : 0;
  e.medium = std::move(medium);
  return e;
}

BlockRemoved Removed(std::vector<std::uint64_t> hashes, std::optional<std::string> medium = std::nullopt) {
  BlockRemoved e;
  e.block_hashes = std::move(hashes);
  e.medium = std::move(medium);
  return e;
}

KvEventBatch Batch(std::vector<KvEvent> events, double ts = 100.0) {
  KvEventBatch b;
  b.ts = ts;
  b.events = std::move(events);
  return b;
}

// The page ids the tracker gives unscoped events of hashes.
std::vector<curve::PageId> Ids(const std::vector<std::uint64_t>& hashes, const std::string& scope = "") {
  const std::uint64_t s = KvEventScope(KvBaseScope(scope), BlockStored{});
  std::vector<curve::PageId> out;
  for (std::uint64_t h : hashes) out.push_back(KvScopedPageId(s, 0, h));
  return out;
}

TEST(KvEventTrackerTest, StoredChainsBecomeRequestsWithTheirKnownAncestors) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  t.Apply(p, Batch({Stored({1, 2, 3}, std::nullopt)}, 10.0), sink);
  t.Apply(p, Batch({Stored({4, 5}, 3)}, 11.0), sink);  // extends 1-2-3
  t.Apply(p, Batch({Stored({6}, 2)}, 12.0), sink);     // branches after 1-2
  ASSERT_EQ(sink.requests.size(), 3u);
  EXPECT_EQ(sink.requests[0].pages, Ids({1, 2, 3}));
  EXPECT_EQ(sink.requests[1].pages, Ids({1, 2, 3, 4, 5}));
  EXPECT_EQ(sink.requests[2].pages, Ids({1, 2, 6}));
  EXPECT_DOUBLE_EQ(sink.requests[1].timestamp_s, 11.0);
  // The prompt's tokens for the footprint: its blocks x the block size (4 here).
  EXPECT_EQ(sink.requests[1].input_tokens, 20);
  EXPECT_EQ(sink.requests[2].input_tokens, 12);
  EXPECT_EQ(t.counters().chains_truncated, 0u);
  EXPECT_EQ(t.ResidentBlocks(p, "GPU", 0), 6u);
}

TEST(KvEventTrackerTest, WithoutABlockSizeThePromptTokensAreUnknown) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  t.Apply(p, Batch({Stored({1, 2}, std::nullopt, std::nullopt, /*tokens=*/false)}), sink);
  ASSERT_EQ(sink.requests.size(), 1u);
  EXPECT_EQ(sink.requests[0].input_tokens, -1);
}

TEST(KvEventTrackerTest, UnknownParentTruncatesTheChainAndIsCounted) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  t.Apply(p, Batch({Stored({8, 9}, 77)}), sink);
  ASSERT_EQ(sink.requests.size(), 1u);
  EXPECT_EQ(sink.requests[0].pages, Ids({8, 9}));
  EXPECT_EQ(t.counters().chains_truncated, 1u);
}

TEST(KvEventTrackerTest, DuplicateCopiesAreReferenceCounted) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  t.Apply(p, Batch({Stored({1, 2}, std::nullopt), Stored({2}, 1)}), sink);  // a second copy of 2
  EXPECT_EQ(t.References(p, "GPU", 0, 2), 2u);
  t.Apply(p, Batch({Removed({2})}), sink);
  EXPECT_EQ(t.References(p, "GPU", 0, 2), 1u);
  EXPECT_EQ(t.ResidentBlocks(p, "GPU", 0), 2u);
  t.Apply(p, Batch({Removed({2, 2})}), sink);  // the last copy, then one too many
  EXPECT_EQ(t.ResidentBlocks(p, "GPU", 0), 1u);
  EXPECT_EQ(t.counters().unknown_removals, 1u);
  const auto media = t.MediumCounters();
  ASSERT_EQ(media.size(), 1u);
  EXPECT_EQ(media[0].medium, "GPU");
  EXPECT_EQ(media[0].stored_blocks, 3u);
  EXPECT_EQ(media[0].evicted_blocks, 3u);  // every removed hash counts
  EXPECT_EQ(media[0].resident_blocks, 1u);
}

TEST(KvEventTrackerTest, ReuseReportMergesWithTheNewBlocksOfTheSameStep) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  t.Apply(p, Batch({Stored({1, 2, 3}, std::nullopt)}), sink);
  // Full report mode: hits 1-2 reported from the root, an eviction, then the new blocks.
  t.Apply(p, Batch({Stored({1, 2}, std::nullopt), Removed({3}), Stored({4, 5}, 2)}), sink);
  // A full hit: only the report.
  t.Apply(p, Batch({Stored({1, 2, 4}, std::nullopt)}), sink);
  ASSERT_EQ(sink.requests.size(), 3u);
  EXPECT_EQ(sink.requests[1].pages, Ids({1, 2, 4, 5}));
  EXPECT_EQ(sink.requests[2].pages, Ids({1, 2, 4}));
  EXPECT_EQ(t.counters().reuse_reports, 2u);
  EXPECT_EQ(t.counters().merged_chains, 1u);
  // Reports add no copies: one removal each makes them non-resident.
  EXPECT_EQ(t.References(p, "GPU", 0, 1), 1u);
  const auto media = t.MediumCounters();
  EXPECT_EQ(media[0].stored_blocks, 5u);
  EXPECT_EQ(media[0].reused_blocks, 5u);
}

TEST(KvEventTrackerTest, ReportOfANonResidentBlockIsAStore) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  t.Apply(p, Batch({Stored({1}, std::nullopt)}), sink);
  t.Apply(p, Batch({Stored({1, 2}, std::nullopt)}), sink);  // 2 is new: not a report
  EXPECT_EQ(t.counters().reuse_reports, 0u);
  EXPECT_EQ(t.References(p, "GPU", 0, 1), 2u);
}

TEST(KvEventTrackerTest, MergeOnlyWithinOneBatchAndOnlyOnTheReportedTail) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  t.Apply(p, Batch({Stored({1, 2}, std::nullopt)}), sink);
  t.Apply(p, Batch({Stored({1, 2}, std::nullopt)}), sink);               // report
  t.Apply(p, Batch({Stored({3}, 2)}), sink);                             // next step: reconstructed
  t.Apply(p, Batch({Stored({1}, std::nullopt), Stored({9}, 2)}), sink);  // parent is not the tail
  ASSERT_EQ(sink.requests.size(), 5u);
  EXPECT_EQ(sink.requests[1].pages, Ids({1, 2}));
  EXPECT_EQ(sink.requests[2].pages, Ids({1, 2, 3}));
  EXPECT_EQ(sink.requests[3].pages, Ids({1}));
  EXPECT_EQ(sink.requests[4].pages, Ids({1, 2, 9}));
  EXPECT_EQ(t.counters().merged_chains, 0u);
}

TEST(KvEventTrackerTest, ScopeSeparatesModelsLorasSaltsAndExtraKeys) {
  KvEventTracker plain;
  KvEventTracker scoped(KvEventTrackerOptions{.scope = "llama-3-8b"});
  CaptureSink a, b;
  plain.Apply(plain.AddPublisher(), Batch({Stored({1}, std::nullopt)}), a);
  scoped.Apply(scoped.AddPublisher(), Batch({Stored({1}, std::nullopt)}), b);
  EXPECT_NE(a.requests[0].pages, b.requests[0].pages);
  EXPECT_EQ(b.requests[0].pages, Ids({1}, "llama-3-8b"));

  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  BlockStored lora = Stored({1}, std::nullopt);
  lora.lora_name = "adapter";
  BlockStored lora_id = Stored({1}, std::nullopt);
  lora_id.lora_id = 3;
  BlockStored salted = Stored({1}, std::nullopt);
  salted.cache_salt = "tenant-a";
  BlockStored extra = Stored({1, 2}, std::nullopt);
  extra.has_extra_keys = true;
  extra.extra_key_digests = {0, 42};
  t.Apply(p, Batch({Stored({1}, std::nullopt)}), sink);
  t.Apply(p, Batch({lora}), sink);
  t.Apply(p, Batch({lora_id}), sink);
  t.Apply(p, Batch({salted}), sink);
  t.Apply(p, Batch({extra}), sink);
  ASSERT_EQ(sink.requests.size(), 5u);
  std::set<curve::PageId> first_pages;
  for (std::size_t i = 0; i < 4; ++i) first_pages.insert(sink.requests[i].pages[0]);
  EXPECT_EQ(first_pages.size(), 4u);
  // extra_keys scope only the block they belong to.
  EXPECT_EQ(sink.requests[4].pages[0], sink.requests[0].pages[0]);
  EXPECT_NE(sink.requests[4].pages[1], Ids({2})[0]);
}

TEST(KvEventTrackerTest, AncestorsKeepTheirOwnScope) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  BlockStored head = Stored({1}, std::nullopt);
  head.has_extra_keys = true;
  head.extra_key_digests = {99};  // e.g. vLLM's cache_salt on the first block
  t.Apply(p, Batch({head}), sink);
  t.Apply(p, Batch({Stored({2}, 1)}), sink);
  ASSERT_EQ(sink.requests.size(), 2u);
  EXPECT_EQ(sink.requests[1].pages[0], sink.requests[0].pages[0]);
}

TEST(KvEventTrackerTest, TierMovesAndMediaAreCountedApart) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  t.Apply(p,
          Batch({Stored({1, 2}, std::nullopt, "GPU"), Stored({1, 2}, std::nullopt, "CPU", false), Removed({1}, "GPU")}),
          sink);
  EXPECT_EQ(sink.requests.size(), 1u);  // the CPU store is not a request
  const auto media = t.MediumCounters();
  ASSERT_EQ(media.size(), 2u);
  EXPECT_EQ(media[1].medium, "CPU");
  EXPECT_EQ(media[1].stored_blocks, 2u);
  EXPECT_EQ(media[1].tier_moves, 2u);
  EXPECT_EQ(media[1].resident_blocks, 2u);
  EXPECT_EQ(media[0].tier_moves, 0u);
  EXPECT_EQ(media[0].resident_blocks, 1u);
  EXPECT_EQ(media[0].evicted_blocks, 1u);
}

TEST(KvEventTrackerTest, ARemoteLocalityIsATierOfItsOwn) {
  // vLLM #48281: offload stores and removals on a file system or object store say
  // whether the copy is the node's own (LOCAL) or shared (REMOTE).
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  BlockStored local = Stored({1, 2}, std::nullopt, "FS", false);
  local.locality = "LOCAL";
  BlockStored remote = Stored({1, 2, 3}, std::nullopt, "FS", false);
  remote.locality = "REMOTE";
  BlockRemoved remote_removed = Removed({3}, "FS");
  remote_removed.locality = "REMOTE";
  t.Apply(
      p,
      Batch({Stored({1, 2, 3}, std::nullopt), local, Stored({4}, std::nullopt, "FS", false), remote, remote_removed}),
      sink);
  EXPECT_EQ(sink.requests.size(), 1u);  // offload stores are not requests
  const auto media = t.MediumCounters();
  ASSERT_EQ(media.size(), 3u);
  EXPECT_EQ(media[1].medium, "FS");  // LOCAL and no locality: one tier
  EXPECT_EQ(media[1].stored_blocks, 3u);
  EXPECT_EQ(media[1].resident_blocks, 3u);
  EXPECT_EQ(media[2].medium, "FS/REMOTE");
  EXPECT_EQ(media[2].stored_blocks, 3u);
  EXPECT_EQ(media[2].evicted_blocks, 1u);
  EXPECT_EQ(media[2].resident_blocks, 2u);
  EXPECT_EQ(t.ResidentBlocks(p, "FS/REMOTE", 0), 2u);
  EXPECT_EQ(t.counters().unknown_removals, 0u);
}

TEST(KvEventTrackerTest, MediaNamesAreBounded) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  for (int i = 0; i < 100; ++i) {
    char medium[16];
    std::snprintf(medium, sizeof(medium), "M%d", i);
    t.Apply(p, Batch({Stored({1}, std::nullopt, medium)}), sink);
  }
  const auto media = t.MediumCounters();
  EXPECT_EQ(media.size(), KvEventTracker::kMaxMedia);
  EXPECT_EQ(media.back().medium, "other");
}

TEST(KvEventTrackerTest, ClearAndResetDropStateWithoutEvictions) {
  KvEventTracker t;
  const std::size_t a = t.AddPublisher();
  const std::size_t b = t.AddPublisher();
  CaptureSink sink;
  t.Apply(a, Batch({Stored({1, 2}, std::nullopt)}), sink);
  t.Apply(b, Batch({Stored({1, 2}, std::nullopt)}), sink);
  t.Apply(a, Batch({AllBlocksCleared{}}), sink);
  EXPECT_EQ(t.ResidentBlocks(a, "GPU", 0), 0u);
  EXPECT_EQ(t.ResidentBlocks(b, "GPU", 0), 2u);
  EXPECT_EQ(t.MediumCounters()[0].evicted_blocks, 0u);
  EXPECT_EQ(t.counters().cache_clears, 1u);
  // b still holds 1-2, so their links survive a's clear.
  t.Apply(a, Batch({Stored({3}, 2)}), sink);
  EXPECT_EQ(sink.requests.back().pages, Ids({1, 2, 3}));
  t.ResetPublisher(b);
  EXPECT_EQ(t.ResidentBlocks(b, "GPU", 0), 0u);
  EXPECT_EQ(t.counters().publisher_resets, 1u);
}

TEST(KvEventTrackerTest, LinksLiveWhileTheBlockIsResident) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  t.Apply(p, Batch({Stored({1, 2}, std::nullopt)}), sink);
  EXPECT_EQ(t.parent_map_size(), 2u);
  t.Apply(p, Batch({Removed({1})}), sink);
  EXPECT_EQ(t.parent_map_size(), 1u);
  t.Apply(p, Batch({Stored({3}, 2)}), sink);  // 2's ancestor 1 is gone: truncated
  EXPECT_EQ(sink.requests.back().pages, Ids({2, 3}));
  EXPECT_EQ(t.counters().chains_truncated, 1u);
}

TEST(KvEventTrackerTest, GroupsAreTrackedApartAndOnlyTheRequestGroupMakesRequests) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  BlockStored g1 = Stored({1, 2}, std::nullopt);
  g1.group_idx = 1;
  t.Apply(p, Batch({Stored({1, 2}, std::nullopt), g1}), sink);
  EXPECT_EQ(sink.requests.size(), 1u);
  EXPECT_EQ(t.ResidentBlocks(p, "GPU", 0), 2u);
  EXPECT_EQ(t.ResidentBlocks(p, "GPU", 1), 2u);
  EXPECT_EQ(t.MediumCounters()[0].resident_blocks, 4u);
}

TEST(KvEventTrackerTest, CyclesAndLongChainsAreBounded) {
  KvEventTrackerOptions o;
  o.max_request_pages = 8;
  KvEventTracker t(o);
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  // Hostile links: 1 -> 2 -> 1.
  t.Apply(p, Batch({Stored({1}, 2), Stored({2}, 1), Stored({5}, 1)}), sink);
  EXPECT_GE(t.counters().chain_cycles, 1u);
  std::vector<std::uint64_t> chain(20);
  for (std::size_t i = 0; i < chain.size(); ++i) chain[i] = 100 + i;
  t.Apply(p, Batch({Stored(chain, std::nullopt)}), sink);
  t.Apply(p, Batch({Stored({500}, 119)}), sink);
  EXPECT_EQ(sink.requests.back().pages.size(), 8u);
  EXPECT_GE(t.counters().chains_too_long, 2u);
}

TEST(KvEventTrackerTest, TensorRtCacheLevelUpdatesMoveCopies) {
  KvEventTracker t;
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  BlockUpdated u;
  u.block_hash = 1;
  u.cache_level_old = 0;
  u.cache_level_new = 1;
  t.Apply(p, Batch({Stored({1}, std::nullopt), u}), sink);
  EXPECT_EQ(t.ResidentBlocks(p, "GPU", 0), 0u);
  EXPECT_EQ(t.ResidentBlocks(p, "CPU", 0), 1u);
  EXPECT_EQ(t.MediumCounters()[1].tier_moves, 1u);
}

// Random events against a plain reference of the same rules: reference counts
// per (publisher, medium), reuse reports, clears; the parent map never holds a
// block no publisher has resident.
TEST(KvEventTrackerTest, RandomEventsMatchAReferenceModel) {
  std::mt19937_64 rng(17);
  KvEventTracker t;
  const std::size_t publishers = 3;
  for (std::size_t i = 0; i < publishers; ++i) t.AddPublisher();
  const std::vector<std::optional<std::string>> media = {std::nullopt, "CPU"};
  std::map<std::pair<std::size_t, std::size_t>, std::map<std::uint64_t, std::uint32_t>> ref;
  CaptureSink sink;
  std::uint64_t removals_unknown = 0;
  for (int step = 0; step < 20000; ++step) {
    const std::size_t p = rng() % publishers;
    const std::size_t m = rng() % 100 < 80 ? 0 : 1;
    auto& counts = ref[{p, m}];
    const std::uint64_t roll = rng() % 100;
    std::vector<std::uint64_t> hashes(1 + rng() % 4);
    for (auto& h : hashes) h = rng() % 64;
    if (roll < 1) {
      t.Apply(p, Batch({AllBlocksCleared{}}), sink);
      ref[{p, 0}].clear();
      ref[{p, 1}].clear();
    } else if (roll < 55) {
      std::optional<std::uint64_t> parent;
      if (rng() % 2) parent = rng() % 64;
      bool reuse = m == 0 && !parent.has_value();
      for (std::uint64_t h : hashes) reuse = reuse && counts.count(h) > 0;
      if (!reuse) {
        for (std::uint64_t h : hashes) ++counts[h];
      }
      t.Apply(p, Batch({Stored(hashes, parent, media[m])}), sink);
    } else {
      for (std::uint64_t h : hashes) {
        auto it = counts.find(h);
        if (it == counts.end()) {
          ++removals_unknown;
        } else if (--it->second == 0) {
          counts.erase(it);
        }
      }
      t.Apply(p, Batch({Removed(hashes, media[m])}), sink);
    }
  }
  std::set<std::uint64_t> gpu_resident;
  for (const auto& [key, counts] : ref) {
    const std::string medium = key.second == 0 ? "GPU" : "CPU";
    EXPECT_EQ(t.ResidentBlocks(key.first, medium, 0), counts.size());
    for (const auto& [hash, n] : counts) {
      EXPECT_EQ(t.References(key.first, medium, 0, hash), n);
      if (key.second == 0) gpu_resident.insert(hash);
    }
  }
  EXPECT_EQ(t.counters().unknown_removals, removals_unknown);
  EXPECT_LE(t.parent_map_size(), gpu_resident.size());
  EXPECT_GT(sink.requests.size(), 0u);
}

TEST(KvChainIndexTest, BoundEvictsTheOldestStored) {
  KvChainIndex index(3);
  EXPECT_FALSE(index.Put(1, std::nullopt, 11));
  EXPECT_FALSE(index.Put(2, 1, 12));
  EXPECT_FALSE(index.Put(3, 2, 13));
  EXPECT_FALSE(index.Put(1, std::nullopt, 11));  // refreshed: now the newest
  EXPECT_TRUE(index.Put(4, 3, 14));              // evicts 2
  EXPECT_FALSE(index.Contains(2));
  std::vector<curve::PageId> pages;
  EXPECT_EQ(index.AppendChain(4, 100, &pages), KvChainIndex::WalkEnd::kUnknown);
  EXPECT_EQ(pages, (std::vector<curve::PageId>{13, 14}));
  index.Erase(3);
  pages.clear();
  EXPECT_EQ(index.AppendChain(1, 100, &pages), KvChainIndex::WalkEnd::kRoot);
  EXPECT_EQ(pages, (std::vector<curve::PageId>{11}));
  EXPECT_EQ(index.size(), 2u);
}

// ---- Tenants, from events that went through the wire encoding and the decoder.

// The batch as the engine sends it (map form, as vLLM >= v0.26 and SGLang) and as
// the collector decodes it.
KvEventBatch OverTheWire(const KvEventBatch& batch) {
  KvResult<KvEventBatch> decoded = DecodeKvEventBatch(EncodeKvEventBatch(batch, KvEncoding::kMap));
  EXPECT_TRUE(decoded.ok()) << (decoded.ok() ? "" : decoded.error().ToString());
  return decoded.ok() ? decoded.value() : KvEventBatch{};
}

// vLLM's extra_keys for a chain of `blocks` blocks: block 0 carries the LoRA name
// (when any), one multimodal pair and the cache salt; the others the LoRA name.
std::string VllmExtraKeys(std::size_t blocks, const std::string& lora, const std::string& salt) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pk(buffer);
  pk.pack_array(static_cast<std::uint32_t>(blocks));
  for (std::size_t i = 0; i < blocks; ++i) {
    const bool first = i == 0;
    const std::uint32_t n = (lora.empty() ? 0 : 1) + (first ? 2 : 0);
    if (n == 0) {
      pk.pack_nil();
      continue;
    }
    pk.pack_array(n);
    if (!lora.empty()) pk.pack(lora);
    if (first) {
      pk.pack_array(2);
      pk.pack(std::string("mm-image-7"));
      pk.pack(3);
      pk.pack(salt);
    }
  }
  return std::string(buffer.data(), buffer.size());
}

KvEventTrackerOptions WithTenants(KvTenantSource source) {
  KvEventTrackerOptions options;
  options.tenant_source = source;
  return options;
}

std::vector<std::string> Tenants(KvTenantSource source, const std::vector<KvEventBatch>& batches) {
  KvEventTracker t(WithTenants(source));
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  for (const KvEventBatch& batch : batches) t.Apply(p, OverTheWire(batch), sink);
  std::vector<std::string> out;
  for (const curve::Request& r : sink.requests) out.push_back(r.tenant);
  return out;
}

TEST(KvEventTrackerTenantTest, SourceNamesRoundTrip) {
  for (KvTenantSource source :
       {KvTenantSource::kNone, KvTenantSource::kLora, KvTenantSource::kCacheSalt, KvTenantSource::kLoraOrSalt}) {
    EXPECT_EQ(ParseKvTenantSource(KvTenantSourceName(source)), source);
  }
  EXPECT_FALSE(ParseKvTenantSource("salt").has_value());
  EXPECT_EQ(KvEventTrackerOptions{}.tenant_source, KvTenantSource::kNone);
}

// The spelling table (collectors.kv_events[].tenant_source reads it) names every
// source once, in the enum's order.
TEST(KvEventTrackerTenantTest, SpellingTableNamesEverySource) {
  std::vector<std::string> names;
  int expected = 0;
  for (const auto& spelling : kKvTenantSourceSpellings) {
    EXPECT_EQ(static_cast<int>(spelling.value), expected++);
    EXPECT_EQ(KvTenantSourceName(spelling.value), spelling.name);
    names.emplace_back(spelling.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"none", "lora", "cache_salt", "lora_or_salt", "session_id"}));
}

TEST(KvEventTrackerTenantTest, LoraNameOrIdNamesTheTenant) {
  BlockStored named = Stored({1, 2}, std::nullopt);
  named.lora_name = "adapter-a";
  BlockStored by_id = Stored({11}, std::nullopt);
  by_id.lora_id = 7;
  BlockStored plain = Stored({21}, std::nullopt);
  plain.cache_salt = "salt-x";
  const std::vector<KvEventBatch> batches = {Batch({named}), Batch({by_id}), Batch({plain})};
  EXPECT_EQ(Tenants(KvTenantSource::kNone, batches), (std::vector<std::string>{"", "", ""}));
  EXPECT_EQ(Tenants(KvTenantSource::kLora, batches), (std::vector<std::string>{"adapter-a", "lora-7", ""}));
  EXPECT_EQ(Tenants(KvTenantSource::kCacheSalt, batches), (std::vector<std::string>{"", "", "salt-x"}));
  EXPECT_EQ(Tenants(KvTenantSource::kLoraOrSalt, batches), (std::vector<std::string>{"adapter-a", "lora-7", "salt-x"}));
}

// SGLang: every BlockStored of a salted request carries cache_salt.
TEST(KvEventTrackerTenantTest, SglangCacheSaltOnEveryEvent) {
  BlockStored root = Stored({1, 2}, std::nullopt);
  root.cache_salt = "tenant-a";
  BlockStored next = Stored({3}, 2);
  next.cache_salt = "tenant-a";
  BlockStored other = Stored({4}, 2);
  other.cache_salt = "tenant-b";  // a salted chain cannot really share tenant-a's blocks; the event decides
  EXPECT_EQ(Tenants(KvTenantSource::kCacheSalt, {Batch({root}), Batch({next}), Batch({other})}),
            (std::vector<std::string>{"tenant-a", "tenant-a", "tenant-b"}));
}

// vLLM: the salt is only in block 0's extra_keys of the root chain; requests that
// extend the chain inherit it through the root, with or without a LoRA.
TEST(KvEventTrackerTenantTest, VllmSaltFromTheRootsExtraKeysIsInherited) {
  BlockStored root = Stored({1, 2}, std::nullopt);
  root.has_extra_keys = true;
  root.extra_keys_msgpack = VllmExtraKeys(2, "", "tenant-a");
  BlockStored child = Stored({3}, 2);  // no extra_keys: a later step of the same chain
  BlockStored lora_root = Stored({10, 11}, std::nullopt);
  lora_root.lora_name = "adapter-b";
  lora_root.has_extra_keys = true;
  lora_root.extra_keys_msgpack = VllmExtraKeys(2, "adapter-b", "tenant-b");
  BlockStored lora_child = Stored({12}, 11);
  lora_child.lora_name = "adapter-b";
  lora_child.has_extra_keys = true;
  lora_child.extra_keys_msgpack = VllmExtraKeys(1, "adapter-b", "");
  BlockStored orphan = Stored({30}, 29);  // parent never seen: no root, no tenant
  BlockStored unsalted = Stored({40}, std::nullopt);
  const std::vector<KvEventBatch> batches = {Batch({root}),       Batch({child}),  Batch({lora_root}),
                                             Batch({lora_child}), Batch({orphan}), Batch({unsalted})};
  const KvEventBatch wire = OverTheWire(Batch({root}));
  ASSERT_EQ(wire.events.size(), 1u);
  ASSERT_TRUE(std::get<BlockStored>(wire.events[0]).has_extra_keys);
  EXPECT_EQ(Tenants(KvTenantSource::kCacheSalt, batches),
            (std::vector<std::string>{"tenant-a", "tenant-a", "tenant-b", "tenant-b", "", ""}));
  EXPECT_EQ(Tenants(KvTenantSource::kLoraOrSalt, batches),
            (std::vector<std::string>{"tenant-a", "tenant-a", "adapter-b", "adapter-b", "", ""}));
  EXPECT_EQ(Tenants(KvTenantSource::kLora, batches),
            (std::vector<std::string>{"", "", "adapter-b", "adapter-b", "", ""}));
}

// A reuse report (vLLM full mode) names the tenant of the request it starts, and
// the merged new blocks keep it.
TEST(KvEventTrackerTenantTest, ReuseReportKeepsItsTenantThroughTheMerge) {
  BlockStored root = Stored({1, 2}, std::nullopt);
  root.has_extra_keys = true;
  root.extra_keys_msgpack = VllmExtraKeys(2, "", "tenant-a");
  BlockStored report = root;  // all resident, parent None: a reuse report
  BlockStored fresh = Stored({3}, 2);
  EXPECT_EQ(Tenants(KvTenantSource::kCacheSalt, {Batch({root}), Batch({report, fresh})}),
            (std::vector<std::string>{"tenant-a", "tenant-a"}));
}

TEST(KvEventTrackerTenantTest, TenantsDoNotChangePageIds) {
  BlockStored named = Stored({1, 2}, std::nullopt);
  named.lora_name = "adapter-a";
  named.cache_salt = "salt";
  std::vector<std::vector<curve::PageId>> pages;
  for (KvTenantSource source : {KvTenantSource::kNone, KvTenantSource::kLoraOrSalt}) {
    KvEventTracker t(WithTenants(source));
    CaptureSink sink;
    t.Apply(t.AddPublisher(), OverTheWire(Batch({named, Stored({3}, 2)})), sink);
    ASSERT_EQ(sink.requests.size(), 2u);
    pages.push_back(sink.requests[0].pages);
    pages.back().insert(pages.back().end(), sink.requests[1].pages.begin(), sink.requests[1].pages.end());
  }
  EXPECT_EQ(pages[0], pages[1]);
}

// ---- State across agent restarts -------------------------------------------------

// Random batches over 3 publishers, two media besides the GPU, two groups,
// salted root chains and removals, against a parent map small enough to evict.
std::vector<std::pair<std::size_t, KvEventBatch>> RandomBatches(std::uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  const std::vector<std::optional<std::string>> media = {std::nullopt, "GPU", "CPU", "DISK"};
  std::vector<std::pair<std::size_t, KvEventBatch>> out;
  for (int step = 0; step < n; ++step) {
    const std::size_t p = rng() % 3;
    const std::optional<std::string>& medium = media[rng() % 100 < 70 ? rng() % 2 : 2 + rng() % 2];
    std::vector<std::uint64_t> hashes(1 + rng() % 4);
    for (auto& h : hashes) h = rng() % 96;
    const std::uint64_t roll = rng() % 100;
    KvEvent event;
    if (roll < 1) {
      event = AllBlocksCleared{};
    } else if (roll < 60) {
      std::optional<std::uint64_t> parent;
      if (rng() % 3 != 0) parent = rng() % 96;
      BlockStored stored = Stored(hashes, parent, medium, rng() % 2 == 0);
      stored.group_idx = rng() % 10 == 0 ? 1 : 0;
      if (rng() % 4 == 0) stored.cache_salt = "salt-" + std::to_string(rng() % 3);
      event = std::move(stored);
    } else {
      BlockRemoved removed = Removed(hashes, medium);
      removed.group_idx = rng() % 10 == 0 ? 1 : 0;
      event = std::move(removed);
    }
    out.emplace_back(p, Batch({std::move(event)}, 1000.0 + step));
  }
  return out;
}

KvEventTrackerOptions StateOptions() {
  KvEventTrackerOptions o;
  o.scope = "model";
  o.parent_map_max_entries = 40;
  o.tenant_source = KvTenantSource::kCacheSalt;
  return o;
}

// A tracker restored from another's state, its publishers saved in another
// order, then fed the same batches, hands out the same requests (pages, tenant,
// time, tokens) and holds the same block state as the one that never stopped.
TEST(KvEventTrackerStateTest, RestoredTrackerContinuesAsTheOriginal) {
  const auto batches = RandomBatches(23, 6000);
  KvEventTracker original(StateOptions());
  for (int i = 0; i < 3; ++i) original.AddPublisher();
  CaptureSink before;
  for (std::size_t i = 0; i < 3000; ++i) original.Apply(batches[i].first, batches[i].second, before);
  ASSERT_GT(original.counters().parent_map_evictions, 0u);
  const std::vector<std::size_t> order = {2, 0, 1};  // saved publisher k is original's order[k]
  std::vector<std::uint8_t> state;
  original.AppendState(order, &state);

  KvEventTracker restored(StateOptions());
  const base::Status s = restored.RestoreState(state, order.size());
  ASSERT_TRUE(s.ok()) << s.error();
  ASSERT_EQ(restored.publishers(), 3u);
  EXPECT_EQ(restored.parent_map_size(), original.parent_map_size());
  std::size_t restored_id[3];
  for (std::size_t k = 0; k < order.size(); ++k) restored_id[order[k]] = k;

  const std::uint64_t truncated_before = original.counters().chains_truncated;
  CaptureSink want, got;
  for (std::size_t i = 3000; i < batches.size(); ++i) {
    original.Apply(batches[i].first, batches[i].second, want);
    restored.Apply(restored_id[batches[i].first], batches[i].second, got);
  }
  ASSERT_GT(want.requests.size(), 500u);
  ASSERT_EQ(got.requests.size(), want.requests.size());
  std::size_t tenants = 0;
  for (std::size_t i = 0; i < want.requests.size(); ++i) {
    ASSERT_EQ(got.requests[i].pages, want.requests[i].pages) << "request " << i;
    ASSERT_EQ(got.requests[i].tenant, want.requests[i].tenant) << "request " << i;
    ASSERT_EQ(got.requests[i].timestamp_s, want.requests[i].timestamp_s) << "request " << i;
    ASSERT_EQ(got.requests[i].input_tokens, want.requests[i].input_tokens) << "request " << i;
    tenants += !want.requests[i].tenant.empty();
  }
  EXPECT_GT(tenants, 0u);
  EXPECT_EQ(restored.counters().chains_truncated, original.counters().chains_truncated - truncated_before);
  for (std::size_t p = 0; p < 3; ++p) {
    for (const char* medium : {"GPU", "CPU", "DISK"}) {
      for (std::int64_t group : {0, 1}) {
        ASSERT_EQ(restored.ResidentBlocks(restored_id[p], medium, group), original.ResidentBlocks(p, medium, group));
        for (std::uint64_t h = 0; h < 96; ++h) {
          ASSERT_EQ(restored.References(restored_id[p], medium, group, h), original.References(p, medium, group, h));
        }
      }
    }
  }
  EXPECT_EQ(restored.parent_map_size(), original.parent_map_size());
}

TEST(KvEventTrackerStateTest, OtherOptionsAndBadBytesAreErrorsAndChangeNothing) {
  const auto batches = RandomBatches(5, 500);
  KvEventTracker original(StateOptions());
  original.AddPublisher();
  original.AddPublisher();
  original.AddPublisher();
  CaptureSink sink;
  for (const auto& [p, batch] : batches) original.Apply(p, batch, sink);
  const std::vector<std::size_t> all = {0, 1, 2};
  std::vector<std::uint8_t> state;
  original.AppendState(all, &state);

  auto error_of = [](KvEventTrackerOptions o, const std::vector<std::uint8_t>& bytes, std::size_t publishers) {
    KvEventTracker t(std::move(o));
    const base::Status s = t.RestoreState(bytes, publishers);
    EXPECT_EQ(t.publishers(), s.ok() ? publishers : 0u);
    EXPECT_EQ(t.parent_map_size() > 0, s.ok());
    return s.ok() ? std::string() : s.error();
  };
  EXPECT_EQ(error_of(StateOptions(), state, 3), "");
  KvEventTrackerOptions other_scope = StateOptions();
  other_scope.scope = "other-model";
  EXPECT_NE(error_of(other_scope, state, 3).find("scope"), std::string::npos);
  KvEventTrackerOptions other_group = StateOptions();
  other_group.request_group = 1;
  EXPECT_NE(error_of(other_group, state, 3).find("request_group unset, not 1"), std::string::npos);
  EXPECT_NE(error_of(StateOptions(), state, 2).find("holds 3 publishers, expected 2"), std::string::npos);
  std::vector<std::uint8_t> longer = state;
  longer.push_back(1);
  EXPECT_NE(error_of(StateOptions(), longer, 3).find("1 bytes left over"), std::string::npos);
  for (std::size_t size = 0; size < state.size(); ++size) {
    const std::vector<std::uint8_t> cut(state.begin(), state.begin() + static_cast<std::ptrdiff_t>(size));
    ASSERT_NE(error_of(StateOptions(), cut, 3), "") << size;
  }
  // A tracker in use refuses a state (its ids would clash).
  KvEventTracker used(StateOptions());
  used.AddPublisher();
  EXPECT_FALSE(used.RestoreState(state, 3).ok());
  EXPECT_EQ(used.publishers(), 1u);
}

// vLLM names a chain's salt only in its root's event: a request extending,
// after the agent's restart, a root stored before it still gets the tenant and
// the whole chain.
TEST(KvEventTrackerStateTest, ChainsAndSaltsStoredBeforeTheRestartCarryOver) {
  BlockStored root = Stored({1, 2}, std::nullopt);
  root.has_extra_keys = true;
  root.extra_keys_msgpack = VllmExtraKeys(2, "", "tenant-a");
  KvEventTracker before(WithTenants(KvTenantSource::kCacheSalt));
  const std::vector<std::size_t> publishers = {before.AddPublisher()};
  CaptureSink sink;
  before.Apply(0, OverTheWire(Batch({root})), sink);
  std::vector<std::uint8_t> state;
  before.AppendState(publishers, &state);

  KvEventTracker after(WithTenants(KvTenantSource::kCacheSalt));
  ASSERT_TRUE(after.RestoreState(state, 1).ok());
  after.Apply(0, OverTheWire(Batch({Stored({3}, 2)})), sink);
  ASSERT_EQ(sink.requests.size(), 2u);
  EXPECT_EQ(sink.requests[1].tenant, "tenant-a");
  ASSERT_EQ(sink.requests[1].pages.size(), 3u);
  EXPECT_EQ(std::vector<curve::PageId>(sink.requests[1].pages.begin(), sink.requests[1].pages.begin() + 2),
            sink.requests[0].pages);
  EXPECT_EQ(after.counters().chains_truncated, 0u);
  EXPECT_EQ(after.References(0, "GPU", 0, 2), 1u);
}

// ---- KV cache groups (kv_event_tracker.h, "KV cache groups") ----------------------
// A hybrid model's stream (full + sliding window, GPU and CPU stores) rebuilt per
// group with requests from the full-attention group only; vLLM's full report
// mode across groups; streams without group fields or kinds read as before;
// hostile group fields counted and noted once; session tenants; the groups kept
// across a restore.

constexpr std::int64_t kBlock = 4;  // tokens per block

// A vLLM store of one group: tokens present (GPU, or a self-describing CPU store).
BlockStored Store(std::vector<std::uint64_t> hashes, std::optional<std::uint64_t> parent,
                  std::optional<std::int64_t> group, std::optional<std::string> kind = std::nullopt,
                  std::optional<std::int64_t> window = std::nullopt, std::string medium = "GPU") {
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
BlockStored Sliding(std::vector<std::uint64_t> hashes, std::optional<std::uint64_t> parent,
                    std::string medium = "GPU") {
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
  t.Apply(p,
          Batch({Sliding({1, 2, 3, 4}, std::nullopt), Full({1, 2, 3, 4}, std::nullopt), Sliding({5}, 4), Full({5}, 4)}),
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
                 Store({1}, std::nullopt, 2, "sliding_window", 0),
                 Store({1}, std::nullopt, 3, "sliding_window", std::int64_t{1} << 40),
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
  t.Apply(p,
          Batch({Store({2}, 1, 0, "sliding_window", 64), Store({2}, 1, 0, "mamba"), Store({9}, std::nullopt, -3),
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
  const std::size_t groups_at = 8 + 8 + 8;                               // scope, request group, block size
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
