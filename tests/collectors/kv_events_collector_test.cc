// KvEventsCollector over real ZeroMQ sockets on 127.0.0.1, fed by
// KvEventsTestPublisher with the events EngineCacheModel derives from traces.
#include "collectors/kv_events_collector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/byte_io.h"
#include "collectors/kv_event_decoder.h"
#include "collectors/kv_event_tracker.h"
#include "collectors/testing/kv_event_encoder.h"
#include "collectors/trace_reader.h"
#include "curve/curve_accumulator.h"
#include "curve/stack_distance.h"
#include "tests/collectors/kv_events_test_publisher.h"
#include "tests/collectors/kv_events_test_state.h"

namespace kvwatch::collectors {
namespace {

using testing::EngineCacheModel;
using testing::EngineModelOptions;
using testing::ExpectSameState;
using testing::KvEventsTestPublisher;
using testing::TestPublisherOptions;
using Trace = std::vector<std::vector<std::uint64_t>>;

constexpr char kScope[] = "test-model";

struct CaptureSink : RequestSink {
  std::vector<curve::Request> requests;
  void OnRequest(const curve::Request& r) override { requests.push_back(r); }
};

// ---- Traces -------------------------------------------------------------------

// Chat-like sessions over a few shared system prompts: each turn extends its
// session's history; some requests repeat a prefix of a session (regenerate,
// retries: they store nothing new), some are one-shot. Every id has one parent.
Trace PrefixSharingTrace(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 rng(seed);
  std::uint64_t next_id = 1;
  std::vector<std::vector<std::uint64_t>> prompts(6);
  for (auto& p : prompts) {
    const std::size_t len = 2 + rng() % 11;
    for (std::size_t i = 0; i < len; ++i) p.push_back(next_id++);
  }
  std::vector<std::vector<std::uint64_t>> sessions;
  Trace trace;
  while (trace.size() < n) {
    const std::uint64_t roll = rng() % 100;
    if (roll < 15) {                                      // one-shot
      std::vector<std::uint64_t> r = prompts[rng() % 2];  // two popular prompts
      for (std::uint64_t i = 0, k = 1 + rng() % 8; i < k; ++i) r.push_back(next_id++);
      trace.push_back(std::move(r));
      continue;
    }
    if (sessions.empty() || (roll < 30 && sessions.size() < 40)) {
      sessions.push_back(prompts[std::min<std::size_t>(rng() % 8, prompts.size() - 1)]);
    }
    const std::size_t s = rng() % sessions.size();
    std::vector<std::uint64_t>& history = sessions[s];
    if (roll >= 80) {  // a repeat of a prefix of the session
      const std::size_t len = 1 + rng() % history.size();
      trace.emplace_back(history.begin(), history.begin() + static_cast<std::ptrdiff_t>(len));
      continue;
    }
    for (std::uint64_t i = 0, k = 1 + rng() % 6; i < k; ++i) history.push_back(next_id++);
    trace.push_back(history);
    if (history.size() > 120 || rng() % 100 < 6) sessions.erase(sessions.begin() + static_cast<std::ptrdiff_t>(s));
  }
  return trace;
}

std::optional<Trace> MooncakeConversation(std::size_t max_requests) {
  const std::string path = std::string(KVWATCH_SHARED_DATA) + "/mooncake/conversation_trace.jsonl";
  if (!std::filesystem::exists(path)) return std::nullopt;
  Trace trace;
  TraceCallbacks callbacks;
  callbacks.on_request = [&](curve::Request& r) {
    if (trace.size() < max_requests) trace.push_back(r.pages);
  };
  base::Result<TraceReadSummary> read = ReadTrace(path, TraceReaderOptions{}, callbacks);
  if (!read.ok()) return std::nullopt;
  return trace;
}

// ---- Curves -------------------------------------------------------------------

curve::CurveAccumulator CurveOf(const std::vector<std::vector<curve::PageId>>& requests) {
  curve::EngineOptions o;
  o.max_pages = 1u << 20;
  curve::StackDistanceEngine engine(o);
  curve::CurveAccumulator acc;
  curve::RequestOutcome outcome;
  for (const auto& pages : requests) {
    engine.Process(pages, &outcome);
    acc.Add(outcome);
  }
  return acc;
}

std::vector<std::vector<curve::PageId>> PagesOf(const std::vector<curve::Request>& requests) {
  std::vector<std::vector<curve::PageId>> out;
  for (const auto& r : requests) out.push_back(r.pages);
  return out;
}

// The page ids the collector gives a trace request's blocks (no LoRA, salt or extra keys).
std::vector<curve::PageId> Scoped(const std::vector<std::uint64_t>& hashes) {
  const std::uint64_t scope = KvEventScope(KvBaseScope(kScope), BlockStored{});
  std::vector<curve::PageId> out;
  for (std::uint64_t h : hashes) out.push_back(KvScopedPageId(scope, 0, h));
  return out;
}

double MaxHitRatioError(const curve::CurveAccumulator& a, const curve::CurveAccumulator& b) {
  const std::uint64_t top = std::max(a.MaxCapacity(), b.MaxCapacity()) + 1;
  double worst = 0;
  for (std::uint64_t c = 1; c <= top; ++c) worst = std::max(worst, std::fabs(a.PageHitRatio(c) - b.PageHitRatio(c)));
  return worst;
}

// ---- Harness ------------------------------------------------------------------

KvEventsCollectorOptions CollectorOptions(std::vector<std::string> endpoints, std::string replay = "") {
  KvEventsCollectorOptions o;
  o.name = "engine";
  o.endpoints = std::move(endpoints);
  o.topic = "kv";  // a prefix of the publisher's "kv-events"
  o.replay_endpoint = std::move(replay);
  o.tracker.scope = kScope;
  o.replay_timeout = std::chrono::milliseconds(2000);  // generous for a loaded test machine
  return o;
}

std::unique_ptr<KvEventsCollector> MakeCollector(KvEventsCollectorOptions o, std::vector<std::string>* log) {
  auto created = KvEventsCollector::Create(std::move(o), [log](std::string_view, std::string_view m) {
    if (log != nullptr) log->emplace_back(m);
  });
  EXPECT_TRUE(created.ok()) << (created.ok() ? "" : created.error());
  return created.ok() ? std::move(created).value() : nullptr;
}

// Polls until done() or a generous bound (a failure, never a timing assertion).
// The wall clock is the real one: batch timestamps are checked against it.
bool PollUntil(KvEventsCollector& c, RequestSink& sink, const std::function<bool()>& done) {
  for (int i = 0; i < 30000; ++i) {
    c.Poll(sink, WallNow());
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

struct SimRun {
  std::vector<KvEventBatch> batches;
  std::vector<bool> missed;  // per trace request: it stored something
};

SimRun Simulate(const Trace& trace, EngineCacheModel* model) {
  SimRun run;
  for (const auto& r : trace) run.missed.push_back(model->Run(r));
  run.batches = model->TakeBatches();
  return run;
}

// Publishes a trace's events and collects them; returns the collector.
struct Delivered {
  std::unique_ptr<KvEventsCollector> collector;
  CaptureSink sink;
};

std::unique_ptr<Delivered> Deliver(const std::vector<KvEventBatch>& batches, KvEncoding encoding) {
  auto d = std::make_unique<Delivered>();
  KvEventsTestPublisher pub(TestPublisherOptions{});
  d->collector = MakeCollector(CollectorOptions({pub.endpoint()}), nullptr);
  if (d->collector == nullptr) return d;
  EXPECT_TRUE(pub.WaitForSubscriber());
  for (const KvEventBatch& b : batches) pub.PublishBatch(b, encoding);
  EXPECT_TRUE(PollUntil(*d->collector, d->sink, [&] { return d->collector->transport().batches == batches.size(); }));
  return d;
}

// ---- (a) full report mode: the agent's curve is the replay curve ---------------

struct ModeParam {
  KvEncoding encoding;
  std::size_t requests_per_batch;
};

class KvEventsFullReportTest : public ::testing::TestWithParam<ModeParam> {};

TEST_P(KvEventsFullReportTest, CurveEqualsTheTraceCurve) {
  const Trace trace = PrefixSharingTrace(7, 3000);
  EngineModelOptions o;
  o.capacity_blocks = 600;
  o.report_reuse = true;
  o.requests_per_batch = GetParam().requests_per_batch;
  EngineCacheModel model(o);
  const SimRun run = Simulate(trace, &model);
  auto d = Deliver(run.batches, GetParam().encoding);
  ASSERT_NE(d->collector, nullptr);

  // Every request, page for page.
  ASSERT_EQ(d->sink.requests.size(), trace.size());
  std::size_t different = 0;
  for (std::size_t i = 0; i < trace.size(); ++i) different += d->sink.requests[i].pages != Scoped(trace[i]);
  EXPECT_EQ(different, 0u);

  const curve::CurveAccumulator expected = CurveOf(std::vector<std::vector<curve::PageId>>(trace.begin(), trace.end()));
  const curve::CurveAccumulator got = CurveOf(PagesOf(d->sink.requests));
  EXPECT_EQ(got.requests(), expected.requests());
  EXPECT_EQ(got.page_refs(), expected.page_refs());
  EXPECT_EQ(got.unlimited_page_hits(), expected.unlimited_page_hits());
  ASSERT_GT(expected.unlimited_page_hits(), 0u);
  for (std::uint64_t c = 1; c <= expected.MaxCapacity() + 2; ++c) {
    ASSERT_EQ(got.PageHits(c), expected.PageHits(c)) << "capacity " << c;
    ASSERT_EQ(got.RequestCoverage(c), expected.RequestCoverage(c)) << "capacity " << c;
  }

  // (c) the engine's counters and state.
  const auto media = d->collector->tracker().MediumCounters();
  EXPECT_EQ(media[0].evicted_blocks, model.evicted_blocks());
  EXPECT_EQ(media[0].stored_blocks, model.stored_blocks());
  EXPECT_EQ(media[0].reused_blocks, model.reused_blocks());
  EXPECT_GT(model.evicted_blocks(), 0u);
  ExpectSameState(d->collector->tracker(), 0, model);
  EXPECT_EQ(d->collector->transport().lost, 0u);
  EXPECT_TRUE(d->collector->stats().errors.empty());
}

INSTANTIATE_TEST_SUITE_P(Encodings, KvEventsFullReportTest,
                         ::testing::Values(ModeParam{KvEncoding::kArray, 1}, ModeParam{KvEncoding::kMap, 1},
                                           ModeParam{KvEncoding::kMap, 4}),
                         [](const ::testing::TestParamInfo<ModeParam>& p) {
                           return std::string(p.param.encoding == KvEncoding::kArray ? "Array" : "Map") +
                                  std::to_string(p.param.requests_per_batch) + "PerBatch";
                         });

// ---- (b) incremental mode: reconstruction from parent links ---------------------

class KvEventsReconstructionTest : public ::testing::TestWithParam<KvEncoding> {};

TEST_P(KvEventsReconstructionTest, RebuildsEveryRequestThatStoredSomething) {
  const Trace trace = PrefixSharingTrace(11, 3000);
  EngineModelOptions o;
  o.capacity_blocks = 600;
  EngineCacheModel model(o);
  const SimRun run = Simulate(trace, &model);
  auto d = Deliver(run.batches, GetParam());
  ASSERT_NE(d->collector, nullptr);

  // Exactly the requests that missed, each with its whole prefix.
  std::vector<std::vector<curve::PageId>> expected;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    if (run.missed[i]) expected.push_back(Scoped(trace[i]));
  }
  ASSERT_LT(expected.size(), trace.size());  // the trace has invisible full hits
  EXPECT_EQ(PagesOf(d->sink.requests), expected);
  EXPECT_EQ(d->collector->tracker().counters().chains_truncated, 0u);

  // (c) counters and state in this mode too.
  const auto media = d->collector->tracker().MediumCounters();
  EXPECT_EQ(media[0].evicted_blocks, model.evicted_blocks());
  EXPECT_EQ(media[0].stored_blocks, model.stored_blocks());
  ExpectSameState(d->collector->tracker(), 0, model);

  const curve::CurveAccumulator truth = CurveOf(std::vector<std::vector<curve::PageId>>(trace.begin(), trace.end()));
  const curve::CurveAccumulator rebuilt = CurveOf(PagesOf(d->sink.requests));
  const double error = MaxHitRatioError(truth, rebuilt);
  std::printf(
      "[ reconstruction ] synthetic prefix-sharing trace, %zu requests, engine cache %zu blocks: "
      "%zu requests rebuilt (%zu full hits invisible); page hit ratio at unlimited capacity %.4f (trace) "
      "vs %.4f (rebuilt); max |error| over capacities %.4f\n",
      trace.size(), o.capacity_blocks, d->sink.requests.size(), trace.size() - d->sink.requests.size(),
      truth.UnlimitedPageHitRatio(), rebuilt.UnlimitedPageHitRatio(), error);
  EXPECT_GT(error, 0.0);  // the invisible hits do show
  EXPECT_LT(error, 1.0);
}

INSTANTIATE_TEST_SUITE_P(Encodings, KvEventsReconstructionTest, ::testing::Values(KvEncoding::kArray, KvEncoding::kMap),
                         [](const ::testing::TestParamInfo<KvEncoding>& p) {
                           return p.param == KvEncoding::kArray ? "Array" : "Map";
                         });

TEST(KvEventsReconstructionTest, MooncakeConversationError) {
  const std::optional<Trace> trace = MooncakeConversation(2000);
  if (!trace.has_value()) GTEST_SKIP() << "no mooncake/conversation_trace.jsonl under " << KVWATCH_SHARED_DATA;
  const curve::CurveAccumulator truth = CurveOf(std::vector<std::vector<curve::PageId>>(trace->begin(), trace->end()));
  for (std::size_t capacity : {1024u, 8192u}) {
    EngineModelOptions o;
    o.capacity_blocks = capacity;
    o.tokens_per_block = 0;  // Mooncake blocks are 512 tokens; the payload size does not matter here
    EngineCacheModel model(o);
    const SimRun run = Simulate(*trace, &model);
    auto d = Deliver(run.batches, KvEncoding::kMap);
    ASSERT_NE(d->collector, nullptr);
    const std::size_t missed = static_cast<std::size_t>(std::count(run.missed.begin(), run.missed.end(), true));
    EXPECT_EQ(d->sink.requests.size(), missed);
    std::size_t differing = 0;
    for (std::size_t i = 0, j = 0; i < trace->size() && j < d->sink.requests.size(); ++i) {
      if (!run.missed[i]) continue;
      differing += d->sink.requests[j++].pages != Scoped((*trace)[i]);
    }
    const curve::CurveAccumulator rebuilt = CurveOf(PagesOf(d->sink.requests));
    std::printf(
        "[ reconstruction ] mooncake conversation, first %zu requests, engine cache %zu blocks: %zu "
        "requests rebuilt (%zu full hits invisible, %zu rebuilt differently); page hit ratio at unlimited "
        "capacity %.4f (trace) vs %.4f (rebuilt); max |error| over capacities %.4f\n",
        trace->size(), capacity, d->sink.requests.size(), trace->size() - missed, differing,
        truth.UnlimitedPageHitRatio(), rebuilt.UnlimitedPageHitRatio(), MaxHitRatioError(truth, rebuilt));
    EXPECT_EQ(d->collector->tracker().MediumCounters()[0].evicted_blocks, model.evicted_blocks());
  }
}

// ---- (d) gaps and replay --------------------------------------------------------

struct ReplayFixture {
  Trace trace = PrefixSharingTrace(3, 400);
  EngineCacheModel model{EngineModelOptions{.capacity_blocks = 300}};
  SimRun run = Simulate(trace, &model);
  // What a collector that missed nothing hands out.
  std::vector<curve::Request> Reference() {
    KvEventTracker t(KvEventTrackerOptions{.scope = kScope});
    const std::size_t p = t.AddPublisher();
    CaptureSink sink;
    for (const KvEventBatch& b : run.batches) t.Apply(p, b, sink);
    return sink.requests;
  }
};

void ExpectSameRequests(const std::vector<curve::Request>& got, const std::vector<curve::Request>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].pages, want[i].pages) << "request " << i;
    ASSERT_EQ(got[i].timestamp_s, want[i].timestamp_s) << "request " << i;
  }
}

