// The simulated replica's KV pool (internal to sim/): N blocks shared by the
// running requests' KV and the prefix cache. A block is held (ref > 0: running
// requests use it), free and cached (ref 0, still carrying a page id: a later
// request whose prefix it is reuses it; evictable), or free and empty. A page id is
// in at most one block (a request that computes a page already cached elsewhere
// shares that block). Which free cached block is reused when a fresh one is needed
// is the evictor's choice (sim/evictor.h); empty blocks are reused first, except
// under vllm, whose one free queue holds both.
//
// Thread safety: none; one per simulation.
#ifndef KVWATCH_SIM_KV_POOL_H_
#define KVWATCH_SIM_KV_POOL_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "curve/page_map.h"
#include "curve/policy.h"
#include "sim/evictor.h"

namespace kvwatch::sim::internal {

class KvPool {
 public:
  // REQUIRES: MakeEvictor(kind, ...) is not null. `requests` (belady's future) must
  // outlive the pool.
  KvPool(std::uint64_t pool_blocks, curve::PolicyKind kind, std::span<const ReplicaRequest> requests);

  // Blocks a request can obtain now: empty ones plus free cached ones.
  std::uint64_t FreeBlocks() const { return (pool_blocks_ - blocks_.size()) + empty_.size() + evictor_->size(); }
  std::uint64_t held_blocks() const { return held_; }
  std::uint64_t free_cached_blocks() const { return free_cached_; }
  std::uint64_t pool_blocks() const { return pool_blocks_; }
  // Changes whenever a page id is given to or dropped from a block (Find's answers).
  std::uint64_t page_version() const { return page_version_; }

  // The block carrying `page`, held or free; kNoBlock when none does.
  std::uint32_t Find(curve::PageId page) const {
    const std::uint32_t* b = map_.Find(page);
    return b == nullptr ? kNoBlock : *b;
  }
  bool IsFree(std::uint32_t b) const { return blocks_[b].ref == 0; }
  // Takes a reference on block b (found by Find: a prefix hit or a shared page).
  void Hold(std::uint32_t b);
  // The request the next Hold, Allocate and Fill calls serve (the evictor reads it).
  void SetReferrer(const Referrer& referrer) { evictor_->SetReferrer(referrer); }
  // A fresh block, held once and carrying no page id: an empty one, else the
  // evictor's choice (its page id dropped). REQUIRES: FreeBlocks() > 0.
  std::uint32_t Allocate();
  // Allocate for a block that will carry `page` (Fill next), so that the evictor
  // may look at the page first. REQUIRES: Find(page) == kNoBlock.
  std::uint32_t AllocateFor(curve::PageId page) {
    evictor_->Incoming(page);
    return Allocate();
  }
  // A new admission's epoch (fifo's order, see Evictor::OrderKey).
  std::uint64_t NewEpoch() { return evictor_->NewEpoch(); }
  // Gives held block b (fresh from Allocate) its page id; parent: the block of the
  // previous prompt page of the request (kNoBlock for the first); the page is page
  // `index` of a request admitted at `epoch`. REQUIRES: Find(page) == kNoBlock and b
  // came from AllocateFor(page).
  void Fill(std::uint32_t b, curve::PageId page, std::uint32_t parent, std::uint64_t epoch, std::uint64_t index);
  // Drops one reference on each block, last block first.
  void Release(std::span<const std::uint32_t> blocks);

 private:
  void DropPage(std::uint32_t b);

  std::uint64_t pool_blocks_;
  bool tree_;  // sglang: parents and children are kept
  std::vector<Block> blocks_;  // grows up to pool_blocks_ (never-used blocks are not materialized)
  std::unique_ptr<Evictor> evictor_;
  std::vector<std::uint32_t> empty_;  // free blocks with no page id (not under vllm)
  curve::PageMap map_;
  std::uint64_t held_ = 0;
  std::uint64_t free_cached_ = 0;
  std::uint64_t page_version_ = 0;
};

}  // namespace kvwatch::sim::internal

#endif  // KVWATCH_SIM_KV_POOL_H_
