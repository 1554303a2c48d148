// Tests of the agent's alerting pieces (agent/alert_runner.h, agent/notifier.h):
//   - the inputs: engine counters summed from the collectors' typed signals (GPU
//     evictions only), windows and capacity mapped into AlertInputs, and an
//     in-process agent's AlertInputsAt() agreeing with its own /metrics;
//   - the config mapping (alerts.* keys into AlerterOptions and the notifier);
//   - AlertRunner: transitions logged, kvwatch_alert_* metrics, /api/v1/alerts
//     JSON, and the Alertmanager items delivered to a receiver (firing with endsAt
//     ahead, then the resolution with endsAt = the resolve time);
//   - Notifier against an in-process HTTP receiver: Enqueue returns while a POST
//     hangs, the outbox keeps the newest item per alert and drops the oldest
//     beyond its capacity, a receiver that is down gets retries until it is up,
//     a firing item whose endsAt passed is dropped, a 4xx drops the items, and the
//     webhook payload is Alertmanager's (version 4, fingerprints as Alertmanager
//     computes them).
// Evaluations use fake times; waits are PollUntil with deadlines that only bound
// a broken build.
#include "agent/runtime/alert_runner.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <simdjson.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "agent/runtime/agent.h"
#include "agent/runtime/agent_command.h"
#include "agent/runtime/notifier.h"
#include "alerts/format.h"
#include "collectors/exposition_parser.h"
#include "collectors/synth.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers
using std::chrono::seconds;

constexpr Millis kWait{20000};

alerts::TimePoint At(double s) {
  return alerts::TimePoint{} +
         std::chrono::duration_cast<alerts::TimePoint::duration>(std::chrono::duration<double>(s));
}

// ------------------------------------------------------------------ a receiver

// An HTTP receiver on 127.0.0.1: records the bodies POSTed to `path`, answers
// `status`, and can hold requests until Release().
class Receiver {
 public:
  explicit Receiver(int port = 0) {
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      std::unique_lock<std::mutex> lock(mu_);
      ++in_flight_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !hold_ || stopping_; });
      --in_flight_;
      bodies_.push_back(req.body);
      paths_.push_back(req.path);
      res.status = status_;
      res.set_content("", "text/plain");
    });
    port_ = port == 0 ? server_.bind_to_any_port("127.0.0.1") : (server_.bind_to_port("127.0.0.1", port) ? port : -1);
    if (port_ > 0) thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Receiver() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return port_; }
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = true;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      hold_ = false;
    }
    cv_.notify_all();
  }
  void SetStatus(int status) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
  }
  bool WaitInFlight() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return in_flight_ > 0; });
  }
  std::vector<std::string> Bodies() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  std::vector<std::string> Paths() const {
    std::lock_guard<std::mutex> lock(mu_);
    return paths_;
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
  bool stopping_ = false;
  int in_flight_ = 0;
  int status_ = 200;
  std::vector<std::string> bodies_;
  std::vector<std::string> paths_;
};

alerts::PostableAlert Item(const std::string& name, double starts, double ends) {
  alerts::PostableAlert a;
  a.labels = {{"alertname", name}, {"severity", "warning"}};
  a.annotations = {{"summary", name + " happened"}};
  a.starts_at = At(starts);
  a.ends_at = At(ends);
  return a;
}

// The alertnames in a postableAlert array body, in order.
std::vector<std::string> Names(const std::string& body) {
  std::vector<std::string> out;
  simdjson::dom::parser parser;
  simdjson::dom::array items;
  if (parser.parse(body).get(items)) return out;
  for (simdjson::dom::element item : items) {
    std::string_view name;
    if (!item["labels"]["alertname"].get(name)) out.emplace_back(name);
  }
  return out;
}

NotifierOptions FastOptions(int port, NotifierKind kind = NotifierKind::kAlertmanager) {
  NotifierOptions o;
  o.targets = {{kind, "http://127.0.0.1:" + std::to_string(port)}};
  o.timeout = Millis(10000);
  o.initial_backoff = Millis(20);
  o.max_backoff = Millis(100);
  o.clock = [] { return At(100); };
  return o;
}

// ------------------------------------------------------------------ inputs

TEST(AlertInputsTest, EngineCountersAreSummedAndGpuEvictionsOnly) {
  collectors::EngineSignals a, b, log;
  a.blocks = {{"GPU", 0, 10}, {"CPU", 0, 1000}};
  b.blocks = {{"GPU", 0, 5}};
  log.preemptions = 3;
  b.preemptions = 4;
  b.requests_running = 99;
  const std::vector<collectors::EngineSignals> signals = {a, b, log};
  const alerts::CounterSample c = SumEngineCounters(signals);
  EXPECT_EQ(c.evicted_blocks, 15);
  EXPECT_EQ(c.preemptions, 7);
  EXPECT_FALSE(c.rejected_requests.has_value());
  EXPECT_FALSE(c.requests.has_value());
  const alerts::CounterSample none = SumEngineCounters({});
  EXPECT_FALSE(none.evicted_blocks || none.preemptions || none.rejected_requests);
}

