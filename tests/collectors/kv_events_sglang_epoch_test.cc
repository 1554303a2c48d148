// SGLang's snapshot-capable KV-event publisher (python/sglang/srt/disaggregation/
// kv_events.py with a snapshot_endpoint, SNAPSHOT_PROTOCOL_VERSION 1, 2026): its
// topics carry "\0sgl-kv-epoch=<epoch>", and its snapshot barriers are empty
// batches on "<topic>\0sgl-kv-epoch=<epoch>\0sgl-kv-snapshot=<id>" that take the
// stream's next seq. The topic parsing, then KvEventsCollector over real ZeroMQ
// sockets (KvEventsTestPublisher): barriers are neither publishers nor gaps, a new
// epoch is a restart, and the log prints such topics whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collectors/kv_event_decoder.h"
#include "collectors/kv_events_collector.h"
#include "collectors/testing/kv_event_encoder.h"
#include "tests/collectors/kv_events_test_publisher.h"
#include "tests/collectors/kv_events_test_state.h"

namespace kvwatch::collectors {
namespace {

using testing::EngineCacheModel;
using testing::EngineModelOptions;
using testing::ExpectSameState;
using testing::KvEventsTestPublisher;
using testing::TestPublisherOptions;
using namespace std::string_literals;

// ---- Topic parsing ------------------------------------------------------------

TEST(KvTopicTest, PlainTopicsAreAllBase) {
  for (const std::string topic : {""s, "kv-events"s, "kv@pod-1@llama"s, "kv\0other"s}) {
    const KvTopic t = ParseKvTopic(topic);
    EXPECT_EQ(t.base, topic);
    EXPECT_EQ(t.live, topic);
    EXPECT_FALSE(t.has_epoch);
    EXPECT_FALSE(t.is_barrier);
    EXPECT_TRUE(t.epoch.empty());
  }
}

TEST(KvTopicTest, SplitsTheEpochAndTheBarrier) {
  const std::string live = "kv@pod-1@llama\0sgl-kv-epoch=4f2a9c"s;
  KvTopic t = ParseKvTopic(live);
  EXPECT_EQ(t.base, "kv@pod-1@llama");
  EXPECT_EQ(t.live, live);
  EXPECT_EQ(t.epoch, "4f2a9c");
  EXPECT_TRUE(t.has_epoch);
  EXPECT_FALSE(t.is_barrier);

  const std::string barrier = live + "\0sgl-kv-snapshot=b77e01"s;
  t = ParseKvTopic(barrier);
  EXPECT_EQ(t.base, "kv@pod-1@llama");
  EXPECT_EQ(t.live, live);
  EXPECT_EQ(t.epoch, "4f2a9c");
  EXPECT_EQ(t.barrier, "b77e01");
  EXPECT_TRUE(t.is_barrier);

  // SGLang's default topic is "": the base is empty, the epoch still read.
  const std::string unnamed = "\0sgl-kv-epoch=e1\0sgl-kv-snapshot=b1"s;  // the views point into it
  t = ParseKvTopic(unnamed);
  EXPECT_EQ(t.base, "");
  EXPECT_EQ(t.epoch, "e1");
  EXPECT_EQ(t.barrier, "b1");
  EXPECT_EQ(t.live, "\0sgl-kv-epoch=e1"s);
}

TEST(KvTopicTest, EscapesControlBytesAndBackslashOnly) {
  EXPECT_EQ(EscapeKvTopic("kv\0sgl-kv-epoch=e1"s), "kv\\x00sgl-kv-epoch=e1");
  EXPECT_EQ(EscapeKvTopic("a\\b\n\x7f"), "a\\x5cb\\x0a\\x7f");
  EXPECT_EQ(EscapeKvTopic("kv@pod@m\xc3\xa9"), "kv@pod@m\xc3\xa9");  // UTF-8 as is
  EXPECT_EQ(EscapeKvTopic(""), "");
}

// ---- Over ZeroMQ --------------------------------------------------------------

constexpr char kScope[] = "test-model";

struct CaptureSink : RequestSink {
  std::vector<curve::Request> requests;
  void OnRequest(const curve::Request& r) override { requests.push_back(r); }
};

std::string LiveTopic(const std::string& epoch) { return "kv-events\0sgl-kv-epoch="s + epoch; }
std::string BarrierTopic(const std::string& epoch, int id) {
  return LiveTopic(epoch) + "\0sgl-kv-snapshot="s + "barrier-" + std::to_string(id);
}

// Sessions that extend shared prefixes, so requests rebuild from chains.
std::vector<KvEventBatch> EngineBatches(std::uint64_t seed, std::size_t n, EngineCacheModel* model) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<std::uint64_t>> sessions(8);
  std::uint64_t next = 1 + seed * 1000000;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::uint64_t>& s = sessions[rng() % sessions.size()];
    for (std::uint64_t k = 0, add = 1 + rng() % 4; k < add; ++k) s.push_back(next++);
    model->Run(s);
    if (s.size() > 40) s.clear();
  }
  return model->TakeBatches();
}

