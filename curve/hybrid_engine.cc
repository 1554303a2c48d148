#include "curve/hybrid_engine.h"

#include <algorithm>
#include <bit>
#include <string>

#include "base/byte_io.h"

namespace kvwatch::curve {
namespace {

constexpr std::uint32_t kMinSlots = 1024;

std::uint64_t CeilDiv(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0); }

// ceil(a * num / den), saturated at limit.
std::uint64_t ScaledUp(std::uint64_t a, std::uint64_t num, std::uint64_t den, std::uint64_t limit) {
  const unsigned __int128 x = static_cast<unsigned __int128>(a) * num;
  const unsigned __int128 q = x / den + (x % den != 0);
  return q > limit ? limit : static_cast<std::uint64_t>(q);
}

// Builds a 1-based Fenwick tree over values in O(n).
void BuildTree(const std::vector<std::uint64_t>& values, std::vector<std::uint64_t>* tree) {
  const std::size_t n = values.size();
  tree->assign(n + 1, 0);
  for (std::size_t i = 1; i <= n; ++i) {
    (*tree)[i] += values[i - 1];
    const std::size_t parent = i + (i & (~i + 1));
    if (parent <= n) (*tree)[parent] += (*tree)[i];
  }
}

std::uint64_t TreePrefix(const std::vector<std::uint64_t>& tree, std::uint32_t end) {
  std::uint64_t sum = 0;
  for (std::uint32_t i = end; i > 0; i &= i - 1) sum += tree[i];
  return sum;
}

}  // namespace

base::Status ValidatePoolShares(const std::vector<std::uint64_t>& shares, std::size_t groups) {
  if (shares.size() != groups) {
    return base::Status::Error("pool shares: one per KV cache group, " + std::to_string(groups) + " groups but " +
                               std::to_string(shares.size()) + " shares");
  }
  for (std::uint64_t w : shares) {
    if (w == 0 || w > kMaxPoolShare) {
      return base::Status::Error("pool shares must be 1 to " + std::to_string(kMaxPoolShare) + ", got " +
                                 std::to_string(w));
    }
  }
  return base::Status::Ok();
}

base::Status ValidateHybridOptions(const HybridEngineOptions& o) {
  if (o.groups.empty() || o.groups.size() > 255) {
    return base::Status::Error("a hybrid model needs 1 to 255 KV cache groups, got " + std::to_string(o.groups.size()));
  }
  if (o.page_tokens == 0) return base::Status::Error("tokens per page must be positive");
  for (std::size_t g = 0; g < o.groups.size(); ++g) {
    const HybridGroup& group = o.groups[g];
    if (group.page_bytes == 0) {
      return base::Status::Error("KV cache group " + std::to_string(g) + ": page bytes must be positive");
    }
    const bool windowed = group.kind == KvGroupKind::kSlidingWindow || group.kind == KvGroupKind::kChunkedLocal;
    if (windowed && group.window_tokens == 0) {
      return base::Status::Error("KV cache group " + std::to_string(g) + " (" + KvGroupKindName(group.kind) +
                                 "): the window must be positive");
    }
  }
  if (!o.pool_shares.empty()) {
    if (base::Status s = ValidatePoolShares(o.pool_shares, o.groups.size()); !s.ok()) return s;
    if (o.max_bytes != 0) return base::Status::Error("split pools need an unbounded engine (max_bytes 0)");
  }
  if (o.max_bytes != 0) {
    std::uint64_t largest = 0, unit = o.unit_bytes;
    for (const HybridGroup& g : o.groups) {
      largest = std::max(largest, g.page_bytes);
      if (o.unit_bytes == 0) unit = unit == 0 ? g.page_bytes : std::min(unit, g.page_bytes);
    }
    if (o.max_bytes < largest) {
      return base::Status::Error("the tracked bytes (" + std::to_string(o.max_bytes) +
                                 ") must hold the largest group page (" + std::to_string(largest) + " bytes)");
    }
    if (o.max_bytes / unit >= kBeyondTracked) {
      return base::Status::Error("the tracked bytes (" + std::to_string(o.max_bytes) + ") are " +
                                 std::to_string(o.max_bytes / unit) + " capacity units of " + std::to_string(unit) +
                                 " bytes, above the engine's range (" + std::to_string(kBeyondTracked - 1) + ")");
    }
  }
  return base::Status::Ok();
}

