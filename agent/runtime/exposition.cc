#include "agent/runtime/exposition.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "agent/render/text_format.h"
#include "agent/runtime/agent.h"
#include "agent/runtime/group_metrics.h"
#include "agent/runtime/hybrid_metrics.h"
#include "agent/runtime/load_metrics.h"
#include "agent/runtime/metrics.h"
#include "agent/runtime/version.h"

namespace kvwatch::agent {

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
constexpr base::MetricDef kWorkingSetBytes{"kvwatch_working_set_bytes", MetricType::kGauge,
                                           "The working set in bytes per GPU rank (pages x tokens x bytes/token).",
                                           "window,target,fraction"};
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
constexpr base::MetricDef kCollectorLastSuccess{"kvwatch_collector_last_success_timestamp_seconds", MetricType::kGauge,
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
constexpr base::MetricDef kStateSaving{
    "kvwatch_state_saving", MetricType::kGauge,
    "1 while the agent saves its state to state.path; 0 when start-up could not set a rejected state file aside "
    "(the agent cannot replace it, so it runs without saving; the log says why)."};
constexpr base::MetricDef kWebReload{
    "kvwatch_web_config_last_reload_successful", MetricType::kGauge,
    "With web.config_file: 1 when the last SIGHUP's reload of the web config applied (or none came yet), 0 when "
    "it failed and the previous web config stays in force."};
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
                                        "Memory of the policy canaries' simulations, recounted every 10 s."};

}  // namespace

base::MetricDefs AgentMetricDefs() {
  return {&kBuildInfo,         &kPageHitCapacity,
          &kRequiredCapacity,  &kRequests,
          &kPageReferences,    &kColdMisses,
          &kBeyondTracked,     &kReusedTokens,
          &kTrackedPages,      &kSampleRate,
          &kTrackedPagesLimit, &kEngineMemory,
          &kLateRequests,      &kWindowRequests,
          &kUnlimitedHitRatio, &kWorkingSetPages,
          &kWorkingSetBytes,   &kKneePages,
          &kKneeBytes,         &kPageHitRatio,
          &kCoverageRatio,     &kBytesPerPage,
          &kCollectorUp,       &kCollectorRecords,
          &kCollectorDropped,  &kCollectorLastSuccess,
          &kCollectorErrors,   &kPredictedHitRatio,
          &kCacheCapacity,     &kStateSaves,
          &kStateSaveErrors,   &kStateSaveSeconds,
          &kStateRestore,      &kStateSaving,
          &kWebReload,         &kClockRepairs};
}

base::MetricDefs CanaryMetricDefs() {
  return {&kPolicyHitRatio, &kPolicyCoverage, &kPolicyGain, &kPolicyHits, &kPolicyPreemptions, &kCanaryMemory};
}

namespace {

// The canaries' gauges: series = canaries (policies x capacities) x windows per
// name, bounded by curve.policies' limit of 64 canaries.
void AppendCanaryMetrics(MetricsBuilder& m, const AgentOptions& options, const AnalysisSnapshot& s) {
  for (std::size_t w = 0; w < options.curve.windows.size(); ++w) {
    for (const AnalysisSnapshot::Canary& c : s.canaries) {
      const curve::PolicyTotals& t = c.windows[w];
      const Labels labels = {{"policy", std::string(curve::PolicyName(c.kind))},
                             {"capacity_pages", std::to_string(c.capacity)},
                             {"window", options.curve.windows[w].name}};
      m.Add(kPolicyHitRatio, t.PageHitRatio(), labels);
      // Coverage needs each request's unlimited hits, which a sampled engine
      // does not know: absent rather than wrong when sampling.
      if (!s.sampled) m.Add(kPolicyCoverage, t.RequestCoverage(), labels);
      // The gain over the engine policy's canary at the same capacity (0 for that canary).
      const curve::PolicyTotals& engine = s.canaries[c.baseline].windows[w];
      m.Add(kPolicyGain, t.PageHitRatio() - engine.PageHitRatio(), labels);
    }
  }
  for (const AnalysisSnapshot::Canary& c : s.canaries) {
    const Labels labels = {{"policy", std::string(curve::PolicyName(c.kind))},
                           {"capacity_pages", std::to_string(c.capacity)}};
    m.Add(kPolicyHits, static_cast<double>(c.lifetime.page_hits), labels);
    if (c.kind == curve::PolicyKind::kVllm || c.kind == curve::PolicyKind::kSglang) {
      m.Add(kPolicyPreemptions, static_cast<double>(c.lifetime.preemptions), labels);
    }
  }
  m.Add(kCanaryMemory, static_cast<double>(s.canary_memory_bytes));
}

}  // namespace