class KvEventsReplayTest : public ::testing::TestWithParam<bool> {};

TEST_P(KvEventsReplayTest, GapIsFetchedFromTheReplaySocket) {
  ReplayFixture f;
  ASSERT_GT(f.run.batches.size(), 100u);
  TestPublisherOptions po;
  po.replay = true;
  po.replay_topic_frame = GetParam();
  KvEventsTestPublisher pub(po);
  auto collector = MakeCollector(CollectorOptions({pub.endpoint()}, pub.replay_endpoint()), nullptr);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(pub.WaitForSubscriber());
  CaptureSink sink;
  for (std::size_t i = 0; i < f.run.batches.size(); ++i) {
    pub.PublishBatch(f.run.batches[i], KvEncoding::kMap, /*deliver=*/i < 40 || i >= 60);
  }
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == f.run.batches.size(); }));
  EXPECT_EQ(collector->transport().replayed, 20u);
  EXPECT_EQ(collector->transport().lost, 0u);
  EXPECT_EQ(collector->stats().dropped, 0u);
  EXPECT_GE(pub.replay_requests(), 1u);
  ExpectSameRequests(sink.requests, f.Reference());
  ExpectSameState(collector->tracker(), 0, f.model);
  EXPECT_EQ(collector->tracker().MediumCounters()[0].evicted_blocks, f.model.evicted_blocks());
}

INSTANTIATE_TEST_SUITE_P(ReplyFraming, KvEventsReplayTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "TopicFrame" : "NoTopicFrame";
                         });

TEST(KvEventsGapTest, WithoutReplayTheLossIsCounted) {
  ReplayFixture f;
  KvEventsTestPublisher pub(TestPublisherOptions{});
  auto collector = MakeCollector(CollectorOptions({pub.endpoint()}), nullptr);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(pub.WaitForSubscriber());
  CaptureSink sink;
  for (std::size_t i = 0; i < f.run.batches.size(); ++i) {
    pub.PublishBatch(f.run.batches[i], KvEncoding::kArray, i < 40 || i >= 60);
  }
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == f.run.batches.size() - 20; }));
  EXPECT_EQ(collector->transport().lost, 20u);
  EXPECT_EQ(collector->stats().dropped, 20u);
  EXPECT_EQ(collector->transport().replayed, 0u);
  std::vector<MetricSample> samples;
  collector->AppendSamples(&samples);
  auto value = [&](const std::string& name) {
    for (const MetricSample& s : samples) {
      if (s.name == name) return s.value;
    }
    return -1.0;
  };
  EXPECT_EQ(value("kvwatch_kv_events_lost_total"), 20.0);
  EXPECT_EQ(value("kvwatch_kv_events_replayed_total"), 0.0);
  EXPECT_EQ(value("kvwatch_kv_events_batches_total"), static_cast<double>(f.run.batches.size() - 20));
}

