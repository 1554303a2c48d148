// collectors.*: config/ checks the section's shape (every key in the table, no
// duplicates, maps where maps go and lists of maps where lists go) and keeps it as
// written; the collector registry (agent/runtime/collector_registry.cc) reads the
// values into each collector's options. See CollectorSettings in agent_config.h.
#include <memory>
#include <string>

#include "config/sections.h"

namespace kvwatch::config::internal {

using base::Status;

namespace {

// The keys of a map are checked by ForEachKey itself; their values are the registry's.
Status AcceptValue(const Entry&) { return Status::Ok(); }

}  // namespace

Status ParseCollectorsSection(FieldReader& r, const Entry& section, CollectorSettings* collectors) {
  std::size_t configured = 0;
  Status status = r.ForEachKey(section, [&](const Entry& e) -> Status {
    if (e.type == ConfigType::kMap) {  // collectors.synth
      if (!e.node.IsNull() && !e.node.IsMap()) return r.Expected(e, "a map");
      ++configured;
      return r.ForEachKey(e, AcceptValue);
    }
    if (e.type == ConfigType::kMapList) {
      base::Result<std::vector<Entry>> items = r.Items(e);
      if (!items.ok()) return items.status();
      for (const Entry& item : items.value()) {
        if (!item.node.IsMap()) return r.Expected(item, "a map");
        if (Status s = r.ForEachKey(item, AcceptValue); !s.ok()) return s;
        ++configured;
      }
      return Status::Ok();
    }
    return r.Unhandled(e);
  });
  if (!status.ok()) return status;
  collectors->source = r.source();
  collectors->section = std::make_shared<const Entry>(section);
  collectors->configured = configured;
  return Status::Ok();
}

}  // namespace kvwatch::config::internal
