#include "alerts/alerter.h"

#include <array>
#include <cctype>
#include <set>
#include <utility>

#include "alerts/checkpoint.h"
#include "alerts/format.h"
#include "alerts/thresholds.h"

namespace kvwatch::alerts {
namespace {

constexpr std::array<CounterKind, kCounterKinds> kAllCounters = {
    CounterKind::kEvictedBlocks, CounterKind::kRejectedRequests, CounterKind::kPreemptions, CounterKind::kRequests};

const std::set<std::string>& ReservedLabels() {
  static const std::set<std::string> kReserved = {"alertname", "window", "severity", "replica", "model"};
  return kReserved;
}

bool IsLabelName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return name.rfind("__", 0) != 0;
}

base::Status ValidateExtraLabels(const Labels& labels) {
  for (const auto& [name, value] : labels) {
    const std::string where = "extra_labels." + name;
    if (!IsLabelName(name)) {
      return base::Status::Error(where +
                                 ": expected a label name matching "
                                 "[a-zA-Z_][a-zA-Z0-9_]* and not starting with \"__\"");
    }
    if (ReservedLabels().count(name) > 0) {
      return base::Status::Error(where + ": the label is set by the alerter itself");
    }
    if (value.empty()) {
      return base::Status::Error(where + ": expected a non-empty value");
    }
  }
  return base::Status::Ok();
}

base::Status ValidateWindows(const AlerterOptions& options) {
  if (options.short_window.count() <= 0) {
    return base::Status::Error("short_window: expected a duration > 0, got " + FormatDuration(options.short_window));
  }
  if (options.baseline_window <= options.short_window) {
    return base::Status::Error("baseline_window: expected a duration longer than short_window (" +
                               FormatDuration(options.short_window) + "), got " +
                               FormatDuration(options.baseline_window));
  }
  return base::Status::Ok();
}

base::Status ValidateChangeTests(const std::vector<ChangeTestOptions>& tests) {
  std::set<CounterKind> seen;
  for (std::size_t i = 0; i < tests.size(); ++i) {
    const std::string where = "change_tests[" + std::to_string(i) + "]";
    if (auto status = tests[i].Validate(where); !status.ok()) return status;
    if (tests[i].enabled && !seen.insert(tests[i].counter).second) {
      return base::Status::Error(where + ".counter: a second enabled change test on " +
                                 std::string(CounterName(tests[i].counter)) + " would give two alerts the same labels");
    }
  }
  return base::Status::Ok();
}

// Each sample's capacity_pages > 0 and its cumulative `value` >= 0; the error
// names the field ("inputs.capacity_misses.evicted_by[2].pages").
template <typename Sample>
base::Status ValidateSamples(const std::string& field, const std::vector<Sample>& samples, double Sample::*value,
                             const char* value_name) {
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const std::string where = field + "[" + std::to_string(i) + "].";
    if (auto status = FirstError({ValidatePositive(where + "capacity_pages", samples[i].capacity_pages),
                                  ValidateNonNegative(where + value_name, samples[i].*value)});
        !status.ok()) {
      return status;
    }
  }
  return base::Status::Ok();
}

}  // namespace

base::Status AlerterOptions::Validate() const {
  return FirstError({
      ValidateExtraLabels(extra_labels),
      ValidateWindows(*this),
      knee_shift.Validate("knee_shift"),
      capacity_shortfall.Validate("capacity_shortfall"),
      eviction_rate_shift.Validate("eviction_rate_shift"),
      rejection_rate_shift.Validate("rejection_rate_shift"),
      preemption_rate_shift.Validate("preemption_rate_shift"),
      capacity_miss_share.Validate("capacity_miss_share"),
      ValidateChangeTests(change_tests),
      kv_load.Validate("kv_load"),
      notify.Validate("notify"),
  });
}

