// msgpack objects as the KV-event decoder reads them (msgpack_object.h): type names for
// error messages, the structural digest (FNV-1a over a typed walk, then mixed) of
// extra_keys entries and of token strings, and re-packing for extra_keys_msgpack.
#include "collectors/msgpack_object.h"

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>

#include "base/mix.h"

namespace kvwatch::collectors::decoder_internal {

// ---- Object helpers ---------------------------------------------------------------

const char* TypeName(const Object& o) {
  switch (o.type) {
    case mtype::NIL:
      return "nil";
    case mtype::BOOLEAN:
      return "bool";
    case mtype::POSITIVE_INTEGER:
      return "uint";
    case mtype::NEGATIVE_INTEGER:
      return "negative int";
    case mtype::FLOAT32:
    case mtype::FLOAT64:
      return "float";
    case mtype::STR:
      return "str";
    case mtype::BIN:
      return "bin";
    case mtype::ARRAY:
      return "array";
    case mtype::MAP:
      return "map";
    case mtype::EXT:
      return "ext";
  }
  return "unknown";
}

// ---- Digests ---------------------------------------------------------------------

namespace {

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
    case mtype::NIL:
      f->Byte('n');
      return;
    case mtype::BOOLEAN:
      f->Byte('b');
      f->Byte(o.via.boolean ? 1 : 0);
      return;
    case mtype::POSITIVE_INTEGER:
      f->Byte('u');
      f->U64(o.via.u64);
      return;
    case mtype::NEGATIVE_INTEGER:
      f->Byte('i');
      f->U64(static_cast<std::uint64_t>(o.via.i64));
      return;
    case mtype::FLOAT32:
    case mtype::FLOAT64: {
      std::uint64_t bits;
      std::memcpy(&bits, &o.via.f64, sizeof bits);
      f->Byte('f');
      f->U64(bits);
      return;
    }
    case mtype::STR:
      f->Byte('s');
      f->U64(o.via.str.size);
      f->Bytes(o.via.str.ptr, o.via.str.size);
      return;
    case mtype::BIN:
      f->Byte('y');
      f->U64(o.via.bin.size);
      f->Bytes(o.via.bin.ptr, o.via.bin.size);
      return;
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

}  // namespace

std::uint64_t DigestOf(const Object& o) {
  if (IsNil(o)) return 0;
  Fnv f;
  DigestInto(o, &f);
  const std::uint64_t d = Mix(f.h);
  return d == 0 ? 1 : d;
}

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

// ---- Re-packing ------------------------------------------------------------------

namespace {

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
    case mtype::NIL:
      pk.pack_nil();
      return;
    case mtype::BOOLEAN:
      if (o.via.boolean)
        pk.pack_true();
      else
        pk.pack_false();
      return;
    case mtype::POSITIVE_INTEGER:
      pk.pack_uint64(o.via.u64);
      return;
    case mtype::NEGATIVE_INTEGER:
      pk.pack_int64(o.via.i64);
      return;
    case mtype::FLOAT32:
      WriteFloat32(sink, static_cast<float>(o.via.f64));
      return;
    case mtype::FLOAT64:
      WriteFloat64(sink, o.via.f64);
      return;
    case mtype::STR:
      pk.pack_str(o.via.str.size);
      pk.pack_str_body(o.via.str.ptr, o.via.str.size);
      return;
    case mtype::BIN:
      pk.pack_bin(o.via.bin.size);
      pk.pack_bin_body(o.via.bin.ptr, o.via.bin.size);
      return;
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

}  // namespace

void AppendPacked(const Object& o, std::string* out) {
  StringSink sink{out};
  msgpack::packer<StringSink> packer(sink);
  PackObject(o, packer, sink);
}

}  // namespace kvwatch::collectors::decoder_internal
