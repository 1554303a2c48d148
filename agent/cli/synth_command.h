// `kvwatch synth`: writes the built-in synthetic workload (collectors/synth.h) as
// JSON Lines that `kvwatch replay` and the trace collector read, so every feature
// can be shown without outside data.
#ifndef KVWATCH_AGENT_SYNTH_COMMAND_H_
#define KVWATCH_AGENT_SYNTH_COMMAND_H_

#include <string>

#include "collectors/synth.h"

namespace kvwatch::agent {

struct SynthCommandOptions {
  collectors::SynthOptions synth;
  std::string output = "-";  // a path, or - for standard output
};

// Returns the process exit code (0 ok, 1 cannot write, 2 bad options).
int RunSynth(const SynthCommandOptions& options);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_SYNTH_COMMAND_H_
