// `kvwatch replay` output is byte-for-byte what it was before the replay pipeline
// (reader thread + engine thread, tables sized from the input): the real binary is
// run on the shared Mooncake traces and the weka coding-agent trace, and its stdout
// is compared with the outputs of the single-threaded code saved in tests/golden/.
//
// One substitution is made on both sides before comparing: the trace's absolute
// path in input.sources is replaced by the placeholder "@TRACE@" (the golden files
// were written on another checkout). Nothing is masked: the engine's tables are
// still sized as before (grown by doubling), so even engine.memory_bytes must match.
// The table and CSV formats are compared on one trace too (they carry no path and
// no memory figure).
//
// Skips when the shared traces (KVWATCH_SHARED_DATA) are absent.
//
// The outputs have changed since, only where intended, each change named in its
// commit: regenerate with KVWATCH_UPDATE_GOLDEN=1 (the files are then written,
// not compared) and review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

namespace fs = std::filesystem;
using testing_support::Millis;
using testing_support::ReadFile;
using testing_support::RunCommand;

std::string GoldenPath(const std::string& name) { return std::string(KVWATCH_SOURCE_DIR) + "/tests/golden/" + name; }

// Replaces every occurrence of `from` by `to`.
std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// The comparable form of an output: the trace path as a placeholder.
std::string Normalize(const std::string& text, const std::string& trace) {
  return ReplaceAll(text, "\"" + trace + "\"", "\"@TRACE@\"");
}

struct GoldenCase {
  const char* trace;   // under KVWATCH_SHARED_DATA
  const char* golden;  // under tests/golden
  std::vector<std::string> args;
};

std::vector<GoldenCase> Cases() {
  const std::vector<std::string> json_512 = {"--format", "json", "--page-tokens", "512"};
  return {
      {"mooncake/conversation_trace.jsonl", "conversation_trace.json", json_512},
      {"mooncake/synthetic_trace.jsonl", "synthetic_trace.json", json_512},
      {"mooncake/toolagent_trace_hash_ids.jsonl", "toolagent_trace_hash_ids.json", json_512},
      {"weka/claude_code_sessions_merged.jsonl.gz", "weka_claude_code_sessions.json", {"--format", "json"}},
      {"mooncake/conversation_trace.jsonl", "conversation.csv", {"--format", "csv", "--page-tokens", "512"}},
      {"mooncake/conversation_trace.jsonl", "conversation.txt", {"--format", "table", "--page-tokens", "512"}},
  };
}

TEST(ReplayGoldenTest, OutputIsByteForByteTheSingleThreadedOne) {
  const std::string data = KVWATCH_SHARED_DATA;
  if (!fs::exists(data)) GTEST_SKIP() << "no shared traces under " << data;
  int compared = 0;
  for (const GoldenCase& c : Cases()) {
    const std::string trace = data + "/" + c.trace;
    if (!fs::exists(trace)) continue;
    SCOPED_TRACE(std::string(c.trace) + " -> " + c.golden);
    const bool update = std::getenv("KVWATCH_UPDATE_GOLDEN") != nullptr;
    const std::string golden = update ? std::string() : ReadFile(GoldenPath(c.golden));
    ASSERT_TRUE(update || !golden.empty()) << "missing golden file " << GoldenPath(c.golden);
    std::vector<std::string> argv = {KVWATCH_BINARY, "replay"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    argv.insert(argv.end(), {"--progress", "never", trace});
    const auto result = RunCommand(argv, Millis(600000));
    ASSERT_TRUE(result.Exited(0)) << result.Describe();
    EXPECT_EQ(result.err, "");
    if (update) {
      std::ofstream(GoldenPath(c.golden), std::ios::binary | std::ios::trunc) << Normalize(result.out, trace);
    } else {
      EXPECT_EQ(Normalize(result.out, trace), Normalize(golden, "@TRACE@"));
    }
    ++compared;
  }
  if (compared == 0) GTEST_SKIP() << "none of the golden traces is under " << data;
}

}  // namespace
}  // namespace kvwatch::agent
