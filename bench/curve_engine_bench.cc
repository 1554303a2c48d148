// Throughput and memory of the curve engine against the baselines users have today,
// each measured in the same run:
//   - Exact:        the stack-distance engine + the exact curve accumulator (what
//                   `kvwatch replay` runs per request), with the page map's
//                   mixed layout (layout 0, the agent's) or its runs layout
//                   (layout 1, replay's; curve/page_map.h) on every workload,
//                   numbered ids and hashed: the layout choice's measure;
//   - Sampled:      the same at spatial sampling rate R, with its curve's largest
//                   absolute error against the exact one over every capacity;
//   - Lru10:        a straightforward per-capacity LRU simulation (std::list +
//                   std::unordered_map, prefix rule) at 10 capacities;
//   - Lru1:         one such simulation (what single-capacity simulators do);
//   - BareHashMap:  one unordered_map update per reference (a floor for any
//                   per-reference work);
//   - ExactGroups:  Exact plus the tenant/class accounting of curve/tenants.h
//                   (group decomposition with 9 tenant x 9 class groups assigned
//                   round-robin, GroupTracker + GroupCurves at 3 capacities;
//                   isolated curves off (arg 0) or on (arg 1));
//   - ExactAgent:   the live agent's per-request work without (tenants 0) and with
//                   (tenants 1) tenants: Process + a BucketedCurve, plus
//                   Process with {tenant, class} + GroupTracker::Observe +
//                   GroupCurves::Add (bucketed, 3 capacities, isolated off) with
//                   the workload's own tenant and class groups. Their ratio is
//                   the issue 11 acceptance figure (at most 2x).
// Inputs: the ~12 M-reference coding-agent trace in ../shared/data/weka and the
// Mooncake traces (skipped when absent), a synthetic Zipf stream, and a synthetic
// multi-tenant chat stream (workload 6: 12 tenants folded to K = 8 + other,
// multi-page prefix-sharing requests, derived turn classes).
//
//   build/bench/curve_engine_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <list>
#include <random>
#include <unordered_map>
#include <vector>

#include "base/mix.h"
#include "collectors/trace_reader.h"
#include "curve/bucketed_curve.h"
#include "curve/curve_accumulator.h"
#include "curve/sampled_engine.h"
#include "curve/stack_distance.h"
#include "curve/tenants.h"

namespace {

using kvwatch::curve::PageId;
using Trace = std::vector<std::vector<PageId>>;

struct Workload {
  Trace requests;
  // Per request (multi-tenant workload only): tenant group 0..8, class group 0..4.
  std::vector<std::uint8_t> tenant, cls;
  std::uint64_t refs = 0;
  std::uint64_t distinct = 0;
};

std::uint64_t CountDistinct(const Trace& t) {
  std::unordered_map<PageId, char> seen;
  for (const auto& r : t) {
    for (PageId p : r) seen.emplace(p, 0);
  }
  return seen.size();
}

Workload Load(const std::string& relative) {
  Workload w;
  const std::string path = std::string(KVWATCH_SHARED_DATA) + "/" + relative;
  if (!std::filesystem::exists(path)) return w;
  kvwatch::collectors::TraceCallbacks cb;
  cb.on_request = [&](kvwatch::curve::Request& r) {
    w.refs += r.pages.size();
    w.requests.push_back(std::move(r.pages));
  };
  auto s = kvwatch::collectors::ReadTrace(path, {}, cb);
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.error().c_str());
  w.distinct = CountDistinct(w.requests);
  return w;
}

const Workload& Weka() {
  static Workload w = Load("weka/claude_code_sessions_merged.jsonl.gz");
  return w;
}

