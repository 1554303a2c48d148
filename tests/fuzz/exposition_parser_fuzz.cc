// libFuzzer target: Prometheus text exposition parsing and engine mapping.
// Invariants: every sample's labels are sorted with unique names, every error
// names a line of the body, and the mapper never matches more samples than exist.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/exposition_parser.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const kvwatch::collectors::Exposition e = kvwatch::collectors::ParseExposition(text);
  std::size_t lines = 0;
  for (char c : text) lines += c == '\n' ? 1 : 0;
  if (!text.empty() && text.back() != '\n') ++lines;
  for (const auto& s : e.samples) {
    Check(s.line >= 1 && s.line <= lines);
    for (std::size_t i = 1; i < s.labels.size(); ++i) Check(s.labels[i - 1].first < s.labels[i].first);
    (void)e.FamilyOf(s.name);
  }
  for (const auto& err : e.errors) Check(err.line >= 1 && err.line <= lines && !err.reason.empty());
  const kvwatch::collectors::EngineSnapshot snap = kvwatch::collectors::MapEngineSnapshot(e);
  Check(snap.matched_samples <= e.samples.size());
  return 0;
}
