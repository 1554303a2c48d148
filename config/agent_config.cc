#include "config/agent_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "curve/policy.h"
#include "curve/policy_replay.h"
#include "curve/sizing.h"

namespace kvwatch::config {
namespace {

using base::Result;
using base::Status;

using Type = ConfigType;

// The single source of truth: every key the parser accepts, with its type, its
// default and its meaning. Parents come before their children.
constexpr ConfigKey kKeys[] = {
    {"replica", Type::kString, R"("")", true,
     "Label of this replica on metrics and alerts (`replica=\"...\"`)."},
    {"model_label", Type::kString, R"("")", true, "Model label on alerts."},
    {"model", Type::kString, R"("")", true,
     "A built-in model preset such as `llama-3-70b` (an unknown name's error lists them), "
     "to turn pages into bytes. At most one of `model`, `model_config` and "
     "`bytes_per_token`; with none of them, sizes are in pages only."},
    {"model_config", Type::kString, R"("")", true,
     "Path of the model's Hugging Face `config.json`, read at start-up."},
    {"bytes_per_token", Type::kSize, "unset", false,
     "KV-cache bytes per token on one GPU rank, used as is (`kv_dtype` and "
     "`tensor_parallel` do not apply)."},
    {"kv_dtype", Type::kString, R"("")", true,
     "KV-cache element type overriding the model's (`fp16`, `bf16`, `fp8`, `fp32`, ...); "
     "with `model` or `model_config` only."},
    {"tensor_parallel", Type::kInt, "1", true,
     "Tensor-parallel ranks the KV heads are split over, >= 1; other than 1 only with "
     "`model` or `model_config`."},
    {"page_tokens", Type::kInt, "16", true,
     "Tokens per KV-cache page (the engine's block size), >= 1."},

    {"engine", Type::kMap, "{}", true, "The stack-distance engine."},
    {"engine.max_pages", Type::kInt, "1048576", true,
     "Distinct pages tracked, 1 to 2147483648: the largest capacity of interest. Curves are "
     "exact up to it; memory grows with it."},
    {"engine.touch_order", Type::kString, R"("tail-first")", true,
     "Order in which a request's pages are referenced after their distances are read: "
     "`tail-first` (the prefix's head becomes most recent) or `head-first`."},
    {"engine.coverage_share", Type::kNumber, "1.0", true,
     "Share of a request's reusable prefix, in (0, 1], that must hit for the request to "
     "count as covered."},
    {"engine.remembered_evictions", Type::kInt, "`engine.max_pages`", false,
     "Pages evicted from tracking that are remembered, so that their reuse counts as beyond "
     "tracked rather than cold; 0 means unlimited (memory grows with every distinct page)."},

    {"engine.sample_rate", Type::kNumber, "1.0", true,
     "Spatial sampling rate in (0, 1] (SHARDS): only pages whose hashed id falls in this share "
     "go through the engine, whose distances and counts are scaled back by 1 / rate (with the "
     "SHARDS-adj correction). 1 is exact. Memory shrinks by about the rate."},
    {"engine.sample_max_pages", Type::kInt, "0", true,
     "Fixed-size sampling: when > 0, the rate adapts down from `engine.sample_rate` so that at "
     "most this many sampled pages are kept (SHARDS fixed-size); memory then stays flat however "
     "many distinct pages arrive. 0 turns it off. The rate is exported as "
     "`kvwatch_engine_sample_rate`."},

    {"curve", Type::kMap, "{}", true, "The live curves."},
    {"curve.windows", Type::kDurationList, R"(["5m", "1h", "24h"])", true,
     "Time windows the curves are kept over, each > 0 and distinct; labelled as written "
     "(`window=\"5m\"`)."},
    {"curve.buckets_per_octave", Type::kInt, "8", true,
     "Log-spaced capacity buckets per doubling, 4 to 64; a capacity read off a curve is "
     "within 2^(1/n) - 1 of the exact one (9.1% at 8)."},
    {"curve.page_hit_targets", Type::kNumberList, "[0.5, 0.9, 0.95, 0.99]", true,
     "Page-hit ratios in (0, 1] whose working set (the smallest capacity reaching them) is "
     "exported."},
    {"curve.coverage_targets", Type::kNumberList, "[0.5, 0.9, 0.95, 0.99]", true,
     "Request-coverage fractions in (0, 1] whose working set is exported."},
    {"curve.capacities", Type::kIntList, "[]", true,
     "The replica's real cache sizes in pages, each 1 to `engine.max_pages`, for hit-ratio "
     "gauges at those sizes."},
    {"curve.knee_sensitivity", Type::kNumber, "1.0", true,
     "Kneedle sensitivity S, > 0: larger values wait for a sharper knee."},
    {"curve.knee_window_min_requests", Type::kInt, "100", true,
     "A window with fewer requests than this (>= 0) has no knee."},
    {"curve.policies", Type::kStringList, "[]", true,
     "Eviction policies run as live canaries at each of `curve.capacities` over the curve's "
     "windows: lru, fifo, lfu, s3fifo, sglang, vllm, priority, workload-aware (belady needs the "
     "future: replay only). At most 64 canaries (policies x capacities)."},
    {"curve.engine_policy", Type::kString, R"("lru")", true,
     "The policy the engine itself runs (`vllm` for vLLM, `sglang` for SGLang's radix cache); "
     "`kvwatch_policy_gain_ratio` compares every canary with it, and it runs as a canary too."},
    {"curve.decode_tokens_per_second", Type::kNumber, "50", true,
     "Decode rate, > 0, that gives the sglang and vllm canaries' request lifetimes "
     "(output tokens / rate)."},
    {"curve.policy_priorities", Type::kString, R"("")", true,
     "Retention priorities for the priority canary: `tenant:NAME=P,class:NAME=P` (higher kept "
     "longer; others 0; classes: first, turn2, turn3-4, turn5-8, turn9+)."},

    {"web", Type::kMap, "{}", true, "The HTTP server: `/metrics`, the API and the web page."},
    {"web.listen_address", Type::kString, R"("127.0.0.1")", true,
     "Address to listen on (`0.0.0.0`: every IPv4 interface)."},
    {"web.port", Type::kInt, "8477", true, "TCP port, 0 to 65535 (0: any free port)."},
    {"web.config_file", Type::kString, R"("")", true,
     "A Prometheus exporter-toolkit web config file (TLS, basic auth, headers); empty: "
     "plain HTTP without authentication."},
    {"web.refresh_seconds", Type::kInt, "5", true,
     "Seconds between redraws of the web page, >= 1."},

    {"state", Type::kMap, "{}", true, "State kept across restarts."},
    {"state.path", Type::kString, R"("")", true,
     "Directory of the agent's state (curves, tail positions); empty: nothing is kept "
     "across restarts."},
    {"state.interval", Type::kDuration, R"("60s")", true, "How often the state is saved, > 0."},

    {"collectors", Type::kMap, "{}", true,
     "Where requests come from. With no collector configured at all, the agent runs "
     "`synth` with its defaults."},
    {"collectors.synth", Type::kMap, "off", false,
     "The built-in synthetic replica, for trying kvwatch out: `synth: {}` turns it on with "
     "the defaults below. With no collector configured at all, it runs with its defaults."},
    {"collectors.synth.rate", Type::kNumber, "5", true,
     "Requests per second, > 0 and at most 1000000."},
    {"collectors.synth.seed", Type::kInt, "1", true, "Seed of the random stream, >= 0."},
    {"collectors.synth.tenants", Type::kInt, "4", true, "Tenants, 1 to 60000."},
    {"collectors.synth.sessions", Type::kInt, "50", true,
     "Multi-turn sessions open at any time, 1 to 1000000."},
    {"collectors.synth.one_shot_fraction", Type::kNumber, "0.3", true,
     "Share of requests that are one-shot, in [0, 1]."},
    {"collectors.synth.shift_start", Type::kDuration, "unset", false,
     "Start of a workload shift (an extra tenant with a long prompt), counted from the "
     "agent's start; set together with `shift_end`."},
    {"collectors.synth.shift_end", Type::kDuration, "unset", false,
     "End of the workload shift, after `shift_start`."},

    {"collectors.trace_files", Type::kMapList, "[]", true,
     "Request traces (Mooncake or Qwen-Bailian JSON Lines) tailed from files."},
    {"collectors.trace_files[].name", Type::kString, "required", false,
     "Collector name, the `collector` label: 1 to 64 of `A-Z a-z 0-9 _ . -`, unique among "
     "all collectors (`synth` is reserved)."},
    {"collectors.trace_files[].paths", Type::kStringList, "required", false,
     "Files or globs to tail, at least one."},
    {"collectors.trace_files[].start_at", Type::kString, R"("end")", true,
     "Where to start in a file without a saved position: `end` or `beginning`."},
    {"collectors.trace_files[].checkpoint", Type::kString, R"("")", true,
     "File of the saved read positions; empty: `<state.path>/tail-<name>.ckpt` when "
     "`state.path` is set, else positions are not saved."},
    {"collectors.trace_files[].timestamp_unit", Type::kString, R"("auto")", true,
     "Unit of the records' `timestamp`: `auto` (decided once per trace), `ms` or `s`."},
    {"collectors.trace_files[].tenant_fields", Type::kStringList, R"(["tenant", "class", "type"])",
     true, "Record fields tried in order for the tenant label."},
    {"collectors.trace_files[].max_line_bytes", Type::kSize, R"("1MiB")", true,
     "Longer lines are skipped and counted; 1 byte to 1GiB."},
    {"collectors.trace_files[].poll_interval", Type::kDuration, R"("250ms")", true,
     "How often files are checked for new lines and rotation, > 0."},

    {"collectors.kv_events", Type::kMapList, "[]", true,
     "KV-cache event streams (vLLM or SGLang ZeroMQ publishers)."},
    {"collectors.kv_events[].name", Type::kString, "required", false,
     "Collector name, as for `trace_files`."},
    {"collectors.kv_events[].endpoints", Type::kStringList, "required", false,
     "ZeroMQ endpoints (`tcp://`, `ipc://` or `inproc://`), at least one."},
    {"collectors.kv_events[].topic", Type::kString, R"("")", true,
     "Subscription topic prefix; empty: every message."},
    {"collectors.kv_events[].replay_endpoint", Type::kString, R"("")", true,
     "The publisher's replay endpoint, to fetch missed events; empty: none."},
    {"collectors.kv_events[].bind", Type::kBool, "false", true,
     "Bind the endpoints instead of connecting to them."},

    {"collectors.engine_log", Type::kMapList, "[]", true,
     "Serving-engine log files (vLLM stats lines, SGLang prefill lines)."},
    {"collectors.engine_log[].name", Type::kString, "required", false,
     "Collector name, as for `trace_files`."},
    {"collectors.engine_log[].paths", Type::kStringList, "required", false,
     "Files or globs to tail, at least one."},
    {"collectors.engine_log[].engine", Type::kString, R"("auto")", true,
     "Log format: `vllm`, `sglang` or `auto` (recognized line by line)."},

    {"collectors.engine_metrics", Type::kMapList, "[]", true,
     "Serving-engine Prometheus endpoints, scraped."},
    {"collectors.engine_metrics[].name", Type::kString, "required", false,
     "Collector name, as for `trace_files`."},
    {"collectors.engine_metrics[].url", Type::kString, "required", false,
     "`http://` or `https://` URL, e.g. `http://127.0.0.1:8000/metrics`."},
    {"collectors.engine_metrics[].interval", Type::kDuration, R"("15s")", true,
     "Time between scrapes, > 0."},
    {"collectors.engine_metrics[].timeout", Type::kDuration, R"("5s")", true,
     "Scrape timeout, > 0 and at most `interval`."},

    {"alerts", Type::kMap, "{}", true, "Alerts raised by the agent's detectors."},
    {"alerts.enabled", Type::kBool, "true", true, "Run the detectors and raise alerts."},
    {"alerts.alertmanagers", Type::kStringList, "[]", true,
     "Alertmanager base URLs (`http://host:9093`) that alerts are pushed to."},
    {"alerts.webhooks", Type::kStringList, "[]", true,
     "URLs that receive Alertmanager-compatible webhook payloads."},
    {"alerts.resend_interval", Type::kDuration, R"("60s")", true,
     "How often firing alerts are sent again, > 0; a firing alert's `endsAt` is 4 intervals "
     "ahead, and a resolved one is sent again on this interval for 15 minutes."},
    {"alerts.evaluation_interval", Type::kDuration, R"("15s")", true,
     "How often the detectors are evaluated, > 0."},
    {"alerts.timeout", Type::kDuration, R"("10s")", true,
     "Connection and read timeout of each notification request, > 0. Sending runs on its "
     "own threads, with retries and exponential backoff; a notifier that is down never "
     "slows ingestion."},
    {"alerts.short_window", Type::kDuration, R"("1h")", true,
     "The recent window the detectors compare with the baseline, in whole seconds. When "
     "written, it must be one of `curve.windows` (the knee and the working set are read from "
     "that curve)."},
    {"alerts.baseline_window", Type::kDuration, R"("24h")", true,
     "The baseline window, longer than `short_window`; when written, one of `curve.windows`. "
     "Rates are computed over both windows from the engine's counters."},
    {"alerts.knee_shift", Type::kMap, "{}", true,
     "`KVWatchKneeShift`: the knee of the short window's curve moved away from the "
     "baseline's. On a stationary workload it must not fire."},
    {"alerts.knee_shift.enabled", Type::kBool, "true", true, "Run this detector."},
    {"alerts.knee_shift.fire_threshold", Type::kNumber, "0.25", true,
     "Relative knee change, abs(short - baseline) / baseline, at which the alert goes "
     "pending, > 0."},
    {"alerts.knee_shift.clear_threshold", Type::kNumber, "0.15", true,
     "Relative change below which a firing alert resolves, >= 0 and at most "
     "`fire_threshold` (hysteresis)."},
    {"alerts.knee_shift.min_shift_pages", Type::kNumber, "32", true,
     "The knee must also have moved by this many pages, >= 0."},
    {"alerts.knee_shift.min_requests", Type::kInt, "500", true,
     "Requests needed in the short window, >= 0; with fewer the detector stays quiet."},
    {"alerts.knee_shift.min_baseline_requests", Type::kInt, "5000", true,
     "Requests needed in the baseline window, >= 0."},
    {"alerts.knee_shift.for", Type::kDuration, R"("15m")", true,
     "How long the change must hold before the alert fires, whole seconds >= 0."},
    {"alerts.over_capacity", Type::kMap, "{}", true,
     "`KVWatchWorkingSetOverCapacity`: the short window's working set exceeds the cache, "
     "the largest of `curve.capacities` (no capacity: no data)."},
    {"alerts.over_capacity.enabled", Type::kBool, "true", true, "Run this detector."},
    {"alerts.over_capacity.target", Type::kString, R"("page_hit")", true,
     "What the working set keeps: `page_hit` (a fraction of the unlimited page hits) or "
     "`request_coverage` (a fraction of requests)."},
    {"alerts.over_capacity.fraction", Type::kNumber, "0.95", true,
     "The target's fraction, in (0, 1]."},
    {"alerts.over_capacity.fire_threshold", Type::kNumber, "1.0", true,
     "Working set / capacity at which the alert goes pending, > 0."},
    {"alerts.over_capacity.clear_threshold", Type::kNumber, "0.9", true,
     "Working set / capacity below which a firing alert resolves, >= 0 and at most "
     "`fire_threshold`."},
    {"alerts.over_capacity.min_requests", Type::kInt, "500", true,
     "Requests needed in the short window, >= 0."},
    {"alerts.over_capacity.for", Type::kDuration, R"("15m")", true,
     "How long the working set must stay over before the alert fires, whole seconds >= 0."},
    {"alerts.rate_shift", Type::kMap, "{}", true,
     "`KVWatchEvictionRateShift`, `KVWatchRejectionRateShift`, `KVWatchPreemptionRateShift`: "
     "the engine counter's rate over the short window against the baseline's, floored at 1 "
     "evicted block/s and 0.05 rejections or preemptions/s. Quiet without engine counters."},
    {"alerts.rate_shift.enabled", Type::kBool, "true", true, "Run these detectors."},
    {"alerts.rate_shift.fire_threshold", Type::kNumber, "2.0", true,
     "Rate ratio at which an alert goes pending, > 0."},
    {"alerts.rate_shift.clear_threshold", Type::kNumber, "1.5", true,
     "Rate ratio below which a firing alert resolves, >= 0 and at most `fire_threshold`."},
    {"alerts.rate_shift.min_requests", Type::kInt, "500", true,
     "Requests needed in the short window, >= 0."},
    {"alerts.rate_shift.for", Type::kDuration, R"("15m")", true,
     "How long the ratio must hold, whole seconds >= 0."},
    {"alerts.drift", Type::kMap, "{}", true,
     "`KVWatchEvictionRateDrift`: a CUSUM test on the per-minute eviction rate, against a "
     "baseline learned over its first 2 hours; catches small sustained rises."},
    {"alerts.drift.enabled", Type::kBool, "true", true, "Run this detector."},
    {"alerts.drift.fire_threshold", Type::kNumber, "10", true,
     "CUSUM statistic, in standard deviations, at which the alert goes pending, > 0."},
    {"alerts.drift.clear_threshold", Type::kNumber, "5", true,
     "Statistic below which a firing alert resolves, >= 0 and at most `fire_threshold`."},
    {"alerts.drift.relearn_after", Type::kDuration, R"("1h")", true,
     "After an alarm this long the new rate becomes the baseline, whole seconds; 0s: never."},
    {"alerts.drift.min_requests", Type::kInt, "500", true,
     "Requests needed in the short window for a sample to count, >= 0."},
    {"alerts.drift.for", Type::kDuration, R"("5m")", true,
     "How long the statistic must hold, whole seconds >= 0."},
};

// ------------------------------------------------------------------ Value syntax

std::optional<double> ParseDurationText(std::string_view text) {
  if (text.empty()) return std::nullopt;
  double total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t start = i;
    while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
    if (i == start) return std::nullopt;
    double number = 0;
    auto [end, ec] = std::from_chars(text.data() + start, text.data() + i, number);
    if (ec != std::errc() || end != text.data() + i) return std::nullopt;
    double unit = 0;
    if (text.substr(i, 2) == "ms") {
      unit = 0.001;
      i += 2;
    } else if (i < text.size()) {
      switch (text[i]) {
        case 's':
          unit = 1;
          break;
        case 'm':
          unit = 60;
          break;
        case 'h':
          unit = 3600;
          break;
        case 'd':
          unit = 86400;
          break;
        default:
          return std::nullopt;
      }
      ++i;
    } else {
      return std::nullopt;  // a number without a unit
    }
    total += number * unit;
  }
  if (!std::isfinite(total)) return std::nullopt;
  return total;
}

std::optional<std::uint64_t> ParseSizeText(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  std::uint64_t number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + digits, number);
  if (ec != std::errc()) return std::nullopt;
  std::string_view unit = text.substr(digits);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  static constexpr std::pair<std::string_view, std::uint64_t> kUnits[] = {
      {"", 1},
      {"B", 1},
      {"KiB", 1ull << 10},
      {"MiB", 1ull << 20},
      {"GiB", 1ull << 30},
      {"TiB", 1ull << 40},
      {"KB", 1000},
      {"MB", 1000000},
      {"GB", 1000000000},
      {"TB", 1000000000000},
  };
  for (const auto& [name, factor] : kUnits) {
    if (name != unit) continue;
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(number, factor, &bytes)) return std::nullopt;
    return bytes;
  }
  return std::nullopt;
}

