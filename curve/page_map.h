// PageMap: a flat open-addressing hash map from a 64-bit page id to a 32-bit value,
// built for the stack-distance engine's hot path.
//
// Why not std::unordered_map: it allocates a node per entry (about 40 bytes more per
// tracked page) and costs a pointer chase per lookup; the engine's memory target is
// stated per tracked page, and every page reference does one or two lookups. Entries
// here are 12 bytes, packed, in one array, with linear probing and backward-shift
// deletion (no tombstones), and a load factor kept between 3/8 and 3/4.
//
// The value kEmpty (0xFFFFFFFF) is reserved to mark free entries; any page id,
// including 0 and ~0, is a valid key.
//
// Layout (where a key's probe starts): kMixed mixes every bit of the key, so
// any ids spread evenly. kRuns hashes all but the low kRunBits bits (Fibonacci
// hashing, RunHome) and keeps those, so 2^kRunBits consecutive ids (a run: k, k+1, ... sharing the high
// bits) get consecutive homes, a few entries of one or two cache lines. Trace
// formats that number a request's pages consecutively (the weka and Mooncake
// traces) then cost about one cache miss per run instead of one per page; on
// hashed ids (vLLM, SGLang) the low bits are as random as the rest and the two
// layouts probe alike (docs/performance.md, "The page map's layout").
//
// Thread safety: none; callers serialize.
#ifndef KVWATCH_CURVE_PAGE_MAP_H_
#define KVWATCH_CURVE_PAGE_MAP_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "base/mix.h"

namespace kvwatch::curve {

enum class PageMapLayout : std::uint8_t { kMixed, kRuns };

class PageMap {
 public:
  static constexpr std::uint32_t kEmpty = std::numeric_limits<std::uint32_t>::max();
  // kRuns: ids that differ only in their low kRunBits bits get neighbouring
  // homes, unless the constructor is given another number.
  static constexpr int kRunBits = 3;

  // run_bits (1..16): kRuns's run length, 2^run_bits ids.
  explicit PageMap(PageMapLayout layout = PageMapLayout::kMixed, int run_bits = kRunBits)
      : run_bits_(layout == PageMapLayout::kRuns ? run_bits : 0) {
    Reset(kMinCapacity);
  }
  PageMapLayout layout() const { return run_bits_ == 0 ? PageMapLayout::kMixed : PageMapLayout::kRuns; }

  std::size_t size() const { return size_; }
  // Changes whenever entries may have moved.
  std::uint64_t generation() const { return generation_; }
  std::size_t capacity() const { return entries_.size(); }
  std::size_t MemoryBytes() const { return entries_.capacity() * sizeof(Entry); }

  // Returns a pointer to the value stored for key, or nullptr. The pointer stays
  // valid while generation() is unchanged: insertions that do not grow the table
  // move no entry; growth, shrinking and erasure may.
  //
  // A miss remembers where its probe stopped: an Insert or InsertOrAssign of key
  // that follows, with only lookups and erasures between, puts the entry there
  // without probing again (a cache's miss path is Find, the victim's Erase, then
  // Insert of the same page: in replay's fifo, Insert's probe was 7% of the time).
  std::uint32_t* Find(std::uint64_t key) {
    const std::size_t home = Home(key);
    for (std::size_t i = home;; i = (i + 1) & mask_) {
      Entry& e = entries_[i];
      if (e.value == kEmpty) {
        miss_ = Miss{key, home, i};
        return nullptr;
      }
      if (e.key == key) return &e.value;
    }
  }
  // The same, remembering nothing (so that const lookups stay free of writes).
  const std::uint32_t* Find(std::uint64_t key) const {
    for (std::size_t i = Home(key);; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.value == kEmpty) return nullptr;
      if (e.key == key) return &e.value;
    }
  }

