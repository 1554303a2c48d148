// The policy core (curve/policy_core.h): slots, holds and the page map; belady's
// oracle; the factory, which reads the registry (curve/policy.cc).
#include "curve/policy_core.h"

#include <algorithm>

#include "base/byte_io.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve {

NextUseOracle::NextUseOracle(std::span<const std::span<const PageId>> requests) {
  ends_.reserve(requests.size());
  std::uint64_t n = 0;
  for (std::span<const PageId> pages : requests) {
    n += pages.size();
    ends_.push_back(n);
  }
  std::vector<std::uint32_t> count;
  for (std::span<const PageId> pages : requests) {
    for (PageId p : pages) {
      if (std::uint32_t* slot = slots_.Find(p)) {
        ++count[*slot];
      } else {
        slots_.Insert(p, static_cast<std::uint32_t>(count.size()));
        count.push_back(1);
      }
    }
  }
  start_.assign(count.size() + 1, 0);
  for (std::size_t s = 0; s < count.size(); ++s) start_[s + 1] = start_[s] + count[s];
  uses_.resize(n);
  std::vector<std::uint64_t> fill(start_.begin(), start_.end() - 1);
  std::uint64_t begin = 0;
  for (std::size_t r = 0; r < requests.size(); ++r) {
    const std::span<const PageId> pages = requests[r];
    for (std::size_t k = pages.size(); k-- > 0;) {  // tail first: ascending touch numbers
      const std::uint32_t slot = *slots_.Find(pages[k]);
      uses_[fill[slot]++] = begin + (pages.size() - 1 - k);
    }
    begin = ends_[r];
  }
}

std::uint64_t NextUseOracle::After(PageId page, std::uint32_t r) const {
  const std::uint32_t* slot = slots_.Find(page);
  if (slot == nullptr || r >= ends_.size()) return kNeverUsed;
  const auto first = uses_.begin() + static_cast<std::ptrdiff_t>(start_[*slot]);
  const auto last = uses_.begin() + static_cast<std::ptrdiff_t>(start_[*slot + 1]);
  const auto it = std::lower_bound(first, last, ends_[r]);
  return it == last ? kNeverUsed : *it;
}

PolicyCore::PolicyCore(const CoreOptions& options)
    : slots_(options.slots), order_(policy_internal::MakeEvictionOrder(options, &table_)), tree_(order_->KeepsTree()) {
  // Slots are materialized as they are first used; reserve what a small core needs.
  const std::uint64_t expected = std::min<std::uint64_t>(slots_, 1u << 19);
  table_.reserve(static_cast<std::size_t>(expected));
  // Twice the pages a full core holds: the linear-probing map then stays at most
  // 3/8 full, so that dropping a page (every eviction) scans short clusters.
  map_.Reserve(static_cast<std::size_t>(2 * expected));
}

void PolicyCore::Hold(Slot s) {
  CoreSlot& x = table_[s];
  if (x.holds == 0) {
    if (x.in_order) order_->Remove(s);
    if (x.has_page) --free_with_page_;
    ++held_;
  }
  ++x.holds;
  order_->Hit(s);
}

bool PolicyCore::Release(Slot s) {
  if (s >= table_.size() || table_[s].holds == 0) return false;
  CoreSlot& x = table_[s];
  if (--x.holds != 0) return true;
  --held_;
  if (x.has_page) {
    ++free_with_page_;
    order_->Add(s);
  } else if (order_->TakesEmpty()) {
    order_->Add(s);
  } else {
    empty_.push_back(s);
  }
  return true;
}

Slot PolicyCore::Acquire() {
  Slot s;
  if (!empty_.empty()) {
    s = empty_.back();
    empty_.pop_back();
  } else if (table_.size() < slots_) {
    s = static_cast<Slot>(table_.size());
    table_.emplace_back();
  } else if (order_->size() > 0) {
    s = order_->Pop();
    if (table_[s].has_page) {
      --free_with_page_;
      DropPage(s);
    }
  } else {
    return kNoSlot;  // every slot is held
  }
  table_[s].holds = 1;
  ++held_;
  return s;
}

Slot PolicyCore::AcquireFor(PageId page) {
  if (Obtainable() == 0) return kNoSlot;
  order_->Incoming(page);
  return Acquire();
}

void PolicyCore::DropPage(Slot s) {
  CoreSlot& x = table_[s];
  map_.Erase(x.page);
  x.has_page = false;
  --resident_;
  ++page_version_;
  if (tree_ && x.parent != kNoSlot) {
    const Slot parent = x.parent;
    --table_[parent].children;
    x.parent = kNoSlot;
    order_->MaybeLeaf(parent);
  }
}

void PolicyCore::Admit(Slot s, PageId page, Slot parent, std::uint64_t epoch, std::uint64_t index) {
  CoreSlot& x = table_[s];
  x.key = OrderKey(epoch, index);
  x.page = page;
  x.has_page = true;
  map_.Insert(page, s);
  ++resident_;
  ++page_version_;
  if (tree_ && parent != kNoSlot) {
    x.parent = parent;
    ++table_[parent].children;
  }
  order_->Filled(s);
}

