// Acceptance test of the agent's alerting with a real Alertmanager (Debian's
// prometheus-alertmanager 0.25 on 127.0.0.1, a port picked at run time, its
// cluster port closed, its storage in the test's directory).
//
// Workload: `kvwatch synth` with a shift part-way (a new tenant with a 2000-page
// system prompt and sessions of 20 turns on average takes half of the traffic
// from 15 s to 35 s, then the base mix returns), 400 requests/s for 60 s. The
// test writes it into the trace file the agent tails, each record stamped with
// the wall time it is written at, so the agent's windows (5s and 20s, record
// time) see the shift as it happens. The alert config uses those windows and
// short `for` durations (3s), evaluated every second:
//   - KVWatchWorkingSetOverCapacity (request coverage 0.9 over 5s against the
//     5000-page capacity) fires during the shift: the base working set is about
//     3,400 pages, the shifted one about 7,500;
//   - KVWatchKneeShift (5s against 20s, fire at a 40% change) fires when the
//     base mix returns (the 5s knee drops back to about 900 pages while the 20s
//     knee still sits near 2,200) and resolves once the 20s window has forgotten
//     the shift. Its base-mix noise stays far below 40% for 3 s running.
// Both must appear in Alertmanager's own API (GET /api/v2/alerts) with their
// annotations, start after the shift began, and then disappear from it: resolved.
// resend_interval is 30s, so a firing alert's endsAt is 2 minutes ahead, longer
// than the test: an alert leaves Alertmanager's list only because the agent sent
// its resolution.
//
// Two agents replay the same records at once. Agent A's Alertmanager is up all
// along. Agent B's Alertmanager port is first a black hole (a socket that listens
// but never accepts: each POST hangs until alerts.timeout, 5s) until B has raised
// the over-capacity alert and failed to deliver it; meanwhile B must keep
// ingesting and answer /metrics: at every look during the outage, B is never 2 s
// further behind the writer than agent A (less than half the hanging timeout) and
// its slowest /metrics is within 2 s of A's. A, doing the same work on the same
// machine, is the yardstick, so a loaded machine slows both and fails neither,
// while a loop or handler held by the hanging POST (5 s) still fails (an agent b
// stopped with SIGSTOP for 5 s during the outage fails both). Then Alertmanager
// starts on that port and the alert, raised during the outage, must arrive (a
// retry with backoff; the resend interval is far longer).
//
// Skips when prometheus-alertmanager is not installed. Deadlines only bound a
// broken build.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <simdjson.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/runtime/notifier.h"
#include "tests/agent/testing_agent.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers

constexpr char kKneeShift[] = "KVWatchKneeShift";
constexpr char kOverCapacity[] = "KVWatchWorkingSetOverCapacity";
constexpr double kShiftStartSeconds = 15;
constexpr double kShiftEndSeconds = 35;
constexpr double kDurationSeconds = 60;
constexpr Millis kTestDeadline{110000};

// ------------------------------------------------------------------ Alertmanager

struct AmAlert {
  LabelMap labels;
  LabelMap annotations;
  std::string starts_at;
  std::string state;
  std::string fingerprint;
};

// "2026-11-30T15:42:17.123Z" (or without fraction) as ms since the epoch; 0 when unreadable.
std::int64_t ParseRfc3339Ms(const std::string& text) {
  std::tm tm{};
  int ms = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec) != 6) {
    return 0;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const std::size_t dot = text.find('.');
  if (dot != std::string::npos) {
    std::string digits;
    for (std::size_t i = dot + 1; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
      digits += text[i];
    }
    digits = (digits + "000").substr(0, 3);
    ms = std::stoi(digits);
  }
  return static_cast<std::int64_t>(::timegm(&tm)) * 1000 + ms;
}

class AlertmanagerProcess {
 public:
  static std::string Binary() { return FindProgram("prometheus-alertmanager"); }

