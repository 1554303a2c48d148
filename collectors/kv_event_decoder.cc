#include "collectors/kv_event_decoder.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <type_traits>

#include <msgpack.hpp>

#include "base/mix.h"

namespace kvwatch::collectors {

static_assert(std::is_same_v<std::variant_alternative_t<0, KvEvent>, BlockStored>);
static_assert(std::is_same_v<std::variant_alternative_t<1, KvEvent>, BlockRemoved>);
static_assert(std::is_same_v<std::variant_alternative_t<2, KvEvent>, AllBlocksCleared>);
static_assert(std::is_same_v<std::variant_alternative_t<3, KvEvent>, CacheCreated>);
static_assert(std::is_same_v<std::variant_alternative_t<4, KvEvent>, BlockUpdated>);
static_assert(std::is_same_v<std::variant_alternative_t<5, KvEvent>, UnknownKvEvent>);

void BlockStored::Clear() {
  block_hashes.clear();
  parent_block_hash.reset();
  token_ids.clear();
  block_size = 0;
  lora_id.reset();
  medium.reset();
  lora_name.reset();
  has_extra_keys = false;
  extra_key_digests.clear();
  extra_keys_msgpack.clear();
  group_idx.reset();
  kv_cache_spec_kind.reset();
  kv_cache_spec_sliding_window.reset();
  locality.reset();
  ownership.reset();
  session_id.reset();
  cache_salt.reset();
  cache_level.reset();
  priority.reset();
  window_size.reset();
}

void BlockRemoved::Clear() {
  block_hashes.clear();
  medium.reset();
  group_idx.reset();
  locality.reset();
  ownership.reset();
  window_size.reset();
}

std::string_view KvEventKindName(KvEventKind kind) {
  switch (kind) {
    case KvEventKind::kBlockStored: return "BlockStored";
    case KvEventKind::kBlockRemoved: return "BlockRemoved";
    case KvEventKind::kAllBlocksCleared: return "AllBlocksCleared";
    case KvEventKind::kCacheCreated: return "created";
    case KvEventKind::kBlockUpdated: return "updated";
    case KvEventKind::kUnknown: return "unknown";
  }
  return "unknown";
}

std::string_view KvDecodeErrorCodeName(KvDecodeErrorCode code) {
  switch (code) {
    case KvDecodeErrorCode::kNotMsgpack: return "not_msgpack";
    case KvDecodeErrorCode::kTruncated: return "truncated";
    case KvDecodeErrorCode::kTrailingBytes: return "trailing_bytes";
    case KvDecodeErrorCode::kTooDeep: return "too_deep";
    case KvDecodeErrorCode::kBadEnvelope: return "bad_envelope";
    case KvDecodeErrorCode::kBadEvent: return "bad_event";
    case KvDecodeErrorCode::kBadHash: return "bad_hash";
    case KvDecodeErrorCode::kBadFrames: return "bad_frames";
    case KvDecodeErrorCode::kInternal: return "internal";
  }
  return "internal";
}

std::string KvDecodeError::ToString() const {
  return std::string(KvDecodeErrorCodeName(code)) + ": " + message;
}

const KvDecodeError& KvDecodeStatus::error() const {
  if (ok()) KvResultErrorOnValue();
  return *error_;
}

base::Status KvDecodeStatus::ToStatus() const {
  return ok() ? base::Status::Ok() : base::Status::Error(error_->ToString());
}

void KvResultValueOnError(const KvDecodeError& error) {
  std::fprintf(stderr, "kvwatch: value() called on an error KvResult: %s\n", error.ToString().c_str());
  std::abort();
}

void KvResultErrorOnValue() {
  std::fprintf(stderr, "kvwatch: error() called on an ok KvResult or KvDecodeStatus\n");
  std::abort();
}

namespace {

using Object = msgpack::object;
namespace mtype = msgpack::type;

KvDecodeStatus Fail(KvDecodeErrorCode code, std::string message) {
  return KvDecodeStatus(KvDecodeError{code, std::move(message)});
}

std::uint64_t ReadBigEndian(const std::uint8_t* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

// ---- Structural pre-pass --------------------------------------------------------
//
// Walks the msgpack bytes without materialising anything and checks that they
// hold exactly one complete object, nested at most kMaxMsgpackDepth deep, where
// no container declares more elements than bytes remain. msgpack-cxx allocates
// a container's slots as soon as it reads the header, so this bound is what
// keeps a hostile length prefix from turning into a huge allocation.

// How the first byte of an object determines its size.
enum class Shape : std::uint8_t {
  kFixed,      // the whole object is `fixed` bytes (ints, floats, nil, fixstr, fixext)
  kSized,      // a big-endian length of `len_bytes` follows; body = length bytes
  kContainer,  // a count follows (or is in the byte); `per_count` elements per count
  kInvalid,    // 0xc1
};

struct ByteInfo {
  Shape shape = Shape::kInvalid;
  std::uint8_t fixed = 0;      // kFixed: total size
  std::uint8_t len_bytes = 0;  // kSized/kContainer: width of the length field (0: in the byte)
  std::uint8_t extra = 0;      // kSized: header bytes after the length (ext type)
  std::uint8_t per_count = 1;  // kContainer: 2 for maps
  std::uint8_t inline_count = 0;  // kContainer with len_bytes == 0
};

constexpr std::array<ByteInfo, 256> MakeByteTable() {
  std::array<ByteInfo, 256> t{};
  auto fixed = [](std::uint8_t n) { return ByteInfo{Shape::kFixed, n, 0, 0, 1, 0}; };
  auto sized = [](std::uint8_t len, std::uint8_t extra) { return ByteInfo{Shape::kSized, 0, len, extra, 1, 0}; };
  auto container = [](std::uint8_t len, std::uint8_t per, std::uint8_t count) {
    return ByteInfo{Shape::kContainer, 0, len, 0, per, count};
  };
  for (int b = 0x00; b <= 0x7f; ++b) t[b] = fixed(1);
  for (int b = 0x80; b <= 0x8f; ++b) t[b] = container(0, 2, static_cast<std::uint8_t>(b & 0x0f));
  for (int b = 0x90; b <= 0x9f; ++b) t[b] = container(0, 1, static_cast<std::uint8_t>(b & 0x0f));
  for (int b = 0xa0; b <= 0xbf; ++b) t[b] = fixed(static_cast<std::uint8_t>(1 + (b & 0x1f)));
  for (int b = 0xe0; b <= 0xff; ++b) t[b] = fixed(1);
  t[0xc0] = t[0xc2] = t[0xc3] = fixed(1);
  t[0xc4] = sized(1, 0); t[0xc5] = sized(2, 0); t[0xc6] = sized(4, 0);  // bin
  t[0xc7] = sized(1, 1); t[0xc8] = sized(2, 1); t[0xc9] = sized(4, 1);  // ext
  t[0xca] = fixed(5); t[0xcb] = fixed(9);                               // float
  t[0xcc] = t[0xd0] = fixed(2); t[0xcd] = t[0xd1] = fixed(3);           // ints
  t[0xce] = t[0xd2] = fixed(5); t[0xcf] = t[0xd3] = fixed(9);
  t[0xd4] = fixed(3); t[0xd5] = fixed(4); t[0xd6] = fixed(6);           // fixext
  t[0xd7] = fixed(10); t[0xd8] = fixed(18);
  t[0xd9] = sized(1, 0); t[0xda] = sized(2, 0); t[0xdb] = sized(4, 0);  // str
  t[0xdc] = container(2, 1, 0); t[0xdd] = container(4, 1, 0);           // array
  t[0xde] = container(2, 2, 0); t[0xdf] = container(4, 2, 0);           // map
  return t;
}

constexpr std::array<ByteInfo, 256> kByteTable = MakeByteTable();

std::string At(std::size_t offset) { return " at byte offset " + std::to_string(offset); }

std::string HexByte(std::uint8_t b) {
  const char* digits = "0123456789abcdef";
  return std::string{'0', 'x', digits[b >> 4], digits[b & 15]};
}

// On success *end is the offset just past the first complete object.
KvDecodeStatus ScanMsgpack(std::span<const std::uint8_t> data, std::size_t* end) {
  const std::size_t n = data.size();
  const std::uint8_t* p = data.data();
  if (n == 0) return Fail(KvDecodeErrorCode::kNotMsgpack, "empty payload, expected a msgpack object");
  std::array<std::uint64_t, kMaxMsgpackDepth> remaining;
  int depth = 0;
  std::uint64_t pending = 0;  // elements still owed by the open containers
  std::size_t pos = 0;
  while (true) {
    if (depth > 0) {
      // Fast path: the fixed-size scalars (token ids, hashes) of the innermost container.
      std::uint64_t& rem = remaining[depth - 1];
      while (rem > 0 && pos < n) {
        const ByteInfo& info = kByteTable[p[pos]];
        if (info.shape != Shape::kFixed || info.fixed > n - pos) break;
        pos += info.fixed;
        --rem;
        --pending;
      }
      if (rem == 0) {
        while (depth > 0 && remaining[depth - 1] == 0) --depth;
        if (depth == 0) {
          *end = pos;
          return KvDecodeStatus();
        }
        continue;
      }
    }
    if (pos >= n) {
      return Fail(KvDecodeErrorCode::kTruncated, "payload ends inside an object" + At(pos) + " (" +
                                                     std::to_string(pending) + " more element(s) expected)");
    }
    if (depth > 0) {
      --remaining[depth - 1];
      --pending;
    }
    const std::size_t start = pos;
    const ByteInfo& info = kByteTable[p[pos]];
    const std::size_t avail = n - pos;
    std::uint64_t count = info.inline_count;
    if (info.shape == Shape::kFixed) {
      if (info.fixed > avail) {
        return Fail(KvDecodeErrorCode::kTruncated, "object" + At(pos) + " needs " +
                                                       std::to_string(info.fixed) + " bytes but only " +
                                                       std::to_string(avail) + " remain");
      }
      pos += info.fixed;
    } else if (info.shape == Shape::kInvalid) {
      return Fail(KvDecodeErrorCode::kNotMsgpack, "byte " + HexByte(p[pos]) + " starts no msgpack object" + At(pos));
    } else {
      const std::size_t header = 1u + info.len_bytes + info.extra;
      if (header > avail) return Fail(KvDecodeErrorCode::kTruncated, "length field runs past the end" + At(pos));
      if (info.len_bytes > 0) count = ReadBigEndian(p + pos + 1, info.len_bytes);
      pos += header;
      if (info.shape == Shape::kSized) {
        if (count > n - pos) {
          return Fail(KvDecodeErrorCode::kTruncated, "object" + At(start) + " declares " +
                                                         std::to_string(count) + " bytes but only " +
                                                         std::to_string(n - pos) + " remain");
        }
        pos += static_cast<std::size_t>(count);
      } else if (count > 0) {
        const std::uint64_t children = count * info.per_count;
        const std::size_t left = n - pos;
        if (pending > left || children > left - pending) {
          return Fail(KvDecodeErrorCode::kTruncated, "container" + At(start) + " declares " +
                                                         std::to_string(children) + " element(s) but only " +
                                                         std::to_string(left) + " byte(s) remain");
        }
        if (depth == kMaxMsgpackDepth) {
          return Fail(KvDecodeErrorCode::kTooDeep,
                      "nesting deeper than " + std::to_string(kMaxMsgpackDepth) + At(start));
        }
        remaining[depth++] = children;
        pending += children;
        continue;
      }
    }
    while (depth > 0 && remaining[depth - 1] == 0) --depth;
    if (depth == 0) {
      *end = pos;
      return KvDecodeStatus();
    }
  }
}

// ---- Object helpers ---------------------------------------------------------------

const char* TypeName(const Object& o) {
  switch (o.type) {
    case mtype::NIL: return "nil";
    case mtype::BOOLEAN: return "bool";
    case mtype::POSITIVE_INTEGER: return "uint";
    case mtype::NEGATIVE_INTEGER: return "negative int";
    case mtype::FLOAT32: case mtype::FLOAT64: return "float";
    case mtype::STR: return "str";
    case mtype::BIN: return "bin";
    case mtype::ARRAY: return "array";
    case mtype::MAP: return "map";
    case mtype::EXT: return "ext";
  }
  return "unknown";
}

bool IsNil(const Object& o) { return o.type == mtype::NIL; }

std::string_view StrOf(const Object& o) { return {o.via.str.ptr, o.via.str.size}; }

bool AsInt(const Object& o, std::int64_t* out) {
  if (o.type == mtype::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return false;
    }
    *out = static_cast<std::int64_t>(o.via.u64);
    return true;
  }
  if (o.type == mtype::NEGATIVE_INTEGER) {
    *out = o.via.i64;
    return true;
  }
  return false;
}

bool AsOptInt(const Object& o, std::optional<std::int64_t>* out) {
  if (IsNil(o)) {
    out->reset();
    return true;
  }
  std::int64_t v;
  if (!AsInt(o, &v)) return false;
  *out = v;
  return true;
}

bool AsOptStr(const Object& o, std::optional<std::string>* out) {
  if (IsNil(o)) {
    out->reset();
    return true;
  }
  if (o.type != mtype::STR) return false;
  if (out->has_value()) {
    (*out)->assign(o.via.str.ptr, o.via.str.size);
  } else {
    out->emplace(o.via.str.ptr, o.via.str.size);
  }
  return true;
}

bool AsDouble(const Object& o, double* out) {
  switch (o.type) {
    case mtype::FLOAT32: case mtype::FLOAT64: *out = o.via.f64; return true;
    case mtype::POSITIVE_INTEGER: *out = static_cast<double>(o.via.u64); return true;
    case mtype::NEGATIVE_INTEGER: *out = static_cast<double>(o.via.i64); return true;
    default: return false;
  }
}

bool AsHash(const Object& o, std::uint64_t* out) {
  switch (o.type) {
    case mtype::POSITIVE_INTEGER: *out = o.via.u64; return true;
    case mtype::NEGATIVE_INTEGER: *out = static_cast<std::uint64_t>(o.via.i64); return true;
    case mtype::BIN:
      *out = HashFromBytes({reinterpret_cast<const std::uint8_t*>(o.via.bin.ptr), o.via.bin.size});
      return true;
    case mtype::STR:
      *out = HashFromBytes({reinterpret_cast<const std::uint8_t*>(o.via.str.ptr), o.via.str.size});
      return true;
    default: return false;
  }
}

// Looks a key up in a map (str keys only); nullptr when absent.
const Object* MapFind(const Object& map, std::string_view key) {
  for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
    const msgpack::object_kv& kv = map.via.map.ptr[i];
    if (kv.key.type == mtype::STR && StrOf(kv.key) == key) return &kv.val;
  }
  return nullptr;
}

// ---- Digests ---------------------------------------------------------------------

constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ull;

struct Fnv {
  std::uint64_t h = kFnvOffset;
  void Byte(std::uint8_t b) { h = (h ^ b) * kFnvPrime; }
  void Bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    for (std::size_t i = 0; i < n; ++i) Byte(p[i]);
  }
  void U64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) Byte(static_cast<std::uint8_t>(v >> (8 * i)));
  }
};

