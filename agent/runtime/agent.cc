#include "agent/runtime/agent.h"

// Boost 1.74 Asio with g++ 12 in C++20 needs <utility> first (dependencies.md).
#include <utility>

#include <boost/asio.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "agent/runtime/group_metrics.h"
#include "agent/runtime/metrics.h"
#include "agent/runtime/state_file.h"
#include "agent/runtime/version.h"
#include "agent/web/api_json.h"
#include "base/json_writer.h"
#include "agent/web/text_format.h"
#include "agent/web/web_page.h"
#include "base/byte_io.h"

namespace kvwatch::agent {

using collectors::WallNow;
namespace {

void Log(const std::string& message) { std::fprintf(stderr, "kvwatch agent: %s\n", message.c_str()); }

bool Sampled(const AgentOptions& o) { return o.sample_rate < 1.0 || o.sample_max_pages > 0; }
bool TenantsOn(const AgentOptions& o) { return o.tenants.enabled && !Sampled(o); }

// The tenant and class accounting's options from the agent's.
curve::GroupAccountingOptions GroupOptions(const AgentOptions& o, const std::vector<std::uint64_t>* bounds) {
  curve::GroupAccountingOptions go;
  go.tenants = o.tenants;
  go.engine = o.engine;
  go.bounds = bounds;
  go.coverage_share = o.coverage_share;
  go.capacities = o.curve.capacities;  // sorted, distinct, 1..engine.max_pages (config/)
  go.bytes_per_token = o.bytes_per_token.value_or(0);
  go.windows_s = o.curve.windows.Seconds();
  go.classifier_max_chains = std::max<std::size_t>(o.engine.max_pages, 1024);
  return go;
}

// The exact engine's options: with tenants, the group decomposition.
curve::EngineOptions ExactEngineOptions(const AgentOptions& o) {
  return TenantsOn(o) ? curve::GroupAccounting::SharedEngineOptions(GroupOptions(o, nullptr)) : o.engine;
}

}  // namespace

base::Result<std::unique_ptr<Agent>> Agent::Create(AgentOptions options) {
  std::unique_ptr<Agent> agent(new Agent(std::move(options)));
  if (base::Status s = agent->Init(); !s.ok()) return base::Result<std::unique_ptr<Agent>>::Error(s.error());
  return agent;
}

Agent::Agent(AgentOptions options) : options_(std::move(options)), engine_(ExactEngineOptions(options_)) {
  if (Sampled(options_)) {
    sampled_ = std::make_unique<curve::SampledEngine>(options_.engine, options_.sample_rate, options_.sample_max_pages);
  }
}

curve::BucketedCurve Agent::LifetimeCurve() const {
  curve::BucketedCurve c = lifetime_;
  // SHARDS-adj: every page reference, sampled or not, stands for kWeightUnit;
  // and so does every request.
  if (sampled_) {
    c.AdjustReferences(all_page_refs_ * curve::SampledEngine::kWeightUnit);
    c.NormalizeRequests(all_requests_ * curve::SampledEngine::kWeightUnit);
  }
  return c;
}

Agent::~Agent() {
  if (http_) http_->Stop();
}

base::Status Agent::Init() {
  // Bucket bounds: log-spaced to the tracked range, plus the replica's real cache
  // sizes so the hit ratio there is exact.
  bounds_ = curve::LogBucketBounds(options_.engine.max_pages, options_.curve.buckets_per_octave);
  bounds_.insert(bounds_.end(), options_.curve.capacities.begin(), options_.curve.capacities.end());
  std::sort(bounds_.begin(), bounds_.end());
  bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
  // No other thread runs yet; the lock keeps the analysis honest.
  base::MutexLock lock(mu_);
  lifetime_ = curve::BucketedCurve(&bounds_, options_.coverage_share);
  const std::vector<double> seconds = options_.curve.windows.Seconds();
  if (TenantsOn(options_)) {
    if (base::Status s = options_.tenants.Validate("tenants."); !s.ok()) return s;
    groups_ = std::make_unique<curve::GroupAccounting>(GroupOptions(options_, &bounds_));
  }
  windows_ = std::make_unique<curve::WindowedCurves>(seconds, &bounds_, options_.coverage_share, sampled_ != nullptr);
  if (options_.canaries) {
    curve::CanaryOptions co = *options_.canaries;
    co.windows_s = seconds;
    co.capacities = options_.curve.capacities;
    co.touch_order = options_.engine.touch_order;
    co.coverage_share = options_.coverage_share;
    auto canaries = curve::PolicyCanaries::Create(co);
    if (!canaries.ok()) return base::Status::Error("curve.policies: " + canaries.error());
    canaries_ = std::move(canaries).value();
    canary_options_ = co;
  }
  start_wall_s_ = WallNow();
  LoadState();
  for (const auto& c : options_.collectors) published_.push_back(CollectorCopy::Of(*c));

  if (options_.alerts) {
    auto runner = AlertRunner::Create(*options_.alerts);
    if (!runner.ok()) return base::Status::Error(runner.error());
    alert_runner_ = std::move(runner).value();
    // The alert state restored with the rest (LoadState kept its bytes): pending
    // and firing alerts, the detectors' baselines, what was already sent.
    if (!restored_alerts_.empty() && !alert_runner_->RestoreState(restored_alerts_)) {
      Log("state: the saved alert state does not fit the configured alerts; alerts start fresh");
    }
  }
  restored_alerts_.clear();
  auto server = HttpServer::Create(options_.http);
  if (!server.ok()) return base::Status::Error(server.error());
  http_ = std::move(server).value();
  RegisterRoutes();
  return base::Status::Ok();
}

// --- Ingestion ------------------------------------------------------------------------

void Agent::OnRequest(const curve::Request& request) {
  base::MutexLock lock(mu_);
  IngestLocked(request);
}

void Agent::Ingest(std::span<const curve::Request> requests) {
  base::MutexLock lock(mu_);
  for (const curve::Request& r : requests) IngestLocked(r);
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

CollectorCopy CollectorCopy::Of(const collectors::Collector& c) {
  CollectorCopy copy{c.name(), c.stats(), c.engine_signals(), {}};
  c.AppendSamples(&copy.samples);
  return copy;
}

void Agent::PublishCollector(std::size_t i) {
  CollectorCopy copy = CollectorCopy::Of(*options_.collectors[i]);
  base::MutexLock lock(mu_);
  published_[i] = std::move(copy);
}

void Agent::IngestLocked(const curve::Request& request) {
  const double wall = WallNow();
  // A timestamp beyond wall + curve.max_clock_skew never drives the clock (agent.h, "Clock").
  const bool timed = request.has_timestamp() && collectors::CheckTimestamp(request.timestamp_s, wall,
                                                                           options_.curve.max_clock_skew_s) ==
                                                   collectors::TimestampVerdict::kOk;
  const double t = timed ? request.timestamp_s : ClockNow(wall);
  std::uint64_t weight = 1;
  curve::GroupTags tags{};
  if (sampled_) {
    all_page_refs_ += request.pages.size();
    ++all_requests_;
    windows_->AddExpected(request.pages.size() * curve::SampledEngine::kWeightUnit, curve::SampledEngine::kWeightUnit,
                          t);
    sampled_->Process(request.pages, &outcome_);
    weight = sampled_->weight();
    // A request with no sampled page says nothing about its requirement (as in
    // replay); it still moves the window clock, and the policy canaries, which
    // simulate every page, still see it.
    if (outcome_.size() == 0) {
      windows_->Advance(t);
      if (canaries_) canaries_->Add(request, 0, t);  // unlimited hits unknown: coverage not exported
      last_record_time_ = windows_->now();
      last_record_wall_ = wall;
      return;
    }
  } else if (groups_) {
    tags = groups_->Classify(request);
    engine_.Process(request.pages, tags, &outcome_);
  } else {
    engine_.Process(request.pages, &outcome_);
  }
  lifetime_.Add(outcome_, weight);
  // The _sum of the histograms: in sampled mode, in full-stream units.
  const double unit = sampled_ ? static_cast<double>(curve::SampledEngine::kWeightUnit) : 1.0;
  const bool sampled = sampled_ != nullptr;
  auto add_sum = [&](std::uint64_t* sum, std::uint32_t c) {
    *sum += sampled ? static_cast<std::uint64_t>(std::llround(static_cast<double>(c) * static_cast<double>(weight) / unit))
                     : c;
  };
  for (std::size_t i = 0; i < outcome_.size(); ++i) {
    const std::uint32_t c = outcome_.hit_capacity(i);
    if (c == 0 || c > options_.engine.max_pages) break;
    add_sum(&hit_capacity_sum_, c);
  }
  const std::uint32_t r = outcome_.Requirement(options_.coverage_share);
  if (r != curve::kBeyondTracked) add_sum(&required_capacity_sum_, r);
  windows_->Add(outcome_, t, weight);
  if (groups_) groups_->Add(request, tags, outcome_, t);
  // A sampled engine does not know the request's unlimited hits: the canaries'
  // coverage is then not exported (their page hits are exact either way).
  if (canaries_) canaries_->Add(request, sampled_ ? 0 : outcome_.unlimited_hits, t);
  last_record_time_ = windows_->now();
  last_record_wall_ = wall;
}

double Agent::ClockNow(double wall_now_s) const {
  if (last_record_time_ < 0) return wall_now_s;
  return last_record_time_ + std::max(0.0, wall_now_s - last_record_wall_);
}

// --- Event loop -----------------------------------------------------------------------

int Agent::Run() {
  if (base::Status s = http_->Start(); !s.ok()) {
    Log(s.error());
    return 1;
  }
  Log("listening on " + http_->url());
  ready_ = true;

  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (!ec) Log(std::string("stopping on ") + (signal == SIGTERM ? "SIGTERM" : "SIGINT"));
    stop_ = true;
  });
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
    // The collectors read their sources without mu_; the sink takes it per batch.
    for (std::size_t i = 0; i < options_.collectors.size(); ++i) {
      if (now < next_poll[i]) continue;
      options_.collectors[i]->Poll(sink, wall);
      sink.Flush();
      PublishCollector(i);
      next_poll[i] = now + options_.collectors[i]->poll_interval();
    }
    {
      base::MutexLock lock(mu_);
      // The window clock starts with the first record: records may carry their
      // own time base (Mooncake's milliseconds since the trace began), which the
      // wall clock must not overtake before any arrives.
      if (last_record_time_ >= 0) {
        windows_->Advance(ClockNow(wall));
        if (canaries_) canaries_->Advance(ClockNow(wall));
        if (groups_) groups_->Advance(ClockNow(wall));
      }
    }
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
        if (base::Status s = SaveState(); !s.ok()) Log(s.error());
        const Clock::time_point done = Clock::now();
        next_save = done + options_.state_interval;
        next_early_save = done + std::max<Clock::duration>(
                                     std::chrono::seconds(1),
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
  if (base::Status s = SaveState(); !s.ok()) Log(s.error());
  http_->Stop();
  return 0;
}

void Agent::Stop() { stop_ = true; }

int Agent::port() const { return http_ ? http_->port() : 0; }

// --- State ----------------------------------------------------------------------------

std::string Agent::ConfigFingerprint() const {
  // What must match for a saved state to mean the same thing.
  std::ostringstream f;
  f << "max_pages=" << options_.engine.max_pages
    << " touch=" << (options_.engine.touch_order == curve::TouchOrder::kTailFirst ? "tail" : "head")
    << " share=" << options_.coverage_share << " bounds=" << bounds_.size() << ":" << bounds_.back()
    << " windows=";
  for (const WindowSpec& w : options_.curve.windows) f << w.seconds << ",";
  // Only with tenants: the engine then keeps page owners, and the accounting's layout must match.
  if (groups_) {
    f << " tenants=" << options_.tenants.top_k << "/" << options_.tenants.class_top_k << "/"
      << (options_.tenants.isolated ? "isolated" : "shared") << " group_capacities=";
    for (std::uint64_t c : groups_->options().capacities) f << c << ",";
  }
  // Only when sampled, so exact-mode state files stay as they were.
  if (sampled_) {
    f << " sample_rate=" << std::setprecision(17) << options_.sample_rate
      << " sample_max_pages=" << options_.sample_max_pages;
  }
  return f.str();
}

base::Status Agent::SaveState() {
  if (options_.state_path.empty()) return base::Status::Ok();
  const auto started = std::chrono::steady_clock::now();
  StateParts parts;
  {
    base::MutexLock lock(mu_);
    parts.fingerprint = ConfigFingerprint();
    parts.engine = sampled_ ? sampled_->Serialize() : engine_.Serialize();
    lifetime_.Serialize(&parts.curves);
    base::AppendPod(&parts.curves, hit_capacity_sum_);
    base::AppendPod(&parts.curves, required_capacity_sum_);
    windows_->Serialize(&parts.curves);
    base::AppendPod(&parts.curves, last_record_time_);
    base::AppendPod(&parts.curves, last_record_wall_);
    if (sampled_) {
      base::AppendPod(&parts.curves, all_page_refs_);
      base::AppendPod(&parts.curves, all_requests_);
    }
    if (groups_) groups_->Serialize(&parts.groups);
    if (canaries_) canaries_->Serialize(&parts.canaries);
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
    base::MutexLock lock(mu_);
    ++(s.ok() ? state_saves_ : state_errors_);
    last_save_seconds_ = seconds;
  }
  if (!s.ok()) return base::Status::Error("state: " + s.error());
  return base::Status::Ok();
}

void Agent::ResetState() {
  engine_.Clear();
  if (sampled_) sampled_->Clear();
  all_page_refs_ = all_requests_ = 0;
  lifetime_.Clear();
  ResetWindows();
  hit_capacity_sum_ = required_capacity_sum_ = 0;
  if (groups_) groups_->Clear();
  ResetCanaries();
  restored_alerts_.clear();
}

void Agent::ResetWindows() {
  windows_ = std::make_unique<curve::WindowedCurves>(options_.curve.windows.Seconds(), &bounds_, options_.coverage_share, sampled_ != nullptr);
  if (groups_) groups_->ResetWindows();
  last_record_time_ = -1;
  last_record_wall_ = 0;
}

void Agent::LoadState() {
  if (options_.state_path.empty()) return;
  LoadedState loaded = ReadStateFile(options_.state_path);
  if (loaded.outcome == LoadedState::Outcome::kNone) {
    state_restore_result_ = "none";
    return;
  }
  // A state that cannot be restored whole is set aside (kept for inspection, never
  // read again) and the agent starts fresh: a partial restore would count some
  // records twice or not at all.
  auto reject = [&](const std::string& why) NO_THREAD_SAFETY_ANALYSIS {  // LoadState holds mu_
    const std::string suffix = ".rejected-" + std::to_string(static_cast<long long>(WallNow()));
    std::string aside;
    for (const std::string& file : {options_.state_path, options_.state_path + ".tmp"}) {
      std::error_code ec;
      if (!std::filesystem::exists(file, ec)) continue;
      std::filesystem::rename(file, file + suffix, ec);
      aside += (aside.empty() ? "" : ", ") + file + suffix;
    }
    Log("state " + loaded.from + " not restored (" + why + "); set aside as " + aside + "; starting fresh");
    ResetState();
    state_restore_result_ = "rejected";
  };
  if (loaded.outcome == LoadedState::Outcome::kRejected) return reject(loaded.error);
  const StateParts& parts = loaded.parts;
  if (parts.fingerprint != ConfigFingerprint()) return reject("saved with other settings: " + parts.fingerprint);
  if (!(sampled_ ? sampled_->Deserialize(parts.engine) : engine_.Deserialize(parts.engine))) {
    return reject("engine state");
  }
  std::span<const std::uint8_t> in(parts.curves);
  if (!lifetime_.Deserialize(&in) || !base::ReadPod(&in, &hit_capacity_sum_) ||
      !base::ReadPod(&in, &required_capacity_sum_) || !windows_->Deserialize(&in) ||
      !base::ReadPod(&in, &last_record_time_) || !base::ReadPod(&in, &last_record_wall_) ||
      (sampled_ && (!base::ReadPod(&in, &all_page_refs_) || !base::ReadPod(&in, &all_requests_))) || !in.empty()) {
    return reject("curves");
  }
  if (groups_) {
    std::span<const std::uint8_t> g(parts.groups);
    if (!groups_->Deserialize(&g) || !g.empty()) return reject("tenant and class groups");
  }
  // The canaries and the alerts are restored when their settings are unchanged;
  // otherwise they alone start fresh (their numbers are not the curves').
  if (canaries_ && !parts.canaries.empty()) {
    std::span<const std::uint8_t> c(parts.canaries);
    if (!canaries_->Deserialize(&c) || !c.empty()) {
      Log("state: the saved policy canaries do not fit curve.policies as configured now; the canaries start cold");
      ResetCanaries();
    }
  }
  restored_alerts_ = parts.alerts;  // restored once the alert runner exists (Init)
  // Collectors last: a collector whose part is missing (added since) starts as on
  // a first start; a part whose collector is gone is dropped with a log line.
  for (const auto& c : options_.collectors) {
    const StateBytes* bytes = parts.Collector(c->name());
    if (bytes == nullptr) {
      Log("state: collector " + c->name() + " has no saved positions (new since the last save)");
      continue;
    }
    if (base::Status cs = c->RestoreState(*bytes); !cs.ok()) {
      return reject("collector " + c->name() + ": " + cs.error());
    }
  }
  for (const auto& saved : parts.collectors) {
    const bool known = std::any_of(options_.collectors.begin(), options_.collectors.end(),
                                   [&](const auto& c) { return c->name() == saved.first; });
    if (!known) Log("state: collector " + saved.first + " is no longer configured; its saved positions are dropped");
  }
  state_restore_result_ = "restored";
  Log("state restored from " + loaded.from + ": " +
      std::to_string(sampled_ ? all_requests_ : lifetime_.requests()) + " requests, " +
      std::to_string(engine().tracked_pages()) + " tracked pages");
  RepairClock(WallNow());
}

void Agent::RepairClock(double wall_now_s) {
  // A windows' clock beyond the allowed skew (a state saved before records from
  // the future were rejected, or a host clock set back) would leave every later
  // record out of every window: the windows restart, the lifetime counters stay.
  if (last_record_time_ < 0) return;
  const double now = ClockNow(wall_now_s);
  if (now <= wall_now_s + max_clock_skew_s()) return;
  Log("state: the windows' clock was " + std::to_string(now - wall_now_s) +
      " s ahead of the wall clock (more than curve.max_clock_skew); the windows restart, lifetime counters kept");
  ResetWindows();
  ResetCanaries();
  ++clock_repairs_;
}

void Agent::ResetCanaries() {
  if (!canary_options_) return;
  auto fresh = curve::PolicyCanaries::Create(*canary_options_);
  if (fresh.ok()) canaries_ = std::move(fresh).value();
}

// --- Exposition -----------------------------------------------------------------------

namespace {

using base::MetricType;

// The agent's metric families: curves, windows, collectors and state.
constexpr base::MetricDef kBuildInfo{"kvwatch_build_info", MetricType::kGauge,
                                     "kvwatch build: version and git revision. Always 1.", "version,revision"};
constexpr base::MetricDef kPageHitCapacity{
    "kvwatch_page_hit_capacity_pages", MetricType::kHistogram,
    "Page references that hit at some tracked capacity, observed at the smallest capacity in pages where they hit "
    "(prefix rule, LRU): bucket le=X counts the page hits of a cache of X pages."};
constexpr base::MetricDef kRequiredCapacity{
    "kvwatch_request_required_capacity_pages", MetricType::kHistogram,
    "Each request's required capacity in pages to keep its share of unlimited page hits; requests beyond the "
    "tracked range count only in +Inf. bucket le=X over _count is request coverage at X."};
constexpr base::MetricDef kRequests{"kvwatch_requests_total", MetricType::kCounter,
                                    "Requests processed by the curve engine (estimated when sampled)."};
constexpr base::MetricDef kPageReferences{"kvwatch_page_references_total", MetricType::kCounter,
                                          "Page references processed by the curve engine."};
constexpr base::MetricDef kColdMisses{"kvwatch_page_cold_misses_total", MetricType::kCounter,
                                      "Page references to pages never referenced before."};
constexpr base::MetricDef kBeyondTracked{
    "kvwatch_page_beyond_tracked_total", MetricType::kCounter,
    "Page references to pages evicted from tracking (distance beyond the tracked range)."};
constexpr base::MetricDef kReusedTokens{
    "kvwatch_reused_tokens_unlimited_total", MetricType::kCounter,
    "Tokens of page references that would hit in an unlimited cache (page hits times tokens per page)."};
constexpr base::MetricDef kTrackedPages{
    "kvwatch_tracked_pages", MetricType::kGauge,
    "Distinct pages the curve engine tracks now (when sampled: sampled pages in the engine)."};
constexpr base::MetricDef kSampleRate{
    "kvwatch_engine_sample_rate", MetricType::kGauge,
    "The curve engine's effective spatial sampling rate: 1 when exact; engine.sample_rate, or lower once "
    "engine.sample_max_pages made it adapt."};
constexpr base::MetricDef kTrackedPagesLimit{"kvwatch_tracked_pages_limit", MetricType::kGauge,
                                             "The most distinct pages the curve engine tracks (engine.max_pages)."};
constexpr base::MetricDef kEngineMemory{"kvwatch_engine_memory_bytes", MetricType::kGauge,
                                        "Bytes held by the curve engine's data structures."};
constexpr base::MetricDef kLateRequests{
    "kvwatch_window_late_requests_total", MetricType::kCounter,
    "Requests whose timestamp was older than a window's oldest slice (not counted in that window)."};
constexpr base::MetricDef kWindowRequests{"kvwatch_window_requests", MetricType::kGauge,
                                          "Requests that arrived within the window.", "window"};
constexpr base::MetricDef kUnlimitedHitRatio{
    "kvwatch_unlimited_page_hit_ratio", MetricType::kGauge,
    "Page hit ratio of an unlimited cache over the window's requests (the theoretical ceiling).", "window"};
constexpr base::MetricDef kWorkingSetPages{
    "kvwatch_working_set_pages", MetricType::kGauge,
    "Working set in pages: the smallest bucket capacity reaching the target (page_hit: that fraction of the "
    "unlimited page hits; request_coverage: that fraction of requests). Absent when not converged within the "
    "tracked range.",
    "window,target,fraction"};
constexpr base::MetricDef kWorkingSetBytes{
    "kvwatch_working_set_bytes", MetricType::kGauge,
    "The working set in bytes per GPU rank (pages x tokens x bytes/token).", "window,target,fraction"};
constexpr base::MetricDef kKneePages{
    "kvwatch_knee_pages", MetricType::kGauge,
    "Knee (Kneedle) of the window's page hit ratio against capacity in pages: where more capacity starts buying "
    "much less hit rate.",
    "window"};
constexpr base::MetricDef kKneeBytes{"kvwatch_knee_bytes", MetricType::kGauge, "The knee in bytes per GPU rank.",
                                     "window"};
constexpr base::MetricDef kPageHitRatio{"kvwatch_page_hit_ratio", MetricType::kGauge,
                                        "Page hit ratio of an LRU cache of capacity_pages over the window.",
                                        "window,capacity_pages"};
constexpr base::MetricDef kCoverageRatio{"kvwatch_request_coverage_ratio", MetricType::kGauge,
                                         "Fraction of the window's requests covered by an LRU cache of "
                                         "capacity_pages.",
                                         "window,capacity_pages"};
constexpr base::MetricDef kBytesPerPage{"kvwatch_bytes_per_page", MetricType::kGauge,
                                        "KV bytes of one page per GPU rank."};
constexpr base::MetricDef kCollectorUp{"kvwatch_collector_up", MetricType::kGauge,
                                       "Whether the collector reads its source (1) or not (0).", "collector"};
constexpr base::MetricDef kCollectorRecords{"kvwatch_collector_records_total", MetricType::kCounter,
                                            "Records the collector handed to the curve engine.", "collector"};
constexpr base::MetricDef kCollectorDropped{
    "kvwatch_collector_dropped_total", MetricType::kCounter,
    "Records the collector knows it lost, by reason: unread_rotation (lines of a rotated file never read), "
    "lost_bytes (loss events of bytes seen but not delivered before a truncation), lost (KV-event batches the "
    "replay endpoint could not return, and other losses).",
    "collector,reason"};
constexpr base::MetricDef kCollectorLastSuccess{"kvwatch_collector_last_success_timestamp_seconds",
                                                MetricType::kGauge,
                                                "Wall time of the collector's last successful read (0: never).",
                                                "collector"};
constexpr base::MetricDef kCollectorErrors{"kvwatch_collector_errors_total", MetricType::kCounter,
                                           "Bad input and read errors by reason; never fatal.", "collector,reason"};
constexpr base::MetricDef kPredictedHitRatio{
    "kvwatch_model_predicted_page_hit_ratio", MetricType::kGauge,
    "The window curve's page hit ratio at the engine's capacity (kvwatch_engine_capacity_pages of the collector), "
    "read at the largest bucket bound <= that capacity.",
    "collector,window"};
constexpr base::MetricDef kCacheCapacity{
    "kvwatch_cache_capacity_pages", MetricType::kGauge,
    "The replica's KV-cache capacity in pages: the largest of curve.capacities (the working-set-over-capacity "
    "alerts compare with it)."};
constexpr base::MetricDef kStateSaves{"kvwatch_state_saves_total", MetricType::kCounter,
                                      "State checkpoints written (curves and collectors' positions, one atomic "
                                      "step each)."};
constexpr base::MetricDef kStateSaveSeconds{"kvwatch_state_last_save_duration_seconds", MetricType::kGauge,
                                            "How long the last state checkpoint took (copy and write)."};
constexpr base::MetricDef kStateRestore{
    "kvwatch_state_restore", MetricType::kGauge,
    "What start-up found in the state file, 1 for the outcome: none (first start), restored, or rejected (set "
    "aside, started fresh).",
    "outcome"};
constexpr base::MetricDef kClockRepairs{
    "kvwatch_state_clock_repairs_total", MetricType::kCounter,
    "Restored window clocks that were beyond curve.max_clock_skew ahead of the wall clock (the windows restarted)."};
constexpr base::MetricDef kStateSaveErrors{"kvwatch_state_save_errors_total", MetricType::kCounter,
                                           "State checkpoints that failed."};

// The policy canaries' metric families.
constexpr base::MetricDef kPolicyHitRatio{
    "kvwatch_policy_page_hit_ratio", MetricType::kGauge,
    "Page hit ratio of the canary cache of capacity_pages under the eviction policy, over the window.",
    "policy,capacity_pages,window"};
constexpr base::MetricDef kPolicyCoverage{
    "kvwatch_policy_request_coverage_ratio", MetricType::kGauge,
    "Fraction of the window's requests covered by the canary cache of capacity_pages under the policy (absent "
    "when the engine samples).",
    "policy,capacity_pages,window"};
constexpr base::MetricDef kPolicyGain{
    "kvwatch_policy_gain_ratio", MetricType::kGauge,
    "The policy's page hit ratio minus that of curve.engine_policy, at the same capacity and window.",
    "policy,capacity_pages,window"};
constexpr base::MetricDef kPolicyHits{"kvwatch_policy_page_hits_total", MetricType::kCounter,
                                      "Page hits of the policy canary since start.", "policy,capacity_pages"};
constexpr base::MetricDef kPolicyPreemptions{
    "kvwatch_policy_preemptions_total", MetricType::kCounter,
    "Requests the sglang or vllm canary could not hold whole (vllm: preemptions) since start.",
    "policy,capacity_pages"};
constexpr base::MetricDef kCanaryMemory{"kvwatch_policy_canary_memory_bytes", MetricType::kGauge,
                                        "Memory of the policy canaries' simulations."};

}  // namespace

base::MetricDefs AgentMetricDefs() {
  return {&kBuildInfo, &kPageHitCapacity, &kRequiredCapacity, &kRequests, &kPageReferences, &kColdMisses, &kBeyondTracked, &kReusedTokens, &kTrackedPages, &kSampleRate, &kTrackedPagesLimit, &kEngineMemory, &kLateRequests, &kWindowRequests, &kUnlimitedHitRatio, &kWorkingSetPages, &kWorkingSetBytes, &kKneePages, &kKneeBytes, &kPageHitRatio, &kCoverageRatio, &kBytesPerPage, &kCollectorUp, &kCollectorRecords, &kCollectorDropped, &kCollectorLastSuccess, &kCollectorErrors, &kPredictedHitRatio, &kCacheCapacity, &kStateSaves, &kStateSaveErrors, &kStateSaveSeconds, &kStateRestore, &kClockRepairs};
}

base::MetricDefs CanaryMetricDefs() {
  return {&kPolicyHitRatio, &kPolicyCoverage, &kPolicyGain, &kPolicyHits, &kPolicyPreemptions, &kCanaryMemory};
}

// What a scrape, the curve API or the alerter reads: copied under mu_ (cheap:
// bucket arrays, totals and counters), used outside it.
struct Agent::Snapshot {
  bool sampled = false;
  curve::BucketedCurve lifetime;  // LifetimeCurve()
  std::uint64_t hit_capacity_sum = 0;
  std::uint64_t required_capacity_sum = 0;
  std::size_t tracked_pages = 0;
  double sample_rate = 1.0;
  std::size_t engine_memory_bytes = 0;
  std::uint64_t late_requests = 0;
  std::vector<curve::BucketedCurve> windows;  // when asked for: windows_->Window(i)
  struct Canary {
    curve::PolicyKind kind;
    std::uint64_t capacity = 0;
    curve::PolicyTotals lifetime;
    std::vector<curve::PolicyTotals> windows;
  };
  bool has_canaries = false;      // asked for and configured
  std::vector<Canary> canaries;
  std::size_t canary_capacities = 0;  // per policy; canary k % this is the engine policy's
  std::size_t canary_memory_bytes = 0;
  std::vector<CollectorCopy> collectors;
  // Tenants and classes (their windows when `windows` was asked for); nullopt without.
  std::optional<curve::GroupAccounting::View> groups;
  std::uint64_t state_saves = 0;
  std::uint64_t state_errors = 0;
  double last_save_seconds = 0;
  std::uint64_t clock_repairs = 0;
  std::string restore_result;