// Zipf(alpha) over n pages by inverting the CDF; single-page requests.
const Workload& Zipf() {
  static Workload w = [] {
    constexpr std::size_t kPages = 1 << 20;
    constexpr std::size_t kRefs = 8'000'000;
    constexpr double kAlpha = 0.9;
    std::vector<double> cdf(kPages);
    double sum = 0;
    for (std::size_t i = 0; i < kPages; ++i) cdf[i] = sum += 1.0 / std::pow(static_cast<double>(i + 1), kAlpha);
    std::mt19937_64 rng(42);
    Workload w;
    w.requests.reserve(kRefs);
    for (std::size_t i = 0; i < kRefs; ++i) {
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * sum;
      const auto rank = static_cast<std::size_t>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
      // Scatter ranks over the id space as hashes would.
      w.requests.push_back({static_cast<PageId>(rank) * 0x9E3779B97F4A7C15ULL});
    }
    w.refs = kRefs;
    w.distinct = CountDistinct(w.requests);
    return w;
  }();
  return w;
}

// Multi-tenant chats: 12 tenants with Zipf(1) volume (the top 8 keep their own
// group, the rest fold to "other", group 8). A request picks a tenant, then one of
// its 20000 conversations by Zipf(0.9); it references the tenant's 4-page system
// prompt, the conversation's whole history, and 1-4 new pages, which extend the
// history (a conversation restarts with new ids past 64 pages). Its class is the
// turn: first, 2, 3-4, 5-8, 9+ (groups 0..4). About 8 M page references.
const Workload& MultiTenant() {
  static Workload w = [] {
    constexpr std::size_t kTenants = 12, kConversations = 20000, kRefs = 8'000'000;
    constexpr std::uint32_t kSystemPages = 4, kMaxPages = 64;
    auto cdf_of = [](std::size_t n, double alpha) {
      std::vector<double> cdf(n);
      double sum = 0;
      for (std::size_t i = 0; i < n; ++i) cdf[i] = sum += 1.0 / std::pow(static_cast<double>(i + 1), alpha);
      return cdf;
    };
    const std::vector<double> tenant_cdf = cdf_of(kTenants, 1.0), conv_cdf = cdf_of(kConversations, 0.9);
    std::mt19937_64 rng(7);
    auto draw = [&](const std::vector<double>& cdf) {
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * cdf.back();
      return static_cast<std::size_t>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
    };
    struct Conversation {
      std::uint64_t epoch = 0;
      std::uint32_t pages = 0;
      std::uint32_t turn = 0;
    };
    std::vector<Conversation> convs(kTenants * kConversations);
    Workload w;
    std::uint64_t next_epoch = 1;
    while (w.refs < kRefs) {
      const std::size_t t = draw(tenant_cdf);
      Conversation& c = convs[t * kConversations + draw(conv_cdf)];
      const std::uint32_t added = 1 + static_cast<std::uint32_t>(rng() % 4);
      if (c.epoch == 0 || c.pages + added > kMaxPages) c = Conversation{next_epoch++, 0, 0};
      std::vector<PageId> pages;
      for (std::uint32_t i = 0; i < kSystemPages; ++i) pages.push_back(kvwatch::base::Mix64((t << 8) | i));
      c.pages += added;
      for (std::uint32_t i = 0; i < c.pages; ++i)
        pages.push_back(kvwatch::base::Mix64((c.epoch << 8 | i) + (1ULL << 40)));
      ++c.turn;
      w.refs += pages.size();
      w.requests.push_back(std::move(pages));
      w.tenant.push_back(static_cast<std::uint8_t>(std::min<std::size_t>(t, 8)));
      w.cls.push_back(c.turn == 1 ? 0 : c.turn == 2 ? 1 : c.turn <= 4 ? 2 : c.turn <= 8 ? 3 : 4);
    }
    w.distinct = CountDistinct(w.requests);
    return w;
  }();
  return w;
}

const Workload& Mooncake(int which) {
  static Workload w[3] = {Load("mooncake/conversation_trace.jsonl"), Load("mooncake/synthetic_trace.jsonl"),
                          Load("mooncake/toolagent_trace_hash_ids.jsonl")};
  return w[which];
}