base::Result<HybridEngineOptions> HybridOptionsFor(const ModelSpec& spec, int tensor_parallel,
                                                   std::uint64_t page_tokens, TouchOrder touch_order) {
  using R = base::Result<HybridEngineOptions>;
  base::Result<std::vector<KvGroupSizing>> sized = SizeKvGroups(spec, tensor_parallel, page_tokens);
  if (!sized.ok()) return R::Error(sized.error());
  HybridEngineOptions o;
  o.page_tokens = page_tokens;
  o.touch_order = touch_order;
  for (const KvGroupSizing& g : sized.value()) {
    o.groups.push_back({g.spec.kind, static_cast<std::uint64_t>(g.spec.window_tokens), g.page_bytes});
  }
  if (base::Status s = ValidateHybridOptions(o); !s.ok()) return R::Error(s.error());
  return o;
}

std::uint64_t RequiredFrom(const HybridGroup& group, std::uint64_t page_tokens, std::uint64_t hit_pages) {
  const std::uint64_t l = hit_pages;
  switch (group.kind) {
    case KvGroupKind::kFull:
      return 0;
    case KvGroupKind::kSlidingWindow: {
      // vLLM: sliding_window_contiguous_blocks = cdiv(sliding_window - 1, block_size).
      const std::uint64_t k = CeilDiv(group.window_tokens - 1, page_tokens);
      return l > k ? l - k : 0;
    }
    case KvGroupKind::kChunkedLocal: {
      // vLLM: local_attention_start_idx = max_length // chunk * chunk, in blocks.
      const std::uint64_t chunk_start = l * page_tokens / group.window_tokens * group.window_tokens;
      return chunk_start / page_tokens;
    }
    case KvGroupKind::kLinear:
      return l > 0 ? l - 1 : 0;
  }
  return 0;
}

std::uint64_t SkippedPages(const HybridGroup& group, std::uint64_t page_tokens, std::uint64_t computed_tokens) {
  std::uint64_t skipped = 0;
  if (group.kind == KvGroupKind::kSlidingWindow) {
    skipped = computed_tokens + 1 > group.window_tokens ? computed_tokens + 1 - group.window_tokens : 0;
  } else if (group.kind == KvGroupKind::kChunkedLocal) {
    skipped = computed_tokens / group.window_tokens * group.window_tokens;
  }
  return skipped / page_tokens;
}

HybridEngine::HybridEngine(const HybridEngineOptions& options) : options_(options) {
  unit_ = options_.unit_bytes;
  if (unit_ == 0) {
    unit_ = options_.groups.front().page_bytes;
    for (const HybridGroup& g : options_.groups) unit_ = std::min(unit_, g.page_bytes);
  }
  slot_of_.resize(options_.groups.size());
  group_tree_.resize(options_.groups.size());
  group_total_.assign(options_.groups.size(), 0);
  evicted_young_.resize(options_.groups.size());
  evicted_old_.resize(options_.groups.size());
  for (std::uint64_t w : options_.pool_shares) share_sum_ += w;
  Rebuild(kMinSlots);
}

std::uint32_t HybridEngine::max_units() const {
  return options_.max_bytes != 0 ? static_cast<std::uint32_t>(options_.max_bytes / unit_) : kBeyondTracked - 1;
}

void HybridEngine::Clear() {
  for (auto& m : slot_of_) m.clear();
  for (auto& e : evicted_young_) e.clear();
  for (auto& e : evicted_old_) e.clear();
  std::fill(group_total_.begin(), group_total_.end(), 0);
  next_ = 0;
  live_ = total_ = evicted_items_ = young_count_ = 0;
  Rebuild(kMinSlots);
}