TEST(KvEventsGapTest, BatchesThatLeftTheReplayBufferAreLost) {
  ReplayFixture f;
  TestPublisherOptions po;
  po.replay = true;
  po.replay_buffer = 15;
  KvEventsTestPublisher pub(po);
  auto collector = MakeCollector(CollectorOptions({pub.endpoint()}, pub.replay_endpoint()), nullptr);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(pub.WaitForSubscriber());
  CaptureSink sink;
  for (std::size_t i = 0; i < 60; ++i) pub.PublishBatch(f.run.batches[i], KvEncoding::kMap, i < 40);
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 40; }));
  pub.PublishBatch(f.run.batches[60], KvEncoding::kMap);  // the buffer now holds seq 46..60
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 40 + 14 + 1; }));
  EXPECT_EQ(collector->transport().replayed, 14u);
  EXPECT_EQ(collector->transport().lost, 6u);
}

// ---- (e) publisher restart ------------------------------------------------------

TEST(KvEventsRestartTest, SeqGoingBackResetsThePublishersState) {
  const Trace before = PrefixSharingTrace(5, 200);
  const Trace after = PrefixSharingTrace(6, 100);
  EngineCacheModel first(EngineModelOptions{.capacity_blocks = 300});
  EngineCacheModel second(EngineModelOptions{.capacity_blocks = 300});
  const SimRun a = Simulate(before, &first);
  const SimRun b = Simulate(after, &second);
  KvEventsTestPublisher pub(TestPublisherOptions{});
  std::vector<std::string> log;
  auto collector = MakeCollector(CollectorOptions({pub.endpoint()}), &log);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(pub.WaitForSubscriber());
  CaptureSink sink;
  for (const KvEventBatch& batch : a.batches) pub.PublishBatch(batch, KvEncoding::kMap);
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == a.batches.size(); }));
  ExpectSameState(collector->tracker(), 0, first);

  pub.Restart();  // a new engine process: seq 0, empty cache
  for (const KvEventBatch& batch : b.batches) pub.PublishBatch(batch, KvEncoding::kMap);
  ASSERT_TRUE(PollUntil(*collector, sink,
                        [&] { return collector->transport().batches == a.batches.size() + b.batches.size(); }));
  EXPECT_EQ(collector->transport().restarts, 1u);
  EXPECT_EQ(collector->transport().lost, 0u);
  ExpectSameState(collector->tracker(), 0, second);
  EXPECT_TRUE(std::any_of(log.begin(), log.end(),
                          [](const std::string& m) { return m.find("restarted") != std::string::npos; }));
}

// ---- (e2) sequence numbers that are not a gap -------------------------------------

double SampleValue(const KvEventsCollector& c, const std::string& name) {
  std::vector<MetricSample> samples;
  c.AppendSamples(&samples);
  for (const MetricSample& s : samples) {
    if (s.name == name) return s.value;
  }
  return -1.0;
}

bool Logged(const std::vector<std::string>& log, const std::string& needle) {
  return std::any_of(log.begin(), log.end(), [&](const std::string& m) { return m.find(needle) != std::string::npos; });
}

// Batches 0..9 in order, then one whose seq is `jump`: a restart, never a loss.
void ExpectRestartNotLoss(std::uint64_t jump) {
  ReplayFixture f;
  KvEventsTestPublisher pub(TestPublisherOptions{});
  std::vector<std::string> log;
  auto collector = MakeCollector(CollectorOptions({pub.endpoint()}), &log);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(pub.WaitForSubscriber());
  CaptureSink sink;
  for (std::size_t i = 0; i < 10; ++i) pub.PublishBatch(f.run.batches[i], KvEncoding::kMap);
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 10; }));
  std::vector<std::uint8_t> state;
  collector->AppendState(&state);
  EXPECT_FALSE(collector->WantsSave());
  pub.SetNextSeq(jump);
  pub.PublishBatch(f.run.batches[10], KvEncoding::kMap);
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 11; }));
  EXPECT_EQ(collector->transport().restarts, 1u);
  EXPECT_EQ(collector->transport().lost, 0u);
  EXPECT_EQ(collector->stats().dropped, 0u);
  EXPECT_EQ(collector->transport().replay_requests, 0u);
  EXPECT_EQ(SampleValue(*collector, "kvwatch_kv_events_lost_total"), 0.0);
  EXPECT_EQ(SampleValue(*collector, "kvwatch_kv_events_publisher_restarts_total"), 1.0);
  EXPECT_EQ(collector->tracker().counters().publisher_resets, 1u);
  EXPECT_TRUE(collector->WantsSave());
  // Logged with the publisher (endpoint and topic) and both sequence numbers.
  EXPECT_TRUE(Logged(log, pub.endpoint() + " topic 'kv-events': seq " + std::to_string(jump) + " after 9"));
}

TEST(KvEventsRestartTest, SeqMinusFiveIsARestartNotALoss) {
  ExpectRestartNotLoss(static_cast<std::uint64_t>(std::int64_t{-5}));
}

TEST(KvEventsRestartTest, JumpOfTwoToTheFortyIsARestartNotALoss) { ExpectRestartNotLoss(9 + (std::uint64_t{1} << 40)); }

TEST(KvEventsGapTest, GapAtTheBoundIsCountedLostWithoutReplay) {
  ReplayFixture f;
  KvEventsTestPublisher pub(TestPublisherOptions{});
  auto collector = MakeCollector(CollectorOptions({pub.endpoint()}), nullptr);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(pub.WaitForSubscriber());
  CaptureSink sink;
  for (std::size_t i = 0; i < 10; ++i) pub.PublishBatch(f.run.batches[i], KvEncoding::kMap);
  pub.SetNextSeq(9 + kKvMaxSeqJump);  // the furthest jump that is still a gap
  pub.PublishBatch(f.run.batches[10], KvEncoding::kMap);
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 11; }));
  EXPECT_EQ(collector->transport().restarts, 0u);
  EXPECT_EQ(collector->transport().lost, kKvMaxSeqJump - 1);
  EXPECT_EQ(collector->stats().dropped, kKvMaxSeqJump - 1);
}

// ---- (f) malformed input --------------------------------------------------------

std::string Bytes(const std::vector<std::uint8_t>& v) { return std::string(v.begin(), v.end()); }

TEST(KvEventsMalformedTest, BadFramesAndPayloadsAreCountedNotFatal) {
  KvEventsTestPublisher pub(TestPublisherOptions{});
  std::vector<std::string> log;
  auto collector = MakeCollector(CollectorOptions({pub.endpoint()}), &log);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(pub.WaitForSubscriber());

  KvEventBatch good;
  good.ts = 5.0;
  BlockStored stored;
  stored.block_hashes = {1, 2};
  good.events.emplace_back(stored);
  const std::vector<std::uint8_t> payload = EncodeKvEventBatch(good, KvEncoding::kMap);
  const std::string seq0 = Bytes({0, 0, 0, 0, 0, 0, 0, 0});

  pub.SendRaw({"kv-events", seq0});                                            // 2 frames
  pub.SendRaw({"kv-events", seq0, Bytes(payload), "extra"});                   // 4 frames
  pub.SendRaw({"kv-events", "a", "b", "c", "d", "e", "f"});                    // 7 frames
  pub.SendRaw({"kv-events", "1234567", Bytes(payload)});                       // a 7-byte seq
  pub.Publish({0xc1});                                                         // seq 0: not msgpack
  pub.Publish(std::vector<std::uint8_t>(payload.begin(), payload.end() - 3));  // seq 1: truncated
  pub.Publish({0x93, 0x01, 0x02, 0x03});                                       // seq 2: [1, 2, 3]: bad envelope
  pub.Publish(payload);                                                        // seq 3: good
  CaptureSink sink;
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 1; }));
  const CollectorStats s = collector->stats();
  EXPECT_EQ(s.errors.at("bad_frames"), 4u);
  EXPECT_EQ(s.errors.at("not_msgpack"), 1u);
  EXPECT_EQ(s.errors.at("truncated"), 1u);
  EXPECT_EQ(s.errors.at("bad_envelope"), 1u);
  EXPECT_EQ(collector->transport().lost, 0u);  // bad payloads still advance the seq
  ASSERT_EQ(sink.requests.size(), 1u);
  EXPECT_EQ(sink.requests[0].pages, Scoped({1, 2}));
  EXPECT_EQ(log.size(), 7u);
}

// ---- Transport details ------------------------------------------------------------

TEST(KvEventsTransportTest, BindModeAcceptsConnectingEngines) {
  KvEventsCollectorOptions o = CollectorOptions({"tcp://127.0.0.1:*"});
  o.bind = true;
  auto collector = MakeCollector(o, nullptr);
  ASSERT_NE(collector, nullptr);
  const std::string bound = collector->endpoints()[0];
  ASSERT_NE(bound.find("127.0.0.1:"), std::string::npos);
  ASSERT_EQ(bound.find('*'), std::string::npos);
  EXPECT_TRUE(collector->stats().up);  // bound

  TestPublisherOptions po;
  po.connect_to = bound;
  KvEventsTestPublisher pub(po);
  CaptureSink sink;
  ASSERT_TRUE(pub.WaitForSubscriber([&] { collector->Poll(sink, WallNow()); }));
  const Trace trace = PrefixSharingTrace(9, 50);
  EngineCacheModel model(EngineModelOptions{});
  const SimRun run = Simulate(trace, &model);
  for (const KvEventBatch& b : run.batches) pub.PublishBatch(b, KvEncoding::kArray);
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == run.batches.size(); }));
  ExpectSameState(collector->tracker(), 0, model);
}

