// KV-event encoder for tests, benchmarks and the fuzzer: the inverse of
// collectors/kv_event_decoder.h, writing a KvEventBatch as the engines' msgspec
// encoders do (both event forms, three hash encodings). Not part of the
// production library: it is the kvwatch_kv_event_encoder target, linked only by
// the tests/, bench/ and tests/fuzz targets that publish synthetic events.
//
// Thread safety: the free functions are thread-safe (no shared state).
#ifndef KVWATCH_COLLECTORS_TESTING_KV_EVENT_ENCODER_H_
#define KVWATCH_COLLECTORS_TESTING_KV_EVENT_ENCODER_H_

#include <cstdint>
#include <vector>

#include "collectors/kv_event.h"

namespace kvwatch::collectors {

enum class KvEncoding {
  kArray,  // events as ["BlockStored", ...] (vLLM <= v0.23, msgspec array_like)
  kMap,    // events as {"type": "BlockStored", ...} (vLLM >= v0.26)
};

enum class KvHashEncoding {
  kUnsigned,  // msgpack uint (vLLM default)
  kSigned,    // msgpack int64, negative above 2^63 (SGLang)
  kBytes,     // 8-byte bin, big-endian (normalises back to the same value)
};

struct KvEncodeOptions {
  KvEncoding encoding = KvEncoding::kMap;
  KvHashEncoding hashes = KvHashEncoding::kUnsigned;
  bool envelope_as_map = false;  // {ts, events, data_parallel_rank}: not seen live
};

// Encodes a batch as vLLM's msgspec encoder does: the envelope positional
// [ts, events, dp_rank] (dp_rank left out when nullopt); BlockStored and
// BlockRemoved with their required fields always written (None as nil) and
// defaulted fields (BlockStored from extra_keys on, BlockRemoved from group_idx
// on) left out when None, trailing ones only in the array form as omit_defaults
// does. extra_keys is written from extra_keys_msgpack verbatim (it must hold one
// msgpack object). cache_salt is written only in the map form (vLLM's array form
// has no such field); cache_level/priority/window_size are not written.
// CacheCreated and BlockUpdated use TensorRT-LLM's map shapes in both forms and
// UnknownKvEvent is written as a bare tag ([tag] or {"type": tag}).
std::vector<std::uint8_t> EncodeKvEventBatch(const KvEventBatch& batch, KvEncoding encoding);
std::vector<std::uint8_t> EncodeKvEventBatch(const KvEventBatch& batch, const KvEncodeOptions& options);

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_TESTING_KV_EVENT_ENCODER_H_