bool HybridEngine::WasEvicted(std::uint32_t g, PageId page) const {
  return evicted_young_[g].count(page) != 0 || evicted_old_[g].count(page) != 0;
}

void HybridEngine::ForgetEviction(std::uint32_t g, PageId page) {
  if (evicted_young_[g].erase(page) != 0) --young_count_;
  evicted_old_[g].erase(page);
}

void HybridEngine::RememberEviction(std::uint32_t g, PageId page) {
  const std::uint64_t limit = options_.remembered_evictions;
  if (limit != 0 && young_count_ >= limit) {
    std::swap(evicted_old_, evicted_young_);
    for (auto& e : evicted_young_) e.clear();
    young_count_ = 0;
  }
  if (evicted_young_[g].insert(page).second) ++young_count_;
}

void HybridEngine::EvictOverBound() {
  while (total_ > options_.max_bytes) {
    while (weight_[oldest_] == 0) ++oldest_;  // total_ > 0: a live slot lies ahead
    const std::uint32_t s = oldest_;
    const std::uint32_t g = group_[s];
    const std::uint64_t w = weight_[s];
    Add(&tree_, s, -static_cast<std::int64_t>(w));
    Add(&group_tree_[g], s, -static_cast<std::int64_t>(w));
    weight_[s] = 0;
    slot_of_[g].erase(page_[s]);
    --live_;
    total_ -= w;
    group_total_[g] -= w;
    RememberEviction(g, page_[s]);
    ++evicted_items_;
  }
}

std::uint64_t HybridEngine::PrefixBytes(std::uint32_t end) const { return TreePrefix(tree_, end); }

void HybridEngine::Add(std::vector<std::uint64_t>* tree, std::uint32_t slot, std::int64_t delta) {
  for (std::size_t i = slot + 1; i < tree->size(); i += i & (~i + 1)) {
    (*tree)[i] += static_cast<std::uint64_t>(delta);  // wraps back for negative deltas
  }
}

// Moves the live slots, in order, to [0, live) of `slots` slots and rebuilds the trees.
void HybridEngine::Rebuild(std::uint32_t slots) {
  std::vector<std::uint64_t> weight(slots, 0);
  std::vector<std::uint8_t> group(slots, 0);
  std::vector<PageId> page(slots, 0);
  std::uint32_t k = 0;
  for (std::uint32_t s = 0; s < next_; ++s) {
    if (weight_[s] == 0) continue;
    weight[k] = weight_[s];
    group[k] = group_[s];
    page[k] = page_[s];
    slot_of_[group_[s]][page_[s]] = k;
    ++k;
  }
  next_ = k;
  oldest_ = 0;
  weight_ = std::move(weight);
  group_ = std::move(group);
  page_ = std::move(page);
  BuildTree(weight_, &tree_);
  for (std::size_t g = 0; g < group_tree_.size(); ++g) {
    std::vector<std::uint64_t> mine(slots, 0);
    for (std::uint32_t s = 0; s < next_; ++s) {
      if (group_[s] == g) mine[s] = weight_[s];
    }
    BuildTree(mine, &group_tree_[g]);
  }
}

