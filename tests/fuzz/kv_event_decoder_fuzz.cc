// libFuzzer target: KV-event payload decoding, framing and re-encoding.
//
// Besides "no crash, no sanitizer report", it checks two invariants:
//   * the reusable decoder and the one-shot function agree on every input;
//   * a decoded batch re-encoded in the array form decodes again, and
//     encoding that result gives the same bytes (the encoder is idempotent).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "collectors/kv_event_decoder.h"
#include "collectors/testing/kv_event_encoder.h"

namespace {

using kvwatch::collectors::DecodeKvEventBatch;
using kvwatch::collectors::EncodeKvEventBatch;
using kvwatch::collectors::Frame;
using kvwatch::collectors::KvEncoding;
using kvwatch::collectors::KvEventBatch;
using kvwatch::collectors::KvEventDecoder;

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

// Splits the input into frames at 0xff 0x00 separators and parses them both
// as a PUB message and as a replay reply.
void FuzzFraming(std::span<const std::uint8_t> data) {
  std::vector<Frame> frames;
  std::size_t start = 0;
  for (std::size_t i = 0; i + 1 < data.size() && frames.size() < 6; ++i) {
    if (data[i] == 0xff && data[i + 1] == 0x00) {
      frames.push_back(data.subspan(start, i - start));
      start = i + 2;
      ++i;
    }
  }
  frames.push_back(data.subspan(start));
  (void)kvwatch::collectors::ParseFrames(frames);
  (void)kvwatch::collectors::ParseReplayReply(frames);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static KvEventDecoder decoder;
  static KvEventBatch reused;
  const std::span<const std::uint8_t> payload(data, size);

  const kvwatch::collectors::KvDecodeStatus status = decoder.Decode(payload, &reused);
  const auto fresh = DecodeKvEventBatch(payload);
  Check(status.ok() == fresh.ok());
  if (!status.ok()) {
    Check(status.code() == fresh.error().code && !status.message().empty());
  } else {
    // Compared through their encodings: a NaN ts is not == to itself.
    const std::vector<std::uint8_t> once = EncodeKvEventBatch(reused, KvEncoding::kArray);
    Check(once == EncodeKvEventBatch(fresh.value(), KvEncoding::kArray));
    Check(EncodeKvEventBatch(reused, KvEncoding::kMap) == EncodeKvEventBatch(fresh.value(), KvEncoding::kMap));
    const auto again = DecodeKvEventBatch(once);
    Check(again.ok());
    Check(EncodeKvEventBatch(again.value(), KvEncoding::kArray) == once);
  }
  (void)kvwatch::collectors::DigestOfExtraKey(payload);
  FuzzFraming(payload);
  return 0;
}
