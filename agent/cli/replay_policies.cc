#include "agent/cli/replay_policies.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "curve/tenants.h"

namespace kvwatch::agent {

namespace {

using Clock = std::chrono::steady_clock;

bool IsBest(curve::PolicyKind kind) { return kind != curve::PolicyKind::kBelady; }

// Checks the capacities and the priority rules, and readies the stored trace for
// the policies: its requests' priorities, and the next uses when one needs them.
base::Status PrepareTrace(curve::StoredTrace& trace, const PolicyReplayOptions& options) {
  using S = base::Status;
  for (std::uint64_t c : options.capacities) {
    if (c < 1) return S::Error("--capacities: a policy needs a capacity of at least 1 page, got 0");
  }
  if (options.capacities.empty()) return S::Error("--capacities: no capacity to simulate the policies at");
  auto rules = curve::ParsePriorityRules(options.priorities);
  if (!rules.ok()) return S::Error("--priority: " + rules.error());
  if (std::find(options.policies.begin(), options.policies.end(), curve::PolicyKind::kPriority) !=
      options.policies.end()) {
    if (rules.value().empty()) return S::Error("--priority: the priority policy needs at least one rule");
  }
  base::Status assigned = trace.AssignPriorities(rules.value());
  if (!assigned.ok()) return S::Error("--priority: " + assigned.error());
  if (std::any_of(options.policies.begin(), options.policies.end(), curve::NeedsFuture)) {
    trace.ComputeNextUse(options.touch_order);
  }
  return S::Ok();
}

// One run per policy x capacity, policy-major (PolicyReplayResult::runs' order).
std::vector<curve::PolicyOptions> PolicyJobs(const PolicyReplayOptions& options) {
  std::vector<curve::PolicyOptions> jobs;
  for (curve::PolicyKind kind : options.policies) {
    for (std::uint64_t c : options.capacities) {
      curve::PolicyOptions j;
      j.kind = kind;
      j.capacity = c;
      j.touch_order = options.touch_order;
      j.s3fifo_promotion_hits = options.s3fifo_promotion_hits;
      jobs.push_back(j);
    }
  }
  return jobs;
}

// Runs the jobs on result->threads threads into result->runs, reporting progress
// in page references from this thread; result->seconds is the stage's time. An
// error is a run's (the last to fail).
base::Status RunJobs(curve::StoredTrace& trace, const std::vector<curve::PolicyOptions>& jobs, double coverage_share,
                     const std::function<void(std::uint64_t, std::uint64_t)>& progress, PolicyReplayResult* result) {
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> done_refs{0};
  // The progress loop waits on `finished` (not a fixed sleep), so that the
  // stage's seconds are the work's: a 200 ms sleep put them in 0.2 s steps.
  unsigned running = result->threads;
  std::mutex running_mu;
  std::condition_variable finished;
  std::mutex error_mu;
  std::string error;
  const auto start = Clock::now();
  auto work = [&] {
    for (std::size_t j; (j = next.fetch_add(1)) < jobs.size();) {
      std::uint64_t reported = 0;
      auto run = curve::RunPolicy(trace, jobs[j], coverage_share, [&](std::uint64_t requests) {
        // Requests to references, roughly: progress only.
        const std::uint64_t refs = trace.size() == 0 ? 0 : requests * trace.page_refs() / trace.size();
        done_refs.fetch_add(refs - reported);
        reported = refs;
      });
      if (!run.ok()) {
        std::lock_guard<std::mutex> lock(error_mu);
        error = run.error();
        continue;
      }
      result->runs[j] = std::move(run.value());
    }
    {
      std::lock_guard<std::mutex> lock(running_mu);
      --running;
    }
    finished.notify_one();
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < result->threads; ++t) pool.emplace_back(work);
  const std::uint64_t total_refs = trace.page_refs() * jobs.size();
  for (std::unique_lock<std::mutex> lock(running_mu); running > 0;) {
    if (progress) {
      lock.unlock();
      progress(done_refs.load(), total_refs);
      lock.lock();
    }
    finished.wait_for(lock, std::chrono::milliseconds(200), [&] { return running == 0; });
  }
  for (auto& t : pool) t.join();
  result->seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!error.empty()) return base::Status::Error(error);
  return base::Status::Ok();
}

// The best online policy at capacity c and its gain over the LRU curve.
BestPolicy BestAt(const PolicyReplayOptions& options, const PolicyReplayResult& result,
                  const curve::CurveAccumulator& exact, std::size_t c) {
  const std::uint64_t cap = options.capacities[c];
  BestPolicy best;
  best.capacity_pages = cap;
  best.lru_page_hit_ratio = exact.PageHitRatio(cap);
  std::uint64_t best_hits = exact.PageHits(cap);
  best.policy = "lru";
  best.page_hit_ratio = best.lru_page_hit_ratio;
  for (std::size_t p = 0; p < options.policies.size(); ++p) {
    if (!IsBest(options.policies[p])) continue;
    const curve::PolicyRunResult& run = result.runs[p * options.capacities.size() + c];
    if (run.total.page_hits > best_hits) {
      best_hits = run.total.page_hits;
      best.policy = result.policies[p];
      best.page_hit_ratio = run.total.PageHitRatio();
    }
  }
  best.lru_capacity_for_same_hits = exact.CapacityForPageHits(best_hits);
  if (best.lru_capacity_for_same_hits) {
    best.capacity_saved_pages =
        static_cast<std::int64_t>(*best.lru_capacity_for_same_hits) - static_cast<std::int64_t>(cap);
    if (*best.capacity_saved_pages < 0) best.capacity_saved_pages = 0;
  }
  return best;
}

}  // namespace