TEST(AlertInputsTest, ObservationMapsIntoInputs) {
  AlertInputSpec spec;
  spec.working_set = {alerts::WorkingSetTarget::kRequestCoverage, 0.9};
  spec.capacity_pages = 5000;
  AgentObservation o;
  o.short_window = WindowObservation{800, 1200.0, 3000.0};
  o.baseline_window = WindowObservation{9000, 1000.0, std::nullopt};
  o.tracked_pages_limit = 1 << 20;
  o.bytes_per_page = 2048;
  collectors::EngineSignals engine;
  engine.rejections = {{"http_429", 2}};
  o.engine = {engine};
  const alerts::AlertInputs in = MakeAlertInputs(spec, o, At(42));
  EXPECT_EQ(in.time, At(42));
  EXPECT_EQ(in.short_knee_pages, 1200);
  EXPECT_EQ(in.baseline_knee_pages, 1000);
  EXPECT_EQ(in.working_set_pages, 3000);
  EXPECT_EQ(in.short_window_requests, 800);
  EXPECT_EQ(in.baseline_window_requests, 9000);
  EXPECT_EQ(in.tracked_pages, 1 << 20);
  EXPECT_EQ(in.capacity_pages, 5000);
  EXPECT_EQ(in.bytes_per_page, 2048);
  EXPECT_EQ(in.working_set_target, "request_coverage 0.9");
  EXPECT_EQ(in.counters.rejected_requests, 2);

  // Windows that are not curves leave the knees and the working set unknown.
  const alerts::AlertInputs bare = MakeAlertInputs(AlertInputSpec{}, AgentObservation{}, At(1));
  EXPECT_FALSE(bare.short_knee_pages || bare.baseline_knee_pages || bare.working_set_pages ||
               bare.short_window_requests || bare.capacity_pages);
  EXPECT_EQ(bare.working_set_target, "page_hit 0.95");
}

// An agent in-process: its alert inputs are the numbers it exports.
TEST(AlertInputsTest, AgentInputsAgreeWithItsMetrics) {
  AgentOptions o;
  o.engine.max_pages = 1 << 16;
  o.engine.remembered_evictions = 1 << 16;
  o.curve.windows = {{"1m", 60}, {"10m", 600}};
  o.curve.capacities = {4000};
  o.curve.page_hit_targets = {0.95};
  o.curve.coverage_targets = {0.9};
  o.bytes_per_token = 100;
  o.page_tokens = 16;
  o.http.port = 0;
  config::AlertSettings settings;
  settings.alerter.short_window = seconds(60);
  settings.alerter.baseline_window = seconds(600);
  auto alerts = AlertRunnerOptionsFromConfig(settings, {"", "", o.curve.windows, o.curve.capacities});
  ASSERT_TRUE(alerts.ok()) << alerts.error();
  o.alerts = std::move(alerts).value();
  auto agent = Agent::Create(std::move(o));
  ASSERT_TRUE(agent.ok()) << agent.error();

  collectors::SynthOptions synth;
  synth.duration_s = 300;
  auto generator = collectors::SynthGenerator::Create(synth);
  ASSERT_TRUE(generator.ok());
  collectors::SynthRequest r;
  while (generator.value().Next(&r)) agent.value()->OnRequest(r.request);

  const alerts::AlertInputs in = agent.value()->AlertInputsAt(At(300));
  const collectors::Exposition e = collectors::ParseExposition(agent.value()->RenderMetrics());
  auto value = [&](const std::string& name, const std::map<std::string, std::string>& labels) {
    for (const collectors::Sample& s : e.samples) {
      if (s.name != name || s.labels.size() != labels.size()) continue;
      bool match = true;
      for (const auto& [k, v] : labels) match = match && s.Label(k) == v;
      if (match) return std::optional<double>(s.value);
    }
    return std::optional<double>();
  };
  ASSERT_TRUE(in.short_knee_pages && in.baseline_knee_pages);
  EXPECT_EQ(in.short_knee_pages, value("kvwatch_knee_pages", {{"window", "1m"}}));
  EXPECT_EQ(in.baseline_knee_pages, value("kvwatch_knee_pages", {{"window", "10m"}}));
  EXPECT_EQ(in.short_window_requests, value("kvwatch_window_requests", {{"window", "1m"}}));
  EXPECT_EQ(in.baseline_window_requests, value("kvwatch_window_requests", {{"window", "10m"}}));
  EXPECT_EQ(in.working_set_pages,
            value("kvwatch_working_set_pages", {{"window", "1m"}, {"target", "page_hit"}, {"fraction", "0.95"}}));
  EXPECT_EQ(in.capacity_pages, 4000);
  EXPECT_EQ(value("kvwatch_cache_capacity_pages", {}), 4000);
  EXPECT_EQ(in.bytes_per_page, 1600);
  EXPECT_EQ(in.tracked_pages, 1 << 16);
  EXPECT_GT(*in.short_window_requests, 500);
  // The runner's series are exported with the agent's.
  EXPECT_EQ(
      value("kvwatch_alert_state", {{"alertname", "KVWatchKneeShift"}, {"window", "1m/10m"}, {"severity", "warning"}}),
      0);
  EXPECT_EQ(value("kvwatch_alert_notifications_total", {{"notifier", "log"}, {"result", "success"}}), 0);
}

