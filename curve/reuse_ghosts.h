// Workload-aware eviction's bookkeeping, used by its order in the policy core
// (curve/policy_core_keyed.cc):
//   ReuseStats  per category, the references, the reuses and the sum of their
//               intervals, and the score that ranks a category's oldest block;
//   GhostList   the last `limit` blocks evicted with the reference time and
//               category they had, so that a reuse after eviction is seen too.
//
// GhostList keeps an endless FIFO whose front has id base_; a page's live ghost is
// the entry its map names (the map holds ids mod 2^32). Evicting a page again
// appends a new entry and leaves the old one stale; stale entries are dropped when
// the FIFO grows past twice the limit.
//
// Thread safety: none (value types).
#ifndef KVWATCH_CURVE_REUSE_GHOSTS_H_
#define KVWATCH_CURVE_REUSE_GHOSTS_H_

#include <cmath>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "curve/page_map.h"
#include "curve/request.h"

namespace kvwatch::curve {

struct ReuseStats {
  std::uint64_t references = 0;
  std::uint64_t reuses = 0;
  double interval_sum = 0;

  // A block of this category referenced again `interval` request ticks after its
  // previous reference.
  void Observe(double interval) {
    ++reuses;
    interval_sum += interval;
  }
  // log(p) - age / mu for a block `age` ticks after its last reference: p the
  // category's reuse probability, mu its mean reuse interval (each with a prior of
  // one). The lowest score is evicted first.
  double Score(double age) const {
    const double p = (static_cast<double>(reuses) + 1) / (static_cast<double>(references) + 2);
    const double mu = (interval_sum + 1) / (static_cast<double>(reuses) + 1);
    return std::log(p) - age / mu;
  }
};

class GhostList {
 public:
  struct Ghost {
    PageId page = 0;
    std::uint64_t last = 0;  // the clock at its last reference
    std::uint32_t category = 0;
  };

  explicit GhostList(std::uint64_t limit) : limit_(limit) {}

  // Remembers an evicted page (replacing its older ghost); the oldest ghosts
  // beyond the limit are forgotten.
  void Add(const Ghost& ghost) {
    fifo_.push_back(Entry{ghost, base_ + fifo_.size()});
    const auto id = static_cast<std::uint32_t>(fifo_.back().id);
    if (std::uint32_t* g = map_.Find(ghost.page)) {
      *g = id;
    } else {
      map_.Insert(ghost.page, id);
    }
    while (map_.size() > limit_) {
      const Entry& old = fifo_.front();
      if (Live(old)) map_.Erase(old.ghost.page);
      fifo_.pop_front();
      ++base_;
    }
    if (fifo_.size() > 2 * limit_ + 16) Compact();
  }

  // The page's ghost, forgotten; nullopt when the page is none.
  std::optional<Ghost> Take(PageId page) {
    const std::uint32_t* g = map_.Find(page);
    if (g == nullptr) return std::nullopt;
    const Ghost ghost = fifo_[static_cast<std::uint32_t>(*g - static_cast<std::uint32_t>(base_))].ghost;
    map_.Erase(page);
    return ghost;
  }

  bool Contains(PageId page) const { return map_.Find(page) != nullptr; }
  std::uint64_t size() const { return map_.size(); }  // live ghosts

  // The live ghosts, oldest first.
  template <typename F>
  void ForEach(F f) const {
    for (const Entry& e : fifo_) {
      if (Live(e)) f(e.ghost);
    }
  }

  void Reserve(std::uint64_t n) { map_.Reserve(n); }
  std::size_t MemoryBytes() const { return map_.MemoryBytes() + fifo_.size() * sizeof(Entry); }

 private:
  struct Entry {
    Ghost ghost;
    std::uint64_t id;  // matches map_ while this is the page's live ghost
  };

  bool Live(const Entry& e) const {
    const std::uint32_t* id = map_.Find(e.ghost.page);
    return id != nullptr && *id == static_cast<std::uint32_t>(e.id);
  }

  // Drops the stale entries, renumbering the live ones.
  void Compact() {
    std::deque<Entry> kept;
    for (const Entry& e : fifo_) {
      if (!Live(e)) continue;
      kept.push_back(e);
      kept.back().id = base_ + kept.size() - 1;
      *map_.Find(e.ghost.page) = static_cast<std::uint32_t>(kept.back().id);
    }
    fifo_ = std::move(kept);
  }

  std::uint64_t limit_;
  std::deque<Entry> fifo_;
  std::uint64_t base_ = 0;
  PageMap map_;
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_REUSE_GHOSTS_H_