  // Find, trying first the entries either side of `near` (a value pointer Find
  // returned in this generation, for example the previous page's; nullptr: none).
  // In the runs layout a run's consecutive ids sit in neighbouring entries, but
  // when runs collide their entries lie several probes past their homes (about
  // twelve on average on the weka trace): the neighbour test skips that walk.
  std::uint32_t* FindNear(std::uint64_t key, std::uint32_t* near) {
    if (near != nullptr) {
      Entry* e = reinterpret_cast<Entry*>(reinterpret_cast<char*>(near) - offsetof(Entry, value));
      const std::size_t i = static_cast<std::size_t>(e - entries_.data());
      Entry& next = entries_[(i + 1) & mask_];
      if (next.key == key && next.value != kEmpty) return &next.value;
      Entry& prev = entries_[(i - 1) & mask_];
      if (prev.key == key && prev.value != kEmpty) return &prev.value;
    }
    return Find(key);
  }

  // Hints the CPU to fetch the entry key would start probing at, and the
  // `lines` - 1 cache lines after it (in the runs layout a run whose home was
  // taken lies several entries past it).
  void Prefetch(std::uint64_t key, int lines = 1) const {
    const std::size_t home = Home(key);
    __builtin_prefetch(&entries_[home]);
    for (int k = 1; k < lines; ++k) __builtin_prefetch(&entries_[(home + k * (64 / sizeof(Entry))) & mask_]);
  }

  // REQUIRES: key is not present; value != kEmpty.
  void Insert(std::uint64_t key, std::uint32_t value) {
    if ((size_ + 1) * 4 > entries_.size() * 3) Rehash(entries_.size() * 2);
    std::size_t i = miss_.pos;
    if (i == kNoPos || miss_.key != key) {
      for (i = Home(key); entries_[i].value != kEmpty; i = (i + 1) & mask_) {
      }
    }
    Put(i, key, value);
  }

  // Sets key's value, inserting key when it is not present. REQUIRES: value != kEmpty.
  void InsertOrAssign(std::uint64_t key, std::uint32_t value) {
    if ((size_ + 1) * 4 > entries_.size() * 3) Rehash(entries_.size() * 2);
    std::size_t i = miss_.pos;
    if (i == kNoPos || miss_.key != key) {
      for (i = Home(key); entries_[i].value != kEmpty; i = (i + 1) & mask_) {
        if (entries_[i].key == key) {
          entries_[i].value = value;
          return;
        }
      }
    }
    Put(i, key, value);
  }

  // Removes key if present; returns whether it was.
  bool Erase(std::uint64_t key) {
    // The ids of one run share their mixed high bits, and in the runs layout a
    // cluster is mostly whole runs: the backward shift below mixes once per run, not
    // per entry (the policy core erases on every eviction; in replay's fifo profile
    // Home and Mix64 had more samples than Erase itself).
    const std::uint64_t low = (std::uint64_t{1} << run_bits_) - 1;
    std::uint64_t run = key >> run_bits_;
    std::uint64_t run_home = RunHome(run);
    std::size_t i = (run_home | (key & low)) & mask_;
    for (;; i = (i + 1) & mask_) {
      if (entries_[i].value == kEmpty) return false;
      if (entries_[i].key == key) break;
    }
    // Backward-shift deletion: move later entries of the probe run into the hole
    // when their home position allows it, so lookups never need tombstones.
    ++generation_;
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & mask_; entries_[j].value != kEmpty; j = (j + 1) & mask_) {
      const std::uint64_t k = entries_[j].key;
      if ((k >> run_bits_) != run) {
        run = k >> run_bits_;
        run_home = RunHome(run);
      }
      const std::size_t home = (run_home | (k & low)) & mask_;
      // Entry j may move to hole if hole lies cyclically in [home, j).
      if (((j - home) & mask_) >= ((j - hole) & mask_)) {
        entries_[hole] = entries_[j];
        hole = j;
      }
    }
    entries_[hole].value = kEmpty;
    --size_;
    // The remembered miss's probe now stops at the hole if the hole lies on it.
    if (miss_.pos != kNoPos && ((hole - miss_.home) & mask_) < ((miss_.pos - miss_.home) & mask_)) {
      miss_.pos = hole;
    }
    if (entries_.size() > kMinCapacity && size_ * 16 < entries_.size() * 3) {  // load < 3/16
      Rehash(entries_.size() / 2);
    }
    return true;
  }

  // Calls fn(key, value&) for every entry; fn may change the value (not to kEmpty)
  // but must not insert or erase.
  template <class Fn>
  void ForEach(Fn&& fn) {
    for (Entry& e : entries_) {
      if (e.value != kEmpty) fn(static_cast<std::uint64_t>(e.key), e.value);
    }
  }
  // Calls fn(key, value) for every entry (read only).
  template <class Fn>
  void ForEach(Fn&& fn) const {
    for (const Entry& e : entries_) {
      if (e.value != kEmpty) fn(static_cast<std::uint64_t>(e.key), static_cast<std::uint32_t>(e.value));
    }
  }

  // Empties the map (the layout stays).
  void Clear() { Reset(kMinCapacity); }

  // Sizes the table for n entries at once (no-op when it is already large enough).
  void Reserve(std::size_t n) {
    std::size_t cap = entries_.size();
    while (n * 4 > cap * 3) cap *= 2;
    if (cap != entries_.size()) Rehash(cap);
  }

 private:
  static constexpr std::size_t kMinCapacity = 64;
  static constexpr std::size_t kNoPos = std::numeric_limits<std::size_t>::max();