  // Starts Alertmanager on 127.0.0.1:port with its storage under dir, and waits
  // for /-/ready. nullptr on failure with *error.
  static std::unique_ptr<AlertmanagerProcess> Start(const std::string& dir, const std::string& name, int port,
                                                    std::string* error) {
    const std::string config = (std::filesystem::path(dir) / (name + ".yml")).string();
    if (!WriteFile(config, "route:\n  receiver: \"null\"\nreceivers:\n  - name: \"null\"\n")) {
      *error = "cannot write " + config;
      return nullptr;
    }
    std::unique_ptr<AlertmanagerProcess> am(new AlertmanagerProcess());
    am->port_ = port;
    const std::string base = (std::filesystem::path(dir) / name).string();
    am->process_ = ChildProcess::Start(
        {Binary(), "--config.file=" + config, "--storage.path=" + base + "-data",
         "--web.listen-address=127.0.0.1:" + std::to_string(port), "--cluster.listen-address=", "--log.level=warn"},
        base + ".out", base + ".log", error);
    if (!am->process_) return nullptr;
    const bool ready =
        PollUntil([&] { return !am->process_->Running() || HttpGet(port, "/-/ready", Millis(1000)).status == 200; },
                  kStartTimeout, Millis(20));
    if (!ready || !am->process_->Running()) {
      *error = "alertmanager did not become ready on 127.0.0.1:" + std::to_string(port) + "; log:\n" +
               Tail(am->process_->Stderr());
      return nullptr;
    }
    return am;
  }

  std::string Log() const { return process_->Stderr(); }

  // GET /api/v2/alerts: the alerts Alertmanager holds as not resolved.
  base::Result<std::vector<AmAlert>> Alerts() const {
    using R = base::Result<std::vector<AmAlert>>;
    HttpResult r = HttpGet(port_, "/api/v2/alerts", Millis(5000));
    if (r.status != 200) return R::Error("GET /api/v2/alerts: " + (r.status ? std::to_string(r.status) : r.error));
    simdjson::dom::parser parser;
    simdjson::dom::array items;
    if (parser.parse(r.body).get(items)) return R::Error("GET /api/v2/alerts: not a JSON array: " + Tail(r.body, 300));
    std::vector<AmAlert> out;
    for (simdjson::dom::element item : items) {
      AmAlert a;
      simdjson::dom::object labels, annotations;
      std::string_view starts, state, fingerprint;
      if (item["labels"].get(labels) || item["startsAt"].get(starts) || item["status"]["state"].get(state) ||
          item["fingerprint"].get(fingerprint)) {
        return R::Error("GET /api/v2/alerts: unexpected alert " + Tail(r.body, 300));
      }
      for (auto field : labels) a.labels[std::string(field.key)] = std::string(field.value.get_string().value_unsafe());
      if (!item["annotations"].get(annotations)) {
        for (auto field : annotations) {
          a.annotations[std::string(field.key)] = std::string(field.value.get_string().value_unsafe());
        }
      }
      a.starts_at = std::string(starts);
      a.state = std::string(state);
      a.fingerprint = std::string(fingerprint);
      out.push_back(std::move(a));
    }
    return out;
  }

 private:
  AlertmanagerProcess() = default;
  std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
};

