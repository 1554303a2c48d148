// The policy core's checkpoint (curve/policy_core.h): BasicPolicyCore's Serialize
// and Deserialize, included where a core is instantiated (curve/policy_core.cc for
// PolicyCore, each order's file for its replay cache). Not a public API.
#ifndef KVWATCH_CURVE_POLICY_CORE_SERIALIZE_H_
#define KVWATCH_CURVE_POLICY_CORE_SERIALIZE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "base/byte_io.h"
#include "curve/policy_core.h"

namespace kvwatch::curve {

template <class Order>
void BasicPolicyCore<Order>::Serialize(std::vector<std::uint8_t>* out) const {
  base::AppendPod<std::uint64_t>(out, table_.size());
  for (const CoreSlot& x : table_) {
    base::AppendPod(out, x.page);
    base::AppendPod(out, x.holds);
    base::AppendPod(out, x.parent);
    base::AppendPod(out, x.children);
    base::AppendPod(out, x.key);
    base::AppendPod(out, x.freq);
    base::AppendPod(out, x.category);
    base::AppendPod<std::uint8_t>(out, (x.has_page ? 1 : 0) | (x.in_main ? 2 : 0) | (x.unnamed ? 4 : 0));
  }
  base::AppendPod<std::uint64_t>(out, empty_.size());
  for (Slot s : empty_) base::AppendPod(out, s);
  base::AppendPod(out, order_->epoch());
  order_->SerializeOrder(out);
}

template <class Order>
bool BasicPolicyCore<Order>::Deserialize(std::span<const std::uint8_t>* in) {
  constexpr std::size_t kSlotBytes = sizeof(PageId) + 3 * sizeof(std::uint32_t) + sizeof(std::uint64_t) + 3;
  std::uint64_t n = 0;
  if (!table_.empty() || !base::ReadCount(in, &n, kSlotBytes) || n > slots_) return false;
  table_.resize(static_cast<std::size_t>(n));
  map_.Reserve(static_cast<std::size_t>(2 * n));
  for (CoreSlot& x : table_) {
    std::uint8_t flags = 0;
    if (!base::ReadPod(in, &x.page) || !base::ReadPod(in, &x.holds) || !base::ReadPod(in, &x.parent) ||
        !base::ReadPod(in, &x.children) || !base::ReadPod(in, &x.key) || !base::ReadPod(in, &x.freq) ||
        !base::ReadPod(in, &x.category) || !base::ReadPod(in, &flags) || flags > 7 || (flags & 5) == 4 ||
        (x.parent != kNoSlot && (!tree_ || x.parent >= n)) || (!tree_ && x.children != 0)) {
      return false;
    }
    x.has_page = (flags & 1) != 0;
    x.in_main = (flags & 2) != 0;
    x.unnamed = (flags & 4) != 0;  // with a page (unnamed without a page is refused)
  }
  std::uint64_t free_empty = 0;
  for (Slot s = 0; s < n; ++s) {
    const CoreSlot& x = table_[s];
    if (x.has_page && !x.unnamed) {
      if (map_.Find(x.page) != nullptr) return false;  // a page twice
      map_.Insert(x.page, s);
    }
    if (x.has_page) ++resident_;
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

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_POLICY_CORE_SERIALIZE_H_