// Spreads FNV's weak low bits.
std::uint64_t Mix(std::uint64_t x) { return base::Mix64(x); }

void DigestInto(const Object& o, Fnv* f) {
  switch (o.type) {
    case mtype::NIL: f->Byte('n'); return;
    case mtype::BOOLEAN: f->Byte('b'); f->Byte(o.via.boolean ? 1 : 0); return;
    case mtype::POSITIVE_INTEGER: f->Byte('u'); f->U64(o.via.u64); return;
    case mtype::NEGATIVE_INTEGER: f->Byte('i'); f->U64(static_cast<std::uint64_t>(o.via.i64)); return;
    case mtype::FLOAT32: case mtype::FLOAT64: {
      std::uint64_t bits;
      std::memcpy(&bits, &o.via.f64, sizeof bits);
      f->Byte('f');
      f->U64(bits);
      return;
    }
    case mtype::STR: f->Byte('s'); f->U64(o.via.str.size); f->Bytes(o.via.str.ptr, o.via.str.size); return;
    case mtype::BIN: f->Byte('y'); f->U64(o.via.bin.size); f->Bytes(o.via.bin.ptr, o.via.bin.size); return;
    case mtype::EXT:
      f->Byte('e');
      f->Byte(static_cast<std::uint8_t>(o.via.ext.type()));
      f->U64(o.via.ext.size);
      f->Bytes(o.via.ext.data(), o.via.ext.size);
      return;
    case mtype::ARRAY:
      f->Byte('a');
      f->U64(o.via.array.size);
      for (std::uint32_t i = 0; i < o.via.array.size; ++i) DigestInto(o.via.array.ptr[i], f);
      return;
    case mtype::MAP:
      f->Byte('m');
      f->U64(o.via.map.size);
      for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
        DigestInto(o.via.map.ptr[i].key, f);
        DigestInto(o.via.map.ptr[i].val, f);
      }
      return;
  }
}

