// The simulated KV pool (sim/kv_pool.h).
#include "sim/kv_pool.h"

namespace kvwatch::sim::internal {

KvPool::KvPool(std::uint64_t pool_blocks, curve::PolicyKind kind, std::span<const ReplicaRequest> requests)
    : pool_blocks_(pool_blocks),
      tree_(kind == curve::PolicyKind::kSglang),
      evictor_(MakeEvictor(kind, &blocks_, pool_blocks, requests)) {
  // Blocks are materialized as they are first used; reserve what a small pool needs.
  const std::uint64_t expected = std::min<std::uint64_t>(pool_blocks, 1u << 19);
  blocks_.reserve(static_cast<std::size_t>(expected));
  // Twice the pages a full pool holds: the linear-probing map then stays at most
  // 3/8 full, so that dropping a page (every eviction) scans short clusters.
  map_.Reserve(static_cast<std::size_t>(2 * expected));
}

void KvPool::Hold(std::uint32_t b) {
  Block& x = blocks_[b];
  if (x.ref == 0) {
    if (x.in_evictor) evictor_->Remove(b);
    if (x.cached) --free_cached_;
    ++held_;
  }
  ++x.ref;
  evictor_->Hit(b);
}

std::uint32_t KvPool::Allocate() {
  std::uint32_t b;
  if (!empty_.empty()) {
    b = empty_.back();
    empty_.pop_back();
  } else if (blocks_.size() < pool_blocks_) {
    b = static_cast<std::uint32_t>(blocks_.size());
    blocks_.emplace_back();
  } else {
    b = evictor_->Pop();
    if (blocks_[b].cached) {
      --free_cached_;
      DropPage(b);
    }
  }
  blocks_[b].ref = 1;
  ++held_;
  return b;
}

void KvPool::DropPage(std::uint32_t b) {
  Block& x = blocks_[b];
  map_.Erase(x.page);
  x.cached = false;
  ++page_version_;
  if (tree_ && x.parent != kNoBlock) {
    const std::uint32_t parent = x.parent;
    --blocks_[parent].children;
    x.parent = kNoBlock;
    evictor_->MaybeLeaf(parent);
  }
}

void KvPool::Fill(std::uint32_t b, curve::PageId page, std::uint32_t parent, std::uint64_t epoch,
                  std::uint64_t index) {
  Block& x = blocks_[b];
  x.key = Evictor::OrderKey(epoch, index);
  x.page = page;
  x.cached = true;
  map_.Insert(page, b);
  ++page_version_;
  if (tree_ && parent != kNoBlock) {
    x.parent = parent;
    ++blocks_[parent].children;
  }
  evictor_->Filled(b);
}

void KvPool::Release(std::span<const std::uint32_t> blocks) {
  for (std::size_t i = blocks.size(); i-- > 0;) {
    const std::uint32_t b = blocks[i];
    Block& x = blocks_[b];
    if (--x.ref != 0) continue;
    --held_;
    if (x.cached) {
      ++free_cached_;
      evictor_->Add(b);
    } else if (evictor_->TakesEmpty()) {
      evictor_->Add(b);
    } else {
      empty_.push_back(b);
    }
  }
}

}  // namespace kvwatch::sim::internal