void HybridEngine::Touch(std::uint32_t g, PageId page) {
  const std::uint64_t w = options_.groups[g].page_bytes;
  auto [it, inserted] = slot_of_[g].try_emplace(page, 0);
  if (!inserted) {
    const std::uint32_t old = it->second;
    Add(&tree_, old, -static_cast<std::int64_t>(w));
    Add(&group_tree_[g], old, -static_cast<std::int64_t>(w));
    weight_[old] = 0;
    --live_;
    total_ -= w;
    group_total_[g] -= w;
  } else if (young_count_ != 0 || !evicted_old_[g].empty()) {
    ForgetEviction(g, page);
  }
  if (next_ == weight_.size()) {
    // Half or more live: double; else compact in place.
    const auto size = static_cast<std::uint32_t>(weight_.size());
    Rebuild(live_ * 2 >= size ? size * 2 : size);
  }
  const std::uint32_t slot = next_++;
  weight_[slot] = w;
  group_[slot] = static_cast<std::uint8_t>(g);
  page_[slot] = page;
  Add(&tree_, slot, static_cast<std::int64_t>(w));
  Add(&group_tree_[g], slot, static_cast<std::int64_t>(w));
  it->second = slot;  // Rebuild assigns, never inserts: the iterator holds
  ++live_;
  total_ += w;
  group_total_[g] += w;
  if (options_.max_bytes != 0 && total_ > options_.max_bytes) EvictOverBound();
}

void HybridEngine::Process(std::span<const PageId> pages, std::int64_t input_tokens, std::int64_t output_tokens,
                           RequestOutcome* out) {
  const std::size_t n = pages.size();
  const std::size_t groups = options_.groups.size();
  out->distance.assign(n, 0);
  out->prefix_max.assign(n, 0);
  out->cold_misses = 0;
  out->beyond_tracked = 0;
  out->unlimited_hits = 0;
  out->decomposed.clear();
  out->group_distance.clear();

  // D(x) of every item in the arrival state: the bytes of the live slots from
  // its own on.
  item_.assign(groups * n, kColdBytes);
  const bool split = share_sum_ != 0;  // with split pools: ceil(D_g * W / w_g)
  const bool remembers = evicted_items_ != 0;
  for (std::size_t g = 0; g < groups; ++g) {
    for (std::size_t i = 0; i < n; ++i) {
      auto it = slot_of_[g].find(pages[i]);
      if (it != slot_of_[g].end()) {
        item_[g * n + i] = split ? ScaledUp(group_total_[g] - TreePrefix(group_tree_[g], it->second), share_sum_,
                                            options_.pool_shares[g], kBeyondBytes - 1)
                                 : total_ - PrefixBytes(it->second);
      } else if (remembers && WasEvicted(static_cast<std::uint32_t>(g), pages[i])) {
        item_[g * n + i] = kBeyondBytes;
      }
    }
  }
  // D(L) = max over groups of the max over [lo_g(L), L): a monotonic deque per
  // group, since lo_g(L) never decreases.
  need_.assign(n, 0);
  for (std::size_t g = 0; g < groups; ++g) {
    const std::uint64_t* d = item_.data() + g * n;
    window_.clear();
    std::size_t head = 0;
    for (std::size_t l = 1; l <= n; ++l) {
      const auto i = static_cast<std::uint32_t>(l - 1);
      while (window_.size() > head && d[window_.back()] <= d[i]) window_.pop_back();
      window_.push_back(i);
      const std::uint64_t lo = RequiredFrom(options_.groups[g], options_.page_tokens, l);
      while (head < window_.size() && window_[head] < lo) ++head;
      if (head < window_.size()) need_[l - 1] = std::max(need_[l - 1], d[window_[head]]);
    }
  }
  // Suffix minima: page i hits at C bytes exactly when S(i + 1) <= C.
  auto units = [&](std::uint64_t bytes) -> std::uint32_t {
    if (bytes == kColdBytes) return kCold;
    if (bytes == kBeyondBytes) return kBeyondTracked;
    const std::uint64_t q = bytes == 0 ? 0 : CeilDiv(bytes, unit_) - 1;
    return q >= kBeyondTracked ? kBeyondTracked : static_cast<std::uint32_t>(q);
  };
  std::uint64_t suffix = kColdBytes;
  for (std::size_t i = n; i-- > 0;) {
    suffix = std::min(suffix, need_[i]);
    const std::uint32_t u = units(suffix);
    out->prefix_max[i] = u;
    if (u != kCold) ++out->unlimited_hits;
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t own = 0;
    for (std::size_t g = 0; g < groups; ++g) own = std::max(own, item_[g * n + i]);
    out->distance[i] = units(own);
    if (own == kBeyondBytes) ++out->beyond_tracked;  // an item evicted from tracking, none cold
    if (item_[i] == kColdBytes) ++out->cold_misses;  // group 0: touch-all keeps the groups' items together
  }

  // The references, in the order vLLM frees the blocks: early frees, then the rest.
  std::vector<std::size_t>& early = early_;
  early.assign(groups, 0);
  if (options_.early_free) {
    const std::uint64_t prompt = input_tokens > 0 ? static_cast<std::uint64_t>(input_tokens) : n * options_.page_tokens;
    const std::uint64_t end = prompt + (output_tokens > 0 ? static_cast<std::uint64_t>(output_tokens) : 0);
    for (std::size_t g = 0; g < groups; ++g) {
      const auto at_prompt = static_cast<std::size_t>(
          std::min<std::uint64_t>(SkippedPages(options_.groups[g], options_.page_tokens, prompt), n));
      const auto at_end = static_cast<std::size_t>(
          std::min<std::uint64_t>(SkippedPages(options_.groups[g], options_.page_tokens, end), n));
      for (std::size_t i = at_prompt; i-- > 0;) Touch(static_cast<std::uint32_t>(g), pages[i]);
      for (std::size_t i = at_prompt; i < at_end; ++i) Touch(static_cast<std::uint32_t>(g), pages[i]);
      early[g] = at_end;
    }
  }
  for (std::size_t g = 0; g < groups; ++g) {
    if (options_.touch_order == TouchOrder::kTailFirst) {
      for (std::size_t i = n; i-- > early[g];) Touch(static_cast<std::uint32_t>(g), pages[i]);
    } else {
      for (std::size_t i = early[g]; i < n; ++i) Touch(static_cast<std::uint32_t>(g), pages[i]);
    }
  }
}

