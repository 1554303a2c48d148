// Agent: `kvwatch agent`, the process that runs beside a serving replica.
//
// Data path: collectors (polled on the event loop) hand requests to the agent; the
// agent runs them through one StackDistanceEngine (one continuous cache state),
// adds each outcome to the lifetime curve (exported as cumulative Prometheus
// histograms) and to the windowed curves (exported as gauges per window), and
// serves /metrics, /api/v1/curve, /api/v1/groups, /api/v1/history, /api/v1/windows,
// /api/v1/alerts, /healthz, /readyz and a page at /. The loop also samples every
// window's knee and working sets into a bounded history (agent/runtime/curve_history.h). State (engine, curves, clock,
// groups, and every collector's positions) is committed in one atomic step (agent/runtime/state_file.h) right after
// start-up, on an interval, soon after a rotation, and at shutdown, and restored at start-up; the state path is locked
// (StateLock) from Init to the agent's end, so two agents never share it. SIGHUP reloads the web config
// (web.config_file) and nothing else. With alerts enabled the loop
// evaluates the detectors every alerts.evaluation_interval (agent/alert_runner.h);
// notifications are sent on the runner's own threads.
//
// Tenants and classes (tenants.enabled, the default, exact engine only): each
// request is folded into a tenant group and a class group (curve/group_accounting.h),
// the engine runs with those groups as tags (so capacity misses can be attributed
// to the groups whose references pushed a page out), and the per-group counters,
// window curves and footprints are exported (agent/runtime/group_metrics.h) and
// feed the capacity-miss alert. They are checkpointed with the rest.
//
// Sampling: when engine.sample_rate < 1 or engine.sample_max_pages > 0 the engine
// is a SampledEngine (curve/sampled_engine.h). Each sampled request is counted with
// the engine's weight (round(kWeightUnit / the rate it was sampled at)), so the
// curves' ratios are SHARDS's; exported counts are divided by kWeightUnit. Every
// request, sampled or not, adds kWeightUnit per page to the expected references
// and kWeightUnit to the expected requests (lifetime totals, and per window slice):
// the lifetime and window curves are SHARDS-adj corrected against the expected
// references, and their request counts set to the expected requests (coverage
// ratios unchanged), so exported counts estimate the full stream's. A request with
// no sampled page only moves the window clock. The policy canaries still simulate
// every page (their page-hit ratios stay exact); their request coverage, which needs
// each request's unlimited hits, is not exported.
//
// Clock: the windows' clock follows the requests' own timestamps (a request
// without one is placed at the clock's time: the last timestamp plus the wall time
// since). The collectors drop records whose timestamp is more than
// curve.max_clock_skew ahead of the wall clock, or negative or not finite, as bad
// input (collectors/time_sanity.h). As a backstop for requests that reach Ingest()
// by another road, such a timestamp is treated as absent: the request is counted at
// the clock's time and never moves the clock (one request from the year 33658 would
// otherwise leave every later request out of every window). No counter of its own:
// the bad input is counted where it enters, by the collector.
//
// Threads: the event loop (Run) owns the collectors and polls them without mu_:
// their I/O (file reads, ZeroMQ receives, the engine scraper's hand-over) runs
// unlocked, and mu_ is taken only to hand over parsed requests (in batches) and,
// after each poll, a copy of the collector's stats, engine signals and samples.
// The HTTP server answers on its own threads: /metrics, /api/v1/curve and the
// alert evaluation copy a snapshot under mu_ (the lifetime and window curves, the
// canaries' published totals, the published collector copies, counters) and build
// the reports, knees and text outside it. mu_ guards everything both touch; readers
// hold it shared, so a state save, which serializes the analysis under a shared
// hold too, does not hold them up. The policy canaries are simulated outside mu_:
// under it a request is only queued for them, and once a batch is handed over (or
// their queue is full) the loop releases mu_ and the canaries take the queue under
// their own lock, then publish their totals (CanaryStage, analysis.h). Readers copy
// what was published last: exact once Ingest (or OnRequest) has returned, and during
// ingestion up to one batch behind the curves.
//
// Files: this class (agent.cc) is the wiring: start-up, the event loop, the
// collectors' hand-over, and when and how the state file is saved and loaded. The
// analysis itself (engines, curves, windows, groups, canaries) is
// agent/runtime/analysis.h; what readers see is snapshot.h; /metrics is
// exposition.h; the HTTP routes and the JSON API are api_routes.h; the state
// file's format is state_file.h.
#ifndef KVWATCH_AGENT_AGENT_H_
#define KVWATCH_AGENT_AGENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "agent/runtime/alert_runner.h"
#include "agent/runtime/analysis.h"
#include "agent/runtime/curve_history.h"
#include "agent/runtime/hybrid_analysis.h"
#include "agent/runtime/snapshot.h"
#include "agent/runtime/state_file.h"
#include "agent/web/http_server.h"
#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "collectors/collector.h"
#include "config/agent_config.h"
#include "curve/group_accounting.h"
#include "curve/policy_canaries.h"
#include "curve/request.h"
#include "curve/stack_distance.h"

