// `kvwatch synth` with absurd flag values: each refused with a message naming the
// flag (not the generator's option name), never a crash, a hang or a trace of
// nonsense timestamps.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using testing_support::Millis;
using testing_support::RunCommand;

testing_support::CommandResult Synth(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {KVWATCH_BINARY, "synth", "-o", "/dev/null"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, Millis(60000));
}

TEST(SynthCommandTest, AbsurdValuesNameTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      // A rate of 1e-300 put the second request at 1e300 s: its millisecond
      // timestamp overflowed 64 bits. 1e300 put every request at time 0.
      {{"--requests", "10", "--rate", "1e-300"}, "--rate must be in [1e-06, 1000000000], got 1e-300"},
      {{"--requests", "10", "--rate", "1e300"}, "--rate must be in [1e-06, 1000000000], got 1e+300"},
      {{"--requests", "10", "--rate", "0"}, "--rate must be in"},
      {{"--requests", "10", "--rate", "-1"}, "--rate must be in"},
      {{"--requests", "10", "--rate", "nan"}, "--rate must be in"},
      {{"--duration", "1e300"}, "--duration must be in [0, 10000000000], got 1e+300"},
      {{"--duration", "-1"}, "--duration must be in [0, 10000000000], got -1"},
      {{"--duration", "0", "--requests", "100000", "--rate", "1e-6"},
       "--requests at --rate 1e-06 would span 100000000000 s, more than 10000000000 (set --duration, or fewer "
       "requests)"},
      {{"--duration", "0", "--requests", "0"}, "--duration or --requests must be set for a finite workload"},
      {{"--requests", "10", "--tenants", "0"}, "--tenants must be in [1, 60000], got 0"},
      {{"--requests", "10", "--tenants", "-1"}, "--tenants must be in [1, 60000], got -1"},
      {{"--requests", "10", "--system-prompt-max-pages", "5000"}, "--system-prompt-max-pages must be in [0, 4096]"},
      {{"--requests", "10", "--system-prompt-min-pages", "-1"}, "--system-prompt-min-pages must be in"},
      {{"--requests", "10", "--sessions", "0"}, "--sessions must be in [1, 1000000], got 0"},
      {{"--requests", "10", "--one-shot-fraction", "2"}, "--one-shot-fraction must be in [0, 1], got 2"},
      {{"--requests", "10", "--mean-turns", "1e300"}, "--mean-turns must be in [1, 1000000], got 1e+300"},
      {{"--requests", "10", "--page-tokens", "0"}, "--page-tokens must be in [1, 1048576], got 0"},
      {{"--requests", "10", "--shift-start", "10", "--shift-end", "1e300"}, "--shift-end must be in [0, 10000000000]"},
      {{"--requests", "10", "--shift-start", "-5", "--shift-end", "10"}, "--shift-start must be in"},
      {{"--requests", "10", "--shift-start", "0", "--shift-end", "10", "--shift-share", "2"},
       "--shift-share must be in"},
      {{"--requests", "10", "--shift-start", "0", "--shift-end", "10", "--shift-system-prompt-pages", "5000"},
       "--shift-system-prompt-pages must be in"},
      {{"--requests", "10", "--shift-start", "0", "--shift-end", "10", "--shift-mean-turns", "0"},
       "--shift-mean-turns must be in"},
      // --prompt-tokens 0 was taken as "not given" (512).
      {{"--requests", "10", "--shape", "fixed", "--prompt-tokens", "0"},
       "--prompt-tokens must be in [1, 16777200], got 0"},
      {{"--requests", "10", "--shape", "fixed", "--output-tokens", "5,0"}, "--output-tokens must be in"},
      {{"--requests", "10", "--shape", "fixed", "--rate", "1e-300"}, "--rate must be in"},
      // Beyond the flag's type: CLI11 names the flag.
      {{"--requests", "10", "--tenants", "1e9"}, "--tenants"},
      {{"--requests", "10", "--shape", "fixed", "--prompt-tokens", "99999999999999"}, "--prompt-tokens"},
  };
  for (const auto& [args, message] : cases) {
    auto r = Synth(args);
    // An exit with an error, not a signal, a timeout or a trace.
    ASSERT_TRUE(r.status && WIFEXITED(*r.status)) << message << "\n" << r.Describe();
    EXPECT_NE(WEXITSTATUS(*r.status), 0) << message << "\n" << r.Describe();
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("rate_per_s"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("synth options"), std::string::npos) << r.err;
  }
}

TEST(SynthCommandTest, TheLimitsThemselvesAreAccepted) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--requests", "3", "--rate", "1e-6", "--duration", "0"},
           {"--requests", "3", "--rate", "1e9"},
           {"--duration", "1e10", "--requests", "3"},
           {"--requests", "3", "--shape", "fixed", "--prompt-tokens", "1"},
       }) {
    auto r = Synth(args);
    EXPECT_TRUE(r.Exited(0)) << r.Describe();
  }
}

}  // namespace
}  // namespace kvwatch::agent
