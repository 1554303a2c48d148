// CurveReport: the capacity worksheet of a set of requests, as plain data that the
// replay command prints as a table, JSON, CSV or SVG and the agent serves. Every
// field follows docs/semantics.md; JSON names are in section 7.
//
// Thread safety: plain values.
#ifndef KVWATCH_CURVE_REPORT_H_
#define KVWATCH_CURVE_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "curve/bucketed_curve.h"
#include "curve/curve_accumulator.h"
#include "curve/knee.h"
#include "curve/tiers.h"

namespace kvwatch::curve {

// The standard targets printed for both metrics.
inline const std::vector<double> kStandardTargets = {0.5, 0.8, 0.9, 0.95, 0.99, 0.999};

struct ReportOptions {
  // Capacities to report; empty means a 1-2-5 series up to the curve's end.
  std::vector<std::uint64_t> capacities;
  std::vector<double> page_hit_targets = kStandardTargets;
  std::vector<double> coverage_targets = kStandardTargets;
  std::uint64_t page_tokens = 16;
  // Bytes per token per GPU rank; unset when no model or byte size is known.
  std::optional<double> bytes_per_token;
  // Depth-weighted prefill cost; unset when no model is known.
  std::optional<PrefillCost> prefill_cost;
  // Prefill throughput in FLOP/s, to give avoided prefill in seconds.
  std::optional<double> prefill_flops_per_s;
  double knee_sensitivity = 1.0;
  // Samples of the knee's uniform capacity grid from 0 to the 99.9% point.
  std::uint32_t knee_grid_points = 200;
  // Points of the log-spaced series for plots.
  std::uint32_t plot_points = 96;
  // Page counts are multiplied by this (1 / rate in sampled mode).
  double count_scale = 1.0;
  // Sampled capacities (in sampled mode) are not exact integers: say so.
  bool sampled = false;
};

struct CurvePoint {
  std::uint64_t capacity_pages = 0;
  double page_hits = 0;  // an integer except in sampled mode (an estimate)
  double page_hit_ratio = 0;
  double request_coverage = 0;
  double reused_tokens = 0;
  std::optional<double> capacity_bytes;
  std::optional<double> avoided_prefill_flops;
  std::optional<double> avoided_prefill_seconds;
};

struct WorkingSetEntry {
  std::string target;  // "page_hit" or "request_coverage"
  double fraction = 0;
  std::optional<std::uint64_t> capacity_pages;  // nullopt: not converged
  std::optional<double> bytes;
};

struct CurveReport {
  std::uint64_t requests = 0;
  double page_refs = 0;
  double unlimited_page_hits = 0;
  double unlimited_page_hit_ratio = 0;
  double cold_misses = 0;
  double beyond_tracked = 0;
  std::uint64_t max_capacity = 0;  // the curve is flat beyond it
  std::vector<CurvePoint> points;
  std::vector<WorkingSetEntry> working_set;
  std::optional<CapacityKnee> knee;
  std::optional<double> knee_bytes;
  std::vector<CurvePoint> plot;  // log-spaced, for plots
};

CurveReport BuildCurveReport(const CurveAccumulator& acc, const ReportOptions& options);

// The same from a live window's bucketed curve. Values are exact at the bucket
// bounds; at other capacities they are those of the largest bound below. The plot
// has one point per bound up to the curve's end. The knee is computed on the
// uniform grid with page hits interpolated linearly between bounds, and only when
// the curve has at least knee_min_requests requests.
CurveReport BuildBucketedReport(const BucketedCurve& curve, const ReportOptions& options,
                                std::uint64_t knee_min_requests);

// The point of the curve at one capacity.
CurvePoint PointAt(const CurveAccumulator& acc, std::uint64_t capacity, const ReportOptions& options);

// 1, 2, 5, 10, 20, 50, ... up to and including max_capacity (which is appended).
std::vector<std::uint64_t> DefaultCapacities(std::uint64_t max_capacity);
// About n capacities spaced evenly on a log axis from 1 to max_capacity.
std::vector<std::uint64_t> LogSpacedCapacities(std::uint64_t max_capacity, std::uint32_t n);

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_REPORT_H_
