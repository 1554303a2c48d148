#include "agent/runtime/analysis.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <utility>

#include "agent/runtime/agent.h"
#include "base/byte_io.h"
#include "collectors/time_sanity.h"

namespace kvwatch::agent {

bool Sampled(const AgentOptions& o) { return o.sample_rate < 1.0 || o.sample_max_pages > 0; }
bool TenantsOn(const AgentOptions& o) { return o.tenants.enabled && !Sampled(o); }

namespace {

// The tenant and class accounting's options from the agent's.
curve::GroupAccountingOptions GroupOptions(const AgentOptions& o, const std::vector<std::uint64_t>* bounds) {
  curve::GroupAccountingOptions go;
  go.tenants = o.tenants;
  go.engine = o.engine;
  go.bounds = bounds;
  go.coverage_share = o.coverage_share;
  go.capacities = o.curve.capacities;  // sorted, distinct, 1..engine.max_pages (config/)
  go.bytes_per_token = o.bytes_per_token.value_or(0);
  go.page_tokens = o.page_tokens;
  go.windows_s = o.curve.windows.Seconds();
  go.classifier_max_chains = std::max<std::size_t>(o.engine.max_pages, 1024);
  return go;
}

// The exact engine's options: with tenants, the group decomposition. The runs
// layout of the page map: trace files number a request's pages consecutively
// (weka, Mooncake, `kvwatch synth`), which it finds one cache miss per run
// instead of one per page, and on hashed ids (KV events) it probes as the mixed
// layout does (docs/performance.md, "The page map's layout"). No number depends
// on it.
curve::EngineOptions ExactEngineOptions(const AgentOptions& o) {
  curve::EngineOptions e =
      TenantsOn(o) ? curve::GroupAccounting::SharedEngineOptions(GroupOptions(o, nullptr)) : o.engine;
  e.page_layout = curve::PageMapLayout::kRuns;
  return e;
}

// Bucket bounds: log-spaced to the tracked range, plus the replica's real cache
// sizes so the hit ratio there is exact.
std::vector<std::uint64_t> CurveBounds(const AgentOptions& o) {
  std::vector<std::uint64_t> bounds = curve::LogBucketBounds(o.engine.max_pages, o.curve.buckets_per_octave);
  bounds.insert(bounds.end(), o.curve.capacities.begin(), o.curve.capacities.end());
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  return bounds;
}

// Why a saved canaries checkpoint was refused: written in another layout
// version (an older build's; this one reads only its own), else by canaries of
// other options than curve.policies as configured now (or damaged).
std::string CanariesNotRestored(std::span<const std::uint8_t> saved) {
  const std::optional<std::uint32_t> version = curve::PolicyCanaries::CheckpointVersion(saved);
  const std::uint32_t written = curve::PolicyCanaries::CheckpointVersionWritten();
  if (version && *version != written) {
    return "the saved policy canaries are in checkpoint format " + std::to_string(*version) + ", " +
           (*version < written ? "older than" : "other than") + " the format " + std::to_string(written) +
           " this build reads";
  }
  return "the saved policy canaries do not fit curve.policies as configured now";
}

}  // namespace

// --- Canaries -------------------------------------------------------------------------

base::Result<std::unique_ptr<CanaryStage>> CanaryStage::Create(const curve::CanaryOptions& options,
                                                               std::function<void()> settling) {
  auto canaries = curve::PolicyCanaries::Create(options);
  if (!canaries.ok()) return base::Result<std::unique_ptr<CanaryStage>>::Error(canaries.error());
  return std::unique_ptr<CanaryStage>(new CanaryStage(options, std::move(settling), std::move(canaries).value()));
}

CanaryStage::CanaryStage(const curve::CanaryOptions& options, std::function<void()> settling,
                         std::unique_ptr<curve::PolicyCanaries> canaries)
    : options_(options), settling_(std::move(settling)) {
  base::MutexLock lock(mu_);
  canaries_ = std::move(canaries);
  Publish();
}

void CanaryStage::Add(const curve::Request& request, std::uint32_t unlimited_hits, double t,
                      const curve::RequestOutcome* exact) {
  base::MutexLock lock(mu_);
  // A full queue (the agent settles it before) would be settled by Add, unpublished:
  // settled here, it is published too.
  if (canaries_->Due()) SettleLocked();
  canaries_->Add(request, unlimited_hits, t, exact);
  ++queued_;
}

bool CanaryStage::Due() const {
  base::MutexLock lock(mu_);
  return canaries_->Due();
}

void CanaryStage::Settle() {
  base::MutexLock lock(mu_);
  SettleLocked();
}

void CanaryStage::SettleLocked() {
  if (queued_ == 0) return;
  if (settling_) settling_();
  canaries_->Settle();
  queued_ = 0;
  Publish();
}

void CanaryStage::Advance(double t) {
  base::MutexLock lock(mu_);
  SettleLocked();
  canaries_->Advance(t);
  Publish();  // slices may have left the windows
}

void CanaryStage::RecountMemory(double wall_now_s) {
  base::MutexLock lock(mu_);
  if (wall_now_s - memory_wall_ < kMemoryEvery_s) return;
  memory_bytes_ = canaries_->MemoryBytes();
  memory_wall_ = wall_now_s;
  Publish();
}

std::size_t CanaryStage::MemoryBytes() const {
  base::MutexLock lock(mu_);
  return canaries_->MemoryBytes();
}

std::shared_ptr<const CanaryStage::View> CanaryStage::view() const {
  base::MutexLock lock(view_mu_);
  return view_;
}

void CanaryStage::Serialize(std::vector<std::uint8_t>* out) {
  base::MutexLock lock(mu_);
  SettleLocked();  // published too: the readers' view does not lag what the checkpoint holds
  canaries_->Serialize(out);
}

bool CanaryStage::Deserialize(std::span<const std::uint8_t>* in) {
  base::MutexLock lock(mu_);
  SettleLocked();
  if (!canaries_->Deserialize(in)) return false;
  memory_wall_ = -std::numeric_limits<double>::infinity();  // recounted at the loop's next tick
  Publish();
  return true;
}

void CanaryStage::Reset() {
  auto fresh = curve::PolicyCanaries::Create(options_);  // the options created the canaries once already
  base::MutexLock lock(mu_);
  if (fresh.ok()) canaries_ = std::move(fresh).value();
  queued_ = 0;
  memory_wall_ = -std::numeric_limits<double>::infinity();
  Publish();
}

void CanaryStage::Publish() {
  const curve::PolicyCanaries& c = *canaries_;
  auto view = std::make_shared<View>();
  // The engine's policy is the canaries' first (CanaryRole, snapshot.h).
  const curve::PolicyKind engine_policy = options_.policies.front();
  for (std::size_t k = 0; k < c.size(); ++k) {
    AnalysisSnapshot::Canary canary{c.kind(k), c.capacity(k), CanaryRole::kAlternative, 0, c.Lifetime(k), {}};
    if (canary.kind == engine_policy) canary.role = CanaryRole::kEnginePolicy;
    for (std::size_t w = 0; w < options_.windows_s.size(); ++w) canary.windows.push_back(c.Window(k, w));
    view->canaries.push_back(std::move(canary));
  }
  // Each canary's baseline: the engine policy's canary at its capacity.
  for (AnalysisSnapshot::Canary& canary : view->canaries) {
    const auto baseline = std::find_if(view->canaries.begin(), view->canaries.end(), [&](const auto& e) {
      return e.role == CanaryRole::kEnginePolicy && e.capacity == canary.capacity;
    });
    canary.baseline = static_cast<std::size_t>(baseline - view->canaries.begin());
  }
  if (!std::isinf(memory_wall_)) view->memory_bytes = memory_bytes_;
  base::MutexLock lock(view_mu_);
  view_ = std::move(view);
}

// --- Creation -------------------------------------------------------------------------

base::Result<std::unique_ptr<Analysis>> Analysis::Create(const AgentOptions& options) {
  std::unique_ptr<Analysis> analysis(new Analysis(options));
  if (base::Status s = analysis->Init(); !s.ok()) return base::Result<std::unique_ptr<Analysis>>::Error(s.error());
  return analysis;
}

Analysis::Analysis(const AgentOptions& options)
    : options_(options), bounds_(CurveBounds(options)), engine_(ExactEngineOptions(options)) {
  if (Sampled(options_)) {
    sampled_ = std::make_unique<curve::SampledEngine>(options_.engine, options_.sample_rate, options_.sample_max_pages);
  }
}

base::Status Analysis::Init() {
  lifetime_ = curve::BucketedCurve(&bounds_, options_.coverage_share);
  if (TenantsOn(options_)) {
    if (base::Status s = options_.tenants.Validate("tenants."); !s.ok()) return s;
    groups_ = std::make_unique<curve::GroupAccounting>(GroupOptions(options_, &bounds_));
  }
  windows_ = std::make_unique<curve::WindowedCurves>(options_.curve.windows.Seconds(), &bounds_,
                                                     options_.coverage_share, sampled_ != nullptr);
  load_ = std::make_unique<curve::KvLoadWindows>(options_.curve.windows.Seconds());
  if (options_.hybrid && !sampled_) {
    hybrid_ = std::make_unique<HybridAnalysis>(*options_.hybrid, options_.curve.windows.Seconds(),
                                               options_.curve.buckets_per_octave, options_.curve.capacities,
                                               BytesPerPage(options_).value_or(0), options_.coverage_share);
  } else if (options_.hybrid) {
    AgentLog(
        "the model is hybrid, but the engine samples (engine.sample_rate, engine.sample_max_pages): the "
        "hybrid curve (kvwatch_hybrid_*) needs the exact engine and is off");
  }
  if (options_.canaries) {
    curve::CanaryOptions co = *options_.canaries;
    co.windows_s = options_.curve.windows.Seconds();
    co.capacities = options_.curve.capacities;
    co.touch_order = options_.engine.touch_order;
    co.coverage_share = options_.coverage_share;
    // The lru canaries read the exact engine's outcome (same requests, same touch
    // order) instead of simulating LRU a second time; config/ keeps every
    // capacity within engine.max_pages, checked again here for options built in code.
    co.lru_from_engine = !sampled_ && std::all_of(co.capacities.begin(), co.capacities.end(),
                                                  [&](std::uint64_t c) { return c <= options_.engine.max_pages; });
    auto canaries = CanaryStage::Create(co, options_.canaries_settling);
    if (!canaries.ok()) return base::Status::Error("curve.policies: " + canaries.error());
    canaries_ = std::move(canaries).value();
  }
  return base::Status::Ok();
}

// --- Ingestion ------------------------------------------------------------------------

void Analysis::Ingest(const curve::Request& request, double wall) {
  // A timestamp beyond wall + curve.max_clock_skew never drives the clock (agent.h, "Clock").
  const bool timed = request.has_timestamp() &&
                     collectors::CheckTimestamp(request.timestamp_s, wall, options_.curve.max_clock_skew_s) ==
                         collectors::TimestampVerdict::kOk;
  const double t = timed ? request.timestamp_s : ClockNow(wall);
  std::uint64_t weight = 1;
  curve::GroupTags tags{};
  if (groups_) tags = groups_->Classify(request);
  // Every request counts in the load windows, sampled or not; its class label is
  // the folder's (tenants on), so the quantiles' series stay bounded.
  curve::KvLoadRequest load{request.input_tokens, request.output_tokens,
                            groups_ ? groups_->class_label(tags[1]) : std::string()};
  load_->Add(load, t);
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
    engine_.Process(request.pages, tags, &outcome_);
  } else {
    engine_.Process(request.pages, &outcome_);
  }
  if (hybrid_) hybrid_->Ingest(request, t);
  // The _sum of the histograms: in sampled mode, in full-stream units.
  const double unit = sampled_ ? static_cast<double>(curve::SampledEngine::kWeightUnit) : 1.0;
  const bool sampled = sampled_ != nullptr;
  auto add_sum = [&](std::uint64_t* sum, std::uint32_t c) {
    *sum += sampled
                ? static_cast<std::uint64_t>(std::llround(static_cast<double>(c) * static_cast<double>(weight) / unit))
                : c;
  };
  for (std::size_t i = 0; i < outcome_.size(); ++i) {
    const std::uint32_t c = outcome_.hit_capacity(i);
    if (c == 0 || c > options_.engine.max_pages) break;
    add_sum(&hit_capacity_sum_, c);
  }
  const std::uint32_t r = outcome_.Requirement(options_.coverage_share);
  if (r != curve::kBeyondTracked) add_sum(&required_capacity_sum_, r);
  windows_->Add(outcome_, t, weight, &lifetime_);  // the lifetime curve and every window, in one pass
  if (groups_) groups_->Add(request, tags, outcome_, t);
  // A sampled engine does not know the request's unlimited hits: the canaries'
  // coverage is then not exported (their page hits are exact either way).
  if (canaries_) canaries_->Add(request, sampled_ ? 0 : outcome_.unlimited_hits, t, sampled_ ? nullptr : &outcome_);
  last_record_time_ = windows_->now();
  last_record_wall_ = wall;
}

