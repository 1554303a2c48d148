#include "curve/policy_canaries.h"

#include <algorithm>

namespace kvwatch::curve {

PolicyCanaries::PolicyCanaries(const CanaryOptions& options, std::size_t canaries)
    : options_(options),
      windows_(options.windows_s, Slice{std::vector<PolicyTotals>(canaries)}),
      outcomes_(canaries) {}

base::Result<std::unique_ptr<PolicyCanaries>> PolicyCanaries::Create(const CanaryOptions& options) {
  using R = base::Result<std::unique_ptr<PolicyCanaries>>;
  for (PolicyKind kind : options.policies) {
    if (NeedsFuture(kind)) {
      return R::Error("policy '" + std::string(PolicyName(kind)) + "' needs the future: it runs only in replay");
    }
  }
  std::unique_ptr<PolicyCanaries> c(
      new PolicyCanaries(options, options.policies.size() * options.capacities.size()));
  for (PolicyKind kind : options.policies) {
    for (std::uint64_t capacity : options.capacities) {
      PolicyOptions po;
      po.kind = kind;
      po.capacity = capacity;
      po.touch_order = options.touch_order;
      auto cache = MakePolicyCache(po);
      if (!cache.ok()) return R::Error(cache.error());
      c->canaries_.push_back(Canary{kind, capacity, std::move(cache.value()), {}});
    }
  }
  return c;
}

void PolicyCanaries::Add(const Request& request, std::uint32_t unlimited_hits, double t) {
  if (classifier_.size() > kMaxClassifierChains) classifier_.Clear();
  const std::string_view cls = classifier_.Classify(request.pages);
  SimRequest sim;
  sim.pages = request.pages;
  ApplyLifetime(request, request.has_timestamp() ? request.timestamp_s : t, options_.lifetime, &sim);
  sim.priority = options_.priorities.For(request.tenant, cls);
  // Categories: the derived classes, in kDerivedClasses order.
  sim.category = static_cast<std::uint32_t>(
      std::find(std::begin(kDerivedClasses), std::end(kDerivedClasses), cls) - std::begin(kDerivedClasses));
  for (std::size_t i = 0; i < canaries_.size(); ++i) {
    Canary& c = canaries_[i];
    outcomes_[i] = c.cache->Process(sim);
    c.lifetime.Add(request.pages.size(), outcomes_[i], unlimited_hits, options_.coverage_share);
  }
  windows_.Add(t, [&](Slice& slice) {
    for (std::size_t i = 0; i < canaries_.size(); ++i) {
      slice.totals[i].Add(request.pages.size(), outcomes_[i], unlimited_hits, options_.coverage_share);
    }
  });
}

PolicyTotals PolicyCanaries::Window(std::size_t canary, std::size_t w) const {
  PolicyTotals sum;
  for (const Slice& slice : windows_.rings()[w].ring) sum.Merge(slice.totals[canary]);
  return sum;
}

std::size_t PolicyCanaries::MemoryBytes() const {
  std::size_t bytes = classifier_.MemoryBytes();
  for (const Canary& c : canaries_) bytes += c.cache->MemoryBytes();
  return bytes + windows_.size() * SlidingWindows<Slice>::kSlicesPerWindow * canaries_.size() * sizeof(PolicyTotals);
}

}  // namespace kvwatch::curve