KvEventBatch Barrier(double ts) {
  KvEventBatch b;
  b.ts = ts;
  b.dp_rank = 0;
  return b;
}

struct Harness {
  explicit Harness(TestPublisherOptions po, bool replay = false) : pub(std::move(po)) {
    KvEventsCollectorOptions o;
    o.name = "sglang";
    o.endpoints = {pub.endpoint()};
    o.topic = "kv";  // SUB filters by prefix: the epoch suffix still matches
    if (replay) o.replay_endpoint = pub.replay_endpoint();
    o.tracker.scope = kScope;
    o.replay_timeout = std::chrono::milliseconds(2000);
    options = o;
    collector = Make();
  }
  std::unique_ptr<KvEventsCollector> Make() {
    auto created =
        KvEventsCollector::Create(options, [this](std::string_view, std::string_view m) { log.emplace_back(m); });
    EXPECT_TRUE(created.ok()) << (created.ok() ? "" : created.error());
    return created.ok() ? std::move(created).value() : nullptr;
  }
  // Polls until done() or a generous bound (a failure, never a timing assertion).
  bool PollUntil(const std::function<bool()>& done) {
    for (int i = 0; i < 30000; ++i) {
      collector->Poll(sink, WallNow());
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
  bool Logged(const std::string& part) const {
    return std::any_of(log.begin(), log.end(), [&](const std::string& m) { return m.find(part) != std::string::npos; });
  }
  bool LoggedANul() const {
    return std::any_of(log.begin(), log.end(), [](const std::string& m) { return m.find('\0') != std::string::npos; });
  }

  KvEventsTestPublisher pub;
  KvEventsCollectorOptions options;
  std::vector<std::string> log;
  std::unique_ptr<KvEventsCollector> collector;
  CaptureSink sink;
};

TestPublisherOptions SglangPublisher(const std::string& epoch, bool replay = false) {
  TestPublisherOptions po;
  po.topic = LiveTopic(epoch);
  po.replay = replay;
  po.replay_topic_frame = false;  // SGLang replies [seq, payload]
  return po;
}

// What one tracker fed every batch hands out.
std::vector<std::vector<curve::PageId>> ReferencePages(const std::vector<KvEventBatch>& batches) {
  KvEventTracker t(KvEventTrackerOptions{.scope = kScope});
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  for (const KvEventBatch& b : batches) t.Apply(p, b, sink);
  std::vector<std::vector<curve::PageId>> out;
  for (const curve::Request& r : sink.requests) out.push_back(r.pages);
  return out;
}

std::vector<std::vector<curve::PageId>> PagesOf(const std::vector<curve::Request>& requests) {
  std::vector<std::vector<curve::PageId>> out;
  for (const curve::Request& r : requests) out.push_back(r.pages);
  return out;
}

// As an SGLang engine asked for a snapshot every few steps: 20 barriers between
// the live batches (one after the last), each on its own barrier topic, each
// taking the stream's next seq. Before, each barrier topic was a publisher of
// its own and each barrier a gap in the live topic's seqs: 19 false losses
// without a replay endpoint (and a stale publisher per barrier).
TEST(KvEventsSglangEpochTest, TwentyBarriersAreNeitherPublishersNorGaps) {
  EngineCacheModel model(EngineModelOptions{.capacity_blocks = 200});
  const std::vector<KvEventBatch> batches = EngineBatches(1, 300, &model);
  ASSERT_GT(batches.size(), 200u);
  Harness h(SglangPublisher("4f2a9c0d"));
  ASSERT_NE(h.collector, nullptr);
  ASSERT_TRUE(h.pub.WaitForSubscriber());
  const std::size_t every = batches.size() / 20;
  int barriers = 0;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    h.pub.PublishBatch(batches[i], KvEncoding::kArray);
    if ((i + 1) % every == 0 && barriers < 20) {
      h.pub.PublishOn(BarrierTopic("4f2a9c0d", barriers++),
                      EncodeKvEventBatch(Barrier(batches[i].ts), KvEncoding::kArray));
    }
  }
  ASSERT_EQ(barriers, 20);
  const KvTransportCounters& t = h.collector->transport();
  ASSERT_TRUE(h.PollUntil([&] { return t.batches == batches.size() + 20; }));
  EXPECT_EQ(t.lost, 0u);
  EXPECT_EQ(t.restarts, 0u);
  EXPECT_EQ(t.barriers, 20u);
  EXPECT_EQ(h.collector->stats().dropped, 0u);
  EXPECT_TRUE(h.collector->stats().errors.empty());
  EXPECT_EQ(h.collector->tracker().publishers(), 1u);
  ExpectSameState(h.collector->tracker(), 0, model);
  EXPECT_EQ(PagesOf(h.sink.requests), ReferencePages(batches));
  EXPECT_TRUE(h.log.empty()) << h.log.front();
}

// A barrier takes a seq like any batch: a batch lost before it is still a gap
// (without a replay endpoint), and a barrier lost in a gap is replayed as one.
TEST(KvEventsSglangEpochTest, ABarrierNeitherHidesNorMakesAGap) {
  EngineCacheModel model(EngineModelOptions{.capacity_blocks = 200});
  const std::vector<KvEventBatch> batches = EngineBatches(2, 60, &model);
  ASSERT_GE(batches.size(), 30u);
  {
    Harness h(SglangPublisher("e1"));
    ASSERT_TRUE(h.pub.WaitForSubscriber());
    for (std::size_t i = 0; i < 10; ++i) h.pub.PublishBatch(batches[i], KvEncoding::kMap);
    h.pub.PublishBatch(batches[10], KvEncoding::kMap, /*deliver=*/false);
    h.pub.PublishOn(BarrierTopic("e1", 0), EncodeKvEventBatch(Barrier(batches[10].ts), KvEncoding::kMap));
    const KvTransportCounters& t = h.collector->transport();
    ASSERT_TRUE(h.PollUntil([&] { return t.barriers == 1; }));
    EXPECT_EQ(t.lost, 1u);
    EXPECT_EQ(t.batches, 11u);
    EXPECT_TRUE(h.Logged("topic 'kv-events\\x00sgl-kv-epoch=e1': lost 1 batches between seq 10 and 10"));
  }
  Harness h(SglangPublisher("e2", /*replay=*/true), /*replay=*/true);
  ASSERT_TRUE(h.pub.WaitForSubscriber());
  for (std::size_t i = 0; i < 10; ++i) h.pub.PublishBatch(batches[i], KvEncoding::kMap);
  h.pub.PublishOn(BarrierTopic("e2", 0), EncodeKvEventBatch(Barrier(batches[9].ts), KvEncoding::kMap), false);
  for (std::size_t i = 10; i < 14; ++i) h.pub.PublishBatch(batches[i], KvEncoding::kMap, false);
  for (std::size_t i = 14; i < batches.size(); ++i) h.pub.PublishBatch(batches[i], KvEncoding::kMap);
  const KvTransportCounters& t = h.collector->transport();
  ASSERT_TRUE(h.PollUntil([&] { return t.batches == batches.size() + 1; }));
  EXPECT_EQ(t.replayed, 5u);  // the barrier and 4 batches
  EXPECT_EQ(t.lost, 0u);
  EXPECT_EQ(t.barriers, 0u);  // it came from the replay socket
  EXPECT_EQ(h.collector->tracker().publishers(), 1u);
  ExpectSameState(h.collector->tracker(), 0, model);
  EXPECT_EQ(PagesOf(h.sink.requests), ReferencePages(batches));
}

struct EpochParam {
  const char* name;
  bool seq_from_zero;  // SGLang's new process starts at 0; the epoch decides either way
};

class KvEventsSglangNewEpochTest : public ::testing::TestWithParam<EpochParam> {};

// An engine restart under SGLang's snapshot publisher: the same topic with a new
// epoch. It is the same publisher restarted (its block state reset, one
// restart, nothing lost), not a second publisher beside a stale one.
TEST_P(KvEventsSglangNewEpochTest, IsThePublisherRestarted) {
  EngineCacheModel first(EngineModelOptions{.capacity_blocks = 200});
  EngineCacheModel second(EngineModelOptions{.capacity_blocks = 200});
  const std::vector<KvEventBatch> before = EngineBatches(3, 150, &first);
  const std::vector<KvEventBatch> after = EngineBatches(4, 100, &second);
  Harness h(SglangPublisher("epoch-a"));
  ASSERT_NE(h.collector, nullptr);
  ASSERT_TRUE(h.pub.WaitForSubscriber());
  for (const KvEventBatch& b : before) h.pub.PublishBatch(b, KvEncoding::kArray);
  h.pub.PublishOn(BarrierTopic("epoch-a", 1), EncodeKvEventBatch(Barrier(before.back().ts), KvEncoding::kArray));
  const KvTransportCounters& t = h.collector->transport();
  ASSERT_TRUE(h.PollUntil([&] { return t.batches == before.size() + 1; }));
  ExpectSameState(h.collector->tracker(), 0, first);

  const std::uint64_t last = h.pub.next_seq() - 1;
  h.pub.Restart();
  if (!GetParam().seq_from_zero) h.pub.SetNextSeq(last + 1);
  h.pub.SetTopic(LiveTopic("epoch-b"));
  for (const KvEventBatch& b : after) h.pub.PublishBatch(b, KvEncoding::kArray);
  ASSERT_TRUE(h.PollUntil([&] { return t.batches == before.size() + 1 + after.size(); }));
  EXPECT_EQ(t.restarts, 1u);
  EXPECT_EQ(t.lost, 0u);
  EXPECT_EQ(h.collector->tracker().publishers(), 1u);
  ExpectSameState(h.collector->tracker(), 0, second);
  EXPECT_EQ(h.collector->stats().dropped, 0u);
  EXPECT_EQ(h.collector->WantsSave(), true);
  // The topics whole, the NULs visible; no raw NUL reaches the log.
  const std::string first_seq = std::to_string(GetParam().seq_from_zero ? 0 : last + 1);
  EXPECT_TRUE(h.Logged(h.pub.endpoint() + " topic 'kv-events\\x00sgl-kv-epoch=epoch-a': epoch 'epoch-b' (seq " +
                       first_seq + ") after epoch 'epoch-a' (seq " + std::to_string(last) +
                       "), now topic 'kv-events\\x00sgl-kv-epoch=epoch-b': publisher restarted"))
      << (h.log.empty() ? "(no log)" : h.log.front());
  EXPECT_FALSE(h.LoggedANul());
  EXPECT_EQ(h.log.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Seq, KvEventsSglangNewEpochTest,
                         ::testing::Values(EpochParam{"FromZero", true}, EpochParam{"Continuing", false}),
                         [](const ::testing::TestParamInfo<EpochParam>& p) { return std::string(p.param.name); });

// The epoch is kept in the state file (as the publisher's topic): an engine that
// restarted while the agent was down and has published past the saved seq is a
// restart, not a gap to replay (which the seq alone cannot tell).
TEST(KvEventsSglangEpochTest, NewEpochWhileTheAgentWasDownIsARestartNotAGap) {
  EngineCacheModel first(EngineModelOptions{.capacity_blocks = 200});
  EngineCacheModel second(EngineModelOptions{.capacity_blocks = 200});
  const std::vector<KvEventBatch> before = EngineBatches(5, 100, &first);
  const std::vector<KvEventBatch> after = EngineBatches(6, 200, &second);
  ASSERT_GT(after.size(), before.size() + 20);
  Harness h(SglangPublisher("epoch-a", /*replay=*/true), /*replay=*/true);
  ASSERT_TRUE(h.pub.WaitForSubscriber());
  for (const KvEventBatch& b : before) h.pub.PublishBatch(b, KvEncoding::kMap);
  ASSERT_TRUE(h.PollUntil([&] { return h.collector->transport().batches == before.size(); }));
  std::vector<std::uint8_t> state;
  h.collector->AppendState(&state);
  h.collector.reset();
  ASSERT_TRUE(h.pub.WaitForUnsubscribe());

  h.pub.Restart();
  h.pub.SetTopic(LiveTopic("epoch-b"));
  const std::size_t unseen = before.size() + 10;  // past the saved seq, to no one
  for (std::size_t i = 0; i < unseen; ++i) h.pub.PublishBatch(after[i], KvEncoding::kMap);
  h.collector = h.Make();
  ASSERT_NE(h.collector, nullptr);
  const base::Status restored = h.collector->RestoreState(state);
  ASSERT_TRUE(restored.ok()) << restored.error();
  ASSERT_TRUE(h.pub.WaitForSubscriber());
  for (std::size_t i = unseen; i < after.size(); ++i) h.pub.PublishBatch(after[i], KvEncoding::kMap);
  const KvTransportCounters& t = h.collector->transport();
  // The counters continue across the restore (the collector's state carries them).
  ASSERT_TRUE(h.PollUntil([&] { return t.batches == before.size() + after.size() - unseen; }));
  EXPECT_EQ(t.restarts, 1u);
  EXPECT_EQ(t.lost, 0u);
  EXPECT_EQ(t.replay_requests, 0u);
  EXPECT_EQ(h.collector->tracker().publishers(), 1u);
  EXPECT_TRUE(h.Logged("after epoch 'epoch-a' (seq " + std::to_string(before.size() - 1) +
                       ") (the last before the agent restarted)"));
  EXPECT_FALSE(h.LoggedANul());
}

}  // namespace
}  // namespace kvwatch::collectors