// A listening socket on 127.0.0.1 that never accepts: connections complete and
// then hang, as with a host that has stopped answering.
class BlackHole {
 public:
  BlackHole() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      Close();
      return;
    }
    port_ = ntohs(addr.sin_port);
  }
  ~BlackHole() { Close(); }
  BlackHole(const BlackHole&) = delete;
  BlackHole& operator=(const BlackHole&) = delete;

  int port() const { return port_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// ------------------------------------------------------------------ Workload

struct Workload {
  std::vector<std::string> lines;  // JSON Lines records, without '\n'
  std::vector<std::int64_t> ms;    // each record's time in the workload
};

base::Result<Workload> MakeWorkload(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "synth.jsonl").string();
  CommandResult synth = RunCommand(
      {KVWATCH_BINARY, "synth", "--rate", "400", "--duration", std::to_string(kDurationSeconds), "--shift-start",
       std::to_string(kShiftStartSeconds), "--shift-end", std::to_string(kShiftEndSeconds), "--shift-share", "0.5",
       "--shift-system-prompt-pages", "2000", "--shift-mean-turns", "20", "-o", path},
      Millis(60000));
  if (!synth.Exited(0)) return base::Result<Workload>::Error("kvwatch synth: " + synth.Describe());
  Workload w;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const std::size_t key = line.find("\"timestamp\"");
    if (key == std::string::npos) return base::Result<Workload>::Error("synth record without timestamp: " + line);
    w.ms.push_back(std::strtoll(line.c_str() + line.find(':', key) + 1, nullptr, 10));
    w.lines.push_back(std::move(line));
  }
  std::filesystem::remove(path);
  return w;
}

// Writes the workload into every trace as wall time passes, each record stamped
// with start_ms + its workload time.
class Feeder {
 public:
  Feeder(const Workload& workload, std::vector<std::string> traces)
      : workload_(workload), traces_(std::move(traces)), start_ms_(WallNowMs()) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Feeder() {
    stop_ = true;
    thread_.join();
  }

  std::int64_t start_ms() const { return start_ms_; }
  std::size_t written() const { return written_.load(); }
  bool done() const { return written_.load() == workload_.lines.size(); }
  // How far behind the writer a reader that has counted `counted` records is at
  // wall time `now_ms`: the age of the oldest record it has not counted (0 when
  // it has counted every record written).
  std::int64_t LagMs(double counted, std::int64_t now_ms) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [at, count] : history_) {
      if (static_cast<double>(count) > counted) return std::max<std::int64_t>(0, now_ms - at);
    }
    return 0;
  }

 private:
  void Run() {
    std::size_t next = 0;
    while (!stop_ && next < workload_.lines.size()) {
      const std::int64_t elapsed = WallNowMs() - start_ms_;
      std::string batch;
      std::size_t end = next;
      while (end < workload_.lines.size() && workload_.ms[end] <= elapsed) {
        batch += Stamped(workload_.lines[end], start_ms_ + workload_.ms[end]) + "\n";
        ++end;
      }
      if (end > next) {
        for (const std::string& trace : traces_) AppendFile(trace, batch);
        next = end;
        written_ = next;
        std::lock_guard<std::mutex> lock(mu_);
        history_.emplace_back(WallNowMs(), next);
      }
      std::this_thread::sleep_for(Millis(50));
    }
  }

  const Workload& workload_;
  const std::vector<std::string> traces_;
  const std::int64_t start_ms_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> written_{0};
  mutable std::mutex mu_;
  std::vector<std::pair<std::int64_t, std::size_t>> history_;  // (wall ms, records written)
  std::thread thread_;
};

std::string AgentConfig(const std::string& replica, const std::string& trace, int alertmanager_port) {
  return "web: {port: 0}\nreplica: " + replica +
         "\nmodel_label: synth-model\n"
         "curve:\n  windows: [\"5s\", \"20s\"]\n  capacities: [5000]\n  coverage_targets: [0.9]\n"
         "collectors:\n  trace_files:\n" +
         TraceFileCollectorYaml("trace", trace) +
         "alerts:\n"
         "  alertmanagers: [\"http://127.0.0.1:" +
         std::to_string(alertmanager_port) +
         "\"]\n"
         "  resend_interval: 30s\n  evaluation_interval: 1s\n  timeout: 5s\n"
         "  short_window: 5s\n  baseline_window: 20s\n"
         "  knee_shift: {fire_threshold: 0.4, clear_threshold: 0.25, min_requests: 500, "
         "min_baseline_requests: 2000, for: 3s}\n"
         "  over_capacity: {target: request_coverage, fraction: 0.9, min_requests: 500, for: 3s}\n"
         "  rate_shift: {enabled: false}\n  drift: {enabled: false}\n";
}

