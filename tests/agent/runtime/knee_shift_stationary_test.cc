// A knee-shift alert on a stationary workload is a bug (docs/alerts.md). These
// tests replay long stationary workloads through the agent itself, in-process:
// every record goes through Agent::OnRequest (one engine, the windowed curves, on
// record time), and every evaluation_interval of record time the agent's own
// AlertInputsAt() feeds its AlertRunner, exactly as the live loop does. No
// KVWatchKneeShift may go pending for long enough to fire.
//
// Workloads: a synthetic stationary replica (`kvwatch synth`'s generator without a
// shift) for 8 hours with the default windows (1h against 24h), and for 3 hours
// with 5m against 1h; the real traces in ../shared/data (skipped when absent),
// whose spans are about an hour or less, with windows scaled to them (their knees
// over 5 minutes are noisy: the detector goes pending now and then, and `for`
// keeps it from firing). Each run must also have evaluated the detector on real
// data many times (so the test can fail), and the same harness must fire on a
// workload that does shift. The merged coding-agent trace (weka/) is left out: it
// is an arrangement in which every session starts at t=0, so its load falls from
// 28,516 requests in the first hour to a few hundred a few hours later, a real
// change of workload on which the alert rightly fires.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/runtime/agent.h"
#include "alerts/knee_shift.h"
#include "collectors/synth.h"
#include "collectors/trace_reader.h"

namespace kvwatch::agent {
namespace {

struct Windows {
  std::string short_name;
  int short_seconds;
  std::string baseline_name;
  int baseline_seconds;
};

struct KneeShiftRun {
  int evaluations = 0;
  int valid = 0;                         // evaluations where the detector compared two knees
  int pending = 0;                       // evaluations that ended pending
  double max_change = 0;                 // largest relative knee change seen
  std::vector<std::string> transitions;  // the runner's log lines
  bool fired = false;
};

alerts::TimePoint At(double seconds) {
  return alerts::TimePoint{} +
         std::chrono::duration_cast<alerts::TimePoint::duration>(std::chrono::duration<double>(seconds));
}

// Runs records (in time order, from `source`) through an in-process agent and
// evaluates its detectors every 15 s of record time.
class DetectorReplay {
 public:
  DetectorReplay(const Windows& w, alerts::KneeShiftOptions knee_shift) {
    AgentOptions o;
    o.replica = "test";
    o.engine.max_pages = 1u << 20;
    o.engine.remembered_evictions = 1u << 20;
    o.curve.windows = {{w.short_name, static_cast<double>(w.short_seconds)},
                       {w.baseline_name, static_cast<double>(w.baseline_seconds)}};
    o.http.port = 0;
    AlertRunnerOptions alerts;
    alerts.alerter.short_window = std::chrono::seconds(w.short_seconds);
    alerts.alerter.baseline_window = std::chrono::seconds(w.baseline_seconds);
    alerts.alerter.knee_shift = knee_shift;
    alerts.inputs.short_window = 0;
    alerts.inputs.baseline_window = 1;
    alerts.log = [this](const std::string& line) { run_.transitions.push_back(line); };
    o.alerts = std::move(alerts);
    auto agent = Agent::Create(std::move(o));
    if (agent.ok()) agent_ = std::move(agent).value();
    error_ = agent.ok() ? "" : agent.error();
  }

  const std::string& error() const { return error_; }

  void Add(const curve::Request& request) {
    while (next_eval_ <= request.timestamp_s) {
      Evaluate(next_eval_);
      next_eval_ += kEvaluationSeconds;
    }
    agent_->OnRequest(request);
  }

  KneeShiftRun Finish() { return run_; }

 private:
  static constexpr double kEvaluationSeconds = 15;

  void Evaluate(double t) {
    AlertRunner* runner = agent_->alert_runner();
    ASSERT_TRUE(runner->Evaluate(agent_->AlertInputsAt(At(t))).ok());
    ++run_.evaluations;
    for (const alerts::AlertStatus& s : runner->Statuses()) {
      if (s.labels.at("alertname") != alerts::kKneeShiftAlertName) continue;
      if (s.observation == alerts::ObservationKind::kValid) {
        ++run_.valid;
        run_.max_change = std::max(run_.max_change, s.value);
      }
      run_.pending += s.state == alerts::AlertState::kPending ? 1 : 0;
      run_.fired = run_.fired || s.fired_at.has_value();
    }
  }

