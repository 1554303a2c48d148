// KV-event throughput on one core, in block events per second (every hash of a
// BlockStored or BlockRemoved counts as one block event), measured on the same
// pre-encoded payloads two ways:
//   - Decode:   KvEventDecoder::Decode alone (the baseline: msgpack to typed events);
//   - FullPath: what KvEventsCollector does per message after the socket read:
//               decode + KvEventTracker::Apply (reference counts, counters, parent
//               links, request reconstruction, scoped page ids) into a sink that
//               only counts the requests.
// Streams come from EngineCacheModel (tests/collectors/kv_events_test_publisher.h)
// run over a workload with an engine cache of 4096 blocks, four requests per
// batch: "incremental" is vLLM's default (new blocks only: requests are rebuilt
// from parent links, so each costs one walk over its whole prefix), "full" is
// kv_cache_report_mode full (reused blocks reported too). Workloads: the built-in
// synthetic replica (collectors/synth.h defaults: long system prompts) and, when
// present, the Mooncake conversation trace (ids of 512-token blocks).
//
//   build/bench/kv_events_decode_bench --benchmark_counters_tabular=true
// Target: >= 1 M block events per second on the full path.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "collectors/kv_event_decoder.h"
#include "collectors/kv_event_tracker.h"
#include "collectors/synth.h"
#include "collectors/testing/kv_event_encoder.h"
#include "collectors/trace_reader.h"
#include "tests/collectors/kv_events_test_publisher.h"

namespace {

using kvwatch::collectors::KvEncoding;
using kvwatch::collectors::KvEventBatch;
using kvwatch::collectors::KvEventDecoder;
using kvwatch::collectors::KvEventTracker;
using kvwatch::collectors::KvEventTrackerOptions;
using Trace = std::vector<std::vector<std::uint64_t>>;

constexpr std::size_t kEngineBlocks = 4096;

Trace SynthTrace(std::size_t n) {
  kvwatch::collectors::SynthOptions o;
  o.duration_s = 0;
  o.max_requests = n;
  auto generator = kvwatch::collectors::SynthGenerator::Create(o);
  Trace trace;
  if (!generator.ok()) return trace;
  kvwatch::collectors::SynthRequest r;
  while (generator.value().Next(&r)) trace.push_back(r.request.pages);
  return trace;
}

Trace MooncakeTrace() {
  Trace trace;
  const std::string path = std::string(KVWATCH_SHARED_DATA) + "/mooncake/conversation_trace.jsonl";
  if (!std::filesystem::exists(path)) return trace;
  kvwatch::collectors::TraceCallbacks cb;
  cb.on_request = [&](kvwatch::curve::Request& r) { trace.push_back(r.pages); };
  auto read = kvwatch::collectors::ReadTrace(path, {}, cb);
  if (!read.ok()) std::fprintf(stderr, "%s\n", read.error().c_str());
  return trace;
}

struct Stream {
  std::vector<std::vector<std::uint8_t>> payloads;
  std::uint64_t block_events = 0;
  std::uint64_t bytes = 0;
};

std::uint64_t BlockEvents(const KvEventBatch& b) {
  std::uint64_t n = 0;
  for (const auto& e : b.events) {
    if (const auto* s = std::get_if<kvwatch::collectors::BlockStored>(&e)) n += s->block_hashes.size();
    if (const auto* r = std::get_if<kvwatch::collectors::BlockRemoved>(&e)) n += r->block_hashes.size();
  }
  return n;
}

Stream Encode(const Trace& trace, bool full_report, KvEncoding encoding, std::int64_t tokens_per_block) {
  kvwatch::collectors::testing::EngineModelOptions o;
  o.capacity_blocks = kEngineBlocks;
  o.report_reuse = full_report;
  o.requests_per_batch = 4;
  o.tokens_per_block = tokens_per_block;
  kvwatch::collectors::testing::EngineCacheModel model(o);
  for (const auto& r : trace) model.Run(r);
  Stream s;
  for (const KvEventBatch& b : model.TakeBatches()) {
    s.block_events += BlockEvents(b);
    s.payloads.push_back(kvwatch::collectors::EncodeKvEventBatch(b, encoding));
    s.bytes += s.payloads.back().size();
  }
  return s;
}

struct CountingSink : kvwatch::collectors::RequestSink {
  std::uint64_t requests = 0;
  std::uint64_t pages = 0;
  void OnRequest(const kvwatch::curve::Request& r) override {
    ++requests;
    pages += r.pages.size();
  }
};

void Report(benchmark::State& state, const Stream& s) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * s.block_events));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * s.bytes));
  state.counters["block_events"] = static_cast<double>(s.block_events);
  state.counters["batches"] = static_cast<double>(s.payloads.size());
}

void BM_Decode(benchmark::State& state, const Stream* s) {
  KvEventDecoder decoder;
  KvEventBatch batch;
  for (auto _ : state) {
    for (const auto& p : s->payloads) {
      if (!decoder.Decode(p, &batch).ok()) state.SkipWithError("decode failed");
      benchmark::DoNotOptimize(batch.events.data());
    }
  }
  Report(state, *s);
}

void BM_FullPath(benchmark::State& state, const Stream* s) {
  KvEventDecoder decoder;
  KvEventBatch batch;
  CountingSink sink;
  for (auto _ : state) {
    state.PauseTiming();
    auto tracker = std::make_unique<KvEventTracker>(KvEventTrackerOptions{.scope = "bench"});
    const std::size_t publisher = tracker->AddPublisher();
    state.ResumeTiming();
    for (const auto& p : s->payloads) {
      if (!decoder.Decode(p, &batch).ok()) state.SkipWithError("decode failed");
      tracker->Apply(publisher, batch, sink);
    }
    state.PauseTiming();
    tracker.reset();
    state.ResumeTiming();
  }
  Report(state, *s);
  state.counters["requests"] = benchmark::Counter(static_cast<double>(sink.requests), benchmark::Counter::kIsRate);
  state.counters["pages_per_request"] =
      sink.requests == 0 ? 0.0 : static_cast<double>(sink.pages) / static_cast<double>(sink.requests);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  struct Workload {
    std::string name;
    Trace trace;
    std::int64_t tokens_per_block;
  };
  std::vector<Workload> workloads;
  workloads.push_back({"synth", SynthTrace(20000), 16});
  Trace mooncake = MooncakeTrace();
  if (!mooncake.empty()) workloads.push_back({"mooncake", std::move(mooncake), 16});
  // Streams live until the benchmarks have run.
  std::vector<std::unique_ptr<Stream>> streams;
  for (const Workload& w : workloads) {
    for (bool full : {false, true}) {
      for (KvEncoding enc : {KvEncoding::kMap, KvEncoding::kArray}) {
        streams.push_back(std::make_unique<Stream>(Encode(w.trace, full, enc, w.tokens_per_block)));
        const std::string suffix =
            w.name + (full ? "/full" : "/incremental") + (enc == KvEncoding::kMap ? "/map" : "/array");
        benchmark::RegisterBenchmark(("Decode/" + suffix).c_str(), BM_Decode, streams.back().get())
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("FullPath/" + suffix).c_str(), BM_FullPath, streams.back().get())
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