// The state of one alert in the agent's /api/v1/alerts ("" when absent).
std::string AgentAlertState(const AgentProcess& agent, const std::string& alertname) {
  HttpResult r = agent.Get("/api/v1/alerts");
  if (r.status != 200) return "";
  simdjson::dom::parser parser;
  simdjson::dom::array alerts;
  if (parser.parse(r.body)["data"]["alerts"].get(alerts)) return "";
  for (simdjson::dom::element a : alerts) {
    std::string_view name, state;
    if (a["labels"]["alertname"].get(name) || a["state"].get(state)) continue;
    if (name == alertname) return std::string(state);
  }
  return "";
}

// ------------------------------------------------------------------ The test

struct Seen {
  bool firing = false;
  bool resolved = false;
  AmAlert first;                                // as first seen in Alertmanager
  std::int64_t firing_ms = 0, resolved_ms = 0;  // wall times first seen so
};

struct Scenario {
  std::string name;
  std::unique_ptr<AgentProcess> agent;
  std::unique_ptr<AlertmanagerProcess> alertmanager;  // null while down
  std::int64_t alertmanager_started_ms = 0;
  std::map<std::string, Seen> seen;  // by alertname

  // One look at Alertmanager: alerts present are firing; an alert seen before
  // and now absent has been resolved.
  void Observe() {
    if (!alertmanager) return;
    auto alerts = alertmanager->Alerts();
    if (!alerts.ok()) return;
    for (const char* name : {kKneeShift, kOverCapacity}) {
      Seen& s = seen[name];
      const AmAlert* found = nullptr;
      for (const AmAlert& a : alerts.value()) {
        if (a.labels.count("alertname") && a.labels.at("alertname") == name) found = &a;
      }
      if (found && !s.firing) {
        s.firing = true;
        s.first = *found;
        s.firing_ms = WallNowMs();
      }
      if (!found && s.firing && !s.resolved) {
        s.resolved = true;
        s.resolved_ms = WallNowMs();
      }
    }
  }
  bool Done() { return seen[kKneeShift].resolved && seen[kOverCapacity].resolved; }
};

// The alert as Alertmanager first showed it: labels, annotations with the
// numbers, and a start after the shift began.
void ExpectDelivered(const Scenario& s, const std::string& alertname, std::int64_t shift_start_ms,
                     const std::vector<std::string>& numbers, const std::string& window) {
  SCOPED_TRACE("agent " + s.name + ", " + alertname);
  const Seen& seen = s.seen.at(alertname);
  ASSERT_TRUE(seen.firing) << "never in Alertmanager; agent stderr:\n" << Tail(s.agent->Stderr());
  EXPECT_TRUE(seen.resolved) << "still in Alertmanager; agent stderr:\n" << Tail(s.agent->Stderr());
  const AmAlert& a = seen.first;
  EXPECT_EQ(a.state, "active");
  const LabelMap want_labels = {{"alertname", alertname},
                                {"replica", "e2e-" + s.name},
                                {"model", "synth-model"},
                                {"window", window},
                                {"severity", "warning"}};
  EXPECT_EQ(a.labels, want_labels);
  // The webhook notifier computes Alertmanager's own fingerprint.
  EXPECT_EQ(a.fingerprint, LabelsFingerprint(alerts::Labels(a.labels.begin(), a.labels.end())));
  for (const std::string& key : numbers) {
    EXPECT_TRUE(a.annotations.count(key)) << "annotation " << key << " missing";
  }
  EXPECT_TRUE(a.annotations.count("summary") && !a.annotations.at("summary").empty());
  EXPECT_TRUE(a.annotations.count("description") && !a.annotations.at("description").empty());
  EXPECT_GE(ParseRfc3339Ms(a.starts_at), shift_start_ms) << "startsAt " << a.starts_at;
}