  // Exported counts: weighted counts over the weight unit when sampled.
  double Count(std::uint64_t weighted) const {
    return sampled ? static_cast<double>(weighted) / static_cast<double>(curve::SampledEngine::kWeightUnit)
                   : static_cast<double>(weighted);
  }
};

Agent::Snapshot Agent::TakeSnapshot(bool windows, bool canaries) const {
  Snapshot s;
  base::MutexLock lock(mu_);
  s.sampled = sampled();
  s.lifetime = LifetimeCurve();
  s.hit_capacity_sum = hit_capacity_sum_;
  s.required_capacity_sum = required_capacity_sum_;
  s.tracked_pages = engine().tracked_pages();
  s.sample_rate = sampled_ ? sampled_->rate() : 1.0;
  s.engine_memory_bytes = sampled_ ? sampled_->MemoryBytes() : engine_.MemoryBytes();
  s.late_requests = windows_->late_requests();
  if (windows) {
    for (std::size_t i = 0; i < windows_->size(); ++i) s.windows.push_back(windows_->Window(i));
  }
  if (canaries && canaries_) {
    const curve::PolicyCanaries& c = *canaries_;
    s.has_canaries = true;
    s.canary_capacities = c.options().capacities.size();
    s.canary_memory_bytes = c.MemoryBytes();
    for (std::size_t k = 0; k < c.size(); ++k) {
      Snapshot::Canary canary{c.kind(k), c.capacity(k), c.Lifetime(k), {}};
      for (std::size_t w = 0; w < options_.curve.windows.size(); ++w) canary.windows.push_back(c.Window(k, w));
      s.canaries.push_back(std::move(canary));
    }
  }
  s.collectors = published_;
  if (groups_) s.groups = groups_->Snapshot(windows);
  s.state_saves = state_saves_;
  s.state_errors = state_errors_;
  s.last_save_seconds = last_save_seconds_;
  s.clock_repairs = clock_repairs_;
  s.restore_result = state_restore_result_;
  return s;
}

curve::CurveReport Agent::WindowReport(const curve::BucketedCurve& window, bool sampled) const {
  curve::ReportOptions ro;
  ro.capacities = options_.curve.capacities;
  ro.page_hit_targets = options_.curve.page_hit_targets;
  ro.coverage_targets = options_.curve.coverage_targets;
  ro.page_tokens = options_.page_tokens;
  ro.bytes_per_token = options_.bytes_per_token;
  ro.knee_sensitivity = options_.curve.knee_sensitivity;
  if (!sampled) return curve::BuildBucketedReport(window, ro, options_.curve.knee_window_min_requests);
  // Sampled: counts are weighted; divide them back to full-stream estimates.
  const std::uint64_t unit = curve::SampledEngine::kWeightUnit;
  curve::CurveReport r = curve::BuildBucketedReport(window, ro, options_.curve.knee_window_min_requests * unit);
  const double inv = 1.0 / static_cast<double>(unit);
  r.requests = static_cast<std::uint64_t>(std::llround(static_cast<double>(r.requests) * inv));
  r.page_refs *= inv;
  r.unlimited_page_hits *= inv;
  r.cold_misses *= inv;
  r.beyond_tracked *= inv;
  for (auto* points : {&r.points, &r.plot}) {
    for (curve::CurvePoint& p : *points) {
      p.page_hits *= inv;
      p.reused_tokens *= inv;
    }
  }
  return r;
}

// The canaries' gauges: series = canaries (policies x capacities) x windows per
// name, bounded by curve.policies' limit of 64 canaries.
void Agent::AppendCanaryMetrics(MetricsBuilder& m, const Snapshot& s) const {
  const std::size_t nc = s.canary_capacities;
  for (std::size_t w = 0; w < options_.curve.windows.size(); ++w) {
    for (std::size_t i = 0; i < s.canaries.size(); ++i) {
      const curve::PolicyTotals& t = s.canaries[i].windows[w];
      const Labels labels = {{"policy", std::string(curve::PolicyName(s.canaries[i].kind))},
                             {"capacity_pages", std::to_string(s.canaries[i].capacity)},
                             {"window", options_.curve.windows[w].name}};
      m.Add(kPolicyHitRatio, t.PageHitRatio(), labels);
      // Coverage needs each request's unlimited hits, which a sampled engine
      // does not know: absent rather than wrong when sampling.
      if (!s.sampled) m.Add(kPolicyCoverage, t.RequestCoverage(), labels);
      // The engine's own policy is canary (0, j): curve.engine_policy comes first.
      const curve::PolicyTotals& engine = s.canaries[i % nc].windows[w];
      m.Add(kPolicyGain, t.PageHitRatio() - engine.PageHitRatio(), labels);
    }
  }
  for (const Snapshot::Canary& c : s.canaries) {
    const Labels labels = {{"policy", std::string(curve::PolicyName(c.kind))},
                           {"capacity_pages", std::to_string(c.capacity)}};
    m.Add(kPolicyHits, static_cast<double>(c.lifetime.page_hits), labels);
    if (c.kind == curve::PolicyKind::kVllm || c.kind == curve::PolicyKind::kSglang) {
      m.Add(kPolicyPreemptions, static_cast<double>(c.lifetime.preemptions), labels);
    }
  }
  m.Add(kCanaryMemory, static_cast<double>(s.canary_memory_bytes));
}

std::string Agent::RenderMetrics() {
  // Copy under the lock; the reports, knees and text are built outside it.
  const Snapshot s = TakeSnapshot(/*windows=*/true, /*canaries=*/true);
  MetricsBuilder m;
  m.Add(kBuildInfo, 1, {{"version", Version()}, {"revision", Revision()}});

  // Lifetime histograms: cumulative over the agent's life (and restored across
  // restarts), so Prometheus computes any window with increase().
  const curve::BucketedCurve& lifetime = s.lifetime;
  // Histogram counts are integers: full-stream estimates are rounded when sampled.
  auto whole = [&s](std::uint64_t weighted) { return static_cast<std::uint64_t>(std::llround(s.Count(weighted))); };
  std::vector<std::pair<double, std::uint64_t>> hit_buckets, req_buckets;
  std::uint64_t hit_sum = 0, covered_sum = 0;
  for (std::size_t j = 0; j < bounds_.size(); ++j) {
    hit_sum += lifetime.hits()[j];
    covered_sum += lifetime.required()[j];
    hit_buckets.emplace_back(static_cast<double>(bounds_[j]), whole(hit_sum));
    req_buckets.emplace_back(static_cast<double>(bounds_[j]), whole(covered_sum));
  }
  m.Histogram(kPageHitCapacity, hit_buckets, whole(hit_sum), static_cast<double>(s.hit_capacity_sum));
  m.Histogram(kRequiredCapacity, req_buckets, whole(lifetime.requests()),
              static_cast<double>(s.required_capacity_sum));
  m.Add(kRequests, s.Count(lifetime.requests()));
  m.Add(kPageReferences, s.Count(lifetime.page_refs()));
  m.Add(kColdMisses, s.Count(lifetime.cold_misses()));
  m.Add(kBeyondTracked, s.Count(lifetime.beyond_tracked()));
  m.Add(kReusedTokens, s.Count(lifetime.unlimited_page_hits()) * static_cast<double>(options_.page_tokens));
  m.Add(kTrackedPages, static_cast<double>(s.tracked_pages));
  m.Add(kSampleRate, s.sample_rate);
  m.Add(kTrackedPagesLimit, static_cast<double>(options_.engine.max_pages));
  m.Add(kEngineMemory, static_cast<double>(s.engine_memory_bytes));
  m.Add(kLateRequests, static_cast<double>(s.late_requests));
  AppendCapacityMisses(m, CapacityMissesOf(lifetime, options_.curve.capacities, s.Count(1)));

  // Windows.
  for (std::size_t i = 0; i < options_.curve.windows.size(); ++i) {
    const std::string& w = options_.curve.windows[i].name;
    const curve::CurveReport r = WindowReport(s.windows[i], s.sampled);
    m.Add(kWindowRequests, static_cast<double>(r.requests), {{"window", w}});
    m.Add(kUnlimitedHitRatio, r.unlimited_page_hit_ratio, {{"window", w}});
    for (const curve::WorkingSetEntry& e : r.working_set) {
      if (!e.capacity_pages) continue;
      const Labels labels = {{"window", w}, {"target", e.target}, {"fraction", FractionLabel(e.fraction)}};
      m.Add(kWorkingSetPages, static_cast<double>(*e.capacity_pages), labels);
      if (e.bytes) m.Add(kWorkingSetBytes, *e.bytes, labels);
    }
    if (r.knee) {
      m.Add(kKneePages, static_cast<double>(r.knee->capacity_pages), {{"window", w}});
      if (r.knee_bytes) m.Add(kKneeBytes, *r.knee_bytes, {{"window", w}});
    }
    for (const curve::CurvePoint& p : r.points) {
      if (options_.curve.capacities.empty()) break;
      const Labels labels = {{"window", w}, {"capacity_pages", std::to_string(p.capacity_pages)}};
      m.Add(kPageHitRatio, p.page_hit_ratio, labels);
      m.Add(kCoverageRatio, p.request_coverage, labels);
    }
  }
  if (options_.bytes_per_token) {
    m.Add(kBytesPerPage, *options_.bytes_per_token * static_cast<double>(options_.page_tokens));
  }

  // Collectors, as of their last poll.
  for (const CollectorCopy& c : s.collectors) {
    const Labels labels = {{"collector", c.name}};
    m.Add(kCollectorUp, c.stats.up ? 1 : 0, labels);
    m.Add(kCollectorRecords, static_cast<double>(c.stats.records), labels);
    // By reason; what a collector counts without one is "lost".
    std::uint64_t with_reason = 0;
    for (const auto& [reason, count] : c.stats.dropped_by) {
      m.Add(kCollectorDropped, static_cast<double>(count), {{"collector", c.name}, {"reason", reason}});
      with_reason += count;
    }
    if (c.stats.dropped > with_reason || c.stats.dropped_by.empty()) {
      m.Add(kCollectorDropped, static_cast<double>(c.stats.dropped - std::min(with_reason, c.stats.dropped)),
            {{"collector", c.name}, {"reason", "lost"}});
    }
    m.Add(kCollectorLastSuccess, c.stats.last_success_s, labels);
    for (const auto& [reason, count] : c.stats.errors) {
      m.Add(kCollectorErrors, static_cast<double>(count), {{"collector", c.name}, {"reason", reason}});
    }
  }
  // Their samples: the engine signals (collectors/engine_signals.h's table) and
  // each collector's own families (its table).
  for (const CollectorCopy& c : s.collectors) {
    for (const collectors::MetricSample& sample : c.samples) {
      const base::MetricDef def{sample.name, sample.counter ? MetricType::kCounter : MetricType::kGauge, sample.help,
                                "*"};
      m.Add(def, sample.value, sample.labels);
    }
  }
  // The curve's prediction at the engine's actual capacity, beside the engine's
  // observed kvwatch_engine_prefix_cache_hit_ratio.
  for (const CollectorCopy& c : s.collectors) {
    if (!c.signals.capacity_pages || !(*c.signals.capacity_pages >= 0)) continue;
    const auto capacity = static_cast<std::uint64_t>(*c.signals.capacity_pages);
    for (std::size_t i = 0; i < options_.curve.windows.size(); ++i) {
      m.Add(kPredictedHitRatio, s.windows[i].PageHitRatio(capacity),
            {{"collector", c.name}, {"window", options_.curve.windows[i].name}});
    }
  }
  for (const CollectorCopy& c : s.collectors) AppendRunningKv(m, c.name, c.signals, BytesPerPage());
  if (s.groups) {
    std::vector<std::string> names;
    for (const WindowSpec& w : options_.curve.windows) names.push_back(w.name);
    AppendGroupMetrics(m, *s.groups, names);
  }
  if (s.has_canaries) AppendCanaryMetrics(m, s);
  if (!options_.curve.capacities.empty()) m.Add(kCacheCapacity, static_cast<double>(options_.curve.capacities.back()));
  if (alert_runner_) alert_runner_->AppendMetrics(&m);
  m.Add(kStateSaves, static_cast<double>(s.state_saves));
  m.Add(kStateSaveSeconds, s.last_save_seconds);
  if (!options_.state_path.empty()) {
    for (const char* outcome : {"none", "restored", "rejected"}) {
      m.Add(kStateRestore, s.restore_result == outcome ? 1 : 0, {{"outcome", outcome}});
    }
  }
  m.Add(kClockRepairs, static_cast<double>(s.clock_repairs));
  m.Add(kStateSaveErrors, static_cast<double>(s.state_errors));
  m.ProcessMetrics();
  return m.Serialize();
}

alerts::AlertInputs Agent::AlertInputsAt(alerts::TimePoint time) {
  const AlertInputSpec& spec = options_.alerts->inputs;
  const Snapshot s = TakeSnapshot(/*windows=*/true, /*canaries=*/false);
  AgentObservation o;
  auto observe = [&](std::optional<std::size_t> i) -> std::optional<WindowObservation> {
    if (!i || *i >= s.windows.size()) return std::nullopt;
    return ObserveWindow(s.windows[*i], WindowReport(s.windows[*i], s.sampled), spec);
  };
  o.short_window = observe(spec.short_window);
  o.baseline_window = observe(spec.baseline_window);
  for (const CollectorCopy& c : s.collectors) o.engine.push_back(c.signals);
  o.tracked_pages_limit = static_cast<double>(options_.engine.max_pages);
  o.bytes_per_page = BytesPerPage();
  o.capacity_misses = CapacityMissInputsOf(s.Count(s.lifetime.page_refs()),
                                           CapacityMissesOf(s.lifetime, options_.curve.capacities, s.Count(1)),
                                           s.groups ? &*s.groups : nullptr);
  return MakeAlertInputs(spec, o, time);
}

std::string Agent::RenderCurveJson(const std::string& window) {
  for (std::size_t i = 0; i < options_.curve.windows.size(); ++i) {
    if (options_.curve.windows[i].name != window) continue;
    const Snapshot s = TakeSnapshot(/*windows=*/true, /*canaries=*/true);
    CurveApiContext context;
    context.window = window;
    context.window_seconds = options_.curve.windows[i].seconds;
    context.replica = options_.replica;
    context.capacities = options_.curve.capacities;
    context.tracked_pages = s.tracked_pages;
    context.bucket_relative_error = std::exp2(1.0 / options_.curve.buckets_per_octave) - 1;
    const std::size_t nc = s.canary_capacities;
    for (std::size_t k = 0; k < s.canaries.size(); ++k) {
      const curve::PolicyTotals& t = s.canaries[k].windows[i];
      const curve::PolicyTotals& engine = s.canaries[k % nc].windows[i];
      context.policies.push_back({std::string(curve::PolicyName(s.canaries[k].kind)), s.canaries[k].capacity,
                                  t.PageHitRatio(),
                                  s.sampled ? std::nullopt : std::optional<double>(t.RequestCoverage()),
                                  t.PageHitRatio() - engine.PageHitRatio(), k < nc});
    }
    return RenderCurveApiJson(WindowReport(s.windows[i], s.sampled), context);
  }
  return {};
}

std::string Agent::RenderGroupsJson(const std::string& window) {
  for (std::size_t i = 0; i < options_.curve.windows.size(); ++i) {
    if (options_.curve.windows[i].name != window) continue;
    Snapshot s = TakeSnapshot(/*windows=*/true, /*canaries=*/false);
    if (!s.groups || i >= s.groups->windows.size()) return {};
    GroupsApiContext context;
    context.window = window;
    context.window_seconds = options_.curve.windows[i].seconds;
    context.replica = options_.replica;
    context.tenant_labels = std::move(s.groups->tenant_labels);
    context.class_labels = std::move(s.groups->class_labels);
    return RenderGroupsApiJson(s.groups->windows[i], context);
  }
  return {};
}

namespace {

// A JSON answer, or a 404 with {"error": error} when there is none (empty body).
HttpResponse JsonOrNotFound(std::string body, const std::string& error) {
  HttpResponse r;
  r.content_type = "application/json";
  r.body = std::move(body);
  if (r.body.empty()) {
    r.status = 404;
    base::JsonWriter w;
    w.BeginObject();
    w.Key("error");
    w.String(error);
    w.EndObject();
    r.body = w.Take();
  }
  return r;
}

}  // namespace

void Agent::RegisterRoutes() {
  http_->Handle("/metrics", [this](const HttpRequest&) {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = RenderMetrics();
    return r;
  });
  http_->Handle("/healthz", [](const HttpRequest&) {
    HttpResponse r;
    r.body = "ok\n";
    return r;
  });
  http_->Handle("/readyz", [this](const HttpRequest&) {
    HttpResponse r;
    r.status = ready_ ? 200 : 503;
    r.body = ready_ ? "ready\n" : "starting\n";
    return r;
  });
  http_->Handle("/api/v1/windows", [this](const HttpRequest&) {
    base::JsonWriter w;
    w.BeginObject();
    w.Key("windows");
    w.BeginArray();
    for (const WindowSpec& spec : options_.curve.windows) w.String(spec.name);
    w.EndArray();
    w.EndObject();
    HttpResponse r;
    r.content_type = "application/json";
    r.body = w.Take();
    return r;
  });
  http_->Handle("/api/v1/alerts", [this](const HttpRequest&) {
    HttpResponse r;
    r.content_type = "application/json";
    if (alert_runner_) {
      r.body = alert_runner_->AlertsJson();
    } else {
      r.body = "{\"status\":\"success\",\"data\":{\"alerts\":[]}}";
    }
    return r;
  });
  http_->Handle("/api/v1/curve", [this](const HttpRequest& req) {
    const std::string window = req.Query("window").value_or(options_.curve.windows.front().name);
    return JsonOrNotFound(RenderCurveJson(window), "unknown window '" + window + "'");
  });
  http_->Handle("/api/v1/groups", [this](const HttpRequest& req) {
    const std::string window = req.Query("window").value_or(options_.curve.windows.front().name);
    return JsonOrNotFound(RenderGroupsJson(window), TenantsOn(options_)
                                                        ? "unknown window '" + window + "'"
                                                        : std::string("tenants are off (tenants.enabled, or a sampled engine)"));
  });
  http_->Handle("/", [this](const HttpRequest& req) {
    HttpResponse r;
    if (req.path != "/") {
      r.status = 404;
      r.body = "not found\n";
      return r;
    }
    PageOptions page;
    page.title = "kvwatch";
    page.replica = options_.replica;
    page.refresh_seconds = options_.refresh_seconds;
    for (const WindowSpec& w : options_.curve.windows) page.windows.push_back(w.name);
    r.content_type = kIndexPageContentType;
    r.headers.emplace_back("Content-Security-Policy", kIndexPageContentSecurityPolicy);
    r.body = RenderIndexPage(page);
    return r;
  });
}

}  // namespace kvwatch::agent
