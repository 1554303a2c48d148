#include <limits>
#include <string>

#include "config/sections.h"

namespace kvwatch::config::internal {

using base::Status;

Status ParseWebSection(FieldReader& r, const Entry& section, WebSettings* web) {
  return r.ForEachKey(section, [&](const Entry& e) -> Status {
    const std::string& k = e.pattern;
    if (k == "web.listen_address") {
      if (Status s = r.ReadString(e, &web->listen_address); !s.ok()) return s;
      if (web->listen_address.empty() || HasWhitespace(web->listen_address)) {
        return r.Expected(e, "an address such as 127.0.0.1, ::1 or 0.0.0.0");
      }
      return Status::Ok();
    }
    if (k == "web.port") return r.ReadInt(e, 0, 65535, &web->port);
    if (k == "web.config_file") return r.ReadString(e, &web->config_file);
    if (k == "web.max_connections") return r.ReadInt(e, 1, 1 << 20, &web->max_connections);
    if (k == "web.refresh_seconds") {
      return r.ReadInt(e, 1, std::numeric_limits<int>::max(), &web->refresh_seconds);
    }
    return r.Unhandled(e);
  });
}

Status ParseStateSection(FieldReader& r, const Entry& section, StateSettings* state) {
  return r.ForEachKey(section, [&](const Entry& e) -> Status {
    if (e.pattern == "state.path") return r.ReadString(e, &state->path);
    if (e.pattern == "state.interval") return r.ReadDuration(e, true, &state->interval_seconds);
    return r.Unhandled(e);
  });
}

}  // namespace kvwatch::config::internal
