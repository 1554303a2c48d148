// Which free block of the simulated KV pool (sim/kv_pool.h) is reused when a fresh
// block is needed: one Evictor per eviction policy. Internal to sim/; the policies
// and how each maps to curve/'s policy of the same name are in docs/simulate.md
// ("The replica").
//
// An evictor orders the pool's free blocks that still carry a page id (the prefix
// cache), and for vllm also the free blocks that carry none (vLLM keeps every free
// block in one queue). Blocks enter when their last holder releases them (Add, in
// release order: a request releases its blocks tail first), leave when a request
// hits them (Remove) or when they are reused (Pop). The policies that key blocks by
// who used them (priority, workload-aware, belady) read the request the pool is
// serving (SetReferrer) when a block is referenced (Filled, Hit) or reused (Pop).
//
// Files: sim/evictor.cc (lru, vllm, fifo, sglang, s3fifo and MakeEvictor),
// sim/evictor_arc.cc (arc), sim/evictor_keyed.cc (lfu, priority, belady,
// workload-aware).
//
// Thread safety: none; one per simulation.
#ifndef KVWATCH_SIM_EVICTOR_H_
#define KVWATCH_SIM_EVICTOR_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "curve/page_map.h"
#include "curve/policy.h"
#include "curve/request.h"
#include "sim/request.h"

namespace kvwatch::sim::internal {

inline constexpr std::uint32_t kNoBlock = 0xffffffffu;

// One KV block of the pool. The evictor's fields are used by whichever evictor
// the pool has.
struct Block {
  curve::PageId page = 0;
  std::uint32_t ref = 0;                 // running requests holding it
  std::uint32_t parent = kNoBlock;       // sglang: the block of the previous prompt page
  std::uint32_t children = 0;            // sglang: cached blocks whose parent this is
  std::uint32_t prev = kNoBlock;         // list evictors: towards the head
  std::uint32_t next = kNoBlock;
  // fifo: OrderKey; sglang: release order; lfu: references since filled; priority:
  // the retention priority + 2^32; belady: the next use (see evictor_keyed.cc);
  // workload-aware: the request clock at the last reference.
  std::uint64_t key = 0;
  std::uint32_t version = 0;             // lazy heaps and queues: entries of an older version are stale
  std::uint8_t freq = 0;                 // s3fifo: hits, at most 3
  bool in_main = false;                  // s3fifo: in the main queue (else the small one); arc: in T2 (else T1)
  // workload-aware: the category (class id, < 64) of the request that referenced it
  // last. Its own field because no other one is free under that policy (key holds the
  // clock); it fits in the struct's padding (48 bytes either way).
  std::uint8_t category = 0;
  bool cached = false;                   // carries a page id (in the pool's page map)
  bool in_evictor = false;
};

// The request a block is referenced or allocated for (KvPool::SetReferrer).
struct Referrer {
  std::uint32_t request = 0;   // its index in the input (arrival order)
  std::int32_t priority = 0;   // ReplicaRequest::priority
  std::uint32_t category = 0;  // ReplicaRequest::class_id, < kMaxClasses
};

class Evictor {
 public:
  virtual ~Evictor() = default;
  // Block b became free (ref 0). REQUIRES: b is cached, or TakesEmpty().
  virtual void Add(std::uint32_t b) = 0;
  // Block b, free and in this evictor, is held again (a prefix hit).
  virtual void Remove(std::uint32_t b) = 0;
  // The block to reuse, taken out. REQUIRES: size() > 0.
  virtual std::uint32_t Pop() = 0;
  virtual std::uint64_t size() const = 0;
  // Whether free blocks without a page id are queued here too (vllm) rather than
  // kept apart as empty blocks, which every other policy reuses first.
  virtual bool TakesEmpty() const { return false; }
  // A fresh block is about to be allocated for `page` (not in the pool), before any
  // Pop for it; Filled for that block follows. For what the choice of victim depends
  // on: arc's ghost check and the adaptation of its target, workload-aware's counts.
  virtual void Incoming(curve::PageId page) {}
  // Block b just got its page id (fifo: its fill order; s3fifo: the ghost check).
  virtual void Filled(std::uint32_t b) {}
  // A request hit block b (held or free).
  virtual void Hit(std::uint32_t b) {}
  // sglang: block b lost a cached child; it may have become an evictable leaf.
  virtual void MaybeLeaf(std::uint32_t b) {}

