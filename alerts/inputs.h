// AlertInputs: the plain observations the agent hands to the alert library at each
// evaluation. Everything the detectors need is in here; the library reads no clock,
// no file and no socket.
//
// Time: every evaluation carries its own time as a TimePoint (system_clock, so it can
// be written as RFC 3339 in Alertmanager payloads). Tests use a fake time such as
// TimePoint{} + std::chrono::seconds(n). The agent should derive it from a
// monotonic clock (wall time at start + steady elapsed) so that it never goes
// backwards; an evaluation whose time is earlier than the previous one is rejected.
//
// Optional fields: std::nullopt means "not known at this evaluation" and makes the
// detectors that need the value report "no data" (they never guess).
//
// Counters are cumulative (as exported by the serving engine): the library turns
// them into rates over the short and baseline windows itself, and treats a value
// lower than the previous one as a counter reset (engine restart), like Prometheus'
// rate(): the increase across the reset is the new value.
//
// Thread safety: plain values.
#ifndef KVWATCH_ALERTS_INPUTS_H_
#define KVWATCH_ALERTS_INPUTS_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace kvwatch::alerts {

// The one time type of the library: wall-clock instants.
using TimePoint = std::chrono::system_clock::time_point;

// Cumulative counters read from the serving engine's collectors. Absent when the
// engine does not expose the counter (or it could not be read this time).
struct CounterSample {
  std::optional<double> evicted_blocks;     // KV blocks evicted from the cache
  std::optional<double> rejected_requests;  // requests refused (queue full, too long, ...)
  std::optional<double> preemptions;        // running requests preempted (KV pressure)
  // Requests received, rejected ones included: the rate detectors' traffic volume.
  std::optional<double> requests;
};

// kvwatch's own capacity-miss counters (issue 11), cumulative and sampled at the
// evaluation's `time` like CounterSample: the agent copies the values of the series
// it exports. A capacity miss at C is a page reference that would hit in an
// unlimited cache but misses in an LRU cache of C pages.
struct CapacityMissSample {
  double capacity_pages = 0;  // the label capacity_pages (a configured capacity)
  double misses = 0;          // kvwatch_capacity_misses_total{capacity_pages}
};

// One cell of the evictor matrix: capacity misses of group `victim` at
// capacity_pages attributed to group `evictor`, in pages (fractional).
struct EvictedBySample {
  std::string dimension;  // "class" or "tenant"
  std::string victim;     // sanitized group labels (top K + "other")
  std::string evictor;
  double capacity_pages = 0;
  double pages = 0;  // kvwatch_evicted_by_total{dimension, victim, evictor, capacity_pages}
};

struct CapacityMissInputs {
  // kvwatch_page_references_total: every page reference. Absent: no data.
  std::optional<double> page_references;
  // One per configured capacity; empty: no data.
  std::vector<CapacityMissSample> capacity_misses;
  // The evictor matrix (optional: without it the alert names no evictor). A cell
  // absent at one evaluation keeps its history; one absent for a whole short
  // window is forgotten.
  std::vector<EvictedBySample> evicted_by;
};

// The KV load factor (curve/kv_load.h) over the kv_load alert's window, with what
// it rests on (annotations).
struct KvLoadSample {
  double load_factor = 0;         // rho
  double sized_requests = 0;      // requests with prompt and output token counts in the window
  double arrivals_per_s = 0;      // every request of the window over its span
  double mean_token_seconds = 0;  // mean KV token-seconds of a sized request
  double capacity_tokens = 0;
  double decode_tokens_per_s = 0;
  double prefill_s = 0;  // the prefill time per request mean_token_seconds charges
};

struct AlertInputs {
  // The evaluation time. REQUIRES: not earlier than the previous evaluation's.
  TimePoint time{};

  // Kneedle knee (docs/semantics.md section 3) of the short window's and of the
  // baseline window's curve, in pages.
  std::optional<double> short_knee_pages;
  std::optional<double> baseline_knee_pages;
  // Bytes per page (page tokens * bytes per token, docs/semantics.md section 4), to
  // show pages as bytes in annotations. Absent: annotations give pages only.
  std::optional<double> bytes_per_page;

  // Working set at the configured target over the short window, in pages. Absent
  // when the target is not reached within the tracked range ("not converged").
  std::optional<double> working_set_pages;
  // The tracked range M of the engine (max pages). When the working set did not
  // converge, it is known to exceed M; if M >= capacity the shortfall is certain.
  std::optional<double> tracked_pages;
  // The replica's configured KV-cache capacity, in pages.
  std::optional<double> capacity_pages;
  // How the working-set target reads in words, e.g. "page_hit 0.95" (annotation only).
  std::string working_set_target;

  // Requests that arrived within the short and the baseline window (the volume the
  // knee and working-set numbers rest on). Absent: unknown, treated as too little.
  std::optional<double> short_window_requests;
  std::optional<double> baseline_window_requests;

  CounterSample counters;
  CapacityMissInputs capacity_misses;
  // Absent: no request with token counts in the window, or no KV capacity.
  std::optional<KvLoadSample> kv_load;
};

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_INPUTS_H_