// A collector that knows engine signals and, while it polls, scrapes the agent:
// the agent polls its collectors without holding its lock (a scrape from inside
// a poll deadlocked when polls held it).
class SignalCollector : public collectors::Collector {
 public:
  const std::string& name() const override { return name_; }
  std::string_view kind() const override { return "test"; }
  std::chrono::milliseconds poll_interval() const override { return std::chrono::milliseconds(10); }
  void Poll(collectors::RequestSink& /*sink*/, double /*wall_now_s*/) override {
    if (agent != nullptr && !scraped.load()) {
      body = agent->RenderMetrics();
      scraped = true;
    }
  }
  collectors::CollectorStats stats() const override {
    collectors::CollectorStats s;
    s.up = true;
    return s;
  }
  collectors::EngineSignals engine_signals() const override {
    collectors::EngineSignals g;
    g.blocks = {{"GPU", 20, 7}, {"CPU", 0, 100}};
    g.preemptions = 5;
    g.rejections = {{"admission", 2}};
    g.capacity_pages = 1000;
    return g;
  }
  void AppendSamples(std::vector<collectors::MetricSample>* out) const override {
    collectors::AppendEngineCounterSamples(engine_signals(), name_, out);
    collectors::AppendEngineGaugeSamples(engine_signals(), name_, out);
  }

  Agent* agent = nullptr;
  std::atomic<bool> scraped{false};
  std::string body;  // read after `scraped`

 private:
  std::string name_ = "sig";
};

