#include "curve/tiers.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace kvwatch::curve {
namespace {

bool ParseDouble(const std::string& s, double* out) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && ptr == end && std::isfinite(*out);
}

}  // namespace

base::Result<TierSpec> ParseTierSpec(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t colon; (colon = text.find(':', start)) != std::string::npos; start = colon + 1) {
    parts.push_back(text.substr(start, colon - start));
  }
  parts.push_back(text.substr(start));
  const std::string expected = "expected NAME:CAPACITY_PAGES[:BANDWIDTH_GBPS[:LATENCY_US]], e.g. dram:200000:50:10";
  if (parts.size() < 2 || parts.size() > 4 || parts[0].empty()) {
    return base::Result<TierSpec>::Error("tier '" + text + "': " + expected);
  }
  TierSpec tier;
  tier.name = parts[0];
  double capacity = 0;
  // At most 2^53 pages: whole numbers are exact in a double, and the tiers' sum fits 64 bits.
  if (!ParseDouble(parts[1], &capacity) || !(capacity >= 1 && capacity <= kMaxTierCapacityPages) ||
      capacity != std::floor(capacity)) {
    return base::Result<TierSpec>::Error("tier '" + text + "': capacity must be a whole number of pages from 1 to " +
                                         std::to_string(static_cast<std::uint64_t>(kMaxTierCapacityPages)));
  }
  tier.capacity_pages = static_cast<std::uint64_t>(capacity);
  if (parts.size() >= 3) {
    double gbps = 0;
    if (!ParseDouble(parts[2], &gbps) || gbps <= 0) {
      return base::Result<TierSpec>::Error("tier '" + text + "': bandwidth must be a number of GB/s > 0");
    }
    tier.bandwidth_bytes_per_s = gbps * 1e9;
  }
  if (parts.size() == 4) {
    double us = 0;
    if (!ParseDouble(parts[3], &us) || us < 0) {
      return base::Result<TierSpec>::Error("tier '" + text + "': latency must be a number of microseconds >= 0");
    }
    tier.latency_s = us * 1e-6;
  }
  return tier;
}

TierAccumulator::TierAccumulator(std::vector<TierSpec> tiers, double page_bytes, std::uint64_t page_tokens,
                                 std::optional<PrefillCost> cost, std::optional<double> flops_per_s)
    : tiers_(std::move(tiers)),
      page_bytes_(page_bytes),
      page_tokens_(page_tokens),
      cost_(cost),
      flops_per_s_(flops_per_s) {
  in_time_known_ = page_bytes_ > 0 && cost_.has_value() && flops_per_s_.has_value() && *flops_per_s_ > 0;
  for (std::size_t k = 1; k < tiers_.size(); ++k) {
    if (tiers_[k].bandwidth_bytes_per_s <= 0) in_time_known_ = false;
  }
  for (const TierSpec& t : tiers_) {
    total_capacity_ += t.capacity_pages;
    bounds_.push_back(total_capacity_);
    totals_.push_back(TierTotals{t.name, 0, 0, 0});
  }
  req_pages_.resize(tiers_.size());
  req_flops_.resize(tiers_.size());
}

std::size_t TierAccumulator::TierOf(std::uint32_t distance) const {
  return static_cast<std::size_t>(
      std::upper_bound(bounds_.begin(), bounds_.end(), static_cast<std::uint64_t>(distance)) - bounds_.begin());
}

void TierAccumulator::Add(const RequestOutcome& outcome) {
  if (tiers_.empty()) return;
  std::fill(req_pages_.begin(), req_pages_.end(), 0);
  std::fill(req_flops_.begin(), req_flops_.end(), 0.0);
  // The prefix hits from the hierarchy: m(i) < total capacity.
  std::size_t hits = 0;
  for (; hits < outcome.size() && outcome.prefix_max[hits] < total_capacity_; ++hits) {
    const std::size_t k = TierOf(outcome.distance[hits]);
    ++req_pages_[k];
    if (cost_) req_flops_[k] += cost_->PageFlops(hits, page_tokens_);
  }
  prefix_hits_ += hits;
  for (std::size_t k = 0; k < tiers_.size(); ++k) {
    totals_[k].pages_served += req_pages_[k];
    if (k > 0) totals_[k].bytes_moved += static_cast<double>(req_pages_[k]) * page_bytes_;
  }
  if (!in_time_known_) return;
  // Which tiers' transfers beat recomputation for this request.
  std::vector<bool> in_time(tiers_.size(), true);
  for (std::size_t k = 1; k < tiers_.size(); ++k) {
    if (req_pages_[k] == 0) continue;
    const double move_s =
        static_cast<double>(req_pages_[k]) * page_bytes_ / tiers_[k].bandwidth_bytes_per_s + tiers_[k].latency_s;
    in_time[k] = move_s < req_flops_[k] / *flops_per_s_;
  }
  for (std::size_t i = 0; i < hits; ++i) {
    const std::size_t k = TierOf(outcome.distance[i]);
    if (!in_time[k]) break;
    ++totals_[k].hits_in_time;
    ++hits_in_time_;
  }
}

void TierAccumulator::Merge(const TierAccumulator& other) {
  for (std::size_t k = 0; k < totals_.size() && k < other.totals_.size(); ++k) {
    totals_[k].pages_served += other.totals_[k].pages_served;
    totals_[k].bytes_moved += other.totals_[k].bytes_moved;
    totals_[k].hits_in_time += other.totals_[k].hits_in_time;
  }
  prefix_hits_ += other.prefix_hits_;
  hits_in_time_ += other.hits_in_time_;
}

}  // namespace kvwatch::curve
