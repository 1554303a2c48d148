// KvChainIndex: KvEventTracker's parent map (kv_event_tracker.h, "Parent map"): block
// hash -> (parent hash, scoped page id), bounded, evicting the oldest-stored entry,
// and the ancestor walk that turns a stored block into its request's pages.
//
// Thread safety: none; one thread (the tracker's).
#ifndef KVWATCH_COLLECTORS_KV_CHAIN_INDEX_H_
#define KVWATCH_COLLECTORS_KV_CHAIN_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "curve/page_map.h"
#include "curve/request.h"

namespace kvwatch::collectors {

// Block hash -> (parent hash, scoped page id), with insertion order for the
// bounded eviction described in kv_event_tracker.h ("Parent map"). Public for tests.
class KvChainIndex {
 public:
  enum class WalkEnd {
    kRoot,     // reached a block with no parent
    kUnknown,  // reached a hash that is not in the map (chain truncated)
    kCycle,    // a hash came back (hash collision or hostile input)
    kTooLong,  // max_pages reached
  };

  explicit KvChainIndex(std::size_t max_entries);

  // Inserts or updates hash's entry; an update makes it the newest. Returns
  // true when an older entry had to be evicted to stay within the bound.
  bool Put(std::uint64_t hash, std::optional<std::uint64_t> parent, std::uint64_t page);
  void Erase(std::uint64_t hash);
  void Clear();
  bool Contains(std::uint64_t hash) const { return index_.Find(hash) != nullptr; }
  std::size_t size() const { return index_.size(); }
  std::size_t max_entries() const { return max_entries_; }

  // Appends the page ids of start and its ancestors, root first, to *pages
  // (at most max_pages of them) and says why the walk stopped.
  WalkEnd AppendChain(std::uint64_t start, std::size_t max_pages, std::vector<curve::PageId>* pages);

  std::size_t MemoryBytes() const;

  // Calls fn(hash, parent, page) for every entry, oldest first (the order in
  // which Put calls rebuild the same index, eviction order included).
  template <class Fn>
  void ForEachOldestFirst(Fn&& fn) const {
    for (std::uint32_t slot = oldest_; slot != kNone; slot = links_[slot].next) {
      const Link& l = links_[slot];
      fn(l.hash, l.has_parent ? std::optional<std::uint64_t>(l.parent) : std::nullopt, l.page);
    }
  }

 private:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  struct Link {
    std::uint64_t hash = 0;
    std::uint64_t parent = 0;
    std::uint64_t page = 0;
    std::uint32_t prev = kNone;  // older
    std::uint32_t next = kNone;  // newer
    std::uint32_t mark = 0;      // walk stamp, for cycle detection
    bool has_parent = false;
  };

  void Unlink(std::uint32_t slot);
  void PushNewest(std::uint32_t slot);
  void Release(std::uint32_t slot);

  std::size_t max_entries_;
  curve::PageMap index_;  // hash -> slot in links_
  std::vector<Link> links_;
  std::vector<std::uint32_t> free_;
  std::uint32_t oldest_ = kNone;
  std::uint32_t newest_ = kNone;
  std::uint32_t walk_stamp_ = 0;
  std::vector<std::uint32_t> walk_reverse_;  // scratch: slots of one walk, newest first
};

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_KV_CHAIN_INDEX_H_
