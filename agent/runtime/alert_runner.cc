#include "agent/runtime/alert_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "alerts/format.h"
#include "base/byte_io.h"
#include "base/json_writer.h"

namespace kvwatch::agent {
namespace {

// The alert runner's metric families.
using base::MetricType;
constexpr base::MetricDef kAlertState{"kvwatch_alert_state", MetricType::kGauge,
                                      "State of the agent's alert: 0 inactive or resolved, 1 pending, 2 firing.", "*"};
constexpr base::MetricDef kAlertValue{
    "kvwatch_alert_value", MetricType::kGauge,
    "The alert's condition value at the last evaluation (relative knee change, working set / capacity, rate ratio "
    "or CUSUM statistic); absent without data.",
    "*"};
constexpr base::MetricDef kAlertEvaluations{"kvwatch_alert_evaluations_total", MetricType::kCounter,
                                            "Evaluations of the alert detectors."};
constexpr base::MetricDef kAlertEvaluationFailures{"kvwatch_alert_evaluation_failures_total", MetricType::kCounter,
                                                   "Evaluations rejected (bad inputs or a clock going back)."};
constexpr base::MetricDef kAlertNotifications{
    "kvwatch_alert_notifications_total", MetricType::kCounter,
    "Notifications by notifier (log: a line per transition; alertmanager, webhook: a POST) and result.",
    "notifier,result"};
constexpr base::MetricDef kAlertNotificationsDropped{
    "kvwatch_alert_notifications_dropped_total", MetricType::kCounter,
    "Alert items a notifier dropped: queue_full (outbox over capacity), expired (a firing item whose endsAt passed "
    "while waiting), rejected (the receiver refused the payload).",
    "notifier,reason"};
constexpr base::MetricDef kAlertQueueLength{"kvwatch_alert_notification_queue_length", MetricType::kGauge,
                                            "Alert items waiting to be delivered.", "notifier"};

void AddTo(std::optional<double>* sum, double value) { *sum = sum->value_or(0) + value; }

// kvwatch_alert_state: 0 inactive (and resolved), 1 pending, 2 firing.
double StateValue(alerts::AlertState state) {
  switch (state) {
    case alerts::AlertState::kPending:
      return 1;
    case alerts::AlertState::kFiring:
      return 2;
    default:
      return 0;
  }
}

Labels MetricLabels(const alerts::Labels& labels) { return Labels(labels.begin(), labels.end()); }

// {name="value",...} as written in a log line.
std::string LabelText(const alerts::Labels& labels) {
  std::string out = "{";
  for (const auto& [name, value] : labels) {
    if (name == "alertname") continue;
    out += (out.size() > 1 ? "," : "") + name + "=" + base::JsonQuote(value);
  }
  return out + "}";
}

void WriteMap(base::JsonWriter& w, const std::map<std::string, std::string>& map) {
  w.BeginObject();
  for (const auto& [k, v] : map) {
    w.Key(k);
    w.String(v);
  }
  w.EndObject();
}

void WriteTime(base::JsonWriter& w, const std::optional<alerts::TimePoint>& time) {
  if (time) {
    w.String(alerts::FormatRfc3339(*time));
  } else {
    w.Null();
  }
}

}  // namespace

base::MetricDefs AlertRunnerMetricDefs() {
  return {&kAlertState,         &kAlertValue,
          &kAlertEvaluations,   &kAlertEvaluationFailures,
          &kAlertNotifications, &kAlertNotificationsDropped,
          &kAlertQueueLength};
}

WindowObservation ObserveWindow(const curve::BucketedCurve& curve, const curve::CurveReport& report,
                                const AlertInputSpec& spec) {
  WindowObservation o;
  o.requests = report.requests;
  if (report.knee) o.knee_pages = static_cast<double>(report.knee->capacity_pages);
  const alerts::WorkingSetSpec& target = spec.working_set;
  const std::optional<std::uint64_t> ws = target.target == alerts::WorkingSetTarget::kPageHit
                                              ? curve.WorkingSetForPageHits(target.fraction)
                                              : curve.WorkingSetForCoverage(target.fraction);
  if (ws) o.working_set_pages = static_cast<double>(*ws);
  return o;
}

alerts::CounterSample SumEngineCounters(std::span<const collectors::EngineSignals> signals) {
  alerts::CounterSample c;
  for (const collectors::EngineSignals& g : signals) {
    for (const collectors::EngineBlockSignals& b : g.blocks) {
      if (b.medium == "GPU") AddTo(&c.evicted_blocks, b.evicted);
    }
    for (const collectors::EngineRejection& r : g.rejections) AddTo(&c.rejected_requests, r.requests);
    if (g.preemptions) AddTo(&c.preemptions, *g.preemptions);
  }
  return c;
}

alerts::AlertInputs MakeAlertInputs(const AlertInputSpec& spec, const AgentObservation& observation,
                                    alerts::TimePoint time) {
  alerts::AlertInputs in;
  in.time = time;
  if (const auto& w = observation.short_window) {
    in.short_knee_pages = w->knee_pages;
    in.working_set_pages = w->working_set_pages;
    in.short_window_requests = static_cast<double>(w->requests);
    in.tracked_pages = observation.tracked_pages_limit;
  }
  if (const auto& w = observation.baseline_window) {
    in.baseline_knee_pages = w->knee_pages;
    in.baseline_window_requests = static_cast<double>(w->requests);
  }
  in.bytes_per_page = observation.bytes_per_page;
  in.capacity_pages = spec.capacity_pages;
  in.working_set_target = spec.working_set.Text();
  in.counters = SumEngineCounters(observation.engine);
  in.capacity_misses = observation.capacity_misses;
  return in;
}

namespace {

std::optional<std::size_t> WindowIndex(const curve::WindowSet& windows, std::chrono::seconds window) {
  return windows.FindSeconds(static_cast<double>(window.count()));
}

}  // namespace

base::Result<AlertRunnerOptions> AlertRunnerOptionsFromConfig(const config::AlertSettings& s,
                                                              const AlertRunnerContext& context,
                                                              std::string_view command) {
  AlertRunnerOptions o;
  // The detectors' options were parsed straight from alerts.* (config/alerts_section.cc).
  o.alerter = s.alerter;
  alerts::AlerterOptions& a = o.alerter;
  a.replica = context.replica;
  a.model = context.model;
  // The CUSUM statistic is capped; a higher alarm threshold raises the cap.
  for (alerts::ChangeTestOptions& test : a.change_tests) {
    test.cusum.cap = std::max(test.cusum.cap, test.fire_threshold);
  }

  o.inputs.short_window = WindowIndex(context.windows, a.short_window);
  o.inputs.baseline_window = WindowIndex(context.windows, a.baseline_window);
  o.inputs.working_set = a.capacity_shortfall.working_set;
  o.inputs.kv_load_window = WindowIndex(context.windows, a.kv_load.window);
  if (!context.capacities.empty()) {
    o.inputs.capacity_pages =
        static_cast<double>(*std::max_element(context.capacities.begin(), context.capacities.end()));
  }

  for (const std::string& url : s.alertmanagers) o.notifier.targets.push_back({NotifierKind::kAlertmanager, url});
  for (const std::string& url : s.webhooks) o.notifier.targets.push_back({NotifierKind::kWebhook, url});

  if (auto valid = a.Validate(); !valid.ok()) {
    return base::Result<AlertRunnerOptions>::Error("alerts: " + valid.error());
  }
  auto note = [command](const std::string& text) {
    std::fprintf(stderr, "%.*s: alerts: %s\n", static_cast<int>(command.size()), command.data(), text.c_str());
  };
  const std::string short_name = alerts::FormatDuration(a.short_window);
  const std::string baseline_name = alerts::FormatDuration(a.baseline_window);
  if (!o.inputs.short_window && (a.knee_shift.enabled || a.capacity_shortfall.enabled)) {
    note("curve.windows has no " + short_name +
         " window (alerts.short_window): the knee-shift and over-capacity "
         "alerts have no data");
  } else if (!o.inputs.baseline_window && a.knee_shift.enabled) {
    note("curve.windows has no " + baseline_name +
         " window (alerts.baseline_window): the knee-shift alert has "
         "no data");
  }
  if (!o.inputs.kv_load_window && a.kv_load.enabled) {
    note("curve.windows has no " + alerts::FormatDuration(a.kv_load.window) +
         " window (alerts.kv_load.window): the KV load alert has no data");
  }
  if (!o.inputs.capacity_pages && a.capacity_shortfall.enabled) {
    note("curve.capacities is empty: the over-capacity alert has no capacity to compare with");
  }
  return o;
}

namespace {

// The notifier's options as Create() gives them to Notifier::Create (the alerter's
// request timeout when none is set).
NotifierOptions EffectiveNotifierOptions(const AlertRunnerOptions& options) {
  NotifierOptions n = options.notifier;
  if (n.timeout.count() == 0) n.timeout = options.alerter.notify.request_timeout;
  return n;
}

}  // namespace

base::Status AlertRunner::ValidateOptions(const AlertRunnerOptions& options) {
  using base::Status;
  if (options.alerter.evaluation_interval.count() <= 0) {
    return Status::Error("alerts.evaluation_interval: expected a duration > 0");
  }
  if (!(options.inputs.working_set.fraction > 0 && options.inputs.working_set.fraction <= 1)) {
    return Status::Error("alerts.over_capacity.fraction: expected a number in (0, 1]");
  }
  auto alerter = alerts::Alerter::Create(options.alerter);
  if (!alerter.ok()) return Status::Error(alerter.error());
  if (!options.notifier.targets.empty()) return Notifier::ValidateOptions(EffectiveNotifierOptions(options));
  return Status::Ok();
}

base::Result<std::unique_ptr<AlertRunner>> AlertRunner::Create(AlertRunnerOptions options) {
  using R = base::Result<std::unique_ptr<AlertRunner>>;
  if (base::Status s = ValidateOptions(options); !s.ok()) return R::Error(s.error());
  auto alerter = alerts::Alerter::Create(options.alerter);
  if (!alerter.ok()) return R::Error(alerter.error());
  const auto start_wall = std::chrono::system_clock::now();
  const auto start_steady = std::chrono::steady_clock::now();
  auto clock_offset = std::make_shared<std::atomic<std::int64_t>>(0);
  options.notifier.timeout = EffectiveNotifierOptions(options).timeout;
  if (!options.notifier.clock) {
    // The notifiers judge expiry on the alerts' own clock.
    options.notifier.clock = [start_wall, start_steady, clock_offset] {
      return start_wall + std::chrono::system_clock::duration(clock_offset->load()) +
             std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::steady_clock::now() -
                                                                             start_steady);
    };
  }
  std::unique_ptr<Notifier> notifier;
  if (!options.notifier.targets.empty()) {
    auto created = Notifier::Create(options.notifier);
    if (!created.ok()) return R::Error(created.error());
    notifier = std::move(created).value();
  }
  return std::unique_ptr<AlertRunner>(new AlertRunner(std::move(options), std::move(alerter).value(),
                                                      std::move(notifier), start_wall, start_steady,
                                                      std::move(clock_offset)));
}

