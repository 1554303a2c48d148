#include "agent/runtime/agent.h"

// Boost 1.74 Asio with g++ 12 in C++20 needs <utility> first (dependencies.md).
#include <algorithm>
#include <boost/asio.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <utility>

#include "agent/runtime/api_routes.h"
#include "agent/runtime/exposition.h"
#include "agent/runtime/state_file.h"
#include "config/web_config.h"

namespace kvwatch::agent {

using collectors::WallNow;

void AgentLog(const std::string& message) { std::fprintf(stderr, "kvwatch agent: %s\n", message.c_str()); }

base::Result<std::unique_ptr<Agent>> Agent::Create(AgentOptions options) {
  std::unique_ptr<Agent> agent(new Agent(std::move(options)));
  if (base::Status s = agent->Init(); !s.ok()) return base::Result<std::unique_ptr<Agent>>::Error(s.error());
  return agent;
}

Agent::Agent(AgentOptions options) : options_(std::move(options)) {}

Agent::~Agent() {
  if (http_) http_->Stop();
}

base::Status Agent::Init() {
  // Before anything reads the state: a second agent on the same state.path would
  // restore the same positions and overwrite the first one's saves.
  if (!options_.state_path.empty()) {
    auto lock = StateLock::Acquire(options_.state_path);
    if (!lock.ok()) return base::Status::Error("state.path: " + lock.error());
    state_lock_ = std::move(lock).value();
  }
  auto analysis = Analysis::Create(options_);
  if (!analysis.ok()) return base::Status::Error(analysis.error());
  // No other thread runs yet; the lock keeps the analysis honest.
  base::WriterLock lock(mu_);
  analysis_ = std::move(analysis).value();
  canaries_ = analysis_->canaries();
  LoadState();
  for (const auto& c : options_.collectors) published_.push_back(CollectorCopy::Of(*c));

  if (options_.alerts) {
    auto runner = AlertRunner::Create(*options_.alerts);
    if (!runner.ok()) return base::Status::Error(runner.error());
    alert_runner_ = std::move(runner).value();
    // The alert state restored with the rest (LoadState kept its bytes): pending
    // and firing alerts, the detectors' baselines, what was already sent.
    if (!restored_alerts_.empty() && !alert_runner_->RestoreState(restored_alerts_)) {
      AgentLog("state: the saved alert state does not fit the configured alerts; alerts start fresh");
    }
  }
  restored_alerts_.clear();
  history_ = std::make_unique<CurveHistory>(
      options_.curve.windows.size(), HistoryTargets(options_.curve.page_hit_targets, options_.curve.coverage_targets));
  auto server = HttpServer::Create(options_.http);
  if (!server.ok()) return base::Status::Error(server.error());
  http_ = std::move(server).value();
  RegisterRoutes(*http_, *this, options_);
  return base::Status::Ok();
}

// --- Ingestion ------------------------------------------------------------------------

void Agent::OnRequest(const curve::Request& request) {
  {
    base::WriterLock lock(mu_);
    analysis_->Ingest(request, WallNow());
  }
  if (canaries_) canaries_->Settle();
}

void Agent::Ingest(std::span<const curve::Request> requests) {
  std::size_t i = 0;
  while (i < requests.size()) {
    bool canaries_due = false;
    {
      // At least one request per turn, so a stream of readers cannot stall ingestion.
      base::WriterLock lock(mu_);
      do {
        analysis_->Ingest(requests[i++], WallNow());
        canaries_due = canaries_ && canaries_->Due();
      } while (i < requests.size() && !canaries_due && readers_waiting_.load(std::memory_order_relaxed) == 0);
    }
    // The canaries take the queue without mu_ (the readers read what they last
    // published), after the whole hand-over or when it is full.
    if (canaries_ && (canaries_due || i == requests.size())) canaries_->Settle();
    if (i == requests.size()) break;
    // A reader waits for mu_: let it take its snapshot before going on (a mutex
    // is not fair: relocking at once could starve it for the whole batch).
    for (int n = readers_waiting_.load(); n > 0; n = readers_waiting_.load()) readers_waiting_.wait(n);
  }
}

// Collects a collector's requests while it polls (no lock) and hands them to the
// agent kBatch at a time, so mu_ is taken once per batch, never across I/O.
class Agent::BatchSink : public collectors::RequestSink {
 public:
  explicit BatchSink(Agent& agent) : agent_(agent) {}
  void OnRequest(const curve::Request& request) override {
    if (size_ < batch_.size()) {
      batch_[size_] = request;  // reuses the page vector's storage
    } else {
      batch_.push_back(request);
    }
    if (++size_ == kBatch) Flush();
  }
  void Flush() {
    if (size_ > 0) agent_.Ingest(std::span<const curve::Request>(batch_.data(), size_));
    size_ = 0;
  }

