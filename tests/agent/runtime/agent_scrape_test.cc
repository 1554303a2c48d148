// A scrape while the agent ingests: the loop hands requests to the analysis 256
// at a time under the agent's mutex, and a reader (/metrics, the JSON API, the
// alert evaluation) must not wait for a whole batch (tens of milliseconds at a
// million page references a second with canaries): Agent::Ingest hands the mutex
// over between two requests when a reader waits for it. Seen from the reader, the
// request count it reads falls inside batches, not only on their boundaries.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/runtime/agent.h"
#include "collectors/exposition_parser.h"
#include "tests/agent/testing_agent.h"

namespace kvwatch::agent {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces): test helpers

constexpr std::size_t kBatch = 256;  // Agent::BatchSink's batch
constexpr std::size_t kBatches = 64;

// Hands kBatches x kBatch requests (a multiple of the batch, so without the
// hand-over every count a reader could see is a multiple of kBatch) in its first
// poll, each of 256 pages, and nothing after.
class FloodCollector : public collectors::Collector {
 public:
  const std::string& name() const override { return name_; }
  std::string_view kind() const override { return "test"; }
  std::chrono::milliseconds poll_interval() const override { return std::chrono::milliseconds(10); }
  void Poll(collectors::RequestSink& sink, double wall_now_s) override {
    if (done_) return;
    done_ = true;
    curve::Request r;
    std::uint64_t next = 1;
    for (std::size_t i = 0; i < kBatches * kBatch; ++i) {
      r.pages.clear();
      for (int p = 0; p < 256; ++p) r.pages.push_back(next++ % 300000);  // reuse: distances to count
      r.timestamp_s = wall_now_s;
      sink.OnRequest(r);
    }
  }
  collectors::CollectorStats stats() const override {
    collectors::CollectorStats s;
    s.up = true;
    return s;
  }

 private:
  std::string name_ = "flood";
  bool done_ = false;
};

TEST(AgentScrapeTest, AReaderDoesNotWaitForAWholeBatch) {
  AgentOptions o;
  o.http.port = 0;
  o.curve.capacities = {1000, 100000};
  o.collectors.push_back(std::make_unique<FloodCollector>());
  auto created = Agent::Create(std::move(o));
  ASSERT_TRUE(created.ok()) << created.error();
  Agent& agent = *created.value();
  std::thread loop([&] { agent.Run(); });
  // Read the request count until everything is in; remember whether some read
  // fell inside a batch.
  const double total = static_cast<double>(kBatches * kBatch);
  double inside_batch = -1;
  std::size_t reads = 0;
  const bool all_in = PollUntil(
      [&] {
        const collectors::Exposition e = collectors::ParseExposition(agent.RenderMetrics());
        const double n = SampleValue(e, "kvwatch_requests_total").value_or(-1);
        ++reads;
        if (n > 0 && n < total && static_cast<std::uint64_t>(n) % kBatch != 0) inside_batch = n;
        return n == total;
      },
      kIngestTimeout, std::chrono::milliseconds(0));
  agent.Stop();
  loop.join();
  ASSERT_TRUE(all_in) << "the agent did not ingest every request";
  EXPECT_GT(inside_batch, 0) << "in " << reads << " reads during ingestion, every request count fell on a batch "
                             << "boundary: readers wait for whole batches";
}

}  // namespace
}  // namespace kvwatch::agent
