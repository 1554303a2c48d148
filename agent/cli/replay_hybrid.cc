#include "agent/cli/replay_hybrid.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "agent/render/api_json.h"
#include "agent/render/text_format.h"
#include "curve/hybrid_sim.h"

namespace kvwatch::agent {

HybridReplay::HybridReplay(const curve::HybridEngineOptions& options, std::vector<curve::KvGroupSizing> groups,
                           double coverage_share, bool check)
    : engine_(options), groups_(std::move(groups)), acc_(coverage_share), check_(check) {}

void HybridReplay::Add(std::span<const curve::PageId> pages, std::int64_t input_tokens, std::int64_t output_tokens) {
  if (check_) {
    pages_.insert(pages_.end(), pages.begin(), pages.end());
    ends_.push_back(pages_.size());
    tokens_.emplace_back(input_tokens, output_tokens);
  }
  engine_.Process(pages, input_tokens, output_tokens, &outcome_);
  acc_.Add(outcome_);
  if (++requests_ % kSampleEvery == 0) Sample(&occupancy_);
}

// Adds the bytes each group holds at 1, 2, 4, ... units, up to the first
// capacity that holds everything. A row that appears later starts with the
// earlier samples' totals: a pool that large held everything then.
void HybridReplay::Sample(Occupancy* o) const {
  const std::vector<std::uint64_t> all = engine_.GroupBytesAt(std::numeric_limits<std::uint64_t>::max());
  if (o->all.empty()) o->all.assign(all.size(), 0);
  const std::uint64_t unit = engine_.unit_bytes();
  const std::uint64_t everything_from = (engine_.total_bytes() + unit - 1) / unit;
  for (std::size_t k = 0; k < 64; ++k) {
    const std::uint64_t units = std::uint64_t{1} << k;
    if (k == o->rows.size()) o->rows.push_back(o->all);
    const bool everything = units >= everything_from;
    const std::vector<std::uint64_t> held = everything ? all : engine_.GroupBytesAt(units * unit);
    for (std::size_t g = 0; g < held.size(); ++g) o->rows[k][g] += static_cast<double>(held[g]);
    if (everything) {
      for (std::size_t j = k + 1; j < o->rows.size(); ++j) {
        for (std::size_t g = 0; g < all.size(); ++g) o->rows[j][g] += static_cast<double>(all[g]);
      }
      break;
    }
  }
  for (std::size_t g = 0; g < all.size(); ++g) o->all[g] += static_cast<double>(all[g]);
  ++o->samples;
}

ReplayHybrid HybridReplay::Result(const curve::ReportOptions& main, double full_count_bytes_per_token) const {
  // The state at the end counts too, when the last sample is older.
  Occupancy occupancy = occupancy_;
  if (requests_ % kSampleEvery != 0) Sample(&occupancy);
  ReplayHybrid h;
  h.groups = groups_;
  h.unit_bytes = static_cast<double>(engine_.unit_bytes());
  curve::ReportOptions options = main;
  options.capacities.clear();  // the main capacities are pages of the full-attention count
  options.bytes_per_token = h.unit_bytes / static_cast<double>(engine_.options().page_tokens);
  h.report = curve::BuildCurveReport(acc_, options);
  h.report.requests = requests_;
  h.full_count_bytes_per_token = full_count_bytes_per_token;
  h.samples = occupancy.samples;
  h.engine_bytes = engine_.MemoryBytes();
  for (std::size_t k = 0; k < occupancy.rows.size(); ++k) {
    HybridOccupancy row;
    row.capacity_units = std::uint64_t{1} << k;
    row.capacity_bytes = static_cast<double>(row.capacity_units) * h.unit_bytes;
    for (double sum : occupancy.rows[k]) {
      row.group_bytes.push_back(occupancy.samples > 0 ? sum / static_cast<double>(occupancy.samples) : 0);
    }
    h.occupancy.push_back(std::move(row));
  }
  if (check_) RunCheck(&h);
  return h;
}

// One simulation per variant per capacity: the hybrid page-hit working sets.
void HybridReplay::RunCheck(ReplayHybrid* h) const {
  struct Variant {
    bool touch_skipped, early_free, cap_prompt;
  };
  const Variant variants[] = {
      {true, true, false}, {true, false, false}, {false, true, false}, {true, true, true}, {false, true, true}};
  for (const curve::WorkingSetEntry& e : h->report.working_set) {
    if (e.target != "page_hit" || !e.capacity_pages || e.fraction > 0.99) continue;
    HybridCheckRow row;
    row.fraction = e.fraction;
    row.capacity_units = *e.capacity_pages;
    row.capacity_bytes = static_cast<double>(row.capacity_units) * h->unit_bytes;
    const double refs = static_cast<double>(acc_.page_refs());
    row.page_hit_ratio.push_back(refs > 0 ? static_cast<double>(acc_.PageHits(row.capacity_units)) / refs : 0);
    for (const Variant& v : variants) {
      curve::HybridSimOptions options;
      options.engine = engine_.options();
      options.touch_skipped = v.touch_skipped;
      options.early_free = v.early_free;
      options.cap_prompt = v.cap_prompt;
      curve::HybridPoolSim sim(options, row.capacity_units * engine_.unit_bytes());
      std::size_t begin = 0;
      for (std::size_t r = 0; r < ends_.size(); ++r) {
        sim.Request(std::span<const curve::PageId>(pages_.data() + begin, ends_[r] - begin), tokens_[r].first,
                    tokens_[r].second);
        begin = ends_[r];
      }
      row.page_hit_ratio.push_back(
          sim.page_refs() > 0 ? static_cast<double>(sim.page_hits()) / static_cast<double>(sim.page_refs()) : 0);
      if (!v.touch_skipped && v.early_free && v.cap_prompt) row.vllm_overflows = sim.overflows();
    }
    h->check.push_back(std::move(row));
  }
}

void WriteHybridJson(base::JsonWriter& w, const ReplayHybrid& h) {
  w.BeginObject();
  WriteHybridCurveFields(w, h.unit_bytes, h.full_count_bytes_per_token, h.groups, h.report);
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

void FormatHybridTable(std::ostringstream& out, const ReplayHybrid& h, const curve::CurveReport& main_report) {
  const curve::CurveReport& t = h.report;
  out << "\nhybrid KV cache groups (one pool of " << HumanBytes(h.unit_bytes)
      << " units; every capacity per GPU rank)\n";
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
  out << "\nworking set in bytes: hybrid rule beside the full-attention count\n";
  out << Pad("target", 8) << Pad("page hits: hybrid", 19) << Pad("full count", 12) << Pad("ratio", 8)
      << Pad("coverage: hybrid", 18) << Pad("full count", 12) << "\n";
  auto bytes_of = [](const curve::CurveReport& r, const std::string& target, double f) -> std::optional<double> {
    for (const auto& e : r.working_set) {
      if (e.target == target && std::fabs(e.fraction - f) < 1e-12) return e.bytes;
    }
    return std::nullopt;
  };
  auto cell = [](std::optional<double> b, std::size_t width) {
    return Pad(b ? HumanBytes(*b) : "not converged", width);
  };
  std::vector<double> fractions;
  for (const auto& e : t.working_set) {
    if (std::find(fractions.begin(), fractions.end(), e.fraction) == fractions.end()) fractions.push_back(e.fraction);
  }
  for (double f : fractions) {
    const std::optional<double> hybrid = bytes_of(t, "page_hit", f);
    const std::optional<double> full = bytes_of(main_report, "page_hit", f);
    out << Pad(FractionLabel(f), 8) << cell(hybrid, 19) << cell(full, 12)
        << Pad(hybrid && full && *full > 0 ? Fixed(*hybrid / *full, 3) : "-", 8)
        << cell(bytes_of(t, "request_coverage", f), 18) << cell(bytes_of(main_report, "request_coverage", f), 12)
        << "\n";
  }
  out << "\nhybrid capacity curve\n";
  out << Pad("bytes", 12) << Pad("page hit", 10) << Pad("coverage", 10) << "\n";
  for (const auto& p : t.points) {
    out << Pad(HumanBytes(p.capacity_bytes.value_or(0)), 12) << Pad(Fixed(p.page_hit_ratio, 4), 10)
        << Pad(Fixed(p.request_coverage, 4), 10) << "\n";
  }
  if (!h.check.empty()) {
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
