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

#include "agent/runtime/metrics.h"
#include "agent/runtime/version.h"
#include "agent/web/api_json.h"
#include "agent/web/json_writer.h"
#include "agent/web/text_format.h"
#include "agent/web/web_page.h"
#include "base/byte_io.h"

namespace kvwatch::agent {

using collectors::WallNow;
namespace {

void Log(const std::string& message) { std::fprintf(stderr, "kvwatch agent: %s\n", message.c_str()); }

// Writes bytes to path atomically: a temp file in the same folder, fsync, rename
// over path, fsync the folder. A crash leaves the old file or the new one.
base::Status WriteFileAtomically(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return base::Status::Error(tmp + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string err = std::strerror(errno);
      ::close(fd);
      return base::Status::Error(tmp + ": " + err);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return base::Status::Error(tmp + ": " + std::strerror(errno));
  if (::rename(tmp.c_str(), path.c_str()) != 0) return base::Status::Error(path + ": " + std::strerror(errno));
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return base::Status::Ok();
}

// State file: magic, version, the configuration fingerprint, then sections.
constexpr char kStateMagic[8] = {'K', 'V', 'W', 'S', 'T', 'A', 'T', 'E'};
constexpr std::uint32_t kStateVersion = 1;

}  // namespace

base::Result<std::unique_ptr<Agent>> Agent::Create(AgentOptions options) {
  std::unique_ptr<Agent> agent(new Agent(std::move(options)));
  if (base::Status s = agent->Init(); !s.ok()) return base::Result<std::unique_ptr<Agent>>::Error(s.error());
  return agent;
}

Agent::Agent(AgentOptions options) : options_(std::move(options)), engine_(options_.engine) {
  if (options_.sample_rate < 1.0 || options_.sample_max_pages > 0) {
    sampled_ = std::make_unique<curve::SampledEngine>(options_.engine, options_.sample_rate, options_.sample_max_pages);
  }
}

double Agent::Count(std::uint64_t weighted) const {
  return sampled_ ? static_cast<double>(weighted) / static_cast<double>(curve::SampledEngine::kWeightUnit)
                  : static_cast<double>(weighted);
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
  bounds_ = curve::LogBucketBounds(options_.engine.max_pages, options_.buckets_per_octave);
  for (std::uint64_t c : options_.capacities) {
    if (c <= options_.engine.max_pages) bounds_.push_back(c);
  }
  std::sort(bounds_.begin(), bounds_.end());
  bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
  // No other thread runs yet; the lock keeps the analysis honest.
  base::MutexLock lock(mu_);
  lifetime_ = curve::BucketedCurve(&bounds_, options_.coverage_share);
  std::vector<double> seconds;
  for (const WindowSpec& w : options_.windows) seconds.push_back(w.seconds);
  windows_ = std::make_unique<curve::WindowedCurves>(seconds, &bounds_, options_.coverage_share, sampled_ != nullptr);
  if (options_.canaries) {
    curve::CanaryOptions co = *options_.canaries;
    co.windows_s = seconds;
    co.capacities = options_.capacities;
    co.touch_order = options_.engine.touch_order;
    co.coverage_share = options_.coverage_share;
    auto canaries = curve::PolicyCanaries::Create(co);
    if (!canaries.ok()) return base::Status::Error("curve.policies: " + canaries.error());
    canaries_ = std::move(canaries).value();
  }
  start_wall_s_ = WallNow();
  LoadState();

  if (options_.alerts) {
    auto runner = AlertRunner::Create(*options_.alerts);
    if (!runner.ok()) return base::Status::Error(runner.error());
    alert_runner_ = std::move(runner).value();
  }
  auto server = HttpServer::Create(options_.http);
  if (!server.ok()) return base::Status::Error(server.error());
  http_ = std::move(server).value();
  RegisterRoutes();
  return base::Status::Ok();
}

// --- Ingestion ------------------------------------------------------------------------

void Agent::OnRequest(const curve::Request& request) {
  // Called from a collector's Poll, with mu_ held by the loop.
  const double wall = WallNow();
  const double t = request.has_timestamp() ? request.timestamp_s : ClockNow(wall);
  std::uint64_t weight = 1;
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
  Clock::time_point next_alerts = Clock::now();
  if (alert_runner_) next_alerts += alert_runner_->options().alerter.evaluation_interval;
  boost::asio::steady_timer tick(io);
  constexpr auto kTick = std::chrono::milliseconds(50);
  std::function<void()> loop = [&]() {
    if (stop_) {
      io.stop();
      return;
    }
    const Clock::time_point now = Clock::now();
    const double wall = WallNow();
    {
      base::MutexLock lock(mu_);
      for (std::size_t i = 0; i < options_.collectors.size(); ++i) {
        if (now < next_poll[i]) continue;
        options_.collectors[i]->Poll(*this, wall);
        next_poll[i] = now + options_.collectors[i]->poll_interval();
      }
      // The window clock starts with the first record: records may carry their
      // own time base (Mooncake's milliseconds since the trace began), which the
      // wall clock must not overtake before any arrives.
      if (last_record_time_ >= 0) {
        windows_->Advance(ClockNow(wall));
        if (canaries_) canaries_->Advance(ClockNow(wall));
      }
    }
    if (alert_runner_ && now >= next_alerts) {
      // Errors are logged by the runner; evaluation never blocks on notifiers.
      (void)alert_runner_->Evaluate(AlertInputsAt(alert_runner_->Now()));
      next_alerts = now + alert_runner_->options().alerter.evaluation_interval;
    }
    if (!options_.state_path.empty() && now >= next_save) {
      if (base::Status s = SaveState(); !s.ok()) Log(s.error());
      next_save = now + options_.state_interval;
    }
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
  for (const WindowSpec& w : options_.windows) f << w.seconds << ",";
  // Only when sampled, so exact-mode state files stay as they were.
  if (sampled_) {
    f << " sample_rate=" << std::setprecision(17) << options_.sample_rate
      << " sample_max_pages=" << options_.sample_max_pages;
  }
  return f.str();
}

base::Status Agent::SaveState() {
  if (options_.state_path.empty()) return base::Status::Ok();
  std::vector<std::uint8_t> bytes(kStateMagic, kStateMagic + sizeof(kStateMagic));
  {
    base::MutexLock lock(mu_);
    base::AppendPod(&bytes, kStateVersion);
    const std::string fp = ConfigFingerprint();
    base::AppendPod<std::uint64_t>(&bytes, fp.size());
    bytes.insert(bytes.end(), fp.begin(), fp.end());
    const std::vector<std::uint8_t> engine = sampled_ ? sampled_->Serialize() : engine_.Serialize();
    base::AppendPod<std::uint64_t>(&bytes, engine.size());
    bytes.insert(bytes.end(), engine.begin(), engine.end());
    lifetime_.Serialize(&bytes);
    base::AppendPod(&bytes, hit_capacity_sum_);
    base::AppendPod(&bytes, required_capacity_sum_);
    windows_->Serialize(&bytes);
    base::AppendPod(&bytes, last_record_time_);
    base::AppendPod(&bytes, last_record_wall_);
    if (sampled_) {
      base::AppendPod(&bytes, all_page_refs_);
      base::AppendPod(&bytes, all_requests_);
    }
  }
  base::Status s = WriteFileAtomically(options_.state_path, bytes);  // I/O outside the lock
  {
    base::MutexLock lock(mu_);
    ++(s.ok() ? state_saves_ : state_errors_);
  }
  if (!s.ok()) return base::Status::Error("state: " + s.error());
  // The collectors' positions right after the state they led to.
  for (auto& c : options_.collectors) {
    if (base::Status cs = c->Checkpoint(); !cs.ok()) Log(c->name() + ": checkpoint: " + cs.error());
  }
  return base::Status::Ok();
}

void Agent::ResetState() {
  engine_.Clear();
  if (sampled_) sampled_->Clear();
  all_page_refs_ = all_requests_ = 0;
  lifetime_.Clear();
  std::vector<double> seconds;
  for (const WindowSpec& w : options_.windows) seconds.push_back(w.seconds);
  windows_ = std::make_unique<curve::WindowedCurves>(seconds, &bounds_, options_.coverage_share, sampled_ != nullptr);
  hit_capacity_sum_ = required_capacity_sum_ = 0;
  last_record_time_ = -1;
}

void Agent::LoadState() {
  if (options_.state_path.empty()) return;
  std::ifstream f(options_.state_path, std::ios::binary);
  if (!f) {
    state_restore_result_ = "none";
    return;
  }
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto reject = [&](const std::string& why) NO_THREAD_SAFETY_ANALYSIS {  // LoadState holds mu_
    const std::string aside = options_.state_path + ".rejected-" + std::to_string(static_cast<long long>(WallNow()));
    std::error_code ec;
    std::filesystem::rename(options_.state_path, aside, ec);
    Log("state " + options_.state_path + " not restored (" + why + "); set aside as " + aside);
    ResetState();
    state_restore_result_ = "rejected";
  };
  std::span<const std::uint8_t> in(bytes);
  std::uint32_t version = 0;
  std::uint64_t n = 0;
  if (in.size() < sizeof(kStateMagic) || std::memcmp(in.data(), kStateMagic, sizeof(kStateMagic)) != 0) {
    return reject("not a kvwatch state file");
  }
  in = in.subspan(sizeof(kStateMagic));
  if (!base::ReadPod(&in, &version) || version != kStateVersion) return reject("version " + std::to_string(version));
  if (!base::ReadPod(&in, &n) || n > in.size()) return reject("truncated");
  const std::string fp(reinterpret_cast<const char*>(in.data()), n);
  in = in.subspan(n);
  if (fp != ConfigFingerprint()) return reject("saved with other settings: " + fp);
  if (!base::ReadPod(&in, &n) || n > in.size() ||
      !(sampled_ ? sampled_->Deserialize(in.subspan(0, n)) : engine_.Deserialize(in.subspan(0, n)))) {
    return reject("engine state");
  }
  in = in.subspan(n);
  if (!lifetime_.Deserialize(&in) || !base::ReadPod(&in, &hit_capacity_sum_) || !base::ReadPod(&in, &required_capacity_sum_) ||
      !windows_->Deserialize(&in) || !base::ReadPod(&in, &last_record_time_) || !base::ReadPod(&in, &last_record_wall_) ||
      (sampled_ && (!base::ReadPod(&in, &all_page_refs_) || !base::ReadPod(&in, &all_requests_))) ||
      !in.empty()) {
    return reject("curves");
  }
  state_restore_result_ = "restored";
  Log("state restored from " + options_.state_path + ": " + std::to_string(sampled_ ? all_requests_ : lifetime_.requests()) + " requests, " +
      std::to_string(engine().tracked_pages()) + " tracked pages");
}

// --- Exposition -----------------------------------------------------------------------

curve::CurveReport Agent::WindowReport(std::size_t i) const {
  curve::ReportOptions ro;
  ro.capacities = options_.capacities;
  ro.page_hit_targets = options_.page_hit_targets;
  ro.coverage_targets = options_.coverage_targets;
  ro.page_tokens = options_.page_tokens;
  ro.bytes_per_token = options_.bytes_per_token;
  ro.knee_sensitivity = options_.knee_sensitivity;
  if (!sampled_) return curve::BuildBucketedReport(windows_->Window(i), ro, options_.knee_min_requests);
  // Sampled: counts are weighted; divide them back to full-stream estimates.
  const std::uint64_t unit = curve::SampledEngine::kWeightUnit;
  curve::CurveReport r = curve::BuildBucketedReport(windows_->Window(i), ro, options_.knee_min_requests * unit);
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
void Agent::AppendCanaryMetrics(MetricsBuilder& m) const {
  const curve::PolicyCanaries& c = *canaries_;
  const std::size_t nc = c.options().capacities.size();
  for (std::size_t w = 0; w < options_.windows.size(); ++w) {
    for (std::size_t i = 0; i < c.size(); ++i) {
      const curve::PolicyTotals t = c.Window(i, w);
      const std::string policy(curve::PolicyName(c.kind(i)));
      const Labels labels = {{"policy", policy},
                             {"capacity_pages", std::to_string(c.capacity(i))},
                             {"window", options_.windows[w].name}};
      m.Gauge("kvwatch_policy_page_hit_ratio",
              "Page hit ratio of the canary cache of capacity_pages under the eviction policy, over the window.",
              t.PageHitRatio(), labels);
      // Coverage needs each request's unlimited hits, which a sampled engine
      // does not know: absent rather than wrong when sampling.
      if (!sampled()) {
        m.Gauge("kvwatch_policy_request_coverage_ratio",
                "Fraction of the window's requests covered by the canary cache of capacity_pages under the policy "
                "(absent when the engine samples).",
                t.RequestCoverage(), labels);
      }
      // The engine's own policy is canary (0, j): curve.engine_policy comes first.
      const curve::PolicyTotals engine = c.Window(i % nc, w);
      m.Gauge("kvwatch_policy_gain_ratio",
              "The policy's page hit ratio minus that of curve.engine_policy, at the same capacity and window.",
              t.PageHitRatio() - engine.PageHitRatio(), labels);
    }
  }
  for (std::size_t i = 0; i < c.size(); ++i) {
    const Labels labels = {{"policy", std::string(curve::PolicyName(c.kind(i)))},
                           {"capacity_pages", std::to_string(c.capacity(i))}};
    m.Counter("kvwatch_policy_page_hits_total", "Page hits of the policy canary since start.",
              static_cast<double>(c.Lifetime(i).page_hits), labels);
    if (c.kind(i) == curve::PolicyKind::kVllm || c.kind(i) == curve::PolicyKind::kSglang) {
      m.Counter("kvwatch_policy_preemptions_total",
                "Requests the sglang or vllm canary could not hold whole (vllm: preemptions) since start.",
                static_cast<double>(c.Lifetime(i).preemptions), labels);
    }
  }
  m.Gauge("kvwatch_policy_canary_memory_bytes", "Memory of the policy canaries' simulations.",
          static_cast<double>(c.MemoryBytes()));
}

std::string Agent::RenderMetrics() {
  MetricsBuilder m;
  base::MutexLock lock(mu_);
  m.Gauge("kvwatch_build_info", "kvwatch build: version and git revision. Always 1.", 1,
          {{"version", Version()}, {"revision", Revision()}});

  // Lifetime histograms: cumulative over the agent's life (and restored across
  // restarts), so Prometheus computes any window with increase().
  const curve::BucketedCurve lifetime = LifetimeCurve();
  // Histogram counts are integers: full-stream estimates are rounded when sampled.
  auto whole = [this](std::uint64_t weighted) NO_THREAD_SAFETY_ANALYSIS {  // RenderMetrics holds mu_
    return static_cast<std::uint64_t>(std::llround(Count(weighted)));
  };
  std::vector<std::pair<double, std::uint64_t>> hit_buckets, req_buckets;
  std::uint64_t hit_sum = 0, covered_sum = 0;
  for (std::size_t j = 0; j < bounds_.size(); ++j) {
    hit_sum += lifetime.hits()[j];
    covered_sum += lifetime.required()[j];
    hit_buckets.emplace_back(static_cast<double>(bounds_[j]), whole(hit_sum));
    req_buckets.emplace_back(static_cast<double>(bounds_[j]), whole(covered_sum));
  }
  const std::uint64_t hits = whole(hit_sum);
  m.Histogram("kvwatch_page_hit_capacity_pages",
              "Page references that hit at some tracked capacity, observed at the smallest capacity in pages "
              "where they hit (prefix rule, LRU): bucket le=X counts the page hits of a cache of X pages.",
              hit_buckets, hits, static_cast<double>(hit_capacity_sum_));
  m.Histogram("kvwatch_request_required_capacity_pages",
              "Each request's required capacity in pages to keep its share of unlimited page hits; requests "
              "beyond the tracked range count only in +Inf. bucket le=X over _count is request coverage at X.",
              req_buckets, whole(lifetime.requests()), static_cast<double>(required_capacity_sum_));
  m.Counter("kvwatch_requests_total", "Requests processed by the curve engine (estimated when sampled).",
            Count(lifetime.requests()));
  m.Counter("kvwatch_page_references_total", "Page references processed by the curve engine.",
            Count(lifetime.page_refs()));
  m.Counter("kvwatch_page_cold_misses_total", "Page references to pages never referenced before.",
            Count(lifetime.cold_misses()));
  m.Counter("kvwatch_page_beyond_tracked_total",
            "Page references to pages evicted from tracking (distance beyond the tracked range).",
            Count(lifetime.beyond_tracked()));
  m.Counter("kvwatch_reused_tokens_unlimited_total",
            "Tokens of page references that would hit in an unlimited cache (page hits times tokens per page).",
            Count(lifetime.unlimited_page_hits()) * static_cast<double>(options_.page_tokens));
  m.Gauge("kvwatch_tracked_pages",
          "Distinct pages the curve engine tracks now (when sampled: sampled pages in the engine).",
          static_cast<double>(engine().tracked_pages()));
  m.Gauge("kvwatch_engine_sample_rate",
          "The curve engine's effective spatial sampling rate: 1 when exact; engine.sample_rate, or lower once "
          "engine.sample_max_pages made it adapt.",
          sampled_ ? sampled_->rate() : 1.0);
  m.Gauge("kvwatch_tracked_pages_limit", "The most distinct pages the curve engine tracks (engine.max_pages).",
          static_cast<double>(options_.engine.max_pages));
  m.Gauge("kvwatch_engine_memory_bytes", "Bytes held by the curve engine's data structures.",
          static_cast<double>(sampled_ ? sampled_->MemoryBytes() : engine_.MemoryBytes()));
  m.Counter("kvwatch_window_late_requests_total",
            "Requests whose timestamp was older than a window's oldest slice (not counted in that window).",
            static_cast<double>(windows_->late_requests()));

  // Windows.
  const char* kWs = "Working set in pages: the smallest bucket capacity reaching the target (page_hit: that fraction "
                    "of the unlimited page hits; request_coverage: that fraction of requests). Absent when not "
                    "converged within the tracked range.";
  for (std::size_t i = 0; i < options_.windows.size(); ++i) {
    const std::string& w = options_.windows[i].name;
    const curve::CurveReport r = WindowReport(i);
    m.Gauge("kvwatch_window_requests", "Requests that arrived within the window.", static_cast<double>(r.requests),
            {{"window", w}});
    m.Gauge("kvwatch_unlimited_page_hit_ratio",
            "Page hit ratio of an unlimited cache over the window's requests (the theoretical ceiling).",
            r.unlimited_page_hit_ratio, {{"window", w}});
    for (const curve::WorkingSetEntry& e : r.working_set) {
      if (!e.capacity_pages) continue;
      const Labels labels = {{"window", w}, {"target", e.target}, {"fraction", FractionLabel(e.fraction)}};
      m.Gauge("kvwatch_working_set_pages", kWs, static_cast<double>(*e.capacity_pages), labels);
      if (e.bytes) {
        m.Gauge("kvwatch_working_set_bytes", "The working set in bytes per GPU rank (pages x tokens x bytes/token).",
                *e.bytes, labels);
      }
    }
    if (r.knee) {
      m.Gauge("kvwatch_knee_pages",
              "Knee (Kneedle) of the window's page hit ratio against capacity in pages: where more capacity "
              "starts buying much less hit rate.",
              static_cast<double>(r.knee->capacity_pages), {{"window", w}});
      if (r.knee_bytes) {
        m.Gauge("kvwatch_knee_bytes", "The knee in bytes per GPU rank.", *r.knee_bytes, {{"window", w}});
      }
    }
    for (const curve::CurvePoint& p : r.points) {
      if (options_.capacities.empty()) break;
      const Labels labels = {{"window", w}, {"capacity_pages", std::to_string(p.capacity_pages)}};
      m.Gauge("kvwatch_page_hit_ratio", "Page hit ratio of an LRU cache of capacity_pages over the window.",
              p.page_hit_ratio, labels);
      m.Gauge("kvwatch_request_coverage_ratio",
              "Fraction of the window's requests covered by an LRU cache of capacity_pages.", p.request_coverage,
              labels);
    }
  }
  if (options_.bytes_per_token) {
    m.Gauge("kvwatch_bytes_per_page", "KV bytes of one page per GPU rank.",
            *options_.bytes_per_token * static_cast<double>(options_.page_tokens));
  }

  // Collectors.
  for (const auto& c : options_.collectors) {
    const collectors::CollectorStats s = c->stats();
    const Labels labels = {{"collector", c->name()}};
    m.Gauge("kvwatch_collector_up", "Whether the collector reads its source (1) or not (0).", s.up ? 1 : 0, labels);
    m.Counter("kvwatch_collector_records_total", "Records the collector handed to the curve engine.",
              static_cast<double>(s.records), labels);
    m.Counter("kvwatch_collector_dropped_total", "Records the collector knows it lost.",
              static_cast<double>(s.dropped), labels);
    m.Gauge("kvwatch_collector_last_success_timestamp_seconds",
            "Wall time of the collector's last successful read (0: never).", s.last_success_s, labels);
    for (const auto& [reason, count] : s.errors) {
      m.Counter("kvwatch_collector_errors_total", "Bad input and read errors by reason; never fatal.",
                static_cast<double>(count), {{"collector", c->name()}, {"reason", reason}});
    }
  }
  std::vector<collectors::MetricSample> samples;
  for (const auto& c : options_.collectors) c->AppendSamples(&samples);
  for (const collectors::MetricSample& s : samples) {
    if (s.counter) {
      m.Counter(s.name, s.help, s.value, s.labels);
    } else {
      m.Gauge(s.name, s.help, s.value, s.labels);
    }
  }
  // The curve's prediction at the engine's actual capacity, beside the engine's
  // observed kvwatch_engine_prefix_cache_hit_ratio.
  for (const collectors::MetricSample& s : samples) {
    if (s.name != "kvwatch_engine_capacity_pages" || !(s.value >= 0)) continue;
    const auto capacity = static_cast<std::uint64_t>(s.value);
    for (std::size_t i = 0; i < options_.windows.size(); ++i) {
      Labels labels = s.labels;
      labels.emplace_back("window", options_.windows[i].name);
      m.Gauge("kvwatch_model_predicted_page_hit_ratio",
              "The window curve's page hit ratio at the engine's capacity (kvwatch_engine_capacity_pages of the "
              "collector), read at the largest bucket bound <= that capacity.",
              windows_->Window(i).PageHitRatio(capacity), labels);
    }
  }
  if (canaries_) AppendCanaryMetrics(m);
  if (!options_.capacities.empty()) {
    m.Gauge("kvwatch_cache_capacity_pages",
            "The replica's KV-cache capacity in pages: the largest of curve.capacities (the working-set-over-"
            "capacity alerts compare with it).",
            static_cast<double>(options_.capacities.back()));
  }
  if (alert_runner_) alert_runner_->AppendMetrics(&m);
  m.Counter("kvwatch_state_saves_total", "State checkpoints written.", static_cast<double>(state_saves_));
  m.Counter("kvwatch_state_save_errors_total", "State checkpoints that failed.", static_cast<double>(state_errors_));
  m.ProcessMetrics();
  return m.Serialize();
}

alerts::AlertInputs Agent::AlertInputsAt(alerts::TimePoint time) {
  const AlertInputSpec& spec = options_.alerts->inputs;
  AgentObservation o;
  {
    base::MutexLock lock(mu_);
    auto observe = [&](std::optional<std::size_t> i) NO_THREAD_SAFETY_ANALYSIS -> std::optional<WindowObservation> {
      // AlertInputsAt holds mu_.
      if (!i || *i >= windows_->size()) return std::nullopt;
      return ObserveWindow(windows_->Window(*i), WindowReport(*i), spec);
    };
    o.short_window = observe(spec.short_window);
    o.baseline_window = observe(spec.baseline_window);
    for (const auto& c : options_.collectors) c->AppendSamples(&o.samples);
  }
  o.tracked_pages_limit = static_cast<double>(options_.engine.max_pages);
  if (options_.bytes_per_token) {
    o.bytes_per_page = *options_.bytes_per_token * static_cast<double>(options_.page_tokens);
  }
  return MakeAlertInputs(spec, o, time);
}

std::string Agent::RenderCurveJson(const std::string& window) {
  base::MutexLock lock(mu_);
  for (std::size_t i = 0; i < options_.windows.size(); ++i) {
    if (options_.windows[i].name != window) continue;
    CurveApiContext context;
    context.window = window;
    context.window_seconds = options_.windows[i].seconds;
    context.replica = options_.replica;
    context.capacities = options_.capacities;
    context.tracked_pages = engine().tracked_pages();
    context.bucket_relative_error = std::exp2(1.0 / options_.buckets_per_octave) - 1;
    if (canaries_) {
      const std::size_t nc = canaries_->options().capacities.size();
      for (std::size_t k = 0; k < canaries_->size(); ++k) {
        const curve::PolicyTotals t = canaries_->Window(k, i);
        const curve::PolicyTotals engine = canaries_->Window(k % nc, i);
        context.policies.push_back({std::string(curve::PolicyName(canaries_->kind(k))), canaries_->capacity(k),
                                    t.PageHitRatio(),
                                    sampled() ? std::nullopt : std::optional<double>(t.RequestCoverage()),
                                    t.PageHitRatio() - engine.PageHitRatio(), k < nc});
      }
    }
    return RenderCurveApiJson(WindowReport(i), context);
  }
  return {};
}

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
    JsonWriter w;
    w.BeginObject();
    w.Key("windows");
    w.BeginArray();
    for (const WindowSpec& spec : options_.windows) w.String(spec.name);
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
    HttpResponse r;
    r.content_type = "application/json";
    const std::string window = req.Query("window").value_or(options_.windows.front().name);
    r.body = RenderCurveJson(window);
    if (r.body.empty()) {
      r.status = 404;
      JsonWriter w;
      w.BeginObject();
      w.Key("error");
      w.String("unknown window '" + window + "'");
      w.EndObject();
      r.body = w.Take();
    }
    return r;
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
    for (const WindowSpec& w : options_.windows) page.windows.push_back(w.name);
    r.content_type = kIndexPageContentType;
    r.headers.emplace_back("Content-Security-Policy", kIndexPageContentSecurityPolicy);
    r.body = RenderIndexPage(page);
    return r;
  });
}

}  // namespace kvwatch::agent
