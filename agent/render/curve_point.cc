#include "agent/render/curve_point.h"

namespace kvwatch::agent {

using Role = CurvePointField::Role;

std::array<CurvePointField, 8> CurvePointFields(const curve::CurvePoint& p) {
  return {{
      {"capacity_pages", Role::kCapacity, p.capacity_pages, std::nullopt},
      {"capacity_bytes", Role::kOptional, 0, p.capacity_bytes},
      {"page_hits", Role::kHits, 0, p.page_hits},
      {"page_hit_ratio", Role::kHits, 0, p.page_hit_ratio},
      {"request_coverage", Role::kHits, 0, p.request_coverage},
      {"reused_tokens", Role::kHits, 0, p.reused_tokens},
      {"avoided_prefill_flops", Role::kOptional, 0, p.avoided_prefill_flops},
      {"avoided_prefill_seconds", Role::kOptional, 0, p.avoided_prefill_seconds},
  }};
}

curve::CurvePoint PolicyCurvePoint(std::uint64_t capacity_pages, const curve::PolicyTotals& t,
                                   std::uint64_t page_tokens) {
  curve::CurvePoint p;
  p.capacity_pages = capacity_pages;
  p.page_hits = static_cast<double>(t.page_hits);
  p.page_hit_ratio = t.PageHitRatio();
  p.request_coverage = t.RequestCoverage();
  p.reused_tokens = static_cast<double>(t.page_hits * page_tokens);
  return p;
}

namespace {

void WriteJsonField(base::JsonWriter& w, const CurvePointField& f) {
  w.Key(f.name);
  if (f.role == Role::kCapacity) {
    w.Uint(f.count);
  } else {
    w.Number(*f.value);
  }
}

}  // namespace

void WriteCurvePoint(base::JsonWriter& w, const curve::CurvePoint& p) {
  const auto fields = CurvePointFields(p);
  w.BeginObject();
  for (const CurvePointField& f : fields) {
    if (f.role != Role::kOptional) WriteJsonField(w, f);
  }
  for (const CurvePointField& f : fields) {
    if (f.role == Role::kOptional && f.value) WriteJsonField(w, f);
  }
  w.EndObject();
}

void WriteCurvePointHits(base::JsonWriter& w, const curve::CurvePoint& p) {
  for (const CurvePointField& f : CurvePointFields(p)) {
    if (f.role == Role::kHits) WriteJsonField(w, f);
  }
}

std::string_view CurvePointCsvHeader() {
  static const std::string header = [] {
    std::string h;
    for (const CurvePointField& f : CurvePointFields({})) h.append(h.empty() ? "" : ",").append(f.name);
    return h;
  }();
  return header;
}

void WriteCurvePointCsv(std::ostream& out, const curve::CurvePoint& p) {
  bool first = true;
  for (const CurvePointField& f : CurvePointFields(p)) {
    if (!first) out << ',';
    first = false;
    if (f.role == Role::kCapacity) {
      out << f.count;
    } else if (f.value) {
      out << *f.value;
    }
  }
}

}  // namespace kvwatch::agent
