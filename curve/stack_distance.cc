#include "curve/stack_distance.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "base/byte_io.h"

namespace kvwatch::curve {
namespace {

constexpr std::uint32_t kMinSlots = 4096;  // a multiple of 64
constexpr std::uint32_t kBlockBits = 64;

std::uint64_t RoundUpToBlock(std::uint64_t n) { return (n + kBlockBits - 1) / kBlockBits * kBlockBits; }

}  // namespace

std::uint32_t RequiredHits(double share, std::uint32_t unlimited_hits) {
  const double exact = share * static_cast<double>(unlimited_hits);
  auto k = static_cast<std::uint64_t>(std::ceil(exact - 1e-9 * std::max(1.0, exact)));
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(k, unlimited_hits));
}

std::uint32_t RequestOutcome::Requirement(double share) const {
  const std::uint32_t k = RequiredHits(share, unlimited_hits);
  if (k == 0) return 0;
  const std::uint32_t m = prefix_max[k - 1];
  return m >= kBeyondTracked ? kBeyondTracked : m + 1;
}

StackDistanceEngine::StackDistanceEngine(const EngineOptions& options)
    : options_(options),
      near_(options.page_layout == PageMapLayout::kRuns),
      map_(options.page_layout),
      evicted_young_(options.page_layout),
      evicted_old_(options.page_layout) {
  ConfigureGroups();
  Resize(kMinSlots);
}

void StackDistanceEngine::ConfigureGroups() {
  total_groups_ = 0;
  group_offset_.clear();
  for (std::uint32_t g : options_.group_dimensions) {
    group_offset_.push_back(total_groups_);
    total_groups_ += std::clamp<std::uint32_t>(g, 1, 255);
  }
  group_live_.assign(total_groups_, 0);
  no_groups_.assign(options_.group_dimensions.size(), 0);
  owner_.clear();
  group_fenwick_.clear();
}

void StackDistanceEngine::Clear() {
  std::fill(live_bits_.begin(), live_bits_.end(), 0);
  std::fill(group_live_.begin(), group_live_.end(), 0);
  map_.Clear();
  evicted_young_.Clear();
  evicted_old_.Clear();
  live_ = 0;
  next_slot_ = 0;
  oldest_hint_ = 0;
  evicted_pages_ = 0;
  slot_pages_ = false;
  Resize(kMinSlots);
}

void StackDistanceEngine::Reserve(std::uint64_t pages) {
  pages = std::min<std::uint64_t>(pages, options_.max_pages);
  map_.Reserve(pages);
  // Compact() sizes the slots to SlotsFor the live pages; start there.
  const std::uint64_t slots = SlotsFor(pages);
  if (slots > slots_ && slots < kNoSlot) {
    live_bits_.resize(slots / kBlockBits, 0);
    Resize(static_cast<std::uint32_t>(slots));
  }
}

std::size_t StackDistanceEngine::MemoryBytes() const {
  return map_.MemoryBytes() + evicted_young_.MemoryBytes() + evicted_old_.MemoryBytes() +
         slot_page_.capacity() * sizeof(PageId) + live_bits_.capacity() * sizeof(std::uint64_t) +
         fenwick_.capacity() * sizeof(std::int32_t) + entries_.capacity() * sizeof(std::uint32_t*) + owner_.capacity() +
         group_fenwick_.capacity() * sizeof(std::int32_t);
}

// --- Fenwick tree over 64-slot blocks, and the live-slot bitmap -------------------

void StackDistanceEngine::SetLive(std::uint32_t slot) {
  live_bits_[slot / kBlockBits] |= 1ULL << (slot % kBlockBits);
  const std::size_t n = fenwick_.size();
  for (std::size_t i = slot / kBlockBits + 1; i < n; i += i & (~i + 1)) ++fenwick_[i];
}

void StackDistanceEngine::ClearLive(std::uint32_t slot) {
  live_bits_[slot / kBlockBits] &= ~(1ULL << (slot % kBlockBits));
  const std::size_t n = fenwick_.size();
  for (std::size_t i = slot / kBlockBits + 1; i < n; i += i & (~i + 1)) --fenwick_[i];
}

// ClearLive(from) then SetLive(to). The two update paths of
// the Fenwick tree meet at a common ancestor, above which -1 and +1 cancel; that
// ancestor is computed first, so each path is a plain loop of its own (no
// data-dependent branch between them: walking them in step mispredicted). A page
// referenced again soon lives in a nearby block, so both walks are usually short.
//
// Node k with lowest set bit 2^t covers blocks (k - 2^t, k], that is the 0-based
// blocks b with b >> t == k / 2^t - 1, an even number. The ancestor is the first
// node covering both blocks: the smallest t with bf >> t == bt >> t and that
// value even, k = ((bf >> t) + 1) << t.
inline void StackDistanceEngine::MoveLive(std::uint32_t from, std::uint32_t to) {
  const std::uint32_t bf = from / kBlockBits, bt = to / kBlockBits;
  live_bits_[bf] &= ~(1ULL << (from % kBlockBits));
  live_bits_[bt] |= 1ULL << (to % kBlockBits);
  MoveCounts(bf, bt, 1);
}