// The weka trace with its ids put through a bijective 64-bit mix. The published
// ids are small integers numbered per session, which std::hash (the identity)
// lays out in order, a best case for the hash-map baselines that no engine
// gives: engines publish hashes (vLLM: 64 bits of a SHA-256).
const Workload& WekaHashed() {
  static Workload w = [] {
    Workload w = Weka();
    for (auto& r : w.requests) {
      for (PageId& p : r) p = kvwatch::base::Mix64(p);
    }
    return w;
  }();
  return w;
}

// 0: the weka trace, 1: the Zipf stream, 2-4: the Mooncake conversation,
// synthetic and tool-agent traces, 5: the weka trace with hashed ids, 6: the
// multi-tenant chat stream.
const Workload& Get(int which) {
  switch (which) {
    case 0:
      return Weka();
    case 1:
      return Zipf();
    case 5:
      return WekaHashed();
    case 6:
      return MultiTenant();
    default:
      return Mooncake(which - 2);
  }
}

bool Skip(benchmark::State& state, const Workload& w) {
  if (!w.requests.empty()) return false;
  state.SkipWithError("trace not found (../shared/data is absent)");
  return true;
}

void Exact(benchmark::State& state) {
  const Workload& w = Get(static_cast<int>(state.range(0)));
  if (Skip(state, w)) return;
  kvwatch::curve::EngineOptions options;
  options.page_layout =
      state.range(1) == 0 ? kvwatch::curve::PageMapLayout::kMixed : kvwatch::curve::PageMapLayout::kRuns;
  std::size_t bytes = 0, tracked = 0;
  for (auto _ : state) {
    kvwatch::curve::StackDistanceEngine engine(options);
    kvwatch::curve::CurveAccumulator acc;
    kvwatch::curve::RequestOutcome out;
    for (const auto& r : w.requests) {
      engine.Process(r, &out);
      acc.Add(out);
    }
    benchmark::DoNotOptimize(acc.PageHits(1000));
    bytes = engine.MemoryBytes();
    tracked = engine.tracked_pages();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(w.refs * state.iterations()));
  state.counters["tracked_pages"] = static_cast<double>(tracked);
  state.counters["engine_bytes_per_page"] = static_cast<double>(bytes) / static_cast<double>(tracked);
}

void ExactGroups(benchmark::State& state) {
  const Workload& w = Get(static_cast<int>(state.range(0)));
  if (Skip(state, w)) return;
  kvwatch::curve::GroupLayout layout;
  layout.capacities = {1000, 10000, 100000};
  layout.isolated = state.range(1) != 0;
  std::size_t bytes = 0, tracked = 0;
  for (auto _ : state) {
    kvwatch::curve::StackDistanceEngine engine(kvwatch::curve::GroupTracker::SharedEngineOptions({}, layout));
    kvwatch::curve::GroupTracker tracker(&layout);
    kvwatch::curve::GroupCurves curves(&layout);
    kvwatch::curve::CurveAccumulator acc;
    kvwatch::curve::RequestOutcome out;
    kvwatch::curve::Request facts;
    std::uint32_t i = 0;
    for (const auto& r : w.requests) {
      std::uint8_t g[2] = {static_cast<std::uint8_t>(i % 9), static_cast<std::uint8_t>((i / 7) % 9)};
      if (!w.tenant.empty()) g[0] = w.tenant[i], g[1] = w.cls[i];
      ++i;
      engine.Process(r, g, &out);
      acc.Add(out);
      curves.Add(tracker.Observe(g[0], g[1], facts, r, out));
    }
    benchmark::DoNotOptimize(acc.PageHits(1000));
    benchmark::DoNotOptimize(curves.evicted_by(0, 0, 0, 1));
    bytes = engine.MemoryBytes() + tracker.MemoryBytes();
    tracked = engine.tracked_pages();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(w.refs * state.iterations()));
  state.counters["tracked_pages"] = static_cast<double>(tracked);
  state.counters["engine_bytes_per_page"] = static_cast<double>(bytes) / static_cast<double>(tracked);
}

