// The policy canaries off the agent's mutex (CanaryStage, agent/runtime/analysis.h):
//   - a reader concurrent with ingestion does not wait for the canaries'
//     simulations: with a batch held inside the canaries' settle (the test hook
//     AgentOptions::canaries_settling), /metrics answers, with the curves past the
//     batch and the canaries as of the batch before; once released, the canaries'
//     numbers are those of an agent fed request by request;
//   - a checkpoint taken while requests wait in the canaries' queue holds them:
//     restored and fed the rest, the canaries end exactly where an uninterrupted
//     run does.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/runtime/agent.h"
#include "agent/runtime/analysis.h"
#include "collectors/exposition_parser.h"
#include "collectors/synth.h"
#include "tests/agent/testing_agent.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers

// Three synthetic requests past two of the agent's batches of 256 (Agent::BatchSink):
// the canaries settle three times.
constexpr std::size_t kRequests = 2 * 256 + 3;

std::vector<curve::Request> Requests(std::size_t n) {
  collectors::SynthOptions so;
  so.seed = 5;
  so.duration_s = 0;
  so.max_requests = n;
  auto generator = collectors::SynthGenerator::Create(so);
  EXPECT_TRUE(generator.ok()) << generator.error();
  std::vector<curve::Request> out;
  collectors::SynthRequest r;
  while (generator.value().Next(&r)) out.push_back(r.request);
  return out;
}

AgentOptions CanaryOptions() {
  AgentOptions o;
  o.http.port = 0;
  o.engine.max_pages = 1u << 14;
  o.engine.remembered_evictions = 1u << 14;
  o.curve.windows = {{"5m", 300}, {"1h", 3600}};
  o.curve.capacities = {200, 2000};
  curve::CanaryOptions canaries;
  canaries.policies = {curve::PolicyKind::kLru, curve::PolicyKind::kS3Fifo, curve::PolicyKind::kVllm};
  o.canaries = canaries;
  return o;
}

// Hands every request in its first poll (the agent takes them in batches of 256).
class OnePollCollector : public collectors::Collector {
 public:
  explicit OnePollCollector(std::vector<curve::Request> requests) : requests_(std::move(requests)) {}
  const std::string& name() const override { return name_; }
  std::string_view kind() const override { return "test"; }
  std::chrono::milliseconds poll_interval() const override { return std::chrono::milliseconds(10); }
  void Poll(collectors::RequestSink& sink, double) override {
    for (const curve::Request& r : requests_) sink.OnRequest(r);
    requests_.clear();
  }
  collectors::CollectorStats stats() const override {
    collectors::CollectorStats s;
    s.up = true;
    return s;
  }

 private:
  std::string name_ = "one-poll";
  std::vector<curve::Request> requests_;
};

// Holds the canaries' second settle until released.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  int settles = 0;
  bool held = false;
  bool released = false;

  void Settling() {
    std::unique_lock<std::mutex> lock(mu);
    if (++settles != 2) return;
    held = true;
    cv.notify_all();
    cv.wait(lock, [&] { return released; });
  }
  void WaitHeld() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return held; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
    cv.notify_all();
  }
};

// The canaries' counters in a rendering: kvwatch_policy_page_hits_total and
// kvwatch_policy_preemptions_total, by series.
std::map<std::string, double> CanaryCounters(const std::string& metrics) {
  return SeriesWithPrefixes(collectors::ParseExposition(metrics),
                            {"kvwatch_policy_page_hits_total", "kvwatch_policy_preemptions_total"});
}

double RequestsTotal(const std::string& metrics) {
  return SampleValue(collectors::ParseExposition(metrics), "kvwatch_requests_total").value_or(-1);
}