std::optional<std::int64_t> ParseIntText(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> ParseNumberText(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

// "1 to 10", ">= 1".
std::string RangeText(std::int64_t lo, std::int64_t hi) {
  if (hi == std::numeric_limits<std::int64_t>::max()) return ">= " + std::to_string(lo);
  return std::to_string(lo) + " to " + std::to_string(hi);
}

// Short, exact text of a double (no trailing zeros): 0.5, 300, 1e+30.
std::string NumberText(double value) {
  std::array<char, 32> buffer;
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return ec == std::errc() ? std::string(buffer.data(), end) : std::to_string(value);
}

ConfigType ElementType(ConfigType list) {
  switch (list) {
    case Type::kStringList:
      return Type::kString;
    case Type::kIntList:
      return Type::kInt;
    case Type::kNumberList:
      return Type::kNumber;
    case Type::kDurationList:
      return Type::kDuration;
    case Type::kMapList:
      return Type::kMap;
    default:
      return list;
  }
}

// Ranges of numbers.
bool Positive(double v) { return v > 0; }
bool InZeroOne(double v) { return v > 0 && v <= 1; }
bool Fraction(double v) { return v >= 0 && v <= 1; }
bool SynthRate(double v) { return v > 0 && v <= 1e6; }
bool NonNegative(double v) { return v >= 0; }

bool IsLabelName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

bool HasPrefixAndRest(std::string_view text, std::string_view prefix) {
  return text.size() > prefix.size() && text.substr(0, prefix.size()) == prefix;
}

bool HasWhitespace(std::string_view text) {
  return std::any_of(text.begin(), text.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

bool IsHttpUrl(std::string_view url) {
  return (HasPrefixAndRest(url, "http://") || HasPrefixAndRest(url, "https://")) &&
         !HasWhitespace(url);
}

bool IsZmqEndpoint(std::string_view endpoint) {
  return (HasPrefixAndRest(endpoint, "tcp://") || HasPrefixAndRest(endpoint, "ipc://") ||
          HasPrefixAndRest(endpoint, "inproc://")) &&
         !HasWhitespace(endpoint);
}

template <class V>
struct Choice {
  std::string_view name;
  V value;
};

constexpr Choice<curve::TouchOrder> kTouchOrders[] = {
    {"tail-first", curve::TouchOrder::kTailFirst},
    {"head-first", curve::TouchOrder::kHeadFirst},
};
constexpr Choice<StartAt> kStartAts[] = {
    {"end", StartAt::kEnd},
    {"beginning", StartAt::kBeginning},
};
// The spellings collectors::ParseTimestampUnit accepts.
constexpr Choice<collectors::TimestampUnit> kTimestampUnits[] = {
    {"auto", collectors::TimestampUnit::kAuto},
    {"ms", collectors::TimestampUnit::kMilliseconds},
    {"s", collectors::TimestampUnit::kSeconds},
    {"milliseconds", collectors::TimestampUnit::kMilliseconds},
    {"seconds", collectors::TimestampUnit::kSeconds},
};
constexpr Choice<WorkingSetTarget> kWorkingSetTargets[] = {
    {"page_hit", WorkingSetTarget::kPageHit},
    {"request_coverage", WorkingSetTarget::kRequestCoverage},
};
constexpr Choice<LogEngine> kLogEngines[] = {
    {"auto", LogEngine::kAuto},
    {"vllm", LogEngine::kVllm},
    {"sglang", LogEngine::kSglang},
};

// ------------------------------------------------------------------ The parser

// A value in the document: where it is and what the table says it is.
struct Entry {
  std::string path;              // concrete: "collectors.trace_files[0].paths[1]"
  std::string pattern;           // table path: "collectors.trace_files[].paths"
  ConfigType type = Type::kMap;  // for a list item, the element type
  YAML::Node node;
  YAML::Mark mark;      // the value's; the key's when the value is empty
  YAML::Mark key_mark;  // the key's (the value's for a list item)
};

std::string Join(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// How a value was written, for "got ..." in messages.
std::string Got(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "no value";
  if (node.IsSequence()) return node.size() == 0 ? "an empty list" : "a list";
  if (node.IsMap()) return "a map";
  if (node.Tag() == "!") return "the quoted string \"" + node.Scalar() + "\"";
  return "\"" + node.Scalar() + "\"";
}

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Result<AgentConfig> Parse(std::string_view text) {
    AgentConfig config = DefaultAgentConfig();
    Status status = ParseText(text, &config);
    if (!status.ok()) return Result<AgentConfig>::Error(status.error());
    return config;
  }

 private:
  using Visitor = std::function<Status(const Entry&)>;

  // ---------------------------------------------------------------- errors

  Status Fail(const std::string& key, const YAML::Mark& mark, const std::string& message) const {
    std::string where = source_;
    if (!mark.is_null() && mark.line >= 0) where += ":" + std::to_string(mark.line + 1);
    return Status::Error(where + ": " + key + ": " + message);
  }
  Status Fail(const Entry& e, const std::string& message) const {
    return Fail(e.path, e.mark, message);
  }
  Status FailAtKey(const Entry& e, const std::string& message) const {
    return Fail(e.path, e.key_mark, message);
  }
  Status Expected(const Entry& e, const std::string& what) const {
    return Fail(e, "expected " + what + ", got " + Got(e.node));
  }
  // A reader called for a key whose table type is another: a bug in this file.
  Status CheckType(const Entry& e, ConfigType reader) const {
    if (e.type == reader) return Status::Ok();
    return Fail(e, "internal error: the key table says " + std::string(ConfigTypeName(e.type)) +
                       " but the parser reads " + std::string(ConfigTypeName(reader)));
  }
  Status Unhandled(const Entry& e) const {
    return FailAtKey(e, "internal error: described in the key table but not parsed");
  }

  // ---------------------------------------------------------------- walking

  Status ParseText(std::string_view text, AgentConfig* config) {
    std::vector<YAML::Node> documents;
    try {
      documents = YAML::LoadAll(std::string(text));
    } catch (const YAML::Exception& ex) {
      std::string where = source_;
      if (!ex.mark.is_null()) where += ":" + std::to_string(ex.mark.line + 1);
      return Status::Error(where + ": invalid YAML: " + ex.msg);
    }
    if (documents.size() > 1) {
      return Fail("(top level)", documents[1].Mark(),
                  "expected one YAML document, found " + std::to_string(documents.size()));
    }
    if (documents.empty()) return Status::Ok();
    Entry root{"", "", Type::kMap, documents[0], documents[0].Mark(), documents[0].Mark()};
    if (root.node.IsNull()) return Status::Ok();
    if (!root.node.IsMap()) {
      return Fail("(top level)", root.mark, "expected a map of keys, got " + Got(root.node));
    }
    try {
      Status status = ParseTop(root, config);
      if (!status.ok()) return status;
    } catch (const YAML::Exception& ex) {  // not expected: every access is checked first
      return Fail("(top level)", ex.mark, "unexpected YAML error: " + ex.msg);
    }
    return Resolve(config);
  }

  // Calls visit for each key of the map e in document order, after checking that
  // the key is a unique plain scalar described in the table.
  Status ForEachKey(const Entry& e, const Visitor& visit) {
    if (Status s = CheckType(e, Type::kMap); !s.ok()) return s;
    if (e.node.IsNull()) return Status::Ok();
    if (!e.node.IsMap()) return Expected(e, "a map");
    std::set<std::string> seen;
    for (const auto& key_value : e.node) {
      const YAML::Node& key = key_value.first;
      if (!key.IsScalar()) {
        return Fail(e.path.empty() ? "(top level)" : e.path, key.Mark(),
                    "expected a plain key, got " + Got(key));
      }
      Entry child;
      child.path = Join(e.path, key.Scalar());
      child.pattern = Join(e.pattern, key.Scalar());
      child.node = key_value.second;
      child.key_mark = key.Mark();
      child.mark =
          child.node.IsNull() || child.node.Mark().is_null() ? key.Mark() : child.node.Mark();
      const ConfigKey* described = FindConfigKey(child.pattern);
      if (described == nullptr) return FailAtKey(child, UnknownKeyMessage(e.pattern));
      if (!seen.insert(key.Scalar()).second) return FailAtKey(child, "duplicate key");
      child.type = described->type;
      key_marks_[child.path] = child.key_mark;
      Status status = visit(child);
      if (!status.ok()) return status;
    }
    return Status::Ok();
  }

  static std::string UnknownKeyMessage(const std::string& parent_pattern) {
    std::string prefix = parent_pattern.empty() ? "" : parent_pattern + ".";
    std::string names;
    for (const ConfigKey& key : ConfigKeys()) {
      std::string_view path = key.path;
      if (path.substr(0, prefix.size()) != prefix) continue;
      std::string_view rest = path.substr(prefix.size());
      if (rest.empty() || rest.find('.') != std::string_view::npos) continue;
      if (rest.find('[') != std::string_view::npos) continue;
      names += (names.empty() ? "" : ", ") + std::string(rest);
    }
    return "unknown key; expected one of: " + names;
  }

  // The items of the list e, each typed as the list's element type.
  Result<std::vector<Entry>> Items(const Entry& e) {
    std::vector<Entry> items;
    if (e.node.IsNull()) return items;
    ConfigType element = ElementType(e.type);
    if (!e.node.IsSequence()) {
      return Result<std::vector<Entry>>::Error(
          Expected(e, "a list of " + std::string(ConfigTypeName(element)) + "s").error());
    }
    for (std::size_t i = 0; i < e.node.size(); ++i) {
      Entry item;
      item.path = e.path + "[" + std::to_string(i) + "]";
      item.pattern = element == Type::kMap ? e.pattern + "[]" : e.pattern;
      item.type = element;
      item.node = e.node[i];
      item.mark = item.node.Mark().is_null() ? e.mark : item.node.Mark();
      item.key_mark = item.mark;
      key_marks_[item.path] = item.mark;
      items.push_back(std::move(item));
    }
    return items;
  }

  // ---------------------------------------------------------------- scalars

  // The text of a scalar that must not be quoted (integers, numbers, booleans).
  Result<std::string> PlainScalar(const Entry& e, const std::string& what) const {
    if (!e.node.IsScalar() || e.node.Tag() == "!") {
      return Result<std::string>::Error(Expected(e, what).error());
    }
    return e.node.Scalar();
  }

  Status ReadString(const Entry& e, std::string* out) const {
    if (Status s = CheckType(e, Type::kString); !s.ok()) return s;
    if (e.node.IsNull()) {
      out->clear();
      return Status::Ok();
    }
    if (!e.node.IsScalar()) return Expected(e, "a string");
    *out = e.node.Scalar();
    return Status::Ok();
  }

  Status ReadBool(const Entry& e, bool* out) const {
    if (Status s = CheckType(e, Type::kBool); !s.ok()) return s;
    Result<std::string> text = PlainScalar(e, "true or false");
    if (!text.ok()) return text.status();
    if (!YAML::convert<bool>::decode(e.node, *out)) return Expected(e, "true or false");
    return Status::Ok();
  }

  template <class I>
  Status ReadInt(const Entry& e, std::int64_t lo, std::int64_t hi, I* out) const {
    if (Status s = CheckType(e, Type::kInt); !s.ok()) return s;
    std::string what = "an integer " + RangeText(lo, hi);
    Result<std::string> text = PlainScalar(e, what);
    if (!text.ok()) return text.status();
    std::optional<std::int64_t> value = ParseIntText(text.value());
    if (!value || *value < lo || *value > hi) return Expected(e, what);
    *out = static_cast<I>(*value);
    return Status::Ok();
  }

  // A finite number; in_range says whether it is acceptable, range describes it.
  Status ReadNumber(const Entry& e, bool (*in_range)(double), const std::string& range,
                    double* out) const {
    if (Status s = CheckType(e, Type::kNumber); !s.ok()) return s;
    std::string what = "a number " + range;
    Result<std::string> text = PlainScalar(e, what);
    if (!text.ok()) return text.status();
    std::optional<double> value = ParseNumberText(text.value());
    if (!value || !in_range(*value)) return Expected(e, what);
    *out = *value;
    return Status::Ok();
  }

  Status ReadFraction(const Entry& e, double* out) const {
    return ReadNumber(e, InZeroOne, "in (0, 1]", out);
  }

  // A duration in seconds; positive says whether 0 is refused.
  Status ReadDuration(const Entry& e, bool positive, double* out) const {
    if (Status s = CheckType(e, Type::kDuration); !s.ok()) return s;
    const std::string what = "a duration such as 250ms, 30s or 1h30m";
    if (!e.node.IsScalar()) return Expected(e, what);
    std::optional<double> seconds = ParseDurationText(e.node.Scalar());
    if (!seconds) return Expected(e, what);
    if (positive && *seconds <= 0) return Expected(e, "a duration > 0");
    *out = *seconds;
    return Status::Ok();
  }

  // A duration that is a whole number of seconds >= min_seconds.
  Status ReadWholeSeconds(const Entry& e, std::int64_t min_seconds, std::int64_t* out) const {
    double seconds = 0;
    if (Status s = ReadDuration(e, false, &seconds); !s.ok()) return s;
    if (seconds != std::floor(seconds) || seconds < static_cast<double>(min_seconds) ||
        seconds > 1e12) {
      return Expected(e, "a whole number of seconds >= " + std::to_string(min_seconds) +
                             ", such as 30s or 15m");
    }
    *out = static_cast<std::int64_t>(seconds);
    return Status::Ok();
  }

  Status ReadSize(const Entry& e, std::uint64_t lo, std::uint64_t hi, std::uint64_t* out) const {
    if (Status s = CheckType(e, Type::kSize); !s.ok()) return s;
    const std::string what = "a size such as 65536, 64KiB or 1MiB";
    if (!e.node.IsScalar()) return Expected(e, what);
    std::optional<std::uint64_t> bytes = ParseSizeText(e.node.Scalar());
    if (!bytes) return Expected(e, what);
    if (*bytes < lo || *bytes > hi) {
      return Fail(e, "expected a size from " + std::to_string(lo) + " to " + std::to_string(hi) +
                         " bytes, got " + Got(e.node));
    }
    *out = *bytes;
    return Status::Ok();
  }

  template <class V, std::size_t N>
  Status ReadChoice(const Entry& e, const Choice<V> (&choices)[N], V* out) const {
    std::string text;
    if (Status s = ReadString(e, &text); !s.ok()) return s;
    std::string names;
    for (const Choice<V>& choice : choices) {
      if (choice.name == text && e.node.IsScalar()) {
        *out = choice.value;
        return Status::Ok();
      }
      names += (names.empty() ? "" : ", ") + std::string(choice.name);
    }
    return Expected(e, "one of " + names);
  }

  // A list of strings; check (when given) returns an error message for a bad item.
  Status ReadStringList(const Entry& e, std::vector<std::string>* out,
                        const std::function<std::string(const std::string&)>& check = {}) {
    if (Status s = CheckType(e, Type::kStringList); !s.ok()) return s;
    Result<std::vector<Entry>> items = Items(e);
    if (!items.ok()) return items.status();
    out->clear();
    for (const Entry& item : items.value()) {
      std::string text;
      if (Status s = ReadString(item, &text); !s.ok()) return s;
      if (check) {
        std::string problem = check(text);
        if (!problem.empty()) return Fail(item, problem);
      }
      out->push_back(std::move(text));
    }
    return Status::Ok();
  }

  // A list of fractions in (0, 1], distinct, returned sorted.
  Status ReadFractionList(const Entry& e, std::vector<double>* out) {
    if (Status s = CheckType(e, Type::kNumberList); !s.ok()) return s;
    Result<std::vector<Entry>> items = Items(e);
    if (!items.ok()) return items.status();
    std::map<double, std::string> seen;  // value -> path
    for (const Entry& item : items.value()) {
      double value = 0;
      if (Status s = ReadFraction(item, &value); !s.ok()) return s;
      if (auto [it, added] = seen.emplace(value, item.path); !added) {
        return Fail(item, "duplicate of " + it->second);
      }
    }
    out->clear();
    for (const auto& [value, path] : seen) out->push_back(value);
    return Status::Ok();
  }

  // ---------------------------------------------------------------- sections

  Status ParseTop(const Entry& root, AgentConfig* c) {
    return ForEachKey(root, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "replica") return ReadString(e, &c->replica);
      if (k == "model_label") return ReadString(e, &c->model_label);
      if (k == "model" || k == "model_config" || k == "bytes_per_token") {
        return ParseModelSource(e, c);
      }
      if (k == "kv_dtype") return ParseKvDtype(e, c);
      if (k == "tensor_parallel") {
        return ReadInt(e, 1, std::numeric_limits<int>::max(), &c->tensor_parallel);
      }
      if (k == "page_tokens") {
        return ReadInt(e, 1, std::numeric_limits<int>::max(), &c->page_tokens);
      }
      if (k == "engine") return ParseEngine(e, &c->engine);
      if (k == "curve") return ParseCurve(e, &c->curve);
      if (k == "web") return ParseWeb(e, &c->web);
      if (k == "state") return ParseState(e, &c->state);
      if (k == "collectors") return ParseCollectors(e, &c->collectors);
      if (k == "alerts") return ParseAlerts(e, &c->alerts);
      return Unhandled(e);
    });
  }

  // model, model_config, bytes_per_token: at most one (the second one is the error).
  Status ParseModelSource(const Entry& e, AgentConfig* c) {
    if (!model_source_.empty()) {
      return FailAtKey(e, "at most one of model, model_config and bytes_per_token may be set; " +
                              model_source_ + " is already set");
    }
    if (e.pattern == "bytes_per_token") {
      std::uint64_t bytes = 0;
      if (Status s = ReadSize(e, 1, std::numeric_limits<std::uint64_t>::max(), &bytes); !s.ok()) {
        return s;
      }
      c->bytes_per_token = bytes;
      model_source_ = e.path;
      return Status::Ok();
    }
    std::string* target = e.pattern == "model" ? &c->model : &c->model_config;
    if (Status s = ReadString(e, target); !s.ok()) return s;
    if (target->empty()) return Status::Ok();  // "" is the default: not a source
    if (e.pattern == "model") {
      Result<curve::ModelSpec> preset = curve::LookupModelPreset(*target);
      if (!preset.ok()) return Fail(e, preset.error());
    }
    model_source_ = e.path;
    return Status::Ok();
  }

  Status ParseKvDtype(const Entry& e, AgentConfig* c) {
    if (Status s = ReadString(e, &c->kv_dtype); !s.ok()) return s;
    if (c->kv_dtype.empty()) return Status::Ok();
    Result<int> bytes = curve::DtypeBytes(c->kv_dtype);
    if (!bytes.ok()) return Fail(e, bytes.error());
    return Status::Ok();
  }

  Status ParseEngine(const Entry& section, EngineSettings* engine) {
    return ForEachKey(section, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "engine.max_pages") return ReadInt(e, 1, std::int64_t{1} << 31, &engine->max_pages);
      if (k == "engine.touch_order") return ReadChoice(e, kTouchOrders, &engine->touch_order);
      if (k == "engine.coverage_share") return ReadFraction(e, &engine->coverage_share);
      if (k == "engine.sample_rate") return ReadFraction(e, &engine->sample_rate);
      if (k == "engine.sample_max_pages") {
        return ReadInt(e, 0, std::int64_t{1} << 31, &engine->sample_max_pages);
      }
      if (k == "engine.remembered_evictions") {
        remembered_evictions_set_ = true;
        return ReadInt(e, 0, std::numeric_limits<std::int64_t>::max(),
                       &engine->remembered_evictions);
      }
      return Unhandled(e);
    });
  }

  Status ParseWindows(const Entry& e, std::vector<CurveWindow>* windows) {
    if (Status s = CheckType(e, Type::kDurationList); !s.ok()) return s;
    Result<std::vector<Entry>> items = Items(e);
    if (!items.ok()) return items.status();
    if (items.value().empty()) return Expected(e, "at least one window");
    std::map<double, std::string> seen;  // seconds -> path
    windows->clear();
    for (const Entry& item : items.value()) {
      CurveWindow window;
      if (Status s = ReadDuration(item, true, &window.seconds); !s.ok()) return s;
      if (auto [it, added] = seen.emplace(window.seconds, item.path); !added) {
        return Fail(item, "the same duration as " + it->second);
      }
      window.name = item.node.Scalar();
      windows->push_back(std::move(window));
    }
    std::stable_sort(
        windows->begin(), windows->end(),
        [](const CurveWindow& a, const CurveWindow& b) { return a.seconds < b.seconds; });
    return Status::Ok();
  }

  Status ParseCapacities(const Entry& e, std::vector<std::uint64_t>* capacities) {
    if (Status s = CheckType(e, Type::kIntList); !s.ok()) return s;
    Result<std::vector<Entry>> items = Items(e);
    if (!items.ok()) return items.status();
    std::map<std::uint64_t, std::string> seen;  // pages -> path
    capacity_paths_.clear();
    for (const Entry& item : items.value()) {
      std::uint64_t pages = 0;
      if (Status s = ReadInt(item, 1, std::numeric_limits<std::int64_t>::max(), &pages); !s.ok()) {
        return s;
      }
      if (auto [it, added] = seen.emplace(pages, item.path); !added) {
        return Fail(item, "duplicate of " + it->second);
      }
      capacity_paths_.emplace_back(pages, item.path);
    }
    capacities->clear();
    for (const auto& [pages, path] : seen) capacities->push_back(pages);
    return Status::Ok();
  }

  // "" for a policy that can run live; else what is wrong with the name.
  static std::string OnlinePolicyProblem(const std::string& name) {
    auto kind = curve::ParsePolicyName(name);
    if (!kind.ok()) return kind.error();
    if (curve::NeedsFuture(kind.value())) return "policy '" + name + "' needs the future: it runs only in replay";
    return "";
  }

  Status ParseCurve(const Entry& section, CurveSettings* curve) {
    return ForEachKey(section, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "curve.windows") return ParseWindows(e, &curve->windows);
      if (k == "curve.buckets_per_octave") return ReadInt(e, 4, 64, &curve->buckets_per_octave);
      if (k == "curve.page_hit_targets") return ReadFractionList(e, &curve->page_hit_targets);
      if (k == "curve.coverage_targets") return ReadFractionList(e, &curve->coverage_targets);
      if (k == "curve.capacities") return ParseCapacities(e, &curve->capacities);
      if (k == "curve.knee_sensitivity") {
        return ReadNumber(e, Positive, "> 0", &curve->knee_sensitivity);
      }
      if (k == "curve.knee_window_min_requests") {
        return ReadInt(e, 0, std::numeric_limits<std::int64_t>::max(),
                       &curve->knee_window_min_requests);
      }
      if (k == "curve.policies") {
        policies_path_ = e.path;
        return ReadStringList(e, &curve->policies, OnlinePolicyProblem);
      }
      if (k == "curve.engine_policy") {
        if (Status s = ReadString(e, &curve->engine_policy); !s.ok()) return s;
        const std::string problem = OnlinePolicyProblem(curve->engine_policy);
        return problem.empty() ? Status::Ok() : Fail(e, problem);
      }
      if (k == "curve.decode_tokens_per_second") {
        return ReadNumber(e, Positive, "> 0", &curve->decode_tokens_per_second);
      }
      if (k == "curve.policy_priorities") {
        if (Status s = ReadString(e, &curve->policy_priorities); !s.ok()) return s;
        auto rules = curve::ParsePriorityRules(curve->policy_priorities);
        return rules.ok() ? Status::Ok() : Fail(e, rules.error());
      }
      return Unhandled(e);
    });
  }

  Status ParseWeb(const Entry& section, WebSettings* web) {
    return ForEachKey(section, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "web.listen_address") {
        if (Status s = ReadString(e, &web->listen_address); !s.ok()) return s;
        if (web->listen_address.empty() || HasWhitespace(web->listen_address)) {
          return Expected(e, "an address such as 127.0.0.1, ::1 or 0.0.0.0");
        }
        return Status::Ok();
      }
      if (k == "web.port") return ReadInt(e, 0, 65535, &web->port);
      if (k == "web.config_file") return ReadString(e, &web->config_file);
      if (k == "web.refresh_seconds") {
        return ReadInt(e, 1, std::numeric_limits<int>::max(), &web->refresh_seconds);
      }
      return Unhandled(e);
    });
  }

  Status ParseState(const Entry& section, StateSettings* state) {
    return ForEachKey(section, [&](const Entry& e) -> Status {
      if (e.pattern == "state.path") return ReadString(e, &state->path);
      if (e.pattern == "state.interval") return ReadDuration(e, true, &state->interval_seconds);
      return Unhandled(e);
    });
  }

  Status ParseCollectors(const Entry& section, CollectorSettings* collectors) {
    return ForEachKey(section, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "collectors.synth") {
        if (!e.node.IsNull() && !e.node.IsMap()) return Expected(e, "a map");
        collectors->synth.emplace();
        return ParseSynth(e, &*collectors->synth);
      }
      if (k == "collectors.trace_files") {
        return ParseList(e, &collectors->trace_files, &Parser::ParseTraceFile);
      }
      if (k == "collectors.kv_events") {
        return ParseList(e, &collectors->kv_events, &Parser::ParseKvEvents);
      }
      if (k == "collectors.engine_log") {
        return ParseList(e, &collectors->engine_log, &Parser::ParseEngineLog);
      }
      if (k == "collectors.engine_metrics") {
        return ParseList(e, &collectors->engine_metrics, &Parser::ParseEngineMetrics);
      }
      return Unhandled(e);
    });
  }

  Status ParseSynth(const Entry& section, SynthSettings* synth) {
    Status status = ForEachKey(section, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "collectors.synth.rate") {
        return ReadNumber(e, SynthRate, "> 0 and at most 1000000", &synth->rate_per_s);
      }
      if (k == "collectors.synth.seed") {
        return ReadInt(e, 0, std::numeric_limits<std::int64_t>::max(), &synth->seed);
      }
      if (k == "collectors.synth.tenants") return ReadInt(e, 1, 60000, &synth->tenants);
      if (k == "collectors.synth.sessions") return ReadInt(e, 1, 1000000, &synth->sessions);
      if (k == "collectors.synth.one_shot_fraction") {
        return ReadNumber(e, Fraction, "in [0, 1]", &synth->one_shot_fraction);
      }
      if (k == "collectors.synth.shift_start" || k == "collectors.synth.shift_end") {
        double seconds = 0;
        if (Status s = ReadDuration(e, false, &seconds); !s.ok()) return s;
        (k == "collectors.synth.shift_start" ? synth->shift_start_seconds
                                             : synth->shift_end_seconds) = seconds;
        return Status::Ok();
      }
      return Unhandled(e);
    });
    if (!status.ok()) return status;
    const std::string start = section.path + ".shift_start", end = section.path + ".shift_end";
    if (synth->shift_start_seconds.has_value() != synth->shift_end_seconds.has_value()) {
      const std::string& given = synth->shift_start_seconds ? start : end;
      const std::string& missing = synth->shift_start_seconds ? end : start;
      return Fail(given, MarkOf(given, section.mark), "set together with " + missing);
    }
    if (synth->shift_end_seconds && *synth->shift_end_seconds <= *synth->shift_start_seconds) {
      return Fail(end, MarkOf(end, section.mark), "must be after shift_start");
    }
    return Status::Ok();
  }

  // A list of maps, each parsed by parse_item into a default-constructed Item.
  template <class Item>
  Status ParseList(const Entry& e, std::vector<Item>* out,
                   Status (Parser::*parse_item)(const Entry&, Item*)) {
    if (Status s = CheckType(e, Type::kMapList); !s.ok()) return s;
    Result<std::vector<Entry>> items = Items(e);
    if (!items.ok()) return items.status();
    out->clear();
    for (const Entry& entry : items.value()) {
      if (!entry.node.IsMap()) return Expected(entry, "a map");
      Item item;
      if (Status s = (this->*parse_item)(entry, &item); !s.ok()) return s;
      out->push_back(std::move(item));
    }
    return Status::Ok();
  }

  // Checks and registers a collector name (unique among all collectors).
  Status ParseCollectorName(const Entry& e, std::string* name) {
    if (Status s = ReadString(e, name); !s.ok()) return s;
    if (!IsLabelName(*name)) {
      return Expected(e,
                      "a name of 1 to 64 characters from A-Z a-z 0-9 _ . - (not starting with .)");
    }
    if (*name == "synth") return Fail(e, "the name synth is reserved for collectors.synth");
    if (auto [it, added] = collector_names_.emplace(*name, e.path); !added) {
      return Fail(e, "the name \"" + *name + "\" is already used by " + it->second);
    }
    return Status::Ok();
  }

  // Errors for the required keys of a list item that were not given.
  Status RequireKeys(const Entry& item, std::initializer_list<std::string_view> keys) const {
    for (std::string_view key : keys) {
      if (!item.node[std::string(key)].IsDefined()) {
        return Fail(Join(item.path, std::string(key)), item.mark, "required key missing");
      }
    }
    return Status::Ok();
  }

  static std::string NonEmptyPath(const std::string& path) {
    return path.empty() ? "expected a path or glob, got an empty string" : "";
  }

  Status RequireNonEmptyList(const Entry& e, bool empty) const {
    return empty ? Expected(e, "at least one item") : Status::Ok();
  }

  Status ParseTraceFile(const Entry& item, TraceFileSettings* trace) {
    Status status = ForEachKey(item, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "collectors.trace_files[].name") return ParseCollectorName(e, &trace->name);
      if (k == "collectors.trace_files[].paths") {
        if (Status s = ReadStringList(e, &trace->paths, NonEmptyPath); !s.ok()) return s;
        return RequireNonEmptyList(e, trace->paths.empty());
      }
      if (k == "collectors.trace_files[].start_at") {
        return ReadChoice(e, kStartAts, &trace->start_at);
      }
      if (k == "collectors.trace_files[].checkpoint") return ParseCheckpoint(e, &trace->checkpoint);
      if (k == "collectors.trace_files[].timestamp_unit") {
        return ReadChoice(e, kTimestampUnits, &trace->timestamp_unit);
      }
      if (k == "collectors.trace_files[].tenant_fields") {
        return ReadStringList(e, &trace->tenant_fields, [](const std::string& field) {
          bool bad = field.empty() || field.find_first_of("\"\\") != std::string::npos;
          return bad ? std::string("expected a field name without '\"' or '\\'") : std::string();
        });
      }
      if (k == "collectors.trace_files[].max_line_bytes") {
        return ReadSize(e, 1, 1ull << 30, &trace->max_line_bytes);
      }
      if (k == "collectors.trace_files[].poll_interval") {
        return ReadDuration(e, true, &trace->poll_interval_seconds);
      }
      return Unhandled(e);
    });
    if (!status.ok()) return status;
    return RequireKeys(item, {"name", "paths"});
  }

  // A checkpoint file may serve one collector only.
  Status ParseCheckpoint(const Entry& e, std::string* checkpoint) {
    if (Status s = ReadString(e, checkpoint); !s.ok()) return s;
    if (checkpoint->empty()) return Status::Ok();
    if (auto [it, added] = checkpoints_.emplace(*checkpoint, e.path); !added) {
      return Fail(e, "the checkpoint \"" + *checkpoint + "\" is already used by " + it->second);
    }
    return Status::Ok();
  }

  static std::string ZmqEndpointProblem(const std::string& endpoint) {
    if (IsZmqEndpoint(endpoint)) return "";
    return "expected a ZeroMQ endpoint starting with tcp://, ipc:// or inproc://, got \"" +
           endpoint + "\"";
  }

  Status ParseKvEvents(const Entry& item, KvEventsSettings* events) {
    Status status = ForEachKey(item, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "collectors.kv_events[].name") return ParseCollectorName(e, &events->name);
      if (k == "collectors.kv_events[].endpoints") {
        if (Status s = ReadStringList(e, &events->endpoints, ZmqEndpointProblem); !s.ok()) return s;
        return RequireNonEmptyList(e, events->endpoints.empty());
      }
      if (k == "collectors.kv_events[].topic") return ReadString(e, &events->topic);
      if (k == "collectors.kv_events[].replay_endpoint") {
        if (Status s = ReadString(e, &events->replay_endpoint); !s.ok()) return s;
        if (events->replay_endpoint.empty()) return Status::Ok();
        std::string problem = ZmqEndpointProblem(events->replay_endpoint);
        return problem.empty() ? Status::Ok() : Fail(e, problem);
      }
      if (k == "collectors.kv_events[].bind") return ReadBool(e, &events->bind);
      return Unhandled(e);
    });
    if (!status.ok()) return status;
    return RequireKeys(item, {"name", "endpoints"});
  }

  Status ParseEngineLog(const Entry& item, EngineLogSettings* log) {
    Status status = ForEachKey(item, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "collectors.engine_log[].name") return ParseCollectorName(e, &log->name);
      if (k == "collectors.engine_log[].paths") {
        if (Status s = ReadStringList(e, &log->paths, NonEmptyPath); !s.ok()) return s;
        return RequireNonEmptyList(e, log->paths.empty());
      }
      if (k == "collectors.engine_log[].engine") return ReadChoice(e, kLogEngines, &log->engine);
      return Unhandled(e);
    });
    if (!status.ok()) return status;
    return RequireKeys(item, {"name", "paths"});
  }

  Status ParseEngineMetrics(const Entry& item, EngineMetricsSettings* metrics) {
    Status status = ForEachKey(item, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "collectors.engine_metrics[].name") return ParseCollectorName(e, &metrics->name);
      if (k == "collectors.engine_metrics[].url") {
        if (Status s = ReadString(e, &metrics->url); !s.ok()) return s;
        return IsHttpUrl(metrics->url) ? Status::Ok() : Expected(e, "an http:// or https:// URL");
      }
      if (k == "collectors.engine_metrics[].interval") {
        return ReadDuration(e, true, &metrics->interval_seconds);
      }
      if (k == "collectors.engine_metrics[].timeout") {
        return ReadDuration(e, true, &metrics->timeout_seconds);
      }
      return Unhandled(e);
    });
    if (!status.ok()) return status;
    if (Status s = RequireKeys(item, {"name", "url"}); !s.ok()) return s;
    if (metrics->timeout_seconds > metrics->interval_seconds) {
      std::string timeout = item.path + ".timeout";
      return Fail(timeout, MarkOf(timeout, item.mark),
                  NumberText(metrics->timeout_seconds) + "s is longer than interval (" +
                      NumberText(metrics->interval_seconds) + "s)");
    }
    return Status::Ok();
  }

  static std::string HttpUrlProblem(const std::string& url) {
    return IsHttpUrl(url) ? "" : "expected an http:// or https:// URL, got \"" + url + "\"";
  }

  Status ParseAlerts(const Entry& section, AlertSettings* alerts) {
    return ForEachKey(section, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "alerts.enabled") return ReadBool(e, &alerts->enabled);
      if (k == "alerts.alertmanagers") {
        return ReadStringList(e, &alerts->alertmanagers, HttpUrlProblem);
      }
      if (k == "alerts.webhooks") return ReadStringList(e, &alerts->webhooks, HttpUrlProblem);
      if (k == "alerts.resend_interval") {
        return ReadDuration(e, true, &alerts->resend_interval_seconds);
      }
      if (k == "alerts.evaluation_interval") {
        return ReadDuration(e, true, &alerts->evaluation_interval_seconds);
      }
      if (k == "alerts.timeout") return ReadDuration(e, true, &alerts->timeout_seconds);
      if (k == "alerts.short_window") return ReadWholeSeconds(e, 1, &alerts->short_window_seconds);
      if (k == "alerts.baseline_window") {
        return ReadWholeSeconds(e, 1, &alerts->baseline_window_seconds);
      }
      if (k == "alerts.knee_shift") return ParseKneeShiftAlert(e, &alerts->knee_shift);
      if (k == "alerts.over_capacity") return ParseOverCapacityAlert(e, &alerts->over_capacity);
      if (k == "alerts.rate_shift") return ParseRateShiftAlert(e, &alerts->rate_shift);
      if (k == "alerts.drift") return ParseDriftAlert(e, &alerts->drift);
      return Unhandled(e);
    });
  }

  // A detector's firing and clearing thresholds: fire > 0, 0 <= clear <= fire.
  Status ReadThreshold(const Entry& e, bool fire, double* out) const {
    return fire ? ReadNumber(e, Positive, "> 0", out) : ReadNumber(e, NonNegative, ">= 0", out);
  }
  Status CheckHysteresis(const Entry& section, double fire, double clear) const {
    if (clear <= fire) return Status::Ok();
    const std::string path = section.path + ".clear_threshold";
    return Fail(path, MarkOf(path, section.mark),
                "expected at most fire_threshold (" + NumberText(fire) + ") for hysteresis, got " +
                    NumberText(clear));
  }
  Status ReadMinRequests(const Entry& e, std::uint64_t* out) const {
    return ReadInt(e, 0, std::numeric_limits<std::int64_t>::max(), out);
  }

  Status ParseKneeShiftAlert(const Entry& section, KneeShiftAlertSettings* a) {
    Status status = ForEachKey(section, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "alerts.knee_shift.enabled") return ReadBool(e, &a->enabled);
      if (k == "alerts.knee_shift.fire_threshold") {
        return ReadThreshold(e, true, &a->fire_threshold);
      }
      if (k == "alerts.knee_shift.clear_threshold") {
        return ReadThreshold(e, false, &a->clear_threshold);
      }
      if (k == "alerts.knee_shift.min_shift_pages") {
        return ReadNumber(e, NonNegative, ">= 0", &a->min_shift_pages);
      }
      if (k == "alerts.knee_shift.min_requests") return ReadMinRequests(e, &a->min_requests);
      if (k == "alerts.knee_shift.min_baseline_requests") {
        return ReadMinRequests(e, &a->min_baseline_requests);
      }
      if (k == "alerts.knee_shift.for") return ReadWholeSeconds(e, 0, &a->for_seconds);
      return Unhandled(e);
    });
    if (!status.ok()) return status;
    return CheckHysteresis(section, a->fire_threshold, a->clear_threshold);
  }

  Status ParseOverCapacityAlert(const Entry& section, OverCapacityAlertSettings* a) {
    Status status = ForEachKey(section, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "alerts.over_capacity.enabled") return ReadBool(e, &a->enabled);
      if (k == "alerts.over_capacity.target") return ReadChoice(e, kWorkingSetTargets, &a->target);
      if (k == "alerts.over_capacity.fraction") return ReadFraction(e, &a->fraction);
      if (k == "alerts.over_capacity.fire_threshold") {
        return ReadThreshold(e, true, &a->fire_threshold);
      }
      if (k == "alerts.over_capacity.clear_threshold") {
        return ReadThreshold(e, false, &a->clear_threshold);
      }
      if (k == "alerts.over_capacity.min_requests") return ReadMinRequests(e, &a->min_requests);
      if (k == "alerts.over_capacity.for") return ReadWholeSeconds(e, 0, &a->for_seconds);
      return Unhandled(e);
    });
    if (!status.ok()) return status;
    return CheckHysteresis(section, a->fire_threshold, a->clear_threshold);
  }

  Status ParseRateShiftAlert(const Entry& section, RateShiftAlertSettings* a) {
    Status status = ForEachKey(section, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "alerts.rate_shift.enabled") return ReadBool(e, &a->enabled);
      if (k == "alerts.rate_shift.fire_threshold") {
        return ReadThreshold(e, true, &a->fire_threshold);
      }
      if (k == "alerts.rate_shift.clear_threshold") {
        return ReadThreshold(e, false, &a->clear_threshold);
      }
      if (k == "alerts.rate_shift.min_requests") return ReadMinRequests(e, &a->min_requests);
      if (k == "alerts.rate_shift.for") return ReadWholeSeconds(e, 0, &a->for_seconds);
      return Unhandled(e);
    });
    if (!status.ok()) return status;
    return CheckHysteresis(section, a->fire_threshold, a->clear_threshold);
  }

  Status ParseDriftAlert(const Entry& section, DriftAlertSettings* a) {
    Status status = ForEachKey(section, [&](const Entry& e) -> Status {
      const std::string& k = e.pattern;
      if (k == "alerts.drift.enabled") return ReadBool(e, &a->enabled);
      if (k == "alerts.drift.fire_threshold") return ReadThreshold(e, true, &a->fire_threshold);
      if (k == "alerts.drift.clear_threshold") return ReadThreshold(e, false, &a->clear_threshold);
      if (k == "alerts.drift.relearn_after") {
        return ReadWholeSeconds(e, 0, &a->relearn_after_seconds);
      }
      if (k == "alerts.drift.min_requests") return ReadMinRequests(e, &a->min_requests);
      if (k == "alerts.drift.for") return ReadWholeSeconds(e, 0, &a->for_seconds);
      return Unhandled(e);
    });
    if (!status.ok()) return status;
    return CheckHysteresis(section, a->fire_threshold, a->clear_threshold);
  }

  // ---------------------------------------------------------------- cross-key rules

  // Where the key (or list item) at a concrete path is; fallback when not written.
  YAML::Mark MarkOf(const std::string& path, const YAML::Mark& fallback) const {
    auto it = key_marks_.find(path);
    return it == key_marks_.end() ? fallback : it->second;
  }
  Status FailAtPath(const std::string& path, const std::string& message) const {
    return Fail(path, MarkOf(path, YAML::Mark::null_mark()), message);
  }

  Status Resolve(AgentConfig* c) {
    if (!remembered_evictions_set_) c->engine.remembered_evictions = c->engine.max_pages;
    for (const auto& [pages, path] : capacity_paths_) {
      if (pages > c->engine.max_pages) {
        return FailAtPath(path, std::to_string(pages) + " pages is beyond engine.max_pages (" +
                                    std::to_string(c->engine.max_pages) +
                                    "), where curves are not exact; raise engine.max_pages");
      }
    }
    if (!c->curve.policies.empty()) {
      if (c->curve.capacities.empty()) {
        return FailAtPath(policies_path_, "policy canaries run at curve.capacities; give the replica's cache sizes");
      }
      std::set<std::string> names(c->curve.policies.begin(), c->curve.policies.end());
      names.insert(c->curve.engine_policy);
      if (names.size() * c->curve.capacities.size() > 64) {
        return FailAtPath(policies_path_, std::to_string(names.size() * c->curve.capacities.size()) +
                                              " canaries (policies x capacities, with curve.engine_policy); at "
                                              "most 64");
      }
    }
    if (Status s = ResolveAlertWindows(*c); !s.ok()) return s;
    return ResolveModel(*c);
  }

  // alerts.short_window < alerts.baseline_window; each, when written, one of curve.windows.
  Status ResolveAlertWindows(const AgentConfig& c) {
    const AlertSettings& a = c.alerts;
    const std::string shorter = "alerts.short_window", longer = "alerts.baseline_window";
    if (a.baseline_window_seconds <= a.short_window_seconds) {
      const bool longer_written = key_marks_.count(longer) > 0;
      return FailAtPath(longer_written ? longer : shorter,
                        "alerts.baseline_window (" + std::to_string(a.baseline_window_seconds) +
                            "s) must be longer than alerts.short_window (" +
                            std::to_string(a.short_window_seconds) + "s)");
    }
    for (const auto& [path, seconds] : {std::pair{shorter, a.short_window_seconds},
                                        std::pair{longer, a.baseline_window_seconds}}) {
      if (key_marks_.count(path) == 0) continue;
      std::string names;
      bool found = false;
      for (const CurveWindow& w : c.curve.windows) {
        found = found || w.seconds == static_cast<double>(seconds);
        names += (names.empty() ? "" : ", ") + w.name;
      }
      if (!found) {
        return FailAtPath(path, "expected one of curve.windows (" + names +
                                    "): the knee and the working set are read from that curve");
      }
    }
    return Status::Ok();
  }

  Status ResolveModel(const AgentConfig& c) {
    const bool from_spec = !c.model.empty() || !c.model_config.empty();
    const std::string why = c.bytes_per_token
                                ? "does not apply to bytes_per_token, which is per rank as given"
                                : "applies to model or model_config, and neither is set";
    if (!from_spec && !c.kv_dtype.empty()) return FailAtPath("kv_dtype", why);
    if (!from_spec && c.tensor_parallel != 1) return FailAtPath("tensor_parallel", why);
    if (c.model.empty()) return Status::Ok();
    Result<curve::ModelSpec> spec = curve::LookupModelPreset(c.model);
    if (!spec.ok()) return FailAtPath("model", spec.error());
    Result<std::uint64_t> bytes = curve::BytesPerTokenPerRank(spec.value(), c.tensor_parallel);
    if (!bytes.ok()) {
      return FailAtPath(c.tensor_parallel != 1 ? "tensor_parallel" : "model", bytes.error());
    }
    return Status::Ok();
  }

  std::string source_;
  std::map<std::string, YAML::Mark> key_marks_;  // concrete path -> where its key is
  std::string model_source_;                     // the model key already set, if any
  bool remembered_evictions_set_ = false;
  std::vector<std::pair<std::uint64_t, std::string>> capacity_paths_;  // document order
  std::string policies_path_ = "curve.policies";
  std::map<std::string, std::string> collector_names_;  // name -> path of its name key
  std::map<std::string, std::string> checkpoints_;      // checkpoint -> path
};