std::uint64_t HybridEngine::BytesToHoldAll() const {
  if (share_sum_ == 0) return total_;
  std::uint64_t c = 0;
  for (std::size_t g = 0; g < group_total_.size(); ++g) {
    c = std::max(c, ScaledUp(group_total_[g], share_sum_, options_.pool_shares[g], ~std::uint64_t{0}));
  }
  return c;
}

std::vector<std::uint64_t> HybridEngine::GroupBytesAt(std::uint64_t capacity_bytes) const {
  if (share_sum_ != 0) {
    // Group g's pool holds its most recent items that fit its share, all of one size.
    std::vector<std::uint64_t> out(options_.groups.size(), 0);
    for (std::size_t g = 0; g < out.size(); ++g) {
      const unsigned __int128 pool =
          static_cast<unsigned __int128>(capacity_bytes) * options_.pool_shares[g] / share_sum_;
      const std::uint64_t page = options_.groups[g].page_bytes;
      const unsigned __int128 fits = pool / page * page;
      out[g] = fits >= group_total_[g] ? group_total_[g] : static_cast<std::uint64_t>(fits);
    }
    return out;
  }
  if (capacity_bytes >= total_) return group_total_;
  // The pool holds the slots s with PrefixBytes(s) >= total - capacity: find the
  // last slot below that (Fenwick descent), everything after it is held.
  const std::uint64_t x = total_ - capacity_bytes;
  std::uint32_t pos = 0;
  std::uint64_t below = 0;
  const auto size = static_cast<std::uint32_t>(tree_.size() - 1);
  for (std::uint32_t step = std::bit_floor(size); step > 0; step >>= 1) {
    if (pos + step <= size && below + tree_[pos + step] < x) {
      pos += step;
      below += tree_[pos];
    }
  }
  // PrefixBytes(pos) < x <= PrefixBytes(pos + 1): slots from pos + 1 on are held.
  std::vector<std::uint64_t> out(options_.groups.size(), 0);
  for (std::size_t g = 0; g < out.size(); ++g) out[g] = group_total_[g] - TreePrefix(group_tree_[g], pos + 1);
  return out;
}

