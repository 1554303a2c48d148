// PolicyCanaries: the live agent's eviction-policy canaries. Each listed policy
// runs at each configured capacity beside the stack-distance engine, fed the same
// requests, and its page hits and request coverage are kept over the same recent
// windows as the curve (curve/sliding_windows.h). A canary is the same simulation
// as `kvwatch replay --policy` (curve/policy_replay.h), so on the same records the
// live numbers equal the replay's.
//
// Request facts: the class is derived from the stream (RequestClassifier, whose
// memory is bounded: it forgets every chain past kMaxClassifierChains), only when
// a canary reads it (workload-aware's categories, or priority with class rules:
// uses_class()); otherwise the classifier stays empty and costs nothing; lifetimes
// (sglang, vllm) start at the request's own timestamp when it has one, else at
// the window clock. belady needs the future and is offline only.
//
// Batches: Add queues the request (its pages copied, its facts derived) and the
// canaries take the queue in batches (Settle), each canary every queued request
// in turn, so that one canary's page map and slots stay in the CPU's caches across
// consecutive requests (taken request by request, through every canary in turn,
// they ran at 0.48-0.69x the same caches run one after the other:
// bench/policy_bench Canaries). A caller settles when it likes (the agent does
// after each hand-over, outside its own lock, agent/runtime/analysis.h), and at
// the latest when Due(); Add settles a full queue itself before queueing more.
// Every reader (Window, Lifetime, MemoryBytes, Serialize) and Advance settles the
// queue first, so what is read is exactly as if each request had been taken when
// added.
//
// Thread safety: none; even the readers change the object (they settle the
// queue), so the caller serializes every call (the agent under its canaries' lock).
#ifndef KVWATCH_CURVE_POLICY_CANARIES_H_
#define KVWATCH_CURVE_POLICY_CANARIES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "curve/policy.h"
#include "curve/policy_replay.h"
#include "curve/request.h"
#include "curve/sliding_windows.h"

namespace kvwatch::curve {

struct RequestOutcome;  // curve/stack_distance.h

struct CanaryOptions {
  std::vector<PolicyKind> policies;
  std::vector<std::uint64_t> capacities;  // each >= 1
  TouchOrder touch_order = TouchOrder::kTailFirst;
  double coverage_share = 1.0;
  LifetimeOptions lifetime;
  PriorityRules priorities;
  std::vector<double> windows_s;
  // s3fifo canaries: PolicyOptions::s3fifo_promotion_hits.
  std::uint32_t s3fifo_promotion_hits = 1;
  // lru canaries read their hits from the exact stack-distance engine's outcome
  // (Add's `exact`) instead of simulating a cache: under the prefix rule, LRU at
  // capacity C hits exactly the leading pages whose prefix-maximum distance is
  // below C (tests/curve/policy_test.cc, LruEqualsTheStackCurveAtEveryCapacity),
  // so such a canary holds no cache and costs one binary search per request.
  // Only for an exact engine with this touch order whose engine.max_pages is at
  // least every capacity (beyond it the engine forgets pages an LRU cache keeps).
  // Not part of the checkpoint's options: the canaries' bytes are the same but
  // for the lru caches, which are written empty and skipped on restore.
  bool lru_from_engine = false;
};

class PolicyCanaries {
 public:
  static constexpr std::size_t kMaxClassifierChains = std::size_t{1} << 20;
  // The queue is due when it holds this many requests or pages (see Batches
  // above; bench/policy_bench Canaries ran at 0.57-0.58x the bare caches with 64
  // requests or 16,384 pages a batch, 0.79-0.90x with 256 or 65,536, 0.81x with
  // 1,024 requests). Its memory is then at most 65,536 pages and one request's.
  static constexpr std::size_t kSettleRequests = 256;
  static constexpr std::size_t kSettlePages = std::size_t{1} << 16;

  // An error names what is wrong (a policy that needs the future, capacity 0).
  static base::Result<std::unique_ptr<PolicyCanaries>> Create(const CanaryOptions& options);

  // One request, with its unlimited hits from the agent's engine, at window time t.
  // `exact`: the exact engine's outcome for the request; REQUIRES non-null when
  // options().lru_from_engine and some canary is lru.
  void Add(const Request& request, std::uint32_t unlimited_hits, double t, const RequestOutcome* exact = nullptr);
  // Whether the queue is full: settle it before adding more (else Add does).
  bool Due() const { return queued_.size() >= kSettleRequests || queued_pages_.size() >= kSettlePages; }
  // Takes every queued request: each canary all of them in order, then the totals
  // and windows request by request. Const, as the readers that call it: it does
  // the work Add queued, and changes nothing they observe.
  void Settle() const;
  // Moves the windows' clock.
  void Advance(double t) {
    Settle();
    windows_.Advance(t);
  }