 private:
  static constexpr std::size_t kBatch = 256;
  Agent& agent_;
  std::vector<curve::Request> batch_;
  std::size_t size_ = 0;
};

void Agent::PublishCollector(std::size_t i) {
  CollectorCopy copy = CollectorCopy::Of(*options_.collectors[i]);
  if (const std::string why =
          HybridGroupMismatch(options_.hybrid ? &*options_.hybrid : nullptr, copy.signals.kv_groups);
      !why.empty()) {
    group_mismatch_logged_.resize(options_.collectors.size());
    if (why != group_mismatch_logged_[i]) {
      AgentLog(copy.name + ": the KV cache groups the engine announces do not match the configured model: " + why +
               " (kvwatch_hybrid_model_mismatch)");
      group_mismatch_logged_[i] = why;
    }
  }
  base::WriterLock lock(mu_);
  published_[i] = std::move(copy);
}

// --- Event loop -----------------------------------------------------------------------

int Agent::Run() {
  // The signals are caught before the agent listens: a SIGHUP sent once the
  // agent serves never meets the default action (which ends the process
  // silently, and systemd would count it as a clean exit).
  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
  std::function<void()> wait_signal = [&]() {
    signals.async_wait([&](const boost::system::error_code& ec, int signal) {
      if (ec) return;
      if (signal == SIGHUP) {
        ReloadWebConfig();  // on the loop's thread, between two passes (never during a save)
        wait_signal();
        return;
      }
      AgentLog(std::string("stopping on ") + (signal == SIGTERM ? "SIGTERM" : "SIGINT"));
      stop_ = true;
    });
  };
  wait_signal();
  if (base::Status s = http_->Start(); !s.ok()) {
    AgentLog(s.error());
    return 1;
  }
  AgentLog("listening on " + http_->url());

  ready_ = true;
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> next_poll(options_.collectors.size(), Clock::now());
  Clock::time_point next_save = Clock::now() + options_.state_interval;
  Clock::time_point next_early_save = Clock::now();
  bool first_pass = true;
  Clock::time_point next_alerts = Clock::now();
  if (alert_runner_) next_alerts += alert_runner_->options().alerter.evaluation_interval;
  boost::asio::steady_timer tick(io);
  BatchSink sink(*this);
  constexpr auto kTick = std::chrono::milliseconds(50);
  std::function<void()> loop = [&]() {
    if (stop_) {
      io.stop();
      return;
    }
    const Clock::time_point now = Clock::now();
    const double wall = WallNow();
    // Before the polls: from the first tick on the canaries' memory is counted here
    // (without mu_), never by a reader.
    if (canaries_) canaries_->RecountMemory(wall);
    // The collectors read their sources without mu_; the sink takes it per batch.
    for (std::size_t i = 0; i < options_.collectors.size(); ++i) {
      if (now < next_poll[i]) continue;
      options_.collectors[i]->Poll(sink, wall);
      sink.Flush();
      PublishCollector(i);
      next_poll[i] = now + options_.collectors[i]->poll_interval();
    }
    {
      base::WriterLock lock(mu_);
      // The window clock starts with the first record: records may carry their
      // own time base (Mooncake's milliseconds since the trace began), which the
      // wall clock must not overtake before any arrives.
      analysis_->Advance(wall);
    }
    if (history_->Due(wall)) RecordHistory(wall);
    if (alert_runner_ && now >= next_alerts) {
      // Errors are logged by the runner; evaluation never blocks on notifiers.
      (void)alert_runner_->Evaluate(AlertInputsAt(alert_runner_->Now()));
      next_alerts = now + alert_runner_->options().alerter.evaluation_interval;
    }
    if (!options_.state_path.empty()) {
      // Besides every state.interval: once right after start-up (the restored
      // positions resolved against the files as they are now, so back-to-back
      // restarts do not all fall back to one old save), and soon after a collector
      // saw a rotation or a publisher restart. Early saves are rate-limited so they
      // cannot starve ingestion: at least 1 s apart, and at most a fifth of the time.
      bool wants = first_pass;
      for (const auto& c : options_.collectors) wants = wants || c->WantsSave();
      if (now >= next_save || (wants && now >= next_early_save)) {
        if (base::Status s = SaveState(); !s.ok()) AgentLog(s.error());
        const Clock::time_point done = Clock::now();
        next_save = done + options_.state_interval;
        next_early_save =
            done + std::max<Clock::duration>(std::chrono::seconds(1),
                                             std::chrono::duration_cast<Clock::duration>(4 * (done - now)));
      }
    }
    first_pass = false;
    tick.expires_after(kTick);
    tick.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) loop();
    });
  };
  loop();
  io.run();

  ready_ = false;
  if (alert_runner_) alert_runner_->Stop();
  if (base::Status s = SaveState(); !s.ok()) AgentLog(s.error());
  http_->Stop();
  return 0;
}

