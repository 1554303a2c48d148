// KvChainIndex (kv_chain_index.h): the parent map's slots in a doubly linked list
// by age (oldest evicted first when full), indexed by hash, and the ancestor walk
// with its cycle stamp.
#include "collectors/kv_chain_index.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace kvwatch::collectors {

KvChainIndex::KvChainIndex(std::size_t max_entries) : max_entries_(std::max<std::size_t>(1, max_entries)) {
  // Slots are 32-bit and kNone / PageMap::kEmpty are reserved.
  max_entries_ = std::min<std::size_t>(max_entries_, kNone - 1);
}

void KvChainIndex::Unlink(std::uint32_t slot) {
  Link& l = links_[slot];
  if (l.prev != kNone) {
    links_[l.prev].next = l.next;
  } else {
    oldest_ = l.next;
  }
  if (l.next != kNone) {
    links_[l.next].prev = l.prev;
  } else {
    newest_ = l.prev;
  }
  l.prev = l.next = kNone;
}

void KvChainIndex::PushNewest(std::uint32_t slot) {
  Link& l = links_[slot];
  l.prev = newest_;
  l.next = kNone;
  if (newest_ != kNone) {
    links_[newest_].next = slot;
  } else {
    oldest_ = slot;
  }
  newest_ = slot;
}

void KvChainIndex::Release(std::uint32_t slot) {
  index_.Erase(links_[slot].hash);
  Unlink(slot);
  free_.push_back(slot);
}

bool KvChainIndex::Put(std::uint64_t hash, std::optional<std::uint64_t> parent, std::uint64_t page) {
  if (const std::uint32_t* found = index_.Find(hash)) {
    const std::uint32_t slot = *found;
    Link& l = links_[slot];
    l.parent = parent.value_or(0);
    l.has_parent = parent.has_value();
    l.page = page;
    if (slot != newest_) {
      Unlink(slot);
      PushNewest(slot);
    }
    return false;
  }
  bool evicted = false;
  if (index_.size() >= max_entries_) {
    Release(oldest_);
    evicted = true;
  }
  std::uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(links_.size());
    links_.emplace_back();
  }
  Link& l = links_[slot];
  l.hash = hash;
  l.parent = parent.value_or(0);
  l.has_parent = parent.has_value();
  l.page = page;
  l.mark = 0;
  index_.Insert(hash, slot);
  PushNewest(slot);
  return evicted;
}

void KvChainIndex::Erase(std::uint64_t hash) {
  const std::uint32_t* found = index_.Find(hash);
  if (found == nullptr) return;
  Release(*found);
}

void KvChainIndex::Clear() {
  index_.Clear();
  links_.clear();
  free_.clear();
  oldest_ = newest_ = kNone;
}

KvChainIndex::WalkEnd KvChainIndex::AppendChain(std::uint64_t start, std::size_t max_pages,
                                                std::vector<curve::PageId>* pages) {
  if (++walk_stamp_ == 0) {  // wrapped: old marks could alias the new stamp
    for (Link& l : links_) l.mark = 0;
    walk_stamp_ = 1;
  }
  walk_reverse_.clear();
  WalkEnd end = WalkEnd::kRoot;
  std::uint64_t hash = start;
  for (;;) {
    if (walk_reverse_.size() >= max_pages) {
      end = WalkEnd::kTooLong;
      break;
    }
    const std::uint32_t* found = index_.Find(hash);
    if (found == nullptr) {
      end = WalkEnd::kUnknown;
      break;
    }
    Link& l = links_[*found];
    if (l.mark == walk_stamp_) {
      end = WalkEnd::kCycle;
      break;
    }
    l.mark = walk_stamp_;
    walk_reverse_.push_back(*found);
    if (!l.has_parent) break;
    hash = l.parent;
  }
  for (auto it = walk_reverse_.rbegin(); it != walk_reverse_.rend(); ++it) pages->push_back(links_[*it].page);
  return end;
}

std::size_t KvChainIndex::MemoryBytes() const {
  return index_.MemoryBytes() + links_.capacity() * sizeof(Link) + free_.capacity() * sizeof(std::uint32_t) +
         walk_reverse_.capacity() * sizeof(std::uint32_t);
}

}  // namespace kvwatch::collectors