// The tree's part of moving `count` live slots from block bf to block bt.
inline void StackDistanceEngine::MoveCounts(std::uint32_t bf, std::uint32_t bt, std::int32_t count) {
  if (bf == bt) return;
  const std::uint64_t a = bf;
  int t = std::bit_width(a ^ bt);
  t += std::countr_one(a >> t);
  const std::size_t meet = static_cast<std::size_t>((a >> t) + 1) << t;
  const std::size_t end = std::min(meet, fenwick_.size());
  std::int32_t* const tree = fenwick_.data();
  for (std::size_t i = std::size_t{bf} + 1; i < end; i += i & (~i + 1)) tree[i] -= count;
  for (std::size_t j = std::size_t{bt} + 1; j < end; j += j & (~j + 1)) tree[j] += count;
}

inline std::uint32_t StackDistanceEngine::LiveBetween(std::uint32_t lo, std::uint32_t hi) const {
  const std::uint32_t first = lo + 1;
  const std::uint32_t wa = first / kBlockBits, wb = hi / kBlockBits;
  const std::uint64_t from_first = ~0ULL << (first % kBlockBits);
  const std::uint64_t to_hi = hi % kBlockBits == 63 ? ~0ULL : (2ULL << (hi % kBlockBits)) - 1;
  if (wa == wb) return static_cast<std::uint32_t>(std::popcount(live_bits_[wa] & from_first & to_hi));
  std::uint32_t n = static_cast<std::uint32_t>(std::popcount(live_bits_[wa] & from_first));
  for (std::uint32_t w = wa + 1; w < wb; ++w) n += static_cast<std::uint32_t>(std::popcount(live_bits_[w]));
  return n + static_cast<std::uint32_t>(std::popcount(live_bits_[wb] & to_hi));
}

// Number of live slots newer than slot (slot itself is live).
std::uint32_t StackDistanceEngine::Distance(std::uint32_t slot) const {
  const std::uint32_t block = slot / kBlockBits;
  const std::uint32_t bit = slot % kBlockBits;
  std::int64_t at_or_before = 0;  // live slots in [0, slot]
  for (std::uint32_t i = block; i > 0; i &= i - 1) at_or_before += fenwick_[i];
  const std::uint64_t mask = bit == 63 ? ~0ULL : (2ULL << bit) - 1;
  at_or_before += std::popcount(live_bits_[block] & mask);
  return live_ - static_cast<std::uint32_t>(at_or_before);
}

// Sizes the slot arrays for `slots` slots. REQUIRES: no live slot at or beyond
// `slots` (callers compact first). Arrays shrink only when they would use less
// than half their allocation, so steady streams do not reallocate.
void StackDistanceEngine::Resize(std::uint32_t slots) {
  auto fit = [](auto& v, std::size_t n) {
    v.resize(n);
    if (v.capacity() > 2 * n) v.shrink_to_fit();
  };
  slots_ = slots;
  if (slot_pages_) {
    fit(slot_page_, slots);
  } else {
    std::vector<PageId>().swap(slot_page_);
  }
  fit(live_bits_, slots / kBlockBits);
  // Rebuild the Fenwick tree in O(blocks) from the block popcounts.
  fit(fenwick_, slots / kBlockBits + 1);
  std::fill(fenwick_.begin(), fenwick_.end(), 0);
  for (std::size_t i = 1; i < fenwick_.size(); ++i) {
    fenwick_[i] += std::popcount(live_bits_[i - 1]);
    const std::size_t parent = i + (i & (~i + 1));
    if (parent < fenwick_.size()) fenwick_[parent] += fenwick_[i];
  }
  if (total_groups_ != 0) {
    fit(owner_, static_cast<std::size_t>(slots) * options_.group_dimensions.size());
    fit(group_fenwick_, fenwick_.size() * total_groups_);
    GroupRebuild();
  }
}

// --- Group decomposition ----------------------------------------------------------
//
// One Fenwick tree over the same 64-slot blocks, with total_groups_ counters per
// node (all dimensions side by side, so one walk updates every dimension). The
// in-block part of a query reads the owners of the block's live slots.

void StackDistanceEngine::GroupRebuild() {
  const std::size_t dims = options_.group_dimensions.size();
  const std::size_t t = total_groups_;
  std::fill(group_fenwick_.begin(), group_fenwick_.end(), 0);
  const std::size_t nodes = fenwick_.size();
  for (std::size_t i = 1; i < nodes; ++i) {
    std::int32_t* node = &group_fenwick_[i * t];
    for (std::uint64_t bits = live_bits_[i - 1]; bits != 0; bits &= bits - 1) {
      const std::size_t slot = (i - 1) * kBlockBits + std::countr_zero(bits);
      for (std::size_t d = 0; d < dims; ++d) ++node[group_offset_[d] + owner_[slot * dims + d]];
    }
    const std::size_t parent = i + (i & (~i + 1));
    if (parent < nodes) {
      for (std::size_t k = 0; k < t; ++k) group_fenwick_[parent * t + k] += node[k];
    }
  }
}

