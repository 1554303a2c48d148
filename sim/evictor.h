// Which free block of the simulated KV pool (sim/kv_pool.h) is reused when a fresh
// block is needed: one Evictor per eviction policy. Internal to sim/; the policies
// and how each maps to curve/'s policy of the same name are in docs/simulate.md
// ("The replica").
//
// An evictor orders the pool's free blocks that still carry a page id (the prefix
// cache), and for vllm also the free blocks that carry none (vLLM keeps every free
// block in one queue). Blocks enter when their last holder releases them (Add, in
// release order: a request releases its blocks tail first), leave when a request
// hits them (Remove) or when they are reused (Pop).
//
// Thread safety: none; one per simulation.
#ifndef KVWATCH_SIM_EVICTOR_H_
#define KVWATCH_SIM_EVICTOR_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "curve/page_map.h"
#include "curve/policy.h"
#include "curve/request.h"

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
  std::uint64_t key = 0;                 // fifo: OrderKey; sglang: release order
  std::uint32_t version = 0;             // lazy heaps and queues: entries of an older version are stale
  std::uint8_t freq = 0;                 // s3fifo: hits, at most 3
  bool in_main = false;                  // s3fifo: in the main queue (else the small one)
  bool cached = false;                   // carries a page id (in the pool's page map)
  bool in_evictor = false;
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

 private:
  std::uint64_t epoch_ = 0;
};

// An evictor over `blocks` (which must outlive it); null for a policy the replica
// does not support (see SupportedByReplica).
std::unique_ptr<Evictor> MakeEvictor(curve::PolicyKind kind, std::vector<Block>* blocks, std::uint64_t pool_blocks);

}  // namespace kvwatch::sim::internal

#endif  // KVWATCH_SIM_EVICTOR_H_
