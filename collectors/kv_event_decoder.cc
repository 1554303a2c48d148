// The KV-event decoder's public API (kv_event_decoder.h): the event types' and error
// codes' helpers, KvEventDecoder and the one-shot functions, and the envelope
// ([ts, events, dp_rank?] or its map form). A payload is checked by the structural
// pre-pass (msgpack_scan.cc) before msgpack-cxx materialises it; the events inside
// are decoded by kv_event_fields.cc; the ZeroMQ framing is in kv_event_frames.cc.
#include "collectors/kv_event_decoder.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <msgpack.hpp>
#include <new>
#include <string>
#include <type_traits>

#include "collectors/kv_event_fields.h"
#include "collectors/msgpack_object.h"
#include "collectors/msgpack_scan.h"

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
    case KvEventKind::kBlockStored:
      return "BlockStored";
    case KvEventKind::kBlockRemoved:
      return "BlockRemoved";
    case KvEventKind::kAllBlocksCleared:
      return "AllBlocksCleared";
    case KvEventKind::kCacheCreated:
      return "created";
    case KvEventKind::kBlockUpdated:
      return "updated";
    case KvEventKind::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::string_view KvDecodeErrorCodeName(KvDecodeErrorCode code) {
  switch (code) {
    case KvDecodeErrorCode::kNotMsgpack:
      return "not_msgpack";
    case KvDecodeErrorCode::kTruncated:
      return "truncated";
    case KvDecodeErrorCode::kTrailingBytes:
      return "trailing_bytes";
    case KvDecodeErrorCode::kTooDeep:
      return "too_deep";
    case KvDecodeErrorCode::kBadEnvelope:
      return "bad_envelope";
    case KvDecodeErrorCode::kBadEvent:
      return "bad_event";
    case KvDecodeErrorCode::kBadHash:
      return "bad_hash";
    case KvDecodeErrorCode::kBadFrames:
      return "bad_frames";
    case KvDecodeErrorCode::kInternal:
      return "internal";
  }
  return "internal";
}

std::string KvDecodeError::ToString() const { return std::string(KvDecodeErrorCodeName(code)) + ": " + message; }

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

namespace decoder_internal {
namespace {

KvDecodeStatus ReadTs(const Object& ts, KvEventBatch* batch) {
  if (!AsDouble(ts, &batch->ts)) {
    return Fail(KvDecodeErrorCode::kBadEnvelope, std::string("envelope 'ts' expected a float, got ") + TypeName(ts));
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
  *root = msgpack::unpack(*zone, reinterpret_cast<const char*>(payload.data()), n, ReferenceAll, nullptr, limit);
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
}  // namespace decoder_internal

// ---- Public decoding API ------------------------------------------------------------

struct KvEventDecoder::Impl {
  msgpack::zone zone;
};

KvEventDecoder::KvEventDecoder() : impl_(std::make_unique<Impl>()) {}
KvEventDecoder::~KvEventDecoder() = default;

KvDecodeStatus KvEventDecoder::Decode(std::span<const std::uint8_t> payload, KvEventBatch* batch) {
  return decoder_internal::Guarded([&] {
    decoder_internal::Object root;
    KvDecodeStatus s = decoder_internal::Materialise(payload, &impl_->zone, &root);
    if (!s.ok()) return s;
    return decoder_internal::DecodeEnvelope(root, batch);
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
  return decoder_internal::ReadBigEndian(bytes.data() + bytes.size() - n, n);
}

KvResult<std::uint64_t> DigestOfExtraKey(std::span<const std::uint8_t> msgpack_object) {
  std::uint64_t digest = 0;
  KvDecodeStatus s = decoder_internal::Guarded([&] {
    msgpack::zone zone;
    decoder_internal::Object root;
    KvDecodeStatus m = decoder_internal::Materialise(msgpack_object, &zone, &root);
    if (m.ok()) digest = decoder_internal::DigestOf(root);
    return m;
  });
  if (!s.ok()) return s.error();
  return digest;
}

}  // namespace kvwatch::collectors
