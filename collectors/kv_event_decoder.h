// KV-event wire decoding: the msgpack payload of one ZMQ message (an EventBatch)
// to a KvEventBatch, the 3-frame PUB framing, and replay replies. (The encoder that
// tests, benchmarks and the fuzzer use is collectors/testing/kv_event_encoder.h.)
// Pure functions over bytes: no sockets, no clocks. Formats follow vLLM's
// vllm/distributed/kv_events.py (events as positional arrays up to v0.23, maps
// with "type" from PR #42892, seen in v0.26.0; the replay reply's topic frame
// from PR #45177, v0.26.0), SGLang's python/sglang/srt/disaggregation/kv_events.py
// (maps from PR #37482) and TensorRT-LLM's
// tensorrt_llm/_torch/pyexecutor/kv_cache_events.py (maps, positional envelope).
//
// Accepted payloads:
//   envelope  positional [ts, events, dp_rank?] (every engine), or defensively a
//             map {ts, events, data_parallel_rank | attn_dp_rank | dp_rank};
//   events    positional ["BlockStored", f1, f2, ...] with any number of trailing
//             fields trimmed (msgspec omit_defaults; vLLM <= v0.23, older SGLang),
//             or maps {"type": "BlockStored", ...} (vLLM >= v0.26, SGLang after
//             #37482, TensorRT-LLM's ZMQ publisher), unknown keys ignored; also
//             TensorRT-LLM's native {"type": "stored"|"removed"|"created"|
//             "updated", ...} shapes, optionally wrapped as {"event_id", "data",
//             "window_size", ...}. An unknown tag gives an UnknownKvEvent.
//   hashes    msgpack unsigned int; negative int (reinterpreted as uint64); bin or
//             str bytes (the last 8 bytes, big-endian; shorter ones left-padded).
//   tokens    ints, decimal strings, or TensorRT-LLM {"token_id": n} maps.
// Malformed input gives a KvDecodeError with a code and a message naming the
// byte offset or the event and field; nothing throws out of this API. A payload
// is validated before it is materialised, so hostile length prefixes cannot make
// the decoder allocate more than a small multiple of the payload size.
//
// Thread safety: the free functions are thread-safe. A KvEventDecoder instance
// must not be used from two threads at once (use one per thread or stream).
#ifndef KVWATCH_COLLECTORS_KV_EVENT_DECODER_H_
#define KVWATCH_COLLECTORS_KV_EVENT_DECODER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/status.h"
#include "collectors/kv_event.h"

namespace kvwatch::collectors {

enum class KvDecodeErrorCode {
  kNotMsgpack,     // empty payload or a byte that starts no msgpack object
  kTruncated,      // the data ends inside an object (or a length exceeds it)
  kTrailingBytes,  // bytes left after the first complete object
  kTooDeep,        // nesting deeper than kMaxMsgpackDepth
  kBadEnvelope,    // not [ts, events, dp_rank?] nor the map form
  kBadEvent,       // an event or one of its fields has the wrong shape
  kBadHash,        // a block hash is not an int or bytes
  kBadFrames,      // wrong frame count, or a seq frame that is not 8 bytes
  kInternal,       // allocation failure or an unexpected library exception
};

// "not_msgpack", "truncated", "trailing_bytes", "too_deep", "bad_envelope",
// "bad_event", "bad_hash", "bad_frames", "internal".
std::string_view KvDecodeErrorCodeName(KvDecodeErrorCode code);

struct KvDecodeError {
  KvDecodeErrorCode code = KvDecodeErrorCode::kInternal;
  std::string message;  // what was expected and where (offset, event index, field)

  // "<code name>: <message>", for logs and for base::Status.
  std::string ToString() const;
};

// Success, or a KvDecodeError. Like base::Status, but the error keeps its
// reason code so callers can count errors by kind; ToStatus() converts.
class [[nodiscard]] KvDecodeStatus {
 public:
  KvDecodeStatus() = default;  // success
  explicit KvDecodeStatus(KvDecodeError error) : error_(std::move(error)) {}

  bool ok() const { return !error_.has_value(); }
  // REQUIRES: !ok() (aborts otherwise, never throws).
  const KvDecodeError& error() const;
  KvDecodeErrorCode code() const { return error().code; }
  const std::string& message() const { return error().message; }
  base::Status ToStatus() const;

 private:
  std::optional<KvDecodeError> error_;
};

// Aborts with the error's text: value() was called on an error KvResult.
[[noreturn]] void KvResultValueOnError(const KvDecodeError& error);
// Aborts: error() was called on an ok KvResult or KvDecodeStatus.
[[noreturn]] void KvResultErrorOnValue();

// A value of type T, or a KvDecodeError (base::Result<T> plus a reason code).
template <typename T>
class [[nodiscard]] KvResult {
 public:
  KvResult(T value) : value_(std::move(value)) {}              // NOLINT: implicit
  KvResult(KvDecodeError error) : error_(std::move(error)) {}  // NOLINT: implicit

  bool ok() const { return value_.has_value(); }
  // REQUIRES: ok() (aborts otherwise, never throws).
  const T& value() const& { return Checked(); }
  T& value() & { return const_cast<T&>(Checked()); }
  T&& value() && { return std::move(const_cast<T&>(Checked())); }
  // REQUIRES: !ok().
  const KvDecodeError& error() const {
    if (ok()) KvResultErrorOnValue();
    return error_;
  }
  KvDecodeStatus status() const { return ok() ? KvDecodeStatus() : KvDecodeStatus(error_); }
  base::Result<T> ToResult() const& {
    if (ok()) return *value_;
    return base::Result<T>::Error(error_.ToString());
  }

