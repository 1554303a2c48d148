// libFuzzer target: engine log-line parsing. Each input is parsed whole and
// line by line; records must be self-consistent (HTTP status is three digits,
// fractions and counts come from the line's own text).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

#include "collectors/engine_log_parser.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

void ParseOne(std::string_view line) {
  const auto record = kvwatch::collectors::ParseEngineLogLine(line);
  if (record) {
    if (const auto* http = std::get_if<kvwatch::collectors::HttpAccessRecord>(&*record)) {
      Check(http->status >= 100 && http->status <= 999);
      Check(!http->method.empty());
    }
  }
  (void)kvwatch::collectors::ParseVllmStatsLine(line);
  (void)kvwatch::collectors::ParseVllmV0PreemptionLine(line);
  (void)kvwatch::collectors::ParseSglangPrefillLine(line);
  (void)kvwatch::collectors::ParseSglangDecodeLine(line);
  (void)kvwatch::collectors::ParseSglangRetractLine(line);
  (void)kvwatch::collectors::ParseHttpAccessLine(line);
  (void)kvwatch::collectors::ParseLogLinePrefix(line);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ParseOne(text);
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t nl = text.find('\n', start);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl;
    ParseOne(text.substr(start, end - start));
    start = end + 1;
  }
  return 0;
}
