#include "collectors/kv_event_decoder.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <msgpack.hpp>
#include <random>
#include <string>
#include <vector>

#include "collectors/testing/kv_event_encoder.h"

namespace kvwatch::collectors {
namespace {

using Bytes = std::vector<std::uint8_t>;
using Packer = msgpack::packer<msgpack::sbuffer>;

// Builds msgpack bytes by hand, the way msgspec lays them out.
class Builder {
 public:
  Builder() : pk_(buf_) {}
  Packer& pk() { return pk_; }
  Builder& Str(std::string_view s) {
    pk_.pack_str(static_cast<std::uint32_t>(s.size()));
    pk_.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
    return *this;
  }
  Builder& Bin(const Bytes& b) {
    pk_.pack_bin(static_cast<std::uint32_t>(b.size()));
    pk_.pack_bin_body(reinterpret_cast<const char*>(b.data()), static_cast<std::uint32_t>(b.size()));
    return *this;
  }
  Builder& Array(std::uint32_t n) {
    pk_.pack_array(n);
    return *this;
  }
  Builder& Map(std::uint32_t n) {
    pk_.pack_map(n);
    return *this;
  }
  Builder& Nil() {
    pk_.pack_nil();
    return *this;
  }
  Builder& U(std::uint64_t v) {
    pk_.pack_uint64(v);
    return *this;
  }
  Builder& I(std::int64_t v) {
    pk_.pack_int64(v);
    return *this;
  }
  // msgspec always writes a Python float as float64 (0xcb); msgpack-cxx 4.1's
  // pack_double would write 1.0 as the int 1.
  Builder& F(double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    Bytes raw = {0xcb};
    for (int i = 7; i >= 0; --i) raw.push_back(static_cast<std::uint8_t>(bits >> (8 * i)));
    return Raw(raw);
  }
  Builder& Ints(const std::vector<std::int64_t>& v) {
    Array(static_cast<std::uint32_t>(v.size()));
    for (std::int64_t x : v) I(x);
    return *this;
  }
  Builder& Raw(const Bytes& b) {
    buf_.write(reinterpret_cast<const char*>(b.data()), b.size());
    return *this;
  }
  Bytes bytes() const {
    return Bytes(reinterpret_cast<const std::uint8_t*>(buf_.data()),
                 reinterpret_cast<const std::uint8_t*>(buf_.data()) + buf_.size());
  }