 private:
  const T& Checked() const {
    if (!ok()) KvResultValueOnError(error_);
    return *value_;
  }

  std::optional<T> value_;
  KvDecodeError error_;  // meaningful only when !ok()
};

// Deepest msgpack nesting accepted (vLLM's deepest real payload is about 5).
inline constexpr int kMaxMsgpackDepth = 64;

// Reusable decoder: keeps its msgpack arena and reuses the storage of the
// batch it writes into, so a steady stream decodes without allocating.
class KvEventDecoder {
 public:
  KvEventDecoder();
  ~KvEventDecoder();
  KvEventDecoder(const KvEventDecoder&) = delete;
  KvEventDecoder& operator=(const KvEventDecoder&) = delete;

  // Decodes one payload into *batch, overwriting it (its vectors keep their
  // capacity). On error *batch is left in an unspecified but valid state.
  KvDecodeStatus Decode(std::span<const std::uint8_t> payload, KvEventBatch* batch);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One-shot convenience over KvEventDecoder.
KvResult<KvEventBatch> DecodeKvEventBatch(std::span<const std::uint8_t> payload);

// Normalises one hash given as bytes: the last 8 bytes big-endian, shorter
// inputs left-padded with zeros (so an empty input is 0).
std::uint64_t HashFromBytes(std::span<const std::uint8_t> bytes);

// Digest of one extra_keys entry given as a single msgpack object: 0 when the
// entry is nil, else a non-zero stable 64-bit value computed from its structure
// (ints by value whatever their width, floats as float64, str and bin by
// content, arrays and maps element-wise), so equal scopes give equal digests.
KvResult<std::uint64_t> DigestOfExtraKey(std::span<const std::uint8_t> msgpack_object);

// ---- Framing ----------------------------------------------------------------

// kReplayEndSeq is the replay end marker's seq: (-1).to_bytes(8, signed=True).
inline constexpr std::uint64_t kReplayEndSeq = ~std::uint64_t{0};

using Frame = std::span<const std::uint8_t>;

// One PUB message: [topic, seq (8 bytes big-endian), payload]. The views point
// into the frames given.
struct KvMessage {
  std::string_view topic;
  std::uint64_t seq = 0;
  Frame payload;
};

// A topic frame read for its SGLang metadata. SGLang's snapshot-capable
// publisher (python/sglang/srt/disaggregation/kv_events.py, the ZmqEventPublisher
// with a snapshot_endpoint, SNAPSHOT_PROTOCOL_VERSION 1, 2026) appends
// "\0sgl-kv-epoch=<epoch>" to the configured topic of every live batch (the
// epoch: a fresh id per publisher process), and publishes snapshot barriers,
// empty batches that take the next sequence number of the same stream, on
// "<topic>\0sgl-kv-epoch=<epoch>\0sgl-kv-snapshot=<barrier id>". Any other
// topic (vLLM, TensorRT-LLM, older SGLang, llm-d's kv@pod@model) is all base.
struct KvTopic {
  std::string_view base;     // the publisher's identity: the topic without the metadata
  std::string_view live;     // the topic without the barrier suffix (base + epoch marker)
  std::string_view epoch;    // empty: no epoch marker
  std::string_view barrier;  // the barrier id; meaningful when is_barrier
  bool has_epoch = false;
  bool is_barrier = false;
};

// Splits a topic as above. Markers are matched whole; a topic with a NUL that
// starts neither marker is all base.
KvTopic ParseKvTopic(std::string_view topic);

// The topic printable whole, for logs: control bytes (SGLang's NUL separators
// among them), DEL and backslash as \xNN; every other byte as is (UTF-8 stays
// readable). printf's %.*s would stop at the first NUL.
std::string EscapeKvTopic(std::string_view topic);

// Parses an 8-byte big-endian sequence number.
KvResult<std::uint64_t> ParseSeqFrame(Frame frame);
// Inverse of ParseSeqFrame.
std::array<std::uint8_t, 8> EncodeSeqFrame(std::uint64_t seq);

// The three frames of a PUB message.
KvResult<KvMessage> ParseFrames(Frame topic, Frame seq, Frame payload);
// Same, from a received multipart message; exactly 3 frames are required.
KvResult<KvMessage> ParseFrames(std::span<const Frame> frames);

// One reply on the replay socket.
struct KvReplayReply {
  std::string_view topic;  // empty when the reply had no topic frame
  bool has_topic = false;  // the 3-frame (vLLM >= v0.26, TensorRT-LLM) form
  std::uint64_t seq = 0;
  Frame payload;
  bool end_of_replay = false;  // empty payload or seq == kReplayEndSeq
};

// Parses a replay reply as received by the client socket, in either framing:
//   2 frames [seq, payload]               vLLM <= v0.25, SGLang (REQ client)
//   3 frames [topic, seq, payload]        vLLM >= v0.26, TensorRT-LLM (REQ), or
//            ["", seq, payload]           the 2-frame form on a DEALER client
//   4 frames ["", topic, seq, payload]    the 3-frame form on a DEALER client
// A leading empty frame on a 3-frame reply is indistinguishable from an empty
// topic; both read as topic "".
KvResult<KvReplayReply> ParseReplayReply(std::span<const Frame> frames);

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_KV_EVENT_DECODER_H_