TEST(AlertInputsTest, CollectorSignalsReachMetricsAndAlertsAndPollsHoldNoLock) {
  AgentOptions o;
  o.engine.max_pages = 1 << 12;
  o.curve.windows = {{"1m", 60}, {"10m", 600}};
  o.http.port = 0;
  config::AlertSettings settings;
  settings.alerter.short_window = seconds(60);
  settings.alerter.baseline_window = seconds(600);
  auto alerts = AlertRunnerOptionsFromConfig(settings, {"", "", o.curve.windows, {}});
  ASSERT_TRUE(alerts.ok()) << alerts.error();
  o.alerts = std::move(alerts).value();
  auto owned = std::make_unique<SignalCollector>();
  SignalCollector* collector = owned.get();
  o.collectors.push_back(std::move(owned));
  auto created = Agent::Create(std::move(o));
  ASSERT_TRUE(created.ok()) << created.error();
  Agent& agent = *created.value();
  collector->agent = &agent;
  std::thread loop([&] { agent.Run(); });
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  while (!collector->scraped.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const bool scraped = collector->scraped.load();
  agent.Stop();
  loop.join();
  ASSERT_TRUE(scraped) << "a scrape from inside a poll did not return";
  EXPECT_NE(collector->body.find("kvwatch_collector_up"), std::string::npos);

  const alerts::AlertInputs in = agent.AlertInputsAt(At(1));
  EXPECT_EQ(in.counters.evicted_blocks, 7) << "GPU evictions only";
  EXPECT_EQ(in.counters.preemptions, 5);
  EXPECT_EQ(in.counters.rejected_requests, 2);
  const std::string metrics = agent.RenderMetrics();
  EXPECT_NE(metrics.find("kvwatch_engine_evicted_blocks_total{collector=\"sig\",medium=\"GPU\"} 7"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("kvwatch_engine_preemptions_total{collector=\"sig\"} 5"), std::string::npos);
  EXPECT_NE(metrics.find("kvwatch_model_predicted_page_hit_ratio{collector=\"sig\",window=\"1m\"}"), std::string::npos);
}

// ------------------------------------------------------------------ config

TEST(AlertConfigTest, KeysMapIntoTheAlerter) {
  auto parsed = config::ParseAgentConfig(
      "replica: chat-3\n"
      "curve:\n  windows: [20s, 2m]\n  capacities: [100, 2048]\n"
      "alerts:\n"
      "  short_window: 20s\n  baseline_window: 2m\n  evaluation_interval: 2s\n  timeout: 3s\n"
      "  resend_interval: 1.5s\n"
      "  alertmanagers: ['http://am-1:9093', 'http://am-2:9093']\n  webhooks: ['https://hooks.example.com/x']\n"
      "  knee_shift: {fire_threshold: 0.4, clear_threshold: 0.2, min_shift_pages: 16, min_requests: 100,\n"
      "               min_baseline_requests: 1000, for: 2s}\n"
      "  over_capacity: {target: request_coverage, fraction: 0.9, fire_threshold: 1.1, clear_threshold: 0.8,\n"
      "                  min_requests: 50, for: 3s}\n"
      "  rate_shift: {enabled: false, fire_threshold: 3, clear_threshold: 2, min_requests: 10, for: 4s}\n"
      "  drift: {fire_threshold: 20, clear_threshold: 6, relearn_after: 0s, min_requests: 5, for: 5s}\n",
      "agent.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  const config::AgentConfig& c = parsed.value();
  AlertRunnerContext context{"chat-3", "llama-3-70b", {{"20s", 20}, {"2m", 120}}, {100, 2048}};
  auto o = AlertRunnerOptionsFromConfig(c.alerts, context);
  ASSERT_TRUE(o.ok()) << o.error();
  const alerts::AlerterOptions& a = o.value().alerter;
  EXPECT_EQ(a.replica, "chat-3");
  EXPECT_EQ(a.model, "llama-3-70b");
  EXPECT_EQ(a.short_window, seconds(20));
  EXPECT_EQ(a.baseline_window, seconds(120));
  EXPECT_EQ(a.knee_shift.fire_threshold, 0.4);
  EXPECT_EQ(a.knee_shift.clear_threshold, 0.2);
  EXPECT_EQ(a.knee_shift.min_shift_pages, 16);
  EXPECT_EQ(a.knee_shift.min_short_window_requests, 100);
  EXPECT_EQ(a.knee_shift.min_baseline_window_requests, 1000);
  EXPECT_EQ(a.knee_shift.rule.for_duration, seconds(2));
  EXPECT_EQ(a.capacity_shortfall.fire_threshold, 1.1);
  EXPECT_EQ(a.capacity_shortfall.clear_threshold, 0.8);
  EXPECT_EQ(a.capacity_shortfall.min_short_window_requests, 50);
  EXPECT_EQ(a.capacity_shortfall.rule.for_duration, seconds(3));
  for (const auto* r : {&a.eviction_rate_shift, &a.rejection_rate_shift, &a.preemption_rate_shift}) {
    EXPECT_FALSE(r->enabled);
    EXPECT_EQ(r->fire_threshold, 3);
    EXPECT_EQ(r->rule.for_duration, seconds(4));
  }
  EXPECT_EQ(a.eviction_rate_shift.rate_floor_per_second, 1.0);
  EXPECT_EQ(a.rejection_rate_shift.rate_floor_per_second, 0.05);
  ASSERT_EQ(a.change_tests.size(), 1u);
  EXPECT_EQ(a.change_tests[0].fire_threshold, 20);
  EXPECT_GE(a.change_tests[0].cusum.cap, 20);  // the cap follows a higher alarm threshold
  EXPECT_EQ(a.change_tests[0].relearn_after, seconds(0));
  EXPECT_EQ(a.notify.resend_interval, seconds(2));  // whole seconds, rounded up
  EXPECT_EQ(o.value().inputs.short_window, 0u);
  EXPECT_EQ(o.value().inputs.baseline_window, 1u);
  EXPECT_EQ(o.value().inputs.working_set, (alerts::WorkingSetSpec{alerts::WorkingSetTarget::kRequestCoverage, 0.9}));
  EXPECT_EQ(o.value().inputs.capacity_pages, 2048);  // the largest of the context's capacities
  EXPECT_EQ(o.value().alerter.evaluation_interval, Millis(2000));
  ASSERT_EQ(o.value().notifier.targets.size(), 3u);
  EXPECT_EQ(o.value().notifier.targets[2].kind, NotifierKind::kWebhook);
  EXPECT_EQ(o.value().alerter.notify.request_timeout, Millis(3000));

  // The default windows need not be curves: no index, no error.
  auto defaults = AlertRunnerOptionsFromConfig(config::AlertSettings{}, context);
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults.value().inputs.short_window.has_value());
  EXPECT_FALSE(AlertRunnerOptionsFromConfig(config::AlertSettings{}, AlertRunnerContext{})
                   .value()
                   .inputs.capacity_pages.has_value());
}

// The agent's wiring fills the context from its resolved options: the model label,
// else the model's name; the curve windows and capacities.
TEST(AlertConfigTest, AgentOptionsGiveTheRunnerItsContext) {
  auto parsed = config::ParseAgentConfig(
      "replica: r1\nmodel: llama-3-70b\ncurve:\n  windows: [1h, 24h]\n  capacities: [512, 64]\n", "agent.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  config::AgentConfig c = parsed.value();
  auto o = BuildAgentOptions(c);
  ASSERT_TRUE(o.ok()) << o.error();
  ASSERT_TRUE(o.value().alerts.has_value());
  EXPECT_EQ(o.value().alerts->alerter.replica, "r1");
  EXPECT_EQ(o.value().alerts->alerter.model, o.value().model_name.value_or("?"));
  EXPECT_EQ(o.value().alerts->inputs.short_window, 0u);
  EXPECT_EQ(o.value().alerts->inputs.baseline_window, 1u);
  EXPECT_EQ(o.value().alerts->inputs.capacity_pages, 512);
  c.model_label = "chat-model";
  EXPECT_EQ(BuildAgentOptions(c).value().alerts->alerter.model, "chat-model");
}

// ------------------------------------------------------------------ the runner

alerts::AlertInputs KneeInputs(double t, double short_knee) {
  alerts::AlertInputs in;
  in.time = At(t);
  in.short_knee_pages = short_knee;
  in.baseline_knee_pages = 1000;
  in.short_window_requests = 1000;
  in.baseline_window_requests = 10000;
  return in;
}

TEST(AlertRunnerTest, TransitionsAreLoggedExportedAndDelivered) {
  Receiver am;
  ASSERT_GT(am.port(), 0);
  AlertRunnerOptions o;
  o.alerter.replica = "r1";
  o.alerter.knee_shift.rule.for_duration = seconds(30);
  o.alerter.notify.resend_interval = seconds(60);
  o.notifier = FastOptions(am.port());
  o.notifier.clock = [] { return At(0); };  // nothing expires in this test
  std::vector<std::string> lines;
  o.log = [&](const std::string& line) { lines.push_back(line); };
  auto runner = AlertRunner::Create(std::move(o));
  ASSERT_TRUE(runner.ok()) << runner.error();
  AlertRunner& r = *runner.value();

  ASSERT_TRUE(r.Evaluate(KneeInputs(1000, 1000)).ok());
  ASSERT_TRUE(r.Evaluate(KneeInputs(1015, 1500)).ok());  // pending
  ASSERT_TRUE(r.Evaluate(KneeInputs(1045, 1500)).ok());  // firing
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(
      lines[0].rfind("alert KVWatchKneeShift{replica=\"r1\",severity=\"warning\",window=\"1h/24h\"} pending: ", 0), 0u)
      << lines[0];
  EXPECT_NE(lines[1].find("} firing: KV-cache knee grew by 50%"), std::string::npos) << lines[1];

  MetricsBuilder m;
  r.AppendMetrics(&m);
  const collectors::Exposition e = collectors::ParseExposition(m.Serialize());
  auto find = [&](const std::string& name, const std::string& key, const std::string& value) {
    for (const collectors::Sample& s : e.samples) {
      if (s.name == name && s.Label(key) == value) return s.value;
    }
    return -1.0;
  };
  EXPECT_EQ(find("kvwatch_alert_state", "alertname", "KVWatchKneeShift"), 2);
  EXPECT_EQ(find("kvwatch_alert_state", "alertname", "KVWatchWorkingSetOverCapacity"), 0);
  EXPECT_DOUBLE_EQ(find("kvwatch_alert_value", "alertname", "KVWatchKneeShift"), 0.5);
  EXPECT_TRUE(e.errors.empty());

  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.AlertsJson()).get(doc), simdjson::SUCCESS) << r.AlertsJson();
  bool found = false;
  for (simdjson::dom::element a : doc["data"]["alerts"]) {
    std::string_view name, state, active, old_knee;
    ASSERT_FALSE(a["labels"]["alertname"].get(name));
    if (name != "KVWatchKneeShift") continue;
    found = true;
    ASSERT_FALSE(a["state"].get(state));
    ASSERT_FALSE(a["activeAt"].get(active));
    ASSERT_FALSE(a["annotations"]["old_knee_pages"].get(old_knee));
    EXPECT_EQ(state, "firing");
    EXPECT_EQ(active, alerts::FormatRfc3339(At(1015)));
    EXPECT_EQ(old_knee, "1000");
  }
  EXPECT_TRUE(found);

  // The receiver gets the firing alert, endsAt 4 resend intervals ahead.
  ASSERT_TRUE(PollUntil([&] { return am.Bodies().size() >= 1; }, kWait));
  EXPECT_EQ(am.Paths()[0], "/api/v2/alerts");
  simdjson::dom::element sent;
  ASSERT_EQ(parser.parse(am.Bodies()[0]).get(sent), simdjson::SUCCESS);
  std::string_view starts, ends;
  ASSERT_FALSE(sent.at(0)["startsAt"].get(starts));
  ASSERT_FALSE(sent.at(0)["endsAt"].get(ends));
  EXPECT_EQ(starts, alerts::FormatRfc3339(At(1045)));
  EXPECT_EQ(ends, alerts::FormatRfc3339(At(1045 + 240)));

  // Back to normal: resolved at once, endsAt = the resolve time.
  ASSERT_TRUE(r.Evaluate(KneeInputs(1060, 1050)).ok());
  EXPECT_NE(lines.back().find("} resolved: "), std::string::npos) << lines.back();
  ASSERT_TRUE(PollUntil([&] { return am.Bodies().size() >= 2; }, kWait));
  ASSERT_EQ(parser.parse(am.Bodies()[1]).get(sent), simdjson::SUCCESS);
  ASSERT_FALSE(sent.at(0)["endsAt"].get(ends));
  EXPECT_EQ(ends, alerts::FormatRfc3339(At(1060)));

  // A clock going back is refused and counted.
  EXPECT_FALSE(r.Evaluate(KneeInputs(1059, 1000)).ok());
  MetricsBuilder after;
  r.AppendMetrics(&after);
  const std::string text = after.Serialize();
  EXPECT_NE(text.find("kvwatch_alert_evaluations_total 5"), std::string::npos) << text;
  EXPECT_NE(text.find("kvwatch_alert_evaluation_failures_total 1"), std::string::npos) << text;
  EXPECT_NE(text.find("kvwatch_alert_notifications_total{notifier=\"log\",result=\"success\"} 3"), std::string::npos)
      << text;
  EXPECT_TRUE(PollUntil(
      [&] {
        MetricsBuilder now;
        r.AppendMetrics(&now);
        return now.Serialize().find(
                   "kvwatch_alert_notifications_total{notifier=\"alertmanager\",result=\"success\"} 2") !=
               std::string::npos;
      },
      kWait));
}

// A knee at `short_knee` and a working set of `working_set` pages against a
// capacity of 1000.
alerts::AlertInputs KneeAndCapacityInputs(double t, double short_knee, double working_set) {
  alerts::AlertInputs in = KneeInputs(t, short_knee);
  in.capacity_pages = 1000;
  in.working_set_pages = working_set;
  return in;
}

AlertRunnerOptions RestartOptions(int port, std::vector<std::string>* lines) {
  AlertRunnerOptions o;
  o.alerter.replica = "r1";
  o.alerter.knee_shift.rule.for_duration = seconds(30);
  o.alerter.notify.resend_interval = seconds(60);
  o.notifier = FastOptions(port);
  o.notifier.clock = [] { return At(0); };  // nothing expires in this test
  o.log = [lines](const std::string& line) { lines->push_back(line); };
  return o;
}

TEST(AlertRunnerTest, RestoredStateKeepsAlertsAndDoesNotNotifyTwice) {
  Receiver am1, am2;
  ASSERT_GT(am1.port(), 0);
  ASSERT_GT(am2.port(), 0);
  std::vector<std::string> lines1, lines2;
  auto first = AlertRunner::Create(RestartOptions(am1.port(), &lines1));
  ASSERT_TRUE(first.ok()) << first.error();
  AlertRunner& a = *first.value();
  ASSERT_TRUE(a.Evaluate(KneeAndCapacityInputs(1000, 1000, 900)).ok());
  ASSERT_TRUE(a.Evaluate(KneeAndCapacityInputs(1015, 1500, 900)).ok());   // knee pending
  ASSERT_TRUE(a.Evaluate(KneeAndCapacityInputs(1045, 1500, 900)).ok());   // knee firing, sent
  ASSERT_TRUE(a.Evaluate(KneeAndCapacityInputs(1050, 1500, 1100)).ok());  // over capacity pending
  ASSERT_TRUE(PollUntil([&] { return am1.Bodies().size() >= 1; }, kWait));
  ASSERT_EQ(lines1.size(), 3u);

  std::vector<std::uint8_t> state;
  a.AppendState(&state);
  // The restarted agent: a new runner (sending elsewhere here, to tell the sends
  // apart) restored from the state.
  auto second = AlertRunner::Create(RestartOptions(am2.port(), &lines2));
  ASSERT_TRUE(second.ok()) << second.error();
  AlertRunner& b = *second.value();
  ASSERT_TRUE(b.RestoreState(state));
  EXPECT_EQ(b.AlertsJson(), a.AlertsJson());
  std::map<std::string, alerts::AlertState> states;
  for (const alerts::AlertStatus& st : b.Statuses()) states[st.labels.at("alertname")] = st.state;
  EXPECT_EQ(states["KVWatchKneeShift"], alerts::AlertState::kFiring);
  EXPECT_EQ(states["KVWatchWorkingSetOverCapacity"], alerts::AlertState::kPending);
  MetricsBuilder restored;
  b.AppendMetrics(&restored);
  const std::string text = restored.Serialize();
  EXPECT_NE(text.find("kvwatch_alert_evaluations_total 4"), std::string::npos) << text;
  EXPECT_NE(text.find("kvwatch_alert_notifications_total{notifier=\"log\",result=\"success\"} 3"), std::string::npos)
      << text;

  // Both continue on the same inputs: the same transitions, no transition logged
  // again, and the firing alert re-sent only resend_interval after its last send.
  const std::size_t cut = lines1.size();
  for (double t : {1080.0, 1110.0}) {
    ASSERT_TRUE(a.Evaluate(KneeAndCapacityInputs(t, 1500, 1100)).ok());
    ASSERT_TRUE(b.Evaluate(KneeAndCapacityInputs(t, 1500, 1100)).ok());
  }
  EXPECT_TRUE(lines2.empty()) << lines2.front();
  ASSERT_TRUE(PollUntil([&] { return am2.Bodies().size() >= 1; }, kWait));
  simdjson::dom::parser parser;
  simdjson::dom::element sent;
  ASSERT_EQ(parser.parse(am2.Bodies()[0]).get(sent), simdjson::SUCCESS);
  std::string_view starts, ends;
  ASSERT_FALSE(sent.at(0)["startsAt"].get(starts));
  ASSERT_FALSE(sent.at(0)["endsAt"].get(ends));
  EXPECT_EQ(starts, alerts::FormatRfc3339(At(1045)));      // the same alert instance
  EXPECT_EQ(ends, alerts::FormatRfc3339(At(1110 + 240)));  // the 1110 re-send, not one at 1080

  // The knee comes back: the restored runner resolves it and sends the resolution.
  ASSERT_TRUE(a.Evaluate(KneeAndCapacityInputs(1120, 1000, 1100)).ok());
  ASSERT_TRUE(b.Evaluate(KneeAndCapacityInputs(1120, 1000, 1100)).ok());
  ASSERT_EQ(lines2.size(), 1u);
  EXPECT_NE(lines2[0].find("KVWatchKneeShift"), std::string::npos) << lines2[0];
  EXPECT_NE(lines2[0].find("} resolved: "), std::string::npos) << lines2[0];
  EXPECT_EQ(std::vector<std::string>(lines1.begin() + static_cast<std::ptrdiff_t>(cut), lines1.end()), lines2);
  ASSERT_TRUE(PollUntil([&] { return am2.Bodies().size() >= 2; }, kWait));
  ASSERT_EQ(parser.parse(am2.Bodies()[1]).get(sent), simdjson::SUCCESS);
  ASSERT_FALSE(sent.at(0)["endsAt"].get(ends));
  EXPECT_EQ(ends, alerts::FormatRfc3339(At(1120)));
  EXPECT_EQ(b.AlertsJson(), a.AlertsJson());
}

TEST(AlertRunnerTest, RestoreStateRefusesBadBytesAndCatchesUpAClockThatStandsEarlier) {
  AlertRunnerOptions o;
  o.alerter.replica = "r1";
  auto first = AlertRunner::Create(o);
  ASSERT_TRUE(first.ok()) << first.error();
  // The last evaluation an hour ahead of this process's clock (the wall clock
  // stepped back across the restart).
  const alerts::TimePoint ahead = first.value()->Now() + std::chrono::hours(1);
  alerts::AlertInputs inputs = KneeInputs(0, 1500);
  inputs.time = ahead;
  ASSERT_TRUE(first.value()->Evaluate(inputs).ok());
  std::vector<std::uint8_t> state;
  first.value()->AppendState(&state);

  auto second = AlertRunner::Create(o);
  ASSERT_TRUE(second.ok()) << second.error();
  AlertRunner& b = *second.value();
  const std::string before = b.AlertsJson();
  for (std::size_t len = 0; len < state.size(); ++len) {
    ASSERT_FALSE(b.RestoreState(std::span<const std::uint8_t>(state.data(), len))) << "length " << len;
  }
  std::vector<std::uint8_t> longer = state;
  longer.push_back(0);
  EXPECT_FALSE(b.RestoreState(longer));
  std::vector<std::uint8_t> garbage(state.size());
  for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<std::uint8_t>(i * 131 + 7);
  EXPECT_FALSE(b.RestoreState(garbage));
  AlertRunnerOptions other = o;
  other.alerter.replica = "r2";
  auto third = AlertRunner::Create(other);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third.value()->RestoreState(state));  // other alerts (labels)
  EXPECT_EQ(b.AlertsJson(), before);
  EXPECT_LT(b.Now(), ahead);

  ASSERT_TRUE(b.RestoreState(state));
  EXPECT_GE(b.Now(), ahead);
  inputs.time = b.Now();
  EXPECT_TRUE(b.Evaluate(inputs).ok());
}