std::uint64_t DigestOf(const Object& o) {
  if (IsNil(o)) return 0;
  Fnv f;
  DigestInto(o, &f);
  const std::uint64_t d = Mix(f.h);
  return d == 0 ? 1 : d;
}

// A token given as a string: its decimal value, else a digest of the text.
std::int64_t TokenFromString(std::string_view s) {
  std::int64_t v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (ec == std::errc() && ptr == end && !s.empty()) return v;
  Fnv f;
  f.Byte('t');
  f.Bytes(s.data(), s.size());
  return static_cast<std::int64_t>(Mix(f.h));
}

// Appends raw bytes to a std::string, as msgpack::packer's Stream.
struct StringSink {
  std::string* out;
  void write(const char* data, std::size_t n) { out->append(data, n); }
};

// Writes a float64 as msgspec does (0xcb + 8 bytes). msgpack-cxx 4.1's
// pack_double would write an integral value such as 1.0 as an int.
template <typename Sink>
void WriteFloat64(Sink& sink, double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  char buf[9];
  buf[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) buf[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
  sink.write(buf, sizeof buf);
}

template <typename Sink>
void WriteFloat32(Sink& sink, float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  char buf[5];
  buf[0] = static_cast<char>(0xca);
  for (int i = 0; i < 4; ++i) buf[1 + i] = static_cast<char>(bits >> (24 - 8 * i));
  sink.write(buf, sizeof buf);
}

// Re-packs a decoded object in msgpack's shortest forms, keeping floats as
// floats (see WriteFloat64), so bytes written by msgspec come back unchanged.
template <typename Sink>
void PackObject(const Object& o, msgpack::packer<Sink>& pk, Sink& sink) {
  switch (o.type) {
    case mtype::NIL: pk.pack_nil(); return;
    case mtype::BOOLEAN: if (o.via.boolean) pk.pack_true(); else pk.pack_false(); return;
    case mtype::POSITIVE_INTEGER: pk.pack_uint64(o.via.u64); return;
    case mtype::NEGATIVE_INTEGER: pk.pack_int64(o.via.i64); return;
    case mtype::FLOAT32: WriteFloat32(sink, static_cast<float>(o.via.f64)); return;
    case mtype::FLOAT64: WriteFloat64(sink, o.via.f64); return;
    case mtype::STR: pk.pack_str(o.via.str.size); pk.pack_str_body(o.via.str.ptr, o.via.str.size); return;
    case mtype::BIN: pk.pack_bin(o.via.bin.size); pk.pack_bin_body(o.via.bin.ptr, o.via.bin.size); return;
    case mtype::EXT:
      pk.pack_ext(o.via.ext.size, o.via.ext.type());
      pk.pack_ext_body(o.via.ext.data(), o.via.ext.size);
      return;
    case mtype::ARRAY:
      pk.pack_array(o.via.array.size);
      for (std::uint32_t i = 0; i < o.via.array.size; ++i) PackObject(o.via.array.ptr[i], pk, sink);
      return;
    case mtype::MAP:
      pk.pack_map(o.via.map.size);
      for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
        PackObject(o.via.map.ptr[i].key, pk, sink);
        PackObject(o.via.map.ptr[i].val, pk, sink);
      }
      return;
  }
}

