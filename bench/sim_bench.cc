// Speed of the serving-replica simulator (sim/replica.h) on the coding-agent trace
// in ../shared/data/weka (skipped when absent; 512 tokens a page), beside curve's
// policy replay of the same requests at the same capacity (curve/policy.h, lru)
// measured in the same run. The counter requests_per_s is simulated requests per
// second of wall time; Sweep runs the 3 admission x 3 eviction x 5 load sweep of
// `kvwatch simulate` once (45 runs, one core) and reports its wall time.
//
//   build/bench/sim_bench --benchmark_counters_tabular=true
//
// The time model is a fixed LinearStepTime (10 ms a step, 20 us a prefill token,
// 0.1 ms a decoding sequence, 20 ns a token of decode context); the pool is 20,000
// blocks of 512 tokens. Loads scale the arrival times (arrival / load).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "collectors/trace_reader.h"
#include "curve/policy.h"
#include "sim/replica.h"

namespace {

using namespace kvwatch;

constexpr std::uint64_t kPoolBlocks = 20000;
constexpr std::uint32_t kPageTokens = 512;
const sim::LinearStepTime kTime({0.01, 2e-5, 0, 1e-4, 2e-8});

struct Loaded {
  std::vector<sim::ReplicaRequest> requests;
  bool ok = false;
};

const Loaded& Weka() {
  static Loaded w = [] {
    Loaded l;
    const std::string path = std::string(KVWATCH_SHARED_DATA) + "/weka/claude_code_sessions_merged.jsonl.gz";
    if (!std::filesystem::exists(path)) return l;
    collectors::TraceCallbacks cb;
    cb.on_request = [&](curve::Request& r) {
      sim::ReplicaRequest q;
      q.arrival_s = r.has_timestamp() ? r.timestamp_s : 0;
      q.pages = std::move(r.pages);
      q.prompt_tokens = static_cast<std::uint32_t>(std::max<std::int64_t>(1, r.input_tokens));
      q.output_tokens = static_cast<std::uint32_t>(std::max<std::int64_t>(1, r.output_tokens));
      l.requests.push_back(std::move(q));
    };
    auto s = collectors::ReadTrace(path, {}, cb);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.error().c_str());
      return l;
    }
    std::stable_sort(
        l.requests.begin(), l.requests.end(),
        [](const sim::ReplicaRequest& a, const sim::ReplicaRequest& b) { return a.arrival_s < b.arrival_s; });
    l.ok = true;
    return l;
  }();
  return w;
}

std::vector<sim::ReplicaRequest> AtLoad(const std::vector<sim::ReplicaRequest>& base, double load) {
  std::vector<sim::ReplicaRequest> out = base;
  for (sim::ReplicaRequest& r : out) r.arrival_s /= load;
  return out;
}

sim::ReplicaOptions Options(sim::Admission a, curve::PolicyKind eviction) {
  sim::ReplicaOptions o;
  o.pool_blocks = kPoolBlocks;
  o.block_tokens = kPageTokens;
  o.admission = a;
  o.eviction = eviction;
  return o;
}

// Baseline: curve's lru over the same requests at the pool's capacity.
void CurvePolicyReplay(benchmark::State& state) {
  const Loaded& w = Weka();
  if (!w.ok) {
    state.SkipWithError("../shared/data/weka is absent");
    return;
  }
  std::uint64_t hits = 0;
  for (auto _ : state) {
    curve::PolicyOptions po;
    po.capacity = kPoolBlocks;
    auto cache = curve::MakePolicyCache(po);
    hits = 0;
    for (const sim::ReplicaRequest& r : w.requests) {
      curve::SimRequest s;
      s.pages = r.pages;
      hits += cache.value()->Process(s).hits;
    }
  }
  state.counters["requests_per_s"] =
      benchmark::Counter(static_cast<double>(w.requests.size()) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["hits"] = static_cast<double>(hits);
}
BENCHMARK(CurvePolicyReplay)->Unit(benchmark::kMillisecond)->Iterations(3);

// One simulation: admission x eviction at load 1.
void Replica(benchmark::State& state) {
  const Loaded& w = Weka();
  if (!w.ok) {
    state.SkipWithError("../shared/data/weka is absent");
    return;
  }
  const auto a = static_cast<sim::Admission>(state.range(0));
  const auto e = static_cast<curve::PolicyKind>(state.range(1));
  state.SetLabel(std::string(sim::AdmissionName(a)) + "/" + std::string(curve::PolicyName(e)));
  sim::SimSummary s;
  for (auto _ : state) {
    auto r = sim::SimulateReplica(Options(a, e), w.requests, kTime);
    if (!r.ok()) {
      state.SkipWithError(r.error().c_str());
      return;
    }
    s = r.value();
  }
  state.counters["requests_per_s"] =
      benchmark::Counter(static_cast<double>(w.requests.size()) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["steps"] = static_cast<double>(s.steps);
  state.counters["preemptions"] = static_cast<double>(s.preemptions);
  state.counters["hit_ratio"] = s.prefix_hit_ratio;
}
BENCHMARK(Replica)
    ->Args({static_cast<int>(sim::Admission::kGreedy), static_cast<int>(curve::PolicyKind::kLru)})
    ->Args({static_cast<int>(sim::Admission::kRateCap), static_cast<int>(curve::PolicyKind::kVllm)})
    ->Args({static_cast<int>(sim::Admission::kReserveQuantile), static_cast<int>(curve::PolicyKind::kSglang)})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// The sweep `kvwatch simulate` runs by default: 3 admissions x 3 evictions x 5 loads.
void Sweep(benchmark::State& state) {
  const Loaded& w = Weka();
  if (!w.ok) {
    state.SkipWithError("../shared/data/weka is absent");
    return;
  }
  const double loads[] = {0.5, 1, 1.5, 2, 3};
  const sim::Admission admissions[] = {sim::Admission::kGreedy, sim::Admission::kReserveQuantile,
                                       sim::Admission::kRateCap};
  const curve::PolicyKind evictions[] = {curve::PolicyKind::kLru, curve::PolicyKind::kSglang, curve::PolicyKind::kVllm};
  std::uint64_t runs = 0;
  for (auto _ : state) {
    for (double load : loads) {
      const auto reqs = AtLoad(w.requests, load);
      for (sim::Admission a : admissions) {
        for (curve::PolicyKind e : evictions) {
          auto r = sim::SimulateReplica(Options(a, e), reqs, kTime);
          if (!r.ok()) {
            state.SkipWithError(r.error().c_str());
            return;
          }
          benchmark::DoNotOptimize(r.value().steps);
          ++runs;
        }
      }
    }
  }
  state.counters["runs"] = static_cast<double>(runs);
  state.counters["requests_per_s"] = benchmark::Counter(
      static_cast<double>(w.requests.size()) * static_cast<double>(runs), benchmark::Counter::kIsRate);
}
BENCHMARK(Sweep)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