TEST(AlertRunnerTest, BadOptionsNameTheField) {
  AlertRunnerOptions o;
  o.alerter.knee_shift.clear_threshold = 0.5;
  auto runner = AlertRunner::Create(o);
  ASSERT_FALSE(runner.ok());
  EXPECT_NE(runner.error().find("knee_shift.clear_threshold"), std::string::npos) << runner.error();
  AlertRunnerOptions bad_url;
  bad_url.notifier.targets = {{NotifierKind::kAlertmanager, "am:9093"}};
  auto other = AlertRunner::Create(bad_url);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().find("alerts.alertmanagers: \"am:9093\""), std::string::npos) << other.error();
}

// ------------------------------------------------------------------ the notifier

TEST(NotifierTest, EnqueueNeverWaitsForAHangingReceiverAndKeepsTheNewestPerAlert) {
  Receiver am;
  am.Hold();
  NotifierOptions o = FastOptions(am.port());
  o.queue_capacity = 2;
  auto notifier = Notifier::Create(o);
  ASSERT_TRUE(notifier.ok()) << notifier.error();
  Notifier& n = *notifier.value();

  n.Enqueue({Item("A", 10, 500)}, At(50));
  ASSERT_TRUE(am.WaitInFlight());  // the POST of [A] hangs in the receiver
  // These return although the worker is stuck: the receiver is still holding.
  n.Enqueue({Item("B", 10, 500)}, At(51));
  n.Enqueue({Item("C", 10, 500), Item("B", 10, 600)}, At(52));  // B replaced, A dropped (capacity 2)
  EXPECT_TRUE(am.Bodies().empty());
  std::vector<NotifierStats> stats = n.Stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].dropped_queue_full, 1u);
  EXPECT_EQ(stats[0].queued, 2u);

  am.Release();
  ASSERT_TRUE(PollUntil([&] { return am.Bodies().size() >= 2; }, kWait));
  EXPECT_EQ(Names(am.Bodies()[0]), (std::vector<std::string>{"A"}));
  EXPECT_EQ(Names(am.Bodies()[1]), (std::vector<std::string>{"B", "C"}));
  EXPECT_NE(am.Bodies()[1].find(alerts::FormatRfc3339(At(600))), std::string::npos) << "the newest B";
  ASSERT_TRUE(PollUntil([&] { return n.Stats()[0].queued == 0; }, kWait));
  stats = n.Stats();
  EXPECT_EQ(stats[0].requests_ok, 2u);
  EXPECT_EQ(stats[0].alerts_sent, 3u);
  EXPECT_EQ(stats[0].requests_failed, 0u);
}