// ---- Event decoding -----------------------------------------------------------------

// The fields of BlockStored (and, by name, of BlockRemoved) the decoder knows.
enum class Field {
  kIgnored,
  kBlockHashes,
  kParent,
  kTokenIds,
  kBlockSize,
  kLoraId,
  kMedium,
  kLoraName,
  kLoraNameOrMetadata,  // position 7: vLLM lora_name or SGLang metadata
  kMetadata,
  kExtraKeys,
  kGroupIdx,
  kSpecKind,
  kSlidingWindow,
  kLocality,
  kOwnership,
  kSessionId,
  kCacheSalt,
};

// Positional layout of vLLM's BlockStored (index 0 is the tag).
constexpr Field kStoredPositions[] = {
    Field::kIgnored,   Field::kBlockHashes, Field::kParent,       Field::kTokenIds,
    Field::kBlockSize, Field::kLoraId,      Field::kMedium,       Field::kLoraNameOrMetadata,
    Field::kExtraKeys, Field::kGroupIdx,    Field::kSpecKind,     Field::kSlidingWindow,
    Field::kLocality,  Field::kOwnership,   Field::kSessionId,
};

// Positional layout of BlockRemoved.
constexpr Field kRemovedPositions[] = {
    Field::kIgnored, Field::kBlockHashes, Field::kMedium,
    Field::kGroupIdx, Field::kLocality,   Field::kOwnership,
};

struct NamedField {
  std::string_view name;
  Field field;
};

constexpr NamedField kFieldNames[] = {
    {"block_hashes", Field::kBlockHashes},
    {"parent_block_hash", Field::kParent},
    {"token_ids", Field::kTokenIds},
    {"block_size", Field::kBlockSize},
    {"lora_id", Field::kLoraId},
    {"medium", Field::kMedium},
    {"lora_name", Field::kLoraName},
    {"extra_keys", Field::kExtraKeys},
    {"group_idx", Field::kGroupIdx},
    {"kv_cache_spec_kind", Field::kSpecKind},
    {"kv_cache_spec_sliding_window", Field::kSlidingWindow},
    {"locality", Field::kLocality},
    {"ownership", Field::kOwnership},
    {"session_id", Field::kSessionId},
    {"cache_salt", Field::kCacheSalt},
    {"metadata", Field::kMetadata},
};

Field FieldByName(std::string_view name) {
  for (const NamedField& f : kFieldNames) {
    if (f.name == name) return f.field;
  }
  return Field::kIgnored;
}

std::string_view FieldName(Field field) {
  for (const NamedField& f : kFieldNames) {
    if (f.field == field) return f.name;
  }
  return field == Field::kLoraNameOrMetadata ? "lora_name" : "?";
}

// Where an event sits, for error messages.
struct EventCtx {
  std::size_t index;
  std::string_view tag;
  bool positional;
};

std::string Where(const EventCtx& c) {
  return "event " + std::to_string(c.index) + " (" + std::string(c.tag) +
         (c.positional ? ", array form)" : ", map form)");
}

KvDecodeStatus FieldError(const EventCtx& c, std::string_view field, std::string_view expected,
                          const Object& got) {
  return Fail(KvDecodeErrorCode::kBadEvent, Where(c) + ": field '" + std::string(field) +
                                                "' expected " + std::string(expected) + ", got " +
                                                TypeName(got));
}

KvDecodeStatus ReadHashes(const Object& o, const EventCtx& c, std::string_view field,
                          std::vector<std::uint64_t>* out) {
  if (o.type != mtype::ARRAY) return FieldError(c, field, "an array of hashes", o);
  out->reserve(out->size() + o.via.array.size);
  for (std::uint32_t i = 0; i < o.via.array.size; ++i) {
    std::uint64_t h;
    if (!AsHash(o.via.array.ptr[i], &h)) {
      return Fail(KvDecodeErrorCode::kBadHash,
                  Where(c) + ": " + std::string(field) + "[" + std::to_string(i) +
                      "] expected an int or bytes, got " + TypeName(o.via.array.ptr[i]));
    }
    out->push_back(h);
  }
  return KvDecodeStatus();
}

KvDecodeStatus ReadOptHash(const Object& o, const EventCtx& c, std::string_view field,
                           std::optional<std::uint64_t>* out) {
  if (IsNil(o)) {
    out->reset();
    return KvDecodeStatus();
  }
  std::uint64_t h;
  if (!AsHash(o, &h)) {
    return Fail(KvDecodeErrorCode::kBadHash, Where(c) + ": " + std::string(field) +
                                                 " expected an int, bytes or nil, got " +
                                                 TypeName(o));
  }
  *out = h;
  return KvDecodeStatus();
}

// One token: an int, a decimal string, or TensorRT-LLM's {"token_id": n}.
bool ReadToken(const Object& o, std::int64_t* out) {
  if (o.type == mtype::POSITIVE_INTEGER) {
    *out = static_cast<std::int64_t>(o.via.u64);
    return true;
  }
  if (o.type == mtype::NEGATIVE_INTEGER) {
    *out = o.via.i64;
    return true;
  }
  if (o.type == mtype::STR) {
    *out = TokenFromString(StrOf(o));
    return true;
  }
  if (o.type == mtype::MAP) {
    const Object* id = MapFind(o, "token_id");
    return id != nullptr && id->type != mtype::MAP && ReadToken(*id, out);
  }
  return false;
}