 private:
  msgpack::sbuffer buf_;
  Packer pk_;
};

const std::vector<std::int64_t> kCaptureTokens = {151644, 872, 198,    9064, 374,    279,   6722, 315,
                                                  5616,   30,  151645, 198,  151644, 77091, 198,  151667};

// engine-formats.md 1.4, the real v0.26.0 capture (kthena issue #1535):
// [1789095808.8378847, [{'type': 'BlockStored', 'block_hashes': [15760518052499183552],
//  'parent_block_hash': None, 'token_ids': [...], 'block_size': 16, 'lora_id': None,
//  'medium': 'GPU', 'lora_name': None, 'extra_keys': [None], 'group_idx': 0,
//  'kv_cache_spec_kind': 'full_attention'}], 0]
Bytes V026Capture() {
  Builder b;
  b.Array(3).F(1789095808.8378847).Array(1).Map(11);
  b.Str("type").Str("BlockStored");
  b.Str("block_hashes").Array(1).U(15760518052499183552ull);
  b.Str("parent_block_hash").Nil();
  b.Str("token_ids").Ints(kCaptureTokens);
  b.Str("block_size").U(16);
  b.Str("lora_id").Nil();
  b.Str("medium").Str("GPU");
  b.Str("lora_name").Nil();
  b.Str("extra_keys").Array(1).Nil();
  b.Str("group_idx").U(0);
  b.Str("kv_cache_spec_kind").Str("full_attention");
  b.U(0);
  return b.bytes();
}

// engine-formats.md 1.4, the PR #42892 "before" example (array form):
// [ 1.0, [ [ "BlockStored", [4291203, 1837291, 9104857], null, [0,1,2,3], 64, null,
//   "GPU", null, [["mm_hash1", 50]] ] ] ]
Bytes Pr42892Before() {
  Builder b;
  b.Array(2).F(1.0).Array(1).Array(9);
  b.Str("BlockStored").Array(3).U(4291203).U(1837291).U(9104857);
  b.Nil().Ints({0, 1, 2, 3}).U(64).Nil().Str("GPU").Nil();
  b.Array(1).Array(2).Str("mm_hash1").U(50);
  return b.bytes();
}

KvEventBatch MustDecode(const Bytes& bytes) {
  KvResult<KvEventBatch> r = DecodeKvEventBatch(bytes);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().ToString());
  if (!r.ok()) return {};
  return std::move(r).value();
}

KvDecodeErrorCode ErrorCodeOf(const Bytes& bytes) {
  KvResult<KvEventBatch> r = DecodeKvEventBatch(bytes);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return KvDecodeErrorCode::kInternal;
  EXPECT_FALSE(r.error().message.empty());
  return r.error().code;
}

const BlockStored& Stored(const KvEventBatch& b, std::size_t i) { return std::get<BlockStored>(b.events.at(i)); }
const BlockRemoved& Removed(const KvEventBatch& b, std::size_t i) { return std::get<BlockRemoved>(b.events.at(i)); }

TEST(KvEventDecoderTest, DecodesRealV026MapCapture) {
  const KvEventBatch batch = MustDecode(V026Capture());
  EXPECT_DOUBLE_EQ(batch.ts, 1789095808.8378847);
  EXPECT_EQ(batch.dp_rank, 0);
  ASSERT_EQ(batch.events.size(), 1u);
  const BlockStored& e = Stored(batch, 0);
  EXPECT_EQ(e.block_hashes, std::vector<std::uint64_t>{15760518052499183552ull});
  EXPECT_FALSE(e.parent_block_hash.has_value());
  EXPECT_EQ(e.token_ids, kCaptureTokens);
  EXPECT_EQ(e.block_size, 16);
  EXPECT_FALSE(e.lora_id.has_value());
  EXPECT_EQ(e.medium, "GPU");
  EXPECT_FALSE(e.lora_name.has_value());
  EXPECT_TRUE(e.has_extra_keys);
  EXPECT_EQ(e.extra_key_digests, std::vector<std::uint64_t>{0});  // [None]
  EXPECT_EQ(e.group_idx, 0);
  EXPECT_EQ(e.kv_cache_spec_kind, "full_attention");
  EXPECT_FALSE(e.kv_cache_spec_sliding_window.has_value());
}

TEST(KvEventDecoderTest, ReencodesV026CaptureByteForByte) {
  const Bytes wire = V026Capture();
  EXPECT_EQ(EncodeKvEventBatch(MustDecode(wire), KvEncoding::kMap), wire);
}

TEST(KvEventDecoderTest, DecodesPr42892BeforeArrayExample) {
  const KvEventBatch batch = MustDecode(Pr42892Before());
  EXPECT_DOUBLE_EQ(batch.ts, 1.0);
  EXPECT_FALSE(batch.dp_rank.has_value());
  ASSERT_EQ(batch.events.size(), 1u);
  const BlockStored& e = Stored(batch, 0);
  EXPECT_EQ(e.block_hashes, (std::vector<std::uint64_t>{4291203, 1837291, 9104857}));
  EXPECT_FALSE(e.parent_block_hash.has_value());
  EXPECT_EQ(e.token_ids, (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(e.block_size, 64);
  EXPECT_FALSE(e.lora_id.has_value());
  EXPECT_EQ(e.medium, "GPU");
  EXPECT_FALSE(e.lora_name.has_value());
  ASSERT_TRUE(e.has_extra_keys);
  ASSERT_EQ(e.extra_key_digests.size(), 1u);
  EXPECT_NE(e.extra_key_digests[0], 0u);
  EXPECT_FALSE(e.group_idx.has_value());
  EXPECT_EQ(EncodeKvEventBatch(batch, KvEncoding::kArray), Pr42892Before());
}

Bytes ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const std::string kCorpusDir = std::string(KVWATCH_SOURCE_DIR) + "/tests/fuzz/corpus/kv_event_decoder_fuzz/";

// tests/fuzz/corpus/.../v026_capture.msgpack was written by an independent
// (Python) msgpack packer from the capture's text; it must equal the fixture.
TEST(KvEventDecoderTest, IndependentlyPackedCaptureMatchesFixture) {
  const Bytes file = ReadFile(kCorpusDir + "v026_capture.msgpack");
  if (file.empty()) GTEST_SKIP() << "seed corpus not found under " << kCorpusDir;
  EXPECT_EQ(file, V026Capture());
  EXPECT_EQ(ReadFile(kCorpusDir + "pr42892_before.msgpack"), Pr42892Before());
}

TEST(KvEventDecoderTest, SeedCorpusPayloadsDecode) {
  const char* names[] = {"sglang_array.msgpack", "bytes_hash.msgpack", "trtllm_shapes.msgpack", "map_envelope.msgpack"};
  for (const char* name : names) {
    const Bytes file = ReadFile(kCorpusDir + name);
    if (file.empty()) GTEST_SKIP() << "seed corpus not found under " << kCorpusDir;
    KvResult<KvEventBatch> r = DecodeKvEventBatch(file);
    EXPECT_TRUE(r.ok()) << name << ": " << (r.ok() ? "" : r.error().ToString());
  }
}

TEST(KvEventDecoderTest, FloatsInExtraKeysSurviveReencoding) {
  Builder b;
  b.Array(2).F(2.0).Array(1).Array(9).Str("BlockStored").Array(1).U(1).Nil().Array(0).U(0).Nil().Nil().Nil();
  b.Array(2).Array(2).Str("x").F(1.0).Nil();
  const Bytes wire = b.bytes();
  const KvEventBatch batch = MustDecode(wire);
  EXPECT_EQ(Stored(batch, 0).extra_key_digests.size(), 2u);
  EXPECT_EQ(Stored(batch, 0).extra_key_digests[1], 0u);
  EXPECT_EQ(EncodeKvEventBatch(batch, KvEncoding::kArray), wire);
}

TEST(KvEventDecoderTest, ExtraKeyDigestDependsOnValueNotIntWidth) {
  Builder narrow;
  narrow.Array(2).Str("mm_hash1").U(50);  // 50 as a positive fixint
  Builder wide;
  wide.Array(2).Str("mm_hash1").Raw({0xcd, 0x00, 0x32});  // 50 as uint16
  Builder other;
  other.Array(2).Str("mm_hash1").U(51);
  Builder nil;
  nil.Nil();
  const KvResult<std::uint64_t> a = DigestOfExtraKey(narrow.bytes());
  const KvResult<std::uint64_t> b = DigestOfExtraKey(wide.bytes());
  const KvResult<std::uint64_t> c = DigestOfExtraKey(other.bytes());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a.value(), b.value());
  EXPECT_NE(a.value(), c.value());
  EXPECT_NE(a.value(), 0u);
  EXPECT_EQ(DigestOfExtraKey(nil.bytes()).value(), 0u);
  // The digest inside an event equals the standalone one.
  EXPECT_EQ(Stored(MustDecode(Pr42892Before()), 0).extra_key_digests[0], a.value());
  EXPECT_EQ(DigestOfExtraKey(Bytes{}).error().code, KvDecodeErrorCode::kNotMsgpack);
}

TEST(KvEventDecoderTest, AcceptsTrimmedPositionalEventsOfOldVersions) {
  // v0.9: BlockStored(block_hashes, parent, token_ids, block_size, lora_id) and
  // BlockRemoved(block_hashes); envelope without dp rank.
  Builder b;
  b.Array(2).F(5.5).Array(3);
  b.Array(6).Str("BlockStored").Array(1).U(7).U(6).Ints({1, 2}).U(2).Nil();
  b.Array(2).Str("BlockRemoved").Array(2).U(7).U(8);
  b.Array(1).Str("AllBlocksCleared");
  const KvEventBatch batch = MustDecode(b.bytes());
  ASSERT_EQ(batch.events.size(), 3u);
  EXPECT_EQ(Stored(batch, 0).parent_block_hash, 6u);
  EXPECT_FALSE(Stored(batch, 0).medium.has_value());
  EXPECT_FALSE(Stored(batch, 0).has_extra_keys);
  EXPECT_EQ(Removed(batch, 1).block_hashes, (std::vector<std::uint64_t>{7, 8}));
  EXPECT_FALSE(Removed(batch, 1).medium.has_value());
  EXPECT_EQ(KindOf(batch.events[2]), KvEventKind::kAllBlocksCleared);
}

TEST(KvEventDecoderTest, ReadsEveryPositionalFieldOfNewestArrayForm) {
  Builder b;
  b.Array(3).F(2.0).Array(2);
  b.Array(15).Str("BlockStored").Array(1).U(1).U(99).Ints({5}).U(1).I(4).Str("CPU").Str("adapter");
  b.Array(1).Str("salt").I(2).Str("sliding_window").I(128).Str("LOCAL").Str("tier2").Str("sess-1");
  b.Array(6).Str("BlockRemoved").Array(1).U(1).Str("CPU").I(2).Str("REMOTE").Str("tier2");
  b.I(3);
  const KvEventBatch batch = MustDecode(b.bytes());
  EXPECT_EQ(batch.dp_rank, 3);
  const BlockStored& s = Stored(batch, 0);
  EXPECT_EQ(s.parent_block_hash, 99u);
  EXPECT_EQ(s.lora_id, 4);
  EXPECT_EQ(s.medium, "CPU");
  EXPECT_EQ(s.lora_name, "adapter");
  EXPECT_EQ(s.group_idx, 2);
  EXPECT_EQ(s.kv_cache_spec_kind, "sliding_window");
  EXPECT_EQ(s.kv_cache_spec_sliding_window, 128);
  EXPECT_EQ(s.locality, "LOCAL");
  EXPECT_EQ(s.ownership, "tier2");
  EXPECT_EQ(s.session_id, "sess-1");
  const BlockRemoved& r = Removed(batch, 1);
  EXPECT_EQ(r.medium, "CPU");
  EXPECT_EQ(r.group_idx, 2);
  EXPECT_EQ(r.locality, "REMOTE");
  EXPECT_EQ(r.ownership, "tier2");
}

TEST(KvEventDecoderTest, NormalisesEveryHashForm) {
  Bytes digest(32);
  for (std::size_t i = 0; i < digest.size(); ++i) digest[i] = static_cast<std::uint8_t>(i);
  Builder b;
  b.Array(3).F(0).Array(1).Array(3).Str("BlockRemoved").Array(5);
  b.I(-2);                    // SGLang signed int64
  b.Bin(digest);              // vLLM raw SHA-256 bytes: last 8 bytes
  b.Bin({0x01, 0x02, 0x03});  // shorter: left-padded
  b.Str("AB");                // str bytes
  b.U(~0ull);                 // uint64 max
  b.Str("GPU").U(1);
  const KvEventBatch batch = MustDecode(b.bytes());
  const BlockRemoved& r = Removed(batch, 0);
  EXPECT_EQ(r.block_hashes,
            (std::vector<std::uint64_t>{0xfffffffffffffffeull, 0x18191a1b1c1d1e1full, 0x010203ull, 0x4142ull, ~0ull}));
  EXPECT_EQ(HashFromBytes(Bytes{}), 0u);
}

TEST(KvEventDecoderTest, SGLangNegativeHashesAndParent) {
  Builder b;
  b.Array(2)
      .F(0)
      .Array(1)
      .Array(7)
      .Str("BlockStored")
      .Array(1)
      .I(-6917529027641081856)
      .I(-1)
      .Ints({1})
      .U(1)
      .Nil()
      .Str("GPU");
  const KvEventBatch batch = MustDecode(b.bytes());
  const BlockStored& s = Stored(batch, 0);
  EXPECT_EQ(s.block_hashes[0], 0xa000000000000000ull);
  EXPECT_EQ(s.parent_block_hash, ~0ull);
}

TEST(KvEventDecoderTest, SGLangPositionalMetadataCarriesCacheSalt) {
  // BlockStoredWithMetadata: [..., medium, metadata] with metadata at position 7.
  Builder map_meta;
  map_meta.Array(2)
      .F(0)
      .Array(1)
      .Array(8)
      .Str("BlockStored")
      .Array(1)
      .U(1)
      .Nil()
      .Ints({1})
      .U(1)
      .Nil()
      .Str("GPU")
      .Map(1)
      .Str("cache_salt")
      .Str("tenant-a");
  EXPECT_EQ(Stored(MustDecode(map_meta.bytes()), 0).cache_salt, "tenant-a");
  EXPECT_FALSE(Stored(MustDecode(map_meta.bytes()), 0).lora_name.has_value());
  Builder array_meta;
  array_meta.Array(2)
      .F(0)
      .Array(1)
      .Array(8)
      .Str("BlockStored")
      .Array(1)
      .U(1)
      .Nil()
      .Ints({1})
      .U(1)
      .Nil()
      .Str("GPU")
      .Array(1)
      .Str("tenant-b");
  EXPECT_EQ(Stored(MustDecode(array_meta.bytes()), 0).cache_salt, "tenant-b");
}

TEST(KvEventDecoderTest, SGLangMapEventsWithCacheSaltAndUnknownKeys) {
  Builder b;
  b.Array(3).F(0).Array(1).Map(9);
  b.Str("type").Str("BlockStored");
  b.Str("block_hashes").Array(2).I(-5).I(7);
  b.Str("parent_block_hash").I(-9);
  b.Str("token_ids").Ints({10, 11});
  b.Str("block_size").U(1);
  b.Str("medium").Str("CPU_PINNED");
  b.Str("cache_salt").Str("salty");
  b.Str("session_id").Str("s1");
  b.Str("some_future_field").Map(1).Str("x").Array(0);  // ignored
  b.U(1);
  const KvEventBatch batch = MustDecode(b.bytes());
  const BlockStored& s = Stored(batch, 0);
  EXPECT_EQ(s.block_hashes, (std::vector<std::uint64_t>{static_cast<std::uint64_t>(-5), 7}));
  EXPECT_EQ(s.parent_block_hash, static_cast<std::uint64_t>(-9));
  EXPECT_EQ(s.medium, "CPU_PINNED");
  EXPECT_EQ(s.cache_salt, "salty");
  EXPECT_EQ(s.session_id, "s1");
  EXPECT_FALSE(s.lora_id.has_value());
}

TEST(KvEventDecoderTest, TensorRtLlmZmqMapsWithStringTokens) {
  Builder b;
  b.Array(3).F(0).Array(2).Map(6);
  b.Str("type").Str("BlockStored");
  b.Str("block_hashes").Array(1).U(9622824665191806685ull);
  b.Str("parent_block_hash").Nil();
  b.Str("token_ids").Array(3).Str("17").I(18).Str("<img>");
  b.Str("block_size").U(32);
  b.Str("mm_keys").Array(1).Array(1).Map(3).Str("hash").Str("h").Str("start_offset").U(0).Str("uuid").Nil();
  b.Map(3).Str("type").Str("BlockRemoved").Str("block_hashes").Array(1).U(5).Str("locality").Str("LOCAL");
  b.U(0);
  const KvEventBatch batch = MustDecode(b.bytes());
  const BlockStored& s = Stored(batch, 0);
  EXPECT_EQ(s.block_hashes[0], 9622824665191806685ull);
  ASSERT_EQ(s.token_ids.size(), 3u);
  EXPECT_EQ(s.token_ids[0], 17);
  EXPECT_EQ(s.token_ids[1], 18);
  EXPECT_NE(s.token_ids[2], 0);  // a digest of "<img>"
  EXPECT_EQ(Removed(batch, 1).locality, "LOCAL");
}

TEST(KvEventDecoderTest, TensorRtLlmNativeShapesAndWrapper) {
  Builder b;
  b.Array(3).F(0).Array(4);
  // stored, wrapped as {"event_id", "data", "window_size", "attention_dp_rank"}
  b.Map(4).Str("event_id").U(7).Str("data").Map(3);
  b.Str("type").Str("stored").Str("parent_hash").U(41).Str("blocks").Array(2);
  b.Map(5).Str("type").Str("stored_block").Str("block_hash").U(42).Str("tokens").Array(2);
  b.Map(3).Str("type").Str("unique_token").Str("token_id").U(100).Str("token_extra_id").U(0);
  b.Map(3).Str("type").Str("unique_token").Str("token_id").U(101).Str("token_extra_id").U(0);
  b.Str("cache_level").U(1).Str("priority").U(35);
  b.Map(3).Str("type").Str("stored_block").Str("block_hash").U(43).Str("tokens").Array(2).U(102).U(103);
  b.Str("window_size").U(4096).Str("attention_dp_rank").U(0);
  // removed
  b.Map(2).Str("type").Str("removed").Str("block_hashes").Array(1).U(42);
  // created
  b.Map(2).Str("type").Str("created").Str("num_blocks_per_cache_level").Ints({1000, 4000});
  // updated, with a None priority diff value (TRT-LLM#4666)
  b.Map(4).Str("type").Str("updated").Str("block_hash").U(43);
  b.Str("cache_level").Map(3).Str("type").Str("event_diff").Str("new_value").U(1).Str("old_value").U(0);
  b.Str("priority").Map(3).Str("type").Str("event_diff").Str("new_value").Nil().Str("old_value").U(35);
  b.U(0);
  const KvEventBatch batch = MustDecode(b.bytes());
  ASSERT_EQ(batch.events.size(), 4u);
  const BlockStored& s = Stored(batch, 0);
  EXPECT_EQ(s.parent_block_hash, 41u);
  EXPECT_EQ(s.block_hashes, (std::vector<std::uint64_t>{42, 43}));
  EXPECT_EQ(s.token_ids, (std::vector<std::int64_t>{100, 101, 102, 103}));
  EXPECT_EQ(s.block_size, 2);
  EXPECT_EQ(s.cache_level, 1);
  EXPECT_EQ(s.medium, "CPU");
  EXPECT_EQ(s.priority, 35);
  EXPECT_EQ(s.window_size, 4096);
  EXPECT_EQ(Removed(batch, 1).block_hashes, std::vector<std::uint64_t>{42});
  EXPECT_EQ(std::get<CacheCreated>(batch.events[2]).num_blocks_per_cache_level,
            (std::vector<std::int64_t>{1000, 4000}));
  const BlockUpdated& u = std::get<BlockUpdated>(batch.events[3]);
  EXPECT_EQ(u.block_hash, 43u);
  EXPECT_EQ(u.cache_level_old, 0);
  EXPECT_EQ(u.cache_level_new, 1);
  EXPECT_EQ(u.priority_old, 35);
  EXPECT_FALSE(u.priority_new.has_value());
}

TEST(KvEventDecoderTest, UnknownTagsBecomeUnknownEvents) {
  Builder b;
  b.Array(3).F(0).Array(3);
  b.Array(2).Str("BlockInactive").Array(1).U(1);
  b.Map(2).Str("type").Str("BlockReused").Str("block_hashes").Array(0);
  b.Map(1).Str("type").Str("AllBlocksCleared");
  b.U(0);
  const KvEventBatch batch = MustDecode(b.bytes());
  EXPECT_EQ(std::get<UnknownKvEvent>(batch.events[0]).tag, "BlockInactive");
  EXPECT_EQ(std::get<UnknownKvEvent>(batch.events[1]).tag, "BlockReused");
  EXPECT_EQ(KindOf(batch.events[1]), KvEventKind::kUnknown);
  EXPECT_EQ(KindOf(batch.events[2]), KvEventKind::kAllBlocksCleared);
}

TEST(KvEventDecoderTest, AcceptsMapEnvelopeDefensively) {
  for (const char* rank_key : {"data_parallel_rank", "attn_dp_rank"}) {
    Builder b;
    b.Map(3).Str("events").Array(1).Array(1).Str("AllBlocksCleared").Str("ts").U(12).Str(rank_key).U(2);
    const KvEventBatch batch = MustDecode(b.bytes());
    EXPECT_DOUBLE_EQ(batch.ts, 12.0);
    EXPECT_EQ(batch.dp_rank, 2) << rank_key;
    EXPECT_EQ(batch.events.size(), 1u);
  }
}

TEST(KvEventDecoderTest, ReportsMalformedPayloadsWithReasonCodes) {
  auto batch_of = [](auto build_event) {
    Builder b;
    b.Array(3).F(0).Array(1);
    build_event(b);
    b.U(0);
    return b.bytes();
  };
  EXPECT_EQ(ErrorCodeOf({}), KvDecodeErrorCode::kNotMsgpack);
  EXPECT_EQ(ErrorCodeOf({0xc1}), KvDecodeErrorCode::kNotMsgpack);
  EXPECT_EQ(ErrorCodeOf({0x93, 0x01}), KvDecodeErrorCode::kTruncated);
  EXPECT_EQ(ErrorCodeOf({0xdd, 0xff, 0xff, 0xff, 0xff, 0x01}), KvDecodeErrorCode::kTruncated);
  EXPECT_EQ(ErrorCodeOf({0xdb, 0xff, 0xff, 0xff, 0xff}), KvDecodeErrorCode::kTruncated);
  Bytes trailing = V026Capture();
  trailing.push_back(0x00);
  EXPECT_EQ(ErrorCodeOf(trailing), KvDecodeErrorCode::kTrailingBytes);
  Bytes deep(100, 0x91);
  deep.push_back(0x00);
  EXPECT_EQ(ErrorCodeOf(deep), KvDecodeErrorCode::kTooDeep);

  Builder int_root;
  int_root.U(5);
  EXPECT_EQ(ErrorCodeOf(int_root.bytes()), KvDecodeErrorCode::kBadEnvelope);
  Builder short_env;
  short_env.Array(1).F(0);
  EXPECT_EQ(ErrorCodeOf(short_env.bytes()), KvDecodeErrorCode::kBadEnvelope);
  Builder str_ts;
  str_ts.Array(2).Str("now").Array(0);
  EXPECT_EQ(ErrorCodeOf(str_ts.bytes()), KvDecodeErrorCode::kBadEnvelope);
  Builder events_not_array;
  events_not_array.Array(2).F(0).Map(0);
  EXPECT_EQ(ErrorCodeOf(events_not_array.bytes()), KvDecodeErrorCode::kBadEnvelope);
  Builder bad_rank;
  bad_rank.Array(3).F(0).Array(0).Str("0");
  EXPECT_EQ(ErrorCodeOf(bad_rank.bytes()), KvDecodeErrorCode::kBadEnvelope);
  Builder map_no_events;
  map_no_events.Map(1).Str("ts").F(0);
  EXPECT_EQ(ErrorCodeOf(map_no_events.bytes()), KvDecodeErrorCode::kBadEnvelope);

  EXPECT_EQ(ErrorCodeOf(batch_of([](Builder& b) { b.U(3); })), KvDecodeErrorCode::kBadEvent);
  EXPECT_EQ(ErrorCodeOf(batch_of([](Builder& b) { b.Array(0); })), KvDecodeErrorCode::kBadEvent);
  EXPECT_EQ(ErrorCodeOf(batch_of([](Builder& b) { b.Array(1).U(1); })), KvDecodeErrorCode::kBadEvent);
  EXPECT_EQ(ErrorCodeOf(batch_of([](Builder& b) { b.Map(1).Str("block_hashes").Array(0); })),
            KvDecodeErrorCode::kBadEvent);
  EXPECT_EQ(ErrorCodeOf(batch_of([](Builder& b) { b.Array(1).Str("BlockStored"); })), KvDecodeErrorCode::kBadEvent);
  EXPECT_EQ(ErrorCodeOf(batch_of([](Builder& b) { b.Map(1).Str("type").Str("BlockRemoved"); })),
            KvDecodeErrorCode::kBadEvent);
  EXPECT_EQ(ErrorCodeOf(batch_of([](Builder& b) { b.Array(5).Str("BlockStored").Array(0).Nil().Array(0).Str("16"); })),
            KvDecodeErrorCode::kBadEvent);
  EXPECT_EQ(ErrorCodeOf(batch_of([](Builder& b) { b.Array(4).Str("BlockStored").Array(0).Nil().Array(1).F(1.5); })),
            KvDecodeErrorCode::kBadEvent);
  EXPECT_EQ(ErrorCodeOf(batch_of([](Builder& b) { b.Array(2).Str("BlockRemoved").Array(1).F(1.5); })),
            KvDecodeErrorCode::kBadHash);
  EXPECT_EQ(ErrorCodeOf(batch_of([](Builder& b) { b.Array(3).Str("BlockStored").Array(0).Map(0); })),
            KvDecodeErrorCode::kBadHash);
  EXPECT_EQ(ErrorCodeOf(batch_of([](Builder& b) { b.Array(2).Str("BlockRemoved").Nil(); })),
            KvDecodeErrorCode::kBadEvent);
}

TEST(KvEventDecoderTest, ErrorMessagesSayWhere) {
  Builder b;
  b.Array(3).F(0).Array(2).Array(1).Str("AllBlocksCleared");
  b.Map(2).Str("type").Str("BlockRemoved").Str("block_hashes").Array(2).U(1).Nil();
  b.U(0);
  KvResult<KvEventBatch> r = DecodeKvEventBatch(b.bytes());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, KvDecodeErrorCode::kBadHash);
  EXPECT_NE(r.error().message.find("event 1"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("block_hashes[1]"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().ToString().rfind("bad_hash: ", 0), 0u);
  EXPECT_FALSE(r.status().ToStatus().ok());
  KvResult<KvEventBatch> t = DecodeKvEventBatch(Bytes{0x92, 0xcb, 0x00});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("offset 1"), std::string::npos) << t.error().message;
}

TEST(KvEventDecoderTest, EveryPrefixOfARealPayloadIsTruncatedNotACrash) {
  const Bytes wire = V026Capture();
  for (std::size_t n = 0; n < wire.size(); ++n) {
    const Bytes prefix(wire.begin(), wire.begin() + static_cast<std::ptrdiff_t>(n));
    KvResult<KvEventBatch> r = DecodeKvEventBatch(prefix);
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.error().code, n == 0 ? KvDecodeErrorCode::kNotMsgpack : KvDecodeErrorCode::kTruncated)
        << n << ": " << r.error().message;
  }
}

TEST(KvEventDecoderTest, DecoderReusesItsBatchAcrossMessages) {
  KvEventDecoder decoder;
  KvEventBatch batch;
  Builder removed;
  removed.Array(3).F(9).Array(1).Array(3).Str("BlockRemoved").Array(1).U(77).Str("GPU").U(1);
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(decoder.Decode(V026Capture(), &batch).ok());
    EXPECT_EQ(batch, MustDecode(V026Capture()));
    ASSERT_TRUE(decoder.Decode(removed.bytes(), &batch).ok());
    EXPECT_EQ(batch, MustDecode(removed.bytes()));
    ASSERT_TRUE(decoder.Decode(Pr42892Before(), &batch).ok());
    EXPECT_EQ(batch, MustDecode(Pr42892Before()));
    EXPECT_FALSE(batch.dp_rank.has_value());
  }
}

