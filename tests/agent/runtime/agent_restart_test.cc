// Acceptance tests of the agent's state across restarts (state.path).
//
// SigtermAndRestartEqualAnUninterruptedRun: agent A reads records R1, is
// SIGTERMed (it saves its state and its tail position), R2 is appended while it
// is down, and A restarts and reads R2 only. Agent B reads R1+R2 in one go from a
// second directory. A's curve histograms, counters, window gauges and
// /api/v1/curve windows must equal B's. The KV load windows are restored too:
// their request counts and mean token-seconds equal B's; their span (and so rho)
// runs from the first record to the clock, which moves at wall speed after the
// last record, so only rho x span is compared; the per-class quantiles are not
// (derived classes start cold after a restart, docs/guarantees.md).
//
// A corrupt, truncated or incompatible (other engine.max_pages) state file is
// reported on stderr, set aside as <state file>.rejected-<time>, and the agent
// starts with empty curves; the state it saves afterwards restores normally.
//
// StatePathTest: what is at the state path may be anything. A FIFO is set aside
// without blocking start-up; a 2 GiB sparse file is refused after its header
// (the agent's peak RSS stays far below the file); a corrupt file that cannot be
// set aside (chattr +i when the test may use it, else a read-only folder for a
// non-root user) is said so, and the agent runs without saving rather than
// writing into a path it cannot replace; a second agent on the same state.path
// is refused at start-up naming the first one's pid. SighupTest: SIGHUP reloads
// web.config_file (or is logged and ignored without one); the agent serves on,
// and SIGTERM afterwards still saves.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "agent/web/basic_auth.h"
#include "tests/agent/testing_agent.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers

// The value of a JSON number field in body; NaN when absent.
double NumberField(const std::string& body, const std::string& field) {
  const std::string key = "\"" + field + "\":";
  const std::size_t at = body.find(key);
  return at == std::string::npos ? std::nan("") : std::stod(body.substr(at + key.size()));
}

// The agent keeps its state in <state.path>/state.bin.
constexpr char kStateFile[] = "state.bin";

std::string AgentConfig(const std::string& trace, const std::string& state_dir, std::uint64_t max_pages = 0) {
  std::string yaml = "web: {port: 0}\ncurve:\n  windows: [\"5m\", \"1h\"]\n  capacities: [64, 500]\n";
  if (max_pages) yaml += "engine: {max_pages: " + std::to_string(max_pages) + "}\n";
  if (!state_dir.empty()) yaml += "state: {path: \"" + state_dir + "\"}\n";
  return yaml + "collectors:\n  trace_files:\n" + TraceFileCollectorYaml("trace", trace);
}

// Files in dir whose names start with prefix.
std::vector<std::string> FilesStartingWith(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.push_back(entry.path().string());
  }
  return out;
}

// The series that describe the curves (not the process, the collectors or the
// state file): they must not depend on whether the agent was restarted.
const std::vector<std::string> kCurveSeries = {
    "kvwatch_page_hit_capacity_pages",  // _bucket, _count, _sum
    "kvwatch_request_required_capacity_pages",
    "kvwatch_requests_total",
    "kvwatch_page_references_total",
    "kvwatch_page_cold_misses_total",
    "kvwatch_page_beyond_tracked_total",
    "kvwatch_reused_tokens_unlimited_total",
    "kvwatch_tracked_pages",
    "kvwatch_window_requests",
    "kvwatch_window_late_requests_total",
    "kvwatch_unlimited_page_hit_ratio",
    "kvwatch_working_set_pages",
    "kvwatch_knee_pages",
    "kvwatch_page_hit_ratio",
    "kvwatch_request_coverage_ratio",
};

