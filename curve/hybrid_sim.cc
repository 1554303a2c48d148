#include "curve/hybrid_sim.h"

#include <algorithm>

namespace kvwatch::curve {

HybridPoolSim::HybridPoolSim(const HybridSimOptions& options, std::uint64_t capacity_bytes)
    : options_(options), capacity_(capacity_bytes) {}

void HybridPoolSim::Trim() {
  while (free_bytes_ + used_bytes_ > capacity_ && !queue_.empty()) {
    const Key k = queue_.front();
    queue_.pop_front();
    free_.erase(k);
    free_bytes_ -= options_.engine.groups[k.first].page_bytes;
  }
}

void HybridPoolSim::Take(std::uint32_t g, PageId p) {
  const Key k{g, p};
  if (!using_.insert(k).second) return;  // already in use (a page twice in one request)
  const std::uint64_t w = options_.engine.groups[g].page_bytes;
  used_bytes_ += w;
  auto it = free_.find(k);
  if (it != free_.end()) {
    queue_.erase(it->second);
    free_.erase(it);
    free_bytes_ -= w;
    return;
  }
  Trim();
}

void HybridPoolSim::Free(std::uint32_t g, PageId p) {
  const Key k{g, p};
  if (using_.erase(k) == 0) return;
  const std::uint64_t w = options_.engine.groups[g].page_bytes;
  used_bytes_ -= w;
  queue_.push_back(k);
  free_[k] = std::prev(queue_.end());
  free_bytes_ += w;
}

std::uint32_t HybridPoolSim::Request(std::span<const PageId> pages, std::int64_t input_tokens,
                                     std::int64_t output_tokens) {
  const HybridEngineOptions& o = options_.engine;
  const std::size_t n = pages.size();
  const std::uint64_t p_tokens = o.page_tokens;
  const auto groups = static_cast<std::uint32_t>(o.groups.size());
  const std::uint64_t prompt = input_tokens > 0 ? static_cast<std::uint64_t>(input_tokens) : n * p_tokens;

  // 1. The hit: the largest L whose every group's pages are cached.
  std::size_t most = n;
  if (options_.cap_prompt) most = std::min<std::size_t>(n, (prompt - 1) / p_tokens);
  std::size_t full = most;  // full groups are downward closed: their run bounds L
  for (std::uint32_t g = 0; g < groups; ++g) {
    if (o.groups[g].kind != KvGroupKind::kFull) continue;
    std::size_t run = 0;
    while (run < full && Cached(g, pages[run])) ++run;
    full = run;
  }
  std::size_t hit = 0;
  for (std::size_t l = full; l > 0 && hit == 0; --l) {
    bool ok = true;
    for (std::uint32_t g = 0; g < groups && ok; ++g) {
      if (o.groups[g].kind == KvGroupKind::kFull) continue;
      for (std::size_t i = RequiredFrom(o.groups[g], p_tokens, l); i < l && ok; ++i) ok = Cached(g, pages[i]);
    }
    if (ok) hit = l;
  }

  // 2. The blocks the hit uses, every group's, before anything is allocated.
  for (std::uint32_t g = 0; g < groups; ++g) {
    for (std::size_t i = RequiredFrom(o.groups[g], p_tokens, hit); i < hit; ++i) Take(g, pages[i]);
  }
  // 3. The rest: pages [L, n), and with touch_skipped the skipped ones before L.
  for (std::uint32_t g = 0; g < groups; ++g) {
    for (std::size_t i = options_.touch_skipped ? 0 : hit; i < n; ++i) Take(g, pages[i]);
  }
  if (used_bytes_ > capacity_) ++overflows_;

  // 4. Pages out of the window or the chunk once the prompt is computed (last
  // first), then those that leave it while the output is decoded (one a step).
  if (options_.early_free) {
    const std::uint64_t final_tokens = prompt + (output_tokens > 0 ? static_cast<std::uint64_t>(output_tokens) : 0);
    for (std::uint32_t g = 0; g < groups; ++g) {
      const auto at_prompt =
          static_cast<std::size_t>(std::min<std::uint64_t>(SkippedPages(o.groups[g], p_tokens, prompt), n));
      for (std::size_t i = at_prompt; i-- > 0;) Free(g, pages[i]);
      const auto at_end =
          static_cast<std::size_t>(std::min<std::uint64_t>(SkippedPages(o.groups[g], p_tokens, final_tokens), n));
      for (std::size_t i = at_prompt; i < at_end; ++i) Free(g, pages[i]);
    }
  }
  // 5. At finish, group after group, each in the touch order.
  for (std::uint32_t g = 0; g < groups; ++g) {
    if (o.touch_order == TouchOrder::kTailFirst) {
      for (std::size_t i = n; i-- > 0;) Free(g, pages[i]);
    } else {
      for (std::size_t i = 0; i < n; ++i) Free(g, pages[i]);
    }
  }
  Trim();
  page_hits_ += hit;
  page_refs_ += n;
  return static_cast<std::uint32_t>(hit);
}

}  // namespace kvwatch::curve