// ------------------------------------------------------------------ Reference

std::string EscapeCell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::span<const ConfigKey> ConfigKeys() { return kKeys; }

const ConfigKey* FindConfigKey(std::string_view path) {
  for (const ConfigKey& key : kKeys) {
    if (key.path == path) return &key;
  }
  return nullptr;
}

std::string_view ConfigTypeName(ConfigType type) {
  switch (type) {
    case Type::kString:
      return "string";
    case Type::kBool:
      return "boolean";
    case Type::kInt:
      return "integer";
    case Type::kNumber:
      return "number";
    case Type::kDuration:
      return "duration";
    case Type::kSize:
      return "size";
    case Type::kStringList:
      return "list of strings";
    case Type::kIntList:
      return "list of integers";
    case Type::kNumberList:
      return "list of numbers";
    case Type::kDurationList:
      return "list of durations";
    case Type::kMap:
      return "map";
    case Type::kMapList:
      return "list of maps";
  }
  return "?";
}

std::string ConfigReferenceMarkdown() {
  std::string out =
      "| key | type | default | meaning |\n"
      "|---|---|---|---|\n";
  for (const ConfigKey& key : kKeys) {
    std::string default_cell(key.default_text);
    if (key.default_is_literal) default_cell = "`" + default_cell + "`";
    out.append("| `").append(key.path).append("` | ").append(ConfigTypeName(key.type));
    out.append(" | ").append(EscapeCell(default_cell));
    out.append(" | ").append(EscapeCell(key.description)).append(" |\n");
  }
  out +=
      "\n"
      "`a[].b` is key `b` of every item of the list `a`. Durations are numbers with units\n"
      "`ms`, `s`, `m`, `h` or `d`, such as `250ms`, `30s` or `1h30m`. Sizes are a byte count\n"
      "or an integer with a unit `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024) or `KB`, `MB`,\n"
      "`GB`, `TB` (powers of 1000), such as `64KiB`. Unknown keys, values of the wrong type\n"
      "and values out of range are errors that name the key and its line.\n";
  return out;
}

