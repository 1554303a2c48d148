#include "agent/render/api_json.h"

#include <cmath>

namespace kvwatch::agent {

void WriteCurveReportFields(base::JsonWriter& w, const curve::CurveReport& r) {
  w.Key("requests");
  w.Uint(r.requests);
  w.Key("page_refs");
  w.Number(r.page_refs);
  w.Key("unlimited_page_hits");
  w.Number(r.unlimited_page_hits);
  w.Key("unlimited_page_hit_ratio");
  w.Number(r.unlimited_page_hit_ratio);
  w.Key("cold_misses");
  w.Number(r.cold_misses);
  w.Key("beyond_tracked");
  w.Number(r.beyond_tracked);
  w.Key("max_capacity_pages");
  w.Uint(r.max_capacity);
  w.Key("points");
  w.BeginArray();
  for (const auto& p : r.points) WriteCurvePoint(w, p);
  w.EndArray();
  w.Key("working_set");
  w.BeginArray();
  for (const auto& e : r.working_set) {
    w.BeginObject();
    w.Key("target");
    w.String(e.target);
    w.Key("fraction");
    w.Number(e.fraction);
    w.Key("capacity_pages");
    w.Optional(e.capacity_pages);
    w.Key("bytes");
    w.Optional(e.bytes);
    w.EndObject();
  }
  w.EndArray();
  w.Key("knee");
  w.BeginObject();
  w.Key("capacity_pages");
  if (r.knee) {
    w.Uint(r.knee->capacity_pages);
    w.Key("page_hit_ratio");
    w.Number(r.knee->page_hit_ratio);
    w.Key("at_saturation");
    w.Bool(r.knee->at_saturation);
  } else {
    w.Null();
  }
  w.Key("bytes");
  w.Optional(r.knee_bytes);
  w.EndObject();
}

void WriteHybridCurveFields(base::JsonWriter& w, double unit_bytes, double full_attention_bytes_per_token,
                            const std::vector<curve::KvGroupSizing>& groups, const curve::CurveReport& report) {
  w.Key("unit_bytes");
  w.Number(unit_bytes);
  w.Key("full_attention_bytes_per_token");
  w.Number(full_attention_bytes_per_token);
  w.Key("groups");
  w.BeginArray();
  for (const curve::KvGroupSizing& g : groups) {
    w.BeginObject();
    w.Key("kind");
    w.String(curve::KvGroupKindName(g.spec.kind));
    w.Key("layers");
    w.Uint(static_cast<std::uint64_t>(g.spec.layers));
    w.Key("window_tokens");
    if (g.spec.window_tokens > 0) {
      w.Uint(static_cast<std::uint64_t>(g.spec.window_tokens));
    } else {
      w.Null();
    }
    w.Key("bytes_per_token");
    w.Uint(g.bytes_per_token);
    w.Key("state_bytes");
    w.Uint(g.state_bytes);
    w.Key("page_bytes");
    w.Uint(g.page_bytes);
    w.EndObject();
  }
  w.EndArray();
  WriteCurveReportFields(w, report);
}

namespace {

// The "hybrid" object of GET /api/v1/curve (docs/api.md).
void WriteHybridApi(base::JsonWriter& w, const CurveApiContext::Hybrid& h) {
  w.BeginObject();
  WriteHybridCurveFields(w, h.unit_bytes, h.full_attention_bytes_per_token, h.groups, h.report);
  w.Key("plot");
  w.BeginArray();
  for (const auto& p : h.report.plot) WriteCurvePoint(w, p);
  w.EndArray();
  w.Key("capacity_units_configured");
  w.BeginArray();
  for (std::uint64_t u : h.capacity_units) w.Uint(u);
  w.EndArray();
  w.Key("group_bytes");
  w.BeginArray();
  for (const CurveApiContext::Hybrid::GroupBytes& row : h.group_bytes) {
    w.BeginObject();
    w.Key("target");
    w.String(row.target);
    w.Key("fraction");
    w.Number(row.fraction);
    w.Key("capacity_units");
    w.Uint(row.capacity_units);
    w.Key("capacity_bytes");
    w.Number(static_cast<double>(row.capacity_units) * h.unit_bytes);
    w.Key("bytes");
    w.BeginArray();
    for (std::uint64_t b : row.bytes) w.Uint(b);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("tracked_bytes");
  w.Uint(h.tracked_bytes);
  w.Key("tracked_bytes_limit");
  w.Uint(h.tracked_bytes_limit);
  w.Key("tracking_evictions");
  w.Uint(h.evicted_items);
  w.EndObject();
}

// "policies": each canary's hit ratio, coverage and gain over the engine
// policy's canary at its capacity.
void WriteCanariesApi(base::JsonWriter& w, const std::vector<CurveApiContext::Canary>& policies) {
  w.Key("policies");
  w.BeginArray();
  for (const CurveApiContext::Canary& k : policies) {
    w.BeginObject();
    w.Key("policy");
    w.String(k.policy);
    w.Key("capacity_pages");
    w.Uint(k.capacity_pages);
    w.Key("page_hit_ratio");
    w.Number(k.page_hit_ratio);
    w.Key("request_coverage");
    w.Optional(k.request_coverage);
    w.Key("gain");
    w.Number(k.gain);
    w.Key("engine_policy");
    w.Bool(k.engine);
    w.EndObject();
  }
  w.EndArray();
}

// "kv_load": the KV load factor and what it was computed from.
void WriteKvLoadApi(base::JsonWriter& w, const CurveApiContext::KvLoad& k) {
  w.Key("kv_load");
  w.BeginObject();
  w.Key("load_factor");
  w.Optional(k.load_factor);
  w.Key("requests");
  w.Uint(k.requests);
  w.Key("sized_requests");
  w.Uint(k.sized_requests);
  w.Key("span_seconds");
  w.Number(k.span_seconds);
  w.Key("mean_kv_token_seconds");
  w.Optional(k.mean_kv_token_seconds);
  w.Key("decode_tokens_per_second");
  w.Number(k.decode_tokens_per_second);
  w.Key("decode_source");
  w.String(k.decode_source);
  w.Key("prefill_seconds");
  w.Number(k.prefill_seconds);
  w.Key("prefill_source");
  w.String(k.prefill_source);
  w.Key("capacity_tokens");
  w.Optional(k.capacity_tokens);
  w.Key("capacity_source");
  if (k.capacity_tokens) {
    w.String(k.capacity_source);
  } else {
    w.Null();
  }
  w.Key("output_tokens");
  w.BeginObject();
  for (const auto& [label, quantiles] : k.output_tokens) {
    w.Key(label);
    w.BeginObject();
    for (const auto& [q, tokens] : quantiles) {
      w.Key(q);
      w.Uint(tokens);
    }
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
}

// The fields every per-window answer starts with.
void WriteWindowHeader(base::JsonWriter& w, const std::string& window, double seconds, const std::string& replica) {
  w.Key("window");
  w.String(window);
  w.Key("window_seconds");
  w.Number(seconds);
  w.Key("replica");
  w.String(replica);
}

}  // namespace

std::string RenderCurveApiJson(const curve::CurveReport& r, const CurveApiContext& c) {
  base::JsonWriter w;
  w.BeginObject();
  WriteWindowHeader(w, c.window, c.window_seconds, c.replica);
  WriteCurveReportFields(w, r);
  w.Key("plot");
  w.BeginArray();
  for (const auto& p : r.plot) WriteCurvePoint(w, p);
  w.EndArray();
  w.Key("capacity_pages_configured");
  w.BeginArray();
  for (std::uint64_t cap : c.capacities) w.Uint(cap);
  w.EndArray();
  w.Key("tracked_pages");
  w.Uint(c.tracked_pages);
  w.Key("bucket_relative_error");
  w.Number(c.bucket_relative_error);
  if (!c.policies.empty()) WriteCanariesApi(w, c.policies);
  WriteKvLoadApi(w, c.kv_load);
  if (c.hybrid) {
    w.Key("hybrid");
    WriteHybridApi(w, *c.hybrid);
  }
  w.EndObject();
  return w.Take();
}

}  // namespace kvwatch::agent

namespace kvwatch::agent {

namespace {

// "points": the group's shared curve (and its isolated one) at every bound.
void WriteGroupPointsApi(base::JsonWriter& w, const curve::GroupCurves& window, const curve::BucketedCurve& shared,
                         std::uint32_t g, bool isolated) {
  w.Key("points");
  w.BeginArray();
  for (std::uint64_t bound : shared.bounds()) {
    w.BeginObject();
    w.Key("capacity_pages");
    w.Uint(bound);
    w.Key("page_hit_ratio");
    w.Number(shared.PageHitRatio(bound));
    w.Key("request_coverage");
    w.Number(shared.RequestCoverage(bound));
    if (isolated) {
      w.Key("isolated_page_hit_ratio");
      w.Number(window.isolated(g).PageHitRatio(bound));
    }
    w.EndObject();
  }
  w.EndArray();
}

// "at_capacities": hits, capacity misses and evictors at each interference capacity.
void WriteGroupCapacitiesApi(base::JsonWriter& w, const curve::GroupCurves& window,
                             const std::vector<std::string>& labels, std::uint32_t d, std::uint32_t g, bool isolated) {
  const curve::GroupLayout& layout = window.layout();
  w.Key("at_capacities");
  w.BeginArray();
  for (std::size_t c = 0; c < layout.capacities.size(); ++c) {
    w.BeginObject();
    w.Key("capacity_pages");
    w.Uint(layout.capacities[c]);
    w.Key("page_hits");
    w.Uint(window.shared_hits(d, g, c));
    w.Key("capacity_misses");
    w.Uint(window.capacity_misses(d, g, c));
    w.Key("unattributed_misses");
    w.Uint(window.unattributed(d, g, c));
    if (isolated) {
      w.Key("isolated_page_hits");
      w.Uint(window.isolated_hits(g, c));
    }
    w.Key("evicted_by");
    w.BeginObject();
    for (std::uint32_t e = 0; e < labels.size(); ++e) {
      const double pages = window.evicted_by(d, c, g, e);
      if (!(pages > 0) || labels[e].empty()) continue;
      w.Key(labels[e]);
      w.Number(pages);
    }
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
}

// One group's object of a dimension (d 0: tenant, 1: class) of /api/v1/groups:
// its curve at every bound and its numbers at each interference capacity.
void WriteGroupApi(base::JsonWriter& w, const curve::GroupCurves& window, const GroupsApiContext& context,
                   std::uint32_t d, std::uint32_t g) {
  const std::vector<std::string>& labels = d == 0 ? context.tenant_labels : context.class_labels;
  const curve::GroupLayout& layout = window.layout();
  const std::string& label = labels[g];
  const curve::BucketedCurve& shared = window.shared(d, g);
  const bool isolated = d == 0 && layout.isolated;
  w.BeginObject();
  w.Key("group");
  w.String(label);
  w.Key("requests");
  w.Uint(window.requests(d, g));
  w.Key("page_refs");
  w.Uint(window.page_refs(d, g));
  w.Key("unlimited_page_hit_ratio");
  w.Number(shared.totals().UnlimitedPageHitRatio());
  WriteGroupPointsApi(w, window, shared, g, isolated);
  WriteGroupCapacitiesApi(w, window, labels, d, g, isolated);
  w.EndObject();
}

}  // namespace

std::string RenderGroupsApiJson(const curve::GroupCurves& window, const GroupsApiContext& context) {
  const curve::GroupLayout& layout = window.layout();
  const std::vector<std::string>* labels[2] = {&context.tenant_labels, &context.class_labels};
  constexpr const char* kDimensions[2] = {"tenant", "class"};
  base::JsonWriter w;
  w.BeginObject();
  WriteWindowHeader(w, context.window, context.window_seconds, context.replica);
  w.Key("capacities");
  w.BeginArray();
  for (std::uint64_t c : layout.capacities) w.Uint(c);
  w.EndArray();
  w.Key("isolated");
  w.Bool(layout.isolated);
  w.Key("dimensions");
  w.BeginObject();
  for (std::uint32_t d = 0; d < 2; ++d) {
    w.Key(kDimensions[d]);
    w.BeginArray();
    for (std::uint32_t g = 0; g < labels[d]->size(); ++g) {
      const std::string& label = (*labels[d])[g];
      if (label.empty() || window.requests(d, g) == 0) continue;
      WriteGroupApi(w, window, context, d, g);
    }
    w.EndArray();
  }
  w.EndObject();
  w.EndObject();
  return w.Take();
}

std::string RenderHistoryApiJson(const HistoryApiContext& c) {
  base::JsonWriter w;
  w.BeginObject();
  WriteWindowHeader(w, c.window, c.window_seconds, c.replica);
  w.Key("interval_seconds");
  w.Number(c.interval_seconds);
  w.Key("bytes_per_page");
  w.Optional(c.bytes_per_page);
  w.Key("capacity_pages_configured");
  w.BeginArray();
  for (std::uint64_t cap : c.capacities) w.Uint(cap);
  w.EndArray();
  w.Key("targets");
  w.BeginArray();
  for (const HistoryApiContext::Target& t : c.targets) {
    w.BeginObject();
    w.Key("target");
    w.String(t.target);
    w.Key("fraction");
    w.Number(t.fraction);
    w.EndObject();
  }
  w.EndArray();
  w.Key("points");
  w.BeginArray();
  for (const HistoryPoint& p : c.points) {
    w.BeginObject();
    w.Key("time");
    w.Number(p.time_s);
    w.Key("requests");
    w.Uint(p.sample.requests);
    w.Key("knee_pages");
    w.Optional(p.sample.knee_pages);
    w.Key("working_set_pages");
    w.BeginArray();
    for (const auto& pages : p.sample.working_set_pages) w.Optional(pages);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Take();
}

}  // namespace kvwatch::agent