  std::unique_ptr<Agent> agent_;
  std::string error_;
  double next_eval_ = kEvaluationSeconds;
  KneeShiftRun run_;
};

std::string Describe(const KneeShiftRun& run) {
  std::string text = std::to_string(run.evaluations) + " evaluations, " + std::to_string(run.valid) +
                     " with two knees, " + std::to_string(run.pending) + " ended pending, largest change " +
                     std::to_string(run.max_change);
  for (const std::string& line : run.transitions) text += "\n  " + line;
  return text;
}

// The synthetic replica's stream for `seconds` of record time.
KneeShiftRun ReplaySynth(const Windows& windows, double seconds, double rate,
                         const collectors::SynthShift& shift = {}) {
  DetectorReplay replay(windows, alerts::KneeShiftOptions{});
  EXPECT_EQ(replay.error(), "");
  if (!replay.error().empty()) return {};
  collectors::SynthOptions options;
  options.rate_per_s = rate;
  options.duration_s = seconds;
  options.shift = shift;
  auto generator = collectors::SynthGenerator::Create(options);
  EXPECT_TRUE(generator.ok()) << generator.error();
  if (!generator.ok()) return {};
  collectors::SynthRequest r;
  while (generator.value().Next(&r)) replay.Add(r.request);
  return replay.Finish();
}

// A real trace; `seconds_per_record` > 0 gives records without timestamps an
// arrival time (index * seconds_per_record).
KneeShiftRun ReplayTrace(const std::string& path, const Windows& windows, double seconds_per_record,
                         alerts::KneeShiftOptions knee_shift) {
  DetectorReplay replay(windows, knee_shift);
  EXPECT_EQ(replay.error(), "");
  if (!replay.error().empty()) return {};
  std::uint64_t index = 0;
  collectors::TraceCallbacks callbacks;
  callbacks.on_request = [&](curve::Request& request) {
    if (seconds_per_record > 0) request.timestamp_s = static_cast<double>(index) * seconds_per_record;
    ++index;
    replay.Add(request);
  };
  auto summary = collectors::ReadTrace(path, collectors::TraceReaderOptions{}, callbacks);
  EXPECT_TRUE(summary.ok()) << summary.error();
  return replay.Finish();
}

std::string SharedTrace(const std::string& name) {
  const std::string path = std::string(KVWATCH_SHARED_DATA) + "/" + name;
  return std::filesystem::exists(path) ? path : "";
}

TEST(KneeShiftStationaryTest, SyntheticReplicaWithTheDefaultWindowsNeverFires) {
  // 8 hours at 5 requests/s (the agent's synth default): the 24h baseline holds
  // 2 to 8 hours of the same workload as the 1h window.
  const KneeShiftRun run = ReplaySynth({"1h", 3600, "24h", 86400}, 8 * 3600, 5);
  EXPECT_FALSE(run.fired) << Describe(run);
  EXPECT_GT(run.valid, 1000) << Describe(run);
  std::printf("synthetic, 1h/24h: %s\n", Describe(run).c_str());
}

TEST(KneeShiftStationaryTest, SyntheticReplicaWithShortWindowsNeverFires) {
  const KneeShiftRun run = ReplaySynth({"5m", 300, "1h", 3600}, 3 * 3600, 20);
  EXPECT_FALSE(run.fired) << Describe(run);
  EXPECT_GT(run.valid, 600) << Describe(run);
  std::printf("synthetic, 5m/1h: %s\n", Describe(run).c_str());
}

// The harness can fire: the same replica with a shift to a tenant with a long
// system prompt and long sessions (as `kvwatch synth --shift-start`).
TEST(KneeShiftStationaryTest, TheSameHarnessFiresOnAShift) {
  collectors::SynthShift shift;
  shift.start_s = 3600;
  shift.end_s = 5400;
  shift.share = 0.5;
  shift.system_prompt_pages = 2000;
  shift.mean_session_turns = 20;
  const KneeShiftRun run = ReplaySynth({"5m", 300, "1h", 3600}, 2 * 3600, 10, shift);
  EXPECT_TRUE(run.fired) << Describe(run);
}

struct TraceCase {
  const char* file;
  Windows windows;
  double seconds_per_record;  // 0: the records' own timestamps
  double min_baseline_requests;
  int min_valid;  // evaluations with two knees the trace must give
};

TEST(KneeShiftStationaryTest, RealTracesNeverFire) {
  const TraceCase cases[] = {
      // About an hour, 12,031 requests: 5m (about 1,000 requests) against 30m.
      {"mooncake/conversation_trace.jsonl", {"5m", 300, "30m", 1800}, 0, 5000, 100},
      // 17 minutes, 3,993 requests: 3m against 10m.
      {"mooncake/synthetic_trace.jsonl", {"3m", 180, "10m", 600}, 0, 2000, 25},
      // No timestamps: 23,608 requests in arrival order at 6.5/s (an hour).
      {"mooncake/toolagent_trace_hash_ids.jsonl", {"5m", 300, "30m", 1800}, 1 / 6.5, 5000, 150},
  };
  int replayed = 0;
  for (const TraceCase& c : cases) {
    const std::string path = SharedTrace(c.file);
    if (path.empty()) continue;
    SCOPED_TRACE(c.file);
    alerts::KneeShiftOptions knee_shift;
    knee_shift.min_baseline_window_requests = c.min_baseline_requests;
    const KneeShiftRun run = ReplayTrace(path, c.windows, c.seconds_per_record, knee_shift);
    EXPECT_FALSE(run.fired) << Describe(run);
    EXPECT_GE(run.valid, c.min_valid) << Describe(run);
    std::printf("%s, %s/%s: %s\n", c.file, c.windows.short_name.c_str(), c.windows.baseline_name.c_str(),
                Describe(run).c_str());
    ++replayed;
  }
  if (replayed == 0) GTEST_SKIP() << "no shared traces under " << KVWATCH_SHARED_DATA;
}

}  // namespace
}  // namespace kvwatch::agent