TEST(KvEventsTransportTest, UpOnceConnected) {
  KvEventsTestPublisher pub(TestPublisherOptions{});
  auto collector = MakeCollector(CollectorOptions({pub.endpoint()}), nullptr);
  ASSERT_NE(collector, nullptr);
  CaptureSink sink;
  EXPECT_TRUE(PollUntil(*collector, sink, [&] { return collector->stats().up; }));
}

TEST(KvEventsTransportTest, TwoRanksKeepTheirOwnState) {
  KvEventsTestPublisher rank0(TestPublisherOptions{});
  KvEventsTestPublisher rank1(TestPublisherOptions{});
  auto collector = MakeCollector(CollectorOptions({rank0.endpoint(), rank1.endpoint()}), nullptr);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(rank0.WaitForSubscriber());
  ASSERT_TRUE(rank1.WaitForSubscriber());
  EngineCacheModel m0(EngineModelOptions{.capacity_blocks = 200});
  EngineCacheModel m1(EngineModelOptions{.capacity_blocks = 200, .dp_rank = 1});
  const SimRun r0 = Simulate(PrefixSharingTrace(1, 150), &m0);
  const SimRun r1 = Simulate(PrefixSharingTrace(2, 150), &m1);
  for (const auto& b : r0.batches) rank0.PublishBatch(b, KvEncoding::kMap);
  for (const auto& b : r1.batches) rank1.PublishBatch(b, KvEncoding::kMap);
  CaptureSink sink;
  ASSERT_TRUE(PollUntil(*collector, sink,
                        [&] { return collector->transport().batches == r0.batches.size() + r1.batches.size(); }));
  EXPECT_EQ(collector->transport().lost, 0u);  // each rank's seq is its own
  EXPECT_EQ(collector->tracker().MediumCounters()[0].resident_blocks, m0.Resident().size() + m1.Resident().size());
  EXPECT_EQ(collector->tracker().MediumCounters()[0].evicted_blocks, m0.evicted_blocks() + m1.evicted_blocks());
}

TEST(KvEventsTransportTest, CreateReportsBadEndpoints) {
  auto star = KvEventsCollector::Create(CollectorOptions({"tcp://*:5557"}), nullptr);
  ASSERT_FALSE(star.ok());
  EXPECT_NE(star.error().find("endpoints[0]"), std::string::npos) << star.error();
  EXPECT_NE(star.error().find("engine-host"), std::string::npos) << star.error();
  EXPECT_FALSE(KvEventsCollector::Create(CollectorOptions({"bogus://x"}), nullptr).ok());
  EXPECT_FALSE(KvEventsCollector::Create(CollectorOptions({}), nullptr).ok());
  auto replay = KvEventsCollector::Create(
      CollectorOptions({"tcp://127.0.0.1:5557", "tcp://127.0.0.1:5558"}, "tcp://127.0.0.1:*"), nullptr);
  ASSERT_FALSE(replay.ok());
  EXPECT_NE(replay.error().find("replay_endpoint"), std::string::npos) << replay.error();
}

TEST(KvEventsTransportTest, ReplayEndpointsAreOffsetPerRank) {
  EXPECT_EQ(OffsetKvEndpoint("tcp://10.0.0.1:5558", 0).value(), "tcp://10.0.0.1:5558");
  EXPECT_EQ(OffsetKvEndpoint("tcp://10.0.0.1:5558", 3).value(), "tcp://10.0.0.1:5561");
  EXPECT_EQ(OffsetKvEndpoint("inproc://replay", 2).value(), "inproc://replay_dp2");
  EXPECT_EQ(OffsetKvEndpoint("ipc:///tmp/replay", 1).value(), "ipc:///tmp/replay_dp1");
  EXPECT_FALSE(OffsetKvEndpoint("tcp://host:*", 1).ok());
  EXPECT_FALSE(OffsetKvEndpoint("tcp://host:65535", 1).ok());
}

TEST(KvEventsTransportTest, SamplesCarryTheCollectorAndMediumLabels) {
  KvEventsTestPublisher pub(TestPublisherOptions{});
  auto collector = MakeCollector(CollectorOptions({pub.endpoint()}), nullptr);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(pub.WaitForSubscriber());
  EngineCacheModel model(EngineModelOptions{.capacity_blocks = 100});
  const SimRun run = Simulate(PrefixSharingTrace(4, 200), &model);
  for (const auto& b : run.batches) pub.PublishBatch(b, KvEncoding::kMap);
  CaptureSink sink;
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == run.batches.size(); }));
  std::vector<MetricSample> samples;
  collector->AppendSamples(&samples);
  std::map<std::string, double> gpu;
  for (const MetricSample& s : samples) {
    ASSERT_FALSE(s.labels.empty());
    EXPECT_EQ(s.labels[0], (std::pair<std::string, std::string>{"collector", "engine"}));
    EXPECT_EQ(s.counter, s.name.size() > 6 && s.name.substr(s.name.size() - 6) == "_total") << s.name;
    if (s.labels.size() == 2 && s.labels[1].first == "medium" && s.labels[1].second == "GPU") gpu[s.name] = s.value;
  }
  EXPECT_EQ(gpu.at("kvwatch_engine_evicted_blocks_total"), static_cast<double>(model.evicted_blocks()));
  EXPECT_EQ(gpu.at("kvwatch_engine_stored_blocks_total"), static_cast<double>(model.stored_blocks()));
  EXPECT_EQ(gpu.at("kvwatch_engine_resident_blocks"), static_cast<double>(model.Resident().size()));
  EXPECT_EQ(collector->stats().records, sink.requests.size());
}

// ---- (g) batch timestamps ---------------------------------------------------------

TEST(KvEventsTimestampTest, FutureAndInvalidTimesAreCountedAndTheirRequestsWithheld) {
  KvEventsTestPublisher pub(TestPublisherOptions{});
  std::vector<std::string> log;
  auto collector = MakeCollector(CollectorOptions({pub.endpoint()}), &log);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(pub.WaitForSubscriber());
  const double now = WallNow();
  auto batch = [](double ts, std::vector<std::uint64_t> hashes, std::optional<std::uint64_t> parent) {
    KvEventBatch b;
    b.ts = ts;
    BlockStored stored;
    stored.block_hashes = std::move(hashes);
    stored.parent_block_hash = parent;
    b.events.emplace_back(stored);
    return b;
  };
  pub.PublishBatch(batch(now + 86400, {1, 2}, std::nullopt), KvEncoding::kMap);  // seq 0: a day ahead
  pub.PublishBatch(batch(-1, {3}, 2), KvEncoding::kMap);                         // seq 1: not a time
  pub.PublishBatch(batch(now - 1, {4}, 3), KvEncoding::kMap);                    // seq 2: good
  CaptureSink sink;
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 3; }));
  const CollectorStats s = collector->stats();
  EXPECT_EQ(s.errors.at("future_timestamp"), 1u);
  EXPECT_EQ(s.errors.at("bad_timestamp"), 1u);
  // Only the good batch's request, its chain rebuilt through the blocks of the
  // two withheld batches (their block events were applied).
  ASSERT_EQ(sink.requests.size(), 1u);
  EXPECT_EQ(sink.requests[0].pages, Scoped({1, 2, 3, 4}));
  EXPECT_EQ(s.records, 1u);
  EXPECT_EQ(collector->tracker().ResidentBlocks(0, "GPU", 0), 4u);
  EXPECT_TRUE(Logged(log, pub.endpoint() + " topic 'kv-events' seq 0: ts"));
  EXPECT_TRUE(Logged(log, pub.endpoint() + " topic 'kv-events' seq 1: ts"));
}

TEST(KvEventsTimestampTest, SkewIsAnOption) {
  KvEventsTestPublisher pub(TestPublisherOptions{});
  KvEventsCollectorOptions o = CollectorOptions({pub.endpoint()});
  o.max_clock_skew_s = 7200;
  auto collector = MakeCollector(o, nullptr);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(pub.WaitForSubscriber());
  KvEventBatch b;
  b.ts = WallNow() + 3600;  // an hour ahead: within the option, beyond the default
  BlockStored stored;
  stored.block_hashes = {1};
  b.events.emplace_back(stored);
  pub.PublishBatch(b, KvEncoding::kMap);
  CaptureSink sink;
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 1; }));
  EXPECT_TRUE(collector->stats().errors.empty());
  EXPECT_EQ(sink.requests.size(), 1u);
}

// ---- (h) state across agent restarts ----------------------------------------------

// What a tracker hands out when it applies batches [0, a) and [from, end).
std::vector<curve::Request> RequestsOf(const std::vector<KvEventBatch>& batches, std::size_t a, std::size_t from) {
  KvEventTracker t(KvEventTrackerOptions{.scope = kScope});
  const std::size_t p = t.AddPublisher();
  CaptureSink sink;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    if (i < a || i >= from) t.Apply(p, batches[i], sink);
  }
  return sink.requests;
}

struct RestoreParam {
  const char* name;
  std::size_t missed;         // batches published while no collector listens
  std::size_t replay_buffer;  // batches the publisher's replay buffer keeps
};

void PrintTo(const RestoreParam& p, std::ostream* os) { *os << p.name; }

class KvEventsRestoreTest : public ::testing::TestWithParam<RestoreParam> {};

