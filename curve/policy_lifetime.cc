// The lifetime model's running requests (curve/policy_lifetime.h). The caches
// themselves are templates over their order, instantiated beside the orders in
// curve/policy_core_lists.cc.
#include "curve/policy_lifetime.h"

#include <cmath>
#include <limits>
#include <utility>

namespace kvwatch::curve::policy_internal {

RunningSet::Running& RunningSet::Start(double end) {
  const std::uint64_t order = next_order_++;
  Running& r = running_[order];
  r.end = end;
  r.slots = std::move(spare_);  // the buffer of the last request taken out
  r.slots.clear();
  ends_.push(End{end, order});
  return r;
}

bool RunningSet::TakeFinished(double t, Running* out) {
  while (!ends_.empty()) {
    const End e = ends_.top();
    if (!std::isnan(t) && e.end > t) return false;
    ends_.pop();
    auto it = running_.find(e.order);
    if (it == running_.end()) continue;  // preempted earlier
    std::swap(*out, it->second);
    spare_ = std::move(it->second.slots);
    running_.erase(it);
    return true;
  }
  return false;
}

bool RunningSet::TakeNewest(Running* out) {
  if (running_.empty()) return false;
  auto it = std::prev(running_.end());
  std::swap(*out, it->second);
  spare_ = std::move(it->second.slots);
  running_.erase(it);
  return true;
}

void RunningSet::Serialize(std::vector<std::uint8_t>* out) const {
  base::AppendPod(out, next_order_);
  base::AppendPod<std::uint64_t>(out, running_.size());
  for (const auto& [order, r] : running_) {
    base::AppendPod(out, order);
    base::AppendPod(out, r.end);
    base::AppendPod<std::uint64_t>(out, r.slots.size());
    for (Slot slot : r.slots) base::AppendPod(out, slot);
  }
}

bool RunningSet::Deserialize(std::span<const std::uint8_t>* in, std::uint64_t slots,
                             std::vector<std::uint32_t>* holdings) {
  std::uint64_t n = 0;
  // Orders are counted from 0 and never wrap in practice; a larger one is corrupt.
  if (!running_.empty() || !base::ReadPod(in, &next_order_) || next_order_ > (std::uint64_t{1} << 62) ||
      !base::ReadCount(in, &n, 3 * sizeof(std::uint64_t))) {
    return false;
  }
  for (std::uint64_t k = 0; k < n; ++k) {
    std::uint64_t order = 0, held = 0;
    double end = 0;
    if (!base::ReadPod(in, &order) || !base::ReadPod(in, &end) || std::isnan(end) || order >= next_order_ ||
        (!running_.empty() && order <= std::prev(running_.end())->first) || !base::ReadCount(in, &held, sizeof(Slot))) {
      return false;
    }
    Running& r = running_[order];
    r.end = end;
    r.slots.resize(static_cast<std::size_t>(held));
    for (Slot& slot : r.slots) {
      if (!base::ReadPod(in, &slot) || slot >= slots) return false;
      if (slot >= holdings->size()) holdings->resize(static_cast<std::size_t>(slot) + 1, 0);
      ++(*holdings)[slot];
    }
    ends_.push(End{end, order});
  }
  return true;
}

std::size_t RunningSet::MemoryBytes() const {
  std::size_t bytes = ends_.size() * sizeof(End) + spare_.capacity() * sizeof(Slot);
  for (const auto& [order, r] : running_) bytes += sizeof(r) + r.slots.capacity() * sizeof(Slot) + 48;
  return bytes;
}

double EndOf(const SimRequest& r) {
  if (std::isnan(r.end_s) || std::isnan(r.arrival_s)) return -std::numeric_limits<double>::infinity();
  return r.end_s;
}

}  // namespace kvwatch::curve::policy_internal