TEST(KvEventDecoderTest, EncoderTrimsDefaultsLikeMsgspec) {
  KvEventBatch batch;
  batch.ts = 1.0;
  BlockStored s;
  s.block_hashes = {1};
  s.token_ids = {1, 2};
  s.block_size = 2;
  s.medium = "GPU";
  batch.events.push_back(s);
  // Array form: tag + 7 required fields; map form: type + 7 required fields.
  Bytes array = EncodeKvEventBatch(batch, KvEncoding::kArray);
  EXPECT_EQ(array[0], 0x92);  // [ts, events]: no dp rank
  EXPECT_EQ(array[10], 0x91);
  EXPECT_EQ(array[11], 0x98);  // 8 elements
  Bytes map = EncodeKvEventBatch(batch, KvEncoding::kMap);
  EXPECT_EQ(map[11], 0x88);  // 8 entries
  // group_idx set: extra_keys is written as nil before it in the array form only.
  std::get<BlockStored>(batch.events[0]).group_idx = 0;
  array = EncodeKvEventBatch(batch, KvEncoding::kArray);
  EXPECT_EQ(array[11], 0x9a);  // 10 elements
  map = EncodeKvEventBatch(batch, KvEncoding::kMap);
  EXPECT_EQ(map[11], 0x89);  // 9 entries
  EXPECT_EQ(MustDecode(array), batch);
  EXPECT_EQ(MustDecode(map), batch);
}

