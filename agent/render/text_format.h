// Number formatting shared by the replay and simulate tables, the agent's metric
// labels and the web page's API, and the CSV field quoting: plain functions, no state.
#ifndef KVWATCH_AGENT_RENDER_TEXT_FORMAT_H_
#define KVWATCH_AGENT_RENDER_TEXT_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvwatch::agent {

// Number formatting shared by the tables: fixed digits; 1234567 -> "1,234,567"
// (non-integers keep one decimal); right- (or left-) padded to a width; 0.95 -> "0.95".
std::string Fixed(double v, int digits);
std::string Grouped(double v);
std::string Pad(const std::string& s, std::size_t width, bool left = false);
std::string FractionLabel(double f);
// A count grouped like Grouped: 12031 -> "12,031".
std::string GroupedCount(std::uint64_t n);
// Four significant digits, the shortest form: 0.0001234 -> "0.0001234", 1e6 -> "1e+06".
std::string Significant4(double v);
// A CSV field (RFC 4180): as is, or in double quotes with quotes doubled when it
// holds a comma, a quote or a newline.
std::string CsvQuote(std::string_view s);
// Text for HTML or SVG/XML: & < > " ' escaped.
std::string EscapeMarkup(std::string_view text);

// "1.50 GiB", "512 B": binary units, three significant digits.
std::string HumanBytes(double bytes);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RENDER_TEXT_FORMAT_H_