TEST(CanaryStageTest, AReaderDoesNotWaitForTheCanariesSimulations) {
  const std::vector<curve::Request> requests = Requests(kRequests);
  // What the canaries count after the first batch, and after every request.
  std::map<std::string, double> first_batch, all;
  {
    auto twin = Agent::Create(CanaryOptions());
    ASSERT_TRUE(twin.ok()) << twin.error();
    for (std::size_t i = 0; i < requests.size(); ++i) {
      twin.value()->OnRequest(requests[i]);
      if (i + 1 == 256) first_batch = CanaryCounters(twin.value()->RenderMetrics());
    }
    all = CanaryCounters(twin.value()->RenderMetrics());
  }
  ASSERT_FALSE(first_batch.empty());
  ASSERT_NE(first_batch, all) << "the second batch must change what the canaries count";

  auto gate = std::make_shared<Gate>();
  AgentOptions o = CanaryOptions();
  o.canaries_settling = [gate] { gate->Settling(); };
  o.collectors.push_back(std::make_unique<OnePollCollector>(requests));
  auto created = Agent::Create(std::move(o));
  ASSERT_TRUE(created.ok()) << created.error();
  Agent& agent = *created.value();
  std::thread loop([&] { agent.Run(); });
  gate->WaitHeld();
  // The second batch is in the curves and held in the canaries' settle: the reader
  // answers (were it to wait for the canaries, it would wait for the release; the
  // bound only turns such a hang into a failure).
  std::future<std::string> read = std::async(std::launch::async, [&] { return agent.RenderMetrics(); });
  const bool answered = read.wait_for(std::chrono::minutes(2)) == std::future_status::ready;
  gate->Release();
  const std::string during = read.get();
  const bool all_in = PollUntil([&] { return RequestsTotal(agent.RenderMetrics()) == kRequests; }, kIngestTimeout,
                                std::chrono::milliseconds(5));
  agent.Stop();
  loop.join();
  ASSERT_TRUE(answered) << "a scrape waited for the canaries' simulations";
  EXPECT_EQ(RequestsTotal(during), 512) << "the curves count the held batch";
  EXPECT_EQ(CanaryCounters(during), first_batch) << "the canaries as of the last settled batch";
  ASSERT_TRUE(all_in) << "the agent did not ingest every request";
  EXPECT_EQ(CanaryCounters(agent.RenderMetrics()), all) << "batched canaries count as request by request";
}

// Every canary's lifetime and window totals in an analysis's snapshot.
std::vector<AnalysisSnapshot::Canary> Canaries(Analysis& analysis) {
  analysis.canaries()->Settle();
  return analysis.TakeSnapshot(/*windows=*/false, /*canaries=*/true).canaries;
}

void ExpectSameCanaries(const std::vector<AnalysisSnapshot::Canary>& a,
                        const std::vector<AnalysisSnapshot::Canary>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    const auto totals = [](const curve::PolicyTotals& t) {
      return std::vector<std::uint64_t>{t.requests, t.page_refs, t.page_hits, t.covered_requests, t.preemptions};
    };
    EXPECT_EQ(totals(a[k].lifetime), totals(b[k].lifetime)) << "canary " << k;
    ASSERT_EQ(a[k].windows.size(), b[k].windows.size());
    for (std::size_t w = 0; w < a[k].windows.size(); ++w) {
      EXPECT_EQ(totals(a[k].windows[w]), totals(b[k].windows[w])) << "canary " << k << " window " << w;
    }
  }
}

TEST(CanaryStageTest, ACheckpointWithRequestsQueuedRestoresExactly) {
  const AgentOptions o = CanaryOptions();
  const std::vector<curve::Request> requests = Requests(3 * 256);
  const std::size_t cut = 256 + 100;  // 100 requests wait in the canaries' queue
  auto uninterrupted = Analysis::Create(o);
  auto saved = Analysis::Create(o);
  auto restored = Analysis::Create(o);
  ASSERT_TRUE(uninterrupted.ok() && saved.ok() && restored.ok());
  const double t = 0;
  for (std::size_t i = 0; i < cut; ++i) {
    uninterrupted.value()->Ingest(requests[i], t + 0.01 * static_cast<double>(i));
    saved.value()->Ingest(requests[i], t + 0.01 * static_cast<double>(i));
  }
  StateParts parts;
  saved.value()->Serialize(&parts);
  ASSERT_EQ(restored.value()->Restore(parts), "");
  ExpectSameCanaries(Canaries(*restored.value()), Canaries(*uninterrupted.value()));
  ASSERT_EQ(Canaries(*restored.value()).front().lifetime.requests, cut) << "the queued requests are in the checkpoint";
  for (std::size_t i = cut; i < requests.size(); ++i) {
    uninterrupted.value()->Ingest(requests[i], t + 0.01 * static_cast<double>(i));
    restored.value()->Ingest(requests[i], t + 0.01 * static_cast<double>(i));
  }
  ExpectSameCanaries(Canaries(*restored.value()), Canaries(*uninterrupted.value()));
}

}  // namespace
}  // namespace kvwatch::agent
