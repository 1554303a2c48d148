#include "agent/render/replay_policies_output.h"

#include <algorithm>
#include <sstream>

#include "agent/render/curve_point.h"
#include "agent/render/text_format.h"

namespace kvwatch::agent {

namespace {

void WriteTotals(base::JsonWriter& w, const curve::PolicyTotals& t, std::uint64_t page_tokens) {
  w.Key("requests");
  w.Uint(t.requests);
  w.Key("page_refs");
  w.Uint(t.page_refs);
  WriteCurvePointHits(w, PolicyCurvePoint(0, t, page_tokens));
  w.Key("preemptions");
  w.Uint(t.preemptions);
}

void WriteGroups(base::JsonWriter& w, const char* key, const char* name_key, const std::vector<std::string>& names,
                 const std::vector<curve::PolicyTotals>& totals, std::uint64_t page_tokens) {
  w.Key(key);
  w.BeginArray();
  for (std::size_t i = 0; i < names.size() && i < totals.size(); ++i) {
    if (totals[i].requests == 0) continue;
    w.BeginObject();
    w.Key(name_key);
    w.String(names[i]);
    WriteTotals(w, totals[i], page_tokens);
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

void WritePoliciesJson(base::JsonWriter& w, const PolicyReplayResult& r) {
  w.BeginObject();
  w.Key("names");
  w.BeginArray();
  for (const auto& p : r.policies) w.String(p);
  w.EndArray();
  w.Key("capacities");
  w.BeginArray();
  for (std::uint64_t c : r.capacities) w.Uint(c);
  w.EndArray();
  w.Key("decode_tokens_per_second");
  w.Number(r.decode_tokens_per_s);
  w.Key("priorities");
  w.String(r.priorities);
  w.Key("s3fifo_promotion_hits");
  w.Uint(r.s3fifo_promotion_hits);
  w.Key("results");
  w.BeginArray();
  for (const curve::PolicyRunResult& run : r.runs) {
    w.BeginObject();
    w.Key("policy");
    w.String(curve::PolicyName(run.kind));
    w.Key("capacity_pages");
    w.Uint(run.capacity);
    WriteTotals(w, run.total, r.page_tokens);
    WriteGroups(w, "tenants", "tenant", r.tenant_names, run.by_tenant, r.page_tokens);
    WriteGroups(w, "classes", "class", r.class_names, run.by_class, r.page_tokens);
    w.EndObject();
  }
  w.EndArray();
  w.Key("best");
  w.BeginArray();
  for (const BestPolicy& b : r.best) {
    w.BeginObject();
    w.Key("capacity_pages");
    w.Uint(b.capacity_pages);
    w.Key("policy");
    w.String(b.policy);
    w.Key("page_hit_ratio");
    w.Number(b.page_hit_ratio);
    w.Key("lru_page_hit_ratio");
    w.Number(b.lru_page_hit_ratio);
    w.Key("lru_capacity_for_same_hits");
    w.Optional(b.lru_capacity_for_same_hits);
    w.Key("capacity_saved_pages");
    if (b.capacity_saved_pages) {
      w.Number(static_cast<double>(*b.capacity_saved_pages));
    } else {
      w.Null();
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("threads");
  w.Uint(r.threads);
  w.Key("seconds");
  w.Number(r.seconds);
  w.EndObject();
}

namespace {

// The best online policy per capacity against the LRU curve.
void WriteBestPolicies(std::ostringstream& out, const PolicyReplayResult& r) {
  out << "\nbest online policy per capacity (belady is the offline reference), against the LRU curve:\n";
  out << Pad("pages", 12) << "  " << Pad("best", 15, true) << Pad("page hit", 10) << Pad("lru", 10)
      << Pad("lru pages for same hits", 25) << Pad("pages saved", 13) << "\n";
  for (const BestPolicy& b : r.best) {
    out << Pad(Grouped(static_cast<double>(b.capacity_pages)), 12) << "  " << Pad(b.policy, 15, true)
        << Pad(Fixed(b.page_hit_ratio, 4), 10) << Pad(Fixed(b.lru_page_hit_ratio, 4), 10)
        << Pad(b.lru_capacity_for_same_hits ? Grouped(static_cast<double>(*b.lru_capacity_for_same_hits))
                                            : "beyond tracked",
               25)
        << Pad(b.capacity_saved_pages ? Grouped(static_cast<double>(*b.capacity_saved_pages)) : "-", 13) << "\n";
  }
}

// Each policy's page hit ratio per class or tenant (by_tenant when `tenants`)
// at every capacity: the ten with the most page references, those with requests.
void WritePolicyGroupHitRatios(std::ostringstream& out, const PolicyReplayResult& r, const char* title,
                               const std::vector<std::string>& names, bool tenants) {
  const std::size_t nc = r.capacities.size();
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (r.runs.empty() || (tenants ? r.runs[0].by_tenant : r.runs[0].by_class)[i].requests == 0) continue;
    order.push_back(i);
  }
  if (order.empty()) return;
  auto refs = [&](std::size_t i) { return (tenants ? r.runs[0].by_tenant : r.runs[0].by_class)[i].page_refs; };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return refs(a) > refs(b); });
  const std::size_t shown = std::min<std::size_t>(order.size(), 10);
  out << "\npage hit ratio per " << title;
  if (shown < order.size()) out << " (the " << shown << " largest of " << order.size() << "; all in JSON and CSV)";
  out << ":\n" << Pad(title, 16, true) << Pad("pages", 12);
  for (const auto& p : r.policies) out << Pad(p.substr(0, 9), 10);
  out << "\n";
  for (std::size_t k = 0; k < shown; ++k) {
    const std::size_t i = order[k];
    for (std::size_t c = 0; c < nc; ++c) {
      out << Pad(names[i].substr(0, 15), 16, true) << Pad(Grouped(static_cast<double>(r.capacities[c])), 12);
      for (std::size_t p = 0; p < r.policies.size(); ++p) {
        const curve::PolicyRunResult& run = r.runs[p * nc + c];
        out << Pad(Fixed((tenants ? run.by_tenant : run.by_class)[i].PageHitRatio(), 4), 10);
      }
      out << "\n";
    }
  }
}

}  // namespace

std::string FormatPoliciesTable(const PolicyReplayResult& r) {
  std::ostringstream out;
  const std::size_t nc = r.capacities.size();
  out << "\neviction policies (" << r.threads << " threads, " << Fixed(r.seconds, 1) << " s; sglang and vllm: decode "
      << FractionLabel(r.decode_tokens_per_s) << " tokens/s, generated pages take capacity)\n";
  out << Pad("pages", 12) << "  " << Pad("policy", 15, true) << Pad("page hit", 10) << Pad("coverage", 10)
      << Pad("reused tokens", 16) << Pad("preemptions", 13) << "\n";
  for (std::size_t c = 0; c < nc; ++c) {
    for (std::size_t p = 0; p < r.policies.size(); ++p) {
      const curve::PolicyRunResult& run = r.runs[p * nc + c];
      out << Pad(Grouped(static_cast<double>(run.capacity)), 12) << "  " << Pad(r.policies[p], 15, true)
          << Pad(Fixed(run.total.PageHitRatio(), 4), 10) << Pad(Fixed(run.total.RequestCoverage(), 4), 10)
          << Pad(Grouped(static_cast<double>(run.total.page_hits * r.page_tokens)), 16)
          << Pad(run.kind == curve::PolicyKind::kVllm || run.kind == curve::PolicyKind::kSglang
                     ? Grouped(static_cast<double>(run.total.preemptions))
                     : "-",
                 13)
          << "\n";
    }
  }
  WriteBestPolicies(out, r);
  // Per class (few), and per tenant for the largest ten tenants.
  WritePolicyGroupHitRatios(out, r, "class", r.class_names, false);
  WritePolicyGroupHitRatios(out, r, "tenant", r.tenant_names, true);
  return out.str();
}

std::string FormatPoliciesCsvRows(const PolicyReplayResult& r) {
  std::ostringstream out;
  out.precision(17);
  auto row = [&](const std::string& tenant, const std::string& cls, const curve::PolicyRunResult& run,
                 const curve::PolicyTotals& t) {
    out << CsvQuote(tenant) << ',';
    WriteCurvePointCsv(out, PolicyCurvePoint(run.capacity, t, r.page_tokens));
    out << ',' << curve::PolicyName(run.kind) << ',' << CsvQuote(cls) << ',' << t.preemptions << '\n';
  };
  for (const curve::PolicyRunResult& run : r.runs) {
    row("", "", run, run.total);
    for (std::size_t i = 0; i < r.tenant_names.size() && i < run.by_tenant.size(); ++i) {
      if (run.by_tenant[i].requests > 0) row(r.tenant_names[i], "", run, run.by_tenant[i]);
    }
    for (std::size_t i = 0; i < r.class_names.size() && i < run.by_class.size(); ++i) {
      if (run.by_class[i].requests > 0) row("", r.class_names[i], run, run.by_class[i]);
    }
  }
  return out.str();
}

}  // namespace kvwatch::agent