std::string RenderMetricsText(const AgentOptions& options, const AgentSnapshot& snapshot, const AlertRunner* alerts) {
  const AnalysisSnapshot& s = snapshot.analysis;
  MetricsBuilder m;
  m.Add(kBuildInfo, 1, {{"version", Version()}, {"revision", Revision()}});

  // Lifetime histograms: cumulative over the agent's life (and restored across
  // restarts), so Prometheus computes any window with increase().
  const curve::BucketedCurve& lifetime = s.lifetime;
  const std::vector<std::uint64_t>& bounds = lifetime.bounds();
  // Histogram counts are integers: full-stream estimates are rounded when sampled.
  auto whole = [&s](std::uint64_t weighted) { return static_cast<std::uint64_t>(std::llround(s.Count(weighted))); };
  std::vector<std::pair<double, std::uint64_t>> hit_buckets, req_buckets;
  std::uint64_t hit_sum = 0, covered_sum = 0;
  for (std::size_t j = 0; j < bounds.size(); ++j) {
    hit_sum += lifetime.hits()[j];
    covered_sum += lifetime.required()[j];
    hit_buckets.emplace_back(static_cast<double>(bounds[j]), whole(hit_sum));
    req_buckets.emplace_back(static_cast<double>(bounds[j]), whole(covered_sum));
  }
  m.Histogram(kPageHitCapacity, hit_buckets, whole(hit_sum), static_cast<double>(s.hit_capacity_sum));
  m.Histogram(kRequiredCapacity, req_buckets, whole(lifetime.requests()), static_cast<double>(s.required_capacity_sum));
  m.Add(kRequests, s.Count(lifetime.requests()));
  m.Add(kPageReferences, s.Count(lifetime.page_refs()));
  m.Add(kColdMisses, s.Count(lifetime.cold_misses()));
  m.Add(kBeyondTracked, s.Count(lifetime.beyond_tracked()));
  m.Add(kReusedTokens, s.Count(lifetime.unlimited_page_hits()) * static_cast<double>(options.page_tokens));
  m.Add(kTrackedPages, static_cast<double>(s.tracked_pages));
  m.Add(kSampleRate, s.sample_rate);
  m.Add(kTrackedPagesLimit, static_cast<double>(options.engine.max_pages));
  m.Add(kEngineMemory, static_cast<double>(s.engine_memory_bytes));
  m.Add(kLateRequests, static_cast<double>(s.late_requests));
  AppendCapacityMisses(m, CapacityMissesOf(lifetime, options.curve.capacities, s.Count(1)));

  // Windows.
  for (std::size_t i = 0; i < options.curve.windows.size(); ++i) {
    const std::string& w = options.curve.windows[i].name;
    const curve::CurveReport r = WindowReport(options, s.windows[i], s.sampled);
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
      if (options.curve.capacities.empty()) break;
      const Labels labels = {{"window", w}, {"capacity_pages", std::to_string(p.capacity_pages)}};
      m.Add(kPageHitRatio, p.page_hit_ratio, labels);
      m.Add(kCoverageRatio, p.request_coverage, labels);
    }
  }
  if (const std::optional<double> bytes_per_page = BytesPerPage(options)) m.Add(kBytesPerPage, *bytes_per_page);

  // Collectors, as of their last poll.
  for (const CollectorCopy& c : snapshot.collectors) {
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
  for (const CollectorCopy& c : snapshot.collectors) {
    for (const collectors::MetricSample& sample : c.samples) {
      if (sample.histogram) {
        m.Histogram({sample.name, MetricType::kHistogram, sample.help, "*"}, sample.buckets, sample.count, sample.value,
                    sample.labels);
        continue;
      }
      const base::MetricDef def{sample.name, sample.counter ? MetricType::kCounter : MetricType::kGauge, sample.help,
                                "*"};
      m.Add(def, sample.value, sample.labels);
    }
  }
  // The curve's prediction at the engine's actual capacity, beside the engine's
  // observed kvwatch_engine_prefix_cache_hit_ratio.
  for (const CollectorCopy& c : snapshot.collectors) {
    if (!c.signals.capacity_pages || !(*c.signals.capacity_pages >= 0)) continue;
    const auto capacity = static_cast<std::uint64_t>(*c.signals.capacity_pages);
    for (std::size_t i = 0; i < options.curve.windows.size(); ++i) {
      m.Add(kPredictedHitRatio, s.windows[i].PageHitRatio(capacity),
            {{"collector", c.name}, {"window", options.curve.windows[i].name}});
    }
  }
  for (const CollectorCopy& c : snapshot.collectors) AppendRunningKv(m, c.name, c.signals, BytesPerPage(options));
  if (s.groups) {
    std::vector<std::string> names;
    for (const WindowSpec& w : options.curve.windows) names.push_back(w.name);
    AppendGroupMetrics(m, *s.groups, names);
  }
  AppendLoadMetrics(m, options, snapshot);
  AppendHybridMetrics(m, options, snapshot);
  if (s.has_canaries) AppendCanaryMetrics(m, options, s);
  if (!options.curve.capacities.empty()) m.Add(kCacheCapacity, static_cast<double>(options.curve.capacities.back()));
  if (alerts) alerts->AppendMetrics(&m);
  const StateCounters& state = snapshot.state;
  m.Add(kStateSaves, static_cast<double>(state.saves));
  m.Add(kStateSaveSeconds, state.last_save_seconds);
  if (!options.state_path.empty()) {
    for (const char* outcome : {"none", "restored", "rejected"}) {
      m.Add(kStateRestore, state.restore_result == outcome ? 1 : 0, {{"outcome", outcome}});
    }
    m.Add(kStateSaving, state.saving ? 1 : 0);
  }
  if (!options.web_config_file.empty()) m.Add(kWebReload, state.web_reload_ok ? 1 : 0);
  m.Add(kClockRepairs, static_cast<double>(s.clock_repairs));
  m.Add(kStateSaveErrors, static_cast<double>(state.errors));
  m.ProcessMetrics();
  return m.Serialize();
}

}  // namespace kvwatch::agent