namespace kvwatch::agent {

// One curve window: its name as configured ("5m") and its length (curve.windows).
using WindowSpec = curve::Window;

// Everything the agent needs, resolved from the config (BuildAgentOptions,
// agent_command.h). The defaults of the scalars are the config's (one definition,
// in config/agent_config.h, where the key table's are checked against), so an
// AgentOptions built in code (tests) runs as an empty config file would.
struct AgentOptions {
  std::string replica;
  curve::EngineOptions engine = config::ToEngineOptions(config::EngineSettings{});  // engine.*
  double coverage_share = config::EngineSettings{}.coverage_share;
  // Spatial sampling (engine.sample_rate, engine.sample_max_pages): sampled when
  // sample_rate < 1 or sample_max_pages > 0.
  double sample_rate = config::EngineSettings{}.sample_rate;
  std::uint32_t sample_max_pages = config::EngineSettings{}.sample_max_pages;
  std::uint64_t page_tokens = curve::ReportOptions{}.page_tokens;  // page_tokens: the config's default is curve's
  std::optional<double> bytes_per_token;                           // per GPU rank
  std::optional<std::string> model_name;
  // The model's KV cache groups when it is hybrid (agent/runtime/hybrid_analysis.h):
  // the agent then runs the hybrid curve beside the dense one; nullopt for a
  // dense model.
  std::optional<HybridModel> hybrid;
  HttpServerOptions http;
  // web.config_file: re-read on SIGHUP (TLS files and settings, basic-auth users,
  // headers); empty: none, SIGHUP is logged and ignored.
  std::string web_config_file;
  int refresh_seconds = config::WebSettings{}.refresh_seconds;
  std::string state_path;  // empty: no persistence
  std::chrono::milliseconds state_interval{config::StateSettings{}.SaveInterval()};
  std::vector<std::unique_ptr<collectors::Collector>> collectors;
  // Eviction-policy canaries (curve.policies, with curve.engine_policy first);
  // nullopt when none is configured. Windows and capacities are filled in by the agent.
  std::optional<curve::CanaryOptions> canaries;
  // Tests only: runs whenever the canaries take a batch of queued requests, under
  // their lock (CanaryStage; after a hand-over, without the agent's mutex), so that
  // a test can hold a batch while it reads. Default: none.
  std::function<void()> canaries_settling;
  // The detectors and notifiers; nullopt when alerts.enabled is false.
  std::optional<AlertRunnerOptions> alerts;
  // Per-tenant and per-class accounting (tenants.*); ignored when the engine samples.
  curve::TenantOptions tenants;
  // The curve section as parsed (config/agent_config.h): windows ascending, the
  // targets, capacities (the replica's real cache sizes), the knee settings; its
  // policy names are resolved into `canaries` above. Last, because the member's
  // name hides the curve namespace below it.
  config::CurveSettings curve;
};

class Agent : public collectors::RequestSink {
 public:
  static base::Result<std::unique_ptr<Agent>> Create(AgentOptions options);
  ~Agent() override;

  // Starts HTTP and runs the event loop until Stop() or SIGINT/SIGTERM; then
  // checkpoints. SIGHUP reloads the web config (ReloadWebConfig) and the loop
  // goes on. Returns the process exit code.
  int Run();
  // Asks Run() to return (any thread).
  void Stop();

  // RequestSink: one request (any thread; takes mu_). The loop hands the
  // collectors' requests over in batches (Ingest).
  void OnRequest(const curve::Request& request) override EXCLUDES(mu_);

  // For tests and the HTTP handlers.
  std::string RenderMetrics() EXCLUDES(mu_);
  std::string RenderCurveJson(const std::string& window) EXCLUDES(mu_);  // empty: unknown window
  // GET /api/v1/groups (agent/render/api_json.h); empty: unknown window or tenants off.
  std::string RenderGroupsJson(const std::string& window) EXCLUDES(mu_);
  // GET /api/v1/history (agent/render/api_json.h): the window's knee and working sets
  // over time (agent/runtime/curve_history.h); empty: unknown window.
  std::string RenderHistoryJson(const std::string& window) EXCLUDES(mu_);
  // Adds a sample of every window to the history at wall time `wall_s` (the loop
  // does every CurveHistory interval; tests may call it directly).
  void RecordHistory(double wall_s) EXCLUDES(mu_);
  int port() const;
  bool ready() const { return ready_.load(); }