TEST(AgentRestartTest, SigtermAndRestartEqualAnUninterruptedRun) {
  TempDir dir_a("kvwatch_restart_a"), dir_b("kvwatch_restart_b");
  ASSERT_TRUE(dir_a.ok() && dir_b.ok());
  // One continuous stream: R2's sessions continue R1's, so R2's distances depend
  // on the cache state R1 left.
  const std::vector<Record> records = SynthRecords(1500);
  ASSERT_EQ(records.size(), 1500u);
  const std::size_t split = 800;
  const std::string r1 = JsonLines(records, 0, split, WallNowMs());

  // A reads R1, then stops on SIGTERM.
  const std::string trace_a = dir_a.Sub("trace.jsonl"), state_a = dir_a.Sub("state");
  ASSERT_TRUE(WriteFile(trace_a, r1));
  std::string error;
  {
    auto a = AgentProcess::Start(dir_a.path(), "a1", AgentConfig(trace_a, state_a), &error);
    ASSERT_NE(a, nullptr) << error;
    ASSERT_TRUE(a->WaitForRequests(split))
        << "A did not read R1; kvwatch_requests_total=" << a->Value("kvwatch_requests_total") << "\n"
        << Tail(a->Stderr());
    const auto exit = a->Stop();
    ASSERT_EQ(DescribeWaitStatus(exit), "exit 0") << Tail(a->Stderr());
  }
  ASSERT_TRUE(std::filesystem::exists(std::filesystem::path(state_a) / kStateFile))
      << "SIGTERM should save the state in " << state_a;

  // R2 arrives while A is down; A restarts and reads only R2.
  const std::string r2 = JsonLines(records, split, records.size(), WallNowMs());
  ASSERT_TRUE(AppendFile(trace_a, r2));
  auto a = AgentProcess::Start(dir_a.path(), "a2", AgentConfig(trace_a, state_a), &error);
  ASSERT_NE(a, nullptr) << error;
  // The collector's counters continue across the restart with the curves (the
  // state file holds both): R1 from before, R2 read now.
  ASSERT_TRUE(PollUntil(
      [&] {
        return a->Value("kvwatch_collector_records_total", {{"collector", "trace"}}) ==
               static_cast<double>(records.size());
      },
      kIngestTimeout))
      << "restarted A should read exactly R2 (" << records.size() - split << " records) after R1 (" << split
      << "); its counter says " << a->Value("kvwatch_collector_records_total", {{"collector", "trace"}}) << "\n"
      << Tail(a->Stderr());
  EXPECT_EQ(a->Stderr().find("not restored"), std::string::npos) << Tail(a->Stderr());

  // B reads the same bytes without interruption.
  const std::string trace_b = dir_b.Sub("trace.jsonl");
  ASSERT_TRUE(WriteFile(trace_b, r1 + r2));
  auto b = AgentProcess::Start(dir_b.path(), "b", AgentConfig(trace_b, ""), &error);
  ASSERT_NE(b, nullptr) << error;
  ASSERT_TRUE(b->WaitForRequests(static_cast<double>(records.size()))) << Tail(b->Stderr());
  // Restored lifetime + R2 must be all records, none twice.
  ASSERT_EQ(a->Value("kvwatch_requests_total"), static_cast<double>(records.size()));

  auto ea = a->Metrics(&error);
  ASSERT_TRUE(ea.has_value()) << error;
  auto eb = b->Metrics(&error);
  ASSERT_TRUE(eb.has_value()) << error;
  const std::map<std::string, double> sa = SeriesWithPrefixes(*ea, kCurveSeries);
  const std::map<std::string, double> sb = SeriesWithPrefixes(*eb, kCurveSeries);
  ASSERT_GT(sb.size(), 250u) << "both histograms, counters and window gauges";
  EXPECT_EQ(sa.size(), sb.size());
  int differences = 0;
  for (const auto& [key, value] : sb) {
    auto it = sa.find(key);
    if (it == sa.end()) {
      ADD_FAILURE() << "restarted agent lacks " << key;
    } else if (it->second != value) {
      ADD_FAILURE() << key << ": restarted " << it->second << ", uninterrupted " << value;
    } else {
      continue;
    }
    if (++differences >= 20) break;
  }
  for (const char* window : {"5m", "1h"}) {
    EXPECT_EQ(sb.at(SeriesKey("kvwatch_window_requests", {{"window", window}})), static_cast<double>(records.size()));
    const HttpResult ca = a->Get(std::string("/api/v1/curve?window=") + window);
    const HttpResult cb = b->Get(std::string("/api/v1/curve?window=") + window);
    ASSERT_EQ(ca.status, 200) << ca.error;
    ASSERT_EQ(cb.status, 200) << cb.error;
    const std::size_t load_a = ca.body.find("\"kv_load\":"), load_b = cb.body.find("\"kv_load\":");
    ASSERT_NE(load_a, std::string::npos);
    ASSERT_NE(load_b, std::string::npos);
    EXPECT_EQ(ca.body.substr(0, load_a), cb.body.substr(0, load_b)) << "window " << window;
    const std::string ka = ca.body.substr(load_a), kb = cb.body.substr(load_b);
    for (const char* field : {"requests", "sized_requests", "mean_kv_token_seconds", "capacity_tokens"}) {
      EXPECT_EQ(NumberField(ka, field), NumberField(kb, field)) << field << " in " << ka;
    }
    const double token_seconds_a = NumberField(ka, "load_factor") * NumberField(ka, "span_seconds");
    const double token_seconds_b = NumberField(kb, "load_factor") * NumberField(kb, "span_seconds");
    EXPECT_GT(token_seconds_b, 0) << kb;
    EXPECT_NEAR(token_seconds_a, token_seconds_b, 1e-9 * token_seconds_b) << ka << "\n" << kb;
  }
  EXPECT_EQ(DescribeWaitStatus(a->Stop()), "exit 0") << Tail(a->Stderr());
  EXPECT_EQ(DescribeWaitStatus(b->Stop()), "exit 0") << Tail(b->Stderr());
}

