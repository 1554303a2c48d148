#include "agent/runtime/group_metrics.h"

#include <cmath>

namespace kvwatch::agent {
namespace {

using base::MetricDef;
using base::MetricType;

enum Family {
  kCapacityMisses,
  kGroupRequests,
  kGroupPageReferences,
  kGroupPageHits,
  kGroupCapacityMisses,
  kGroupUnattributed,
  kEvictedBy,
  kGroupIsolatedHits,
  kGroupWindowRequests,
  kGroupHitRatio,
  kGroupCoverage,
  kGroupIsolatedHitRatio,
  kFootprint,
  kRunningKv,
  kGroupMemory,
};

constexpr const char* kDimensionNames[2] = {"tenant", "class"};

}  // namespace

const MetricDef kGroupMetrics[15] = {
    {"kvwatch_capacity_misses_total", MetricType::kCounter,
     "Page references that would hit in an unlimited cache but miss in an LRU cache of capacity_pages (reusable "
     "pages lost to eviction).",
     "capacity_pages"},
    {"kvwatch_group_requests_total", MetricType::kCounter,
     "Requests of the tenant or class group (dimension: tenant or class; group: the top K names and other).",
     "dimension,group"},
    {"kvwatch_group_page_references_total", MetricType::kCounter, "Page references of the group's requests.",
     "dimension,group"},
    {"kvwatch_group_page_hits_total", MetricType::kCounter,
     "Page hits of the group's requests in the one shared LRU cache of capacity_pages.",
     "dimension,group,capacity_pages"},
    {"kvwatch_group_capacity_misses_total", MetricType::kCounter,
     "The group's page references that would hit in an unlimited cache but miss in the shared cache of "
     "capacity_pages.",
     "dimension,group,capacity_pages"},
    {"kvwatch_group_unattributed_misses_total", MetricType::kCounter,
     "The group's capacity misses whose evictors are unknown (distance beyond the tracked range); with the "
     "evicted_by row they sum to the group's capacity misses.",
     "dimension,group,capacity_pages"},
    {"kvwatch_evicted_by_total", MetricType::kCounter,
     "Capacity misses of the victim group at capacity_pages attributed to the evictor group: each miss is split "
     "over the groups whose references stood between the page's last use and its reuse (fractional pages).",
     "dimension,victim,evictor,capacity_pages"},
    {"kvwatch_group_isolated_page_hits_total", MetricType::kCounter,
     "Page hits the tenant group's requests would get in an LRU cache of capacity_pages of their own; minus the "
     "shared-cache hits: the hits lost to other tenants.",
     "group,capacity_pages"},
    {"kvwatch_group_window_requests", MetricType::kGauge, "Requests of the group within the window.",
     "window,dimension,group"},
    {"kvwatch_group_page_hit_ratio", MetricType::kGauge,
     "Page hit ratio of the group's requests in the shared LRU cache of capacity_pages over the window.",
     "window,dimension,group,capacity_pages"},
    {"kvwatch_group_request_coverage_ratio", MetricType::kGauge,
     "Fraction of the group's requests covered by the shared LRU cache of capacity_pages over the window.",
     "window,dimension,group,capacity_pages"},
    {"kvwatch_group_isolated_page_hit_ratio", MetricType::kGauge,
     "Page hit ratio of the tenant group's requests in an LRU cache of capacity_pages of their own, over the "
     "window (compare with kvwatch_group_page_hit_ratio: the difference is the interference).",
     "window,group,capacity_pages"},
    {"kvwatch_request_footprint_bytes", MetricType::kHistogram,
     "Each request's projected peak KV bytes per GPU rank, (prompt + output tokens) x bytes per token, by class.",
     "class"},
    {"kvwatch_running_kv_bytes", MetricType::kGauge,
     "KV bytes per GPU rank held by the engine's running requests: its KV-cache usage x capacity x bytes per page.",
     "collector"},
    {"kvwatch_group_memory_bytes", MetricType::kGauge,
     "Bytes held by the tenant and class accounting (folders, classifier, isolated engines)."},
};

std::vector<CapacityMisses> CapacityMissesOf(const curve::BucketedCurve& lifetime,
                                             const std::vector<std::uint64_t>& capacities, double scale) {
  std::vector<CapacityMisses> out;
  for (std::uint64_t c : capacities) {
    if (lifetime.bounds().empty() || c > lifetime.bounds().back()) continue;
    const std::uint64_t hits = lifetime.PageHits(c);
    const std::uint64_t unlimited = lifetime.unlimited_page_hits();
    out.push_back({c, static_cast<double>(unlimited >= hits ? unlimited - hits : 0) * scale});
  }
  return out;
}

void AppendCapacityMisses(MetricsBuilder& m, const std::vector<CapacityMisses>& misses) {
  for (const CapacityMisses& c : misses) {
    m.Add(kGroupMetrics[kCapacityMisses], std::round(c.misses), {{"capacity_pages", std::to_string(c.capacity_pages)}});
  }
}

void AppendGroupMetrics(MetricsBuilder& m, const curve::GroupAccounting::View& view,
                        const std::vector<std::string>& window_names) {
  const curve::GroupCurves& life = view.lifetime;
  const curve::GroupLayout& layout = life.layout();
  const std::vector<std::uint64_t>& caps = layout.capacities;
  const std::vector<std::string>* labels[2] = {&view.tenant_labels, &view.class_labels};
  auto groups = [&](std::uint32_t d) { return static_cast<std::uint32_t>(labels[d]->size()); };
  auto live = [&](std::uint32_t d, std::uint32_t g) { return !(*labels[d])[g].empty(); };
  auto cap = [&](std::size_t c) { return std::to_string(caps[c]); };

  for (std::uint32_t d = 0; d < 2; ++d) {
    for (std::uint32_t g = 0; g < groups(d); ++g) {
      if (!live(d, g)) continue;
      const Labels l = {{"dimension", kDimensionNames[d]}, {"group", (*labels[d])[g]}};
      m.Add(kGroupMetrics[kGroupRequests], static_cast<double>(life.requests(d, g)), l);
      m.Add(kGroupMetrics[kGroupPageReferences], static_cast<double>(life.page_refs(d, g)), l);
    }
  }
  for (std::uint32_t d = 0; d < 2; ++d) {
    for (std::uint32_t g = 0; g < groups(d); ++g) {
      if (!live(d, g)) continue;
      for (std::size_t c = 0; c < caps.size(); ++c) {
        const Labels l = {{"dimension", kDimensionNames[d]}, {"group", (*labels[d])[g]}, {"capacity_pages", cap(c)}};
        m.Add(kGroupMetrics[kGroupPageHits], static_cast<double>(life.shared_hits(d, g, c)), l);
        m.Add(kGroupMetrics[kGroupCapacityMisses], static_cast<double>(life.capacity_misses(d, g, c)), l);
        m.Add(kGroupMetrics[kGroupUnattributed], static_cast<double>(life.unattributed(d, g, c)), l);
      }
    }
  }
  for (std::uint32_t d = 0; d < 2; ++d) {
    for (std::size_t c = 0; c < caps.size(); ++c) {
      for (std::uint32_t v = 0; v < groups(d); ++v) {
        for (std::uint32_t e = 0; e < groups(d); ++e) {
          const double pages = life.evicted_by(d, c, v, e);
          if (!(pages > 0) || !live(d, v) || !live(d, e)) continue;
          m.Add(kGroupMetrics[kEvictedBy], pages,
                {{"dimension", kDimensionNames[d]},
                 {"victim", (*labels[d])[v]},
                 {"evictor", (*labels[d])[e]},
                 {"capacity_pages", cap(c)}});
        }
      }
    }
  }
  if (layout.isolated) {
    for (std::uint32_t g = 0; g < groups(0); ++g) {
      if (!live(0, g)) continue;
      for (std::size_t c = 0; c < caps.size(); ++c) {
        m.Add(kGroupMetrics[kGroupIsolatedHits], static_cast<double>(life.isolated_hits(g, c)),
              {{"group", (*labels[0])[g]}, {"capacity_pages", cap(c)}});
      }
    }
  }

  // Windows: the groups' curves in the shared cache (and alone) at each capacity.
  for (std::size_t w = 0; w < view.windows.size() && w < window_names.size(); ++w) {
    const curve::GroupCurves& win = view.windows[w];
    for (std::uint32_t d = 0; d < 2; ++d) {
      for (std::uint32_t g = 0; g < groups(d); ++g) {
        if (!live(d, g)) continue;
        m.Add(kGroupMetrics[kGroupWindowRequests], static_cast<double>(win.requests(d, g)),
              {{"window", window_names[w]}, {"dimension", kDimensionNames[d]}, {"group", (*labels[d])[g]}});
      }
    }
    for (std::uint32_t d = 0; d < 2; ++d) {
      for (std::uint32_t g = 0; g < groups(d); ++g) {
        if (!live(d, g) || win.requests(d, g) == 0) continue;
        for (std::size_t c = 0; c < caps.size(); ++c) {
          const Labels l = {{"window", window_names[w]},
                            {"dimension", kDimensionNames[d]},
                            {"group", (*labels[d])[g]},
                            {"capacity_pages", cap(c)}};
          m.Add(kGroupMetrics[kGroupHitRatio], win.shared(d, g).PageHitRatio(caps[c]), l);
          m.Add(kGroupMetrics[kGroupCoverage], win.shared(d, g).RequestCoverage(caps[c]), l);
        }
      }
    }
    if (layout.isolated) {
      for (std::uint32_t g = 0; g < groups(0); ++g) {
        if (!live(0, g) || win.requests(0, g) == 0) continue;
        for (std::size_t c = 0; c < caps.size(); ++c) {
          m.Add(kGroupMetrics[kGroupIsolatedHitRatio], win.isolated(g).PageHitRatio(caps[c]),
                {{"window", window_names[w]}, {"group", (*labels[0])[g]}, {"capacity_pages", cap(c)}});
        }
      }
    }
  }

  m.Add(kGroupMetrics[kGroupMemory], static_cast<double>(view.memory_bytes));

  // Footprints, per class, when bytes per token are known.
  if (layout.bytes_per_token > 0) {
    for (std::uint32_t g = 0; g < groups(1); ++g) {
      if (!live(1, g)) continue;
      const std::span<const std::uint64_t> b = life.footprint_buckets(g);
      std::uint64_t total = 0;
      for (std::uint64_t n : b) total += n;
      if (total == 0) continue;
      std::vector<std::pair<double, std::uint64_t>> buckets;
      std::uint64_t cumulative = 0;
      for (std::uint32_t k = 0; k <= kFootprintHighBucket; ++k) {
        cumulative += b[k];
        if (k >= kFootprintLowBucket) buckets.emplace_back(std::ldexp(1.0, static_cast<int>(k)), cumulative);
      }
      m.Histogram(kGroupMetrics[kFootprint], buckets, total, life.footprint_sum(g), {{"class", (*labels[1])[g]}});
    }
  }
}

void AppendRunningKv(MetricsBuilder& m, const std::string& collector, const collectors::EngineSignals& s,
                     std::optional<double> bytes_per_page) {
  if (!s.kv_cache_usage || !s.capacity_pages || !bytes_per_page) return;
  if (!(*s.kv_cache_usage >= 0) || !(*s.capacity_pages >= 0)) return;
  m.Add(kGroupMetrics[kRunningKv], *s.kv_cache_usage * *s.capacity_pages * *bytes_per_page, {{"collector", collector}});
}

alerts::CapacityMissInputs CapacityMissInputsOf(double page_references, const std::vector<CapacityMisses>& misses,
                                                const curve::GroupAccounting::View* view) {
  alerts::CapacityMissInputs in;
  if (misses.empty()) return in;
  in.page_references = page_references;
  for (const CapacityMisses& c : misses)
    in.capacity_misses.push_back({static_cast<double>(c.capacity_pages), c.misses});
  if (view == nullptr) return in;
  const curve::GroupCurves& life = view->lifetime;
  const std::vector<std::uint64_t>& caps = life.layout().capacities;
  const std::vector<std::string>* labels[2] = {&view->tenant_labels, &view->class_labels};
  for (std::uint32_t d = 0; d < 2; ++d) {
    const auto n = static_cast<std::uint32_t>(labels[d]->size());
    for (std::size_t c = 0; c < caps.size(); ++c) {
      for (std::uint32_t v = 0; v < n; ++v) {
        for (std::uint32_t e = 0; e < n; ++e) {
          const double pages = life.evicted_by(d, c, v, e);
          if (!(pages > 0) || (*labels[d])[v].empty() || (*labels[d])[e].empty()) continue;
          in.evicted_by.push_back(
              {kDimensionNames[d], (*labels[d])[v], (*labels[d])[e], static_cast<double>(caps[c]), pages});
        }
      }
    }
  }
  return in;
}

}  // namespace kvwatch::agent
