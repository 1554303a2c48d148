// kvwatch_crash_agent: `kvwatch agent` with the atomic writer's fault points armed,
// for the crash tests only (tests/agent/crash_consistency_test.cc); never
// installed. KVWATCH_CRASH_AT="POINT:N" kills the process with SIGKILL the Nth
// time a save reaches POINT (base/atomic_file.h: created, written, synced,
// renamed, done), so a test can place a kill between any two steps of a save.
//
//   kvwatch_crash_agent CONFIG
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent/runtime/agent_command.h"
#include "base/atomic_file.h"

namespace {

std::string crash_point;
long crash_at = 0;
long reached = 0;

void Fault(std::string_view point) {
  if (point != crash_point || ++reached != crash_at) return;
  std::fprintf(stderr, "kvwatch_crash_agent: SIGKILL at %s #%ld\n", crash_point.c_str(), crash_at);
  std::fflush(stderr);
  ::raise(SIGKILL);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kvwatch_crash_agent CONFIG (KVWATCH_CRASH_AT=POINT:N)\n");
    return 2;
  }
  if (const char* at = std::getenv("KVWATCH_CRASH_AT"); at != nullptr && *at != '\0') {
    const std::string spec = at;
    const std::size_t colon = spec.find(':');
    crash_point = spec.substr(0, colon);
    crash_at = colon == std::string::npos ? 1 : std::strtol(spec.c_str() + colon + 1, nullptr, 10);
    kvwatch::base::SetFaultHook(&Fault);
  }
  kvwatch::agent::AgentFlags flags;
  flags.config_path = argv[1];
  return kvwatch::agent::RunAgent(flags);
}