// Collector A receives batches [0, a) and saves its state; A goes away; the
// engine publishes [a, b) to no one; collector B restores A's state and
// receives [b, n). Between them, every batch is applied exactly once when the
// replay buffer still holds [a, b); otherwise exactly what it no longer holds
// is counted lost.
TEST_P(KvEventsRestoreTest, EachBatchIsAppliedOnceAcrossTheRestart) {
  ReplayFixture f;
  const std::size_t n = f.run.batches.size();
  const std::size_t a = 100;
  const std::size_t b = a + GetParam().missed;
  ASSERT_GT(n, b + 20);
  TestPublisherOptions po;
  po.replay = true;
  po.replay_buffer = GetParam().replay_buffer;
  KvEventsTestPublisher pub(po);
  const KvEventsCollectorOptions options = CollectorOptions({pub.endpoint()}, pub.replay_endpoint());

  CaptureSink sink_a;
  std::vector<std::uint8_t> state;
  {
    auto collector = MakeCollector(options, nullptr);
    ASSERT_NE(collector, nullptr);
    ASSERT_TRUE(pub.WaitForSubscriber());
    for (std::size_t i = 0; i < a; ++i) pub.PublishBatch(f.run.batches[i], KvEncoding::kMap);
    ASSERT_TRUE(PollUntil(*collector, sink_a, [&] { return collector->transport().batches == a; }));
    collector->AppendState(&state);
  }
  ASSERT_TRUE(pub.WaitForUnsubscribe());
  for (std::size_t i = a; i < b; ++i) pub.PublishBatch(f.run.batches[i], KvEncoding::kMap);  // to no one

  std::vector<std::string> log;
  auto collector = MakeCollector(options, &log);
  ASSERT_NE(collector, nullptr);
  const base::Status restored = collector->RestoreState(state);
  ASSERT_TRUE(restored.ok()) << restored.error();
  ASSERT_TRUE(pub.WaitForSubscriber());
  CaptureSink sink_b;
  // Seq b first, so that the recovery sees the replay buffer as it is then.
  pub.PublishBatch(f.run.batches[b], KvEncoding::kMap);
  const KvTransportCounters& t = collector->transport();
  EXPECT_EQ(t.batches, a);  // the counters go on from A's
  ASSERT_TRUE(PollUntil(*collector, sink_b, [&] { return t.batches + t.lost == b + 1; }));
  for (std::size_t i = b + 1; i < n; ++i) pub.PublishBatch(f.run.batches[i], KvEncoding::kMap);
  ASSERT_TRUE(PollUntil(*collector, sink_b, [&] { return t.batches + t.lost == n; }));

  // The replay buffer held the last replay_buffer seqs up to b when asked.
  const std::size_t held = std::min(b - a, GetParam().replay_buffer - 1);
  EXPECT_EQ(t.replayed, held);
  EXPECT_EQ(t.lost, b - a - held);
  EXPECT_EQ(collector->stats().dropped, b - a - held);
  EXPECT_EQ(SampleValue(*collector, "kvwatch_kv_events_lost_total"), static_cast<double>(b - a - held));
  EXPECT_EQ(t.restarts, 0u);
  EXPECT_EQ(t.replay_requests, b > a ? 1u : 0u);
  EXPECT_EQ(collector->WantsSave(), held > 0);
  EXPECT_TRUE(collector->stats().errors.empty());

  std::vector<curve::Request> both = sink_a.requests;
  both.insert(both.end(), sink_b.requests.begin(), sink_b.requests.end());
  ExpectSameRequests(both, RequestsOf(f.run.batches, a, b - held));
  if (held == b - a) {
    ExpectSameRequests(both, f.Reference());  // the same as one collector that saw everything
    ExpectSameState(collector->tracker(), 0, f.model);
    EXPECT_EQ(collector->tracker().counters().chains_truncated, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Gaps, KvEventsRestoreTest,
                         ::testing::Values(RestoreParam{"NothingMissed", 0, 10000},
                                           RestoreParam{"ReplayedAll", 60, 10000},
                                           RestoreParam{"ReplayBufferTooShort", 60, 15}),
                         [](const ::testing::TestParamInfo<RestoreParam>& p) { return std::string(p.param.name); });

TEST(KvEventsRestoreTest, PublisherRestartedWhileTheAgentWasDown) {
  ReplayFixture f;
  EngineCacheModel second(EngineModelOptions{.capacity_blocks = 300});
  const SimRun after = Simulate(PrefixSharingTrace(8, 100), &second);
  TestPublisherOptions po;
  po.replay = true;
  KvEventsTestPublisher pub(po);
  const KvEventsCollectorOptions options = CollectorOptions({pub.endpoint()}, pub.replay_endpoint());
  std::vector<std::uint8_t> state;
  {
    auto collector = MakeCollector(options, nullptr);
    ASSERT_NE(collector, nullptr);
    ASSERT_TRUE(pub.WaitForSubscriber());
    CaptureSink sink;
    for (std::size_t i = 0; i < 100; ++i) pub.PublishBatch(f.run.batches[i], KvEncoding::kMap);
    ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 100; }));
    collector->AppendState(&state);
  }
  ASSERT_TRUE(pub.WaitForUnsubscribe());
  pub.Restart();  // a new engine process while the agent is down: seq 0, empty cache
  std::vector<std::string> log;
  auto collector = MakeCollector(options, &log);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(collector->RestoreState(state).ok());
  ASSERT_TRUE(pub.WaitForSubscriber());
  for (const KvEventBatch& batch : after.batches) pub.PublishBatch(batch, KvEncoding::kMap);
  CaptureSink sink;
  ASSERT_TRUE(
      PollUntil(*collector, sink, [&] { return collector->transport().batches == 100 + after.batches.size(); }));
  EXPECT_EQ(collector->transport().restarts, 1u);
  EXPECT_EQ(collector->transport().lost, 0u);
  EXPECT_EQ(collector->transport().replay_requests, 0u);
  EXPECT_TRUE(collector->WantsSave());
  ExpectSameState(collector->tracker(), 0, second);
  EXPECT_TRUE(Logged(log, "seq 0 after 99 (the last before the agent restarted)"));
}

TEST(KvEventsRestoreTest, PublishersOfEndpointsNoLongerConfiguredKeepNothing) {
  ReplayFixture f;
  KvEventsTestPublisher pub(TestPublisherOptions{});
  std::vector<std::uint8_t> state;
  {
    auto collector = MakeCollector(CollectorOptions({pub.endpoint()}), nullptr);
    ASSERT_NE(collector, nullptr);
    ASSERT_TRUE(pub.WaitForSubscriber());
    CaptureSink sink;
    for (std::size_t i = 0; i < 50; ++i) pub.PublishBatch(f.run.batches[i], KvEncoding::kMap);
    ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 50; }));
    ASSERT_GT(collector->tracker().parent_map_size(), 0u);
    collector->AppendState(&state);
  }
  KvEventsTestPublisher other(TestPublisherOptions{});
  std::vector<std::string> log;
  auto collector = MakeCollector(CollectorOptions({other.endpoint()}), &log);
  ASSERT_NE(collector, nullptr);
  const base::Status restored = collector->RestoreState(state);
  ASSERT_TRUE(restored.ok()) << restored.error();
  EXPECT_EQ(collector->tracker().ResidentBlocks(0, "GPU", 0), 0u);
  EXPECT_EQ(collector->tracker().parent_map_size(), 0u);  // its links went with its blocks
  EXPECT_TRUE(Logged(log, "not restored: no longer endpoints[0]"));
  // The publisher at the new endpoint starts as any first publisher does.
  ASSERT_TRUE(other.WaitForSubscriber());
  other.SetNextSeq(5000);
  other.PublishBatch(f.run.batches[0], KvEncoding::kMap);
  CaptureSink sink;
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 50 + 1; }));
  EXPECT_EQ(collector->transport().lost + collector->transport().restarts, 0u);
}

TEST(KvEventsRestoreTest, GarbageTruncatedAndOtherVersionsAreErrorsAndChangeNothing) {
  ReplayFixture f;
  KvEventsTestPublisher pub(TestPublisherOptions{});
  const KvEventsCollectorOptions options = CollectorOptions({pub.endpoint()});
  std::vector<std::uint8_t> state;
  {
    auto collector = MakeCollector(options, nullptr);
    ASSERT_NE(collector, nullptr);
    ASSERT_TRUE(pub.WaitForSubscriber());
    CaptureSink sink;
    for (std::size_t i = 0; i < 60; ++i) pub.PublishBatch(f.run.batches[i], KvEncoding::kMap);
    ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 60; }));
    collector->AppendState(&state);
  }
  ASSERT_GT(state.size(), 1000u);
  auto collector = MakeCollector(options, nullptr);
  ASSERT_NE(collector, nullptr);
  auto error_of = [&](const std::vector<std::uint8_t>& bytes) {
    const base::Status s = collector->RestoreState(bytes);
    return s.ok() ? std::string() : s.error();
  };

  std::mt19937_64 rng(1);
  std::vector<std::uint8_t> garbage(2000);
  for (std::uint8_t& byte : garbage) byte = static_cast<std::uint8_t>(rng());
  EXPECT_NE(error_of(garbage).find("not a KV-events collector's state"), std::string::npos) << error_of(garbage);

  std::vector<std::uint8_t> other_version = state;
  other_version[4] = 4;
  EXPECT_NE(error_of(other_version).find("version 4; this build reads versions 1 to 3"), std::string::npos)
      << error_of(other_version);

  std::vector<std::uint8_t> longer = state;
  longer.push_back(0);
  EXPECT_NE(error_of(longer).find("left over"), std::string::npos) << error_of(longer);

  // Every truncation is an error (the empty part is a fresh start).
  std::size_t accepted = 0;
  for (std::size_t size = 1; size < state.size(); ++size) {
    accepted +=
        error_of(std::vector<std::uint8_t>(state.begin(), state.begin() + static_cast<std::ptrdiff_t>(size))).empty();
  }
  EXPECT_EQ(accepted, 0u);

  // Garbage behind a valid header: a count field set to all ones and random
  // bytes after the header are errors, never a crash or a huge allocation.
  std::vector<std::uint8_t> big_count = state;
  for (std::size_t i = 8; i < 12; ++i) big_count[i] = 0xff;
  EXPECT_FALSE(error_of(big_count).empty());
  std::vector<std::uint8_t> random_body(state.begin(), state.begin() + 8);
  for (int i = 0; i < 3000; ++i) random_body.push_back(static_cast<std::uint8_t>(rng()));
  EXPECT_FALSE(error_of(random_body).empty());

  // Other options: the page ids in the state were made under another scope.
  KvEventsCollectorOptions other_scope = options;
  other_scope.tracker.scope = "another-model";
  auto rescoped = MakeCollector(other_scope, nullptr);
  ASSERT_NE(rescoped, nullptr);
  const base::Status scoped = rescoped->RestoreState(state);
  ASSERT_FALSE(scoped.ok());
  EXPECT_NE(scoped.error().find("scope"), std::string::npos) << scoped.error();

  // None of it changed the collector: the real state still restores.
  EXPECT_EQ(collector->tracker().publishers(), 0u);
  EXPECT_EQ(error_of(state), "");
  EXPECT_GT(collector->tracker().parent_map_size(), 0u);
  EXPECT_NE(error_of(state).find("restored after the first message"), std::string::npos);
}