TEST(NotifierTest, RetriesWithBackoffUntilTheReceiverIsUp) {
  const int port = PickFreePort();
  ASSERT_GT(port, 0);
  auto notifier = Notifier::Create(FastOptions(port));
  ASSERT_TRUE(notifier.ok());
  Notifier& n = *notifier.value();
  n.Enqueue({Item("A", 10, 500)}, At(50));
  ASSERT_TRUE(PollUntil([&] { return n.Stats()[0].requests_failed >= 2; }, kWait));
  EXPECT_NE(n.Stats()[0].last_error.find("127.0.0.1:" + std::to_string(port)), std::string::npos);
  // Resolved while the receiver is down: the outbox holds the resolution only.
  n.Enqueue({Item("A", 10, 60)}, At(60));
  // Two more failures: the later one was an attempt made after the Enqueue.
  const std::uint64_t failed = n.Stats()[0].requests_failed;
  ASSERT_TRUE(PollUntil([&] { return n.Stats()[0].requests_failed >= failed + 2; }, kWait));
  Receiver am(port);
  ASSERT_EQ(am.port(), port);
  ASSERT_TRUE(PollUntil([&] { return n.Stats()[0].requests_ok == 1; }, kWait));
  ASSERT_EQ(am.Bodies().size(), 1u);
  EXPECT_EQ(Names(am.Bodies()[0]), (std::vector<std::string>{"A"}));
  EXPECT_NE(am.Bodies()[0].find("\"endsAt\":\"" + alerts::FormatRfc3339(At(60))), std::string::npos) << am.Bodies()[0];
  EXPECT_EQ(n.Stats()[0].last_error, "");
  EXPECT_EQ(n.Stats()[0].queued, 0u);
}