  const CanaryOptions& options() const { return options_; }
  // Whether some canary reads the request's derived class (see above).
  bool uses_class() const { return uses_class_; }
  // Canary index of (policy i, capacity j) is i * capacities + j.
  std::size_t size() const { return canaries_.size(); }
  PolicyKind kind(std::size_t canary) const { return canaries_[canary].kind; }
  std::uint64_t capacity(std::size_t canary) const { return canaries_[canary].capacity; }
  // Totals over window w, and since start.
  PolicyTotals Window(std::size_t canary, std::size_t w) const;
  const PolicyTotals& Lifetime(std::size_t canary) const {
    Settle();
    return canaries_[canary].lifetime;
  }
  // The simulations' memory: the caches, the windows and the classifier. Not the
  // queue's (at most kSettlePages pages and kSettleRequests requests' facts), a
  // hand-over buffer as the agent's batch is.
  std::size_t MemoryBytes() const;

  // Checkpoint encoding (appends): the options (to refuse a checkpoint of other
  // options), the request classifier, then per canary its lifetime totals and its
  // cache (PolicyCache::Serialize: the logical content, rebuilt on restore), and
  // the windows' slices and clock. Per resident page: 32 bytes (lfu, priority),
  // 28 (workload-aware, plus 20 a ghost); per slot of its core: 35 (lru, sieve,
  // vllm, arc, s3fifo), 31 (fifo, sglang), and 8 a ghost (arc, s3fifo); none for an
  // lru canary read from the engine (its cache part is empty, and whatever a
  // checkpoint holds there is skipped on restore: the restored engine carries its
  // state); 4 bytes per page a running request holds (sglang, vllm);
  // 40 per (window slice, canary); 12 per chain the classifier remembers (none
  // unless uses_class(); chains in a checkpoint are then dropped on restore). E.g.
  // lru and vllm at 10,000 and 20,000 pages, full, two windows: 2.1 MB.
  void Serialize(std::vector<std::uint8_t>* out) const;
  // Consumes what Serialize wrote. True: this object now behaves exactly as the
  // one that wrote it did at that moment (same totals, windows and future hits).
  // False (the object is unchanged): truncated or malformed bytes, or bytes written
  // by canaries with other options (policies, capacities, touch order, coverage
  // share, lifetimes, priorities or windows).
  bool Deserialize(std::span<const std::uint8_t>* in);
  // The layout version a checkpoint's bytes declare (Serialize writes
  // CheckpointVersionWritten()), nullopt when they do not start as a canaries
  // checkpoint: a restorer tells an older layout, which Deserialize refuses
  // whatever the options, from a checkpoint of other options.
  static std::optional<std::uint32_t> CheckpointVersion(std::span<const std::uint8_t> in);
  static std::uint32_t CheckpointVersionWritten();

 private:
  struct Slice {
    std::vector<PolicyTotals> totals;  // one per canary
    void Clear() { std::fill(totals.begin(), totals.end(), PolicyTotals{}); }
    void Merge(const Slice& o) {
      for (std::size_t i = 0; i < totals.size(); ++i) totals[i].Merge(o.totals[i]);
    }
  };
  struct Canary {
    PolicyKind kind;
    std::uint64_t capacity;
    std::unique_ptr<PolicyCache> cache;  // null for an lru canary read from the engine (lru_from_engine)
    PolicyTotals lifetime;
  };

  // A request added but not yet taken by the canaries: its pages are
  // queued_pages_[first, first + pages) (sim.pages is set when taken).
  struct Queued {
    SimRequest sim;
    std::size_t first;
    std::size_t pages;
    std::uint32_t unlimited_hits;
    double t;
  };

  PolicyCanaries(const CanaryOptions& options, std::size_t canaries);
  // Whether a canary of this policy reads the engine's outcome (lru_from_engine).
  bool FromEngine(PolicyKind kind) const { return options_.lru_from_engine && kind == PolicyKind::kLru; }

  CanaryOptions options_;
  bool uses_class_ = false;
  RequestClassifier classifier_;
  // Settled lazily by the readers (const): what they change is what Add queued,
  // not what they observe.
  mutable std::vector<Canary> canaries_;
  mutable SlidingWindows<Slice> windows_;
  mutable std::vector<Queued> queued_;
  mutable std::vector<PageId> queued_pages_;
  // Per queued request, per canary (request-major): lru canaries read from the
  // engine are filled by Add, the others when settled.
  mutable std::vector<SimOutcome> outcomes_;
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_POLICY_CANARIES_H_
