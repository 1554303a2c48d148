#include "alerts/format.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

namespace kvwatch::alerts {

std::string FormatNumber(double value, int significant) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Large magnitudes as plain integers rather than "1.235e+04".
  if (std::fabs(value) >= std::pow(10.0, significant) && std::fabs(value) < 1e15) {
    return FormatCount(value);
  }
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::general, significant);
  if (ec != std::errc()) return "NaN";  // cannot happen with 64 bytes
  return std::string(buffer, end);
}

std::string FormatCount(double value) {
  if (!std::isfinite(value)) return FormatNumber(value);
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), std::round(value), std::chars_format::fixed, 0);
  if (ec != std::errc()) return FormatNumber(value);
  std::string text(buffer, end);
  return text == "-0" ? "0" : text;
}

std::string FormatBytes(double bytes) {
  if (!std::isfinite(bytes)) return FormatNumber(bytes);
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double magnitude = std::fabs(bytes);
  std::size_t unit = 0;
  while (magnitude >= 1024.0 && unit + 1 < std::size(kUnits)) {
    magnitude /= 1024.0;
    bytes /= 1024.0;
    ++unit;
  }
  if (unit == 0) return FormatCount(bytes) + " B";
  return FormatNumber(bytes, 3) + " " + kUnits[unit];
}

std::string FormatPercent(double fraction) { return FormatNumber(fraction * 100.0, 3) + "%"; }

std::string FormatDuration(std::chrono::seconds duration) {
  long long total = duration.count();
  if (total == 0) return "0s";
  std::string text = total < 0 ? "-" : "";
  total = total < 0 ? -total : total;
  const long long hours = total / 3600;
  const long long minutes = (total % 3600) / 60;
  const long long seconds = total % 60;
  if (hours > 0) text += std::to_string(hours) + "h";
  if (minutes > 0) text += std::to_string(minutes) + "m";
  if (seconds > 0) text += std::to_string(seconds) + "s";
  return text;
}

std::string FormatRfc3339(TimePoint time) {
  using namespace std::chrono;
  const auto millis = floor<milliseconds>(time);
  const auto day = floor<days>(millis);
  const year_month_day date{day};
  const hh_mm_ss clock{millis - day};
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", static_cast<int>(date.year()),
                static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                static_cast<int>(clock.hours().count()), static_cast<int>(clock.minutes().count()),
                static_cast<int>(clock.seconds().count()), static_cast<int>(clock.subseconds().count()));
  return buffer;
}

}  // namespace kvwatch::alerts
