// The KV events' ZeroMQ framing (kv_event_decoder.h, "Framing"): the 3-frame PUB
// message, the 8-byte big-endian sequence number, and the replay socket's replies
// in either framing. Views into the frames; no copies.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "collectors/kv_event_decoder.h"
#include "collectors/msgpack_scan.h"

namespace kvwatch::collectors {

KvResult<std::uint64_t> ParseSeqFrame(Frame frame) {
  if (frame.size() != 8) {
    return KvDecodeError{KvDecodeErrorCode::kBadFrames,
                         "seq frame expected 8 bytes (big-endian uint64), got " + std::to_string(frame.size())};
  }
  return decoder_internal::ReadBigEndian(frame.data(), 8);
}

std::array<std::uint8_t, 8> EncodeSeqFrame(std::uint64_t seq) {
  std::array<std::uint8_t, 8> out{};
  for (int i = 7; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(seq & 0xff);
    seq >>= 8;
  }
  return out;
}

namespace {
std::string_view AsText(Frame f) { return {reinterpret_cast<const char*>(f.data()), f.size()}; }
}  // namespace

KvResult<KvMessage> ParseFrames(Frame topic, Frame seq, Frame payload) {
  KvResult<std::uint64_t> s = ParseSeqFrame(seq);
  if (!s.ok()) return s.error();
  return KvMessage{AsText(topic), s.value(), payload};
}

KvResult<KvMessage> ParseFrames(std::span<const Frame> frames) {
  if (frames.size() != 3) {
    return KvDecodeError{KvDecodeErrorCode::kBadFrames,
                         "expected 3 frames [topic, seq, payload], got " + std::to_string(frames.size())};
  }
  return ParseFrames(frames[0], frames[1], frames[2]);
}

namespace {
// SGLang's markers (kv_events.py: _EPOCH_TOPIC_MARKER, _SNAPSHOT_BARRIER_MARKER).
constexpr std::string_view kEpochMarker("\0sgl-kv-epoch=", 14);
constexpr std::string_view kBarrierMarker("\0sgl-kv-snapshot=", 17);
}  // namespace

KvTopic ParseKvTopic(std::string_view topic) {
  KvTopic t;
  t.base = topic;
  t.live = topic;
  const std::size_t epoch_at = topic.find(kEpochMarker);
  if (epoch_at == std::string_view::npos) return t;
  std::string_view rest = topic.substr(epoch_at + kEpochMarker.size());
  const std::size_t barrier_at = rest.find(kBarrierMarker);
  if (barrier_at != std::string_view::npos) {
    t.is_barrier = true;
    t.barrier = rest.substr(barrier_at + kBarrierMarker.size());
    rest = rest.substr(0, barrier_at);
    t.live = topic.substr(0, epoch_at + kEpochMarker.size() + barrier_at);
  }
  t.base = topic.substr(0, epoch_at);
  t.epoch = rest;
  t.has_epoch = true;
  return t;
}

std::string EscapeKvTopic(std::string_view topic) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(topic.size() + 8);
  for (const char c : topic) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f || b == '\\') {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

KvResult<KvReplayReply> ParseReplayReply(std::span<const Frame> frames) {
  KvReplayReply reply;
  std::size_t first = 0;
  if (frames.size() == 4 && frames[0].empty()) first = 1;  // DEALER delimiter
  const std::size_t count = frames.size() - first;
  if (count != 2 && count != 3) {
    return KvDecodeError{KvDecodeErrorCode::kBadFrames,
                         "replay reply expected [seq, payload] or [topic, seq, payload], got " +
                             std::to_string(frames.size()) + " frames"};
  }
  if (count == 3) {
    reply.topic = AsText(frames[first]);
    reply.has_topic = true;
    ++first;
  }
  KvResult<std::uint64_t> seq = ParseSeqFrame(frames[first]);
  if (!seq.ok()) return seq.error();
  reply.seq = seq.value();
  reply.payload = frames[first + 1];
  reply.end_of_replay = reply.payload.empty() || reply.seq == kReplayEndSeq;
  return reply;
}

}  // namespace kvwatch::collectors