// The slot `from` (kNoSlot: none) stops being live and `to` becomes live, owned
// by new_owner.
void StackDistanceEngine::GroupMove(std::uint32_t from, std::uint32_t to, const std::uint8_t* new_owner) {
  const std::size_t dims = options_.group_dimensions.size();
  const std::size_t t = total_groups_;
  const std::size_t n = fenwick_.size();
  if (new_owner == nullptr) new_owner = no_groups_.data();
  if (from == kNoSlot || dims > kMaxFastDims) {
    if (from != kNoSlot) GroupClear(from);
    for (std::size_t d = 0; d < dims; ++d) {
      owner_[static_cast<std::size_t>(to) * dims + d] = new_owner[d];
      ++group_live_[group_offset_[d] + new_owner[d]];
    }
    for (std::size_t i = to / kBlockBits + 1; i < n; i += i & (~i + 1)) {
      for (std::size_t d = 0; d < dims; ++d) ++group_fenwick_[i * t + group_offset_[d] + new_owner[d]];
    }
    return;
  }
  // Plain loops over the owners (std::copy_n of a few bytes is a call to memmove).
  std::uint8_t old_owner[kMaxFastDims];
  for (std::size_t d = 0; d < dims; ++d) {
    old_owner[d] = owner_[static_cast<std::size_t>(from) * dims + d];
    owner_[static_cast<std::size_t>(to) * dims + d] = new_owner[d];
  }
  GroupMoveCounts(from / kBlockBits, to / kBlockBits, old_owner, new_owner, 1);
}

// The group counters' part of moving `count` live slots owned by old_owner from
// block bf to block bt, where new_owner owns them (at most kMaxFastDims
// dimensions; the owners themselves are the caller's). As in MoveLive, the two
// update paths are walked together until they meet; from their common ancestor
// up only the dimensions whose owner changed move a count (none when the pages'
// groups are unchanged).
void StackDistanceEngine::GroupMoveCounts(std::uint32_t bf, std::uint32_t bt, const std::uint8_t* old_owner,
                                          const std::uint8_t* new_owner, std::int32_t count) {
  const std::size_t dims = options_.group_dimensions.size();
  const std::size_t t = total_groups_;
  const std::size_t n = fenwick_.size();
  // Counter indices of the old and new owners, and the dimensions that changed.
  std::size_t old_k[kMaxFastDims], new_k[kMaxFastDims], changed[kMaxFastDims];
  std::size_t changes = 0;
  for (std::size_t d = 0; d < dims; ++d) {
    old_k[d] = group_offset_[d] + old_owner[d];
    new_k[d] = group_offset_[d] + new_owner[d];
    if (old_k[d] != new_k[d]) {
      group_live_[old_k[d]] -= count;
      group_live_[new_k[d]] += count;
      changed[changes++] = d;
    }
  }
  std::size_t i = std::size_t{bf} + 1, j = std::size_t{bt} + 1;
  while (i != j) {
    if (i < j) {
      if (i >= n) return;
      for (std::size_t d = 0; d < dims; ++d) group_fenwick_[i * t + old_k[d]] -= count;
      i += i & (~i + 1);
    } else {
      if (j >= n) return;
      for (std::size_t d = 0; d < dims; ++d) group_fenwick_[j * t + new_k[d]] += count;
      j += j & (~j + 1);
    }
  }
  if (changes == 0) return;
  for (; i < n; i += i & (~i + 1)) {
    for (std::size_t c = 0; c < changes; ++c) {
      group_fenwick_[i * t + old_k[changed[c]]] -= count;
      group_fenwick_[i * t + new_k[changed[c]]] += count;
    }
  }
}

void StackDistanceEngine::GroupClear(std::uint32_t slot) {
  const std::size_t dims = options_.group_dimensions.size();
  const std::size_t t = total_groups_;
  const std::size_t n = fenwick_.size();
  const std::uint8_t* old = &owner_[static_cast<std::size_t>(slot) * dims];
  for (std::size_t d = 0; d < dims; ++d) --group_live_[group_offset_[d] + old[d]];
  for (std::size_t i = slot / kBlockBits + 1; i < n; i += i & (~i + 1)) {
    for (std::size_t d = 0; d < dims; ++d) --group_fenwick_[i * t + group_offset_[d] + old[d]];
  }
}

void StackDistanceEngine::PrefetchGroups(std::uint32_t slot) const {
  const std::size_t dims = options_.group_dimensions.size();
  // The block's owners (read by GroupDistance), the slot's among them.
  const std::size_t first = static_cast<std::size_t>(slot / kBlockBits) * kBlockBits * dims;
  __builtin_prefetch(&owner_[first]);
  __builtin_prefetch(&owner_[static_cast<std::size_t>(slot) * dims]);
  __builtin_prefetch(&owner_[first + kBlockBits * dims - 1]);
  // The low nodes of the query path (block down) and of the update path (block
  // + 1 up) of the group tree: the high ones are shared by most walks and cached.
  const std::size_t t = total_groups_;
  auto fetch = [&](std::size_t i) {
    const std::int32_t* node = &group_fenwick_[i * t];
    for (std::size_t k = 0; k < t; k += 64 / sizeof(std::int32_t)) __builtin_prefetch(node + k);
    __builtin_prefetch(node + t - 1);
  };
  const std::size_t block = slot / kBlockBits;
  const std::size_t n = fenwick_.size();
  std::size_t i = block, j = block + 1;
  for (int level = 0; level < kPrefetchNodes; ++level) {
    if (i > 0) fetch(i), i &= i - 1;
    if (j < n) fetch(j), j += j & (~j + 1);
  }
}