AlertRunner::AlertRunner(AlertRunnerOptions options, alerts::Alerter alerter, std::unique_ptr<Notifier> notifier,
                         std::chrono::system_clock::time_point start_wall,
                         std::chrono::steady_clock::time_point start_steady,
                         std::shared_ptr<std::atomic<std::int64_t>> clock_offset)
    : options_(std::move(options)),
      start_wall_(start_wall),
      start_steady_(start_steady),
      clock_offset_(std::move(clock_offset)),
      notifier_(std::move(notifier)),
      alerter_(std::move(alerter)) {}

AlertRunner::~AlertRunner() { Stop(); }

void AlertRunner::Stop() {
  if (notifier_) notifier_->Stop();
}

alerts::TimePoint AlertRunner::Now() const {
  const auto elapsed = std::chrono::steady_clock::now() - start_steady_;
  return start_wall_ + std::chrono::system_clock::duration(clock_offset_->load()) +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(elapsed);
}

namespace {

// Marks the start of the runner's state ("KVAR"), and its layout version.
constexpr std::uint32_t kStateTag = 0x5241564b;
constexpr std::uint32_t kAlertStateVersion = 1;

}  // namespace

void AlertRunner::AppendState(std::vector<std::uint8_t>* out) const {
  base::MutexLock lock(mu_);
  base::AppendPod(out, kStateTag);
  base::AppendPod(out, kAlertStateVersion);
  base::AppendPod(out, evaluations_);
  base::AppendPod(out, evaluation_errors_);
  base::AppendPod(out, log_lines_);
  alerter_.Serialize(out);
}

