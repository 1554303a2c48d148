// The Alertmanager API v2 client contract, as pure functions: which alerts are due
// to be (re)sent at a given time, with which startsAt/endsAt, and the JSON body of
// POST /api/v2/alerts. Sending (HTTP, every Alertmanager, bounded queue, backoff) is
// the agent's job; this file decides nothing about I/O.
//
// Contract (operations-conventions.md sections 4.1, 4.2, 9.5; Prometheus'
// needsSending):
//   * pending and inactive alerts are never sent;
//   * a firing alert is due when it was never sent or resend_interval has passed
//     since it was last sent; it carries startsAt = fired_at (stable for the whole
//     firing, so Alertmanager does not re-key it) and endsAt = now +
//     4 * resend_interval, so that it survives three lost sends and then expires
//     by itself if the agent dies;
//   * a resolved alert is due when its resolution was never sent, or
//     resend_interval has passed since the last send; it carries endsAt = resolved_at and is
//     re-sent until resolved_retention (default 15m, at least 5m) has passed since
//     it resolved, in case an Alertmanager restarted meanwhile.
//
// Thread safety: free functions without state.
#ifndef KVWATCH_ALERTS_NOTIFY_H_
#define KVWATCH_ALERTS_NOTIFY_H_

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "alerts/alert.h"
#include "alerts/inputs.h"
#include "base/status.h"

namespace kvwatch::alerts {

// Alertmanager asks clients to keep re-sending resolved alerts for up to 5 minutes.
inline constexpr std::chrono::seconds kMinResolvedRetention{5 * 60};

struct NotifyOptions {
  // Interval between re-sends of a firing or recently resolved alert; keep it at
  // most half of Alertmanager's resolve_timeout (5m). Default: 60s.
  std::chrono::seconds resend_interval{60};
  // How long a resolved alert keeps being re-sent; >= 5m. Default: 15m (Prometheus'
  // resolvedRetention).
  std::chrono::seconds resolved_retention{15 * 60};
  // Connection, read and write timeout of each notification request
  // (alerts.timeout). Sending is the agent's (agent/runtime/notifier.h); > 0.
  // Default: 10s.
  std::chrono::milliseconds request_timeout{10000};
  // generatorURL of every alert (a link back to the agent); empty: omitted. Default: "".
  std::string generator_url;

  base::Status Validate(std::string_view prefix) const;

  bool operator==(const NotifyOptions&) const = default;
};

// One element of the POST /api/v2/alerts body (postableAlert).
struct PostableAlert {
  Labels labels;
  Annotations annotations;
  TimePoint starts_at{};
  TimePoint ends_at{};
  std::string generator_url;  // empty: omitted from the JSON
};

// endsAt of a firing alert sent at `now`: now + 4 * resend_interval.
TimePoint FiringEndsAt(TimePoint now, const NotifyOptions& options);

// The payload item when `alert` is due to be (re)sent at `now`, else std::nullopt.
// Does not record the send: the caller sets alert.last_sent_at = now (and
// resolution_sent when the alert is resolved) when it hands the item to the sender
// (Alerter::TakeDue does this).
std::optional<PostableAlert> DueForSending(TimePoint now, const AlertStatus& alert, const NotifyOptions& options);

// The JSON array of postableAlert objects for POST /api/v2/alerts:
// [{"labels":{...},"annotations":{...},"startsAt":"<RFC 3339>","endsAt":"...",
//   "generatorURL":"..."}]. Keys are sorted; strings are escaped per RFC 8259 and
// invalid UTF-8 is replaced by U+FFFD.
std::string EncodeAlertmanagerPayload(std::span<const PostableAlert> alerts);

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_NOTIFY_H_
