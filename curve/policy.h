// Eviction-policy simulation: one cache of C pages under policy P, fed the same
// requests as the stack-distance engine, giving each request's prefix hits.
//
// The prefix rule is the curve's (docs/semantics.md section 2): a
// request's pages are looked up in the cache as it was when the request arrived,
// and reuse stops at the first page that is not resident. Then the request's pages
// are referenced in the engine's touch order (tail-first by default), each one
// admitted on a miss (every policy here admits every page it can hold: demand
// paging). `lru` under these rules holds exactly the pages whose stack distance is
// below C, so its hits equal the stack-distance curve at every capacity (a test).
//
// The policies, each documented where it is implemented (its eviction order in
// curve/policy_core_*.cc, the registry in curve/policy.cc says which files):
//   lru             least recently used page first.
//   fifo            first admitted first; hits do not reorder.
//   lfu             LFU with dynamic aging (LFU-DA).
//   arc             ARC (Megiddo and Modha, FAST 2003): recency list T1 and
//                   frequency list T2 with ghosts B1, B2 and an adaptive target p.
//   s3fifo          S3-FIFO: small FIFO, main FIFO with 2-bit clock, ghost FIFO.
//   sglang          SGLang's radix cache: least recently used evictable leaf first;
//                   running requests lock their path.
//   vllm            vLLM V1's block pool: a free queue in release order; running
//                   requests hold their blocks and their generated blocks.
//   priority        lowest retention priority first, LRU within a level.
//   workload-aware  lowest estimated reuse probability first (Wang et al., 2025).
//   belady          the page whose next use is farthest first (needs the future).
//   sieve           SIEVE (Zhang et al., NSDI 2024): a FIFO queue with visited bits
//                   and a hand.
//
// Request lifetimes (sglang, vllm): a request runs from its arrival until end_s and
// holds output_pages extra pages (its generated tokens) while it runs. The caller
// derives both from the trace (curve/policy_replay.h). Other policies ignore them.
//
// Thread safety: none; one PolicyCache per thread.
#ifndef KVWATCH_CURVE_POLICY_H_
#define KVWATCH_CURVE_POLICY_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "curve/request.h"
#include "curve/stack_distance.h"

namespace kvwatch::curve {

// Values are stable (checkpoints store them): a new policy is appended.
enum class PolicyKind { kLru, kFifo, kLfu, kS3Fifo, kSglang, kVllm, kPriority, kWorkloadAware, kBelady, kArc, kSieve };

// Every policy, in the order reports list them.
inline constexpr PolicyKind kAllPolicies[] = {
    PolicyKind::kLru,           PolicyKind::kFifo,   PolicyKind::kLfu,   PolicyKind::kArc,
    PolicyKind::kS3Fifo,        PolicyKind::kSglang, PolicyKind::kVllm,  PolicyKind::kPriority,
    PolicyKind::kWorkloadAware, PolicyKind::kBelady, PolicyKind::kSieve,
};

// "lru", "fifo", "lfu", "arc", ..., "workload-aware", "belady".
std::string_view PolicyName(PolicyKind kind);
// The kind named `name`; an error that lists the known names otherwise.
base::Result<PolicyKind> ParsePolicyName(std::string_view name);
// A comma-separated list ("lru,sglang,vllm"); "all" means every policy. Duplicates
// are dropped; the order given is kept.
base::Result<std::vector<PolicyKind>> ParsePolicyList(std::string_view list);
// Whether the policy needs each page's next use (offline only).
inline bool NeedsFuture(PolicyKind kind) { return kind == PolicyKind::kBelady; }

// Marks "never used again" in SimRequest::next_use.
inline constexpr std::uint64_t kNeverUsed = std::numeric_limits<std::uint64_t>::max();

struct SimRequest {
  std::span<const PageId> pages;  // prefix order
  // Arrival and finish times in seconds (sglang, vllm). A NaN end, or an end at or
  // before the next arrival, means the request has finished when the next arrives.
  double arrival_s = std::nan("");
  double end_s = std::nan("");
  // Pages of generated tokens the request holds while it runs (sglang, vllm).
  std::uint32_t output_pages = 0;
  // Retention priority (priority): higher is kept longer.
  std::int32_t priority = 0;
  // Request category (workload-aware): a small id, below kMaxCategories.
  std::uint32_t category = 0;
  // belady: for each page position i, the index of the next reference to
  // pages[i] after this request's own, in the global sequence of references
  // counted in touch order; kNeverUsed when there is none. Empty for other policies.
  std::span<const std::uint64_t> next_use;
};

inline constexpr std::uint32_t kMaxCategories = 64;

struct SimOutcome {
  std::uint32_t hits = 0;  // leading pages resident at arrival
  // vllm: this request could not get its blocks (preempted, recomputed); and how
  // many running requests were preempted to make room for it.
  bool preempted = false;
  std::uint32_t preempted_running = 0;
};

struct PolicyOptions {
  PolicyKind kind = PolicyKind::kLru;
  std::uint64_t capacity = 0;  // pages; must be at least 1
  TouchOrder touch_order = TouchOrder::kTailFirst;
  // s3fifo: the small FIFO's share of the capacity (the paper's 10%).
  double s3fifo_small_fraction = 0.1;
  // s3fifo: hits a page needs while in the small FIFO to move to the main FIFO
  // when it reaches the small FIFO's end (else it leaves, to the ghost FIFO);
  // 1..kMaxS3FifoPromotionHits (the frequency is a 2-bit counter). 1 here (the
  // paper: a page re-accessed while in the small FIFO); libCacheSim's S3FIFO.c
  // defaults to 2 (curve/policy_core_s3fifo.cc has the sources).
  std::uint32_t s3fifo_promotion_hits = 1;
};
inline constexpr std::uint32_t kMaxS3FifoPromotionHits = 3;

class PolicyCache {
 public:
  virtual ~PolicyCache() = default;
  // Prefix hits of `request` in the arrival state, then references its pages.
  virtual SimOutcome Process(const SimRequest& request) = 0;
  // Pages resident now (including pages held by running requests).
  virtual std::uint64_t resident() const = 0;
  // Bytes held by the simulation's data structures.
  virtual std::size_t MemoryBytes() const = 0;

  // Checkpoint encoding (appends). What is written is the cache's logical content,
  // not its memory layout: the resident pages in eviction order with their keys,
  // the running requests (sglang, vllm), the ghost entries that are still live
  // (s3fifo, workload-aware) and the policy's counters. A cache made by
  // MakePolicyCache with the same options and restored from it behaves exactly as
  // this one from then on (same hits, same evictions, same preemptions).
  virtual void Serialize(std::vector<std::uint8_t>* out) const = 0;
  // Consumes what Serialize wrote; false when the bytes are truncated or do not
  // describe a valid state for this cache's options (a count over the capacity, a
  // page twice, an index out of range). Every count is checked against the bytes
  // left before anything is allocated. REQUIRES: the cache is fresh (nothing
  // processed yet). After false the cache is in an unspecified (but safe to
  // destroy) state: discard it.
  virtual bool Deserialize(std::span<const std::uint8_t>* in) = 0;
};

// Whether MakePolicyCache would accept `options`: an error naming the option
// when one is invalid.
base::Status CheckPolicyOptions(const PolicyOptions& options);
// A cache for `options`; an error naming the option when it is invalid.
base::Result<std::unique_ptr<PolicyCache>> MakePolicyCache(const PolicyOptions& options);

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_POLICY_H_