void Agent::Stop() { stop_ = true; }

void Agent::ReloadWebConfig() {
  if (options_.web_config_file.empty()) {
    AgentLog("SIGHUP: no web.config_file to reload; ignored (the agent's config is read at start-up only)");
    return;
  }
  auto web = config::ReadWebConfigFile(options_.web_config_file);
  base::Status applied = web.ok() ? http_->ReloadWebConfig(web.value()) : base::Status::Error(web.error());
  {
    base::WriterLock lock(mu_);
    state_.web_reload_ok = applied.ok();
  }
  if (applied.ok()) {
    AgentLog("SIGHUP: reloaded web.config_file " + options_.web_config_file +
             " (TLS certificate, key, client CA and settings, basic_auth_users, headers)");
  } else {
    AgentLog("SIGHUP: web.config_file not reloaded, the previous one stays in force: " + applied.error());
  }
}

int Agent::port() const { return http_ ? http_->port() : 0; }

// --- State ----------------------------------------------------------------------------

base::Status Agent::SaveState() {
  if (options_.state_path.empty()) return base::Status::Ok();
  {
    base::ReaderLock lock(mu_);
    if (!state_.saving) return base::Status::Ok();  // said once, at start-up (LoadState)
  }
  const auto started = std::chrono::steady_clock::now();
  StateParts parts;
  {
    // Shared: the scrapes take their snapshots while the analysis is written out
    // (both only read it; ingestion, which changes it, waits).
    base::ReaderLock lock(mu_);
    analysis_->Serialize(&parts);
  }
  if (alert_runner_) alert_runner_->AppendState(&parts.alerts);  // under the runner's own lock
  // The collectors' positions, taken on the loop thread between two polls: every
  // request they handed on is in the curves copied above, and none other.
  for (const auto& c : options_.collectors) {
    StateBytes bytes;
    c->AppendState(&bytes);
    parts.collectors.emplace_back(c->name(), std::move(bytes));
  }
  base::Status s = WriteStateFile(options_.state_path, parts);  // I/O outside the lock
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  {
    base::WriterLock lock(mu_);
    ++(s.ok() ? state_.saves : state_.errors);
    state_.last_save_seconds = seconds;
  }
  if (!s.ok()) return base::Status::Error("state: " + s.error());
  return base::Status::Ok();
}