KvDecodeStatus ReadTokens(const Object& o, const EventCtx& c, std::string_view field,
                          std::vector<std::int64_t>* out) {
  if (IsNil(o)) return KvDecodeStatus();
  if (o.type != mtype::ARRAY) return FieldError(c, field, "an array of tokens", o);
  out->reserve(out->size() + o.via.array.size);
  for (std::uint32_t i = 0; i < o.via.array.size; ++i) {
    std::int64_t t;
    if (!ReadToken(o.via.array.ptr[i], &t)) {
      return Fail(KvDecodeErrorCode::kBadEvent,
                  Where(c) + ": " + std::string(field) + "[" + std::to_string(i) +
                      "] expected an int or str token, got " + TypeName(o.via.array.ptr[i]));
    }
    out->push_back(t);
  }
  return KvDecodeStatus();
}

KvDecodeStatus ReadExtraKeys(const Object& o, const EventCtx& c, BlockStored* ev) {
  if (IsNil(o)) {
    ev->has_extra_keys = false;
    return KvDecodeStatus();
  }
  if (o.type != mtype::ARRAY) return FieldError(c, "extra_keys", "an array or nil", o);
  ev->has_extra_keys = true;
  ev->extra_key_digests.clear();
  for (std::uint32_t i = 0; i < o.via.array.size; ++i) {
    ev->extra_key_digests.push_back(DigestOf(o.via.array.ptr[i]));
  }
  ev->extra_keys_msgpack.clear();
  StringSink sink{&ev->extra_keys_msgpack};
  msgpack::packer<StringSink> packer(sink);
  PackObject(o, packer, sink);
  return KvDecodeStatus();
}

// SGLang's BlockStoredMetadata: {"cache_salt": s} or positional [s].
KvDecodeStatus ReadMetadata(const Object& o, const EventCtx& c, BlockStored* ev) {
  if (IsNil(o)) return KvDecodeStatus();
  const Object* salt = nullptr;
  if (o.type == mtype::MAP) {
    salt = MapFind(o, "cache_salt");
  } else if (o.type == mtype::ARRAY) {
    if (o.via.array.size > 0) salt = &o.via.array.ptr[0];
  } else {
    return FieldError(c, "metadata", "a map or an array", o);
  }
  if (salt != nullptr && !AsOptStr(*salt, &ev->cache_salt)) {
    return FieldError(c, "metadata.cache_salt", "a str or nil", *salt);
  }
  return KvDecodeStatus();
}

KvDecodeStatus SetIntField(const Object& v, const EventCtx& c, Field f,
                           std::optional<std::int64_t>* out) {
  if (!AsOptInt(v, out)) return FieldError(c, FieldName(f), "an int or nil", v);
  return KvDecodeStatus();
}

KvDecodeStatus SetStrField(const Object& v, const EventCtx& c, Field f,
                           std::optional<std::string>* out) {
  if (!AsOptStr(v, out)) return FieldError(c, FieldName(f), "a str or nil", v);
  return KvDecodeStatus();
}

KvDecodeStatus SetStoredField(Field f, const Object& v, const EventCtx& c, BlockStored* ev) {
  switch (f) {
    case Field::kIgnored: return KvDecodeStatus();
    case Field::kBlockHashes: return ReadHashes(v, c, "block_hashes", &ev->block_hashes);
    case Field::kParent: return ReadOptHash(v, c, "parent_block_hash", &ev->parent_block_hash);
    case Field::kTokenIds: return ReadTokens(v, c, "token_ids", &ev->token_ids);
    case Field::kBlockSize: {
      std::optional<std::int64_t> size;
      if (!AsOptInt(v, &size)) return FieldError(c, "block_size", "an int", v);
      ev->block_size = size.value_or(0);
      return KvDecodeStatus();
    }
    case Field::kLoraId: return SetIntField(v, c, f, &ev->lora_id);
    case Field::kMedium: return SetStrField(v, c, f, &ev->medium);
    case Field::kLoraName: return SetStrField(v, c, f, &ev->lora_name);
    case Field::kLoraNameOrMetadata:
      if (v.type == mtype::MAP || v.type == mtype::ARRAY) return ReadMetadata(v, c, ev);
      return SetStrField(v, c, Field::kLoraName, &ev->lora_name);
    case Field::kMetadata: return ReadMetadata(v, c, ev);
    case Field::kExtraKeys: return ReadExtraKeys(v, c, ev);
    case Field::kGroupIdx: return SetIntField(v, c, f, &ev->group_idx);
    case Field::kSpecKind: return SetStrField(v, c, f, &ev->kv_cache_spec_kind);
    case Field::kSlidingWindow: return SetIntField(v, c, f, &ev->kv_cache_spec_sliding_window);
    case Field::kLocality: return SetStrField(v, c, f, &ev->locality);
    case Field::kOwnership: return SetStrField(v, c, f, &ev->ownership);
    case Field::kSessionId: return SetStrField(v, c, f, &ev->session_id);
    case Field::kCacheSalt: return SetStrField(v, c, f, &ev->cache_salt);
  }
  return KvDecodeStatus();
}

KvDecodeStatus SetRemovedField(Field f, const Object& v, const EventCtx& c, BlockRemoved* ev) {
  switch (f) {
    case Field::kBlockHashes: return ReadHashes(v, c, "block_hashes", &ev->block_hashes);
    case Field::kMedium: return SetStrField(v, c, f, &ev->medium);
    case Field::kGroupIdx: return SetIntField(v, c, f, &ev->group_idx);
    case Field::kLocality: return SetStrField(v, c, f, &ev->locality);
    case Field::kOwnership: return SetStrField(v, c, f, &ev->ownership);
    default: return KvDecodeStatus();  // fields of BlockStored only, or unknown
  }
}

KvDecodeStatus MissingHashes(const EventCtx& c) {
  return Fail(KvDecodeErrorCode::kBadEvent, Where(c) + ": required field 'block_hashes' is missing");
}

// Reuses the storage of *slot when it already holds a T.
template <typename T>
T& Reuse(KvEvent* slot) {
  if (T* existing = std::get_if<T>(slot)) {
    if constexpr (std::is_same_v<T, BlockStored> || std::is_same_v<T, BlockRemoved>) {
      existing->Clear();
    } else if constexpr (std::is_same_v<T, CacheCreated>) {
      existing->num_blocks_per_cache_level.clear();
    } else if constexpr (std::is_same_v<T, UnknownKvEvent>) {
      existing->tag.clear();
    } else {
      *existing = T{};
    }
    return *existing;
  }
  return slot->emplace<T>();
}