bool AlertRunner::RestoreState(std::span<const std::uint8_t> in) {
  std::uint32_t tag = 0, version = 0;
  std::uint64_t evaluations = 0, errors = 0, log_lines = 0;
  if (!base::ReadPod(&in, &tag) || tag != kStateTag || !base::ReadPod(&in, &version) || version != kAlertStateVersion ||
      !base::ReadPod(&in, &evaluations) || !base::ReadPod(&in, &errors) || !base::ReadPod(&in, &log_lines)) {
    return false;
  }
  std::optional<alerts::TimePoint> last;
  {
    base::MutexLock lock(mu_);
    // Alerter::Deserialize changes nothing when it fails, but trailing bytes show
    // only after it succeeded: check the whole on a fresh Alerter first (this
    // runs once, at start).
    auto probe = alerts::Alerter::Create(options_.alerter);
    std::span<const std::uint8_t> at = in;
    if (!probe.ok() || !probe.value().Deserialize(&at) || !at.empty()) return false;
    at = in;
    if (!alerter_.Deserialize(&at)) return false;
    evaluations_ = evaluations;
    evaluation_errors_ = errors;
    log_lines_ = log_lines;
    last = alerter_.last_evaluation();
  }
  // Evaluations earlier than the restored one are refused: a wall clock that
  // stands earlier after the restart must not silence the alerts until it
  // catches up.
  if (last) {
    const alerts::TimePoint now = Now();
    if (*last > now) clock_offset_->fetch_add((*last - now).count());
  }
  return true;
}

