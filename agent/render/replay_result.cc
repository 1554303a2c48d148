#include "agent/render/replay_result.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "agent/render/api_json.h"
#include "agent/render/curve_point.h"
#include "agent/render/text_format.h"
#include "base/json_writer.h"

namespace kvwatch::agent {

namespace {

std::string HumanFlops(double f) {
  static const char* kUnits[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP", "ZFLOP"};
  int u = 0;
  while (std::fabs(f) >= 1000 && u < 7) {
    f /= 1000;
    ++u;
  }
  return Fixed(f, f < 10 ? 2 : (f < 100 ? 1 : 0)) + " " + kUnits[u];
}

double Share(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

void WriteGroupRows(base::JsonWriter& w, const std::vector<GroupRow>& rows, const ReplayGroups& g, bool isolated) {
  w.BeginArray();
  for (const GroupRow& row : rows) {
    const curve::LabelTotals& t = row.totals;
    w.BeginObject();
    w.Key("name");
    w.String(row.name);
    w.Key("requests");
    w.Uint(t.requests);
    w.Key("page_refs");
    w.Uint(t.page_refs);
    w.Key("unlimited_page_hits");
    w.Uint(t.unlimited_hits);
    w.Key("points");
    w.BeginArray();
    for (std::size_t c = 0; c < g.capacities.size(); ++c) {
      w.BeginObject();
      w.Key("capacity_pages");
      w.Uint(g.capacities[c]);
      w.Key("page_hits");
      w.Uint(t.hits[c]);
      w.Key("capacity_misses");
      w.Uint(t.capacity_misses(c));
      w.Key("capacity_miss_share");
      w.Number(Share(t.capacity_misses(c), t.page_refs));
      w.Key("unattributed_misses");
      w.Uint(t.unattributed[c]);
      if (isolated) {
        w.Key("isolated_page_hits");
        w.Uint(t.isolated_hits[c]);
        w.Key("lost_hits");
        w.Number(static_cast<double>(t.isolated_hits[c]) - static_cast<double>(t.hits[c]));
      }
      w.Key("evicted_by");
      w.BeginObject();
      for (const auto& [evictor, pages] : t.evicted_by) {
        w.Key(evictor);
        w.Number(pages[c]);
      }
      w.EndObject();
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

std::string PageTokensSetting(const ReplaySettings& s) {
  const std::string size = std::to_string(s.page_tokens) + " tokens per page";
  const std::string fit = GroupedCount(s.fitting_records) + " of " + GroupedCount(s.token_records) + " records fit";
  const std::string rule = s.page_rule == "floor" ? "full pages only" : "last page partial";
  if (s.page_tokens_source == "inferred") {
    return size + " (inferred from input_length and pages: " + fit + ", " + rule + ")";
  }
  if (s.page_tokens_source == "option") {
    if (s.token_records == 0) return size + " (--page-tokens)";
    if (s.inferred_page_tokens && *s.inferred_page_tokens != s.page_tokens) {
      return size + " (--page-tokens; " + fit + ", " + GroupedCount(s.inferred_fitting_records) + " fit " +
             std::to_string(*s.inferred_page_tokens) + ")";
    }
    return size + " (--page-tokens; " + fit + ", " + rule + ")";
  }
  if (s.token_records == 0) return size + " (the default; no input_length in the records to infer it from)";
  return size + " (the default; no size fits most records' input_length and pages: " + fit + " " +
         std::to_string(s.page_tokens) + ")";
}

std::optional<std::string> PageTokensWarning(const ReplaySettings& s) {
  if (s.token_records == 0) return std::nullopt;
  const std::string used = std::to_string(s.page_tokens);
  const std::string have = " records with input_length have ceil or floor(input_length / " + used + ") pages";
  if (s.inferred_page_tokens && *s.inferred_page_tokens != s.page_tokens &&
      s.inferred_fitting_records > s.fitting_records) {
    const std::string inferred = std::to_string(*s.inferred_page_tokens);
    return "--page-tokens " + used + " does not fit the records: " + GroupedCount(s.fitting_records) + " of " +
           GroupedCount(s.token_records) + have + ", " + GroupedCount(s.inferred_fitting_records) + " fit " + inferred +
           " tokens per page; every token and byte figure assumes " + used + " (give --page-tokens " + inferred +
           ", or none, to use " + inferred + ")";
  }
  if (s.fitting_records * 2 < s.token_records) {
    return "only " + GroupedCount(s.fitting_records) + " of " + GroupedCount(s.token_records) + have + " (" + used +
           " tokens per page: " + (s.page_tokens_source == "option" ? "--page-tokens" : s.page_tokens_source) +
           "); token and byte figures may not be the engine's";
  }
  return std::nullopt;
}

namespace {

// key: {name: the report's fields, ...}: the tenants' and the classes' curves.
void WriteReportsJson(base::JsonWriter& w, const char* key,
                      const std::vector<std::pair<std::string, curve::CurveReport>>& reports) {
  w.Key(key);
  w.BeginObject();
  for (const auto& [name, report] : reports) {
    w.Key(name);
    w.BeginObject();
    WriteCurveReportFields(w, report);
    w.EndObject();
  }
  w.EndObject();
}

// "settings": what the curve rests on (page size and its check, sampling, model).
void WriteSettingsJson(base::JsonWriter& w, const ReplaySettings& settings) {
  w.Key("settings");
  w.BeginObject();
  w.Key("touch_order");
  w.String(settings.touch_order);
  w.Key("coverage_share");
  w.Number(settings.coverage_share);
  w.Key("max_pages");
  w.Uint(settings.max_pages);
  w.Key("page_tokens");
  w.Uint(settings.page_tokens);
  w.Key("page_tokens_source");
  w.String(settings.page_tokens_source);
  w.Key("page_tokens_check");
  w.BeginObject();
  w.Key("records");
  w.Uint(settings.token_records);
  w.Key("fitting");
  w.Uint(settings.fitting_records);
  w.Key("rule");
  w.String(settings.page_rule);
  w.Key("inferred_page_tokens");
  if (settings.inferred_page_tokens) {
    w.Uint(*settings.inferred_page_tokens);
  } else {
    w.Null();
  }
  w.Key("inferred_fitting");
  if (settings.inferred_page_tokens) {
    w.Uint(settings.inferred_fitting_records);
  } else {
    w.Null();
  }
  w.Key("inference_records");
  w.Uint(settings.inference_records);
  w.EndObject();
  w.Key("sample_rate");
  w.Optional(settings.sample_rate);
  w.Key("model");
  if (settings.model) {
    w.String(*settings.model);
  } else {
    w.Null();
  }
  w.Key("bytes_per_token");
  w.Optional(settings.bytes_per_token);
  w.Key("tensor_parallel");
  w.Uint(settings.tensor_parallel);
  w.Key("knee_sensitivity");
  w.Number(settings.knee_sensitivity);
  w.EndObject();
}

// "input": the sources and their line counts.
void WriteInputJson(base::JsonWriter& w, const ReplayInput& input) {
  w.Key("input");
  w.BeginObject();
  w.Key("sources");
  w.BeginArray();
  for (const auto& s : input.sources) w.String(s);
  w.EndArray();
  w.Key("lines");
  w.Uint(input.lines);
  w.Key("bad_lines");
  w.Uint(input.bad_lines);
  w.Key("blank_lines");
  w.Uint(input.blank_lines);
  w.Key("bytes");
  w.Uint(input.bytes);
  w.EndObject();
}

// "tiers": the exclusive LRU hierarchy, per tier.
void WriteTiersJson(base::JsonWriter& w, const ReplayResult& r) {
  w.Key("tiers");
  w.BeginArray();
  for (const auto& t : r.tiers) {
    w.BeginObject();
    w.Key("name");
    w.String(t.name);
    w.Key("pages_served");
    w.Uint(t.pages_served);
    w.Key("bytes_moved");
    w.Number(t.bytes_moved);
    w.Key("hits_in_time");
    if (r.tier_in_time_known) {
      w.Uint(t.hits_in_time);
    } else {
      w.Null();
    }
    w.EndObject();
  }
  w.EndArray();
}

// "capacity_plan": the rows for the page-hit working set at plan_fraction.
void WritePlanJson(base::JsonWriter& w, const ReplayResult& r) {
  w.Key("capacity_plan");
  w.BeginObject();
  w.Key("page_hit_fraction");
  w.Number(r.plan_fraction);
  w.Key("rows");
  w.BeginArray();
  for (const auto& row : r.plan) {
    w.BeginObject();
    w.Key("name");
    w.String(row.name);
    w.Key("bytes");
    w.Number(row.bytes);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

// "classes", "interference", "footprint" and "running_kv": tenants and classes.
void WriteGroupsJson(base::JsonWriter& w, const ReplayGroups& g) {
  WriteReportsJson(w, "classes", g.class_reports);
  w.Key("interference");
  w.BeginObject();
  w.Key("capacities");
  w.BeginArray();
  for (std::uint64_t c : g.capacities) w.Uint(c);
  w.EndArray();
  w.Key("top_tenants");
  w.Uint(g.top_tenants);
  w.Key("tenants");
  WriteGroupRows(w, g.tenants, g, g.isolated);
  w.Key("classes");
  WriteGroupRows(w, g.classes, g, false);
  w.EndObject();
  if (!g.footprint.empty()) {
    w.Key("footprint");
    w.BeginArray();
    for (const FootprintRow& f : g.footprint) {
      w.BeginObject();
      w.Key("class");
      w.String(f.cls);
      w.Key("requests");
      w.Uint(f.requests);
      w.Key("p50_bytes");
      w.Number(f.p50);
      w.Key("p90_bytes");
      w.Number(f.p90);
      w.Key("p99_bytes");
      w.Number(f.p99);
      w.Key("max_bytes");
      w.Number(f.max);
      w.EndObject();
    }
    w.EndArray();
  }
  if (g.running_kv_known) {
    w.Key("running_kv");
    w.BeginObject();
    w.Key("mean_bytes");
    w.Number(g.running_kv_mean_bytes);
    w.Key("peak_bytes");
    w.Number(g.running_kv_peak_bytes);
    w.EndObject();
  }
}
}  // namespace

std::string FormatJson(const ReplayResult& r) {
  base::JsonWriter w;
  w.BeginObject();
  WriteCurveReportFields(w, r.total);
  w.Key("distinct_pages");
  w.Uint(r.distinct_pages);
  WriteSettingsJson(w, r.settings);
  WriteInputJson(w, r.input);
  w.Key("engine");
  w.BeginObject();
  w.Key("tracked_pages");
  w.Uint(r.tracked_pages);
  w.Key("memory_bytes");
  w.Uint(r.engine_bytes);
  w.EndObject();
  if (!r.tiers.empty()) WriteTiersJson(w, r);
  if (!r.plan.empty()) WritePlanJson(w, r);
  if (!r.tenants.empty()) WriteReportsJson(w, "tenants", r.tenants);
  if (r.policies) {
    w.Key("policies");
    WritePoliciesJson(w, *r.policies);
  }
  if (r.hybrid) {
    w.Key("hybrid");
    WriteHybridJson(w, *r.hybrid);
  }
  if (r.groups) WriteGroupsJson(w, *r.groups);
  w.EndObject();
  std::string out = w.Take();
  out += '\n';
  return out;
}

namespace {

// One row per (group, capacity) of dimension `dim` with the evictor empty, then
// one per evictor.
void WriteGroupCsvRows(std::ostringstream& out, const char* dim, const std::vector<GroupRow>& rows,
                       const ReplayGroups& g, bool isolated) {
  for (const GroupRow& row : rows) {
    const curve::LabelTotals& t = row.totals;
    for (std::size_t c = 0; c < g.capacities.size(); ++c) {
      std::ostringstream line;
      line.precision(17);
      line << dim << ',' << CsvQuote(row.name) << ",," << g.capacities[c] << ',' << t.page_refs << ',' << t.hits[c]
           << ',' << t.capacity_misses(c) << ',' << Share(t.capacity_misses(c), t.page_refs) << ',';
      if (isolated) {
        line << t.isolated_hits[c] << ','
             << static_cast<std::int64_t>(t.isolated_hits[c]) - static_cast<std::int64_t>(t.hits[c]);
      } else {
        line << ',';
      }
      line << ",\n";
      for (const auto& [evictor, pages] : t.evicted_by) {
        line << dim << ',' << CsvQuote(row.name) << ',' << CsvQuote(evictor) << ',' << g.capacities[c] << ",,,,,,,"
             << pages[c] << '\n';
      }
      out << line.str();
    }
  }
}

// The sections after the curve's rows, each after a blank line: the interference
// numbers, the footprint per class and the running requests' KV.
void WriteGroupsCsv(std::ostringstream& out, const ReplayGroups& g) {
  out << "\ndimension,group,evictor,capacity_pages,page_refs,page_hits,capacity_misses,capacity_miss_share,"
         "isolated_page_hits,lost_hits,evicted_pages\n";
  WriteGroupCsvRows(out, "tenant", g.tenants, g, g.isolated);
  WriteGroupCsvRows(out, "class", g.classes, g, false);
  if (!g.footprint.empty()) {
    out << "\nclass,requests,footprint_p50_bytes,footprint_p90_bytes,footprint_p99_bytes,footprint_max_bytes\n";
    for (const FootprintRow& f : g.footprint) {
      std::ostringstream line;
      line.precision(17);
      line << CsvQuote(f.cls) << ',' << f.requests << ',' << f.p50 << ',' << f.p90 << ',' << f.p99 << ',' << f.max
           << '\n';
      out << line.str();
    }
  }
  if (g.running_kv_known) {
    std::ostringstream line;
    line.precision(17);
    line << "\nrunning_kv_mean_bytes,running_kv_peak_bytes\n"
         << g.running_kv_mean_bytes << ',' << g.running_kv_peak_bytes << '\n';
    out << line.str();
  }
}

}  // namespace

std::string FormatCsv(const ReplayResult& r) {
  // One row per (tenant, capacity); tenant "" is the whole trace.
  std::ostringstream out;
  // With --policy three columns follow: policy, class, preemptions; the exact
  // curve's rows leave them empty.
  const std::string extra = r.policies ? ",,," : "";
  out << "tenant," << CurvePointCsvHeader() << (r.policies ? ",policy,class,preemptions" : "") << "\n";
  out.precision(17);
  auto rows = [&](const std::string& tenant, const curve::CurveReport& rep) {
    for (const auto& p : rep.points) {
      out << CsvQuote(tenant) << ',';
      WriteCurvePointCsv(out, p);
      out << extra << '\n';
    }
  };
  rows("", r.total);
  for (const auto& [name, rep] : r.tenants) rows(name, rep);
  if (r.policies) out << FormatPoliciesCsvRows(*r.policies);
  if (r.groups) WriteGroupsCsv(out, *r.groups);
  return out.str();
}

namespace {

// A header row: the group columns, then one per interference capacity.
void WriteCapacityHeader(std::ostringstream& out, const ReplayGroups& g, const char* first, const char* second) {
  out << Pad(first, 16, true) << (second ? Pad(second, 16, true) : "");
  for (std::uint64_t c : g.capacities)
    out << Pad('@' + Grouped(static_cast<double>(c)),
               12);  // a char: g++ 12 warns (-Wrestrict, a false positive) on "@" + string
  out << "\n";
}

// One dimension's (tenant's or class's) tables: capacity-miss share, lost hits
// with --isolated, and the evictor matrix.
void WriteInterferenceTables(std::ostringstream& out, const ReplayGroups& g, const char* what,
                             const std::vector<GroupRow>& rows, bool isolated) {
  out << "\ncapacity misses by " << what
      << " (share of its page references that hit in an unlimited cache but miss at C)\n";
  WriteCapacityHeader(out, g, what, nullptr);
  for (const GroupRow& row : rows) {
    out << Pad(row.name, 16, true);
    for (std::size_t c = 0; c < g.capacities.size(); ++c) {
      out << Pad(Fixed(Share(row.totals.capacity_misses(c), row.totals.page_refs), 4), 12);
    }
    out << "\n";
  }
  if (isolated) {
    out << "\nlost hits by " << what << " (alone in a cache of C minus in the shared cache)\n";
    WriteCapacityHeader(out, g, what, nullptr);
    for (const GroupRow& row : rows) {
      out << Pad(row.name, 16, true);
      for (std::size_t c = 0; c < g.capacities.size(); ++c) {
        out << Pad(Grouped(static_cast<double>(row.totals.isolated_hits[c]) - static_cast<double>(row.totals.hits[c])),
                   12);
      }
      out << "\n";
    }
  }
  out << "\ninterference by " << what
      << " (the victim's capacity misses at C attributed to the evictor's references)\n";
  WriteCapacityHeader(out, g, "victim", "evictor");
  for (const GroupRow& row : rows) {
    for (const auto& [evictor, pages] : row.totals.evicted_by) {
      out << Pad(row.name, 16, true) << Pad(evictor, 16, true);
      for (double v : pages) out << Pad(Grouped(std::round(v)), 12);
      out << "\n";
    }
  }
}

// The tenant and class sections of the table: per-class rows, capacity-miss
// share (and lost hits with --isolated) at each interference capacity, the
// evictor matrix, the footprint distribution and running KV.
template <typename PerGroup>
void FormatGroupsTable(std::ostringstream& out, const ReplayGroups& g, PerGroup&& per_group) {
  per_group("class", g.class_reports);
  WriteInterferenceTables(out, g, "tenant", g.tenants, g.isolated);
  WriteInterferenceTables(out, g, "class", g.classes, false);
  if (!g.footprint.empty()) {
    out << "\nprojected peak KV per request ((input + output tokens) x bytes per token)\n";
    out << Pad("class", 16, true) << Pad("requests", 10) << Pad("p50", 12) << Pad("p90", 12) << Pad("p99", 12)
        << Pad("max", 12) << "\n";
    for (const FootprintRow& f : g.footprint) {
      out << Pad(f.cls, 16, true) << Pad(Grouped(static_cast<double>(f.requests)), 10) << Pad(HumanBytes(f.p50), 12)
          << Pad(HumanBytes(f.p90), 12) << Pad(HumanBytes(f.p99), 12) << Pad(HumanBytes(f.max), 12) << "\n";
    }
  }
  if (g.running_kv_known) {
    out << "running requests' KV (each holds its projected peak from arrival to end): mean "
        << HumanBytes(g.running_kv_mean_bytes) << ", peak " << HumanBytes(g.running_kv_peak_bytes) << "\n";
  }
}

// The summary above the tables: counts, settings, bad input, the unlimited hit
// ratio and the knee.
void WriteSummaryLines(std::ostringstream& out, const ReplayResult& r) {
  const curve::CurveReport& t = r.total;
  const bool sampled = r.settings.sample_rate.has_value();
  out << "kvwatch replay: " << Grouped(static_cast<double>(t.requests)) << " requests, " << Grouped(t.page_refs)
      << " page references, " << Grouped(static_cast<double>(r.distinct_pages)) << " distinct pages"
      << (sampled ? " (estimated from a " + FractionLabel(*r.settings.sample_rate) + " sample)" : "") << "\n";
  out << "settings: " << r.settings.touch_order << ", coverage share " << FractionLabel(r.settings.coverage_share)
      << ", " << PageTokensSetting(r.settings) << ", tracking up to "
      << Grouped(static_cast<double>(r.settings.max_pages)) << " pages";
  if (r.settings.bytes_per_token) {
    out << ", " << HumanBytes(*r.settings.bytes_per_token) << " per token per rank";
    if (r.settings.model) out << " (" << *r.settings.model << ", TP " << r.settings.tensor_parallel << ")";
  }
  out << "\n";
  if (r.input.bad_lines > 0) {
    out << "input: " << Grouped(static_cast<double>(r.input.bad_lines)) << " bad lines skipped of "
        << Grouped(static_cast<double>(r.input.lines)) << "\n";
  }
  out << "unlimited page hit ratio: " << Fixed(t.unlimited_page_hit_ratio, 4) << " (" << Grouped(t.unlimited_page_hits)
      << " reusable pages); cold misses " << Grouped(t.cold_misses) << ", beyond tracked " << Grouped(t.beyond_tracked)
      << "\n";
  if (t.knee) {
    out << "knee: " << Grouped(static_cast<double>(t.knee->capacity_pages)) << " pages";
    if (t.knee_bytes) out << " (" << HumanBytes(*t.knee_bytes) << ")";
    out << ", page hit ratio " << Fixed(t.knee->page_hit_ratio, 4)
        << (t.knee->at_saturation ? " (no interior knee: where the curve saturates)" : "") << "\n";
  } else {
    out << "knee: none (no reuse, or a curve without a knee within the tracked range)\n";
  }
}

// One row per reported capacity; bytes, avoided prefill FLOPs and seconds when known.
void WriteCurveRows(std::ostringstream& out, const ReplayResult& r) {
  const curve::CurveReport& t = r.total;
  const bool bytes = r.settings.bytes_per_token.has_value();
  out << "\ncapacity curve\n";
  out << Pad("pages", 14) << (bytes ? Pad("bytes", 12) : "") << Pad("page hit", 10) << Pad("coverage", 10)
      << Pad("reused tokens", 16);
  const bool flops = !t.points.empty() && t.points.front().avoided_prefill_flops.has_value();
  const bool seconds = !t.points.empty() && t.points.front().avoided_prefill_seconds.has_value();
  if (flops) out << Pad("avoided prefill", 17);
  if (seconds) out << Pad("seconds", 12);
  out << "\n";
  for (const auto& p : t.points) {
    out << Pad(Grouped(static_cast<double>(p.capacity_pages)), 14)
        << (bytes ? Pad(HumanBytes(p.capacity_bytes.value_or(0)), 12) : "") << Pad(Fixed(p.page_hit_ratio, 4), 10)
        << Pad(Fixed(p.request_coverage, 4), 10) << Pad(Grouped(std::round(p.reused_tokens)), 16);
    if (flops) out << Pad(HumanFlops(p.avoided_prefill_flops.value_or(0)), 17);
    if (seconds) out << Pad(Fixed(p.avoided_prefill_seconds.value_or(0), 1), 12);
    out << "\n";
  }
}

// A working-set cell: the pages (and bytes) reaching target at fraction f.
std::string WorkingSetCell(const curve::CurveReport& t, const std::string& target, double f, bool with_bytes) {
  for (const auto& e : t.working_set) {
    if (e.target != target || e.fraction != f) continue;
    std::string s = Pad(e.capacity_pages ? Grouped(static_cast<double>(*e.capacity_pages)) : "not converged", 18);
    if (with_bytes) s += Pad(e.bytes ? HumanBytes(*e.bytes) : "-", 12);
    return s;
  }
  return Pad("-", 18) + (with_bytes ? Pad("-", 12) : "");
}

// One row per target fraction, in the report's order: page hits and coverage.
void WriteWorkingSetRows(std::ostringstream& out, const ReplayResult& r) {
  const curve::CurveReport& t = r.total;
  const bool bytes = r.settings.bytes_per_token.has_value();
  out << "\nworking set (smallest capacity reaching the target)\n";
  out << Pad("target", 8) << Pad("page hits: pages", 18) << (bytes ? Pad("bytes", 12) : "")
      << Pad("coverage: pages", 18) << (bytes ? Pad("bytes", 12) : "") << "\n";
  std::vector<double> fractions;
  for (const auto& e : t.working_set) {
    if (std::find(fractions.begin(), fractions.end(), e.fraction) == fractions.end()) fractions.push_back(e.fraction);
  }
  for (double f : fractions) {
    out << Pad(FractionLabel(f), 8) << WorkingSetCell(t, "page_hit", f, bytes)
        << WorkingSetCell(t, "request_coverage", f, bytes) << "\n";
  }
}

void WritePlanRows(std::ostringstream& out, const ReplayResult& r) {
  if (r.plan.empty()) return;
  out << "\ncapacity plan for the " << FractionLabel(r.plan_fraction) << " page-hit working set (per GPU rank)\n";
  for (const auto& row : r.plan) out << Pad(row.name, 12, true) << Pad(HumanBytes(row.bytes), 14) << "\n";
}

void WriteTierRows(std::ostringstream& out, const ReplayResult& r) {
  if (r.tiers.empty()) return;
  out << "\ntiers (one exclusive LRU hierarchy of " << Grouped(static_cast<double>(r.tier_total_capacity)) << " pages; "
      << Grouped(static_cast<double>(r.tier_prefix_hits)) << " prefix hits)\n";
  out << Pad("tier", 10, true) << Pad("pages served", 16) << Pad("bytes moved", 14) << Pad("hits in time", 16) << "\n";
  for (const auto& tier : r.tiers) {
    out << Pad(tier.name, 10, true) << Pad(Grouped(static_cast<double>(tier.pages_served)), 16)
        << Pad(HumanBytes(tier.bytes_moved), 14)
        << Pad(r.tier_in_time_known ? Grouped(static_cast<double>(tier.hits_in_time)) : "unknown", 16) << "\n";
  }
  if (!r.tier_in_time_known) {
    out << "(hits in time need --model or --bytes-per-token, --prefill-flops-per-second and each slower tier's "
           "bandwidth)\n";
  }
}

// A group's 0.95 working set for target: pages, "n/c" (not converged) or "-".
std::string GroupWorkingSet95(const curve::CurveReport& rep, const char* target) {
  for (const auto& e : rep.working_set) {
    if (e.target == target && std::fabs(e.fraction - 0.95) < 1e-12) {
      return e.capacity_pages ? Grouped(static_cast<double>(*e.capacity_pages)) : std::string("n/c");
    }
  }
  return std::string("-");
}

// One row per tenant or class: every group when they fit on a screen, in name
// order; else the ones with the most page references (a trace may have a tenant
// per user) and a line for the rest, which JSON and CSV list.
void WriteGroupReportRows(std::ostringstream& out, const char* what,
                          const std::vector<std::pair<std::string, curve::CurveReport>>& groups) {
  out << "\nper " << what << "\n";
  out << Pad(what, 16, true) << Pad("requests", 10) << Pad("page refs", 12) << Pad("unlimited", 10)
      << Pad("ws 0.95 hits", 14) << Pad("ws 0.95 cov", 13) << Pad("knee", 10) << "\n";
  constexpr std::size_t kTableRows = 20;
  std::vector<const std::pair<std::string, curve::CurveReport>*> shown;
  for (const auto& g : groups) shown.push_back(&g);
  if (shown.size() > kTableRows) {
    std::stable_sort(shown.begin(), shown.end(),
                     [](const auto* a, const auto* b) { return a->second.page_refs > b->second.page_refs; });
    shown.resize(kTableRows);
  }
  for (const auto* shown_group : shown) {
    const std::string& name = shown_group->first;
    const curve::CurveReport& rep = shown_group->second;
    out << Pad(name.empty() ? "(none)" : name, 16, true) << Pad(Grouped(static_cast<double>(rep.requests)), 10)
        << Pad(Grouped(rep.page_refs), 12) << Pad(Fixed(rep.unlimited_page_hit_ratio, 4), 10)
        << Pad(GroupWorkingSet95(rep, "page_hit"), 14) << Pad(GroupWorkingSet95(rep, "request_coverage"), 13)
        << Pad(rep.knee ? Grouped(static_cast<double>(rep.knee->capacity_pages)) : "-", 10) << "\n";
  }
  if (shown.size() < groups.size()) {
    double rest = 0;
    for (const auto& g : groups) rest += g.second.page_refs;
    for (const auto* g : shown) rest -= g->second.page_refs;
    out << "(" << Grouped(static_cast<double>(groups.size() - shown.size())) << " more " << what << "s with "
        << Grouped(rest) << " page references; --format json or csv lists every one)\n";
  }
}

}  // namespace

std::string FormatTable(const ReplayResult& r) {
  std::ostringstream out;
  WriteSummaryLines(out, r);
  WriteCurveRows(out, r);
  WriteWorkingSetRows(out, r);
  WritePlanRows(out, r);
  if (r.hybrid) FormatHybridTable(out, *r.hybrid, r.total);
  WriteTierRows(out, r);
  auto per_group = [&](const char* what, const std::vector<std::pair<std::string, curve::CurveReport>>& groups) {
    WriteGroupReportRows(out, what, groups);
  };
  if (!r.tenants.empty()) per_group("tenant", r.tenants);
  if (r.groups) FormatGroupsTable(out, *r.groups, per_group);
  if (r.policies) out << FormatPoliciesTable(*r.policies);
  return out.str();
}

}  // namespace kvwatch::agent