template <typename T, std::size_t N, typename Setter>
KvDecodeStatus FromArray(const Object& o, const EventCtx& c, const Field (&positions)[N],
                         Setter set, T* ev) {
  const std::uint32_t size = o.via.array.size;
  if (size < 2) return MissingHashes(c);
  for (std::uint32_t i = 1; i < size && i < N; ++i) {
    KvDecodeStatus s = set(positions[i], o.via.array.ptr[i], c, ev);
    if (!s.ok()) return s;
  }
  return KvDecodeStatus();
}

template <typename T, typename Setter>
KvDecodeStatus FromMap(const Object& o, const EventCtx& c, Setter set, T* ev) {
  bool saw_hashes = false;
  for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
    const msgpack::object_kv& kv = o.via.map.ptr[i];
    if (kv.key.type != mtype::STR) continue;
    const Field f = FieldByName(StrOf(kv.key));
    if (f == Field::kBlockHashes) saw_hashes = true;
    KvDecodeStatus s = set(f, kv.val, c, ev);
    if (!s.ok()) return s;
  }
  return saw_hashes ? KvDecodeStatus() : MissingHashes(c);
}

// TensorRT-LLM's {"type": "stored", "parent_hash", "blocks": [{"block_hash",
// "tokens", "cache_level", "priority", "lora_id", "cache_salt"}, ...]}.
KvDecodeStatus TrtStored(const Object& o, const EventCtx& c, BlockStored* ev) {
  if (const Object* parent = MapFind(o, "parent_hash")) {
    KvDecodeStatus s = ReadOptHash(*parent, c, "parent_hash", &ev->parent_block_hash);
    if (!s.ok()) return s;
  }
  const Object* blocks = MapFind(o, "blocks");
  if (blocks == nullptr || blocks->type != mtype::ARRAY) {
    return blocks == nullptr
               ? Fail(KvDecodeErrorCode::kBadEvent, Where(c) + ": required field 'blocks' is missing")
               : FieldError(c, "blocks", "an array", *blocks);
  }
  for (std::uint32_t i = 0; i < blocks->via.array.size; ++i) {
    const Object& b = blocks->via.array.ptr[i];
    if (b.type != mtype::MAP) return FieldError(c, "blocks[]", "a map", b);
    const Object* hash = MapFind(b, "block_hash");
    std::uint64_t h;
    if (hash == nullptr || !AsHash(*hash, &h)) {
      return Fail(KvDecodeErrorCode::kBadHash, Where(c) + ": blocks[" + std::to_string(i) +
                                                   "].block_hash missing or not an int or bytes");
    }
    ev->block_hashes.push_back(h);
    const std::size_t before = ev->token_ids.size();
    if (const Object* tokens = MapFind(b, "tokens")) {
      KvDecodeStatus s = ReadTokens(*tokens, c, "blocks[].tokens", &ev->token_ids);
      if (!s.ok()) return s;
    }
    if (i > 0) continue;  // per-block metadata is taken from the first block
    ev->block_size = static_cast<std::int64_t>(ev->token_ids.size() - before);
    struct {
      const char* key;
      std::optional<std::int64_t>* out;
    } ints[] = {{"cache_level", &ev->cache_level}, {"priority", &ev->priority}, {"lora_id", &ev->lora_id}};
    for (const auto& item : ints) {
      const Object* v = MapFind(b, item.key);
      if (v != nullptr && !AsOptInt(*v, item.out)) return FieldError(c, item.key, "an int or nil", *v);
    }
    if (const Object* salt = MapFind(b, "cache_salt")) {
      KvDecodeStatus s = SetStrField(*salt, c, Field::kCacheSalt, &ev->cache_salt);
      if (!s.ok()) return s;
    }
  }
  if (ev->cache_level.has_value()) ev->medium = *ev->cache_level == 0 ? "GPU" : "CPU";
  return KvDecodeStatus();
}

KvDecodeStatus TrtCreated(const Object& o, const EventCtx& c, CacheCreated* ev) {
  const Object* levels = MapFind(o, "num_blocks_per_cache_level");
  if (levels == nullptr) return KvDecodeStatus();
  if (levels->type != mtype::ARRAY) return FieldError(c, "num_blocks_per_cache_level", "an array", *levels);
  for (std::uint32_t i = 0; i < levels->via.array.size; ++i) {
    std::int64_t n;
    if (!AsInt(levels->via.array.ptr[i], &n)) {
      return FieldError(c, "num_blocks_per_cache_level[]", "an int", levels->via.array.ptr[i]);
    }
    ev->num_blocks_per_cache_level.push_back(n);
  }
  return KvDecodeStatus();
}

// {"type": "event_diff", "old_value": a, "new_value": b}, or nil.
KvDecodeStatus ReadDiff(const Object* diff, const EventCtx& c, const char* field,
                        std::optional<std::int64_t>* old_value, std::optional<std::int64_t>* new_value) {
  if (diff == nullptr || IsNil(*diff)) return KvDecodeStatus();
  if (diff->type != mtype::MAP) return FieldError(c, field, "an event_diff map or nil", *diff);
  const Object* o = MapFind(*diff, "old_value");
  const Object* n = MapFind(*diff, "new_value");
  if ((o != nullptr && !AsOptInt(*o, old_value)) || (n != nullptr && !AsOptInt(*n, new_value))) {
    return FieldError(c, field, "int or nil old_value/new_value", *diff);
  }
  return KvDecodeStatus();
}

KvDecodeStatus TrtUpdated(const Object& o, const EventCtx& c, BlockUpdated* ev) {
  const Object* hash = MapFind(o, "block_hash");
  if (hash == nullptr || !AsHash(*hash, &ev->block_hash)) {
    return Fail(KvDecodeErrorCode::kBadHash, Where(c) + ": block_hash missing or not an int or bytes");
  }
  KvDecodeStatus s = ReadDiff(MapFind(o, "cache_level"), c, "cache_level", &ev->cache_level_old,
                              &ev->cache_level_new);
  if (!s.ok()) return s;
  return ReadDiff(MapFind(o, "priority"), c, "priority", &ev->priority_old, &ev->priority_new);
}