base::Status AlertRunner::Evaluate(const alerts::AlertInputs& inputs) {
  std::vector<alerts::AlertEvent> events;
  std::vector<alerts::PostableAlert> due;
  {
    base::MutexLock lock(mu_);
    ++evaluations_;
    auto evaluation = alerter_.Evaluate(inputs);
    if (!evaluation.ok()) {
      ++evaluation_errors_;
      const std::string error = "alerts: evaluation failed: " + evaluation.error();
      if (options_.log) {
        options_.log(error);
      } else {
        std::fprintf(stderr, "kvwatch agent: %s\n", error.c_str());
      }
      return base::Status::Error(error);
    }
    events = std::move(evaluation).value().events;
    due = alerter_.TakeDue(inputs.time);
    log_lines_ += events.size();
  }
  for (const alerts::AlertEvent& event : events) LogEvent(event);
  if (notifier_) notifier_->Enqueue(due, inputs.time);
  return base::Status::Ok();
}

void AlertRunner::LogEvent(const alerts::AlertEvent& event) {
  auto find = [&](const std::map<std::string, std::string>& map, const std::string& key) {
    auto it = map.find(key);
    return it == map.end() ? std::string() : it->second;
  };
  std::string line = "alert " + find(event.labels, "alertname") + LabelText(event.labels) + " " +
                     std::string(alerts::EventName(event.kind));
  const std::string summary = find(event.annotations, "summary");
  if (!summary.empty()) line += ": " + summary;
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "kvwatch agent: %s\n", line.c_str());
  }
}

std::vector<alerts::AlertStatus> AlertRunner::Statuses() const {
  base::MutexLock lock(mu_);
  return alerter_.Statuses();
}