// Random single-byte changes: each is an error or a state that restores without
// a crash (AddressSanitizer builds check the reads).
TEST(KvEventsRestoreTest, FlippedBytesNeverCrash) {
  ReplayFixture f;
  KvEventTracker source(KvEventTrackerOptions{.scope = kScope});
  const std::size_t p = source.AddPublisher();
  CaptureSink sink;
  for (std::size_t i = 0; i < 60; ++i) source.Apply(p, f.run.batches[i], sink);
  std::vector<std::uint8_t> state;
  const std::vector<std::size_t> publishers = {p};
  source.AppendState(publishers, &state);
  std::mt19937_64 rng(2);
  std::size_t rejected = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::uint8_t> bytes = state;
    bytes[rng() % bytes.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    KvEventTracker t(KvEventTrackerOptions{.scope = kScope});
    const base::Status s = t.RestoreState(bytes, 1);
    rejected += !s.ok();
    if (s.ok()) {
      t.Apply(0, f.run.batches[60], sink);  // usable
    } else {
      EXPECT_EQ(t.publishers(), 0u);
    }
  }
  EXPECT_GT(rejected, 0u);
}

// ---- (g) gaps fetched over several polls ------------------------------------------

// Batch i holds one request of one new block, page i + 1: the requests handed
// on say exactly which batches were applied, in which order, how many times.
std::vector<std::vector<std::uint8_t>> UniquePagePayloads(std::size_t n) {
  EngineModelOptions mo;
  mo.capacity_blocks = n + 1;
  mo.tokens_per_block = 0;
  EngineCacheModel model(mo);
  std::vector<std::vector<std::uint8_t>> out;
  for (std::size_t i = 0; i < n; ++i) model.Run({i + 1});
  for (const KvEventBatch& b : model.TakeBatches()) out.push_back(EncodeKvEventBatch(b, KvEncoding::kMap));
  return out;
}

// The first index at which the requests are not batches first.. in order, one
// each (requests.size() when they all are).
std::size_t FirstOutOfOrder(const std::vector<curve::Request>& requests, std::size_t first = 0) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].pages != Scoped({first + i + 1})) return i;
  }
  return requests.size();
}

// A replay endpoint the test answers by hand between polls: a ROUTER bound on
// 127.0.0.1 that hands out each request's start seq and replies as vLLM
// (v0.26) does, [topic, seq, payload] per batch and [empty, -1, empty] at the
// end. The collector's poll waits at most replay_timeout; replies sent between
// polls are read by the next.
class ScriptedReplay {
 public:
  ScriptedReplay() {
    router_.set(zmq::sockopt::linger, 0);
    router_.set(zmq::sockopt::sndhwm, 0);
    router_.bind("tcp://127.0.0.1:*");
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  }
  const std::string& endpoint() const { return endpoint_; }
  std::size_t requests() const { return requests_; }
  // A request's start seq if one arrived (waiting up to 5 ms); later replies go
  // to its sender.
  std::optional<std::uint64_t> TakeRequest() {
    zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(5)) == 0) return std::nullopt;
    std::vector<zmq::message_t> frames;
    do {
      frames.emplace_back();
      if (!router_.recv(frames.back(), zmq::recv_flags::none).has_value()) return std::nullopt;
    } while (frames.back().more());
    if (frames.size() != 3 || frames[2].size() != 8) return std::nullopt;
    id_.assign(frames[0].data<char>(), frames[0].size());
    ++requests_;
    return ParseSeqFrame(Frame(frames[2].data<std::uint8_t>(), 8)).value();
  }
  void Send(std::uint64_t seq, const std::vector<std::uint8_t>& payload) {
    const std::array<std::uint8_t, 8> bytes = EncodeSeqFrame(seq);
    const std::string topic = payload.empty() ? "" : "kv-events";
    router_.send(zmq::buffer(id_), zmq::send_flags::sndmore);
    router_.send(zmq::message_t(), zmq::send_flags::sndmore);
    router_.send(zmq::buffer(topic), zmq::send_flags::sndmore);
    router_.send(zmq::buffer(bytes), zmq::send_flags::sndmore);
    router_.send(zmq::buffer(payload), zmq::send_flags::none);
  }
  void SendRange(std::uint64_t first, std::uint64_t last, const std::vector<std::vector<std::uint8_t>>& payloads) {
    for (std::uint64_t seq = first; seq <= last; ++seq) Send(seq, payloads[seq]);
  }
  void End() { Send(kReplayEndSeq, {}); }

 private:
  zmq::context_t context_{1};
  zmq::socket_t router_{context_, zmq::socket_type::router};
  std::string endpoint_;
  std::string id_;
  std::size_t requests_ = 0;
};

// Polls until the scripted endpoint has a request; its start seq (nullopt: none came).
std::optional<std::uint64_t> PollForRequest(KvEventsCollector& c, RequestSink& sink, ScriptedReplay& replay) {
  std::optional<std::uint64_t> start;
  PollUntil(c, sink, [&] { return (start = replay.TakeRequest()).has_value(); });
  return start;
}

// A collector of a plain publisher (no replay socket of its own) whose replay
// endpoint is `replay`; the publisher sends batch 0, keeps 1..gap from the
// collector, then sends gap + 1, the batch that shows the gap.
struct ScriptedGap {
  explicit ScriptedGap(std::size_t gap, std::vector<std::string>* log = nullptr,
                       std::chrono::milliseconds give_up = std::chrono::seconds(60)) {
    payloads = UniquePagePayloads(gap + 2);
    KvEventsCollectorOptions o = CollectorOptions({pub.endpoint()}, replay.endpoint());
    o.replay_timeout = std::chrono::milliseconds(5);  // replies come between polls
    o.replay_give_up = give_up;
    options = o;
    collector = MakeCollector(o, log);
    if (collector == nullptr) return;
    EXPECT_TRUE(pub.WaitForSubscriber());
    pub.Publish(payloads[0]);
    EXPECT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 1; }));
    for (std::size_t i = 1; i <= gap; ++i) pub.Publish(payloads[i], /*deliver=*/false);
    pub.Publish(payloads[gap + 1]);
  }
  KvEventsTestPublisher pub{TestPublisherOptions{}};
  ScriptedReplay replay;
  std::vector<std::vector<std::uint8_t>> payloads;
  KvEventsCollectorOptions options;
  std::unique_ptr<KvEventsCollector> collector;
  CaptureSink sink;
};

TEST(KvEventsRecoveryTest, AGapOf20000IsFetchedOverManyBoundedPolls) {
  constexpr std::size_t kGap = 20000, kLive = 300, kPerPoll = 1000;
  const auto payloads = UniquePagePayloads(kGap + 2 + kLive);
  TestPublisherOptions po;
  po.replay = true;
  po.replay_buffer = 100000;  // holds everything
  KvEventsTestPublisher pub(po);
  KvEventsCollectorOptions o = CollectorOptions({pub.endpoint()}, pub.replay_endpoint());
  o.max_messages_per_poll = kPerPoll;
  auto collector = MakeCollector(o, nullptr);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(pub.WaitForSubscriber());
  CaptureSink sink;
  pub.Publish(payloads[0]);
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 1; }));
  for (std::size_t i = 1; i <= kGap; ++i) pub.Publish(payloads[i], /*deliver=*/false);
  pub.Publish(payloads[kGap + 1]);
  const KvTransportCounters& t = collector->transport();
  // The engine goes on publishing while the gap is fetched: those batches wait
  // (held, or fetched again) and come after the gap, in order.
  std::uint64_t replayed_before = 0, most_in_a_poll = 0;
  bool published_live = false;
  ASSERT_TRUE(PollUntil(*collector, sink, [&] {
    most_in_a_poll = std::max(most_in_a_poll, t.replayed - replayed_before);
    replayed_before = t.replayed;
    if (!published_live && t.recovery_polls >= 3) {
      for (std::size_t i = kGap + 2; i < payloads.size(); ++i) pub.Publish(payloads[i]);
      published_live = true;
    }
    return t.batches == payloads.size();
  }));
  EXPECT_EQ(t.replayed, kGap);
  EXPECT_EQ(t.lost, 0u);
  EXPECT_LE(most_in_a_poll, kPerPoll);           // each poll bounded...
  EXPECT_GE(t.recovery_polls, kGap / kPerPoll);  // ...so it took many
  EXPECT_EQ(SampleValue(*collector, "kvwatch_kv_events_recovery_polls_total"), static_cast<double>(t.recovery_polls));
  ASSERT_EQ(sink.requests.size(), payloads.size());
  EXPECT_EQ(FirstOutOfOrder(sink.requests), payloads.size());
  EXPECT_TRUE(collector->stats().errors.empty());
}