base::Status ValidateInputs(const AlertInputs& inputs) {
  const auto check = [](const char* field, const std::optional<double>& value) {
    if (!value) return base::Status::Ok();
    return ValidateNonNegative(std::string("inputs.") + field, *value);
  };
  const CapacityMissInputs& misses = inputs.capacity_misses;
  if (auto status = ValidateSamples("inputs.capacity_misses.capacity_misses", misses.capacity_misses,
                                    &CapacityMissSample::misses, "misses");
      !status.ok()) {
    return status;
  }
  if (auto status =
          ValidateSamples("inputs.capacity_misses.evicted_by", misses.evicted_by, &EvictedBySample::pages, "pages");
      !status.ok()) {
    return status;
  }
  return FirstError({
      check("capacity_misses.page_references", misses.page_references),
      check("short_knee_pages", inputs.short_knee_pages),
      check("baseline_knee_pages", inputs.baseline_knee_pages),
      check("bytes_per_page", inputs.bytes_per_page),
      check("working_set_pages", inputs.working_set_pages),
      check("tracked_pages", inputs.tracked_pages),
      check("capacity_pages", inputs.capacity_pages),
      check("short_window_requests", inputs.short_window_requests),
      check("baseline_window_requests", inputs.baseline_window_requests),
      check("counters.evicted_blocks", inputs.counters.evicted_blocks),
      check("counters.rejected_requests", inputs.counters.rejected_requests),
      check("counters.preemptions", inputs.counters.preemptions),
      check("counters.requests", inputs.counters.requests),
      check("kv_load.load_factor", inputs.kv_load ? std::optional(inputs.kv_load->load_factor) : std::nullopt),
      check("kv_load.sized_requests", inputs.kv_load ? std::optional(inputs.kv_load->sized_requests) : std::nullopt),
  });
}

base::Result<Alerter> Alerter::Create(AlerterOptions options) {
  if (auto status = options.Validate(); !status.ok()) {
    return base::Result<Alerter>::Error("alert options: " + status.error());
  }
  return Alerter(std::move(options));
}

Alerter::Alerter(AlerterOptions options) : options_(std::move(options)) {
  const std::string short_name = FormatDuration(options_.short_window);
  const std::string baseline_name = FormatDuration(options_.baseline_window);
  if (options_.knee_shift.enabled) {
    AddDetector(std::make_unique<KneeShiftDetector>(options_.knee_shift, short_name, baseline_name),
                options_.knee_shift.rule);
  }
  if (options_.capacity_shortfall.enabled) {
    AddDetector(std::make_unique<CapacityShortfallDetector>(options_.capacity_shortfall, short_name),
                options_.capacity_shortfall.rule);
  }
  const std::pair<CounterKind, const RateShiftOptions*> rate_shifts[] = {
      {CounterKind::kEvictedBlocks, &options_.eviction_rate_shift},
      {CounterKind::kRejectedRequests, &options_.rejection_rate_shift},
      {CounterKind::kPreemptions, &options_.preemption_rate_shift},
  };
  for (const auto& [counter, rate_options] : rate_shifts) {
    if (!rate_options->enabled) continue;
    AddDetector(std::make_unique<RateShiftDetector>(counter, *rate_options, short_name, baseline_name),
                rate_options->rule);
  }
  // Anchors every short_window / 360 (10 s for 1h): window edges are exact to 0.3%.
  const auto spacing = std::chrono::duration_cast<TimePoint::duration>(options_.short_window) / 360;
  if (options_.capacity_miss_share.enabled) {
    AddDetector(std::make_unique<CapacityMissShareDetector>(options_.capacity_miss_share, options_.short_window,
                                                            options_.baseline_window, spacing),
                options_.capacity_miss_share.rule);
  }
  for (const ChangeTestOptions& test : options_.change_tests) {
    if (test.enabled) AddDetector(std::make_unique<ChangeTestDetector>(test), test.rule);
  }
  if (options_.kv_load.enabled) AddDetector(std::make_unique<KvLoadDetector>(options_.kv_load), options_.kv_load.rule);
  for (std::size_t i = 0; i < kCounterKinds; ++i) {
    counters_.emplace_back(options_.baseline_window, spacing);
  }
}

void Alerter::AddDetector(std::unique_ptr<Detector> detector, const RuleOptions& rule) {
  Labels labels = options_.extra_labels;
  labels["alertname"] = std::string(detector->AlertName());
  labels["window"] = std::string(detector->Window());
  labels["severity"] = rule.severity;
  if (!options_.replica.empty()) labels["replica"] = options_.replica;
  if (!options_.model.empty()) labels["model"] = options_.model;
  AlertStatus status;
  status.labels = std::move(labels);
  entries_.push_back(Entry{std::move(detector), Rule(rule), std::move(status)});
}

