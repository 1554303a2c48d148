// One simulated serving replica with continuous batching (sim/: the serving-replica
// simulator). Requests with arrival times, prompt pages and lengths go in; the
// scores of sim/summary.h come out. docs/simulate.md ("The replica") is the
// reference; the model in short:
//
// Steps, as vLLM V1's scheduler (vllm/v1/core/sched/scheduler.py) takes them. Each
// request has tokens (prompt plus the output tokens generated so far) and computed
// tokens (whose KV is in the pool). In a step, first the running requests in the
// order they were admitted each get min(tokens - computed, budget left) tokens (a
// prefill chunk, or 1 to decode), within max_batched_tokens; a request that needs a
// block and finds none free preempts the newest running request (latest admitted)
// until it fits or is itself preempted; then, if nothing was preempted this step,
// waiting requests are admitted in queue order while the budget, max_running, the
// free blocks for their first chunk and the admission rule allow (the first that
// does not fit stops admission: no skipping). A request admitted takes its prefix
// hits: its leading prompt pages found in the pool (free cached blocks, or blocks
// of running requests: shared, reference counted) are not computed (at least one
// prompt token always is, for the logits). When a request's computed tokens reach
// its tokens, it emits one output token; after output_tokens it finishes and
// releases its blocks, last block first. A request of 0 output tokens (a trace's
// `output_length: 0`: a request ended without a token) finishes when its prompt is
// computed, emitting nothing: it costs its prefill and leaves its pages cached. The step's time is
// time.StepSeconds(StepWork) and every token of the step is emitted at its end.
// Simulated time jumps to the next arrival when nothing runs or waits.
//
// KV: a request holds ceil(computed tokens / block_tokens) blocks; block k of its
// prompt carries pages[k] (a page already in the pool is shared instead of computed
// into a second block); blocks past its pages (generated tokens) carry none. A
// finished or preempted request's blocks become free: cached (with a page id,
// reusable by a hit, evictable) or empty. Preemption is by recompute: the request
// goes back to the front of the waiting queue and later prefills prompt plus
// generated tokens again (minus what its prefix hits give back); those tokens count
// as recomputed. A request whose whole KV (prompt + output - 1 tokens, at least the
// prompt) cannot fit in the pool is rejected on arrival; one waiting longer than queue_timeout_s before
// its first admission is rejected.
//
// Thread safety: SimulateReplica is a pure function of its arguments; calls may run
// on several threads at once (the time model's StepSeconds is const).
#ifndef KVWATCH_SIM_REPLICA_H_
#define KVWATCH_SIM_REPLICA_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "curve/policy.h"
#include "curve/request.h"
#include "sim/admission_rule.h"
#include "sim/request.h"
#include "sim/step_time.h"
#include "sim/summary.h"

namespace kvwatch::sim {

// ReplicaRequest: sim/request.h. Admission and its names: sim/admission_rule.h.

// Waiting queue order. kArrival: first come first served, preempted requests at the
// front (most recently preempted first, as vLLM prepends them). kTier: lower tier
// index first, then arrival (a preempted request keeps its place by tier and
// arrival). kPriority: higher priority first, then arrival.
enum class QueueOrder { kArrival, kTier, kPriority };

struct ReplicaOptions {
  std::uint64_t pool_blocks = 0;                         // KV pool size in blocks (>= 1)
  std::uint32_t block_tokens = 16;                       // tokens per block = tokens per trace page
  std::uint32_t max_batched_tokens = 8192;               // token budget per step (vLLM max_num_batched_tokens)
  std::uint32_t max_running = 256;                       // cap on running sequences (max_num_seqs)
  curve::PolicyKind eviction = curve::PolicyKind::kLru;  // which free cached block to reuse
  Admission admission = Admission::kGreedy;
  std::uint32_t max_output_tokens = 0;  // reserve-max: 0 = the largest output_tokens in the input
  std::vector<double> class_quantiles;  // reserve-quantile: q per class_id (missing: 0.9)
  double queue_timeout_s = std::numeric_limits<double>::infinity();  // waiting longer: rejected
  QueueOrder queue_order = QueueOrder::kArrival;
  std::vector<TierTarget> tiers;  // SLA tiers (sim/summary.h)
};

// The eviction policies the replica supports (every one of curve/policy.h; see
// docs/simulate.md, "The KV pool", for how each maps onto the pool), and their
// names, comma-separated, in kAllPolicies' order (for error messages).
bool SupportedByReplica(curve::PolicyKind kind);
std::string SupportedByReplicaNames();

// Called now and then with (requests finished or rejected, total); may be empty.
using Progress = std::function<void(std::uint64_t done, std::uint64_t total)>;

base::Result<SimSummary> SimulateReplica(const ReplicaOptions& options, std::span<const ReplicaRequest> requests,
                                         const StepTimeModel& time, const Progress& progress = {});

// What tests and tools may look at besides the summary.
struct StepRecord {
  double start_s = 0;
  double seconds = 0;
  StepWork work;
  std::uint32_t running = 0;      // running requests after the step's scheduling
  std::uint32_t waiting = 0;      // waiting requests after it
  std::uint32_t admitted = 0;     // admitted this step
  std::uint32_t preempted = 0;    // preempted this step
  std::uint32_t finished = 0;     // finished at the step's end
  std::uint64_t held_blocks = 0;  // after the step's scheduling
  std::uint64_t cached_free_blocks = 0;
  std::uint64_t free_blocks = 0;  // empty + free cached
};
struct RequestOutcome {
  bool finished = false;
  bool rejected = false;
  double first_admission_s = 0;  // absolute simulated times (the step start)
  double first_token_s = 0;      // its finish when it has no output token
  double finish_s = 0;           // finish, or rejection
  std::uint32_t hit_pages = 0;   // leading pages found in the pool at its first admission
  std::uint64_t hit_tokens = 0;  // prompt tokens those pages cover
  std::uint32_t preemptions = 0;
  std::uint64_t recomputed_tokens = 0;
};
struct ReplicaObserver {
  std::function<void(const StepRecord&)> on_step;   // after every step
  std::vector<RequestOutcome>* outcomes = nullptr;  // filled, one per request, when set
};

// SimulateReplica with an observer.
base::Result<SimSummary> SimulateReplicaObserved(const ReplicaOptions& options,
                                                 std::span<const ReplicaRequest> requests, const StepTimeModel& time,
                                                 const Progress& progress, const ReplicaObserver& observer);

}  // namespace kvwatch::sim

#endif  // KVWATCH_SIM_REPLICA_H_