  // Writes the state file now (loop thread, or before Run). Does nothing when
  // start-up turned saving off (the state file could not be set aside).
  base::Status SaveState() EXCLUDES(mu_);

  // What SIGHUP does (loop thread): re-reads web.config_file and applies it to
  // the HTTP server (HttpServer::ReloadWebConfig), or keeps the previous one when
  // it cannot be read or applied; without web.config_file, nothing. Logs either way.
  void ReloadWebConfig() EXCLUDES(mu_);

  // What the alert detectors see at `time`: requests, knee and working set of the
  // alert windows, the collectors' engine signals (any thread; takes mu_ for a
  // snapshot only).
  // REQUIRES: options.alerts set.
  alerts::AlertInputs AlertInputsAt(alerts::TimePoint time) EXCLUDES(mu_);
  // The alerting, or nullptr when alerts are disabled.
  AlertRunner* alert_runner() const { return alert_runner_.get(); }

 private:
  class BatchSink;

  explicit Agent(AgentOptions options);
  base::Status Init();
  // What every reader reads, copied under mu_: the window curves when `windows`,
  // the canaries' totals when `canaries`.
  AgentSnapshot TakeSnapshot(bool windows, bool canaries) const EXCLUDES(mu_, readers_mu_);
  // Runs requests through the analysis, yielding mu_ to waiting readers between
  // two requests, and the canaries through them without mu_.
  void Ingest(std::span<const curve::Request> requests) EXCLUDES(mu_);
  // Copies collector i's stats, signals and samples (loop thread, without mu_)
  // and publishes them for the scrapes (under mu_).
  void PublishCollector(std::size_t i) EXCLUDES(mu_);
  // At start-up, under mu_ (no other thread runs yet): restores the analysis, the
  // collectors' positions and (kept for Init) the alert state, or sets the file
  // aside and starts fresh.
  void LoadState() REQUIRES(mu_);

  AgentOptions options_;

  // Readers (TakeSnapshot on an HTTP or notifier thread) waiting for mu_. Ingest
  // checks it between two requests and hands mu_ over, so a scrape waits for one
  // request, not for a whole batch (256 requests: 10 ms and more with canaries).
  mutable std::atomic<int> readers_waiting_{0};
  // Guards the state below (not the collectors: the loop owns them). Held
  // exclusively to change it (the loop's ingestion and clock, a publication);
  // shared to read it: by TakeSnapshot, and by SaveState while it serializes the
  // analysis, so a save (tens of ms with a full engine) never holds up a scrape.
  mutable base::SharedMutex mu_;
  // Serializes the readers among themselves (taken before mu_): reading a window
  // refreshes its cached merge (curve/sliding_windows.h).
  mutable base::Mutex readers_mu_;
  // Engines, curves, windows, groups, canaries (analysis.h). The pointer is set
  // once by Init; what it points to is read and written under mu_ only.
  std::unique_ptr<Analysis> analysis_ PT_GUARDED_BY(mu_);
  // The analysis's canaries (null without curve.policies), set once by Init: they
  // have their own locks, taken after mu_ when both are held.
  CanaryStage* canaries_ = nullptr;
  std::vector<std::uint8_t> restored_alerts_ GUARDED_BY(mu_);  // saved alert state, until Init restores it
  // Per collector, its stats, signals and samples as of its last poll.
  std::vector<CollectorCopy> published_ GUARDED_BY(mu_);
  // Per collector (loop thread only): the last KV cache group mismatch logged
  // (HybridGroupMismatch), so that each is logged once.
  std::vector<std::string> group_mismatch_logged_;
  StateCounters state_ GUARDED_BY(mu_);

  std::unique_ptr<AlertRunner> alert_runner_;  // null when alerts are disabled
  std::unique_ptr<CurveHistory> history_;      // the windows over time (its own lock)
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<StateLock> state_lock_;  // held from Init to destruction when state_path is set
  std::atomic<bool> ready_{false};
  std::atomic<bool> stop_{false};
};

// Writes "kvwatch agent: MESSAGE" to stderr (the agent's log).
void AgentLog(const std::string& message);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_AGENT_H_
