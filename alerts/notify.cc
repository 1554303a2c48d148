#include "alerts/notify.h"

#include <cstdint>
#include <cstdio>

#include "alerts/format.h"
#include "base/json_writer.h"

namespace kvwatch::alerts {

base::Status NotifyOptions::Validate(std::string_view prefix) const {
  const std::string where(prefix);
  if (resend_interval.count() <= 0) {
    return base::Status::Error(where + ".resend_interval: expected a duration > 0, got " +
                               std::to_string(resend_interval.count()) + "s");
  }
  if (resolved_retention < kMinResolvedRetention) {
    return base::Status::Error(where + ".resolved_retention: expected at least 5m " +
                               "(Alertmanager's client contract), got " + FormatDuration(resolved_retention));
  }
  return base::Status::Ok();
}

TimePoint FiringEndsAt(TimePoint now, const NotifyOptions& options) { return now + 4 * options.resend_interval; }

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

std::optional<PostableAlert> DueForSending(TimePoint now, const AlertStatus& alert, const NotifyOptions& options) {
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

void AppendMap(std::string& out, const std::map<std::string, std::string>& map) {
  out += '{';
  bool first = true;
  for (const auto& [key, value] : map) {
    if (!first) out += ',';
    first = false;
    out += base::JsonQuote(key);
    out += ':';
    out += base::JsonQuote(value);
  }
  out += '}';
}

}  // namespace

std::string EncodeAlertmanagerPayload(std::span<const PostableAlert> alerts) {
  std::string out = "[";
  for (std::size_t i = 0; i < alerts.size(); ++i) {
    const PostableAlert& alert = alerts[i];
    if (i > 0) out += ',';
    out += "{\"labels\":";
    AppendMap(out, alert.labels);
    out += ",\"annotations\":";
    AppendMap(out, alert.annotations);
    out += ",\"startsAt\":" + base::JsonQuote(FormatRfc3339(alert.starts_at));
    out += ",\"endsAt\":" + base::JsonQuote(FormatRfc3339(alert.ends_at));
    if (!alert.generator_url.empty()) {
      out += ",\"generatorURL\":" + base::JsonQuote(alert.generator_url);
    }
    out += '}';
  }
  out += ']';
  return out;
}

}  // namespace kvwatch::alerts
