#include "agent/web/api_json.h"

#include <cmath>

namespace kvwatch::agent {

void WriteCurvePoint(JsonWriter& w, const curve::CurvePoint& p) {
  w.BeginObject();
  w.Key("capacity_pages");
  w.Uint(p.capacity_pages);
  w.Key("page_hits");
  w.Number(p.page_hits);
  w.Key("page_hit_ratio");
  w.Number(p.page_hit_ratio);
  w.Key("request_coverage");
  w.Number(p.request_coverage);
  w.Key("reused_tokens");
  w.Number(p.reused_tokens);
  if (p.capacity_bytes) {
    w.Key("capacity_bytes");
    w.Number(*p.capacity_bytes);
  }
  if (p.avoided_prefill_flops) {
    w.Key("avoided_prefill_flops");
    w.Number(*p.avoided_prefill_flops);
  }
  if (p.avoided_prefill_seconds) {
    w.Key("avoided_prefill_seconds");
    w.Number(*p.avoided_prefill_seconds);
  }
  w.EndObject();
}

void WriteCurveReportFields(JsonWriter& w, const curve::CurveReport& r) {
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

std::string RenderCurveApiJson(const curve::CurveReport& r, const CurveApiContext& c) {
  JsonWriter w;
  w.BeginObject();
  w.Key("window");
  w.String(c.window);
  w.Key("window_seconds");
  w.Number(c.window_seconds);
  w.Key("replica");
  w.String(c.replica);
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
  if (!c.policies.empty()) {
    w.Key("policies");
    w.BeginArray();
    for (const CurveApiContext::Canary& k : c.policies) {
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
  w.EndObject();
  return w.Take();
}

}  // namespace kvwatch::agent
