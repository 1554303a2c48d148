#include "agent/cli/synth_command.h"

#include <cctype>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace kvwatch::agent {

namespace {

// The generator's option names (SynthOptions' fields, as collectors/synth.cc's
// messages name them) and the flags that set them.
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

bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

// A generator's message with each option name (a whole word) as its flag:
// "synth options: rate_per_s must be ..." -> "--rate must be ...".
std::string WithFlagNames(std::string_view message) {
  constexpr std::string_view kPrefix = "synth options: ";
  if (message.substr(0, kPrefix.size()) == kPrefix) message.remove_prefix(kPrefix.size());
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    if (!IsNameChar(message[i])) {
      out.push_back(message[i++]);
      continue;
    }
    std::size_t end = i;
    while (end < message.size() && IsNameChar(message[end])) ++end;
    std::string_view word = message.substr(i, end - i);
    std::size_t stops = 0;  // a sentence's full stops after the word
    while (stops < word.size() && word[word.size() - 1 - stops] == '.') ++stops;
    const std::string_view bare = word.substr(0, word.size() - stops);
    std::string_view replaced = bare;
    for (const auto& [name, flag] : kFlags) {
      if (bare == name) replaced = flag;
    }
    out.append(replaced).append(word.substr(bare.size()));
    i = end;
  }
  return out;
}

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
  if (base::Status s = fixed ? collectors::ValidateFixedShape(options.synth, shape)
                             : collectors::ValidateSynthOptions(options.synth);
      !s.ok()) {
    return fail(WithFlagNames(s.error()));
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
    std::fprintf(stderr, "kvwatch synth: %s\n", WithFlagNames(written.error()).c_str());
    return 2;
  }
  if (std::fflush(out) != 0 || std::ferror(out)) {
    std::fprintf(stderr, "kvwatch synth: write error on %s\n", options.output.c_str());
    return 1;
  }
  return 0;
}

}  // namespace kvwatch::agent
