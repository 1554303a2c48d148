// `kvwatch synth`: writes the built-in synthetic workload (collectors/synth.h) as
// JSON Lines that `kvwatch replay` and the trace collector read, so every feature
// can be shown without outside data.
#ifndef KVWATCH_AGENT_SYNTH_COMMAND_H_
#define KVWATCH_AGENT_SYNTH_COMMAND_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectors/synth.h"

namespace kvwatch::agent {

struct SynthCommandOptions {
  collectors::SynthOptions synth;
  // "chat" (collectors/synth.h's multi-tenant sessions) or "fixed" (every request
  // alike: collectors::GenerateFixedShape).
  std::string shape = "chat";
  std::string arrivals = "poisson";  // poisson | even (even: the fixed shape only)
  // The fixed shape's lengths; unset / empty: not given (512 and {512}). Given with
  // the chat shape, an error.
  std::optional<std::uint32_t> prompt_tokens;
  std::vector<std::uint32_t> output_tokens;
  std::string output = "-";  // a path, or - for standard output
};

// Returns the process exit code (0 ok, 1 cannot write, 2 bad options).
int RunSynth(const SynthCommandOptions& options);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_SYNTH_COMMAND_H_
