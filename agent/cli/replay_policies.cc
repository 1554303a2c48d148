#include "agent/cli/replay_policies.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "agent/render/text_format.h"
#include "curve/tenants.h"

namespace kvwatch::agent {

namespace {

using Clock = std::chrono::steady_clock;

std::string CsvQuote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

bool IsBest(curve::PolicyKind kind) { return kind != curve::PolicyKind::kBelady; }

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
  for (std::uint64_t c : options.capacities) {
    if (c < 1) return R::Error("--capacities: a policy needs a capacity of at least 1 page, got 0");
  }
  if (options.capacities.empty()) return R::Error("--capacities: no capacity to simulate the policies at");
  auto rules = curve::ParsePriorityRules(options.priorities);
  if (!rules.ok()) return R::Error("--priority: " + rules.error());
  if (std::find(options.policies.begin(), options.policies.end(), curve::PolicyKind::kPriority) !=
      options.policies.end()) {
    if (rules.value().empty()) return R::Error("--priority: the priority policy needs at least one rule");
  }
  base::Status assigned = trace.AssignPriorities(rules.value());
  if (!assigned.ok()) return R::Error("--priority: " + assigned.error());
  if (std::any_of(options.policies.begin(), options.policies.end(), curve::NeedsFuture)) {
    trace.ComputeNextUse(options.touch_order);
  }
  result.tenant_names = trace.tenant_names();
  result.class_names = trace.class_names();

