#include "agent/cli/synth_command.h"

#include <cstdio>
#include <memory>

namespace kvwatch::agent {

int RunSynth(const SynthCommandOptions& options) {
  if (base::Status s = collectors::ValidateSynthOptions(options.synth); !s.ok()) {
    std::fprintf(stderr, "kvwatch synth: %s\n", s.error().c_str());
    return 2;
  }
  std::FILE* out = stdout;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(nullptr, &std::fclose);
  if (options.output != "-") {
    file.reset(std::fopen(options.output.c_str(), "wb"));
    if (!file) {
      std::fprintf(stderr, "kvwatch synth: --output: cannot write '%s'\n", options.output.c_str());
      return 1;
    }
    out = file.get();
  }
  std::string line;
  auto written = collectors::GenerateSynth(options.synth, [&](const collectors::SynthRequest& r) {
    line.clear();
    collectors::AppendSynthJsonLine(r, &line);
    std::fwrite(line.data(), 1, line.size(), out);
  });
  if (!written.ok()) {
    std::fprintf(stderr, "kvwatch synth: %s\n", written.error().c_str());
    return 2;
  }
  if (std::fflush(out) != 0 || std::ferror(out)) {
    std::fprintf(stderr, "kvwatch synth: write error on %s\n", options.output.c_str());
    return 1;
  }
  return 0;
}

}  // namespace kvwatch::agent