base::Result<PolicyReplayResult> RunPolicies(curve::StoredTrace& trace, const PolicyReplayOptions& options,
                                             const curve::CurveAccumulator& exact,
                                             const std::function<void(std::uint64_t, std::uint64_t)>& progress) {
  using R = base::Result<PolicyReplayResult>;
  PolicyReplayResult result;
  for (curve::PolicyKind k : options.policies) result.policies.emplace_back(curve::PolicyName(k));
  result.capacities = options.capacities;
  result.decode_tokens_per_s = options.lifetime.decode_tokens_per_s;
  result.page_tokens = options.lifetime.page_tokens;
  result.priorities = options.priorities;
  result.s3fifo_promotion_hits = options.s3fifo_promotion_hits;
  if (base::Status prepared = PrepareTrace(trace, options); !prepared.ok()) return R::Error(prepared.error());
  result.tenant_names = trace.tenant_names();
  result.class_names = trace.class_names();

  const std::vector<curve::PolicyOptions> jobs = PolicyJobs(options);
  result.runs.resize(jobs.size());
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned threads =
      static_cast<unsigned>(std::min<std::size_t>(options.threads == 0 ? hw : options.threads, jobs.size()));
  result.threads = std::max(1u, threads);
  if (base::Status ran = RunJobs(trace, jobs, options.coverage_share, progress, &result); !ran.ok()) {
    return R::Error(ran.error());
  }
  RelabelTenants(&result);
  for (std::size_t c = 0; c < options.capacities.size(); ++c) result.best.push_back(BestAt(options, result, exact, c));
  return result;
}

void RelabelTenants(PolicyReplayResult* result) {
  if (result->tenant_names.size() <= 1) {  // only "": no request has a tenant
    result->tenant_names.clear();
    for (curve::PolicyRunResult& run : result->runs) run.by_tenant.clear();
    return;
  }
  std::map<std::string, std::size_t> index;  // label -> position, sorted
  for (const std::string& name : result->tenant_names) index.emplace(curve::SanitizeLabel(name), 0);
  std::vector<std::string> labels;
  for (auto& [label, position] : index) {
    position = labels.size();
    labels.push_back(label);
  }
  std::vector<std::size_t> to;
  for (const std::string& name : result->tenant_names) to.push_back(index.at(curve::SanitizeLabel(name)));
  for (curve::PolicyRunResult& run : result->runs) {
    std::vector<curve::PolicyTotals> merged(labels.size());
    for (std::size_t i = 0; i < run.by_tenant.size() && i < to.size(); ++i) merged[to[i]].Merge(run.by_tenant[i]);
    run.by_tenant = std::move(merged);
  }
  result->tenant_names = std::move(labels);
}

}  // namespace kvwatch::agent
