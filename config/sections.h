// The agent config's section parsers (internal to config/): each reads one
// top-level section of the YAML with the shared FieldReader (field_reader.h) into
// the settings that section feeds, and each Resolve* applies the rules that span
// sections once the whole document is read. agent_config.cc dispatches the
// top-level keys to them.
//
//   curve_section.cc       engine.*, curve.*
//   web_state_section.cc   web.*, state.*
//   collectors_section.cc  collectors.*, straight into each collector's options
//                          (collectors/collector_options.h)
//   alerts_section.cc      alerts.*, straight into alerts::AlerterOptions
//   tenants_section.cc     tenants.*, straight into curve::TenantOptions
//
// Thread safety: as FieldReader's (one parse at a time per reader).
#ifndef KVWATCH_CONFIG_SECTIONS_H_
#define KVWATCH_CONFIG_SECTIONS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "config/agent_config.h"
#include "config/field_reader.h"

namespace kvwatch::config::internal {

// What the curve section saw that the rules across sections need.
struct CurveNotes {
  std::vector<std::pair<std::uint64_t, std::string>> capacity_paths;  // document order
};

base::Status ParseEngineSection(FieldReader& r, const Entry& section, EngineSettings* engine);
base::Status ParseCurveSection(FieldReader& r, const Entry& section, CurveSettings* curve, CurveNotes* notes);
// engine.remembered_evictions follows engine.max_pages unless written; capacities
// within engine.max_pages; policy canaries need capacities, at most 64 of them.
base::Status ResolveCurve(const FieldReader& r, const CurveNotes& notes, AgentConfig* config);

base::Status ParseWebSection(FieldReader& r, const Entry& section, WebSettings* web);
base::Status ParseStateSection(FieldReader& r, const Entry& section, StateSettings* state);

base::Status ParseCollectorsSection(FieldReader& r, const Entry& section, CollectorSettings* collectors);
// What other sections decide (curve.max_clock_skew, the model's page-id scope,
// engine.max_pages, page_tokens) into each collector's options; the agent's
// synthetic replica when no collector is configured. Cannot fail.
void ResolveCollectors(AgentConfig* config);

base::Status ParseAlertsSection(FieldReader& r, const Entry& section, AlertSettings* alerts);
// alerts.short_window < alerts.baseline_window; each, when written, one of curve.windows.
base::Status ResolveAlertWindows(const FieldReader& r, const AgentConfig& config);

base::Status ParseTenantsSection(FieldReader& r, const Entry& section, curve::TenantOptions* tenants);
// Tenants need the exact engine: an error naming tenants.enabled when it was
// written true and the engine samples; off when not written.
base::Status ResolveTenants(const FieldReader& r, AgentConfig* config);

// Spellings in the file, shared by the parser and the names in agent_config.h.
inline constexpr const auto& kWorkingSetTargets = alerts::kWorkingSetTargetSpellings;

}  // namespace kvwatch::config::internal

#endif  // KVWATCH_CONFIG_SECTIONS_H_