// Deterministic pseudo-random batches covering every field the encoder writes.
KvEventBatch RandomBatch(std::mt19937_64& rng, bool with_cache_salt) {
  auto coin = [&] { return (rng() & 1) != 0; };
  auto opt_int = [&]() -> std::optional<std::int64_t> {
    if (coin()) return std::nullopt;
    return static_cast<std::int64_t>(rng() % 1000) - 10;
  };
  auto opt_str = [&](const char* s) -> std::optional<std::string> {
    if (coin()) return std::nullopt;
    return std::string(s) + std::to_string(rng() % 7);
  };
  KvEventBatch batch;
  batch.ts = static_cast<double>(rng() % 2000000000) + 0.25;
  if (coin()) batch.dp_rank = static_cast<std::int64_t>(rng() % 8);
  const int n = static_cast<int>(rng() % 6);
  for (int i = 0; i < n; ++i) {
    switch (rng() % 5) {
      case 0:
      case 1: {
        BlockStored s;
        const int blocks = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < blocks; ++k) s.block_hashes.push_back(rng());
        if (coin()) s.parent_block_hash = rng();
        for (int k = 0; k < blocks * 4; ++k) s.token_ids.push_back(static_cast<std::int64_t>(rng() % 200000));
        s.block_size = 4;
        s.lora_id = opt_int();
        s.medium = opt_str("GPU");
        s.lora_name = opt_str("lora");
        if (coin()) {
          Builder extra;
          extra.Array(static_cast<std::uint32_t>(blocks));
          for (int k = 0; k < blocks; ++k) {
            if (coin())
              extra.Nil();
            else
              extra.Array(2).Str("mm").U(rng() % 64);
          }
          const Bytes raw = extra.bytes();
          s.extra_keys_msgpack.assign(raw.begin(), raw.end());
          s.has_extra_keys = true;
          // Expected digests, as the decoder derives them.
          s.extra_key_digests = Stored(MustDecode([&] {
                                         Builder w;
                                         w.Array(2)
                                             .F(0)
                                             .Array(1)
                                             .Array(9)
                                             .Str("BlockStored")
                                             .Array(0)
                                             .Nil()
                                             .Array(0)
                                             .U(0)
                                             .Nil()
                                             .Nil()
                                             .Nil()
                                             .Raw(raw);
                                         return w.bytes();
                                       }()),
                                       0)
                                    .extra_key_digests;
        }
        s.group_idx = opt_int();
        s.kv_cache_spec_kind = opt_str("full_attention");
        s.kv_cache_spec_sliding_window = opt_int();
        s.locality = opt_str("LOCAL");
        s.ownership = opt_str("own");
        s.session_id = opt_str("sess");
        if (with_cache_salt) s.cache_salt = opt_str("salt");
        batch.events.push_back(std::move(s));
        break;
      }
      case 2: {
        BlockRemoved r;
        r.block_hashes = {rng(), rng()};
        r.medium = opt_str("CPU");
        r.group_idx = opt_int();
        r.locality = opt_str("REMOTE");
        r.ownership = opt_str("own");
        batch.events.push_back(std::move(r));
        break;
      }
      case 3:
        batch.events.push_back(AllBlocksCleared{});
        break;
      default: {
        BlockUpdated u;
        u.block_hash = rng();
        u.cache_level_old = opt_int();
        u.cache_level_new = opt_int();
        batch.events.push_back(u);
        batch.events.push_back(CacheCreated{{1, static_cast<std::int64_t>(rng() % 100)}});
        batch.events.push_back(UnknownKvEvent{"Future" + std::to_string(rng() % 3)});
      }
    }
  }
  return batch;
}

