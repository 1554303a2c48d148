#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "config/sections.h"

namespace kvwatch::config::internal {

using base::Status;

namespace {

std::string HttpUrlProblem(const std::string& url) {
  return IsHttpUrl(url) ? "" : "expected an http:// or https:// URL, got \"" + url + "\"";
}

// A detector's firing and clearing thresholds: fire > 0, 0 <= clear <= fire.
Status ReadThreshold(const FieldReader& r, const Entry& e, bool fire, double* out) {
  return fire ? r.ReadNumber(e, Positive, "> 0", out) : r.ReadNumber(e, NonNegative, ">= 0", out);
}

Status CheckHysteresis(const FieldReader& r, const Entry& section, double fire, double clear) {
  if (clear <= fire) return Status::Ok();
  const std::string path = section.path + ".clear_threshold";
  return r.Fail(path, r.MarkOf(path, section.mark),
                "expected at most fire_threshold (" + NumberText(fire) + ") for hysteresis, got " + NumberText(clear));
}

// Requests in a window (the detectors keep them as numbers).
Status ReadMinRequests(const FieldReader& r, const Entry& e, double* out) {
  return r.ReadInt(e, 0, std::numeric_limits<std::int64_t>::max(), out);
}

// The keys every detector section has: enabled, fire_threshold, clear_threshold,
// min_requests, for. Returns nullopt for any other key.
template <class Options>
std::optional<Status> ReadCommonDetectorKey(const FieldReader& r, const Entry& e, const std::string& key, Options* a) {
  if (key == "enabled") return r.ReadBool(e, &a->enabled);
  if (key == "fire_threshold") return ReadThreshold(r, e, true, &a->fire_threshold);
  if (key == "clear_threshold") return ReadThreshold(r, e, false, &a->clear_threshold);
  if (key == "min_requests") return ReadMinRequests(r, e, &a->min_short_window_requests);
  if (key == "for") return r.ReadWholeSeconds(e, 0, &a->rule.for_duration);
  return std::nullopt;
}

// A detector's section: the common keys, then `other` for the rest; the hysteresis
// is checked once the section is read.
template <class Options, class Other>
Status ParseDetector(FieldReader& r, const Entry& section, Options* a, Other other) {
  const std::string prefix = section.pattern + ".";
  Status status = r.ForEachKey(section, [&](const Entry& e) -> Status {
    const std::string key = e.pattern.substr(prefix.size());
    if (std::optional<Status> common = ReadCommonDetectorKey(r, e, key, a)) return *common;
    return other(e, key);
  });
  if (!status.ok()) return status;
  return CheckHysteresis(r, section, a->fire_threshold, a->clear_threshold);
}

Status ParseKneeShift(FieldReader& r, const Entry& section, alerts::KneeShiftOptions* a) {
  return ParseDetector(r, section, a, [&](const Entry& e, const std::string& key) -> Status {
    if (key == "min_shift_pages") return r.ReadNumber(e, NonNegative, ">= 0", &a->min_shift_pages);
    if (key == "min_baseline_requests") return ReadMinRequests(r, e, &a->min_baseline_window_requests);
    return r.Unhandled(e);
  });
}

Status ParseOverCapacity(FieldReader& r, const Entry& section, alerts::CapacityShortfallOptions* a) {
  return ParseDetector(r, section, a, [&](const Entry& e, const std::string& key) -> Status {
    if (key == "target") return r.ReadChoice(e, kWorkingSetTargets, &a->working_set.target);
    if (key == "fraction") return r.ReadFraction(e, &a->working_set.fraction);
    return r.Unhandled(e);
  });
}

Status ParseKvLoad(FieldReader& r, const Entry& section, alerts::KvLoadOptions* a) {
  return ParseDetector(r, section, a, [&](const Entry& e, const std::string& key) -> Status {
    if (key == "window") return r.ReadWholeSeconds(e, 1, &a->window);
    return r.Unhandled(e);
  });
}

// A duration > 0 kept in milliseconds (alerts.evaluation_interval, alerts.timeout).
Status ReadMillis(const FieldReader& r, const Entry& e, std::chrono::milliseconds* out) {
  double seconds = 0;
  if (Status s = r.ReadDuration(e, true, &seconds); !s.ok()) return s;
  *out = std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(seconds * 1000)));
  return Status::Ok();
}

// alerts.rate_shift configures the three rate-shift detectors alike; each keeps
// its own rate floor (alerts::RateShiftDefaults).
Status ParseRateShift(FieldReader& r, const Entry& section, alerts::AlerterOptions* a) {
  alerts::RateShiftOptions& read = a->eviction_rate_shift;
  Status status =
      ParseDetector(r, section, &read, [&](const Entry& e, const std::string&) -> Status { return r.Unhandled(e); });
  if (!status.ok()) return status;
  for (alerts::RateShiftOptions* other : {&a->rejection_rate_shift, &a->preemption_rate_shift}) {
    const double floor = other->rate_floor_per_second;
    *other = read;
    other->rate_floor_per_second = floor;
  }
  return Status::Ok();
}