// d_g of the live slot `slot`, for every counter, into out[0 .. total_groups_).
// d_g = live pages of g - those in the blocks before slot's block - those of its
// block at or before slot; or, when that is cheaper (fewer live slots above slot
// in its block), live - those in the blocks up to and including slot's block +
// those of its block above slot.
void StackDistanceEngine::GroupDistance(std::uint32_t slot, std::uint32_t* out) const {
  const std::size_t dims = options_.group_dimensions.size();
  const std::size_t t = total_groups_;
  const std::uint32_t block = slot / kBlockBits;
  const std::uint32_t bit = slot % kBlockBits;
  const std::uint64_t mask = bit == 63 ? ~0ULL : (2ULL << bit) - 1;
  const std::uint64_t at_or_below = live_bits_[block] & mask;
  const std::uint64_t above = live_bits_[block] & ~mask;
  // Cost in counter updates: t per tree node, dims per slot read (indirect: x2).
  const std::size_t below_cost =
      std::popcount(block) * t + static_cast<std::size_t>(std::popcount(at_or_below)) * dims * 2;
  const std::size_t above_cost =
      std::popcount(block + 1) * t + static_cast<std::size_t>(std::popcount(above)) * dims * 2;
  const bool from_above = above_cost < below_cost;
  for (std::size_t k = 0; k < t; ++k) out[k] = static_cast<std::uint32_t>(group_live_[k]);
  for (std::uint32_t i = from_above ? block + 1 : block; i > 0; i &= i - 1) {
    for (std::size_t k = 0; k < t; ++k) out[k] -= group_fenwick_[i * t + k];
  }
  const std::uint8_t* owners = &owner_[static_cast<std::size_t>(block) * kBlockBits * dims];
  if (from_above) {
    for (std::uint64_t bits = above; bits != 0; bits &= bits - 1) {
      const std::uint8_t* o = owners + std::countr_zero(bits) * dims;
      for (std::size_t d = 0; d < dims; ++d) ++out[group_offset_[d] + o[d]];
    }
  } else {
    for (std::uint64_t bits = at_or_below; bits != 0; bits &= bits - 1) {
      const std::uint8_t* o = owners + std::countr_zero(bits) * dims;
      for (std::size_t d = 0; d < dims; ++d) --out[group_offset_[d] + o[d]];
    }
  }
}

// Turns the decomposition of live slot `from` into that of the OLDER live slot
// `to` (to < from): d_g counts the live slots strictly newer, so it gains the
// live slots in (to, from]. (Tail-first chains: each setter is the slot just
// below the previous one.)
void StackDistanceEngine::GroupShift(std::uint32_t from, std::uint32_t to, std::uint32_t* out) const {
  const std::size_t dims = options_.group_dimensions.size();
  for (std::uint32_t s = to + 1; s <= from; ++s) {
    if ((live_bits_[s / kBlockBits] >> (s % kBlockBits) & 1) == 0) continue;
    for (std::size_t d = 0; d < dims; ++d) ++out[group_offset_[d] + owner_[static_cast<std::size_t>(s) * dims + d]];
  }
}

bool StackDistanceEngine::DistanceByGroup(PageId page, std::span<std::uint32_t> out) const {
  if (total_groups_ == 0 || out.size() < total_groups_) return false;
  const std::uint32_t* slot = map_.Find(page);
  if (slot == nullptr) return false;
  GroupDistance(*slot, out.data());
  return true;
}

// Renumbers the live slots 0..live-1 in recency order and resizes to SlotsFor the
// live count (three or eight times it), so the arrays stay proportional to the
// tracked pages. Amortized O(1)
// per reference: at least 2 * `live` new references happen between compactions. Works
// in place: a live slot's new number is never above its old one.
void StackDistanceEngine::Compact() {
  // New index of a live slot = live slots before it: a running count per word.
  std::vector<std::uint32_t> word_base(live_bits_.size());
  std::uint32_t running = 0;
  for (std::size_t w = 0; w < live_bits_.size(); ++w) {
    word_base[w] = running;
    running += std::popcount(live_bits_[w]);
  }
  auto renumber = [&](std::uint32_t slot) {
    const std::uint64_t below = (1ULL << (slot % kBlockBits)) - 1;
    return word_base[slot / kBlockBits] +
           static_cast<std::uint32_t>(std::popcount(live_bits_[slot / kBlockBits] & below));
  };
  map_.ForEach([&](std::uint64_t, std::uint32_t& slot) { slot = renumber(slot); });
  std::uint32_t next = 0;
  for (std::uint32_t w = 0; w < live_bits_.size(); ++w) {
    for (std::uint64_t bits = live_bits_[w]; bits != 0; bits &= bits - 1) {
      const std::uint32_t from = w * kBlockBits + std::countr_zero(bits);
      if (total_groups_ != 0) {
        const std::size_t dims = options_.group_dimensions.size();
        for (std::size_t d = 0; d < dims; ++d) owner_[next * dims + d] = owner_[from * dims + d];  // next <= from
      }
      if (slot_pages_) slot_page_[next] = slot_page_[from];
      ++next;
    }
  }
  const std::uint32_t new_slots = SlotsFor(live_);
  std::fill(live_bits_.begin(), live_bits_.end(), 0);
  live_bits_.resize(std::max<std::size_t>(live_bits_.size(), new_slots / kBlockBits), 0);
  for (std::uint32_t w = 0; w < live_ / kBlockBits; ++w) live_bits_[w] = ~0ULL;
  if (live_ % kBlockBits != 0) live_bits_[live_ / kBlockBits] = (1ULL << (live_ % kBlockBits)) - 1;
  next_slot_ = live_;
  oldest_hint_ = 0;
  Resize(new_slots);
}

