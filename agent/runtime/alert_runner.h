// AlertRunner: the live agent's alerting. It owns the pure alerts::Alerter (the
// detectors, their life cycles and the Alertmanager re-send schedule), evaluates
// it on what the agent observed, writes one stderr line per transition (the log
// notifier), hands the items due to be (re)sent to the Notifier (Alertmanagers and
// webhooks, on threads of their own), and renders the alerts as metrics and as the
// JSON of /api/v1/alerts.
//
// Inputs. The agent turns a snapshot of its state into an AgentObservation (the
// requests, knee and working set of the two alert windows, the collectors' engine
// signals); MakeAlertInputs() turns that into alerts::AlertInputs. Engine
// counters are the sums over the collectors' typed signals
// (collectors/engine_signals.h) of the GPU evicted blocks, the rejected requests
// (every reason) and the preemptions; a counter no collector knows is absent, and
// the detectors that need it stay quiet.
//
// Time. Evaluations carry the runner's clock (Now()): the wall time at creation
// plus the steady time since, so it never goes backwards and startsAt/endsAt are
// real times Alertmanager understands.
//
// Restarts. AppendState/RestoreState carry the alert state across a restart (the
// agent's one state file): every alert's life cycle and status, the detectors'
// histories, and what was already handed to the notifiers (each alert's
// last_sent_at and resolution_sent), plus the runner's counters. So after a
// restart a firing alert stays firing with its startsAt, the log notifier does not
// print its transition again, and it is re-sent to Alertmanager on the normal
// schedule (resend_interval after the last send recorded), not at once; a
// resolution is re-sent until resolved_retention has passed. Items that were
// queued but not delivered when the process died are lost with the notifier's
// queue; the re-send schedule covers them (a firing item's endsAt is 4 resend
// intervals ahead, so Alertmanager keeps the alert until the next send). If the
// wall clock stands earlier than the restored last evaluation, Now() is moved
// forward to it (evaluations earlier than the last one are refused), and the
// notifiers' default clock with it.
//
// Thread safety: Evaluate() is called by one thread (the agent's loop); Now(),
// AppendMetrics(), AlertsJson() and Stop() may be called from any thread.
#ifndef KVWATCH_AGENT_ALERT_RUNNER_H_
#define KVWATCH_AGENT_ALERT_RUNNER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/runtime/metrics.h"
#include "agent/runtime/notifier.h"
#include "alerts/alerter.h"
#include "base/metric_def.h"
#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "collectors/collector.h"
#include "config/agent_config.h"
#include "curve/bucketed_curve.h"
#include "curve/report.h"

namespace kvwatch::agent {

// Which curves feed the detectors and what the working set means.
struct AlertInputSpec {
  // Indices into the agent's windows of the short and the baseline window;
  // nullopt when the window is not a curve window (knee and working set: no data).
  std::optional<std::size_t> short_window;
  std::optional<std::size_t> baseline_window;
  // The working set the over-capacity detector compares (its options':
  // alerter.capacity_shortfall.working_set).
  alerts::WorkingSetSpec working_set;
  // The replica's KV-cache capacity in pages; nullopt: unknown (no data).
  std::optional<double> capacity_pages;
  // Index of the KV load alert's window (alerter.kv_load.window) among the curve
  // windows; nullopt: not a curve window (no data).
  std::optional<std::size_t> kv_load_window;
};

struct AlertRunnerOptions {
  alerts::AlerterOptions alerter;
  AlertInputSpec inputs;
  // How often the agent evaluates: alerter.evaluation_interval.
  // Where notifications go (timeout and backoff are in here too). An unset (0)
  // notifier.timeout is set to alerter.notify.request_timeout (alerts.timeout), an
  // unset notifier.clock to the runner's clock (Now()).
  NotifierOptions notifier;
  // The log notifier's sink, one line per transition; empty: stderr with the
  // agent's "kvwatch agent: " prefix.
  std::function<void(const std::string&)> log;
};

// One window as the detectors see it.
struct WindowObservation {
  std::uint64_t requests = 0;
  std::optional<double> knee_pages;
  // At the spec's target; nullopt when not reached within the tracked range.
  std::optional<double> working_set_pages;
};

// What the agent observed for one evaluation.
struct AgentObservation {
  std::optional<WindowObservation> short_window;  // nullopt: no such curve window
  std::optional<WindowObservation> baseline_window;
  double tracked_pages_limit = 0;  // engine.max_pages: the range M of the working set
  std::optional<double> bytes_per_page;
  std::vector<collectors::EngineSignals> engine;  // per collector
  // kvwatch's own capacity-miss counters and evictor matrix (agent/runtime/group_metrics.h).
  alerts::CapacityMissInputs capacity_misses;
};

// The window's requests, knee (of `report`) and working set at the spec's target
// (read off `curve`, the curve `report` was built from).
WindowObservation ObserveWindow(const curve::BucketedCurve& curve, const curve::CurveReport& report,
                                const AlertInputSpec& spec);

// The engine counters of the collectors' signals (sums; absent when no collector
// knows them).
alerts::CounterSample SumEngineCounters(std::span<const collectors::EngineSignals> signals);

// The detectors' inputs at `time`.
alerts::AlertInputs MakeAlertInputs(const AlertInputSpec& spec, const AgentObservation& observation,
                                    alerts::TimePoint time);

// What the runner's options take from the rest of the agent's resolved options.
struct AlertRunnerContext {
  std::string replica;                    // the "replica" label
  std::string model;                      // the "model" label: model_label, else the model's name; may be empty
  curve::WindowSet windows;               // the agent's curve windows (curve.windows)
  std::vector<std::uint64_t> capacities;  // the replica's cache sizes; the largest is the capacity
};

// The runner's options from the config's alerts section (its detectors already
// parsed into alerts::AlerterOptions) and the agent's context: the alert windows
// are looked up among context.window_seconds, the capacity is the largest of
// context.capacities. Writes a note to stderr, prefixed by the command's name,
// when an alert window is not a curve window or there is no capacity (those
// detectors then have no data). Errors name the key.
base::Result<AlertRunnerOptions> AlertRunnerOptionsFromConfig(const config::AlertSettings& alerts,
                                                              const AlertRunnerContext& context,
                                                              std::string_view command = "kvwatch agent");

class AlertRunner {
 public:
  // Validates the options (errors name the field) and starts the notifiers.
  static base::Result<std::unique_ptr<AlertRunner>> Create(AlertRunnerOptions options);
  // The checks of Create() alone, starting nothing (`kvwatch check-config`).
  static base::Status ValidateOptions(const AlertRunnerOptions& options);
  ~AlertRunner();
  AlertRunner(const AlertRunner&) = delete;
  AlertRunner& operator=(const AlertRunner&) = delete;

