#include "agent/render/text_format.h"

#include <cmath>
#include <cstdio>

namespace kvwatch::agent {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// 1234567 -> "1,234,567"; non-integers keep one decimal.
std::string Grouped(double v) {
  if (!std::isfinite(v)) return "-";
  const bool integral = v == std::floor(v);
  std::string digits = Fixed(std::floor(std::fabs(v)), 0);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  if (!integral) out += Fixed(std::fabs(v) - std::floor(std::fabs(v)), 1).substr(1);
  return v < 0 ? "-" + out : out;
}

std::string Pad(const std::string& s, std::size_t width, bool left) {
  if (s.size() >= width) return s;
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}

std::string FractionLabel(double f) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", f);
  return buf;
}

std::string HumanBytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  if (u == 0) return Fixed(bytes, 0) + " B";
  return Fixed(bytes, bytes < 10 ? 2 : (bytes < 100 ? 1 : 0)) + " " + kUnits[u];
}

std::string GroupedCount(std::uint64_t n) { return Grouped(static_cast<double>(n)); }

std::string Significant4(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

std::string CsvQuote(std::string_view s) {
  if (s.find_first_of(",\"\n") == std::string_view::npos) return std::string(s);
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string EscapeMarkup(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace kvwatch::agent
