// Internal to the KV-event decoder (collectors/kv_event_decoder.cc, kv_event_fields.cc,
// msgpack_object.cc); not a public API. A materialised msgpack object as the decoder reads
// it: the typed accessors (inline here: they run per hash and per token), the type names
// its error messages use, the structural digest of extra_keys entries and token strings,
// and re-packing (msgpack_object.cc).
//
// Thread safety: pure functions.
#ifndef KVWATCH_COLLECTORS_MSGPACK_OBJECT_H_
#define KVWATCH_COLLECTORS_MSGPACK_OBJECT_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <msgpack.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "collectors/kv_event_decoder.h"

namespace kvwatch::collectors::decoder_internal {

using Object = msgpack::object;
namespace mtype = msgpack::type;

// "nil", "bool", "uint", "negative int", "float", "str", "bin", "array", "map", "ext".
const char* TypeName(const Object& o);

inline bool IsNil(const Object& o) { return o.type == mtype::NIL; }

inline std::string_view StrOf(const Object& o) { return {o.via.str.ptr, o.via.str.size}; }

inline bool AsInt(const Object& o, std::int64_t* out) {
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

inline bool AsOptInt(const Object& o, std::optional<std::int64_t>* out) {
  if (IsNil(o)) {
    out->reset();
    return true;
  }
  std::int64_t v;
  if (!AsInt(o, &v)) return false;
  *out = v;
  return true;
}

inline bool AsOptStr(const Object& o, std::optional<std::string>* out) {
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

inline bool AsDouble(const Object& o, double* out) {
  switch (o.type) {
    case mtype::FLOAT32:
    case mtype::FLOAT64:
      *out = o.via.f64;
      return true;
    case mtype::POSITIVE_INTEGER:
      *out = static_cast<double>(o.via.u64);
      return true;
    case mtype::NEGATIVE_INTEGER:
      *out = static_cast<double>(o.via.i64);
      return true;
    default:
      return false;
  }
}

inline bool AsHash(const Object& o, std::uint64_t* out) {
  switch (o.type) {
    case mtype::POSITIVE_INTEGER:
      *out = o.via.u64;
      return true;
    case mtype::NEGATIVE_INTEGER:
      *out = static_cast<std::uint64_t>(o.via.i64);
      return true;
    case mtype::BIN:
      *out = HashFromBytes({reinterpret_cast<const std::uint8_t*>(o.via.bin.ptr), o.via.bin.size});
      return true;
    case mtype::STR:
      *out = HashFromBytes({reinterpret_cast<const std::uint8_t*>(o.via.str.ptr), o.via.str.size});
      return true;
    default:
      return false;
  }
}

// Looks a key up in a map (str keys only); nullptr when absent.
inline const Object* MapFind(const Object& map, std::string_view key) {
  for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
    const msgpack::object_kv& kv = map.via.map.ptr[i];
    if (kv.key.type == mtype::STR && StrOf(kv.key) == key) return &kv.val;
  }
  return nullptr;
}

// 0 for nil, else a non-zero digest of the object's structure (DigestOfExtraKey's).
std::uint64_t DigestOf(const Object& o);

// A token given as a string: its decimal value, else a digest of the text.
std::int64_t TokenFromString(std::string_view s);

// Appends o to *out in msgpack's shortest forms, keeping floats as floats, so
// bytes written by msgspec come back unchanged.
void AppendPacked(const Object& o, std::string* out);

}  // namespace kvwatch::collectors::decoder_internal

#endif  // KVWATCH_COLLECTORS_MSGPACK_OBJECT_H_
