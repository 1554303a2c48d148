// KvEventTracker without sockets: block state, counters, reuse reports and the
// request reconstruction from parent links.
#include "collectors/kv_event_tracker.h"

#include <gtest/gtest.h>
#include <msgpack.hpp>

#include <cstdio>
#include <map>
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
  t.Apply(p, Batch({Stored({4, 5}, 3)}, 11.0), sink);   // extends 1-2-3
  t.Apply(p, Batch({Stored({6}, 2)}, 12.0), sink);      // branches after 1-2
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
  t.Apply(p, Batch({Stored({1, 2}, std::nullopt)}), sink);  // report
  t.Apply(p, Batch({Stored({3}, 2)}), sink);                // next step: reconstructed
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
  t.Apply(p, Batch({Stored({1, 2}, std::nullopt, "GPU"), Stored({1, 2}, std::nullopt, "CPU", false),
                    Removed({1}, "GPU")}),
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
  for (KvTenantSource source : {KvTenantSource::kNone, KvTenantSource::kLora, KvTenantSource::kCacheSalt,
                                KvTenantSource::kLoraOrSalt}) {
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
  EXPECT_EQ(Tenants(KvTenantSource::kLoraOrSalt, batches),
            (std::vector<std::string>{"adapter-a", "lora-7", "salt-x"}));
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

}  // namespace
}  // namespace kvwatch::collectors