  struct Job {
    curve::PolicyOptions options;
  };
  std::vector<Job> jobs;
  for (curve::PolicyKind kind : options.policies) {
    for (std::uint64_t c : options.capacities) {
      Job j;
      j.options.kind = kind;
      j.options.capacity = c;
      j.options.touch_order = options.touch_order;
      j.options.s3fifo_promotion_hits = options.s3fifo_promotion_hits;
      jobs.push_back(j);
    }
  }
  result.runs.resize(jobs.size());
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned threads =
      static_cast<unsigned>(std::min<std::size_t>(options.threads == 0 ? hw : options.threads, jobs.size()));
  result.threads = std::max(1u, threads);
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> done_refs{0};
  // The progress loop waits on `finished` (not a fixed sleep), so that the
  // stage's seconds are the work's: a 200 ms sleep put them in 0.2 s steps.
  unsigned running = result.threads;
  std::mutex running_mu;
  std::condition_variable finished;
  std::mutex error_mu;
  std::string error;
  const auto start = Clock::now();
  auto work = [&] {
    for (std::size_t j; (j = next.fetch_add(1)) < jobs.size();) {
      std::uint64_t reported = 0;
      auto run = curve::RunPolicy(trace, jobs[j].options, options.coverage_share, [&](std::uint64_t requests) {
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
      result.runs[j] = std::move(run.value());
    }
    {
      std::lock_guard<std::mutex> lock(running_mu);
      --running;
    }
    finished.notify_one();
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < result.threads; ++t) pool.emplace_back(work);
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
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!error.empty()) return R::Error(error);
  RelabelTenants(&result);

  // The best online policy per capacity and its gain over the LRU curve.
  for (std::size_t c = 0; c < options.capacities.size(); ++c) {
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
    result.best.push_back(best);
  }
  return result;
}

namespace {

void WriteTotals(base::JsonWriter& w, const curve::PolicyTotals& t, std::uint64_t page_tokens) {
  w.Key("requests");
  w.Uint(t.requests);
  w.Key("page_refs");
  w.Uint(t.page_refs);
  w.Key("page_hits");
  w.Uint(t.page_hits);
  w.Key("page_hit_ratio");
  w.Number(t.PageHitRatio());
  w.Key("request_coverage");
  w.Number(t.RequestCoverage());
  w.Key("reused_tokens");
  w.Uint(t.page_hits * page_tokens);
  w.Key("preemptions");
  w.Uint(t.preemptions);
}

void WriteGroups(base::JsonWriter& w, const char* key, const char* name_key, const std::vector<std::string>& names,
                 const std::vector<curve::PolicyTotals>& totals, std::uint64_t page_tokens) {
  w.Key(key);
  w.BeginArray();
  for (std::size_t i = 0; i < names.size() && i < totals.size(); ++i) {
    if (totals[i].requests == 0) continue;
    w.BeginObject();
    w.Key(name_key);
    w.String(names[i]);
    WriteTotals(w, totals[i], page_tokens);
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

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

void WritePoliciesJson(base::JsonWriter& w, const PolicyReplayResult& r) {
  w.BeginObject();
  w.Key("names");
  w.BeginArray();
  for (const auto& p : r.policies) w.String(p);
  w.EndArray();
  w.Key("capacities");
  w.BeginArray();
  for (std::uint64_t c : r.capacities) w.Uint(c);
  w.EndArray();
  w.Key("decode_tokens_per_second");
  w.Number(r.decode_tokens_per_s);
  w.Key("priorities");
  w.String(r.priorities);
  w.Key("s3fifo_promotion_hits");
  w.Uint(r.s3fifo_promotion_hits);
  w.Key("results");
  w.BeginArray();
  for (const curve::PolicyRunResult& run : r.runs) {
    w.BeginObject();
    w.Key("policy");
    w.String(curve::PolicyName(run.kind));
    w.Key("capacity_pages");
    w.Uint(run.capacity);
    WriteTotals(w, run.total, r.page_tokens);
    WriteGroups(w, "tenants", "tenant", r.tenant_names, run.by_tenant, r.page_tokens);
    WriteGroups(w, "classes", "class", r.class_names, run.by_class, r.page_tokens);
    w.EndObject();
  }
  w.EndArray();
  w.Key("best");
  w.BeginArray();
  for (const BestPolicy& b : r.best) {
    w.BeginObject();
    w.Key("capacity_pages");
    w.Uint(b.capacity_pages);
    w.Key("policy");
    w.String(b.policy);
    w.Key("page_hit_ratio");
    w.Number(b.page_hit_ratio);
    w.Key("lru_page_hit_ratio");
    w.Number(b.lru_page_hit_ratio);
    w.Key("lru_capacity_for_same_hits");
    w.Optional(b.lru_capacity_for_same_hits);
    w.Key("capacity_saved_pages");
    if (b.capacity_saved_pages) {
      w.Number(static_cast<double>(*b.capacity_saved_pages));
    } else {
      w.Null();
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("threads");
  w.Uint(r.threads);
  w.Key("seconds");
  w.Number(r.seconds);
  w.EndObject();
}

std::string FormatPoliciesTable(const PolicyReplayResult& r) {
  std::ostringstream out;
  const std::size_t nc = r.capacities.size();
  out << "\neviction policies (" << r.threads << " threads, " << Fixed(r.seconds, 1) << " s; sglang and vllm: decode "
      << FractionLabel(r.decode_tokens_per_s) << " tokens/s, generated pages take capacity)\n";
  out << Pad("pages", 12) << "  " << Pad("policy", 15, true) << Pad("page hit", 10) << Pad("coverage", 10)
      << Pad("reused tokens", 16) << Pad("preemptions", 13) << "\n";
  for (std::size_t c = 0; c < nc; ++c) {
    for (std::size_t p = 0; p < r.policies.size(); ++p) {
      const curve::PolicyRunResult& run = r.runs[p * nc + c];
      out << Pad(Grouped(static_cast<double>(run.capacity)), 12) << "  " << Pad(r.policies[p], 15, true)
          << Pad(Fixed(run.total.PageHitRatio(), 4), 10) << Pad(Fixed(run.total.RequestCoverage(), 4), 10)
          << Pad(Grouped(static_cast<double>(run.total.page_hits * r.page_tokens)), 16)
          << Pad(run.kind == curve::PolicyKind::kVllm || run.kind == curve::PolicyKind::kSglang
                     ? Grouped(static_cast<double>(run.total.preemptions))
                     : "-",
                 13)
          << "\n";
    }
  }
  out << "\nbest online policy per capacity (belady is the offline reference), against the LRU curve:\n";
  out << Pad("pages", 12) << "  " << Pad("best", 15, true) << Pad("page hit", 10) << Pad("lru", 10)
      << Pad("lru pages for same hits", 25) << Pad("pages saved", 13) << "\n";
  for (const BestPolicy& b : r.best) {
    out << Pad(Grouped(static_cast<double>(b.capacity_pages)), 12) << "  " << Pad(b.policy, 15, true)
        << Pad(Fixed(b.page_hit_ratio, 4), 10) << Pad(Fixed(b.lru_page_hit_ratio, 4), 10)
        << Pad(b.lru_capacity_for_same_hits ? Grouped(static_cast<double>(*b.lru_capacity_for_same_hits))
                                            : "beyond tracked",
               25)
        << Pad(b.capacity_saved_pages ? Grouped(static_cast<double>(*b.capacity_saved_pages)) : "-", 13) << "\n";
  }
  // Per class (few), and per tenant for the largest ten tenants.
  auto groups = [&](const char* title, const std::vector<std::string>& names, bool tenants) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (r.runs.empty() || (tenants ? r.runs[0].by_tenant : r.runs[0].by_class)[i].requests == 0) continue;
      order.push_back(i);
    }
    if (order.empty()) return;
    auto refs = [&](std::size_t i) { return (tenants ? r.runs[0].by_tenant : r.runs[0].by_class)[i].page_refs; };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return refs(a) > refs(b); });
    const std::size_t shown = std::min<std::size_t>(order.size(), 10);
    out << "\npage hit ratio per " << title;
    if (shown < order.size()) out << " (the " << shown << " largest of " << order.size() << "; all in JSON and CSV)";
    out << ":\n" << Pad(title, 16, true) << Pad("pages", 12);
    for (const auto& p : r.policies) out << Pad(p.substr(0, 9), 10);
    out << "\n";
    for (std::size_t k = 0; k < shown; ++k) {
      const std::size_t i = order[k];
      for (std::size_t c = 0; c < nc; ++c) {
        out << Pad(names[i].substr(0, 15), 16, true) << Pad(Grouped(static_cast<double>(r.capacities[c])), 12);
        for (std::size_t p = 0; p < r.policies.size(); ++p) {
          const curve::PolicyRunResult& run = r.runs[p * nc + c];
          out << Pad(Fixed((tenants ? run.by_tenant : run.by_class)[i].PageHitRatio(), 4), 10);
        }
        out << "\n";
      }
    }
  };
  groups("class", r.class_names, false);
  groups("tenant", r.tenant_names, true);
  return out.str();
}

std::string FormatPoliciesCsvRows(const PolicyReplayResult& r) {
  std::ostringstream out;
  out.precision(17);
  auto row = [&](const std::string& tenant, const std::string& cls, const curve::PolicyRunResult& run,
                 const curve::PolicyTotals& t) {
    out << CsvQuote(tenant) << ',' << run.capacity << ",," << t.page_hits << ',' << t.PageHitRatio() << ','
        << t.RequestCoverage() << ',' << t.page_hits * r.page_tokens << ",,," << curve::PolicyName(run.kind) << ','
        << CsvQuote(cls) << ',' << t.preemptions << '\n';
  };
  for (const curve::PolicyRunResult& run : r.runs) {
    row("", "", run, run.total);
    for (std::size_t i = 0; i < r.tenant_names.size() && i < run.by_tenant.size(); ++i) {
      if (run.by_tenant[i].requests > 0) row(r.tenant_names[i], "", run, run.by_tenant[i]);
    }
    for (std::size_t i = 0; i < r.class_names.size() && i < run.by_class.size(); ++i) {
      if (run.by_class[i].requests > 0) row("", r.class_names[i], run, run.by_class[i]);
    }
  }
  return out.str();
}

}  // namespace kvwatch::agent