base::Result<Evaluation> Alerter::Evaluate(const AlertInputs& inputs) {
  if (last_time_ && inputs.time < *last_time_) {
    return base::Result<Evaluation>::Error("inputs.time: expected a time not earlier than the previous evaluation (" +
                                           FormatRfc3339(*last_time_) + "), got " + FormatRfc3339(inputs.time));
  }
  if (auto status = ValidateInputs(inputs); !status.ok()) {
    return base::Result<Evaluation>::Error(status.error());
  }
  last_time_ = inputs.time;
  const DerivedCounters counters = ObserveCounters(inputs);
  const DetectorInput input{inputs, counters};
  Evaluation evaluation;
  for (Entry& entry : entries_) {
    if (auto event = Step(entry, inputs.time, input)) evaluation.events.push_back(*event);
    evaluation.alerts.push_back(entry.status);
  }
  return evaluation;
}

DerivedCounters Alerter::ObserveCounters(const AlertInputs& inputs) {
  DerivedCounters derived;
  for (CounterKind kind : kAllCounters) {
    CounterHistory& history = counters_[static_cast<std::size_t>(kind)];
    if (auto value = CounterValue(inputs.counters, kind)) history.Observe(inputs.time, *value);
    CounterWindows& windows = derived[kind];
    windows.latest_time = history.latest_time();
    if (!windows.latest_time) continue;
    windows.corrected_total = history.corrected_total();
    windows.resets = history.resets();
    windows.short_window = history.IncreaseOver(inputs.time, options_.short_window);
    windows.baseline_window = history.IncreaseOver(inputs.time, options_.baseline_window);
  }
  return derived;
}

std::optional<AlertEvent> Alerter::Step(Entry& entry, TimePoint now, const DetectorInput& input) {
  const Observation observation = entry.detector->Evaluate(input);
  const AlertState before = entry.rule.state();
  const std::optional<EventKind> event = entry.rule.Step(now, observation);

  AlertStatus& status = entry.status;
  const bool new_instance = (before == AlertState::kInactive || before == AlertState::kResolved) &&
                            (entry.rule.state() == AlertState::kPending || entry.rule.state() == AlertState::kFiring);
  if (new_instance) {
    status.last_sent_at.reset();
    status.resolution_sent = false;
  }
  status.state = entry.rule.state();
  status.observation = observation.kind;
  status.quiet_reason = observation.reason;
  status.value = observation.kind == ObservationKind::kValid ? observation.value : std::nan("");
  if (observation.kind == ObservationKind::kValid) status.annotations = observation.annotations;
  status.active_since = entry.rule.active_since();
  status.fired_at = entry.rule.fired_at();
  status.resolved_at = entry.rule.resolved_at();
  status.evaluated_at = now;
  if (!event) return std::nullopt;
  return AlertEvent{*event, now, status.labels, status.annotations, status.value};
}

std::vector<PostableAlert> Alerter::TakeDue(TimePoint now) {
  std::vector<PostableAlert> due;
  for (Entry& entry : entries_) {
    std::optional<PostableAlert> item = DueForSending(now, entry.status, options_.notify);
    if (!item) continue;
    entry.status.last_sent_at = now;
    if (entry.status.state == AlertState::kResolved) entry.status.resolution_sent = true;
    due.push_back(std::move(*item));
  }
  return due;
}

std::vector<AlertStatus> Alerter::Statuses() const {
  std::vector<AlertStatus> statuses;
  statuses.reserve(entries_.size());
  for (const Entry& entry : entries_) statuses.push_back(entry.status);
  return statuses;
}