  // fifo's order: a clock that moves at each admission (and each requeue), and the
  // key of page k of a request admitted at `epoch` (tail pages first).
  std::uint64_t NewEpoch() { return ++epoch_; }
  static std::uint64_t OrderKey(std::uint64_t epoch, std::uint64_t page_index) {
    constexpr std::uint64_t kMax = (std::uint64_t{1} << 24) - 1;
    return (epoch << 24) | (kMax - std::min(page_index, kMax));
  }

  void SetReferrer(const Referrer& referrer) { referrer_ = referrer; }

 protected:
  const Referrer& referrer() const { return referrer_; }

 private:
  std::uint64_t epoch_ = 0;
  Referrer referrer_;
};

// A min-heap of (key, tie, block, version) entries with lazy deletion: the caller's
// valid(entry) says whether an entry is live (typically: its block is in the evictor
// with the same version). Ties on key go to the smaller tie, then the smaller block.
class LazyHeap {
 public:
  struct Entry {
    std::uint64_t key;
    std::uint64_t tie;
    std::uint32_t block;
    std::uint32_t version;
  };
  void Push(const Entry& e) {
    heap_.push_back(e);
    std::push_heap(heap_.begin(), heap_.end(), Later);
  }
  // Pops entries until valid(entry) holds; returns kNoBlock when none does.
  template <typename Valid>
  std::uint32_t PopValid(Valid&& valid, Entry* popped = nullptr) {
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Later);
      const Entry e = heap_.back();
      heap_.pop_back();
      if (valid(e)) {
        if (popped != nullptr) *popped = e;
        return e.block;
      }
    }
    return kNoBlock;
  }
  // Drops stale entries when they outnumber live ones.
  template <typename Valid>
  void MaybeCompact(std::uint64_t live, Valid&& valid) {
    if (heap_.size() <= 2 * live + 1024) return;
    std::erase_if(heap_, [&](const Entry& e) { return !valid(e); });
    std::make_heap(heap_.begin(), heap_.end(), Later);
  }

 private:
  static bool Later(const Entry& a, const Entry& b) {
    if (a.key != b.key) return a.key > b.key;
    return a.tie != b.tie ? a.tie > b.tie : a.block > b.block;
  }
  std::vector<Entry> heap_;
};

// An evictor over `blocks` (which must outlive it); null for a policy the replica
// does not support (see SupportedByReplica). `requests`: the whole input, which
// belady reads (each page's next use) and must outlive the evictor.
std::unique_ptr<Evictor> MakeEvictor(curve::PolicyKind kind, std::vector<Block>* blocks, std::uint64_t pool_blocks,
                                     std::span<const ReplicaRequest> requests);

// The factories MakeEvictor dispatches to (sim/evictor_arc.cc, sim/evictor_keyed.cc).
std::unique_ptr<Evictor> MakeArcEvictor(std::vector<Block>* blocks, std::uint64_t pool_blocks);
// kind: lfu, priority or belady.
std::unique_ptr<Evictor> MakeKeyedEvictor(curve::PolicyKind kind, std::vector<Block>* blocks,
                                          std::span<const ReplicaRequest> requests);
std::unique_ptr<Evictor> MakeWorkloadAwareEvictor(std::vector<Block>* blocks, std::uint64_t pool_blocks);

}  // namespace kvwatch::sim::internal

#endif  // KVWATCH_SIM_EVICTOR_H_