TEST(KvEventsRecoveryTest, AnEndMarkerBeforeTheGapIsFilledAsksAgainFromTheNextSeq) {
  ScriptedGap g(100);
  ASSERT_NE(g.collector, nullptr);
  EXPECT_EQ(PollForRequest(*g.collector, g.sink, g.replay), std::optional<std::uint64_t>(1));
  g.replay.SendRange(1, 40, g.payloads);
  g.replay.End();
  EXPECT_EQ(PollForRequest(*g.collector, g.sink, g.replay), std::optional<std::uint64_t>(41));
  g.replay.SendRange(41, 100, g.payloads);
  g.replay.End();
  const KvTransportCounters& t = g.collector->transport();
  ASSERT_TRUE(PollUntil(*g.collector, g.sink, [&] { return t.batches == 102; }));
  EXPECT_EQ(t.replayed, 100u);
  EXPECT_EQ(t.lost, 0u);
  EXPECT_EQ(t.replay_requests, 2u);
  EXPECT_EQ(FirstOutOfOrder(g.sink.requests), 102u);
}

TEST(KvEventsRecoveryTest, AHoleInsideAnAnswerIsAskedForAgainNotCountedLost) {
  ScriptedGap g(100);
  ASSERT_NE(g.collector, nullptr);
  EXPECT_EQ(PollForRequest(*g.collector, g.sink, g.replay), std::optional<std::uint64_t>(1));
  g.replay.SendRange(1, 10, g.payloads);  // 11..19 dropped on the way
  g.replay.SendRange(20, 100, g.payloads);
  g.replay.End();
  EXPECT_EQ(PollForRequest(*g.collector, g.sink, g.replay), std::optional<std::uint64_t>(11));
  g.replay.SendRange(11, 100, g.payloads);
  g.replay.End();
  const KvTransportCounters& t = g.collector->transport();
  ASSERT_TRUE(PollUntil(*g.collector, g.sink, [&] { return t.batches == 102; }));
  EXPECT_EQ(t.replayed, 100u);
  EXPECT_EQ(t.lost, 0u);
  EXPECT_EQ(FirstOutOfOrder(g.sink.requests), 102u);
}

TEST(KvEventsRecoveryTest, WhatTheBufferNoLongerHoldsIsLostAndStaysCountedAfterARestart) {
  std::vector<std::string> log;
  ScriptedGap g(100, &log);
  ASSERT_NE(g.collector, nullptr);
  EXPECT_EQ(PollForRequest(*g.collector, g.sink, g.replay), std::optional<std::uint64_t>(1));
  g.replay.SendRange(30, 100, g.payloads);  // the engine's buffer starts at 30
  g.replay.End();
  const KvTransportCounters& t = g.collector->transport();
  ASSERT_TRUE(PollUntil(*g.collector, g.sink, [&] { return t.batches == 73; }));
  EXPECT_EQ(t.lost, 29u);
  EXPECT_EQ(t.replayed, 71u);
  EXPECT_EQ(g.collector->stats().dropped, 29u);
  EXPECT_TRUE(Logged(log, "lost 29 batches between seq 1 and 29 (no longer in the replay buffer)"));
  EXPECT_TRUE(g.collector->WantsSave());
  ASSERT_EQ(g.sink.requests.size(), 73u);
  EXPECT_EQ(g.sink.requests[1].pages, Scoped({31}));

  std::vector<std::uint8_t> state;
  g.collector->AppendState(&state);
  const CollectorStats before = g.collector->stats();
  g.collector.reset();
  auto next = MakeCollector(g.options, nullptr);
  ASSERT_NE(next, nullptr);
  const base::Status restored = next->RestoreState(state);
  ASSERT_TRUE(restored.ok()) << restored.error();
  EXPECT_EQ(next->transport().lost, 29u);
  EXPECT_EQ(next->transport().replayed, 71u);
  EXPECT_EQ(next->transport().batches, 73u);
  EXPECT_EQ(next->stats().dropped, 29u);
  EXPECT_EQ(next->stats().records, before.records);
  EXPECT_EQ(SampleValue(*next, "kvwatch_kv_events_lost_total"), 29.0);
}

TEST(KvEventsRecoveryTest, ASilentReplayEndpointCountsTheRestLostAfterTheGiveUpTime) {
  std::vector<std::string> log;
  ScriptedGap g(100, &log, std::chrono::milliseconds(200));
  ASSERT_NE(g.collector, nullptr);
  const KvTransportCounters& t = g.collector->transport();
  ASSERT_TRUE(PollUntil(*g.collector, g.sink, [&] { return t.lost == 100; }));
  EXPECT_EQ(t.batches, 2u);  // 0, and 101 once the gap was given up
  EXPECT_EQ(t.replayed, 0u);
  EXPECT_GE(t.replay_requests, 1u);
  EXPECT_EQ(FirstOutOfOrder(g.sink.requests), 1u);
  ASSERT_EQ(g.sink.requests.size(), 2u);
  EXPECT_EQ(g.sink.requests[1].pages, Scoped({102}));
  EXPECT_TRUE(Logged(log, "lost 100 batches between seq 1 and 100 (the replay endpoint " + g.replay.endpoint() +
                              " did not answer for 200 ms)"));
  // The next batch is in order again.
  g.pub.Publish(g.payloads[0]);
  ASSERT_TRUE(PollUntil(*g.collector, g.sink, [&] { return t.batches == 3; }));
  EXPECT_EQ(t.lost, 100u);
}

TEST(KvEventsRecoveryTest, AGapHalfFetchedWhenTheStateIsSavedIsFinishedAfterTheRestart) {
  ScriptedGap g(100);
  ASSERT_NE(g.collector, nullptr);
  EXPECT_EQ(PollForRequest(*g.collector, g.sink, g.replay), std::optional<std::uint64_t>(1));
  g.replay.SendRange(1, 40, g.payloads);  // and then nothing
  ASSERT_TRUE(PollUntil(*g.collector, g.sink, [&] { return g.collector->transport().batches == 41; }));
  std::vector<std::uint8_t> state;
  g.collector->AppendState(&state);
  g.collector.reset();

  auto next = MakeCollector(g.options, nullptr);
  ASSERT_NE(next, nullptr);
  const base::Status restored = next->RestoreState(state);
  ASSERT_TRUE(restored.ok()) << restored.error();
  // No live batch needed: the saved gap is asked for at the first poll.
  CaptureSink sink;
  EXPECT_EQ(PollForRequest(*next, sink, g.replay), std::optional<std::uint64_t>(41));
  g.replay.SendRange(41, 101, g.payloads);
  g.replay.End();
  const KvTransportCounters& t = next->transport();
  ASSERT_TRUE(PollUntil(*next, sink, [&] { return t.batches == 102; }));  // counted since the first start
  EXPECT_EQ(t.replayed, 40u + 61u);
  EXPECT_EQ(t.lost, 0u);
  ASSERT_EQ(sink.requests.size(), 61u);
  EXPECT_EQ(FirstOutOfOrder(g.sink.requests), 41u);
  EXPECT_EQ(FirstOutOfOrder(sink.requests, 41), 61u);
}

TEST(KvEventsRecoveryTest, AVersion1StateIsStillRead) {
  ScriptedReplay replay;
  KvEventsTestPublisher pub(TestPublisherOptions{});
  const auto payloads = UniquePagePayloads(52);
  KvEventsCollectorOptions o = CollectorOptions({pub.endpoint()}, replay.endpoint());
  o.replay_timeout = std::chrono::milliseconds(5);
  // Version 1: magic, version, publishers [endpoint index, endpoint, topic,
  // last seq], the tracker's part. Publisher 0 has applied seq 0.
  KvEventTracker tracker(o.tracker);
  const std::size_t p = tracker.AddPublisher();
  KvEventDecoder decoder;
  KvEventBatch batch;
  ASSERT_TRUE(decoder.Decode(payloads[0], &batch).ok());
  CaptureSink ignored;
  tracker.Apply(p, batch, ignored);
  std::vector<std::uint8_t> state;
  base::AppendPod<std::uint32_t>(&state, 0x5645564b);
  base::AppendPod<std::uint32_t>(&state, 1);
  base::AppendPod<std::uint32_t>(&state, 1);
  base::AppendPod<std::uint32_t>(&state, 0);
  AppendKvStateString(&state, pub.endpoint());
  AppendKvStateString(&state, "kv-events");
  base::AppendPod<std::uint64_t>(&state, 0);
  const std::vector<std::size_t> publishers = {p};
  // The tracker's part as written before groups: request group 0, no groups part.
  std::vector<std::uint8_t> part;
  tracker.AppendState(publishers, &part);
  // The groups part follows scope, request group and block size: grouped (1
  // byte), the request group chosen (8), the spec count (4), 17 bytes a spec.
  constexpr std::size_t kGroupsAt = 8 + 8 + 8;
  ASSERT_GT(part.size(), kGroupsAt + 13);
  std::uint32_t specs = 0;
  std::memcpy(&specs, part.data() + kGroupsAt + 9, sizeof specs);
  const std::size_t groups_bytes = 13 + std::size_t{specs} * 17;
  ASSERT_GT(part.size(), kGroupsAt + groups_bytes);
  part.erase(part.begin() + kGroupsAt, part.begin() + static_cast<std::ptrdiff_t>(kGroupsAt + groups_bytes));
  std::fill(part.begin() + 8, part.begin() + 16, std::uint8_t{0});
  state.insert(state.end(), part.begin(), part.end());

  auto collector = MakeCollector(o, nullptr);
  ASSERT_NE(collector, nullptr);
  const base::Status restored = collector->RestoreState(state);
  ASSERT_TRUE(restored.ok()) << restored.error();
  ASSERT_TRUE(pub.WaitForSubscriber());
  for (std::size_t i = 0; i <= 50; ++i) pub.Publish(payloads[i], /*deliver=*/false);  // seq 0..50
  pub.Publish(payloads[51]);
  CaptureSink sink;
  EXPECT_EQ(PollForRequest(*collector, sink, replay), std::optional<std::uint64_t>(1));
  replay.SendRange(1, 50, payloads);
  replay.End();
  const KvTransportCounters& t = collector->transport();
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return t.batches == 51; }));
  EXPECT_EQ(t.replayed, 50u);
  EXPECT_EQ(t.lost + t.restarts, 0u);
  EXPECT_EQ(FirstOutOfOrder(sink.requests, 1), 51u);
}

