// The KV-event collector's part of the agent's state file: how long the
// tracker's AppendState and RestoreState take and how many bytes they write,
// for an engine cache of `blocks` resident blocks (one publisher, chains of 16
// blocks, every block in the parent map), beside the baseline of building that
// state by applying the batches.
//   build/bench/kv_events_state_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "collectors/kv_event_tracker.h"

namespace kvwatch::collectors {
namespace {

struct NullSink : RequestSink {
  void OnRequest(const curve::Request&) override {}
};

// Chains of 16 blocks: one batch per chain.
std::vector<KvEventBatch> Batches(std::int64_t blocks) {
  std::vector<KvEventBatch> out;
  for (std::int64_t first = 0; first < blocks; first += 16) {
    KvEventBatch b;
    b.ts = 1.75e9;
    BlockStored stored;
    for (std::int64_t h = first; h < first + 16 && h < blocks; ++h) {
      stored.block_hashes.push_back(static_cast<std::uint64_t>(h) * 0x9e3779b97f4a7c15ULL);
    }
    stored.block_size = 16;
    b.events.emplace_back(std::move(stored));
    out.push_back(std::move(b));
  }
  return out;
}

void Fill(KvEventTracker* t, const std::vector<KvEventBatch>& batches) {
  const std::size_t p = t->AddPublisher();
  NullSink sink;
  for (const KvEventBatch& b : batches) t->Apply(p, b, sink);
}

void BM_ApplyBaseline(benchmark::State& state) {
  const std::vector<KvEventBatch> batches = Batches(state.range(0));
  for (auto _ : state) {
    KvEventTracker t;
    Fill(&t, batches);
    benchmark::DoNotOptimize(t.parent_map_size());
  }
}

void BM_AppendState(benchmark::State& state) {
  KvEventTracker t;
  Fill(&t, Batches(state.range(0)));
  const std::vector<std::size_t> publishers = {0};
  std::vector<std::uint8_t> bytes;
  for (auto _ : state) {
    bytes.clear();
    t.AppendState(publishers, &bytes);
    benchmark::DoNotOptimize(bytes.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes.size());
  state.counters["bytes_per_block"] = static_cast<double>(bytes.size()) / static_cast<double>(state.range(0));
}

void BM_RestoreState(benchmark::State& state) {
  KvEventTracker source;
  Fill(&source, Batches(state.range(0)));
  const std::vector<std::size_t> publishers = {0};
  std::vector<std::uint8_t> bytes;
  source.AppendState(publishers, &bytes);
  for (auto _ : state) {
    KvEventTracker t;
    if (!t.RestoreState(bytes, 1).ok()) state.SkipWithError("restore failed");
    benchmark::DoNotOptimize(t.parent_map_size());
  }
  state.counters["bytes"] = static_cast<double>(bytes.size());
}

BENCHMARK(BM_ApplyBaseline)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AppendState)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RestoreState)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvwatch::collectors

BENCHMARK_MAIN();