// A state saved with a windows' clock far ahead of the wall clock (here: by an
// agent whose curve.max_clock_skew let a record from 10 days ahead through; before
// time sanity, by any agent that read such a record) would leave every later
// record out of every window. It is repaired on load: the windows restart (the
// lifetime counters stay), the log says so and kvwatch_state_clock_repairs_total
// counts it.
TEST(AgentRestartTest, AStateWhoseClockIsBeyondTheSkewIsRepairedOnLoad) {
  TempDir dir("kvwatch_clock_repair");
  ASSERT_TRUE(dir.ok());
  const std::string trace = dir.Sub("trace.jsonl"), state = dir.Sub("state");
  const std::int64_t ten_days_ms = 10LL * 24 * 3600 * 1000;
  ASSERT_TRUE(
      WriteFile(trace, "{\"timestamp\": " + std::to_string(WallNowMs() + ten_days_ms) + ", \"hash_ids\": [1, 2]}\n"));
  std::string error;
  {
    std::string lenient = AgentConfig(trace, state);
    lenient.replace(lenient.find("curve:\n"), 7, "curve:\n  max_clock_skew: 8760h\n");
    auto a = AgentProcess::Start(dir.path(), "lenient", lenient, &error);
    ASSERT_NE(a, nullptr) << error;
    ASSERT_TRUE(a->WaitForRequests(1)) << Tail(a->Stderr());
    ASSERT_EQ(DescribeWaitStatus(a->Stop()), "exit 0") << Tail(a->Stderr());
  }
  auto b = AgentProcess::Start(dir.path(), "default", AgentConfig(trace, state), &error);
  ASSERT_NE(b, nullptr) << error;
  EXPECT_NE(b->Stderr().find("ahead of the wall clock"), std::string::npos) << Tail(b->Stderr());
  EXPECT_EQ(b->Value("kvwatch_state_clock_repairs_total"), 1);
  EXPECT_EQ(b->Value("kvwatch_requests_total"), 1) << "the lifetime counters are kept";
  const std::vector<Record> records = SynthRecords(50);
  ASSERT_TRUE(AppendFile(trace, JsonLines(records, 0, records.size(), WallNowMs())));
  ASSERT_TRUE(b->WaitForRequests(1 + static_cast<double>(records.size()))) << Tail(b->Stderr());
  // Every new record is in the windows (a poisoned clock would leave them all late).
  EXPECT_TRUE(PollUntil(
      [&] {
        return b->Value("kvwatch_window_requests", {{"window", "5m"}}) == static_cast<double>(records.size());
      },
      kIngestTimeout))
      << b->Value("kvwatch_window_requests", {{"window", "5m"}}) << "\n"
      << Tail(b->Stderr());
  EXPECT_EQ(b->Value("kvwatch_window_late_requests_total"), 0);
  EXPECT_EQ(DescribeWaitStatus(b->Stop()), "exit 0");
}

class RejectedStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    records_ = SynthRecords(300);
    ASSERT_EQ(records_.size(), 300u);
    trace_ = dir_.Sub("trace.jsonl");
    state_dir_ = dir_.Sub("state");
    state_file_ = (std::filesystem::path(state_dir_) / kStateFile).string();
  }

  // Starts the agent on the state in state_dir_ (which it must reject), appends
  // `fresh` records and checks: the rejection is logged and the file set aside
  // with its bytes intact, and the engine holds only what this run read. Then a
  // SIGTERM and a restart show the new state restores.
  void ExpectRejectedAndFresh(std::uint64_t max_pages, std::size_t first, std::size_t fresh) {
    const std::string bad = ReadFile(state_file_);
    ASSERT_FALSE(bad.empty());
    std::string error;
    auto agent = AgentProcess::Start(dir_.path(), "rejecting", AgentConfig(trace_, state_dir_, max_pages), &error);
    ASSERT_NE(agent, nullptr) << error;
    ASSERT_TRUE(AppendFile(trace_, JsonLines(records_, first, first + fresh, WallNowMs())));
    // The positions were in the rejected file too: the trace is read again from
    // start_at (beginning), the `first` records already in it and the fresh ones.
    const std::size_t total = first + fresh;
    ASSERT_TRUE(PollUntil(
        [&] {
          return agent->Value("kvwatch_collector_records_total", {{"collector", "trace"}}) ==
                 static_cast<double>(total);
        },
        kIngestTimeout))
        << "the agent should read the " << total << " records; it read "
        << agent->Value("kvwatch_collector_records_total", {{"collector", "trace"}}) << "\n"
        << Tail(agent->Stderr());
    // Nothing restored: everything the engine counted was read by this run.
    EXPECT_EQ(agent->Value("kvwatch_requests_total"), static_cast<double>(total));
    EXPECT_EQ(agent->Value("kvwatch_window_requests", {{"window", "1h"}}), static_cast<double>(total));
    EXPECT_EQ(agent->Value("kvwatch_page_references_total"), static_cast<double>(TotalPages(records_, 0, total)));
    if (max_pages) {
      EXPECT_EQ(agent->Value("kvwatch_tracked_pages_limit"), static_cast<double>(max_pages));
    }
    EXPECT_EQ(agent->Get("/healthz").status, 200);

    const std::vector<std::string> aside = FilesStartingWith(state_dir_, std::string(kStateFile) + ".rejected-");
    ASSERT_EQ(aside.size(), 1u) << "the rejected state should be set aside as " << kStateFile << ".rejected-*";
    EXPECT_EQ(ReadFile(aside[0]), bad) << "the rejected file must keep its bytes";
    const std::string log = agent->Stderr();
    EXPECT_NE(log.find(state_file_), std::string::npos) << "stderr should name the state file:\n" << Tail(log);
    EXPECT_NE(log.find(aside[0]), std::string::npos) << "stderr should name where it was set aside:\n" << Tail(log);

    // The fresh state saved at SIGTERM is accepted by the next start.
    ASSERT_EQ(DescribeWaitStatus(agent->Stop()), "exit 0") << Tail(agent->Stderr());
    auto again = AgentProcess::Start(dir_.path(), "restored", AgentConfig(trace_, state_dir_, max_pages), &error);
    ASSERT_NE(again, nullptr) << error;
    EXPECT_EQ(again->Value("kvwatch_requests_total"), static_cast<double>(total)) << Tail(again->Stderr());
    EXPECT_EQ(FilesStartingWith(state_dir_, std::string(kStateFile) + ".rejected-").size(), 1u);
    EXPECT_EQ(DescribeWaitStatus(again->Stop()), "exit 0") << Tail(again->Stderr());
  }

  // Runs an agent over the first n records with this max_pages and SIGTERMs it,
  // leaving a valid state file (curves and tail positions) in state_dir_.
  void SaveStateOf(std::size_t n, std::uint64_t max_pages) {
    ASSERT_TRUE(WriteFile(trace_, JsonLines(records_, 0, n, WallNowMs())));
    std::string error;
    auto agent = AgentProcess::Start(dir_.path(), "saving", AgentConfig(trace_, state_dir_, max_pages), &error);
    ASSERT_NE(agent, nullptr) << error;
    ASSERT_TRUE(agent->WaitForRequests(static_cast<double>(n))) << Tail(agent->Stderr());
    ASSERT_EQ(DescribeWaitStatus(agent->Stop()), "exit 0") << Tail(agent->Stderr());
    ASSERT_TRUE(std::filesystem::exists(state_file_));
  }

  TempDir dir_{"kvwatch_rejected_state"};
  std::vector<Record> records_;
  std::string trace_, state_dir_, state_file_;
};

