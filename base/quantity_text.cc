#include "base/quantity_text.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace kvwatch::base {

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The NUMBER at the start of *text (removed from it); nullopt when there is none.
std::optional<double> TakeNumber(std::string_view* text) {
  if (text->empty() || !(IsDigit(text->front()) || text->front() == '.')) return std::nullopt;
  double value = 0;
  const char* end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, value, std::chars_format::general);
  if (ec != std::errc() || !std::isfinite(value)) return std::nullopt;
  text->remove_prefix(static_cast<std::size_t>(ptr - text->data()));
  return value;
}

// The size units, their factors as exact integers.
constexpr std::pair<std::string_view, std::uint64_t> kSizeUnits[] = {
    {"B", 1},     {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30},   {"TiB", 1ull << 40},
    {"KB", 1000}, {"MB", 1000000},     {"GB", 1000000000},  {"TB", 1000000000000},
};

// The factor of the unit that text is (after one optional space), or nullopt.
std::optional<std::uint64_t> SizeFactor(std::string_view unit) {
  if (unit.empty()) return 1;
  if (unit.front() == ' ') {
    unit.remove_prefix(1);
    if (unit.empty()) return std::nullopt;
  }
  for (const auto& [name, factor] : kSizeUnits) {
    if (name == unit) return factor;
  }
  return std::nullopt;
}

}  // namespace

std::optional<double> ParseDuration(std::string_view text, Bare bare) {
  std::string_view rest = text;
  double total = 0;
  bool first = true;
  while (first || !rest.empty()) {
    std::optional<double> number = TakeNumber(&rest);
    if (!number) return std::nullopt;
    double unit = 0;
    if (rest.empty()) {
      if (!first || bare == Bare::kRefused) return std::nullopt;  // "1h30": a term without a unit
      unit = 1;
    } else if (rest.substr(0, 2) == "us" || rest.substr(0, 2) == "ms") {
      unit = rest.front() == 'u' ? 1e-6 : 1e-3;
      rest.remove_prefix(2);
    } else {
      switch (rest.front()) {
        case 's':
          unit = 1;
          break;
        case 'm':
          unit = 60;
          break;
        case 'h':
          unit = 3600;
          break;
        case 'd':
          unit = 86400;
          break;
        default:
          return std::nullopt;
      }
      rest.remove_prefix(1);
    }
    total += *number * unit;
    first = false;
  }
  if (!std::isfinite(total)) return std::nullopt;
  return total;
}

std::optional<double> ParseSize(std::string_view text) {
  std::string_view rest = text;
  std::optional<double> number = TakeNumber(&rest);
  if (!number) return std::nullopt;
  std::optional<std::uint64_t> factor = SizeFactor(rest);
  if (!factor) return std::nullopt;
  const double bytes = *number * static_cast<double>(*factor);
  if (!std::isfinite(bytes)) return std::nullopt;
  return bytes;
}

std::optional<std::uint64_t> ParseWholeSize(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && IsDigit(text[digits])) ++digits;
  std::optional<std::uint64_t> factor = digits > 0 ? SizeFactor(text.substr(digits)) : std::nullopt;
  if (factor) {
    // An integer NUMBER: exact, with the overflow seen.
    std::uint64_t number = 0, bytes = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, number);
    if (ec != std::errc() || __builtin_mul_overflow(number, *factor, &bytes)) return std::nullopt;
    return bytes;
  }
  std::optional<double> bytes = ParseSize(text);
  // Below 2^64 (a double that rounds up to 2^64 is refused) and whole.
  if (!bytes || !(*bytes < 18446744073709551616.0) || *bytes != std::floor(*bytes)) return std::nullopt;
  return static_cast<std::uint64_t>(*bytes);
}

base::Result<double> DurationFlag(std::string_view text) {
  if (std::optional<double> v = ParseDuration(text, Bare::kSeconds)) return *v;
  return base::Result<double>::Error("expected " + std::string(kDurationExamples) + ", or seconds, got '" +
                                     std::string(text) + "'");
}

base::Result<double> SizeFlag(std::string_view text) {
  if (std::optional<double> v = ParseSize(text)) return *v;
  return base::Result<double>::Error("expected " + std::string(kSizeExamples) + ", got '" + std::string(text) + "'");
}

}  // namespace kvwatch::base