TEST(KvEventDecoderTest, RoundTripsInEveryEncoding) {
  std::mt19937_64 rng(20261101);
  for (int iter = 0; iter < 300; ++iter) {
    for (KvEncoding encoding : {KvEncoding::kArray, KvEncoding::kMap}) {
      for (KvHashEncoding hashes : {KvHashEncoding::kUnsigned, KvHashEncoding::kSigned, KvHashEncoding::kBytes}) {
        const KvEventBatch batch = RandomBatch(rng, encoding == KvEncoding::kMap);
        KvEncodeOptions options;
        options.encoding = encoding;
        options.hashes = hashes;
        options.envelope_as_map = (iter % 7) == 0;
        const Bytes wire = EncodeKvEventBatch(batch, options);
        const KvEventBatch back = MustDecode(wire);
        ASSERT_EQ(back, batch) << "iter " << iter;
      }
    }
  }
}

TEST(KvEventDecoderTest, ArrayFormDropsCacheSaltOnly) {
  KvEventBatch batch;
  BlockStored s;
  s.block_hashes = {3};
  s.cache_salt = "salt";
  s.session_id = "sess";
  batch.events.push_back(s);
  const KvEventBatch back = MustDecode(EncodeKvEventBatch(batch, KvEncoding::kArray));
  EXPECT_FALSE(Stored(back, 0).cache_salt.has_value());
  EXPECT_EQ(Stored(back, 0).session_id, "sess");
  EXPECT_EQ(Stored(MustDecode(EncodeKvEventBatch(batch, KvEncoding::kMap)), 0).cache_salt, "salt");
}