TEST(NotifierTest, ExpiredFiringItemsAndRejectedPayloadsAreDropped) {
  Receiver am;
  NotifierOptions o = FastOptions(am.port());  // its clock says 100
  auto notifier = Notifier::Create(o);
  ASSERT_TRUE(notifier.ok());
  Notifier& n = *notifier.value();
  // Firing when taken (endsAt 90 > 80) but expired by the time it could be sent.
  n.Enqueue({Item("Stale", 10, 90)}, At(80));
  ASSERT_TRUE(PollUntil([&] { return n.Stats()[0].dropped_expired == 1; }, kWait));
  EXPECT_TRUE(am.Bodies().empty());
  // A resolution (endsAt 70 <= 80) is never stale.
  n.Enqueue({Item("Done", 10, 70)}, At(80));
  ASSERT_TRUE(PollUntil([&] { return am.Bodies().size() == 1; }, kWait));

  am.SetStatus(400);
  n.Enqueue({Item("Bad", 10, 500)}, At(80));
  ASSERT_TRUE(PollUntil([&] { return n.Stats()[0].dropped_rejected == 1; }, kWait));
  EXPECT_EQ(am.Bodies().size(), 2u);  // sent once, not retried
  EXPECT_EQ(n.Stats()[0].requests_failed, 1u);
  EXPECT_NE(n.Stats()[0].last_error.find("HTTP 400"), std::string::npos);
}