// --- Eviction memory (beyond tracked versus cold) ----------------------------------

bool StackDistanceEngine::WasEvicted(PageId page) const {
  return evicted_young_.Find(page) != nullptr || evicted_old_.Find(page) != nullptr;
}

void StackDistanceEngine::ForgetEviction(PageId page) {
  if (evicted_young_.size() != 0) evicted_young_.Erase(page);
  if (evicted_old_.size() != 0) evicted_old_.Erase(page);
}

void StackDistanceEngine::RememberEviction(PageId page) {
  const std::uint64_t limit = options_.remembered_evictions;
  if (limit != 0 && evicted_young_.size() >= limit) {
    std::swap(evicted_old_, evicted_young_);
    evicted_young_.Clear();
  }
  evicted_young_.Insert(page, 0);
}

// Compacts (slots sized for a slot -> page array from now on) and fills
// slot_page_ from the map: from here on every reference keeps it up to date.
void StackDistanceEngine::KeepSlotPages() {
  Compact();
  slot_pages_ = true;
  Resize(SlotsFor(live_));  // the live slots are 0..live-1 after compaction
  map_.ForEach([&](std::uint64_t page, std::uint32_t& slot) { slot_page_[slot] = page; });
}

std::uint32_t StackDistanceEngine::SlotsFor(std::uint64_t pages) const {
  // 8 bytes of slot_page_ per slot, or (1 + total groups / 16) bytes of group
  // tree and owners: three slots per page. Otherwise a slot costs about 1/6 of a
  // byte (its bit and its share of the tree): eight slots per page, so that a
  // compaction comes after seven times the live pages' references instead of two.
  const std::uint64_t per_page = slot_pages_ || total_groups_ != 0 ? 3 : 8;
  constexpr std::uint64_t kMostSlots = (std::uint64_t{kNoSlot} - 1) / kBlockBits * kBlockBits;
  const std::uint64_t wanted = RoundUpToBlock(per_page * pages + kBlockBits);
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(wanted, kMinSlots, kMostSlots));
}

void StackDistanceEngine::EvictOldest() {
  std::uint32_t w = oldest_hint_ / kBlockBits;
  while (live_bits_[w] == 0) ++w;
  const std::uint32_t slot = w * kBlockBits + std::countr_zero(live_bits_[w]);
  oldest_hint_ = slot + 1;
  const PageId page = slot_page_[slot];
  if (total_groups_ != 0) GroupClear(slot);
  ClearLive(slot);
  map_.Erase(page);
  --live_;
  ++evicted_pages_;
  RememberEviction(page);
}

bool StackDistanceEngine::Forget(PageId page) {
  ForgetEviction(page);
  const std::uint32_t* slot = map_.Find(page);
  if (slot == nullptr) return false;
  if (total_groups_ != 0) GroupClear(*slot);
  ClearLive(*slot);  // a cleared slot keeps "no live slot below oldest_hint_" true
  map_.Erase(page);
  --live_;
  return true;
}

// --- References ---------------------------------------------------------------------

// References page once: it becomes the most recently used.
void StackDistanceEngine::Touch(PageId page, std::uint32_t* current) {
  if (current == nullptr) current = map_.Find(page);
  // The first eviction needs the page of the oldest slot: keep slot -> page from now on.
  if (current == nullptr && live_ >= options_.max_pages && !slot_pages_) KeepSlotPages();
  if (next_slot_ == slots_) Compact();  // changes values, moves no map entry
  const std::uint32_t slot = next_slot_++;
  if (slot_pages_) slot_page_[slot] = page;
  if (current != nullptr) {
    if (total_groups_ != 0) GroupMove(*current, slot, current_groups_);
    MoveLive(*current, slot);
    *current = slot;
    return;
  }
  if (live_ >= options_.max_pages) EvictOldest();
  ForgetEviction(page);
  map_.Insert(page, slot);
  ++live_;
  if (total_groups_ != 0) GroupMove(kNoSlot, slot, current_groups_);
  SetLive(slot);
}

