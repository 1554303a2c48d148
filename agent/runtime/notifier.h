// Notifier: delivers the alert library's Alertmanager v2 items (alerts/notify.h)
// to HTTP receivers on threads of its own, so that a receiver that is slow or down
// never holds up the agent's event loop, which only calls Enqueue().
//
// Targets. Each target is one Alertmanager (POST <base URL>/api/v2/alerts with the
// postableAlert array, EncodeAlertmanagerPayload) or one generic webhook (POST
// <URL> with the Alertmanager webhook payload, version "4", so that receivers
// written for Alertmanager work unchanged). Every target has its own worker thread
// and outbox; one that is down does not delay the others. Requests use
// cpp-httplib clients with connection, read and write timeouts of `timeout`.
//
// Outbox. Enqueue() merges the items into every target's outbox keyed by the
// alert's label set: a newer item for an alert replaces the older one, because it
// carries the current state and endsAt (an old "firing" item delivered late, after
// its endsAt, would resolve the alert in Alertmanager by mistake). The outbox is
// therefore bounded by the number of distinct alerts; it is also capped at
// queue_capacity items, beyond which the oldest are dropped and counted. A worker
// posts its whole outbox in one request.
//
// Failures. A failed request (no connection, timeout, 5xx, 429) leaves its items
// in the outbox, unless newer ones replaced them meanwhile, and the worker retries
// with exponential backoff from initial_backoff, doubling up to max_backoff; a
// success resets the backoff. Items are dropped and counted when a receiver
// rejects them (another 4xx: resending the same bytes cannot succeed) and when a
// firing item's endsAt passed while it waited (the Alerter re-sends firing alerts
// on its resend interval, so a fresh item follows). Alertmanager's client contract
// is met by the Alerter's re-sends (notify.h); this class adds only the retries.
//
// Thread safety: every public method may be called from any thread. Stop() (also
// run by the destructor) wakes the workers and joins them; a request in flight
// finishes first, bounded by `timeout`.
#ifndef KVWATCH_AGENT_NOTIFIER_H_
#define KVWATCH_AGENT_NOTIFIER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "alerts/alert.h"
#include "alerts/inputs.h"
#include "alerts/notify.h"
#include "base/status.h"

namespace kvwatch::agent {

enum class NotifierKind { kAlertmanager, kWebhook };
// "alertmanager", "webhook": the `notifier` label of the agent's metrics.
std::string_view NotifierKindName(NotifierKind kind);

struct NotifierTarget {
  NotifierKind kind = NotifierKind::kAlertmanager;
  // Alertmanager: its base URL ("http://am:9093", or with a path prefix);
  // webhook: the URL to POST to. http:// or https://.
  std::string url;
};

struct NotifierOptions {
  std::vector<NotifierTarget> targets;
  // Connection, read and write timeout of each request, > 0: required (the alert
  // runner sets alerts.timeout, alerts::NotifyOptions::request_timeout, when 0).
  std::chrono::milliseconds timeout{0};
  // Retry delay after the first failure, doubled after each further one up to
  // max_backoff. Defaults: 1s, 30s.
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{30000};
  // Items an outbox holds at most; beyond, the oldest are dropped. Default: 1000.
  std::size_t queue_capacity = 1000;
  // The webhook payload's "receiver" and "externalURL". Defaults: "kvwatch", "".
  std::string receiver = "kvwatch";
  std::string external_url;
  // The clock that decides whether a firing item has expired (its endsAt passed):
  // the clock of the alerts' times. Default: system_clock::now.
  std::function<alerts::TimePoint()> clock;
};

// Counts of one target since the start.
struct NotifierStats {
  NotifierKind kind = NotifierKind::kAlertmanager;
  std::string url;
  std::uint64_t requests_ok = 0;      // requests answered 2xx
  std::uint64_t requests_failed = 0;  // requests that failed (error, timeout, non-2xx)
  std::uint64_t alerts_sent = 0;      // items delivered
  std::uint64_t dropped_queue_full = 0;
  std::uint64_t dropped_expired = 0;
  std::uint64_t dropped_rejected = 0;
  std::size_t queued = 0;  // items waiting now
  std::string last_error;  // of the last failed request; "" after a success
};

class Notifier {
 public:
  // Validates the URLs and starts one worker per target. Errors name the target:
  // "alerts.alertmanagers: \"x\": expected an http:// or https:// URL".
  static base::Result<std::unique_ptr<Notifier>> Create(NotifierOptions options);
  // The checks of Create() alone, starting nothing (`kvwatch check-config`).
  static base::Status ValidateOptions(const NotifierOptions& options);
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // Hands items to every target (never blocks on I/O). `now` is the time they
  // were taken (Alerter::TakeDue): an item whose endsAt is not after it is a
  // resolution. Ignored after Stop().
  void Enqueue(const std::vector<alerts::PostableAlert>& items, alerts::TimePoint now);

  // Every target's counts, in the order of options.targets.
  std::vector<NotifierStats> Stats() const;
  std::size_t target_count() const { return workers_.size(); }

  // Stops the workers (idempotent). Items not yet delivered are discarded.
  void Stop();

 private:
  struct Worker;

  explicit Notifier(NotifierOptions options);
  void Run(Worker* worker);
  // One POST of the outbox snapshot; true on 2xx. *rejected when a retry cannot help.
  bool Post(const Worker& worker, const std::string& body, bool* rejected, std::string* error);

  const NotifierOptions options_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

// The Alertmanager webhook payload (version "4") of `items` as of `now`: an item
// whose endsAt is not after `now` is "resolved", the others "firing"; the
// top-level status is "firing" when any item is. commonLabels and
// commonAnnotations hold the pairs every item shares; each alert carries its
// Alertmanager fingerprint.
std::string EncodeWebhookPayload(const std::vector<alerts::PostableAlert>& items, alerts::TimePoint now,
                                 std::string_view receiver, std::string_view external_url);

// Alertmanager's fingerprint of a label set (Prometheus' model.LabelSet.Fingerprint:
// FNV-1a 64 over the sorted names and values with 0xff separators), as 16 hex digits.
std::string LabelsFingerprint(const alerts::Labels& labels);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_NOTIFIER_H_