curve::EngineOptions ToEngineOptions(const EngineSettings& engine) {
  curve::EngineOptions options;
  options.max_pages = engine.max_pages;
  options.touch_order = engine.touch_order;
  options.remembered_evictions = engine.remembered_evictions;
  return options;
}

AgentConfig DefaultAgentConfig() {
  AgentConfig config;
  config.engine.remembered_evictions = config.engine.max_pages;
  return config;
}

Result<AgentConfig> ParseAgentConfig(std::string_view yaml_text, std::string_view source_name) {
  return Parser(source_name).Parse(yaml_text);
}

Result<AgentConfig> LoadAgentConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Result<AgentConfig>::Error(path +
                                      ": cannot open the agent config: " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Result<AgentConfig>::Error(path + ": cannot read the agent config");
  return ParseAgentConfig(text.str(), path);
}

std::string_view StartAtName(StartAt start_at) {
  for (const auto& choice : kStartAts) {
    if (choice.value == start_at) return choice.name;
  }
  return "?";
}

std::string_view WorkingSetTargetName(WorkingSetTarget target) {
  for (const auto& choice : kWorkingSetTargets) {
    if (choice.value == target) return choice.name;
  }
  return "?";
}

std::string_view LogEngineName(LogEngine engine) {
  for (const auto& choice : kLogEngines) {
    if (choice.value == engine) return choice.name;
  }
  return "?";
}

}  // namespace kvwatch::config