Status ParseDrift(FieldReader& r, const Entry& section, alerts::ChangeTestOptions* a) {
  return ParseDetector(r, section, a, [&](const Entry& e, const std::string& key) -> Status {
    if (key == "relearn_after") return r.ReadWholeSeconds(e, 0, &a->relearn_after);
    return r.Unhandled(e);
  });
}

Status ParseCapacityMissShare(FieldReader& r, const Entry& section, alerts::CapacityMissShareOptions* a) {
  return ParseDetector(r, section, a, [&](const Entry& e, const std::string& key) -> Status {
    if (key == "share_floor") {
      return r.ReadNumber(
          e, [](double v) { return v >= 0 && v <= 1; }, "in [0, 1]", &a->share_floor);
    }
    if (key == "every_capacity") return r.ReadBool(e, &a->every_capacity);
    return r.Unhandled(e);
  });
}

// alerts.resend_interval: a duration > 0, kept as whole seconds rounded up (>= 1s).
Status ReadResendInterval(const FieldReader& r, const Entry& e, std::chrono::seconds* out) {
  double seconds = 0;
  if (Status s = r.ReadDuration(e, true, &seconds); !s.ok()) return s;
  *out = std::chrono::seconds(std::max<std::int64_t>(1, std::llround(std::ceil(seconds))));
  return Status::Ok();
}

}  // namespace

Status ParseAlertsSection(FieldReader& r, const Entry& section, AlertSettings* alerts) {
  alerts::AlerterOptions& a = alerts->alerter;
  return r.ForEachKey(section, [&](const Entry& e) -> Status {
    const std::string& k = e.pattern;
    if (k == "alerts.enabled") return r.ReadBool(e, &alerts->enabled);
    if (k == "alerts.alertmanagers") return r.ReadStringList(e, &alerts->alertmanagers, HttpUrlProblem);
    if (k == "alerts.webhooks") return r.ReadStringList(e, &alerts->webhooks, HttpUrlProblem);
    if (k == "alerts.resend_interval") return ReadResendInterval(r, e, &a.notify.resend_interval);
    if (k == "alerts.evaluation_interval") return ReadMillis(r, e, &a.evaluation_interval);
    if (k == "alerts.timeout") return ReadMillis(r, e, &a.notify.request_timeout);
    if (k == "alerts.short_window") return r.ReadWholeSeconds(e, 1, &a.short_window);
    if (k == "alerts.baseline_window") return r.ReadWholeSeconds(e, 1, &a.baseline_window);
    if (k == "alerts.knee_shift") return ParseKneeShift(r, e, &a.knee_shift);
    if (k == "alerts.over_capacity") return ParseOverCapacity(r, e, &a.capacity_shortfall);
    if (k == "alerts.rate_shift") return ParseRateShift(r, e, &a);
    if (k == "alerts.drift") return ParseDrift(r, e, &a.change_tests.at(0));
    if (k == "alerts.capacity_miss_share") return ParseCapacityMissShare(r, e, &a.capacity_miss_share);
    if (k == "alerts.kv_load") return ParseKvLoad(r, e, &a.kv_load);
    return r.Unhandled(e);
  });
}

Status ResolveAlertWindows(const FieldReader& r, const AgentConfig& c) {
  const std::int64_t short_seconds = c.alerts.alerter.short_window.count();
  const std::int64_t baseline_seconds = c.alerts.alerter.baseline_window.count();
  const std::string shorter = "alerts.short_window", longer = "alerts.baseline_window";
  if (baseline_seconds <= short_seconds) {
    return r.FailAtPath(r.Written(longer) ? longer : shorter,
                        "alerts.baseline_window (" + std::to_string(baseline_seconds) +
                            "s) must be longer than alerts.short_window (" + std::to_string(short_seconds) + "s)");
  }
  for (const auto& [path, seconds] : {std::pair{shorter, short_seconds}, std::pair{longer, baseline_seconds}}) {
    if (!r.Written(path)) continue;
    if (!c.curve.windows.FindSeconds(static_cast<double>(seconds))) {
      return r.FailAtPath(path, "expected one of curve.windows (" + c.curve.windows.NameList() +
                                    "): the knee and the working set are read from that curve");
    }
  }
  const std::string kv_load = "alerts.kv_load.window";
  const auto kv_load_seconds = static_cast<double>(c.alerts.alerter.kv_load.window.count());
  if (r.Written(kv_load) && !c.curve.windows.FindSeconds(kv_load_seconds)) {
    return r.FailAtPath(kv_load, "expected one of curve.windows (" + c.curve.windows.NameList() +
                                     "): the load factor is read from that window");
  }
  return Status::Ok();
}

}  // namespace kvwatch::config::internal