// ---- Framing ----

std::vector<Frame> Frames(const std::vector<Bytes>& parts) {
  std::vector<Frame> frames;
  for (const Bytes& p : parts) frames.emplace_back(p);
  return frames;
}

Bytes Seq(std::uint64_t seq) {
  const auto a = EncodeSeqFrame(seq);
  return Bytes(a.begin(), a.end());
}

TEST(KvFramingTest, ParsesThreeFrameMessages) {
  EXPECT_EQ(Seq(0x0102030405060708ull), (Bytes{1, 2, 3, 4, 5, 6, 7, 8}));
  const Bytes topic = {'k', 'v', '@', '1'};
  const Bytes seq = Seq(42);
  const Bytes payload = V026Capture();
  const std::vector<Bytes> parts = {topic, seq, payload};
  const KvResult<KvMessage> m = ParseFrames(Frames(parts));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m.value().topic, "kv@1");
  EXPECT_EQ(m.value().seq, 42u);
  EXPECT_EQ(m.value().payload.size(), payload.size());

  const std::vector<Bytes> short_seq = {topic, Bytes{0, 0, 0, 0, 0, 0, 42}, payload};
  EXPECT_EQ(ParseFrames(Frames(short_seq)).error().code, KvDecodeErrorCode::kBadFrames);
  const std::vector<Bytes> two = {seq, payload};
  EXPECT_EQ(ParseFrames(Frames(two)).error().code, KvDecodeErrorCode::kBadFrames);
  EXPECT_EQ(ParseSeqFrame(Bytes(9)).error().code, KvDecodeErrorCode::kBadFrames);
  EXPECT_EQ(ParseSeqFrame(Seq(~0ull)).value(), kReplayEndSeq);
}