void StackDistanceEngine::Process(std::span<const PageId> pages, RequestOutcome* out) {
  if (total_groups_ != 0) {
    Process(pages, no_groups_, out);
    return;
  }
  ProcessImpl(pages, out);
}

void StackDistanceEngine::Process(std::span<const PageId> pages, std::span<const std::uint8_t> groups,
                                  RequestOutcome* out) {
  if (total_groups_ == 0) {
    ProcessImpl(pages, out);
    return;
  }
  out->decomposed.clear();
  out->group_distance.clear();
  // Out-of-range groups are clamped so the counters stay consistent.
  std::uint8_t clamped[8];
  const std::size_t dims = options_.group_dimensions.size();
  std::vector<std::uint8_t> wide;
  std::uint8_t* g = clamped;
  if (dims > sizeof(clamped)) {
    wide.resize(dims);
    g = wide.data();
  }
  for (std::size_t d = 0; d < dims; ++d) {
    const std::uint32_t limit =
        group_offset_.size() > d + 1 ? group_offset_[d + 1] - group_offset_[d] : total_groups_ - group_offset_[d];
    g[d] = d < groups.size() ? static_cast<std::uint8_t>(std::min<std::uint32_t>(groups[d], limit - 1)) : 0;
  }
  current_groups_ = g;
  ProcessImpl(pages, out);
  current_groups_ = nullptr;
}

void StackDistanceEngine::ProcessImpl(std::span<const PageId> pages, RequestOutcome* out) {
  const std::size_t n = pages.size();
  out->distance.resize(n);
  out->prefix_max.resize(n);
  out->cold_misses = 0;
  out->beyond_tracked = 0;
  out->unlimited_hits = 0;
  if (n == 0) return;

  // Map entries are prefetched a fixed distance ahead of the lookups: a long
  // request prefetched all at once overflows the CPU's outstanding misses.
  Prefetch(pages);
  entries_.resize(n);

  // Arrival state: every distance is read before any page of r is referenced.
  const bool remembers = evicted_young_.size() != 0 || evicted_old_.size() != 0;
  std::uint32_t running_max = 0;
  std::uint32_t last_decomposed = kNoSlot;  // slot of the previous setter decomposed
  // The last tracked page's slot and distance: nothing moves during this pass, so
  // a page whose slot is close to it is at that distance plus or minus the live
  // slots between them (the pages of an earlier request sit in neighbouring
  // slots), a few bitmap words instead of a walk down the tree.
  std::uint32_t near_slot = kNoSlot, near_distance = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kPrefetchAhead < n) {
      // With the runs layout a page in the same run as the one before it is found
      // beside it (FindNear); a run's first page is found near its home or a few
      // probes past it (when another run took the home).
      const std::size_t j = i + kPrefetchAhead;
      if (!near_) {
        map_.Prefetch(pages[j]);
      } else if (pages[j] >> PageMap::kRunBits != pages[j - 1] >> PageMap::kRunBits) {
        map_.Prefetch(pages[j], kRunPrefetchLines);
      }
    }
    std::uint32_t d;
    // A request's pages often come in runs of consecutive ids: with the runs
    // layout the previous page's entry is usually next to this one's (on the
    // weka trace, about 5 lookups in 6 end there).
    std::uint32_t* slot = i == 0 || !near_ ? map_.Find(pages[i]) : map_.FindNear(pages[i], entries_[i - 1]);
    entries_[i] = slot;
    if (slot != nullptr) {
      const std::uint32_t s = *slot;
      if (near_slot == kNoSlot) {
        d = Distance(s);
      } else if (s < near_slot) {
        d = near_slot - s <= kNearDistanceSlots ? near_distance + LiveBetween(s, near_slot) : Distance(s);
      } else if (s > near_slot) {
        d = s - near_slot <= kNearDistanceSlots ? near_distance - LiveBetween(near_slot, s) : Distance(s);
      } else {
        d = near_distance;  // the same page again
      }
      near_slot = s;
      near_distance = d;
      // A far page's owners and group tree nodes are cold, and read soon (by the
      // decomposition of a setter, and when the page moves): fetch them together.
      if (total_groups_ != 0 && d >= options_.decompose_from) PrefetchGroups(*slot);
    } else if (remembers && WasEvicted(pages[i])) {
      d = kBeyondTracked;
      ++out->beyond_tracked;
    } else {
      d = kCold;
      ++out->cold_misses;
    }
    out->distance[i] = d;
    if (current_groups_ != nullptr && d < kBeyondTracked && d >= options_.decompose_from &&
        (i == 0 || d > running_max)) {
      out->decomposed.push_back(static_cast<std::uint32_t>(i));
      const std::size_t at = out->group_distance.size();
      out->group_distance.resize(at + total_groups_);
      // The pages of a chain sit in neighbouring slots: derive the decomposition
      // from the previous setter's by the few slots between them when close.
      if (last_decomposed != kNoSlot && *slot < last_decomposed && last_decomposed - *slot <= kNearSlots) {
        std::copy_n(&out->group_distance[at - total_groups_], total_groups_, &out->group_distance[at]);
        GroupShift(last_decomposed, *slot, &out->group_distance[at]);
      } else {
        GroupDistance(*slot, &out->group_distance[at]);
      }
      last_decomposed = *slot;
    }
    running_max = std::max(running_max, d);
    out->prefix_max[i] = running_max;
    if (running_max != kCold) ++out->unlimited_hits;
  }

  // The entries found above stay valid until the map moves entries (growth or
  // eviction); a page not found above may have been inserted by a duplicate.
  const std::uint64_t generation = map_.generation();
  // The common case's tree updates are gathered per pair of blocks: a request's
  // pages leave a few blocks and fill a few consecutive ones, so the tree is
  // walked a few times per request instead of once or twice per page. The bitmap
  // is updated at once; the tree is brought up to date before anything else
  // reads or rebuilds it.
  // With groups the same holds for the group tree, gathered per pair of blocks
  // and the pages' previous owners (the request's own groups are the new ones).
  std::uint32_t moved_from = 0, moved_to = 0;
  std::int32_t moved = 0;  // pages moved from block moved_from to block moved_to, not yet in the tree
  const std::size_t dims = options_.group_dimensions.size();
  const bool group_batches = total_groups_ != 0 && dims <= kMaxFastDims;
  std::uint8_t moved_owner[kMaxFastDims] = {};  // with groups: the moved pages' previous owners
  auto flush = [&] {
    MoveCounts(moved_from, moved_to, moved);
    if (group_batches) GroupMoveCounts(moved_from, moved_to, moved_owner, current_groups_, moved);
    moved = 0;
  };
  auto touch = [&](std::size_t i) {
    std::uint32_t* current = map_.generation() == generation ? entries_[i] : nullptr;
    // The common case inline: a tracked page, a free slot, and no groups or few dimensions.
    if (current != nullptr && next_slot_ != slots_ && (total_groups_ == 0 || group_batches)) {
      const std::uint32_t slot = next_slot_++;
      if (slot_pages_) slot_page_[slot] = pages[i];
      const std::uint32_t from = *current;
      const std::uint32_t bf = from / kBlockBits, bt = slot / kBlockBits;
      live_bits_[bf] &= ~(1ULL << (from % kBlockBits));
      live_bits_[bt] |= 1ULL << (slot % kBlockBits);
      *current = slot;
      if (total_groups_ == 0) {
        if (bf == bt) return;  // the block's count is unchanged
        if (bf != moved_from || bt != moved_to) {
          if (moved != 0) flush();
          moved_from = bf;
          moved_to = bt;
        }
        ++moved;
        return;
      }
      // Plain loops over the owners: std::equal and std::copy_n of a few bytes
      // are calls to memcmp and memmove.
      const std::uint8_t* old_owner = &owner_[static_cast<std::size_t>(from) * dims];
      bool same = bf == moved_from && bt == moved_to;
      for (std::size_t d = 0; same && d < dims; ++d) same = old_owner[d] == moved_owner[d];
      if (!same) {
        if (moved != 0) flush();
        moved_from = bf;
        moved_to = bt;
        for (std::size_t d = 0; d < dims; ++d) moved_owner[d] = old_owner[d];
      }
      std::uint8_t* new_owner = &owner_[static_cast<std::size_t>(slot) * dims];
      for (std::size_t d = 0; d < dims; ++d) new_owner[d] = current_groups_[d];
      ++moved;
      return;
    }
    if (moved != 0) flush();
    Touch(pages[i], current);
  };
  if (options_.touch_order == TouchOrder::kTailFirst) {
    for (std::size_t i = n; i-- > 0;) touch(i);
  } else {
    for (std::size_t i = 0; i < n; ++i) touch(i);
  }
  if (moved != 0) flush();
}