void ExactAgent(benchmark::State& state) {
  const Workload& w = Get(static_cast<int>(state.range(0)));
  if (Skip(state, w)) return;
  const bool tenants = state.range(1) != 0;
  const kvwatch::curve::EngineOptions base;
  const std::vector<std::uint64_t> bounds = kvwatch::curve::LogBucketBounds(base.max_pages, 8);
  kvwatch::curve::GroupLayout layout;
  layout.bounds = &bounds;
  layout.capacities = {1000, 10000, 100000};
  for (auto _ : state) {
    kvwatch::curve::StackDistanceEngine engine(tenants ? kvwatch::curve::GroupTracker::SharedEngineOptions(base, layout)
                                                       : base);
    kvwatch::curve::BucketedCurve curve(&bounds, 1.0);
    kvwatch::curve::GroupTracker tracker(&layout);
    kvwatch::curve::GroupCurves curves(&layout);
    kvwatch::curve::RequestOutcome out;
    kvwatch::curve::Request facts;
    std::uint32_t i = 0;
    for (const auto& r : w.requests) {
      std::uint8_t g[2] = {static_cast<std::uint8_t>(i % 9), static_cast<std::uint8_t>((i / 7) % 9)};
      if (!w.tenant.empty()) g[0] = w.tenant[i], g[1] = w.cls[i];
      ++i;
      if (tenants) {
        engine.Process(r, g, &out);
        curve.Add(out);
        curves.Add(tracker.Observe(g[0], g[1], facts, r, out));
      } else {
        engine.Process(r, &out);
        curve.Add(out);
      }
    }
    benchmark::DoNotOptimize(curve.PageHitsAt(10));
    benchmark::DoNotOptimize(curves.evicted_by(0, 0, 0, 1));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(w.refs * state.iterations()));
}

void Sampled(benchmark::State& state) {
  const Workload& w = Get(static_cast<int>(state.range(0)));
  if (Skip(state, w)) return;
  const double rate = static_cast<double>(state.range(1)) / 1000.0;
  kvwatch::curve::CurveAccumulator sampled_acc;
  for (auto _ : state) {
    kvwatch::curve::SampledEngine engine({}, rate);
    kvwatch::curve::CurveAccumulator acc;
    kvwatch::curve::RequestOutcome out;
    for (const auto& r : w.requests) {
      engine.Process(r, &out);
      if (out.size() != 0) acc.Add(out);
    }
    acc.AdjustReferences(static_cast<std::uint64_t>(std::llround(static_cast<double>(w.refs) * rate)));
    benchmark::DoNotOptimize(acc.PageHits(1000));
    sampled_acc = acc;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(w.refs * state.iterations()));
  // Accuracy, outside the timed loop: the largest absolute difference of the page
  // hit ratio from the exact curve, over every capacity up to the curve's end.
  kvwatch::curve::StackDistanceEngine exact;
  kvwatch::curve::CurveAccumulator exact_acc;
  kvwatch::curve::RequestOutcome out;
  for (const auto& r : w.requests) {
    exact.Process(r, &out);
    exact_acc.Add(out);
  }
  // Also the mean absolute error over every integer capacity from 1 to the end of
  // the curve (SHARDS' figure of merit), and the largest error at capacities of
  // at least 1/R pages, below which a sample cannot resolve distances.
  double max_err = 0, max_err_resolved = 0, sum_err = 0;
  const std::uint64_t end = std::max(exact_acc.MaxCapacity(), sampled_acc.MaxCapacity());
  const auto resolved = static_cast<std::uint64_t>(std::ceil(1.0 / rate));
  for (std::uint64_t c = 1; c <= end; ++c) {
    const double err = std::fabs(exact_acc.PageHitRatio(c) - sampled_acc.PageHitRatio(c));
    max_err = std::max(max_err, err);
    if (c >= resolved) max_err_resolved = std::max(max_err_resolved, err);
    sum_err += err;
  }
  state.counters["max_abs_error"] = max_err;
  state.counters["max_abs_error_c_ge_1_over_r"] = max_err_resolved;
  state.counters["mean_abs_error"] = end == 0 ? 0 : sum_err / static_cast<double>(end);
}

