// The lifetime model's running requests (curve/policy_lifetime.h). The caches
// themselves are templates over their order, instantiated beside the orders in
// curve/policy_core_lists.cc.
#include "curve/policy_lifetime.h"

#include <cmath>
#include <limits>
#include <utility>

namespace kvwatch::curve::policy_internal {

RunningSet::Running& RunningSet::Start(double end) { return Add(next_order_++, end); }

RunningSet::Running& RunningSet::Add(std::uint64_t order, double end) {
  const std::uint32_t record = records_.Allocate();
  Record& r = records_[record];
  r.order = order;
  r.live = true;
  r.run.end = end;
  r.run.slots = std::move(spare_);  // the buffer of the request taken before last
  r.run.slots.clear();
  ends_.push(End{end, {order, record}});
  started_.push_back({order, record});
  ++size_;
  return r.run;
}

const RunningSet::Running* RunningSet::Take(const Ref& ref) {
  Record& r = records_[ref.record];
  r.live = false;
  // Its buffer is kept in taken_ until the next Take, then in spare_ until a Start,
  // so that the buffers allocated are the running requests' and these two.
  std::swap(taken_, r.run);
  spare_ = std::move(r.run.slots);
  r.run.slots = {};
  records_.Release(ref.record);
  --size_;
  while (!started_.empty() && !Live(started_.back())) started_.pop_back();
  if (started_.size() > 2 * size_ + 1024) std::erase_if(started_, [&](const Ref& s) { return !Live(s); });
  return &taken_;
}

const RunningSet::Running* RunningSet::TakeFinished(double t) {
  while (!ends_.empty()) {
    const End e = ends_.top();
    if (!std::isnan(t) && e.end > t) return nullptr;
    ends_.pop();
    if (Live(e.ref)) return Take(e.ref);  // else preempted earlier
  }
  return nullptr;
}

const RunningSet::Running* RunningSet::TakeNewest() {
  // Take keeps the back live.
  return started_.empty() ? nullptr : Take(started_.back());
}

void RunningSet::Serialize(std::vector<std::uint8_t>* out) const {
  base::AppendPod(out, next_order_);
  base::AppendPod<std::uint64_t>(out, size_);
  for (const Ref& ref : started_) {
    if (!Live(ref)) continue;
    const Running& r = records_[ref.record].run;
    base::AppendPod(out, ref.order);
    base::AppendPod(out, r.end);
    base::AppendPod<std::uint64_t>(out, r.slots.size());
    for (Slot slot : r.slots) base::AppendPod(out, slot);
  }
}

bool RunningSet::Deserialize(std::span<const std::uint8_t>* in, std::uint64_t slots,
                             std::vector<std::uint32_t>* holdings) {
  std::uint64_t n = 0;
  // Orders are counted from 0 and never wrap in practice; a larger one is corrupt.
  if (size_ != 0 || !base::ReadPod(in, &next_order_) || next_order_ > (std::uint64_t{1} << 62) ||
      !base::ReadCount(in, &n, 3 * sizeof(std::uint64_t))) {
    return false;
  }
  for (std::uint64_t k = 0; k < n; ++k) {
    std::uint64_t order = 0, held = 0;
    double end = 0;
    if (!base::ReadPod(in, &order) || !base::ReadPod(in, &end) || std::isnan(end) || order >= next_order_ ||
        (!started_.empty() && order <= started_.back().order) || !base::ReadCount(in, &held, sizeof(Slot))) {
      return false;
    }
    Running& r = Add(order, end);
    r.slots.resize(static_cast<std::size_t>(held));
    for (Slot& slot : r.slots) {
      if (!base::ReadPod(in, &slot) || slot >= slots) return false;
      if (slot >= holdings->size()) holdings->resize(static_cast<std::size_t>(slot) + 1, 0);
      ++(*holdings)[slot];
    }
  }
  return true;
}

std::size_t RunningSet::MemoryBytes() const {
  std::size_t bytes = records_.MemoryBytes() + ends_.size() * sizeof(End) + started_.capacity() * sizeof(Ref) +
                      (taken_.slots.capacity() + spare_.capacity()) * sizeof(Slot);
  for (std::uint32_t k = 0; k < records_.size(); ++k) bytes += records_[k].run.slots.capacity() * sizeof(Slot);
  return bytes;
}

double EndOf(const SimRequest& r) {
  if (std::isnan(r.end_s) || std::isnan(r.arrival_s)) return -std::numeric_limits<double>::infinity();
  return r.end_s;
}

}  // namespace kvwatch::curve::policy_internal
