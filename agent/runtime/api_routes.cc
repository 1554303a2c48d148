#include "agent/runtime/api_routes.h"

#include <cmath>
#include <optional>
#include <utility>

#include "agent/render/api_json.h"
#include "agent/runtime/agent.h"
#include "agent/runtime/analysis.h"
#include "agent/runtime/hybrid_metrics.h"
#include "agent/runtime/load_metrics.h"
#include "agent/web/web_page.h"
#include "base/json_writer.h"

namespace kvwatch::agent {

std::string CurveJson(const AgentOptions& options, const AgentSnapshot& snapshot, std::size_t window) {
  const AnalysisSnapshot& s = snapshot.analysis;
  CurveApiContext context;
  context.window = options.curve.windows[window].name;
  context.window_seconds = options.curve.windows[window].seconds;
  context.replica = options.replica;
  context.capacities = options.curve.capacities;
  context.tracked_pages = s.tracked_pages;
  context.bucket_relative_error = std::exp2(1.0 / options.curve.buckets_per_octave) - 1;
  for (const AnalysisSnapshot::Canary& c : s.canaries) {
    const curve::PolicyTotals& t = c.windows[window];
    const curve::PolicyTotals& engine = s.canaries[c.baseline].windows[window];
    context.policies.push_back({std::string(curve::PolicyName(c.kind)), c.capacity, t.PageHitRatio(),
                                s.sampled ? std::nullopt : std::optional<double>(t.RequestCoverage()),
                                t.PageHitRatio() - engine.PageHitRatio(), c.role == CanaryRole::kEnginePolicy});
  }
  if (window < s.load.size()) context.kv_load = KvLoadApiOf(options, snapshot, window);
  if (s.hybrid && window < s.hybrid->windows.size()) {
    const HybridSnapshot& h = *s.hybrid;
    CurveApiContext::Hybrid api;
    api.report = HybridWindowReport(options, h, h.windows[window]);
    api.unit_bytes = static_cast<double>(h.unit_bytes);
    api.full_attention_bytes_per_token = options.bytes_per_token.value_or(0);
    api.groups = h.model->groups;
    api.capacity_units = h.capacity_units;
    for (const HybridSnapshot::GroupBytes& row : h.group_bytes[window]) {
      api.group_bytes.push_back({row.target, row.fraction, row.capacity_units, row.bytes});
    }
    api.tracked_bytes = h.tracked_bytes;
    api.tracked_bytes_limit = h.model->engine.max_bytes;
    api.evicted_items = h.evicted_items;
    context.hybrid = std::move(api);
  }
  return RenderCurveApiJson(WindowReport(options, s.windows[window], s.sampled), context);
}

std::string GroupsJson(const AgentOptions& options, AgentSnapshot snapshot, std::size_t window) {
  std::optional<curve::GroupAccounting::View>& groups = snapshot.analysis.groups;
  if (!groups || window >= groups->windows.size()) return {};
  GroupsApiContext context;
  context.window = options.curve.windows[window].name;
  context.window_seconds = options.curve.windows[window].seconds;
  context.replica = options.replica;
  context.tenant_labels = std::move(groups->tenant_labels);
  context.class_labels = std::move(groups->class_labels);
  return RenderGroupsApiJson(groups->windows[window], context);
}

namespace {

// A JSON answer, or a 404 with {"error": error} when there is none (empty body).
HttpResponse JsonOrNotFound(std::string body, const std::string& error) {
  HttpResponse r;
  r.content_type = "application/json";
  r.body = std::move(body);
  if (r.body.empty()) {
    r.status = 404;
    base::JsonWriter w;
    w.BeginObject();
    w.Key("error");
    w.String(error);
    w.EndObject();
    r.body = w.Take();
  }
  return r;
}

}  // namespace

void RegisterRoutes(HttpServer& http, Agent& agent, const AgentOptions& options) {
  http.Handle("/metrics", [&agent](const HttpRequest&) {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = agent.RenderMetrics();
    return r;
  });
  http.Handle("/healthz", [](const HttpRequest&) {
    HttpResponse r;
    r.body = "ok\n";
    return r;
  });
  http.Handle("/readyz", [&agent](const HttpRequest&) {
    const bool ready = agent.ready();
    HttpResponse r;
    r.status = ready ? 200 : 503;
    r.body = ready ? "ready\n" : "starting\n";
    return r;
  });
  http.Handle("/api/v1/windows", [&options](const HttpRequest&) {
    base::JsonWriter w;
    w.BeginObject();
    w.Key("windows");
    w.BeginArray();
    for (const WindowSpec& spec : options.curve.windows) w.String(spec.name);
    w.EndArray();
    w.EndObject();
    HttpResponse r;
    r.content_type = "application/json";
    r.body = w.Take();
    return r;
  });
  http.Handle("/api/v1/alerts", [&agent](const HttpRequest&) {
    HttpResponse r;
    r.content_type = "application/json";
    if (const AlertRunner* alerts = agent.alert_runner()) {
      r.body = alerts->AlertsJson();
    } else {
      r.body = "{\"status\":\"success\",\"data\":{\"alerts\":[]}}";
    }
    return r;
  });
  http.Handle("/api/v1/curve", [&agent, &options](const HttpRequest& req) {
    const std::string window = req.Query("window").value_or(options.curve.windows.front().name);
    return JsonOrNotFound(agent.RenderCurveJson(window), "unknown window '" + window + "'");
  });
  http.Handle("/api/v1/groups", [&agent, &options](const HttpRequest& req) {
    const std::string window = req.Query("window").value_or(options.curve.windows.front().name);
    return JsonOrNotFound(agent.RenderGroupsJson(window),
                          TenantsOn(options) ? "unknown window '" + window + "'"
                                             : std::string("tenants are off (tenants.enabled, or a sampled engine)"));
  });
  http.Handle("/api/v1/history", [&agent, &options](const HttpRequest& req) {
    const std::string window = req.Query("window").value_or(options.curve.windows.front().name);
    return JsonOrNotFound(agent.RenderHistoryJson(window), "unknown window '" + window + "'");
  });
  http.Handle("/", [&options](const HttpRequest& req) {
    HttpResponse r;
    if (req.path != "/") {
      r.status = 404;
      r.body = "not found\n";
      return r;
    }
    PageOptions page;
    page.title = "kvwatch";
    page.replica = options.replica;
    page.refresh_seconds = options.refresh_seconds;
    for (const WindowSpec& w : options.curve.windows) page.windows.push_back(w.name);
    r.content_type = kIndexPageContentType;
    r.headers.emplace_back("Content-Security-Policy", kIndexPageContentSecurityPolicy);
    r.body = RenderIndexPage(page);
    return r;
  });
}

}  // namespace kvwatch::agent