TEST_F(RejectedStateTest, GarbageStateIsSetAsideAndTheAgentStartsFresh) {
  ASSERT_TRUE(std::filesystem::create_directories(state_dir_));
  std::string garbage = "this is not a kvwatch state file\n";
  for (int i = 0; i < 4096; ++i) garbage.push_back(static_cast<char>((i * 131 + 7) & 0xff));
  ASSERT_TRUE(WriteFile(state_file_, garbage));
  ASSERT_TRUE(WriteFile(trace_, ""));
  ExpectRejectedAndFresh(0, 0, 200);
}

TEST_F(RejectedStateTest, TruncatedStateIsSetAsideAndTheAgentStartsFresh) {
  SaveStateOf(100, 0);
  const std::string state = ReadFile(state_file_);
  ASSERT_GT(state.size(), 64u);
  ASSERT_TRUE(WriteFile(state_file_, state.substr(0, state.size() / 2)));
  ExpectRejectedAndFresh(0, 100, 150);
}

TEST_F(RejectedStateTest, StateOfAnotherMaxPagesIsSetAsideAndTheAgentStartsFresh) {
  SaveStateOf(100, 65536);
  ExpectRejectedAndFresh(131072, 100, 150);
}

// ------------------------------------------------------------------ What is at the state path

class StatePathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    trace_ = dir_.Sub("trace.jsonl");
    state_dir_ = dir_.Sub("state");
    state_file_ = (std::filesystem::path(state_dir_) / kStateFile).string();
    ASSERT_TRUE(std::filesystem::create_directories(state_dir_));
    records_ = SynthRecords(100);
    ASSERT_TRUE(WriteFile(trace_, JsonLines(records_, 0, records_.size(), WallNowMs())));
  }

  // Starts an agent on state_dir_ and checks it serves (/readyz), reads the trace
  // and reports the state as rejected.
  std::unique_ptr<AgentProcess> StartRejecting(const std::string& name) {
    std::string error;
    auto agent = AgentProcess::Start(dir_.path(), name, AgentConfig(trace_, state_dir_), &error);
    EXPECT_NE(agent, nullptr) << error;
    if (agent == nullptr) return nullptr;
    EXPECT_TRUE(PollUntil([&] { return agent->Get("/readyz").status == 200; }, kStartTimeout)) << Tail(agent->Stderr());
    EXPECT_TRUE(agent->WaitForRequests(static_cast<double>(records_.size()))) << Tail(agent->Stderr());
    EXPECT_EQ(agent->Value("kvwatch_state_restore", {{"outcome", "rejected"}}), 1) << Tail(agent->Stderr());
    return agent;
  }

  TempDir dir_{"kvwatch_state_path"};
  std::vector<Record> records_;
  std::string trace_, state_dir_, state_file_;
};

