// Fleet ingestion, CI-sized: 16 engines (real ZeroMQ publishers on 127.0.0.1,
// ephemeral ports, each with its ROUTER replay socket) watched the way the
// agent watches a fleet, one KvEventsCollector per replica (one
// collectors.kv_events entry each) polled in turn on one thread. Every
// publisher loses one batch on the way (a sequence gap at a different place
// each); every lost batch must come back from that publisher's replay socket,
// and the block events the collectors saw must be exactly those published.
// Bounded: a few hundred batches per publisher; waits are polls with a
// generous bound, never timing assertions.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collectors/kv_event_decoder.h"
#include "collectors/kv_events_collector.h"
#include "collectors/testing/kv_event_encoder.h"
#include "tests/collectors/kv_events_test_publisher.h"

namespace kvwatch::collectors {
namespace {

using testing::EngineCacheModel;
using testing::EngineModelOptions;
using testing::KvEventsTestPublisher;
using testing::TestPublisherOptions;

constexpr std::size_t kPublishers = 16;

struct CountingSink : RequestSink {
  std::uint64_t requests = 0;
  std::uint64_t pages = 0;
  void OnRequest(const curve::Request& r) override {
    ++requests;
    pages += r.pages.size();
  }
};

// Conversation-like requests: sessions over a few shared prompts, each turn
// extending its session (so the engine reuses prefixes and evicts).
std::vector<std::vector<std::uint64_t>> Trace(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 rng(seed);
  std::uint64_t next_id = seed << 32;
  std::vector<std::vector<std::uint64_t>> sessions(8);
  std::vector<std::vector<std::uint64_t>> trace;
  for (auto& s : sessions) {
    for (int i = 0; i < 4; ++i) s.push_back(next_id++);
  }
  while (trace.size() < n) {
    std::vector<std::uint64_t>& s = sessions[rng() % sessions.size()];
    for (std::uint64_t i = 0, k = 1 + rng() % 5; i < k; ++i) s.push_back(next_id++);
    trace.push_back(s);
    if (s.size() > 60) s.resize(4);  // a new conversation over the same prompt
  }
  return trace;
}

double Sample(const std::vector<MetricSample>& samples, const std::string& name) {
  double sum = 0;
  for (const MetricSample& s : samples) {
    if (s.name == name) sum += s.value;
  }
  return sum;
}

TEST(KvEventsFleetTest, SixteenPublishersWithAGapEachAreAllRecoveredFromTheirReplaySockets) {
  struct Replica {
    std::unique_ptr<EngineCacheModel> model;
    std::vector<KvEventBatch> batches;
    std::unique_ptr<KvEventsTestPublisher> publisher;
    std::unique_ptr<KvEventsCollector> collector;
    std::size_t gap = 0;  // index of the batch lost on the way
  };
  std::vector<Replica> fleet(kPublishers);
  std::uint64_t sent_block_events = 0;
  for (std::size_t i = 0; i < kPublishers; ++i) {
    Replica& r = fleet[i];
    r.model = std::make_unique<EngineCacheModel>(
        EngineModelOptions{.capacity_blocks = 256, .report_reuse = true, .requests_per_batch = 2});
    for (const auto& pages : Trace(i + 1, 300)) r.model->Run(pages);
    r.batches = r.model->TakeBatches();
    ASSERT_GT(r.batches.size(), 100u);
    r.gap = 10 + 5 * i;  // a different place per publisher
    sent_block_events += r.model->stored_blocks() + r.model->evicted_blocks() + r.model->reused_blocks();

    TestPublisherOptions po;
    po.replay = true;
    po.replay_topic_frame = i % 2 == 0;  // both reply framings across the fleet
    r.publisher = std::make_unique<KvEventsTestPublisher>(po);
    KvEventsCollectorOptions o;
    o.name = "replica-" + std::to_string(i);
    o.endpoints = {r.publisher->endpoint()};
    o.replay_endpoint = r.publisher->replay_endpoint();
    o.tracker.scope = "fleet-model";
    o.replay_timeout = std::chrono::milliseconds(2000);  // generous for a loaded test machine
    auto created = KvEventsCollector::Create(std::move(o), nullptr);
    ASSERT_TRUE(created.ok()) << created.error();
    r.collector = std::move(created).value();
  }
  for (Replica& r : fleet) ASSERT_TRUE(r.publisher->WaitForSubscriber());

  // Interleaved, as a fleet publishes: one batch of every replica in turn.
  CountingSink sink;
  std::size_t longest = 0;
  for (const Replica& r : fleet) longest = std::max(longest, r.batches.size());
  for (std::size_t b = 0; b < longest; ++b) {
    for (Replica& r : fleet) {
      if (b < r.batches.size()) r.publisher->PublishBatch(r.batches[b], KvEncoding::kMap, b != r.gap);
    }
  }
  auto all_applied = [&] {
    for (const Replica& r : fleet) {
      if (r.collector->transport().batches + r.collector->transport().lost < r.batches.size()) return false;
    }
    return true;
  };
  bool done = false;
  for (int round = 0; round < 20000 && !done; ++round) {  // ~20 s at most
    for (Replica& r : fleet) r.collector->Poll(sink, WallNow());
    done = all_applied();
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(done) << "the collectors did not receive every batch in time";

  std::uint64_t seen_block_events = 0;
  for (std::size_t i = 0; i < kPublishers; ++i) {
    const Replica& r = fleet[i];
    SCOPED_TRACE("replica " + std::to_string(i));
    const KvTransportCounters& t = r.collector->transport();
    EXPECT_EQ(t.replayed, 1u);
    EXPECT_EQ(t.lost, 0u);
    EXPECT_EQ(t.replay_requests, 1u);
    EXPECT_EQ(t.batches, r.batches.size());
    EXPECT_EQ(r.publisher->replay_requests(), 1u);
    EXPECT_EQ(r.collector->stats().dropped, 0u);
    EXPECT_TRUE(r.collector->stats().errors.empty());
    std::vector<MetricSample> samples;
    r.collector->AppendSamples(&samples);
    EXPECT_EQ(Sample(samples, "kvwatch_kv_events_replayed_total"), 1.0);
    EXPECT_EQ(Sample(samples, "kvwatch_kv_events_lost_total"), 0.0);
    const double seen = Sample(samples, "kvwatch_engine_stored_blocks_total") +
                        Sample(samples, "kvwatch_engine_evicted_blocks_total") +
                        Sample(samples, "kvwatch_engine_reused_blocks_total");
    EXPECT_EQ(seen,
              static_cast<double>(r.model->stored_blocks() + r.model->evicted_blocks() + r.model->reused_blocks()));
    seen_block_events += static_cast<std::uint64_t>(seen);
    // The block state after recovery is the engine's, copy for copy.
    const auto resident = r.model->Resident();
    EXPECT_EQ(r.collector->tracker().ResidentBlocks(0, "GPU", 0), resident.size());
    std::size_t mismatches = 0;
    for (const auto& [hash, copies] : resident) {
      mismatches += r.collector->tracker().References(0, "GPU", 0, hash) != copies;
    }
    EXPECT_EQ(mismatches, 0u);
  }
  EXPECT_EQ(seen_block_events, sent_block_events);
  EXPECT_GT(sink.requests, 0u);
  // Stop what was started: collectors (their sockets) before the publishers
  // (their replay threads are joined by their destructors).
  for (Replica& r : fleet) r.collector.reset();
  fleet.clear();
}

}  // namespace
}  // namespace kvwatch::collectors
