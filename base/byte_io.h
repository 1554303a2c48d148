// Little helpers for the checkpoint encodings: fixed-size values appended to and
// read from byte buffers in host byte order (checkpoints are read back by the same
// build on the same machine; the version header guards format changes).
#ifndef KVWATCH_BASE_BYTE_IO_H_
#define KVWATCH_BASE_BYTE_IO_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kvwatch::base {

template <class T>
void AppendPod(std::vector<std::uint8_t>* out, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out->insert(out->end(), b, b + sizeof(T));
}

// Reads a T from the front of *in and advances it; false when too short.
template <class T>
bool ReadPod(std::span<const std::uint8_t>* in, T* v) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (in->size() < sizeof(T)) return false;
  std::memcpy(v, in->data(), sizeof(T));
  *in = in->subspan(sizeof(T));
  return true;
}

// Reads an element count written with AppendPod<std::uint64_t>; false when too
// short or when `n` elements of at least `min_bytes_each` bytes cannot fit in what
// remains. Check every count with it before allocating, so that a corrupt count
// never makes the reader allocate more than the input's own size.
inline bool ReadCount(std::span<const std::uint8_t>* in, std::uint64_t* n, std::size_t min_bytes_each) {
  if (!ReadPod(in, n)) return false;
  return min_bytes_each == 0 || *n <= in->size() / min_bytes_each;
}

// A string as its length (64 bits) and its bytes.
inline void AppendString(std::vector<std::uint8_t>* out, std::string_view s) {
  AppendPod<std::uint64_t>(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

inline bool ReadString(std::span<const std::uint8_t>* in, std::string* s) {
  std::uint64_t n = 0;
  if (!ReadCount(in, &n, 1)) return false;
  s->assign(reinterpret_cast<const char*>(in->data()), static_cast<std::size_t>(n));
  *in = in->subspan(static_cast<std::size_t>(n));
  return true;
}

}  // namespace kvwatch::base

#endif  // KVWATCH_BASE_BYTE_IO_H_
