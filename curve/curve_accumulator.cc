#include "curve/curve_accumulator.h"

#include <algorithm>
#include <cmath>

namespace kvwatch::curve {
namespace {

// ceil(x), guarded against x landing a hair above an integer through rounding
// (0.95 * 100 is 95.00000000000001 in binary floating point).

}  // namespace

CurveAccumulator::CurveAccumulator(double coverage_share) : coverage_share_(coverage_share) {}

void CurveAccumulator::AddAt(std::vector<std::uint64_t>* hist, std::uint64_t index, std::uint64_t amount) {
  if (index >= hist->size()) hist->resize(std::max<std::size_t>(index + 1, hist->size() * 3 / 2));
  (*hist)[index] += amount;
}

void CurveAccumulator::Add(const RequestOutcome& outcome) {
  prefix_valid_ = false;
  totals_.Add(outcome);
  const std::size_t n = outcome.size();
  // m is non-decreasing, so the pages that hit at some tracked capacity are a prefix.
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t c = outcome.hit_capacity(i);
    if (c == 0) break;
    if (c >= hits_.size()) {
      const std::size_t size = std::max<std::size_t>(c + 1, hits_.size() * 3 / 2);
      hits_.resize(size);
      depth_.resize(size);
    }
    ++hits_[c];
    depth_[c] += i;
  }
  const std::uint32_t r = outcome.Requirement(coverage_share_);
  if (r == kBeyondTracked) {
    ++totals_.requests_beyond;
  } else {
    AddAt(&required_, r, 1);
  }
}

void CurveAccumulator::Merge(const CurveAccumulator& other) {
  prefix_valid_ = false;
  totals_.Merge(other.totals_);
  auto merge = [](std::vector<std::uint64_t>* into, const std::vector<std::uint64_t>& from) {
    if (from.size() > into->size()) into->resize(from.size());
    for (std::size_t i = 0; i < from.size(); ++i) (*into)[i] += from[i];
  };
  merge(&hits_, other.hits_);
  merge(&depth_, other.depth_);
  merge(&required_, other.required_);
}

void CurveAccumulator::AdjustReferences(std::uint64_t page_refs) {
  prefix_valid_ = false;
  if (page_refs >= totals_.page_refs) {
    const std::uint64_t extra = page_refs - totals_.page_refs;
    if (extra > 0) {
      AddAt(&hits_, 1, extra);
      if (depth_.size() < hits_.size()) depth_.resize(hits_.size());
      totals_.unlimited_page_hits += extra;
    }
  } else {
    std::uint64_t excess = totals_.page_refs - page_refs;
    for (std::size_t c = 1; c < hits_.size() && excess > 0; ++c) {
      const std::uint64_t take = std::min(excess, hits_[c]);
      if (take == 0) continue;
      // Keep the mean depth of what stays.
      depth_[c] = static_cast<std::uint64_t>(static_cast<double>(depth_[c]) * static_cast<double>(hits_[c] - take) /
                                             static_cast<double>(hits_[c]));
      hits_[c] -= take;
      totals_.unlimited_page_hits -= take;
      excess -= take;
    }
  }
  totals_.page_refs = page_refs;
}

void CurveAccumulator::Clear() { *this = CurveAccumulator(coverage_share_); }

double CurveAccumulator::UnlimitedPageHitRatio() const { return totals_.UnlimitedPageHitRatio(); }

void CurveAccumulator::BuildPrefixSums() const {
  if (prefix_valid_) return;
  auto prefix = [](const std::vector<std::uint64_t>& hist, std::vector<std::uint64_t>* out) {
    // Trim trailing zeros so MaxCapacity() is the last capacity that changes anything.
    std::size_t n = hist.size();
    while (n > 0 && hist[n - 1] == 0) --n;
    out->resize(n);
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < n; ++i) (*out)[i] = sum += hist[i];
  };
  prefix(hits_, &hits_prefix_);
  prefix(required_, &required_prefix_);
  depth_prefix_.resize(hits_prefix_.size());
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < depth_prefix_.size(); ++i) depth_prefix_[i] = sum += depth_[i];
  prefix_valid_ = true;
}

std::uint64_t CurveAccumulator::PrefixAt(const std::vector<std::uint64_t>& prefix, std::uint64_t capacity) {
  if (prefix.empty()) return 0;
  return prefix[std::min<std::uint64_t>(capacity, prefix.size() - 1)];
}

std::uint64_t CurveAccumulator::MaxCapacity() const {
  BuildPrefixSums();
  const std::size_t n = std::max(hits_prefix_.size(), required_prefix_.size());
  return n == 0 ? 0 : n - 1;
}

std::uint64_t CurveAccumulator::PageHits(std::uint64_t capacity) const {
  BuildPrefixSums();
  return PrefixAt(hits_prefix_, capacity);
}

double CurveAccumulator::PageHitRatio(std::uint64_t capacity) const {
  return totals_.page_refs == 0 ? 0.0
                                : static_cast<double>(PageHits(capacity)) / static_cast<double>(totals_.page_refs);
}

double CurveAccumulator::RequestCoverage(std::uint64_t capacity) const {
  BuildPrefixSums();
  if (totals_.requests == 0) return 1.0;
  return static_cast<double>(PrefixAt(required_prefix_, capacity)) / static_cast<double>(totals_.requests);
}

std::uint64_t CurveAccumulator::HitDepthSum(std::uint64_t capacity) const {
  BuildPrefixSums();
  return PrefixAt(depth_prefix_, capacity);
}

