// libFuzzer target: a whole agent config file through `kvwatch check-config`'s
// validation (agent/runtime/agent_command.h CheckConfigText): YAML parsing, every
// section, the collectors' settings, the policies, alerts and the web settings,
// from memory. It creates nothing (no socket, thread, file or directory); host
// names are resolved numerically only, so that no input makes a DNS query.
// Invariants: the verdict is stable (a second check gives the same one) and an
// error has a message.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agent/runtime/agent_command.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kvwatch::agent::ValidationOptions options;
  options.resolve_host_names = false;
  const kvwatch::base::Status first = kvwatch::agent::CheckConfigText(text, "fuzz.yaml", options);
  if (!first.ok()) Check(!first.error().empty());
  const kvwatch::base::Status second = kvwatch::agent::CheckConfigText(text, "fuzz.yaml", options);
  Check(first.ok() == second.ok());
  if (!first.ok()) Check(first.error() == second.error());
  return 0;
}
