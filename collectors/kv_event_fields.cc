// The KV events' fields in each engine's shape (kv_event_fields.h): vLLM's positional
// and map BlockStored/BlockRemoved (with SGLang's metadata in position 7), and
// TensorRT-LLM's native stored/created/updated events, bare or wrapped. Each event
// is decoded into the slot of the batch that already holds one, reusing its storage.
#include "collectors/kv_event_fields.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "collectors/msgpack_scan.h"

namespace kvwatch::collectors::decoder_internal {

namespace {

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
    Field::kIgnored,   Field::kBlockHashes, Field::kParent,    Field::kTokenIds,
    Field::kBlockSize, Field::kLoraId,      Field::kMedium,    Field::kLoraNameOrMetadata,
    Field::kExtraKeys, Field::kGroupIdx,    Field::kSpecKind,  Field::kSlidingWindow,
    Field::kLocality,  Field::kOwnership,   Field::kSessionId,
};

// Positional layout of BlockRemoved.
constexpr Field kRemovedPositions[] = {
    Field::kIgnored, Field::kBlockHashes, Field::kMedium, Field::kGroupIdx, Field::kLocality, Field::kOwnership,
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

KvDecodeStatus FieldError(const EventCtx& c, std::string_view field, std::string_view expected, const Object& got) {
  return Fail(KvDecodeErrorCode::kBadEvent, Where(c) + ": field '" + std::string(field) + "' expected " +
                                                std::string(expected) + ", got " + TypeName(got));
}

KvDecodeStatus ReadHashes(const Object& o, const EventCtx& c, std::string_view field, std::vector<std::uint64_t>* out) {
  if (o.type != mtype::ARRAY) return FieldError(c, field, "an array of hashes", o);
  out->reserve(out->size() + o.via.array.size);
  for (std::uint32_t i = 0; i < o.via.array.size; ++i) {
    std::uint64_t h;
    if (!AsHash(o.via.array.ptr[i], &h)) {
      return Fail(KvDecodeErrorCode::kBadHash, Where(c) + ": " + std::string(field) + "[" + std::to_string(i) +
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
    return Fail(KvDecodeErrorCode::kBadHash,
                Where(c) + ": " + std::string(field) + " expected an int, bytes or nil, got " + TypeName(o));
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

KvDecodeStatus ReadTokens(const Object& o, const EventCtx& c, std::string_view field, std::vector<std::int64_t>* out) {
  if (IsNil(o)) return KvDecodeStatus();
  if (o.type != mtype::ARRAY) return FieldError(c, field, "an array of tokens", o);
  out->reserve(out->size() + o.via.array.size);
  for (std::uint32_t i = 0; i < o.via.array.size; ++i) {
    std::int64_t t;
    if (!ReadToken(o.via.array.ptr[i], &t)) {
      return Fail(KvDecodeErrorCode::kBadEvent, Where(c) + ": " + std::string(field) + "[" + std::to_string(i) +
                                                    "] expected an int or str token, got " +
                                                    TypeName(o.via.array.ptr[i]));
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
  AppendPacked(o, &ev->extra_keys_msgpack);
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

KvDecodeStatus SetIntField(const Object& v, const EventCtx& c, Field f, std::optional<std::int64_t>* out) {
  if (!AsOptInt(v, out)) return FieldError(c, FieldName(f), "an int or nil", v);
  return KvDecodeStatus();
}

KvDecodeStatus SetStrField(const Object& v, const EventCtx& c, Field f, std::optional<std::string>* out) {
  if (!AsOptStr(v, out)) return FieldError(c, FieldName(f), "a str or nil", v);
  return KvDecodeStatus();
}

KvDecodeStatus SetStoredField(Field f, const Object& v, const EventCtx& c, BlockStored* ev) {
  switch (f) {
    case Field::kIgnored:
      return KvDecodeStatus();
    case Field::kBlockHashes:
      return ReadHashes(v, c, "block_hashes", &ev->block_hashes);
    case Field::kParent:
      return ReadOptHash(v, c, "parent_block_hash", &ev->parent_block_hash);
    case Field::kTokenIds:
      return ReadTokens(v, c, "token_ids", &ev->token_ids);
    case Field::kBlockSize: {
      std::optional<std::int64_t> size;
      if (!AsOptInt(v, &size)) return FieldError(c, "block_size", "an int", v);
      ev->block_size = size.value_or(0);
      return KvDecodeStatus();
    }
    case Field::kLoraId:
      return SetIntField(v, c, f, &ev->lora_id);
    case Field::kMedium:
      return SetStrField(v, c, f, &ev->medium);
    case Field::kLoraName:
      return SetStrField(v, c, f, &ev->lora_name);
    case Field::kLoraNameOrMetadata:
      if (v.type == mtype::MAP || v.type == mtype::ARRAY) return ReadMetadata(v, c, ev);
      return SetStrField(v, c, Field::kLoraName, &ev->lora_name);
    case Field::kMetadata:
      return ReadMetadata(v, c, ev);
    case Field::kExtraKeys:
      return ReadExtraKeys(v, c, ev);
    case Field::kGroupIdx:
      return SetIntField(v, c, f, &ev->group_idx);
    case Field::kSpecKind:
      return SetStrField(v, c, f, &ev->kv_cache_spec_kind);
    case Field::kSlidingWindow:
      return SetIntField(v, c, f, &ev->kv_cache_spec_sliding_window);
    case Field::kLocality:
      return SetStrField(v, c, f, &ev->locality);
    case Field::kOwnership:
      return SetStrField(v, c, f, &ev->ownership);
    case Field::kSessionId:
      return SetStrField(v, c, f, &ev->session_id);
    case Field::kCacheSalt:
      return SetStrField(v, c, f, &ev->cache_salt);
  }
  return KvDecodeStatus();
}

KvDecodeStatus SetRemovedField(Field f, const Object& v, const EventCtx& c, BlockRemoved* ev) {
  switch (f) {
    case Field::kBlockHashes:
      return ReadHashes(v, c, "block_hashes", &ev->block_hashes);
    case Field::kMedium:
      return SetStrField(v, c, f, &ev->medium);
    case Field::kGroupIdx:
      return SetIntField(v, c, f, &ev->group_idx);
    case Field::kLocality:
      return SetStrField(v, c, f, &ev->locality);
    case Field::kOwnership:
      return SetStrField(v, c, f, &ev->ownership);
    default:
      return KvDecodeStatus();  // fields of BlockStored only, or unknown
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
KvDecodeStatus FromArray(const Object& o, const EventCtx& c, const Field (&positions)[N], Setter set, T* ev) {
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
    return blocks == nullptr ? Fail(KvDecodeErrorCode::kBadEvent, Where(c) + ": required field 'blocks' is missing")
                             : FieldError(c, "blocks", "an array", *blocks);
  }
  for (std::uint32_t i = 0; i < blocks->via.array.size; ++i) {
    const Object& b = blocks->via.array.ptr[i];
    if (b.type != mtype::MAP) return FieldError(c, "blocks[]", "a map", b);
    const Object* hash = MapFind(b, "block_hash");
    std::uint64_t h;
    if (hash == nullptr || !AsHash(*hash, &h)) {
      return Fail(KvDecodeErrorCode::kBadHash,
                  Where(c) + ": blocks[" + std::to_string(i) + "].block_hash missing or not an int or bytes");
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
  KvDecodeStatus s = ReadDiff(MapFind(o, "cache_level"), c, "cache_level", &ev->cache_level_old, &ev->cache_level_new);
  if (!s.ok()) return s;
  return ReadDiff(MapFind(o, "priority"), c, "priority", &ev->priority_old, &ev->priority_new);
}

void SetUnknown(std::string_view tag, KvEvent* slot) { Reuse<UnknownKvEvent>(slot).tag.assign(tag); }

KvDecodeStatus DecodeArrayEvent(const Object& o, std::size_t index, KvEvent* slot) {
  if (o.via.array.size == 0 || o.via.array.ptr[0].type != mtype::STR) {
    const char* got = o.via.array.size == 0 ? "an empty array" : TypeName(o.via.array.ptr[0]);
    return Fail(KvDecodeErrorCode::kBadEvent,
                "event " + std::to_string(index) + ": expected a str tag at position 0, got " + got);
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
    return Fail(KvDecodeErrorCode::kBadEvent, "event " + std::to_string(index) + ": map event without a 'type' key");
  }
  if (type->type != mtype::STR) {
    return Fail(KvDecodeErrorCode::kBadEvent,
                "event " + std::to_string(index) + ": 'type' expected a str, got " + TypeName(*type));
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
  return Fail(KvDecodeErrorCode::kBadEvent,
              "event " + std::to_string(index) + ": expected an array or a map, got " + TypeName(o));
}

}  // namespace

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

}  // namespace kvwatch::collectors::decoder_internal