TEST_F(StatePathTest, AFifoAtTheStateFileIsSetAsideWithoutBlockingStartUp) {
  ASSERT_EQ(::mkfifo(state_file_.c_str(), 0644), 0) << std::strerror(errno);
  auto agent = StartRejecting("fifo");  // a blocking open() would never log "listening"
  ASSERT_NE(agent, nullptr);
  const std::string log = agent->Stderr();
  EXPECT_NE(log.find(state_file_ + ": is a FIFO, not a regular file"), std::string::npos) << Tail(log);
  const std::vector<std::string> aside = FilesStartingWith(state_dir_, std::string(kStateFile) + ".rejected-");
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_TRUE(std::filesystem::is_fifo(aside[0]));
  EXPECT_EQ(agent->Value("kvwatch_state_saving"), 1);
  ASSERT_EQ(DescribeWaitStatus(agent->Stop()), "exit 0") << Tail(agent->Stderr());
  EXPECT_TRUE(std::filesystem::is_regular_file(state_file_)) << "the save at SIGTERM replaces the FIFO";
}

// The peak resident set of a running process (VmHWM), in bytes; 0 when unknown.
std::uint64_t PeakRss(pid_t pid) {
  const std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  const std::size_t at = status.find("VmHWM:");
  return at == std::string::npos ? 0 : std::stoull(status.substr(at + 6)) * 1024;
}

TEST_F(StatePathTest, AHugeSparseStateFileIsRefusedWithoutBeingRead) {
  // 2 GiB with a valid header announcing the rest: beyond what this config's
  // state can hold (StateByteLimit), so only the header may be read.
  constexpr std::uint64_t kSize = std::uint64_t{2} << 30;
  std::string header = "KVWSTATE";
  const std::uint32_t version = 2, crc = 0;
  const std::uint64_t body = kSize - 24;
  header.append(reinterpret_cast<const char*>(&version), 4);
  header.append(reinterpret_cast<const char*>(&body), 8);
  header.append(reinterpret_cast<const char*>(&crc), 4);
  ASSERT_TRUE(WriteFile(state_file_, header));
  std::filesystem::resize_file(state_file_, kSize);
  auto agent = StartRejecting("sparse");
  ASSERT_NE(agent, nullptr);
  const std::string log = agent->Stderr();
  EXPECT_NE(log.find("the header announces " + std::to_string(body) + " bytes, more than the"), std::string::npos)
      << Tail(log);
  const std::uint64_t peak = PeakRss(agent->pid());
  ASSERT_GT(peak, 0u);
  EXPECT_LT(peak, std::uint64_t{512} << 20) << "the agent's peak RSS; reading the file whole would take 2 GiB";
  EXPECT_EQ(FilesStartingWith(state_dir_, std::string(kStateFile) + ".rejected-").size(), 1u);
  EXPECT_EQ(DescribeWaitStatus(agent->Stop()), "exit 0") << Tail(agent->Stderr());
}

// Makes a file impossible to rename for the agent while it lives: chattr +i
// (root with CAP_LINUX_IMMUTABLE on a file system that has the flag), else a
// read-only folder (which stops a non-root user only). `how` says which.
class Unrenamable {
 public:
  Unrenamable(const std::string& file, const std::string& dir) : file_(file), dir_(dir) {
    const std::string chattr = FindProgram("chattr");
    if (!chattr.empty() && RunCommand({chattr, "+i", file_}, Millis(10000)).Exited(0)) {
      chattr_ = chattr;
      how = "chattr +i";
    } else if (::geteuid() != 0 && ::chmod(dir_.c_str(), 0555) == 0) {
      how = "a read-only folder";
    }
  }
  ~Unrenamable() {
    if (!chattr_.empty()) (void)RunCommand({chattr_, "-i", file_}, Millis(10000));
    if (how == "a read-only folder") ::chmod(dir_.c_str(), 0755);
  }
  std::string how;  // empty: neither works here

 private:
  std::string file_, dir_, chattr_;
};

