// The KV-event decoder's structural pre-pass (msgpack_scan.h): one walk over the
// msgpack bytes, before msgpack-cxx materialises anything, that bounds what the
// materialisation may allocate.
#include "collectors/msgpack_scan.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace kvwatch::collectors::decoder_internal {

namespace {

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
  std::uint8_t fixed = 0;         // kFixed: total size
  std::uint8_t len_bytes = 0;     // kSized/kContainer: width of the length field (0: in the byte)
  std::uint8_t extra = 0;         // kSized: header bytes after the length (ext type)
  std::uint8_t per_count = 1;     // kContainer: 2 for maps
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
  t[0xc4] = sized(1, 0);
  t[0xc5] = sized(2, 0);
  t[0xc6] = sized(4, 0);  // bin
  t[0xc7] = sized(1, 1);
  t[0xc8] = sized(2, 1);
  t[0xc9] = sized(4, 1);  // ext
  t[0xca] = fixed(5);
  t[0xcb] = fixed(9);  // float
  t[0xcc] = t[0xd0] = fixed(2);
  t[0xcd] = t[0xd1] = fixed(3);  // ints
  t[0xce] = t[0xd2] = fixed(5);
  t[0xcf] = t[0xd3] = fixed(9);
  t[0xd4] = fixed(3);
  t[0xd5] = fixed(4);
  t[0xd6] = fixed(6);  // fixext
  t[0xd7] = fixed(10);
  t[0xd8] = fixed(18);
  t[0xd9] = sized(1, 0);
  t[0xda] = sized(2, 0);
  t[0xdb] = sized(4, 0);  // str
  t[0xdc] = container(2, 1, 0);
  t[0xdd] = container(4, 1, 0);  // array
  t[0xde] = container(2, 2, 0);
  t[0xdf] = container(4, 2, 0);  // map
  return t;
}

constexpr std::array<ByteInfo, 256> kByteTable = MakeByteTable();

std::string HexByte(std::uint8_t b) {
  const char* digits = "0123456789abcdef";
  return std::string{'0', 'x', digits[b >> 4], digits[b & 15]};
}

}  // namespace

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
        return Fail(KvDecodeErrorCode::kTruncated, "object" + At(pos) + " needs " + std::to_string(info.fixed) +
                                                       " bytes but only " + std::to_string(avail) + " remain");
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
          return Fail(KvDecodeErrorCode::kTruncated, "object" + At(start) + " declares " + std::to_string(count) +
                                                         " bytes but only " + std::to_string(n - pos) + " remain");
        }
        pos += static_cast<std::size_t>(count);
      } else if (count > 0) {
        const std::uint64_t children = count * info.per_count;
        const std::size_t left = n - pos;
        if (pending > left || children > left - pending) {
          return Fail(KvDecodeErrorCode::kTruncated, "container" + At(start) + " declares " + std::to_string(children) +
                                                         " element(s) but only " + std::to_string(left) +
                                                         " byte(s) remain");
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

}  // namespace kvwatch::collectors::decoder_internal
