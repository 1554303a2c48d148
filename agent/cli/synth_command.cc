#include "agent/cli/synth_command.h"

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace kvwatch::agent {

namespace {

// The generator's option names (SynthOptions' fields) and the flags that set them,
// so that its messages name the flags.
constexpr std::pair<std::string_view, std::string_view> kFlags[] = {
    {"rate_per_s", "--rate"},
    {"duration_s", "--duration"},
    {"max_requests", "--requests"},
    {"tenants", "--tenants"},
    {"system_prompt_min_pages", "--system-prompt-min-pages"},
    {"system_prompt_max_pages", "--system-prompt-max-pages"},
    {"active_sessions", "--sessions"},
    {"one_shot_fraction", "--one-shot-fraction"},
    {"mean_session_turns", "--mean-turns"},
    {"page_tokens", "--page-tokens"},
    {"shift.start_s", "--shift-start"},
    {"shift.end_s", "--shift-end"},
    {"shift.share", "--shift-share"},
    {"shift.system_prompt_pages", "--shift-system-prompt-pages"},
    {"shift.mean_session_turns", "--shift-mean-turns"},
    {"prompt_tokens", "--prompt-tokens"},
    {"output_tokens", "--output-tokens"},
};

}  // namespace

int RunSynth(const SynthCommandOptions& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "kvwatch synth: %s\n", message.c_str());
    return 2;
  };
  if (options.shape != "chat" && options.shape != "fixed") {
    return fail("--shape: expected chat or fixed, got '" + options.shape + "'");
  }
  if (options.arrivals != "poisson" && options.arrivals != "even") {
    return fail("--arrivals: expected poisson or even, got '" + options.arrivals + "'");
  }
  const bool fixed = options.shape == "fixed";
  if (!fixed && (options.arrivals != "poisson" || options.prompt_tokens || !options.output_tokens.empty())) {
    return fail("--arrivals even, --prompt-tokens and --output-tokens need --shape fixed");
  }
  collectors::FixedShapeOptions shape;
  if (options.prompt_tokens) shape.prompt_tokens = *options.prompt_tokens;
  if (!options.output_tokens.empty()) shape.output_tokens = options.output_tokens;
  shape.even_arrivals = options.arrivals == "even";
  if (base::Status s = fixed ? collectors::ValidateFixedShape(options.synth, shape, kFlags)
                             : collectors::ValidateSynthOptions(options.synth, kFlags);
      !s.ok()) {
    return fail(s.error());
  }
  if (options.synth.duration_s <= 0 && options.synth.max_requests == 0) {
    return fail("--duration or --requests must be set for a finite workload");
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
  auto write = [&](const collectors::SynthRequest& r) {
    line.clear();
    collectors::AppendSynthJsonLine(r, &line);
    std::fwrite(line.data(), 1, line.size(), out);
  };
  auto written = fixed ? collectors::GenerateFixedShape(options.synth, shape, write)
                       : collectors::GenerateSynth(options.synth, write);
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
