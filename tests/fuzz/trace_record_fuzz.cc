// libFuzzer target: one JSON Lines trace record (collectors/trace_record.h). Each
// input is parsed whole and line by line, with every timestamp unit, both by
// copy and in place. Invariants: an error has a message; a record's pages are
// what hash_ids held (never more than the line has digits), its token counts
// are -1 or >= 0, and its timestamp is NaN or a number the time-sanity check
// can judge without trapping (collectors/time_sanity.h).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "collectors/time_sanity.h"
#include "collectors/trace_record.h"

namespace {

using kvwatch::collectors::ParseOutcome;
using kvwatch::collectors::TimestampUnit;
using kvwatch::collectors::TraceRecordOptions;
using kvwatch::collectors::TraceRecordParser;

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

void CheckRecord(std::string_view line, const kvwatch::curve::Request& r) {
  Check(r.pages.size() <= line.size());
  Check(r.input_tokens >= -1 && r.output_tokens >= -1);
  if (r.has_timestamp()) {
    (void)kvwatch::collectors::CheckTimestamp(r.timestamp_s, 1.7e9, kvwatch::collectors::kDefaultMaxClockSkewS);
  }
}

void ParseLines(TraceRecordParser& parser, std::string_view text) {
  kvwatch::curve::Request request;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t nl = text.find('\n', start);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl;
    const std::string_view line = text.substr(start, end - start);
    auto parsed = parser.Parse(line, &request);
    if (!parsed.ok()) {
      Check(!parsed.error().empty());
    } else if (parsed.value() == ParseOutcome::kRecord) {
      CheckRecord(line, request);
    }
    // In place, with the padding the parser asks for after the line.
    std::string padded(line);
    padded.append(TraceRecordParser::kPaddingBytes, ' ');
    auto in_place =
        parser.ParseInPlace(std::string_view(padded.data(), line.size()), TraceRecordParser::kPaddingBytes, &request);
    Check(in_place.ok() == parsed.ok());
    if (in_place.ok() && in_place.value() == ParseOutcome::kRecord) CheckRecord(line, request);
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (TimestampUnit unit : {TimestampUnit::kAuto, TimestampUnit::kMilliseconds, TimestampUnit::kSeconds}) {
    TraceRecordOptions options;
    options.timestamp_unit = unit;
    TraceRecordParser parser(options);
    ParseLines(parser, text);
  }
  return 0;
}
