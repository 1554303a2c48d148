// What one simulated run scores (sim/: the serving-replica simulator): the figures
// `kvwatch simulate` prints per admission rule x eviction policy x load factor.
// sim/replica.h fills it (Summarize); agent/cli formats it (table, JSON, CSV, SVG).
//
// Latencies are seconds of simulated time. TTFT: arrival to first output token
// (queueing, prefill, any recomputation); a request with no output token has
// none, and meets its tier when its prefill ends within the TTFT target. ITL: the gap between consecutive output
// tokens of one request, over every gap of every finished request. A request meets
// its tier's SLA when its TTFT <= the tier's ttft_s and its mean ITL (TPOT:
// (finish - first token) / (output tokens - 1)) <= the tier's itl_s.
// Rejected requests (timed out waiting) count as not meeting it.
#ifndef KVWATCH_SIM_SUMMARY_H_
#define KVWATCH_SIM_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kvwatch::sim {

struct LatencyQuantiles {
  double p50 = 0, p90 = 0, p99 = 0;  // seconds; 0 when there is no sample
};

// A service tier: who belongs to it is decided by the command (per tenant or per
// class); the simulator only sees each request's tier index.
struct TierTarget {
  std::string name;
  double ttft_s = 0;  // target time to first token
  double itl_s = 0;   // target mean inter-token latency (TPOT)
};

struct TierScore {
  std::string name;
  std::uint64_t requests = 0;  // arrived in this tier
  std::uint64_t met = 0;       // finished within both targets
  std::uint64_t rejected = 0;  // timed out waiting
  double attainment = 0;       // met / requests (1 when requests == 0)
  LatencyQuantiles ttft, itl;  // over the tier's finished requests
};

// Mean seconds per request. `in_system` is over every request, arrival to its
// departure (a finish or a rejection): Little's law's W, so that mean_in_system =
// requests / simulated_s x in_system. The others are over finished requests and
// split `finished` (arrival to finish) in three that add up to it: queue_wait
// (arrival to its first admission), prefill (first admission to first token; with
// queue_wait, the TTFT; for a request without output, to its finish) and decode
// (first token to finish). A preempted request's later waits and recomputation
// count in the part it was preempted in.
struct MeanLatency {
  double in_system = 0, finished = 0;
  double queue_wait = 0, prefill = 0, ttft = 0, decode = 0;
};

struct SimSummary {
  // The run.
  double simulated_s = 0;  // first arrival to last finish
  std::uint64_t requests = 0, finished = 0, rejected = 0;
  // Throughput over simulated_s.
  double output_tokens_per_s = 0;
  double requests_per_s = 0;   // finished requests per second
  LatencyQuantiles ttft, itl;  // every finished request / every token gap
  MeanLatency mean_latency;
  std::vector<TierScore> tiers;  // in the order of the tier targets
  // Memory.
  std::uint64_t preemptions = 0;  // requests preempted (by recompute)
  std::uint64_t recomputed_tokens = 0;
  // Time-averaged KV blocks held by running requests and by the prefix cache
  // (free blocks that still hold cached pages), and the pool size.
  double mean_running_blocks = 0, mean_cached_blocks = 0;
  std::uint64_t pool_blocks = 0;
  // Prompt tokens served from the prefix cache / prompt tokens of admitted requests.
  double prefix_hit_ratio = 0;
  // Little's law check: time-averaged requests in the system (waiting + running).
  double mean_in_system = 0;
  std::uint64_t steps = 0;
};

}  // namespace kvwatch::sim

#endif  // KVWATCH_SIM_SUMMARY_H_