namespace {

// Marks the start of an Alerter checkpoint ("KVAL"), and its layout version.
constexpr std::uint32_t kCheckpointTag = 0x4c41564b;
constexpr std::uint32_t kCheckpointVersion = 1;

// The status but its labels (written first, as the alert's identity) and its
// state (the rule's).
void AppendStatus(std::vector<std::uint8_t>* out, const AlertStatus& s) {
  checkpoint::AppendStringMap(out, s.annotations);
  base::AppendPod<std::uint8_t>(out, static_cast<std::uint8_t>(s.observation));
  base::AppendString(out, s.quiet_reason);
  base::AppendPod(out, s.value);
  checkpoint::AppendOptionalTime(out, s.active_since);
  checkpoint::AppendOptionalTime(out, s.fired_at);
  checkpoint::AppendOptionalTime(out, s.resolved_at);
  checkpoint::AppendOptionalTime(out, s.last_sent_at);
  base::AppendPod<std::uint8_t>(out, s.resolution_sent ? 1 : 0);
  checkpoint::AppendTime(out, s.evaluated_at);
}

bool ReadStatus(std::span<const std::uint8_t>* in, AlertStatus* s) {
  std::uint8_t observation = 0, resolution_sent = 0;
  if (!checkpoint::ReadStringMap(in, &s->annotations) || !base::ReadPod(in, &observation) ||
      observation > static_cast<std::uint8_t>(ObservationKind::kValid) || !base::ReadString(in, &s->quiet_reason) ||
      !base::ReadPod(in, &s->value) || !checkpoint::ReadOptionalTime(in, &s->active_since) ||
      !checkpoint::ReadOptionalTime(in, &s->fired_at) || !checkpoint::ReadOptionalTime(in, &s->resolved_at) ||
      !checkpoint::ReadOptionalTime(in, &s->last_sent_at) || !base::ReadPod(in, &resolution_sent) ||
      resolution_sent > 1 || !checkpoint::ReadTime(in, &s->evaluated_at)) {
    return false;
  }
  s->observation = static_cast<ObservationKind>(observation);
  s->resolution_sent = resolution_sent != 0;
  return true;
}

}  // namespace

void Alerter::Serialize(std::vector<std::uint8_t>* out) const {
  base::AppendPod(out, kCheckpointTag);
  base::AppendPod(out, kCheckpointVersion);
  checkpoint::AppendOptionalTime(out, last_time_);
  base::AppendPod<std::uint64_t>(out, counters_.size());
  for (const CounterHistory& history : counters_) history.Serialize(out);
  base::AppendPod<std::uint64_t>(out, entries_.size());
  for (const Entry& entry : entries_) {
    checkpoint::AppendStringMap(out, entry.status.labels);
    entry.rule.Serialize(out);
    AppendStatus(out, entry.status);
    checkpoint::AppendBlob(out, [&](std::vector<std::uint8_t>* o) { entry.detector->Serialize(o); });
  }
}

bool Alerter::Deserialize(std::span<const std::uint8_t>* in) {
  // Restored into a fresh Alerter of the same options, swapped in on success.
  Alerter fresh(options_);
  std::span<const std::uint8_t> at = *in;
  std::uint32_t tag = 0, version = 0;
  std::uint64_t n = 0;
  if (!base::ReadPod(&at, &tag) || tag != kCheckpointTag || !base::ReadPod(&at, &version) ||
      version != kCheckpointVersion || !checkpoint::ReadOptionalTime(&at, &fresh.last_time_) ||
      !base::ReadPod(&at, &n) || n != fresh.counters_.size()) {
    return false;
  }
  for (CounterHistory& history : fresh.counters_) {
    if (!history.Deserialize(&at)) return false;
  }
  if (!base::ReadPod(&at, &n) || n != fresh.entries_.size()) return false;
  for (Entry& entry : fresh.entries_) {
    Labels labels;
    if (!checkpoint::ReadStringMap(&at, &labels) || labels != entry.status.labels || !entry.rule.Deserialize(&at) ||
        !ReadStatus(&at, &entry.status) || !checkpoint::ReadBlob(&at, [&](std::span<const std::uint8_t>* blob) {
          return entry.detector->Deserialize(blob);
        })) {
      return false;
    }
    entry.status.state = entry.rule.state();
  }
  entries_ = std::move(fresh.entries_);
  counters_ = std::move(fresh.counters_);
  last_time_ = fresh.last_time_;
  *in = at;
  return true;
}

}  // namespace kvwatch::alerts
