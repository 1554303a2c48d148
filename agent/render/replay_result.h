// ReplayResult: everything `kvwatch replay` computed over a trace, and its renderings
// (a table for people; JSON and CSV for scripts; an SVG plot). The JSON field names
// follow the contract of docs/semantics.md section 7: fields may be
// added, none renamed.
#ifndef KVWATCH_AGENT_RENDER_REPLAY_RESULT_H_
#define KVWATCH_AGENT_RENDER_REPLAY_RESULT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/render/replay_hybrid_output.h"
#include "agent/render/replay_policies_output.h"
#include "agent/render/text_format.h"
#include "base/json_writer.h"
#include "curve/report.h"
#include "curve/tenants.h"
#include "curve/tiers.h"

namespace kvwatch::agent {

struct ReplaySettings {
  std::string touch_order;  // "tail-first" or "head-first"
  double coverage_share = 1.0;
  std::uint64_t max_pages = 0;
  std::uint64_t page_tokens = 16;
  // Where page_tokens came from: "option" (--page-tokens), "inferred" (from the
  // records' input_length and pages, agent/cli/page_tokens.h) or "default".
  std::string page_tokens_source = "default";
  // The size most of the first records with token counts fit (none: no record
  // had them, or no size fit a majority), and how many such records it read.
  std::optional<std::uint64_t> inferred_page_tokens;
  std::uint64_t inference_records = 0;
  // Over the whole run: records with input_length and pages; of them, those
  // fitting page_tokens (under `page_rule`, the rule more of them follow), and
  // those fitting inferred_page_tokens.
  std::uint64_t token_records = 0;
  std::uint64_t fitting_records = 0;
  std::string page_rule = "ceil";  // "ceil" (partial last page) or "floor" (full pages only)
  std::uint64_t inferred_fitting_records = 0;
  std::optional<double> sample_rate;      // set in sampled mode
  std::optional<std::string> model;       // preset or config.json the bytes came from
  std::optional<double> bytes_per_token;  // per GPU rank
  std::uint32_t tensor_parallel = 1;
  double knee_sensitivity = 1.0;
};

struct ReplayInput {
  std::vector<std::string> sources;
  std::uint64_t lines = 0;
  std::uint64_t bad_lines = 0;
  std::uint64_t blank_lines = 0;
  std::uint64_t bytes = 0;
};

// One named row of the capacity plan (payload, metadata, reserve, total).
struct PlanRow {
  std::string name;
  double bytes = 0;
};

// Tenants and classes (curve/tenants.h): rows by folded label, at the
// interference capacities.
struct GroupRow {
  std::string name;
  curve::LabelTotals totals;
};
struct FootprintRow {
  std::string cls;
  std::uint64_t requests = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0;  // bytes, nearest rank
};
struct ReplayGroups {
  std::vector<std::uint64_t> capacities;
  std::uint32_t top_tenants = 8;
  bool isolated = false;
  std::vector<GroupRow> tenants;  // by label, sorted
  std::vector<GroupRow> classes;
  std::vector<std::pair<std::string, curve::CurveReport>> class_reports;  // per class, like tenants
  std::vector<FootprintRow> footprint;  // empty without token counts or bytes per token
  bool running_kv_known = false;
  double running_kv_mean_bytes = 0;
  double running_kv_peak_bytes = 0;
};

struct ReplayResult {
  ReplaySettings settings;
  ReplayInput input;
  std::uint64_t distinct_pages = 0;  // estimated (scaled) in sampled mode
  // Engine memory at the end, and bytes per tracked page.
  std::uint64_t engine_bytes = 0;
  std::uint64_t tracked_pages = 0;
  curve::CurveReport total;
  std::vector<std::pair<std::string, curve::CurveReport>> tenants;  // sorted by name
  std::vector<curve::TierTotals> tiers;
  std::uint64_t tier_total_capacity = 0;
  std::uint64_t tier_prefix_hits = 0;
  bool tier_in_time_known = false;
  std::uint64_t tier_hits_in_time = 0;
  // The capacity plan for the page-hit working set at plan_fraction, when bytes are known.
  double plan_fraction = 0.95;
  std::vector<PlanRow> plan;
  // `--policy`: the eviction policies simulated over the same requests.
  std::optional<PolicyReplayResult> policies;
  // Tenants and classes, when shown (see ReplayOptions::classes).
  std::optional<ReplayGroups> groups;
  // A hybrid model's curve under its groups' rules (agent/cli/replay_hybrid.h).
  std::optional<ReplayHybrid> hybrid;
};

// What the page size rests on, for the settings line: "512 tokens per page
// (inferred from input_length and pages: 12,031 of 12,031 records fit)".
std::string PageTokensSetting(const ReplaySettings& s);
// A warning when the records' token counts contradict the page size in use (the
// size given does not fit most records, or the inferred size fits more); nullopt
// when they do not, or carry no token counts.
std::optional<std::string> PageTokensWarning(const ReplaySettings& s);

std::string FormatJson(const ReplayResult& r);
std::string FormatCsv(const ReplayResult& r);
std::string FormatTable(const ReplayResult& r);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RENDER_REPLAY_RESULT_H_
