#include "agent/cli/replay_hybrid.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "curve/hybrid_sim.h"

namespace kvwatch::agent {

HybridReplay::HybridReplay(const curve::HybridEngineOptions& options, std::vector<curve::KvGroupSizing> groups,
                           double coverage_share, bool check)
    : engine_(options), groups_(std::move(groups)), acc_(coverage_share), check_(check) {}

void HybridReplay::Add(std::span<const curve::PageId> pages, std::int64_t input_tokens, std::int64_t output_tokens) {
  if (check_) {
    pages_.insert(pages_.end(), pages.begin(), pages.end());
    ends_.push_back(pages_.size());
    tokens_.emplace_back(input_tokens, output_tokens);
  }
  engine_.Process(pages, input_tokens, output_tokens, &outcome_);
  acc_.Add(outcome_);
  if (++requests_ % kSampleEvery == 0) Sample(&occupancy_);
}

// Adds the bytes each group holds at 1, 2, 4, ... units, up to the first
// capacity that holds everything. A row that appears later starts with the
// earlier samples' totals: a pool that large held everything then.
void HybridReplay::Sample(Occupancy* o) const {
  const std::vector<std::uint64_t> all = engine_.GroupBytesAt(std::numeric_limits<std::uint64_t>::max());
  if (o->all.empty()) o->all.assign(all.size(), 0);
  const std::uint64_t unit = engine_.unit_bytes();
  const std::uint64_t everything_from = (engine_.BytesToHoldAll() + unit - 1) / unit;
  for (std::size_t k = 0; k < 64; ++k) {
    const std::uint64_t units = std::uint64_t{1} << k;
    if (k == o->rows.size()) o->rows.push_back(o->all);
    const bool everything = units >= everything_from;
    const std::vector<std::uint64_t> held = everything ? all : engine_.GroupBytesAt(units * unit);
    for (std::size_t g = 0; g < held.size(); ++g) o->rows[k][g] += static_cast<double>(held[g]);
    if (everything) {
      for (std::size_t j = k + 1; j < o->rows.size(); ++j) {
        for (std::size_t g = 0; g < all.size(); ++g) o->rows[j][g] += static_cast<double>(all[g]);
      }
      break;
    }
  }
  for (std::size_t g = 0; g < all.size(); ++g) o->all[g] += static_cast<double>(all[g]);
  ++o->samples;
}

ReplayHybrid HybridReplay::Result(const curve::ReportOptions& main, double full_count_bytes_per_token) const {
  // The state at the end counts too, when the last sample is older.
  Occupancy occupancy = occupancy_;
  if (requests_ % kSampleEvery != 0) Sample(&occupancy);
  ReplayHybrid h;
  h.groups = groups_;
  h.pool_shares = engine_.options().pool_shares;
  h.unit_bytes = static_cast<double>(engine_.unit_bytes());
  curve::ReportOptions options = main;
  options.capacities.clear();  // the main capacities are pages of the full-attention count
  options.bytes_per_token = h.unit_bytes / static_cast<double>(engine_.options().page_tokens);
  h.report = curve::BuildCurveReport(acc_, options);
  h.report.requests = requests_;
  h.full_count_bytes_per_token = full_count_bytes_per_token;
  h.samples = occupancy.samples;
  h.engine_bytes = engine_.MemoryBytes();
  for (std::size_t k = 0; k < occupancy.rows.size(); ++k) {
    HybridOccupancy row;
    row.capacity_units = std::uint64_t{1} << k;
    row.capacity_bytes = static_cast<double>(row.capacity_units) * h.unit_bytes;
    for (double sum : occupancy.rows[k]) {
      row.group_bytes.push_back(occupancy.samples > 0 ? sum / static_cast<double>(occupancy.samples) : 0);
    }
    h.occupancy.push_back(std::move(row));
  }
  if (check_) RunCheck(&h);
  return h;
}

// One simulation per variant per capacity: the hybrid page-hit working sets.
void HybridReplay::RunCheck(ReplayHybrid* h) const {
  struct Variant {
    bool touch_skipped, early_free, cap_prompt;
  };
  const Variant variants[] = {
      {true, true, false}, {true, false, false}, {false, true, false}, {true, true, true}, {false, true, true}};
  for (const curve::WorkingSetEntry& e : h->report.working_set) {
    if (e.target != "page_hit" || !e.capacity_pages || e.fraction > 0.99) continue;
    HybridCheckRow row;
    row.fraction = e.fraction;
    row.capacity_units = *e.capacity_pages;
    row.capacity_bytes = static_cast<double>(row.capacity_units) * h->unit_bytes;
    const double refs = static_cast<double>(acc_.page_refs());
    row.page_hit_ratio.push_back(refs > 0 ? static_cast<double>(acc_.PageHits(row.capacity_units)) / refs : 0);
    for (const Variant& v : variants) {
      curve::HybridSimOptions options;
      options.engine = engine_.options();
      options.touch_skipped = v.touch_skipped;
      options.early_free = v.early_free;
      options.cap_prompt = v.cap_prompt;
      curve::HybridPoolSim sim(options, row.capacity_units * engine_.unit_bytes());
      std::size_t begin = 0;
      for (std::size_t r = 0; r < ends_.size(); ++r) {
        sim.Request(std::span<const curve::PageId>(pages_.data() + begin, ends_[r] - begin), tokens_[r].first,
                    tokens_[r].second);
        begin = ends_[r];
      }
      row.page_hit_ratio.push_back(
          sim.page_refs() > 0 ? static_cast<double>(sim.page_hits()) / static_cast<double>(sim.page_refs()) : 0);
      if (!v.touch_skipped && v.early_free && v.cap_prompt) row.vllm_overflows = sim.overflows();
    }
    h->check.push_back(std::move(row));
  }
}

}  // namespace kvwatch::agent