// A hybrid model's stream over the wire (map encoding, as vLLM since v0.26):
// full + sliding-window groups, GPU and CPU stores; requests from the full
// group only, each group's series, and hostile group fields counted and logged
// once with the publisher and seq.
TEST(KvEventsGroupsTest, AHybridStreamGivesPerGroupSeriesAndLogsAnomaliesOnce) {
  KvEventsTestPublisher pub(TestPublisherOptions{});
  std::vector<std::string> log;
  auto collector = MakeCollector(CollectorOptions({pub.endpoint()}), &log);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(pub.WaitForSubscriber());
  auto store = [](std::vector<std::uint64_t> hashes, std::optional<std::uint64_t> parent, std::int64_t group,
                  std::string kind, std::optional<std::int64_t> window, std::string medium) {
    BlockStored e;
    e.block_hashes = std::move(hashes);
    e.parent_block_hash = parent;
    e.token_ids.assign(e.block_hashes.size() * 16, 1);
    e.block_size = 16;
    e.medium = std::move(medium);
    e.group_idx = group;
    e.kv_cache_spec_kind = std::move(kind);
    e.kv_cache_spec_sliding_window = window;
    return e;
  };
  auto batch = [](std::vector<KvEvent> events) {
    KvEventBatch b;
    b.ts = WallNow() - 1;
    b.events = std::move(events);
    return b;
  };
  BlockRemoved removed;
  removed.block_hashes = {1};
  removed.medium = "GPU";
  removed.group_idx = 0;
  pub.PublishBatch(batch({store({1, 2, 3}, std::nullopt, 0, "sliding_window", 32, "GPU"),
                          store({1, 2, 3}, std::nullopt, 1, "full_attention", std::nullopt, "GPU")}),
                   KvEncoding::kMap);
  pub.PublishBatch(batch({removed, store({4}, 3, 0, "sliding_window", 32, "GPU"),
                          store({4}, 3, 1, "full_attention", std::nullopt, "GPU"),
                          store({1, 2, 3, 4}, std::nullopt, 1, "full_attention", std::nullopt, "CPU")}),
                   KvEncoding::kMap);
  pub.PublishBatch(batch({store({5}, 4, 0, "sliding_window", 0, "GPU"), store({5}, 4, 1, "full_attention", 64, "GPU"),
                          store({6}, std::nullopt, 999, "full_attention", std::nullopt, "GPU")}),
                   KvEncoding::kMap);
  CaptureSink sink;
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 3; }));
  ASSERT_EQ(sink.requests.size(), 3u);  // one per step, from the full group
  EXPECT_EQ(sink.requests[1].pages, Scoped({1, 2, 3, 4}));
  EXPECT_EQ(sink.requests[2].pages, Scoped({1, 2, 3, 4, 5}));

  std::vector<MetricSample> samples;
  collector->AppendSamples(&samples);
  std::map<std::string, double> by_key;
  for (const MetricSample& s : samples) {
    std::string key = s.name;
    for (std::size_t i = 1; i < s.labels.size(); ++i) key += "," + s.labels[i].first + "=" + s.labels[i].second;
    by_key[key] = s.value;
  }
  EXPECT_EQ(by_key.at("kvwatch_kv_events_group_resident_blocks,medium=GPU,group=0,kind=sliding_window"), 4.0);
  EXPECT_EQ(by_key.at("kvwatch_kv_events_group_resident_blocks,medium=GPU,group=1,kind=full"), 5.0);
  EXPECT_EQ(by_key.at("kvwatch_kv_events_group_resident_blocks,medium=CPU,group=1,kind=full"), 4.0);
  EXPECT_EQ(by_key.at("kvwatch_kv_events_group_stored_blocks_total,medium=GPU,group=0,kind=sliding_window"), 5.0);
  EXPECT_EQ(by_key.at("kvwatch_kv_events_group_evicted_blocks_total,medium=GPU,group=0,kind=sliding_window"), 1.0);
  EXPECT_EQ(by_key.at("kvwatch_kv_events_group_window_tokens,group=0,kind=sliding_window"), 32.0);
  EXPECT_EQ(by_key.at("kvwatch_kv_events_request_group"), 1.0);
  // The groups as announced, for the agent's check against the configured model.
  const std::vector<EngineKvGroup> announced = {{0, "sliding_window", 32}, {1, "full", 0}};
  EXPECT_EQ(collector->engine_signals().kv_groups, announced);
  EXPECT_EQ(by_key.at("kvwatch_kv_events_group_anomalies_total,kind=bad_window"), 2.0);
  EXPECT_EQ(by_key.at("kvwatch_kv_events_group_anomalies_total,kind=kind_changed"), 1.0);
  EXPECT_EQ(by_key.at("kvwatch_kv_events_group_anomalies_total,kind=bad_group"), 1.0);
  EXPECT_EQ(by_key.at("kvwatch_kv_events_group_anomalies_total,kind=unknown_kind"), 0.0);
  // Logged once each, with the publisher and seq, what was seen and what was expected.
  EXPECT_TRUE(Logged(log, pub.endpoint() + " topic 'kv-events' seq 2: group 0 (sliding_window) announces a window of 0 "
                                           "tokens; expected 1 to 67108864"));
  EXPECT_TRUE(Logged(log, pub.endpoint() + " topic 'kv-events' seq 2: an event of group_idx 999; expected 0 to 255"));
  EXPECT_TRUE(Logged(log, "seq 2: group 0 announced sliding_window of 32 tokens first, now sliding_window;"));
  std::size_t notes = 0;
  for (const std::string& line : log)
    notes += line.find("kvwatch_kv_events_group_anomalies_total") != std::string::npos;
  EXPECT_EQ(notes, 3u);
}

// A stream without group fields exports no group series (exactly as before groups).
TEST(KvEventsGroupsTest, AStreamWithoutGroupFieldsHasNoGroupSeries) {
  KvEventsTestPublisher pub(TestPublisherOptions{});
  auto collector = MakeCollector(CollectorOptions({pub.endpoint()}), nullptr);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(pub.WaitForSubscriber());
  for (std::uint64_t i = 1; i <= 3; ++i) {
    KvEventBatch b;
    b.ts = WallNow() - 1;
    BlockStored e;  // the fields of vLLM before v0.10: no group_idx, no kind
    e.block_hashes = {i};
    if (i > 1) e.parent_block_hash = i - 1;
    b.events.emplace_back(e);
    pub.PublishBatch(b, KvEncoding::kArray);
  }
  CaptureSink sink;
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 3; }));
  ASSERT_EQ(sink.requests.size(), 3u);
  EXPECT_EQ(sink.requests[2].pages, Scoped({1, 2, 3}));
  EXPECT_FALSE(collector->tracker().grouped());
  std::vector<MetricSample> samples;
  collector->AppendSamples(&samples);
  for (const MetricSample& s : samples) {
    EXPECT_EQ(s.name.find("group"), std::string::npos) << s.name;
  }
}

TEST(KvEventsLogTest, TopicsWithANulArePrintedWholeAndEscaped) {
  TestPublisherOptions po;
  po.topic = std::string("kv\0x", 4);
  KvEventsTestPublisher pub(po);
  const auto payloads = UniquePagePayloads(2);
  std::vector<std::string> log;
  auto collector = MakeCollector(CollectorOptions({pub.endpoint()}), &log);
  ASSERT_NE(collector, nullptr);
  ASSERT_TRUE(pub.WaitForSubscriber());
  pub.SetNextSeq(10);
  pub.Publish(payloads[0]);
  pub.SetNextSeq(3);  // back: a restart, logged with the topic
  pub.Publish(payloads[1]);
  CaptureSink sink;
  ASSERT_TRUE(PollUntil(*collector, sink, [&] { return collector->transport().batches == 2; }));
  EXPECT_TRUE(Logged(log, pub.endpoint() + " topic 'kv\\x00x': seq 3 after 10")) << (log.empty() ? "" : log[0]);
}

}  // namespace
}  // namespace kvwatch::collectors