void Agent::LoadState() {
  if (options_.state_path.empty()) return;
  StateBounds bounds;
  bounds.max_pages = options_.engine.max_pages;
  bounds.remembered_evictions = options_.engine.remembered_evictions;
  if (options_.canaries) {
    for (std::uint64_t c : options_.curve.capacities) bounds.canary_pages += c * options_.canaries->policies.size();
  }
  bounds.collectors = options_.collectors.size();
  if (options_.hybrid) bounds.hybrid_items = HybridStateItems(*options_.hybrid);
  LoadedState loaded = ReadStateFile(options_.state_path, StateByteLimit(bounds));
  if (loaded.outcome == LoadedState::Outcome::kNone) {
    state_.restore_result = "none";
    return;
  }
  // A state that cannot be restored whole is set aside (kept for inspection, never
  // read again) and the agent starts fresh: a partial restore would count some
  // records twice or not at all.
  // A file that cannot be set aside (immutable, a read-only folder) cannot be
  // replaced by a save either: the agent then runs without saving, says so, and
  // leaves the file as it is, rather than failing every save into it.
  auto reject = [&](const std::string& why) NO_THREAD_SAFETY_ANALYSIS {  // LoadState holds mu_
    const std::string suffix = ".rejected-" + std::to_string(static_cast<long long>(WallNow()));
    std::string aside, failed;
    for (const std::string& file : {options_.state_path, options_.state_path + ".tmp"}) {
      std::error_code ec;
      if (std::filesystem::symlink_status(file, ec).type() == std::filesystem::file_type::not_found) continue;
      std::filesystem::rename(file, file + suffix, ec);
      if (ec) {
        failed += (failed.empty() ? "" : "; ") + file + " cannot be set aside (" + ec.message() + ")";
      } else {
        aside += (aside.empty() ? "" : ", ") + file + suffix;
      }
    }
    std::string what = "state " + loaded.from + " not restored (" + why + ")";
    if (!aside.empty()) what += "; set aside as " + aside;
    if (!failed.empty()) {
      state_.saving = false;
      what += "; " + failed +
              "; the agent runs WITHOUT SAVING its state (kvwatch_state_saving 0) until the file "
              "is moved away and the agent restarted";
    }
    AgentLog(what + "; starting fresh");
    analysis_->Reset();
    restored_alerts_.clear();
    state_.restore_result = "rejected";
  };
  if (loaded.outcome == LoadedState::Outcome::kRejected) return reject(loaded.error);
  const StateParts& parts = loaded.parts;
  if (const std::string why = analysis_->Restore(parts); !why.empty()) return reject(why);
  // The alerts are restored when their settings are unchanged; otherwise they
  // alone start fresh (Init).
  restored_alerts_ = parts.alerts;
  // Collectors last: a collector whose part is missing (added since) starts as on
  // a first start; a part whose collector is gone is dropped with a log line.
  for (const auto& c : options_.collectors) {
    const StateBytes* bytes = parts.Collector(c->name());
    if (bytes == nullptr) {
      AgentLog("state: collector " + c->name() + " has no saved positions (new since the last save)");
      continue;
    }
    if (base::Status cs = c->RestoreState(*bytes); !cs.ok()) {
      return reject("collector " + c->name() + ": " + cs.error());
    }
  }
  for (const auto& saved : parts.collectors) {
    const bool known = std::any_of(options_.collectors.begin(), options_.collectors.end(),
                                   [&](const auto& c) { return c->name() == saved.first; });
    if (!known)
      AgentLog("state: collector " + saved.first + " is no longer configured; its saved positions are dropped");
  }
  state_.restore_result = "restored";
  AgentLog("state restored from " + loaded.from + ": " + std::to_string(analysis_->requests()) + " requests, " +
           std::to_string(analysis_->tracked_pages()) + " tracked pages");
  analysis_->RepairClock(WallNow());
}

// --- Readers --------------------------------------------------------------------------

AgentSnapshot Agent::TakeSnapshot(bool windows, bool canaries) const {
  AgentSnapshot s;
  // One reader at a time: a snapshot refreshes the curves' cached window merges
  // (SlidingWindows), which SaveState's serialization never reads.
  base::MutexLock one_reader(readers_mu_);
  readers_waiting_.fetch_add(1);  // Ingest hands mu_ over between two requests
  base::ReaderLock lock(mu_);
  readers_waiting_.fetch_sub(1);
  readers_waiting_.notify_all();
  s.analysis = analysis_->TakeSnapshot(windows, canaries);
  s.collectors = published_;
  s.state = state_;
  return s;
}

std::string Agent::RenderMetrics() {
  // Copy under the lock; the reports, knees and text are built outside it.
  return RenderMetricsText(options_, TakeSnapshot(/*windows=*/true, /*canaries=*/true), alert_runner_.get());
}

alerts::AlertInputs Agent::AlertInputsAt(alerts::TimePoint time) {
  return AlertInputsOf(options_, TakeSnapshot(/*windows=*/true, /*canaries=*/false), time);
}

std::string Agent::RenderCurveJson(const std::string& window) {
  const std::optional<std::size_t> i = WindowIndex(options_, window);
  if (!i) return {};
  return CurveJson(options_, TakeSnapshot(/*windows=*/true, /*canaries=*/true), *i);
}

std::string Agent::RenderGroupsJson(const std::string& window) {
  const std::optional<std::size_t> i = WindowIndex(options_, window);
  if (!i) return {};
  return GroupsJson(options_, TakeSnapshot(/*windows=*/true, /*canaries=*/false), *i);
}

}  // namespace kvwatch::agent