void Analysis::Advance(double wall_now_s) {
  if (last_record_time_ < 0) return;
  windows_->Advance(ClockNow(wall_now_s));
  load_->Advance(ClockNow(wall_now_s));
  if (canaries_) canaries_->Advance(ClockNow(wall_now_s));
  if (groups_) groups_->Advance(ClockNow(wall_now_s));
  if (hybrid_) hybrid_->Advance(ClockNow(wall_now_s));
}

double Analysis::ClockNow(double wall_now_s) const {
  if (last_record_time_ < 0) return wall_now_s;
  return last_record_time_ + std::max(0.0, wall_now_s - last_record_wall_);
}

// --- Snapshot -------------------------------------------------------------------------

curve::BucketedCurve Analysis::LifetimeCurve() const {
  curve::BucketedCurve c = lifetime_;
  // SHARDS-adj: every page reference, sampled or not, stands for kWeightUnit;
  // and so does every request.
  if (sampled_) {
    c.AdjustReferences(all_page_refs_ * curve::SampledEngine::kWeightUnit);
    c.NormalizeRequests(all_requests_ * curve::SampledEngine::kWeightUnit);
  }
  return c;
}

AnalysisSnapshot Analysis::TakeSnapshot(bool windows, bool canaries) const {
  AnalysisSnapshot s;
  s.sampled = sampled_ != nullptr;
  s.lifetime = LifetimeCurve();
  s.hit_capacity_sum = hit_capacity_sum_;
  s.required_capacity_sum = required_capacity_sum_;
  s.tracked_pages = engine().tracked_pages();
  s.sample_rate = sampled_ ? sampled_->rate() : 1.0;
  s.engine_memory_bytes = sampled_ ? sampled_->MemoryBytes() : engine_.MemoryBytes();
  s.late_requests = windows_->late_requests();
  if (windows) {
    for (std::size_t i = 0; i < windows_->size(); ++i) s.windows.push_back(windows_->Window(i));
    for (std::size_t i = 0; i < load_->size(); ++i) s.load.push_back({load_->Window(i), load_->Span(i)});
  }
  if (canaries && canaries_) {
    // As the ingesting thread last published them (CanaryStage): never waits for
    // their simulations.
    const std::shared_ptr<const CanaryStage::View> view = canaries_->view();
    s.has_canaries = true;
    s.canaries = view->canaries;
    s.canary_memory_bytes = view->memory_bytes ? *view->memory_bytes : canaries_->MemoryBytes();
  }
  if (groups_) s.groups = groups_->Snapshot(windows);
  if (hybrid_) {
    s.hybrid = hybrid_->TakeSnapshot(windows, options_.curve.page_hit_targets, options_.curve.coverage_targets);
  }
  s.clock_repairs = clock_repairs_;
  return s;
}