#pragma pack(push, 4)
  struct Entry {
    std::uint64_t key = 0;
    std::uint32_t value = kEmpty;
  };
#pragma pack(pop)
  static_assert(sizeof(Entry) == 12);

  // Page ids are often small sequential integers (Mooncake), which a plain
  // modulo would cluster: mix them first (all the bits, or all but the run's).
  std::size_t Home(std::uint64_t key) const {
    const std::uint64_t low = (std::uint64_t{1} << run_bits_) - 1;
    return (RunHome(key >> run_bits_) | (key & low)) & mask_;
  }
  // The high bits of the home of the run `run` (a key >> run_bits_), before the
  // mask: every key of the run shares them (Erase mixes once per run).
  // kRuns takes the top bits of run times 2^64 / the golden ratio (Fibonacci
  // hashing): one multiply where Mix64 is a chain of two and three shifts, on the
  // critical path of every lookup and erasure; consecutive runs, the traces' case,
  // spread evenly.
  std::uint64_t RunHome(std::uint64_t run) const {
    if (run_bits_ == 0) return base::Mix64(run);
    return ((run * 0x9e3779b97f4a7c15ULL) >> 1 >> run_shift_) << run_bits_;
  }

  // An insertion at entry i (empty), which ends the remembered miss.
  void Put(std::size_t i, std::uint64_t key, std::uint32_t value) {
    entries_[i] = Entry{key, value};
    ++size_;
    miss_.pos = kNoPos;
  }

  void Reset(std::size_t capacity) {
    ++generation_;
    miss_.pos = kNoPos;
    entries_.assign(capacity, Entry{});
    entries_.shrink_to_fit();
    mask_ = capacity - 1;
    // 63 - the bits of a run's home (the table's bits less the run's; all 63 when
    // a run is as large as the table).
    run_shift_ = 63 - std::max(0, std::countr_zero(capacity) - run_bits_);
    size_ = 0;
  }

  void Rehash(std::size_t capacity) {
    std::vector<Entry> old;
    old.swap(entries_);
    Reset(capacity);
    for (const Entry& e : old) {
      if (e.value == kEmpty) continue;
      std::size_t i = Home(e.key);
      while (entries_[i].value != kEmpty) i = (i + 1) & mask_;
      entries_[i] = e;
      ++size_;
    }
  }

  std::vector<Entry> entries_;
  int run_bits_ = 0;   // 0 (kMixed) or the run's bits (kRuns)
  int run_shift_ = 0;  // kRuns: RunHome's shift
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
  std::uint64_t generation_ = 0;
  // The last miss of Find: its key, home and the empty entry its probe stopped at
  // (pos kNoPos: none). Every entry from home to pos is taken, so an Insert of key
  // goes to pos; an erasure keeps that true by moving pos to its hole when the
  // hole lies between (the only entry an erasure empties).
  struct Miss {
    std::uint64_t key = 0;
    std::size_t home = 0;
    std::size_t pos = kNoPos;
  };
  Miss miss_;
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_PAGE_MAP_H_