void SetUnknown(std::string_view tag, KvEvent* slot) { Reuse<UnknownKvEvent>(slot).tag.assign(tag); }

KvDecodeStatus DecodeArrayEvent(const Object& o, std::size_t index, KvEvent* slot) {
  if (o.via.array.size == 0 || o.via.array.ptr[0].type != mtype::STR) {
    const char* got = o.via.array.size == 0 ? "an empty array" : TypeName(o.via.array.ptr[0]);
    return Fail(KvDecodeErrorCode::kBadEvent, "event " + std::to_string(index) +
                                                  ": expected a str tag at position 0, got " + got);
  }
  const std::string_view tag = StrOf(o.via.array.ptr[0]);
  const EventCtx c{index, tag, true};
  if (tag == "BlockStored") {
    return FromArray(o, c, kStoredPositions, SetStoredField, &Reuse<BlockStored>(slot));
  }
  if (tag == "BlockRemoved") {
    return FromArray(o, c, kRemovedPositions, SetRemovedField, &Reuse<BlockRemoved>(slot));
  }
  if (tag == "AllBlocksCleared") {
    slot->emplace<AllBlocksCleared>();
    return KvDecodeStatus();
  }
  SetUnknown(tag, slot);
  return KvDecodeStatus();
}

std::optional<std::int64_t>* WindowSizeOf(KvEvent* slot) {
  if (auto* e = std::get_if<BlockStored>(slot)) return &e->window_size;
  if (auto* e = std::get_if<BlockRemoved>(slot)) return &e->window_size;
  if (auto* e = std::get_if<BlockUpdated>(slot)) return &e->window_size;
  return nullptr;
}

KvDecodeStatus DecodeMapEvent(const Object& o, std::size_t index, KvEvent* slot, bool wrapped);

// TensorRT-LLM's {"event_id", "data": {...}, "window_size", "attention_dp_rank"}.
KvDecodeStatus DecodeWrappedEvent(const Object& o, const Object& data, std::size_t index, KvEvent* slot) {
  KvDecodeStatus s = DecodeMapEvent(data, index, slot, true);
  if (!s.ok()) return s;
  const Object* window = MapFind(o, "window_size");
  std::optional<std::int64_t>* out = WindowSizeOf(slot);
  if (window != nullptr && out != nullptr && !AsOptInt(*window, out)) {
    return FieldError(EventCtx{index, "wrapper", false}, "window_size", "an int or nil", *window);
  }
  return KvDecodeStatus();
}

KvDecodeStatus DecodeMapEvent(const Object& o, std::size_t index, KvEvent* slot, bool wrapped) {
  const Object* type = MapFind(o, "type");
  if (type == nullptr) {
    const Object* data = MapFind(o, "data");
    if (!wrapped && data != nullptr && data->type == mtype::MAP) {
      return DecodeWrappedEvent(o, *data, index, slot);
    }
    return Fail(KvDecodeErrorCode::kBadEvent,
                "event " + std::to_string(index) + ": map event without a 'type' key");
  }
  if (type->type != mtype::STR) {
    return Fail(KvDecodeErrorCode::kBadEvent, "event " + std::to_string(index) +
                                                  ": 'type' expected a str, got " + TypeName(*type));
  }
  const std::string_view tag = StrOf(*type);
  const EventCtx c{index, tag, false};
  if (tag == "BlockStored") return FromMap(o, c, SetStoredField, &Reuse<BlockStored>(slot));
  if (tag == "BlockRemoved" || tag == "removed") {
    return FromMap(o, c, SetRemovedField, &Reuse<BlockRemoved>(slot));
  }
  if (tag == "AllBlocksCleared") {
    slot->emplace<AllBlocksCleared>();
    return KvDecodeStatus();
  }
  if (tag == "stored") return TrtStored(o, c, &Reuse<BlockStored>(slot));
  if (tag == "created") return TrtCreated(o, c, &Reuse<CacheCreated>(slot));
  if (tag == "updated") return TrtUpdated(o, c, &Reuse<BlockUpdated>(slot));
  SetUnknown(tag, slot);
  return KvDecodeStatus();
}

KvDecodeStatus DecodeEvent(const Object& o, std::size_t index, KvEvent* slot) {
  if (o.type == mtype::ARRAY) return DecodeArrayEvent(o, index, slot);
  if (o.type == mtype::MAP) return DecodeMapEvent(o, index, slot, false);
  return Fail(KvDecodeErrorCode::kBadEvent, "event " + std::to_string(index) +
                                                ": expected an array or a map, got " + TypeName(o));
}

KvDecodeStatus DecodeEvents(const Object& events, KvEventBatch* batch) {
  if (events.type != mtype::ARRAY) {
    return Fail(KvDecodeErrorCode::kBadEnvelope,
                std::string("envelope 'events' expected an array, got ") + TypeName(events));
  }
  const std::size_t n = events.via.array.size;
  std::vector<KvEvent>& out = batch->events;
  if (out.size() < n) out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    KvDecodeStatus s = DecodeEvent(events.via.array.ptr[i], i, &out[i]);
    if (!s.ok()) return s;
  }
  out.erase(out.begin() + static_cast<std::ptrdiff_t>(n), out.end());
  return KvDecodeStatus();
}

KvDecodeStatus ReadTs(const Object& ts, KvEventBatch* batch) {
  if (!AsDouble(ts, &batch->ts)) {
    return Fail(KvDecodeErrorCode::kBadEnvelope,
                std::string("envelope 'ts' expected a float, got ") + TypeName(ts));
  }
  return KvDecodeStatus();
}

KvDecodeStatus ReadDpRank(const Object& rank, KvEventBatch* batch) {
  if (!AsOptInt(rank, &batch->dp_rank)) {
    return Fail(KvDecodeErrorCode::kBadEnvelope,
                std::string("envelope dp rank expected an int or nil, got ") + TypeName(rank));
  }
  return KvDecodeStatus();
}

