// Little helpers for the checkpoint encodings: fixed-size values appended to and
// read from byte buffers in host byte order (checkpoints are read back by the same
// build on the same machine; the version header guards format changes).
#ifndef KVWATCH_BASE_BYTE_IO_H_
#define KVWATCH_BASE_BYTE_IO_H_

#include <cstdint>
#include <cstring>
#include <span>
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

}  // namespace kvwatch::base

#endif  // KVWATCH_BASE_BYTE_IO_H_
