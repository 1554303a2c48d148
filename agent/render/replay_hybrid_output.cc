#include "agent/render/replay_hybrid_output.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "agent/render/api_json.h"
#include "agent/render/text_format.h"

namespace kvwatch::agent {

void WriteHybridJson(base::JsonWriter& w, const ReplayHybrid& h) {
  w.BeginObject();
  WriteHybridCurveFields(w, h.unit_bytes, h.full_count_bytes_per_token, h.groups, h.report);
  if (!h.pool_shares.empty()) {
    w.Key("pool_shares");
    w.BeginArray();
    for (std::uint64_t s : h.pool_shares) w.Uint(s);
    w.EndArray();
  }
  w.Key("group_bytes");
  w.BeginObject();
  w.Key("samples");
  w.Uint(h.samples);
  w.Key("rows");
  w.BeginArray();
  for (const HybridOccupancy& row : h.occupancy) {
    w.BeginObject();
    w.Key("capacity_units");
    w.Uint(row.capacity_units);
    w.Key("capacity_bytes");
    w.Number(row.capacity_bytes);
    w.Key("bytes");
    w.BeginArray();
    for (double b : row.group_bytes) w.Number(b);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.Key("engine_memory_bytes");
  w.Uint(h.engine_bytes);
  if (!h.check.empty()) {
    w.Key("check");
    w.BeginArray();
    for (const HybridCheckRow& row : h.check) {
      w.BeginObject();
      w.Key("fraction");
      w.Number(row.fraction);
      w.Key("capacity_units");
      w.Uint(row.capacity_units);
      w.Key("capacity_bytes");
      w.Number(row.capacity_bytes);
      w.Key("page_hit_ratio");
      w.BeginObject();
      for (std::size_t i = 0; i < row.page_hit_ratio.size(); ++i) {
        w.Key(kHybridCheckVariants[i]);
        w.Number(row.page_hit_ratio[i]);
      }
      w.EndObject();
      w.Key("vllm_overflows");
      w.Uint(row.vllm_overflows);
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
}

namespace {

// The pool or pools, each group's sizes, the full-attention count and the knee.
void WriteHybridGroups(std::ostringstream& out, const ReplayHybrid& h) {
  const curve::CurveReport& t = h.report;
  if (h.pool_shares.empty()) {
    out << "\nhybrid KV cache groups (one pool of " << HumanBytes(h.unit_bytes)
        << " units; every capacity per GPU rank)\n";
  } else {
    out << "\nhybrid KV cache groups (a pool per group, shares";
    for (std::size_t g = 0; g < h.pool_shares.size(); ++g) out << (g == 0 ? " " : ":") << h.pool_shares[g];
    out << " of the capacity, in units of " << HumanBytes(h.unit_bytes) << "; every capacity per GPU rank)\n";
  }
  out << Pad("group", 16, true) << Pad("layers", 8) << Pad("window", 14) << Pad("per token", 12) << Pad("per page", 12)
      << "\n";
  for (const curve::KvGroupSizing& g : h.groups) {
    const std::string window = g.spec.window_tokens > 0 ? Grouped(g.spec.window_tokens) + " tokens" : "-";
    out << Pad(curve::KvGroupKindName(g.spec.kind), 16, true) << Pad(std::to_string(g.spec.layers), 8)
        << Pad(window, 14) << Pad(g.bytes_per_token > 0 ? HumanBytes(static_cast<double>(g.bytes_per_token)) : "-", 12)
        << Pad(HumanBytes(static_cast<double>(g.page_bytes)), 12) << "\n";
  }
  out << "counted as all full attention: " << HumanBytes(h.full_count_bytes_per_token) << " per token\n";
  if (t.knee && t.knee_bytes) {
    out << "hybrid knee: " << HumanBytes(*t.knee_bytes) << ", page hit ratio " << Fixed(t.knee->page_hit_ratio, 4)
        << "\n";
  }
}

// The bytes of report r's working set for target at fraction f, if converged.
std::optional<double> WorkingSetBytes(const curve::CurveReport& r, const std::string& target, double f) {
  for (const auto& e : r.working_set) {
    if (e.target == target && std::fabs(e.fraction - f) < 1e-12) return e.bytes;
  }
  return std::nullopt;
}

// Per target fraction: the hybrid working set beside the full-attention count's.
void WriteHybridWorkingSets(std::ostringstream& out, const ReplayHybrid& h, const curve::CurveReport& main_report) {
  const curve::CurveReport& t = h.report;
  out << "\nworking set in bytes: hybrid rule beside the full-attention count\n";
  out << Pad("target", 8) << Pad("page hits: hybrid", 19) << Pad("full count", 12) << Pad("ratio", 8)
      << Pad("coverage: hybrid", 18) << Pad("full count", 12) << "\n";
  auto cell = [](std::optional<double> b, std::size_t width) {
    return Pad(b ? HumanBytes(*b) : "not converged", width);
  };
  std::vector<double> fractions;
  for (const auto& e : t.working_set) {
    if (std::find(fractions.begin(), fractions.end(), e.fraction) == fractions.end()) fractions.push_back(e.fraction);
  }
  for (double f : fractions) {
    const std::optional<double> hybrid = WorkingSetBytes(t, "page_hit", f);
    const std::optional<double> full = WorkingSetBytes(main_report, "page_hit", f);
    out << Pad(FractionLabel(f), 8) << cell(hybrid, 19) << cell(full, 12)
        << Pad(hybrid && full && *full > 0 ? Fixed(*hybrid / *full, 3) : "-", 8)
        << cell(WorkingSetBytes(t, "request_coverage", f), 18)
        << cell(WorkingSetBytes(main_report, "request_coverage", f), 12) << "\n";
  }
}

// With --hybrid-check: the page hit ratio of each simulated variant at the
// working sets.
void WriteHybridCheck(std::ostringstream& out, const ReplayHybrid& h) {
  if (h.check.empty()) return;
  out << "\n--hybrid-check: page hit ratio at the hybrid working sets, one-pass model against vLLM's step "
         "behaviours simulated\n";
  auto width = [](const char* v) { return std::max<std::size_t>(std::string(v).size(), 6) + 2; };
  out << Pad("target", 8) << Pad("pool", 12);
  for (const char* v : kHybridCheckVariants) out << Pad(v, width(v));
  out << Pad("overflows", 11) << "\n";
  for (const HybridCheckRow& row : h.check) {
    out << Pad(FractionLabel(row.fraction), 8) << Pad(HumanBytes(row.capacity_bytes), 12);
    for (std::size_t i = 0; i < row.page_hit_ratio.size(); ++i) {
      out << Pad(Fixed(row.page_hit_ratio[i], 4), width(kHybridCheckVariants[i]));
    }
    out << Pad(Grouped(static_cast<double>(row.vllm_overflows)), 11) << "\n";
  }
}

}  // namespace

void FormatHybridTable(std::ostringstream& out, const ReplayHybrid& h, const curve::CurveReport& main_report) {
  WriteHybridGroups(out, h);
  WriteHybridWorkingSets(out, h, main_report);
  out << "\nhybrid capacity curve\n";
  out << Pad("bytes", 12) << Pad("page hit", 10) << Pad("coverage", 10) << "\n";
  for (const auto& p : h.report.points) {
    out << Pad(HumanBytes(p.capacity_bytes.value_or(0)), 12) << Pad(Fixed(p.page_hit_ratio, 4), 10)
        << Pad(Fixed(p.request_coverage, 4), 10) << "\n";
  }
  WriteHybridCheck(out, h);
  out << "\nbytes held per group in a pool of each size (mean over " << Grouped(static_cast<double>(h.samples))
      << " states of the run)\n";
  out << Pad("pool", 12);
  for (const curve::KvGroupSizing& g : h.groups) out << Pad(curve::KvGroupKindName(g.spec.kind), 16);
  out << "\n";
  for (const HybridOccupancy& row : h.occupancy) {
    out << Pad(HumanBytes(row.capacity_bytes), 12);
    for (double b : row.group_bytes) out << Pad(HumanBytes(b), 16);
    out << "\n";
  }
}

}  // namespace kvwatch::agent
