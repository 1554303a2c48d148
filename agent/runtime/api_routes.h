// The agent's HTTP routes: /metrics (exposition.h), /healthz, /readyz, the JSON
// API (/api/v1/windows, /api/v1/alerts, /api/v1/curve, /api/v1/groups) and the
// page at /. The JSON answers are built from a snapshot (snapshot.h) outside the
// agent's mutex; their fields are agent/render/api_json.h's.
//
// Thread safety: the handlers run on the HTTP server's threads and reach the
// agent only through its public, thread-safe interface.
#ifndef KVWATCH_AGENT_RUNTIME_API_ROUTES_H_
#define KVWATCH_AGENT_RUNTIME_API_ROUTES_H_

#include <cstddef>
#include <string>

#include "agent/runtime/snapshot.h"
#include "agent/web/http_server.h"

namespace kvwatch::agent {

struct AgentOptions;  // agent.h
class Agent;          // agent.h

// GET /api/v1/curve for curve window `window` (an index into options.curve.windows):
// the window's report, the configured capacities and the policy canaries' table.
// REQUIRES: `snapshot` holds its windows and canaries.
std::string CurveJson(const AgentOptions& options, const AgentSnapshot& snapshot, std::size_t window);
// GET /api/v1/groups for curve window `window`: the tenants' and classes' curves;
// empty when tenants are off (TenantsOn, analysis.h).
// REQUIRES: `snapshot` holds its windows.
std::string GroupsJson(const AgentOptions& options, AgentSnapshot snapshot, std::size_t window);

// Registers every route on `http`. `agent` and `options` (the agent's) outlive
// the server.
void RegisterRoutes(HttpServer& http, Agent& agent, const AgentOptions& options);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_API_ROUTES_H_