// The straightforward simulation: one LRU list per capacity, prefix rule read in
// the arrival state, tail-first touches.
class SimpleLru {
 public:
  explicit SimpleLru(std::size_t capacity) : capacity_(capacity) { where_.reserve(capacity); }
  std::size_t Request(const std::vector<PageId>& pages) {
    std::size_t hits = 0;
    while (hits < pages.size() && where_.count(pages[hits])) ++hits;
    for (std::size_t i = pages.size(); i-- > 0;) {
      auto it = where_.find(pages[i]);
      if (it != where_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        continue;
      }
      if (where_.size() == capacity_) {
        where_.erase(lru_.back());
        lru_.pop_back();
      }
      lru_.push_front(pages[i]);
      where_.emplace(pages[i], lru_.begin());
    }
    return hits;
  }

 private:
  std::size_t capacity_;
  std::list<PageId> lru_;
  std::unordered_map<PageId, std::list<PageId>::iterator> where_;
};

void Lru(benchmark::State& state) {
  const Workload& w = Get(static_cast<int>(state.range(0)));
  if (Skip(state, w)) return;
  const int n = static_cast<int>(state.range(1));
  // Capacities from 0.1% to 100% of the distinct pages, log-spaced.
  std::vector<std::size_t> caps;
  for (int k = 0; k < n; ++k) {
    const double f = n == 1 ? 0.1 : std::pow(10.0, -3.0 + 3.0 * k / (n - 1));
    caps.push_back(std::max<std::size_t>(1, static_cast<std::size_t>(f * static_cast<double>(w.distinct))));
  }
  for (auto _ : state) {
    std::uint64_t hits = 0;
    for (std::size_t c : caps) {
      SimpleLru lru(c);
      for (const auto& r : w.requests) hits += lru.Request(r);
    }
    benchmark::DoNotOptimize(hits);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(w.refs * state.iterations()));
}

void BareHashMap(benchmark::State& state) {
  const Workload& w = Get(static_cast<int>(state.range(0)));
  if (Skip(state, w)) return;
  for (auto _ : state) {
    std::unordered_map<PageId, std::uint64_t> last;
    std::uint64_t t = 0;
    for (const auto& r : w.requests) {
      for (PageId p : r) last[p] = ++t;
    }
    benchmark::DoNotOptimize(last.size());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(w.refs * state.iterations()));
}

// range(0): the workload (see Get); Exact's range(1): the page map's layout
// (0 mixed, 1 runs). Alternate the layouts under load with
// --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true.
BENCHMARK(Exact)
    ->ArgNames({"workload", "layout"})
    ->ArgsProduct({{0, 5, 1, 6, 2, 4}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(ExactGroups)
    ->ArgNames({"workload", "isolated"})
    ->Args({0, 0})
    ->Args({5, 0})
    ->Args({0, 1})
    ->Args({1, 0})
    ->Args({6, 0})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(ExactAgent)
    ->ArgNames({"workload", "tenants"})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({6, 0})
    ->Args({6, 1})
    ->Args({0, 0})
    ->Args({0, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(Sampled)
    ->ArgNames({"workload", "rate_permille"})
    ->Args({0, 10})
    ->Args({5, 10})
    ->Args({1, 10})
    ->Args({0, 100})
    ->Args({2, 10})
    ->Args({3, 10})
    ->Args({4, 10})
    ->Args({2, 100})
    ->Args({3, 100})
    ->Args({4, 100})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(Lru)
    ->ArgNames({"workload", "capacities"})
    ->Args({0, 10})
    ->Args({5, 10})
    ->Args({1, 10})
    ->Args({0, 1})
    ->Args({5, 1})
    ->Args({1, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK(BareHashMap)->ArgNames({"workload"})->Arg(0)->Arg(5)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
