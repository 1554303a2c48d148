// PolicyCacheOverCore (curve/policy_core.h): replay's and the canaries' simulation
// of a policy registered with an eviction order only. The curve's prefix rule
// (curve/policy.h): the leading resident pages at arrival are the hits; then each
// page in the touch order is referenced (resident: a hit for the order) or admitted
// (a slot acquired, the victim chosen by the order among the pages nothing holds),
// and released at once: in replay no request runs, so nothing stays held.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/byte_io.h"
#include "curve/policy_core.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve {

namespace {

class CoreCache final : public PolicyCache {
 public:
  explicit CoreCache(const PolicyOptions& options)
      : options_(options), core_(CoreOptions{options.kind, options.capacity, nullptr}) {}

  SimOutcome Process(const SimRequest& request) override {
    const std::span<const PageId> pages = request.pages;
    SimOutcome out;
    out.hits = policy_internal::LeadingResident(pages, [&](PageId p) { return core_.Find(p) != kNoSlot; });
    core_.SetReferrer({requests_, request.priority, request.category});
    const std::uint64_t epoch = core_.NewEpoch();
    policy_internal::ForEachInTouchOrder(pages.size(), options_.touch_order, [&](std::size_t i) {
      const PageId page = pages[i];
      Slot s = core_.Find(page);
      if (s != kNoSlot) {
        core_.Reference(s);
        return;
      }
      s = core_.AcquireFor(page);  // never kNoSlot: nothing is held between pages
      core_.Admit(s, page, kNoSlot, epoch, i);
      core_.Release(s);
    });
    ++requests_;
    return out;
  }

  std::uint64_t resident() const override { return core_.resident(); }
  std::size_t MemoryBytes() const override { return core_.MemoryBytes(); }

  void Serialize(std::vector<std::uint8_t>* out) const override {
    base::AppendPod(out, requests_);
    core_.Serialize(out);
  }
  bool Deserialize(std::span<const std::uint8_t>* in) override {
    return requests_ == 0 && base::ReadPod(in, &requests_) && core_.Deserialize(in);
  }

 private:
  PolicyOptions options_;
  PolicyCore core_;
  std::uint32_t requests_ = 0;  // the request clock (Referrer::request)
};

}  // namespace

std::unique_ptr<PolicyCache> MakePolicyCacheOverCore(const PolicyOptions& options) {
  if (!HasCore(options.kind) || NeedsFuture(options.kind)) return nullptr;
  return std::make_unique<CoreCache>(options);
}

}  // namespace kvwatch::curve