// --- Checkpoints ----------------------------------------------------------------------
//
// Format (little-endian): magic "KVWSDE01", max_pages u32, touch order u8,
// remembered_evictions u64, evicted_pages u64, live count u32, then the live pages
// from least to most recently used (u64 each), then the remembered evicted pages:
// count u64 and ids (young generation first, then old).
// With group decomposition the magic is "KVWSDE02", the header is followed by the
// dimension count u8, the groups of each dimension u32 and decompose_from u32, and
// each live page id by its owner group per dimension (u8 each).

namespace {

constexpr char kMagic[8] = {'K', 'V', 'W', 'S', 'D', 'E', '0', '1'};
constexpr char kGroupMagic[8] = {'K', 'V', 'W', 'S', 'D', 'E', '0', '2'};

}  // namespace

std::vector<std::uint8_t> StackDistanceEngine::Serialize() const {
  const bool groups = total_groups_ != 0;
  const std::size_t dims = options_.group_dimensions.size();
  std::vector<std::uint8_t> out(kMagic, kMagic + sizeof(kMagic));
  if (groups) out[sizeof(kMagic) - 1] = static_cast<std::uint8_t>(kGroupMagic[sizeof(kMagic) - 1]);
  out.reserve(64 + static_cast<std::size_t>(live_) * (8 + dims));
  base::AppendPod<std::uint32_t>(&out, options_.max_pages);
  base::AppendPod<std::uint8_t>(&out, options_.touch_order == TouchOrder::kTailFirst ? 0 : 1);
  base::AppendPod<std::uint64_t>(&out, options_.remembered_evictions);
  base::AppendPod<std::uint64_t>(&out, evicted_pages_);
  base::AppendPod<std::uint32_t>(&out, live_);
  if (groups) {
    base::AppendPod<std::uint8_t>(&out, static_cast<std::uint8_t>(dims));
    for (std::uint32_t g : options_.group_dimensions) base::AppendPod<std::uint32_t>(&out, g);
    base::AppendPod<std::uint32_t>(&out, options_.decompose_from);
  }
  // The live pages in slot order: slot_page_ when kept, else placed by rank from the map.
  std::vector<PageId> by_rank;
  if (!slot_pages_) {
    std::vector<std::uint32_t> word_base(live_bits_.size());
    std::uint32_t running = 0;
    for (std::size_t w = 0; w < live_bits_.size(); ++w) {
      word_base[w] = running;
      running += std::popcount(live_bits_[w]);
    }
    by_rank.resize(live_);
    map_.ForEach([&](std::uint64_t page, std::uint32_t slot) {
      const std::uint64_t below = (1ULL << (slot % kBlockBits)) - 1;
      by_rank[word_base[slot / kBlockBits] + std::popcount(live_bits_[slot / kBlockBits] & below)] = page;
    });
  }
  std::uint32_t rank = 0;
  for (std::uint32_t w = 0; w < live_bits_.size(); ++w) {
    for (std::uint64_t bits = live_bits_[w]; bits != 0; bits &= bits - 1) {
      const std::size_t slot = w * kBlockBits + std::countr_zero(bits);
      base::AppendPod<std::uint64_t>(&out, slot_pages_ ? slot_page_[slot] : by_rank[rank++]);
      for (std::size_t d = 0; groups && d < dims; ++d) base::AppendPod<std::uint8_t>(&out, owner_[slot * dims + d]);
    }
  }
  base::AppendPod<std::uint64_t>(&out, evicted_young_.size() + evicted_old_.size());
  auto put_keys = [&](const PageMap& m) {
    const_cast<PageMap&>(m).ForEach([&](std::uint64_t k, std::uint32_t&) { base::AppendPod(&out, k); });
  };
  put_keys(evicted_young_);
  put_keys(evicted_old_);
  return out;
}