TEST(AlertmanagerEndToEndTest, ShiftFiresAndResolvesInAlertmanagerAlsoAfterAnOutage) {
  if (AlertmanagerProcess::Binary().empty()) {
    GTEST_SKIP() << "prometheus-alertmanager is not installed (Debian: prometheus-alertmanager)";
  }
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  auto workload = MakeWorkload(dir.path());
  ASSERT_TRUE(workload.ok()) << workload.error();
  ASSERT_GT(workload.value().lines.size(), 20000u);

  std::string error;
  Scenario a, b;
  a.name = "a";
  b.name = "b";
  const int a_port = PickFreePort();
  a.alertmanager = AlertmanagerProcess::Start(dir.path(), "am-a", a_port, &error);
  ASSERT_NE(a.alertmanager, nullptr) << error;
  auto hole = std::make_unique<BlackHole>();
  ASSERT_GT(hole->port(), 0);
  const int b_port = hole->port();

  const std::string trace_a = dir.Sub("trace-a.jsonl"), trace_b = dir.Sub("trace-b.jsonl");
  ASSERT_TRUE(WriteFile(trace_a, "") && WriteFile(trace_b, ""));
  a.agent = AgentProcess::Start(dir.path(), "agent-a", AgentConfig("e2e-a", trace_a, a_port), &error);
  ASSERT_NE(a.agent, nullptr) << error;
  b.agent = AgentProcess::Start(dir.path(), "agent-b", AgentConfig("e2e-b", trace_b, b_port), &error);
  ASSERT_NE(b.agent, nullptr) << error;

  Feeder feeder(workload.value(), {trace_a, trace_b});
  const std::int64_t shift_start_ms = feeder.start_ms() + static_cast<std::int64_t>(kShiftStartSeconds * 1000);
  const auto deadline = SteadyClock::now() + kTestDeadline;
  double max_scrape_s = 0, max_scrape_a_s = 0;
  std::int64_t max_lag_ms = 0, max_lag_a_ms = 0;
  int outage_samples = 0, behind_samples = 0;
  // One /metrics of an agent, with the seconds it took and how far behind the
  // writer the agent is.
  auto look = [&](const AgentProcess& agent, double* scrape_s, std::int64_t* lag_ms) {
    const auto before = SteadyClock::now();
    auto metrics = agent.Metrics(&error);
    *scrape_s = std::chrono::duration<double>(SteadyClock::now() - before).count();
    if (metrics) *lag_ms = feeder.LagMs(SampleValue(*metrics, "kvwatch_requests_total").value_or(0), WallNowMs());
    return metrics;
  };
  while (SteadyClock::now() < deadline && !(a.Done() && b.Done())) {
    a.Observe();
    b.Observe();
    if (hole) {
      // B's Alertmanager is a black hole: B must keep ingesting and answering,
      // as A does meanwhile.
      double scrape_s = 0, scrape_a_s = 0;
      std::int64_t lag_ms = 0, lag_a_ms = 0;
      const auto metrics = look(*b.agent, &scrape_s, &lag_ms);
      ASSERT_TRUE(metrics.has_value()) << error;
      ASSERT_TRUE(look(*a.agent, &scrape_a_s, &lag_a_ms).has_value()) << error;
      max_scrape_s = std::max(max_scrape_s, scrape_s);
      max_scrape_a_s = std::max(max_scrape_a_s, scrape_a_s);
      max_lag_ms = std::max(max_lag_ms, lag_ms);
      max_lag_a_ms = std::max(max_lag_a_ms, lag_a_ms);
      behind_samples += lag_ms - lag_a_ms >= 2000 ? 1 : 0;
      ++outage_samples;
      const double failures = SampleValue(*metrics, "kvwatch_alert_notifications_total",
                                          {{"notifier", "alertmanager"}, {"result", "failure"}})
                                  .value_or(0);
      if (failures >= 1 && AgentAlertState(*b.agent, kOverCapacity) == "firing") {
        // The alert was raised and could not be delivered: bring Alertmanager up.
        hole.reset();
        b.alertmanager = AlertmanagerProcess::Start(dir.path(), "am-b", b_port, &error);
        ASSERT_NE(b.alertmanager, nullptr) << error;
        b.alertmanager_started_ms = WallNowMs();
      }
    }
    std::this_thread::sleep_for(Millis(250));
  }
  std::printf(
      "records written %zu of %zu; outage samples %d; slowest /metrics b %.3fs, a %.3fs; most behind the writer b "
      "%.1fs, a %.1fs\n",
      feeder.written(), workload.value().lines.size(), outage_samples, max_scrape_s, max_scrape_a_s,
      max_lag_ms / 1000.0, max_lag_a_ms / 1000.0);
  auto at = [&](std::int64_t ms) { return ms ? (ms - feeder.start_ms()) / 1000.0 : -1.0; };
  std::printf("b's Alertmanager up at %.1fs\n", at(b.alertmanager_started_ms));
  for (Scenario* s : {&a, &b}) {
    for (const char* name : {kOverCapacity, kKneeShift}) {
      const Seen& seen = s->seen[name];
      std::printf("agent %s %s: startsAt %.1fs, in Alertmanager from %.1fs to %.1fs\n", s->name.c_str(), name,
                  at(ParseRfc3339Ms(seen.first.starts_at)), at(seen.firing_ms), at(seen.resolved_ms));
    }
  }

  // The outage: B kept up with the writer and answered /metrics as A did, while
  // each POST to the black hole hung for 5 s.
  ASSERT_EQ(hole, nullptr) << "agent b never raised " << kOverCapacity << " while its Alertmanager was down:\n"
                           << Tail(b.agent->Stderr());
  EXPECT_GT(outage_samples, 4);
  EXPECT_EQ(behind_samples, 0) << "agent b fell 2 s or more further behind the writer than agent a while its "
                                  "Alertmanager hung";
  EXPECT_LT(max_scrape_s, max_scrape_a_s + 2.0) << "agent b answered /metrics slowly while its Alertmanager hung";

  for (const Scenario* s : {&a, &b}) {
    ExpectDelivered(*s, kOverCapacity, shift_start_ms,
                    {"working_set_pages", "capacity_pages", "working_set_to_capacity", "target"}, "5s");
    ExpectDelivered(*s, kKneeShift, shift_start_ms, {"old_knee_pages", "new_knee_pages", "relative_change"}, "5s/20s");
    auto metrics = s->agent->Metrics(&error);
    ASSERT_TRUE(metrics.has_value()) << error;
    EXPECT_GE(SampleValue(*metrics, "kvwatch_alert_notifications_total",
                          {{"notifier", "alertmanager"}, {"result", "success"}})
                  .value_or(0),
              4)
        << "two firings and two resolutions at least";
    EXPECT_GE(SampleValue(*metrics, "kvwatch_alert_notifications_total", {{"notifier", "log"}, {"result", "success"}})
                  .value_or(0),
              4);
  }
  // B's over-capacity alert began during the outage and arrived afterwards.
  EXPECT_LT(ParseRfc3339Ms(b.seen[kOverCapacity].first.starts_at), b.alertmanager_started_ms);
  auto metrics_b = b.agent->Metrics(&error);
  ASSERT_TRUE(metrics_b.has_value()) << error;
  EXPECT_GE(SampleValue(*metrics_b, "kvwatch_alert_notifications_total",
                        {{"notifier", "alertmanager"}, {"result", "failure"}})
                .value_or(0),
            1);
  EXPECT_TRUE(a.agent->Stop().has_value());
  EXPECT_TRUE(b.agent->Stop().has_value());
}

}  // namespace
}  // namespace kvwatch::agent