std::size_t PolicyCore::MemoryBytes() const {
  return table_.capacity() * sizeof(CoreSlot) + empty_.capacity() * sizeof(Slot) + map_.MemoryBytes();
}

void PolicyCore::Serialize(std::vector<std::uint8_t>* out) const {
  base::AppendPod<std::uint64_t>(out, table_.size());
  for (const CoreSlot& x : table_) {
    base::AppendPod(out, x.page);
    base::AppendPod(out, x.holds);
    base::AppendPod(out, x.parent);
    base::AppendPod(out, x.children);
    base::AppendPod(out, x.key);
    base::AppendPod(out, x.freq);
    base::AppendPod(out, x.category);
    base::AppendPod<std::uint8_t>(out, (x.has_page ? 1 : 0) | (x.in_main ? 2 : 0));
  }
  base::AppendPod<std::uint64_t>(out, empty_.size());
  for (Slot s : empty_) base::AppendPod(out, s);
  base::AppendPod(out, order_->epoch());
  order_->SerializeOrder(out);
}

bool PolicyCore::Deserialize(std::span<const std::uint8_t>* in) {
  constexpr std::size_t kSlotBytes = sizeof(PageId) + 3 * sizeof(std::uint32_t) + sizeof(std::uint64_t) + 3;
  std::uint64_t n = 0;
  if (!table_.empty() || !base::ReadCount(in, &n, kSlotBytes) || n > slots_) return false;
  table_.resize(static_cast<std::size_t>(n));
  map_.Reserve(static_cast<std::size_t>(2 * n));
  for (CoreSlot& x : table_) {
    std::uint8_t flags = 0;
    if (!base::ReadPod(in, &x.page) || !base::ReadPod(in, &x.holds) || !base::ReadPod(in, &x.parent) ||
        !base::ReadPod(in, &x.children) || !base::ReadPod(in, &x.key) || !base::ReadPod(in, &x.freq) ||
        !base::ReadPod(in, &x.category) || !base::ReadPod(in, &flags) || flags > 3 ||
        (x.parent != kNoSlot && (!tree_ || x.parent >= n)) || (!tree_ && x.children != 0)) {
      return false;
    }
    x.has_page = (flags & 1) != 0;
    x.in_main = (flags & 2) != 0;
  }
  std::uint64_t free_empty = 0;
  for (Slot s = 0; s < n; ++s) {
    const CoreSlot& x = table_[s];
    if (x.has_page) {
      if (map_.Find(x.page) != nullptr) return false;  // a page twice
      map_.Insert(x.page, s);
      ++resident_;
    }
    if (x.holds != 0) {
      ++held_;
    } else if (x.has_page) {
      ++free_with_page_;
    } else if (!order_->TakesEmpty()) {
      ++free_empty;
    }
  }
  std::uint64_t e = 0;
  if (!base::ReadCount(in, &e, sizeof(Slot)) || e != free_empty) return false;
  std::vector<bool> seen(static_cast<std::size_t>(n), false);
  for (std::uint64_t k = 0; k < e; ++k) {
    Slot s = 0;
    if (!base::ReadPod(in, &s) || s >= n || seen[s] || table_[s].holds != 0 || table_[s].has_page) return false;
    seen[s] = true;
    empty_.push_back(s);
  }
  std::uint64_t epoch = 0;
  if (!base::ReadPod(in, &epoch)) return false;
  order_->set_epoch(epoch);
  if (!order_->DeserializeOrder(in)) return false;
  // Every free slot with a page (and, under vllm, every free slot) is a candidate.
  std::uint64_t candidates = 0;
  for (const CoreSlot& x : table_) {
    const bool should = x.holds == 0 && (x.has_page || order_->TakesEmpty());
    if (x.in_order != should) return false;
    candidates += should ? 1 : 0;
  }
  return candidates == order_->size();
}

bool HasCore(PolicyKind kind) { return policy_internal::Registered(kind).order != nullptr; }

base::Result<std::unique_ptr<PolicyCore>> MakePolicyCore(const CoreOptions& options) {
  using R = base::Result<std::unique_ptr<PolicyCore>>;
  if (options.slots < 1) return R::Error("slots: must be at least 1, got 0");
  if (options.slots >= kNoSlot) return R::Error("slots: must be below 2^32 - 1");
  if (options.kind == PolicyKind::kBelady && options.future == nullptr) {
    return R::Error("belady: needs the input's future (CoreOptions::future)");
  }
  if (!HasCore(options.kind)) {
    return R::Error("policy '" + std::string(PolicyName(options.kind)) + "' has no eviction order in the core");
  }
  return std::make_unique<PolicyCore>(options);
}

}  // namespace kvwatch::curve