namespace {
constexpr char kStateMagic[8] = {'K', 'V', 'W', 'H', 'Y', 'B', '1', '\0'};
}  // namespace

std::vector<std::uint8_t> HybridEngine::Serialize() const {
  std::vector<std::uint8_t> out(kStateMagic, kStateMagic + sizeof(kStateMagic));
  out.reserve(64 + live_ * 9);
  base::AppendPod<std::uint8_t>(&out, static_cast<std::uint8_t>(options_.groups.size()));
  base::AppendPod<std::uint64_t>(&out, evicted_items_);
  base::AppendPod<std::uint64_t>(&out, live_);
  for (std::uint32_t s = 0; s < next_; ++s) {  // oldest first: Deserialize references them in this order
    if (weight_[s] == 0) continue;
    base::AppendPod<std::uint8_t>(&out, group_[s]);
    base::AppendPod<std::uint64_t>(&out, page_[s]);
  }
  for (const auto* generation : {&evicted_old_, &evicted_young_}) {
    for (const auto& pages : *generation) {
      base::AppendPod<std::uint64_t>(&out, pages.size());
      for (PageId p : pages) base::AppendPod<std::uint64_t>(&out, p);
    }
  }
  return out;
}

bool HybridEngine::Deserialize(std::span<const std::uint8_t> bytes) {
  Clear();
  std::span<const std::uint8_t> in = bytes;
  auto fail = [this] {
    Clear();
    return false;
  };
  if (in.size() < sizeof(kStateMagic) || !std::equal(kStateMagic, kStateMagic + sizeof(kStateMagic), in.begin())) {
    return fail();
  }
  in = in.subspan(sizeof(kStateMagic));
  std::uint8_t groups = 0;
  std::uint64_t evicted = 0, live = 0;
  if (!base::ReadPod(&in, &groups) || groups != options_.groups.size() || !base::ReadPod(&in, &evicted) ||
      !base::ReadPod(&in, &live) || live > in.size() / 9) {
    return fail();
  }
  for (std::uint64_t k = 0; k < live; ++k) {
    std::uint8_t g = 0;
    PageId page = 0;
    if (!base::ReadPod(&in, &g) || !base::ReadPod(&in, &page) || g >= groups || slot_of_[g].count(page) != 0) {
      return fail();
    }
    Touch(g, page);
  }
  if (evicted_items_ != 0) return fail();  // more than max_bytes: not this engine's state
  for (auto* generation : {&evicted_old_, &evicted_young_}) {
    for (auto& pages : *generation) {
      std::uint64_t count = 0;
      if (!base::ReadPod(&in, &count) || count > in.size() / 8) return fail();
      for (std::uint64_t k = 0; k < count; ++k) {
        PageId p = 0;
        if (!base::ReadPod(&in, &p)) return fail();
        pages.insert(p);
      }
    }
  }
  for (const auto& pages : evicted_young_) young_count_ += pages.size();
  if (!in.empty()) return fail();
  evicted_items_ = evicted;
  return true;
}

std::size_t HybridEngine::MemoryBytes() const {
  std::size_t bytes = weight_.capacity() * (sizeof(std::uint64_t) * 2 + sizeof(std::uint8_t) + sizeof(PageId));
  for (const auto& t : group_tree_) bytes += t.capacity() * sizeof(std::uint64_t);
  for (const auto& m : slot_of_)
    bytes += m.size() * (sizeof(PageId) + sizeof(std::uint32_t) + 16) + m.bucket_count() * 8;
  for (const auto* generation : {&evicted_young_, &evicted_old_}) {
    for (const auto& e : *generation) bytes += e.size() * (sizeof(PageId) + 16) + e.bucket_count() * 8;
  }
  return bytes;
}

}  // namespace kvwatch::curve