TEST(NotifierTest, WebhookGetsTheAlertmanagerWebhookPayload) {
  Receiver hook;
  NotifierOptions o = FastOptions(hook.port(), NotifierKind::kWebhook);
  o.targets[0].url += "/hooks/kvwatch";
  auto notifier = Notifier::Create(o);
  ASSERT_TRUE(notifier.ok());
  alerts::PostableAlert firing = Item("KVWatchTest", 10, 500);
  firing.labels = {{"alertname", "KVWatchTest"}, {"replica", "r1"}};
  alerts::PostableAlert resolved = Item("KVWatchOther", 10, 90);
  resolved.labels = {{"alertname", "KVWatchOther"}, {"replica", "r1"}};
  notifier.value()->Enqueue({firing, resolved}, At(95));
  ASSERT_TRUE(PollUntil([&] { return hook.Bodies().size() == 1; }, kWait));
  EXPECT_EQ(hook.Paths()[0], "/hooks/kvwatch");

  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(hook.Bodies()[0]).get(doc), simdjson::SUCCESS) << hook.Bodies()[0];
  std::string_view version, status, receiver, replica;
  ASSERT_FALSE(doc["version"].get(version) || doc["status"].get(status) || doc["receiver"].get(receiver));
  EXPECT_EQ(version, "4");
  EXPECT_EQ(status, "firing");
  EXPECT_EQ(receiver, "kvwatch");
  ASSERT_FALSE(doc["commonLabels"]["replica"].get(replica));
  EXPECT_EQ(replica, "r1");
  simdjson::dom::object common;
  ASSERT_FALSE(doc["commonLabels"].get(common));
  EXPECT_EQ(common.size(), 1u);  // alertname differs
  std::map<std::string, std::string> states, fingerprints;
  for (simdjson::dom::element a : doc["alerts"]) {
    std::string_view name, state, fingerprint;
    ASSERT_FALSE(a["labels"]["alertname"].get(name) || a["status"].get(state) || a["fingerprint"].get(fingerprint));
    states[std::string(name)] = std::string(state);
    fingerprints[std::string(name)] = std::string(fingerprint);
  }
  EXPECT_EQ(states["KVWatchTest"], "firing");
  EXPECT_EQ(states["KVWatchOther"], "resolved");
  // Alertmanager 0.25 reports this fingerprint for {alertname="KVWatchTest", replica="r1"}.
  EXPECT_EQ(fingerprints["KVWatchTest"], "70e83b09f9184b73");
  EXPECT_EQ(LabelsFingerprint({}), "cbf29ce484222325");  // FNV-1a's offset basis
}

TEST(NotifierTest, StopReturnsWhileReceiversAreDown) {
  auto notifier = Notifier::Create(FastOptions(PickFreePort()));
  ASSERT_TRUE(notifier.ok());
  notifier.value()->Enqueue({Item("A", 10, 500)}, At(50));
  ASSERT_TRUE(PollUntil([&] { return notifier.value()->Stats()[0].requests_failed >= 1; }, kWait));
  notifier.value()->Stop();
  EXPECT_EQ(notifier.value()->Stats()[0].queued, 0u);
  notifier.value()->Enqueue({Item("B", 10, 500)}, At(51));  // ignored after Stop
  EXPECT_EQ(notifier.value()->Stats()[0].queued, 0u);
}

}  // namespace
}  // namespace kvwatch::agent