void AlertRunner::AppendMetrics(MetricsBuilder* m) const {
  std::uint64_t evaluations = 0, errors = 0, log_lines = 0;
  std::vector<alerts::AlertStatus> statuses;
  {
    base::MutexLock lock(mu_);
    statuses = alerter_.Statuses();
    evaluations = evaluations_;
    errors = evaluation_errors_;
    log_lines = log_lines_;
  }
  for (const alerts::AlertStatus& s : statuses) m->Add(kAlertState, StateValue(s.state), MetricLabels(s.labels));
  for (const alerts::AlertStatus& s : statuses) {
    if (!std::isnan(s.value)) m->Add(kAlertValue, s.value, MetricLabels(s.labels));
  }
  m->Add(kAlertEvaluations, static_cast<double>(evaluations));
  m->Add(kAlertEvaluationFailures, static_cast<double>(errors));

  // Per notifier kind: the log, then every Alertmanager and webhook summed by kind.
  struct Totals {
    double ok = 0, failed = 0, queue_full = 0, expired = 0, rejected = 0, queued = 0;
  };
  std::map<std::string, Totals> by_kind;
  by_kind["log"].ok = static_cast<double>(log_lines);
  if (notifier_) {
    for (const NotifierStats& s : notifier_->Stats()) {
      Totals& t = by_kind[std::string(NotifierKindName(s.kind))];
      t.ok += static_cast<double>(s.requests_ok);
      t.failed += static_cast<double>(s.requests_failed);
      t.queue_full += static_cast<double>(s.dropped_queue_full);
      t.expired += static_cast<double>(s.dropped_expired);
      t.rejected += static_cast<double>(s.dropped_rejected);
      t.queued += static_cast<double>(s.queued);
    }
  }
  for (const auto& [kind, t] : by_kind) {
    m->Add(kAlertNotifications, t.ok, {{"notifier", kind}, {"result", "success"}});
    m->Add(kAlertNotifications, t.failed, {{"notifier", kind}, {"result", "failure"}});
  }
  for (const auto& [kind, t] : by_kind) {
    if (kind == "log") continue;
    m->Add(kAlertNotificationsDropped, t.queue_full, {{"notifier", kind}, {"reason", "queue_full"}});
    m->Add(kAlertNotificationsDropped, t.expired, {{"notifier", kind}, {"reason", "expired"}});
    m->Add(kAlertNotificationsDropped, t.rejected, {{"notifier", kind}, {"reason", "rejected"}});
  }
  for (const auto& [kind, t] : by_kind) {
    if (kind != "log") m->Add(kAlertQueueLength, t.queued, {{"notifier", kind}});
  }
}

std::string AlertRunner::AlertsJson() const {
  const std::vector<alerts::AlertStatus> statuses = Statuses();
  base::JsonWriter w;
  w.BeginObject();
  w.Key("status");
  w.String("success");
  w.Key("data");
  w.BeginObject();
  w.Key("alerts");
  w.BeginArray();
  for (const alerts::AlertStatus& s : statuses) {
    w.BeginObject();
    w.Key("labels");
    WriteMap(w, s.labels);
    w.Key("annotations");
    WriteMap(w, s.annotations);
    w.Key("state");
    w.String(alerts::StateName(s.state));
    w.Key("activeAt");
    WriteTime(w, s.active_since);
    w.Key("firedAt");
    WriteTime(w, s.fired_at);
    w.Key("resolvedAt");
    WriteTime(w, s.state == alerts::AlertState::kResolved ? s.resolved_at : std::nullopt);
    w.Key("value");
    w.Number(s.value);
    w.Key("observation");
    w.String(alerts::ObservationKindName(s.observation));
    w.Key("reason");
    w.String(s.quiet_reason);
    w.Key("evaluatedAt");
    WriteTime(w, s.evaluated_at == alerts::TimePoint{} ? std::nullopt : std::optional(s.evaluated_at));
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.EndObject();
  return w.Take();
}

}  // namespace kvwatch::agent