bool StackDistanceEngine::Deserialize(std::span<const std::uint8_t> bytes) {
  Clear();
  std::span<const std::uint8_t> in = bytes;
  char magic[sizeof(kMagic)];
  for (char& c : magic) {
    if (!base::ReadPod(&in, &c)) return false;
  }
  const bool groups = std::memcmp(magic, kGroupMagic, sizeof(kMagic)) == 0;
  if (!groups && std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) return false;
  EngineOptions opts;
  std::uint8_t order = 0;
  std::uint64_t evicted_pages = 0;
  std::uint32_t live = 0;
  if (!base::ReadPod(&in, &opts.max_pages) || !base::ReadPod(&in, &order) ||
      !base::ReadPod(&in, &opts.remembered_evictions) || !base::ReadPod(&in, &evicted_pages) ||
      !base::ReadPod(&in, &live) || order > 1 || opts.max_pages == 0 || opts.max_pages >= kBeyondTracked ||
      live > opts.max_pages) {
    return false;
  }
  opts.touch_order = order == 0 ? TouchOrder::kTailFirst : TouchOrder::kHeadFirst;
  if (groups) {
    std::uint8_t dims = 0;
    if (!base::ReadPod(&in, &dims) || dims == 0) return false;
    for (std::uint8_t d = 0; d < dims; ++d) {
      std::uint32_t g = 0;
      if (!base::ReadPod(&in, &g) || g == 0 || g > 255) return false;
      opts.group_dimensions.push_back(g);
    }
    if (!base::ReadPod(&in, &opts.decompose_from)) return false;
  }
  opts.page_layout = options_.page_layout;  // a property of this process, not of the state
  options_ = opts;
  ConfigureGroups();
  Resize(kMinSlots);
  std::vector<std::uint8_t> owner(options_.group_dimensions.size());
  for (std::uint32_t i = 0; i < live; ++i) {
    PageId page;
    if (!base::ReadPod(&in, &page) || map_.Find(page) != nullptr) {
      Clear();
      return false;
    }
    for (std::size_t d = 0; d < owner.size(); ++d) {
      if (!base::ReadPod(&in, &owner[d]) || owner[d] >= options_.group_dimensions[d]) {
        Clear();
        return false;
      }
    }
    current_groups_ = owner.data();
    Touch(page, nullptr);
    current_groups_ = nullptr;
  }
  std::uint64_t remembered = 0;
  if (!base::ReadPod(&in, &remembered)) {
    Clear();
    return false;
  }
  for (std::uint64_t i = 0; i < remembered; ++i) {
    PageId page;
    if (!base::ReadPod(&in, &page)) {
      Clear();
      return false;
    }
    if (!WasEvicted(page)) RememberEviction(page);
  }
  if (!in.empty()) {
    Clear();
    return false;
  }
  evicted_pages_ = evicted_pages;
  return true;
}

}  // namespace kvwatch::curve