std::optional<std::uint64_t> CurveAccumulator::WorkingSetForPageHits(double fraction) const {
  BuildPrefixSums();
  return CapacityForPageHits(CeilCount(fraction * static_cast<double>(totals_.unlimited_page_hits)));
}

std::optional<std::uint64_t> CurveAccumulator::CapacityForPageHits(std::uint64_t hits) const {
  BuildPrefixSums();
  if (hits == 0) return 0;
  auto it = std::lower_bound(hits_prefix_.begin(), hits_prefix_.end(), hits);
  if (it == hits_prefix_.end()) return std::nullopt;
  return static_cast<std::uint64_t>(it - hits_prefix_.begin());
}

std::optional<std::uint64_t> CurveAccumulator::WorkingSetForCoverage(double fraction) const {
  BuildPrefixSums();
  // Nearest rank: the smallest C covering ceil(q * requests) requests.
  const std::uint64_t need = CeilCount(fraction * static_cast<double>(totals_.requests));
  if (need == 0) return 0;
  auto it = std::lower_bound(required_prefix_.begin(), required_prefix_.end(), need);
  if (it == required_prefix_.end()) return std::nullopt;
  return static_cast<std::uint64_t>(it - required_prefix_.begin());
}

void CompactCurveAccumulator::MergeEntries(std::vector<Entry>* entries) {
  std::sort(entries->begin(), entries->end(), [](const Entry& a, const Entry& b) { return a.capacity < b.capacity; });
  std::size_t out = 0;
  for (std::size_t i = 0; i < entries->size(); ++i) {
    const Entry& e = (*entries)[i];
    if (out > 0 && (*entries)[out - 1].capacity == e.capacity) {
      (*entries)[out - 1].count += e.count;
      (*entries)[out - 1].depth += e.depth;
    } else {
      (*entries)[out++] = e;
    }
  }
  entries->resize(out);
}

CompactCurveAccumulator::CompactCurveAccumulator(const CurveAccumulator& so_far)
    : coverage_share_(so_far.coverage_share()), dense_(std::make_unique<CurveAccumulator>(so_far)) {}

bool CompactCurveAccumulator::Append(std::vector<Entry>* entries, std::uint32_t* merged_size, std::uint32_t capacity,
                                     std::uint64_t count, std::uint64_t depth) {
  // Consecutive pages of a request often share a capacity: one entry.
  if (!entries->empty() && entries->back().capacity == capacity) {
    entries->back().count += count;
    entries->back().depth += depth;
    return false;
  }
  if (entries->size() >= 2 * std::size_t{*merged_size} + 16) {
    MergeEntries(entries);
    *merged_size = static_cast<std::uint32_t>(entries->size());
    // Keep the vector's slack proportional to what it holds after a merge.
    if (entries->capacity() > 4 * entries->size() + 64) entries->shrink_to_fit();
  }
  entries->push_back({capacity, count, depth});
  return true;
}

void CompactCurveAccumulator::Add(const RequestOutcome& outcome) {
  if (dense_) {
    dense_->Add(outcome);
    return;
  }
  totals_.Add(outcome);
  const std::size_t n = outcome.size();
  for (std::size_t i = 0; i < n; ++i) {  // as CurveAccumulator::Add: the hits are a prefix
    const std::uint32_t c = outcome.hit_capacity(i);
    if (c == 0) break;
    largest_ = std::max(largest_, c);
    if (Append(&hits_, &hits_merged_, c, 1, i)) Appended();
  }
  const std::uint32_t r = outcome.Requirement(coverage_share_);
  if (r == kBeyondTracked) {
    ++totals_.requests_beyond;
  } else {
    largest_ = std::max(largest_, r);
    if (Append(&required_, &required_merged_, r, 1, 0)) Appended();
  }
  MaybeTurnDense();
}

void CompactCurveAccumulator::MaybeTurnDense() {
  const std::uint64_t range = std::uint64_t{largest_} + 1;
  const std::uint64_t held = (hits_.size() + required_.size()) * sizeof(Entry);
  const std::uint64_t dense_bytes = range * 3 * sizeof(std::uint64_t);  // hits, depth, required
  if (std::uint64_t{appended_} < kDenseAfter * range && held < dense_bytes) return;
  dense_ = std::make_unique<CurveAccumulator>(Dense());
  std::vector<Entry>().swap(hits_);
  std::vector<Entry>().swap(required_);
  hits_merged_ = required_merged_ = 0;
}

CurveAccumulator CompactCurveAccumulator::Dense() const {
  if (dense_) return *dense_;
  CurveAccumulator acc(coverage_share_);
  acc.totals_ = totals_;
  auto size = [](const std::vector<Entry>& entries) {
    std::size_t n = 0;
    for (const Entry& e : entries) n = std::max<std::size_t>(n, std::size_t{e.capacity} + 1);
    return n;
  };
  acc.hits_.resize(size(hits_));
  acc.depth_.resize(acc.hits_.size());
  acc.required_.resize(size(required_));
  for (const Entry& e : hits_) {
    acc.hits_[e.capacity] += e.count;
    acc.depth_[e.capacity] += e.depth;
  }
  for (const Entry& e : required_) acc.required_[e.capacity] += e.count;
  return acc;
}

std::size_t CompactCurveAccumulator::MemoryBytes() const {
  std::size_t bytes = sizeof(*this) + (hits_.capacity() + required_.capacity()) * sizeof(Entry);
  if (dense_) {
    bytes +=
        sizeof(CurveAccumulator) +
        (dense_->hits_.capacity() + dense_->depth_.capacity() + dense_->required_.capacity()) * sizeof(std::uint64_t);
  }
  return bytes;
}

}  // namespace kvwatch::curve