  // The alert clock (see the file comment).
  alerts::TimePoint Now() const;

  // Evaluates the detectors on `inputs`, logs the transitions and enqueues the
  // items due at inputs.time. Errors (logged too): inputs.time earlier than the
  // previous evaluation's, invalid numbers.
  base::Status Evaluate(const alerts::AlertInputs& inputs);

  // kvwatch_alert_* metrics: state and value per alert, evaluations, and per
  // notifier the notifications by result, the drops by reason and the queue.
  void AppendMetrics(MetricsBuilder* metrics) const;
  // {"status":"success","data":{"alerts":[{labels, annotations, state, activeAt, ...}]}}
  // with every configured alert, in a fixed order.
  std::string AlertsJson() const;
  std::vector<alerts::AlertStatus> Statuses() const;

  // Stops the notifiers (idempotent).
  void Stop();

  // The runner's part of the agent's state file (appends): its counters
  // (evaluations, failures, log lines) and the Alerter's checkpoint
  // (alerts::Alerter::Serialize). Takes the runner's lock: callable from any thread.
  void AppendState(std::vector<std::uint8_t>* out) const;
  // Restores what AppendState wrote; false (nothing changes) when the bytes are
  // truncated, malformed, or of another set of alerts (Alerter::Deserialize).
  // Call it before the first Evaluate; it consumes exactly `in`.
  bool RestoreState(std::span<const std::uint8_t> in);

  const AlertRunnerOptions& options() const { return options_; }

 private:
  AlertRunner(AlertRunnerOptions options, alerts::Alerter alerter, std::unique_ptr<Notifier> notifier,
              std::chrono::system_clock::time_point start_wall, std::chrono::steady_clock::time_point start_steady,
              std::shared_ptr<std::atomic<std::int64_t>> clock_offset);
  void LogEvent(const alerts::AlertEvent& event);

  const AlertRunnerOptions options_;
  const std::chrono::system_clock::time_point start_wall_;
  const std::chrono::steady_clock::time_point start_steady_;
  // Added to Now() (system_clock ticks, >= 0): set by RestoreState when the wall
  // clock stands earlier than the restored last evaluation. Shared with the
  // notifiers' default clock.
  const std::shared_ptr<std::atomic<std::int64_t>> clock_offset_;
  std::unique_ptr<Notifier> notifier_;  // null without targets

  mutable base::Mutex mu_;
  alerts::Alerter alerter_ GUARDED_BY(mu_);
  std::uint64_t evaluations_ GUARDED_BY(mu_) = 0;
  std::uint64_t evaluation_errors_ GUARDED_BY(mu_) = 0;
  std::uint64_t log_lines_ GUARDED_BY(mu_) = 0;
};

// The alert runner's metric families (AppendMetrics), for the metrics reference.
base::MetricDefs AlertRunnerMetricDefs();

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_ALERT_RUNNER_H_
