// What the replica's step loop records for the summary (internal to sim/:
// sim/replica.cc records, sim/replica_summary.cc summarizes).
#ifndef KVWATCH_SIM_REPLICA_INTERNAL_H_
#define KVWATCH_SIM_REPLICA_INTERNAL_H_

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "sim/latency_samples.h"
#include "sim/replica.h"
#include "sim/summary.h"

namespace kvwatch::sim::internal {

struct TierRecord {
  std::uint64_t requests = 0, met = 0, rejected = 0;
  LatencySamples ttft, itl;
};

struct RunRecord {
  RunRecord(const ReplicaOptions& o, std::size_t requests)
      : outcomes(requests), tiers(o.tiers.size()), tier_targets(o.tiers) {}

  void Rejected(std::uint32_t r, const ReplicaRequest& q, double t);
  void Preempted(std::uint32_t r) {
    ++preemptions;
    ++outcomes[r].preemptions;
  }
  void FirstAdmission(std::uint32_t r, double t, std::uint32_t hit_pages, std::uint64_t hit, std::uint64_t prompt) {
    outcomes[r].first_admission_s = t;
    outcomes[r].hit_pages = hit_pages;
    outcomes[r].hit_tokens = hit;
    hit_tokens += hit;
    prompt_tokens += prompt;
  }
  // The request's output token number `generated` (1-based) at time t; `last` is
  // the time of the one before.
  void Token(std::uint32_t r, const ReplicaRequest& q, std::uint32_t generated, double t, double last);
  void Finished(std::uint32_t r, const ReplicaRequest& q, double t);

  std::vector<RequestOutcome> outcomes;
  std::vector<TierRecord> tiers;
  std::vector<TierTarget> tier_targets;
  LatencySamples ttft, itl;
  double start_s = 0, end_s = 0, last_departure = 0;
  double latency_sum = 0;  // sum over departed requests of departure - arrival
  // Sums over finished requests of their queue wait, prefill and decode times
  // (sim/summary.h, MeanLatency).
  double wait_sum = 0, prefill_sum = 0, decode_sum = 0;
  double in_system_area = 0;  // integral of requests in the system over time
  double held_area = 0, cached_area = 0;
  std::uint64_t done = 0, steps = 0, finished = 0, rejected = 0;
  std::uint64_t preemptions = 0, recomputed_tokens = 0, output_tokens = 0;
  std::uint64_t hit_tokens = 0, prompt_tokens = 0;
};

// The summary of a run (sorts the latency samples).
SimSummary Summarize(const ReplicaOptions& o, RunRecord* record);

}  // namespace kvwatch::sim::internal

#endif  // KVWATCH_SIM_REPLICA_INTERNAL_H_
