#include "alerts/notify.h"

#include <cstdint>
#include <cstdio>

#include "alerts/format.h"

namespace kvwatch::alerts {

base::Status NotifyOptions::Validate(std::string_view prefix) const {
  const std::string where(prefix);
  if (resend_interval.count() <= 0) {
    return base::Status::Error(where + ".resend_interval: expected a duration > 0, got " +
                                std::to_string(resend_interval.count()) + "s");
  }
  if (resolved_retention < kMinResolvedRetention) {
    return base::Status::Error(where + ".resolved_retention: expected at least 5m " +
                                "(Alertmanager's client contract), got " +
                                FormatDuration(resolved_retention));
  }
  return base::Status::Ok();
}

TimePoint FiringEndsAt(TimePoint now, const NotifyOptions& options) {
  return now + 4 * options.resend_interval;
}

namespace {

bool ResendIntervalPassed(TimePoint now, const AlertStatus& alert, const NotifyOptions& options) {
  return !alert.last_sent_at || now - *alert.last_sent_at >= options.resend_interval;
}

PostableAlert Item(const AlertStatus& alert, TimePoint ends_at, const NotifyOptions& options) {
  PostableAlert item;
  item.labels = alert.labels;
  item.annotations = alert.annotations;
  item.starts_at = *alert.fired_at;
  item.ends_at = ends_at;
  item.generator_url = options.generator_url;
  return item;
}

}  // namespace

std::optional<PostableAlert> DueForSending(TimePoint now, const AlertStatus& alert,
                                           const NotifyOptions& options) {
  if (!alert.fired_at) return std::nullopt;
  if (alert.state == AlertState::kFiring) {
    if (!ResendIntervalPassed(now, alert, options)) return std::nullopt;
    return Item(alert, FiringEndsAt(now, options), options);
  }
  if (alert.state == AlertState::kResolved && alert.resolved_at) {
    if (now - *alert.resolved_at > options.resolved_retention) return std::nullopt;
    if (alert.resolution_sent && !ResendIntervalPassed(now, alert, options)) return std::nullopt;
    return Item(alert, *alert.resolved_at, options);
  }
  return std::nullopt;
}

namespace {

// Length of the valid UTF-8 sequence at text[i], or 0 when it is invalid.
std::size_t Utf8SequenceLength(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  std::size_t length = 0;
  std::uint32_t code = 0;
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) { length = 2; code = lead & 0x1F; }
  else if ((lead & 0xF0) == 0xE0) { length = 3; code = lead & 0x0F; }
  else if ((lead & 0xF8) == 0xF0) { length = 4; code = lead & 0x07; }
  else return 0;
  if (i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr std::uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kMinForLength[length]) return 0;           // overlong encoding
  if (code > 0x10FFFF) return 0;                        // beyond Unicode
  if (code >= 0xD800 && code <= 0xDFFF) return 0;       // UTF-16 surrogate
  return length;
}

void AppendEscaped(std::string& out, unsigned char c) {
  switch (c) {
    case '"': out += "\\\""; return;
    case '\\': out += "\\\\"; return;
    case '\b': out += "\\b"; return;
    case '\f': out += "\\f"; return;
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    default: break;
  }
  if (c < 0x20) {
    char buffer[8];
    std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
    out += buffer;
    return;
  }
  out += static_cast<char>(c);
}

void AppendMap(std::string& out, const std::map<std::string, std::string>& map) {
  out += '{';
  bool first = true;
  for (const auto& [key, value] : map) {
    if (!first) out += ',';
    first = false;
    out += JsonQuote(key);
    out += ':';
    out += JsonQuote(value);
  }
  out += '}';
}

}  // namespace

std::string JsonQuote(std::string_view text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD for one invalid byte
      ++i;
    } else if (length == 1) {
      AppendEscaped(out, static_cast<unsigned char>(text[i]));
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  out += '"';
  return out;
}

std::string EncodeAlertmanagerPayload(std::span<const PostableAlert> alerts) {
  std::string out = "[";
  for (std::size_t i = 0; i < alerts.size(); ++i) {
    const PostableAlert& alert = alerts[i];
    if (i > 0) out += ',';
    out += "{\"labels\":";
    AppendMap(out, alert.labels);
    out += ",\"annotations\":";
    AppendMap(out, alert.annotations);
    out += ",\"startsAt\":" + JsonQuote(FormatRfc3339(alert.starts_at));
    out += ",\"endsAt\":" + JsonQuote(FormatRfc3339(alert.ends_at));
    if (!alert.generator_url.empty()) {
      out += ",\"generatorURL\":" + JsonQuote(alert.generator_url);
    }
    out += '}';
  }
  out += ']';
  return out;
}

}  // namespace kvwatch::alerts