// A replay reply parsed from frames that live only inside this call, copied out.
struct OwnedReply {
  bool ok = false;
  KvDecodeErrorCode code = KvDecodeErrorCode::kInternal;
  std::string topic;
  bool has_topic = false;
  std::uint64_t seq = 0;
  std::size_t payload_size = 0;
  bool end_of_replay = false;
};

OwnedReply Replay(const std::vector<Bytes>& parts) {
  const std::vector<Frame> frames = Frames(parts);
  const KvResult<KvReplayReply> r = ParseReplayReply(frames);
  OwnedReply out;
  out.ok = r.ok();
  if (!r.ok()) {
    out.code = r.error().code;
    return out;
  }
  out.topic = std::string(r.value().topic);
  out.has_topic = r.value().has_topic;
  out.seq = r.value().seq;
  out.payload_size = r.value().payload.size();
  out.end_of_replay = r.value().end_of_replay;
  return out;
}

TEST(KvFramingTest, ParsesReplayRepliesInBothFramings) {
  const Bytes payload = V026Capture();
  const Bytes empty;
  const Bytes topic = {'t'};
  // <= v0.25: [seq, payload], end [ff..ff, ""].
  OwnedReply r = Replay({Seq(5), payload});
  ASSERT_TRUE(r.ok);
  EXPECT_FALSE(r.has_topic);
  EXPECT_EQ(r.seq, 5u);
  EXPECT_EQ(r.payload_size, payload.size());
  EXPECT_FALSE(r.end_of_replay);
  r = Replay({Seq(~0ull), empty});
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.end_of_replay);
  // >= v0.26: [topic, seq, payload], end ["", ff..ff, ""].
  r = Replay({topic, Seq(6), payload});
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.has_topic);
  EXPECT_EQ(r.topic, "t");
  EXPECT_EQ(r.seq, 6u);
  EXPECT_FALSE(r.end_of_replay);
  r = Replay({empty, Seq(~0ull), empty});
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.end_of_replay);
  // An empty payload alone ends the replay (the example subscriber's rule).
  r = Replay({topic, Seq(9), empty});
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.end_of_replay);
  // On a DEALER the >= v0.26 form keeps the empty delimiter in front.
  r = Replay({empty, topic, Seq(7), payload});
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.topic, "t");
  EXPECT_EQ(r.seq, 7u);
  EXPECT_FALSE(r.end_of_replay);
  EXPECT_EQ(Replay({payload}).code, KvDecodeErrorCode::kBadFrames);
  EXPECT_EQ(Replay({topic, topic, Seq(1), payload}).code, KvDecodeErrorCode::kBadFrames);
  EXPECT_EQ(Replay({topic, Bytes{1}, payload}).code, KvDecodeErrorCode::kBadFrames);
}

}  // namespace
}  // namespace kvwatch::collectors