KvDecodeStatus DecodeEnvelope(const Object& root, KvEventBatch* batch) {
  batch->dp_rank.reset();
  if (root.type == mtype::ARRAY) {
    const std::uint32_t size = root.via.array.size;
    if (size < 2) {
      return Fail(KvDecodeErrorCode::kBadEnvelope,
                  "envelope expected [ts, events, dp_rank?], got an array of " + std::to_string(size));
    }
    KvDecodeStatus s = ReadTs(root.via.array.ptr[0], batch);
    if (s.ok() && size >= 3) s = ReadDpRank(root.via.array.ptr[2], batch);
    if (!s.ok()) return s;
    return DecodeEvents(root.via.array.ptr[1], batch);
  }
  if (root.type == mtype::MAP) {
    const Object* ts = MapFind(root, "ts");
    const Object* events = MapFind(root, "events");
    if (ts == nullptr || events == nullptr) {
      return Fail(KvDecodeErrorCode::kBadEnvelope, "map envelope needs 'ts' and 'events'");
    }
    KvDecodeStatus s = ReadTs(*ts, batch);
    for (const char* key : {"data_parallel_rank", "attn_dp_rank", "dp_rank"}) {
      const Object* rank = MapFind(root, key);
      if (s.ok() && rank != nullptr) s = ReadDpRank(*rank, batch);
    }
    if (!s.ok()) return s;
    return DecodeEvents(*events, batch);
  }
  return Fail(KvDecodeErrorCode::kBadEnvelope,
              std::string("envelope expected an array or a map, got ") + TypeName(root));
}

bool ReferenceAll(mtype::object_type, std::size_t, void*) { return true; }

// Validates, then materialises the payload into zone; on success *root is the object.
KvDecodeStatus Materialise(std::span<const std::uint8_t> payload, msgpack::zone* zone, Object* root) {
  std::size_t end = 0;
  KvDecodeStatus s = ScanMsgpack(payload, &end);
  if (!s.ok()) return s;
  if (end != payload.size()) {
    return Fail(KvDecodeErrorCode::kTrailingBytes,
                std::to_string(payload.size() - end) + " byte(s) after the msgpack object ending" + At(end));
  }
  const std::size_t n = payload.size();
  const msgpack::unpack_limit limit(n, n, n, n, n, kMaxMsgpackDepth + 1);
  zone->clear();
  *root = msgpack::unpack(*zone, reinterpret_cast<const char*>(payload.data()), n, ReferenceAll,
                          nullptr, limit);
  return KvDecodeStatus();
}

template <typename Fn>
KvDecodeStatus Guarded(Fn fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Fail(KvDecodeErrorCode::kInternal, "out of memory while decoding");
  } catch (const std::exception& e) {
    return Fail(KvDecodeErrorCode::kInternal, std::string("msgpack: ") + e.what());
  } catch (...) {
    return Fail(KvDecodeErrorCode::kInternal, "unexpected exception while decoding");
  }
}

}  // namespace

// ---- Public decoding API ------------------------------------------------------------

struct KvEventDecoder::Impl {
  msgpack::zone zone;
};

KvEventDecoder::KvEventDecoder() : impl_(std::make_unique<Impl>()) {}
KvEventDecoder::~KvEventDecoder() = default;

KvDecodeStatus KvEventDecoder::Decode(std::span<const std::uint8_t> payload, KvEventBatch* batch) {
  return Guarded([&] {
    Object root;
    KvDecodeStatus s = Materialise(payload, &impl_->zone, &root);
    if (!s.ok()) return s;
    return DecodeEnvelope(root, batch);
  });
}

KvResult<KvEventBatch> DecodeKvEventBatch(std::span<const std::uint8_t> payload) {
  KvEventDecoder decoder;
  KvEventBatch batch;
  KvDecodeStatus s = decoder.Decode(payload, &batch);
  if (!s.ok()) return s.error();
  return batch;
}

std::uint64_t HashFromBytes(std::span<const std::uint8_t> bytes) {
  const std::size_t n = bytes.size() < 8 ? bytes.size() : 8;
  return ReadBigEndian(bytes.data() + bytes.size() - n, n);
}

KvResult<std::uint64_t> DigestOfExtraKey(std::span<const std::uint8_t> msgpack_object) {
  std::uint64_t digest = 0;
  KvDecodeStatus s = Guarded([&] {
    msgpack::zone zone;
    Object root;
    KvDecodeStatus m = Materialise(msgpack_object, &zone, &root);
    if (m.ok()) digest = DigestOf(root);
    return m;
  });
  if (!s.ok()) return s.error();
  return digest;
}

// ---- Framing --------------------------------------------------------------------------

KvResult<std::uint64_t> ParseSeqFrame(Frame frame) {
  if (frame.size() != 8) {
    return KvDecodeError{KvDecodeErrorCode::kBadFrames,
                         "seq frame expected 8 bytes (big-endian uint64), got " +
                             std::to_string(frame.size())};
  }
  return ReadBigEndian(frame.data(), 8);
}

std::array<std::uint8_t, 8> EncodeSeqFrame(std::uint64_t seq) {
  std::array<std::uint8_t, 8> out{};
  for (int i = 7; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(seq & 0xff);
    seq >>= 8;
  }
  return out;
}

namespace {
std::string_view AsText(Frame f) { return {reinterpret_cast<const char*>(f.data()), f.size()}; }
}  // namespace

KvResult<KvMessage> ParseFrames(Frame topic, Frame seq, Frame payload) {
  KvResult<std::uint64_t> s = ParseSeqFrame(seq);
  if (!s.ok()) return s.error();
  return KvMessage{AsText(topic), s.value(), payload};
}

KvResult<KvMessage> ParseFrames(std::span<const Frame> frames) {
  if (frames.size() != 3) {
    return KvDecodeError{KvDecodeErrorCode::kBadFrames,
                         "expected 3 frames [topic, seq, payload], got " + std::to_string(frames.size())};
  }
  return ParseFrames(frames[0], frames[1], frames[2]);
}

KvResult<KvReplayReply> ParseReplayReply(std::span<const Frame> frames) {
  KvReplayReply reply;
  std::size_t first = 0;
  if (frames.size() == 4 && frames[0].empty()) first = 1;  // DEALER delimiter
  const std::size_t count = frames.size() - first;
  if (count != 2 && count != 3) {
    return KvDecodeError{KvDecodeErrorCode::kBadFrames,
                         "replay reply expected [seq, payload] or [topic, seq, payload], got " +
                             std::to_string(frames.size()) + " frames"};
  }
  if (count == 3) {
    reply.topic = AsText(frames[first]);
    reply.has_topic = true;
    ++first;
  }
  KvResult<std::uint64_t> seq = ParseSeqFrame(frames[first]);
  if (!seq.ok()) return seq.error();
  reply.seq = seq.value();
  reply.payload = frames[first + 1];
  reply.end_of_replay = reply.payload.empty() || reply.seq == kReplayEndSeq;
  return reply;
}

}  // namespace kvwatch::collectors
