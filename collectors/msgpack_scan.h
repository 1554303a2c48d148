// Internal to the KV-event decoder (collectors/kv_event_decoder.cc, kv_event_fields.cc,
// kv_event_frames.cc, msgpack_scan.cc, msgpack_object.cc); not a public API. The structural
// pre-pass over msgpack bytes (msgpack_scan.cc), which every payload passes before it is
// materialised, and the small helpers all of the decoder's files share. Needs no msgpack
// header (msgpack_object.h is the part that does).
//
// Thread safety: pure functions.
#ifndef KVWATCH_COLLECTORS_MSGPACK_SCAN_H_
#define KVWATCH_COLLECTORS_MSGPACK_SCAN_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "collectors/kv_event_decoder.h"

namespace kvwatch::collectors::decoder_internal {

inline KvDecodeStatus Fail(KvDecodeErrorCode code, std::string message) {
  return KvDecodeStatus(KvDecodeError{code, std::move(message)});
}

inline std::uint64_t ReadBigEndian(const std::uint8_t* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

inline std::string At(std::size_t offset) { return " at byte offset " + std::to_string(offset); }

// Walks the msgpack bytes without materialising anything and checks that they
// hold exactly one complete object, nested at most kMaxMsgpackDepth deep, where
// no container declares more elements than bytes remain (see msgpack_scan.cc).
// On success *end is the offset just past the first complete object.
KvDecodeStatus ScanMsgpack(std::span<const std::uint8_t> data, std::size_t* end);

}  // namespace kvwatch::collectors::decoder_internal

#endif  // KVWATCH_COLLECTORS_MSGPACK_SCAN_H_