// --- State ----------------------------------------------------------------------------

std::string Analysis::ConfigFingerprint() const {
  std::ostringstream f;
  f << "max_pages=" << options_.engine.max_pages
    << " touch=" << (options_.engine.touch_order == curve::TouchOrder::kTailFirst ? "tail" : "head")
    << " share=" << options_.coverage_share << " bounds=" << bounds_.size() << ":" << bounds_.back() << " windows=";
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

void Analysis::Serialize(StateParts* parts) const {
  parts->fingerprint = ConfigFingerprint();
  parts->engine = sampled_ ? sampled_->Serialize() : engine_.Serialize();
  lifetime_.Serialize(&parts->curves);
  base::AppendPod(&parts->curves, hit_capacity_sum_);
  base::AppendPod(&parts->curves, required_capacity_sum_);
  windows_->Serialize(&parts->curves);
  base::AppendPod(&parts->curves, last_record_time_);
  base::AppendPod(&parts->curves, last_record_wall_);
  if (sampled_) {
    base::AppendPod(&parts->curves, all_page_refs_);
    base::AppendPod(&parts->curves, all_requests_);
  }
  if (groups_) groups_->Serialize(&parts->groups);
  if (canaries_) canaries_->Serialize(&parts->canaries);
  load_->Serialize(&parts->load);
  if (hybrid_) hybrid_->Serialize(&parts->hybrid);
}

std::string Analysis::Restore(const StateParts& parts) {
  if (parts.fingerprint != ConfigFingerprint()) return "saved with other settings: " + parts.fingerprint;
  if (!(sampled_ ? sampled_->Deserialize(parts.engine) : engine_.Deserialize(parts.engine))) return "engine state";
  std::span<const std::uint8_t> in(parts.curves);
  if (!lifetime_.Deserialize(&in) || !base::ReadPod(&in, &hit_capacity_sum_) ||
      !base::ReadPod(&in, &required_capacity_sum_) || !windows_->Deserialize(&in) ||
      !base::ReadPod(&in, &last_record_time_) || !base::ReadPod(&in, &last_record_wall_) ||
      (sampled_ && (!base::ReadPod(&in, &all_page_refs_) || !base::ReadPod(&in, &all_requests_))) || !in.empty()) {
    return "curves";
  }
  if (groups_) {
    std::span<const std::uint8_t> g(parts.groups);
    if (!groups_->Deserialize(&g) || !g.empty()) return "tenant and class groups";
  }
  if (!parts.load.empty()) {
    std::span<const std::uint8_t> l(parts.load);
    if (!load_->Deserialize(&l) || !l.empty()) return "KV load windows";
  }
  // The hybrid curve likewise: restored when its part fits the configured model,
  // else it alone starts empty (a version 2 file, a model that became hybrid).
  if (hybrid_) {
    const std::string why = parts.hybrid.empty() ? "none saved" : hybrid_->Restore(parts.hybrid);
    if (!why.empty()) {
      AgentLog("state: the hybrid curve starts empty (" + why + ")");
      hybrid_->Reset();
    }
  }
  // The canaries are restored when their settings are unchanged; otherwise they
  // alone start fresh (their numbers are not the curves').
  if (canaries_ && !parts.canaries.empty()) {
    std::span<const std::uint8_t> c(parts.canaries);
    if (!canaries_->Deserialize(&c) || !c.empty()) {
      AgentLog("state: " + CanariesNotRestored(parts.canaries) + "; the canaries start cold");
      canaries_->Reset();
    }
  }
  return {};
}

void Analysis::Reset() {
  engine_.Clear();
  if (sampled_) sampled_->Clear();
  all_page_refs_ = all_requests_ = 0;
  lifetime_.Clear();
  ResetWindows();  // the load windows too
  hit_capacity_sum_ = required_capacity_sum_ = 0;
  if (groups_) groups_->Clear();
  if (hybrid_) hybrid_->Reset();
  if (canaries_) canaries_->Reset();
}

void Analysis::ResetWindows() {
  windows_ = std::make_unique<curve::WindowedCurves>(options_.curve.windows.Seconds(), &bounds_,
                                                     options_.coverage_share, sampled_ != nullptr);
  if (groups_) groups_->ResetWindows();
  if (hybrid_) hybrid_->ResetWindows();
  load_ = std::make_unique<curve::KvLoadWindows>(options_.curve.windows.Seconds());
  last_record_time_ = -1;
  last_record_wall_ = 0;
}

void Analysis::RepairClock(double wall_now_s) {
  // A windows' clock beyond the allowed skew (a state saved before records from
  // the future were rejected, or a host clock set back) would leave every later
  // record out of every window: the windows restart, the lifetime counters stay.
  if (last_record_time_ < 0) return;
  const double now = ClockNow(wall_now_s);
  if (now <= wall_now_s + options_.curve.max_clock_skew_s) return;
  AgentLog("state: the windows' clock was " + std::to_string(now - wall_now_s) +
           " s ahead of the wall clock (more than curve.max_clock_skew); the windows restart, lifetime counters kept");
  ResetWindows();
  if (canaries_) canaries_->Reset();
  ++clock_repairs_;
}

}  // namespace kvwatch::agent
