#include <string>

#include "config/sections.h"

namespace kvwatch::config::internal {

using base::Status;

Status ParseTenantsSection(FieldReader& r, const Entry& section, curve::TenantOptions* tenants) {
  return r.ForEachKey(section, [&](const Entry& e) -> Status {
    const std::string& k = e.pattern;
    if (k == "tenants.enabled") return r.ReadBool(e, &tenants->enabled);
    if (k == "tenants.top_k") return r.ReadInt(e, 1, 254, &tenants->top_k);
    if (k == "tenants.class_top_k") return r.ReadInt(e, 1, 254, &tenants->class_top_k);
    if (k == "tenants.isolated") return r.ReadBool(e, &tenants->isolated);
    return r.Unhandled(e);
  });
}

Status ResolveTenants(const FieldReader& r, AgentConfig* c) {
  const bool sampled = c->engine.sample_rate < 1.0 || c->engine.sample_max_pages > 0;
  if (!sampled || !c->tenants.enabled) return Status::Ok();
  if (r.Written("tenants.enabled")) {
    return r.FailAtPath("tenants.enabled",
                        "tenants need the exact engine: set engine.sample_rate to 1 and engine.sample_max_pages "
                        "to 0, or tenants.enabled to false");
  }
  c->tenants.enabled = false;  // documented: off when not written and the engine samples
  return Status::Ok();
}

}  // namespace kvwatch::config::internal