TEST_F(StatePathTest, ACorruptFileThatCannotBeSetAsideTurnsSavingOffAndSaysSo) {
  const std::string bad = "not a state file, and it cannot be moved\n";
  ASSERT_TRUE(WriteFile(state_file_, bad));
  // The lock file exists before the folder may turn read-only.
  ASSERT_TRUE(WriteFile(state_file_ + ".lock", ""));
  Unrenamable guard(state_file_, state_dir_);
  if (guard.how.empty()) GTEST_SKIP() << "neither chattr +i nor a read-only folder can stop a rename here";
  std::cout << "[ unrenamable ] simulated with " << guard.how << "\n";
  auto agent = StartRejecting("immutable");
  ASSERT_NE(agent, nullptr);
  const std::string log = agent->Stderr();
  EXPECT_NE(log.find(state_file_ + " cannot be set aside ("), std::string::npos) << Tail(log);
  EXPECT_NE(log.find("WITHOUT SAVING"), std::string::npos) << Tail(log);
  EXPECT_EQ(log.find("set aside as"), std::string::npos) << "nothing was set aside:\n" << Tail(log);
  EXPECT_EQ(agent->Value("kvwatch_state_saving"), 0);
  // The first pass's save and every later one are skipped, not failed.
  EXPECT_EQ(agent->Value("kvwatch_state_saves_total"), 0);
  EXPECT_EQ(agent->Value("kvwatch_state_save_errors_total"), 0);
  EXPECT_EQ(DescribeWaitStatus(agent->Stop()), "exit 0") << Tail(agent->Stderr());
  EXPECT_EQ(ReadFile(state_file_), bad);
  EXPECT_FALSE(std::filesystem::exists(state_file_ + ".tmp"));
}

TEST_F(StatePathTest, ASecondAgentOnTheSameStatePathIsRefusedNamingTheHolder) {
  std::string error;
  auto first = AgentProcess::Start(dir_.path(), "first", AgentConfig(trace_, state_dir_), &error);
  ASSERT_NE(first, nullptr) << error;
  ASSERT_TRUE(first->WaitForRequests(static_cast<double>(records_.size()))) << Tail(first->Stderr());
  const std::string config = dir_.Sub("second.yaml");
  ASSERT_TRUE(WriteFile(config, AgentConfig(trace_, state_dir_)));
  const CommandResult second = RunCommand({KVWATCH_BINARY, "agent", "--config", config}, kStartTimeout);
  EXPECT_TRUE(second.Exited(1)) << second.Describe();
  EXPECT_NE(second.err.find("state.path: " + state_file_ + ".lock is held by another kvwatch agent (pid " +
                            std::to_string(first->pid()) + ")"),
            std::string::npos)
      << second.err;
  // The first one is untouched and still saves.
  EXPECT_EQ(first->Get("/readyz").status, 200);
  EXPECT_EQ(first->Value("kvwatch_requests_total"), static_cast<double>(records_.size()));
  EXPECT_EQ(DescribeWaitStatus(first->Stop()), "exit 0") << Tail(first->Stderr());
  // Once it is gone, the path is free again.
  auto third = AgentProcess::Start(dir_.path(), "third", AgentConfig(trace_, state_dir_), &error);
  ASSERT_NE(third, nullptr) << error;
  EXPECT_EQ(third->Value("kvwatch_requests_total"), static_cast<double>(records_.size())) << Tail(third->Stderr());
  EXPECT_EQ(DescribeWaitStatus(third->Stop()), "exit 0");
}

// ------------------------------------------------------------------ SIGHUP

