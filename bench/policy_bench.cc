// Simulation speed of each eviction policy (curve/policy.h) on the coding-agent
// trace in ../shared/data/weka (skipped when absent), at one capacity, beside the
// stack-distance engine + curve accumulator (what gives the LRU curve at every
// capacity at once) measured in the same run. Each row is one core; the counter
// Mrefs_per_s is page references simulated per second, in millions.
//
//   build/bench/policy_bench --benchmark_counters_tabular=true
//
// The weka trace's pages are 512 tokens (input_length / hash_ids); generated
// pages for sglang and vllm use that, at the default decode rate of 50 tokens/s.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "collectors/trace_reader.h"
#include "curve/curve_accumulator.h"
#include "curve/policy.h"
#include "curve/policy_replay.h"
#include "curve/stack_distance.h"

namespace {

using namespace kvwatch::curve;

constexpr std::uint64_t kCapacity = 20000;

struct Loaded {
  StoredTrace trace;
  bool ok = false;
};

const Loaded& Weka() {
  static Loaded w = [] {
    Loaded l;
    const std::string path = std::string(KVWATCH_SHARED_DATA) + "/weka/claude_code_sessions_merged.jsonl.gz";
    if (!std::filesystem::exists(path)) return l;
    EngineOptions eo;
    eo.remembered_evictions = 0;
    StackDistanceEngine engine(eo);
    RequestOutcome out;
    RequestClassifier classifier;
    LifetimeOptions lifetime;
    lifetime.page_tokens = 512;
    kvwatch::collectors::TraceCallbacks cb;
    cb.on_request = [&](Request& r) {
      engine.Process(r.pages, &out);
      const std::size_t full = RequestClassifier::FullPages(r.pages.size(), r.input_tokens, lifetime.page_tokens);
      l.trace.Add(r, RequestClassifier::ClassOfTurn(classifier.Observe(r.pages, full, out.unlimited_hits)),
                  out.unlimited_hits, lifetime);
    };
    auto s = kvwatch::collectors::ReadTrace(path, {}, cb);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.error().c_str());
      return l;
    }
    PriorityRules rules;
    rules.cls["turn9+"] = 2;
    rules.cls["turn5-8"] = 1;
    if (!l.trace.AssignPriorities(rules).ok()) return l;
    l.trace.ComputeNextUse(TouchOrder::kTailFirst);
    l.ok = true;
    return l;
  }();
  return w;
}

void StackEngine(benchmark::State& state) {
  const Loaded& w = Weka();
  if (!w.ok) {
    state.SkipWithError("../shared/data/weka is absent");
    return;
  }
  std::uint64_t hits = 0;
  for (auto _ : state) {
    EngineOptions eo;
    eo.remembered_evictions = 0;
    StackDistanceEngine engine(eo);
    CurveAccumulator acc;
    RequestOutcome out;
    for (std::size_t i = 0; i < w.trace.size(); ++i) {
      engine.Process(w.trace.At(i).pages, &out);
      acc.Add(out);
    }
    hits = acc.PageHits(kCapacity);
  }
  state.counters["Mrefs_per_s"] = benchmark::Counter(static_cast<double>(w.trace.page_refs()) * 1e-6,
                                                     benchmark::Counter::kIsIterationInvariantRate);
  state.counters["hit_ratio"] = static_cast<double>(hits) / static_cast<double>(w.trace.page_refs());
}

void Policy(benchmark::State& state) {
  const Loaded& w = Weka();
  if (!w.ok) {
    state.SkipWithError("../shared/data/weka is absent");
    return;
  }
  PolicyOptions o;
  o.kind = kAllPolicies[state.range(0)];
  o.capacity = kCapacity;
  state.SetLabel(std::string(PolicyName(o.kind)));
  PolicyRunResult last;
  for (auto _ : state) {
    auto run = RunPolicy(w.trace, o, 1.0);
    if (!run.ok()) {
      state.SkipWithError(run.error().c_str());
      return;
    }
    last = std::move(run.value());
  }
  state.counters["Mrefs_per_s"] = benchmark::Counter(static_cast<double>(w.trace.page_refs()) * 1e-6,
                                                     benchmark::Counter::kIsIterationInvariantRate);
  state.counters["hit_ratio"] = last.total.PageHitRatio();
  state.counters["sim_MB"] = static_cast<double>(last.memory_bytes) / 1e6;
}

}  // namespace

BENCHMARK(StackEngine)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(Policy)->ArgName("policy")->DenseRange(0, std::size(kAllPolicies) - 1)->Unit(benchmark::kMillisecond)->Iterations(2);

BENCHMARK_MAIN();