// How many times `needle` occurs in text.
std::size_t Count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(SighupTest, ReloadsTheWebConfigAndTheAgentServesOn) {
  TempDir dir("kvwatch_sighup");
  ASSERT_TRUE(dir.ok());
  const std::string web = dir.Sub("web.yml");
  ASSERT_TRUE(WriteFile(web, "{}\n"));  // valid, turns nothing on
  const std::string trace = dir.Sub("trace.jsonl");
  ASSERT_TRUE(WriteFile(trace, JsonLines(SynthRecords(50), 0, 50, WallNowMs())));
  std::string yaml = AgentConfig(trace, dir.Sub("state"));
  yaml.replace(yaml.find("web: {port: 0}"), 14, "web: {port: 0, config_file: \"" + web + "\"}");
  std::string error;
  auto agent = AgentProcess::Start(dir.path(), "sighup", yaml, &error);
  ASSERT_NE(agent, nullptr) << error;
  ASSERT_TRUE(agent->WaitForRequests(50)) << Tail(agent->Stderr());
  EXPECT_EQ(agent->Value("kvwatch_web_config_last_reload_successful"), 1);

  // A web config that does not parse: the previous one stays, and it says so.
  ASSERT_TRUE(WriteFile(web, "basic_auth_users: {alice: not-a-hash}\n"));
  ASSERT_TRUE(agent->Signal(SIGHUP));
  ASSERT_TRUE(
      PollUntil([&] { return Count(agent->Stderr(), "SIGHUP: web.config_file not reloaded") == 1; }, kStartTimeout))
      << Tail(agent->Stderr());
  EXPECT_EQ(agent->Get("/readyz").status, 200);
  EXPECT_EQ(agent->Value("kvwatch_web_config_last_reload_successful"), 0);

  // Basic auth turned on by a reload: requests without credentials get 401.
  const auto hash = HashPassword("s3cret", 4);
  ASSERT_TRUE(hash.ok()) << hash.error();
  ASSERT_TRUE(WriteFile(web, "basic_auth_users: {alice: \"" + hash.value() + "\"}\n"));
  ASSERT_TRUE(agent->Signal(SIGHUP));
  ASSERT_TRUE(
      PollUntil([&] { return Count(agent->Stderr(), "SIGHUP: reloaded web.config_file " + web) == 1; }, kStartTimeout))
      << Tail(agent->Stderr());
  EXPECT_EQ(agent->Get("/readyz").status, 401);
  EXPECT_TRUE(agent->Running());

  // SIGTERM after SIGHUPs still saves and exits 0.
  ASSERT_EQ(DescribeWaitStatus(agent->Stop()), "exit 0") << Tail(agent->Stderr());
  EXPECT_NE(agent->Stderr().find("stopping on SIGTERM"), std::string::npos);
  EXPECT_TRUE(std::filesystem::is_regular_file(dir.Sub("state/state.bin")));
}

TEST(SighupTest, WithoutAWebConfigItIsLoggedAndIgnored) {
  TempDir dir("kvwatch_sighup");
  ASSERT_TRUE(dir.ok());
  const std::string trace = dir.Sub("trace.jsonl");
  ASSERT_TRUE(WriteFile(trace, JsonLines(SynthRecords(50), 0, 50, WallNowMs())));
  std::string error;
  auto agent = AgentProcess::Start(dir.path(), "sighup", AgentConfig(trace, dir.Sub("state")), &error);
  ASSERT_NE(agent, nullptr) << error;
  ASSERT_TRUE(agent->WaitForRequests(50)) << Tail(agent->Stderr());
  ASSERT_TRUE(agent->Signal(SIGHUP));
  ASSERT_TRUE(PollUntil([&] { return Count(agent->Stderr(), "SIGHUP: no web.config_file to reload; ignored") == 1; },
                        kStartTimeout))
      << Tail(agent->Stderr());
  EXPECT_TRUE(agent->Running());
  EXPECT_EQ(agent->Get("/readyz").status, 200);
  EXPECT_EQ(agent->Value("kvwatch_requests_total"), 50);
  ASSERT_EQ(DescribeWaitStatus(agent->Stop()), "exit 0") << Tail(agent->Stderr());
  // The state saved at SIGTERM restores.
  auto again = AgentProcess::Start(dir.path(), "again", AgentConfig(trace, dir.Sub("state")), &error);
  ASSERT_NE(again, nullptr) << error;
  EXPECT_EQ(again->Value("kvwatch_requests_total"), 50) << Tail(again->Stderr());
  EXPECT_EQ(DescribeWaitStatus(again->Stop()), "exit 0");
}

}  // namespace
}  // namespace kvwatch::agent
