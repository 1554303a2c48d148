// SampledEngine: spatial (hash-based) sampling of page ids for streams too large to
// track exactly, after SHARDS (Waldspurger et al., "Efficient MRC Construction with
// SHARDS", FAST 2015).
//
// A page is sampled when the top 24 bits of a 64-bit mix of its id fall below
// rate * 2^24, so a page is either always or never sampled. Only sampled pages go
// through the exact engine; their distances d' among sampled pages estimate the
// true distances as d' / rate. Each request's outcome holds its sampled pages only,
// in order, with the scaled distances and the prefix maximum taken over them:
// page-hit ratios read off a CurveAccumulator fed these outcomes estimate the exact
// ones directly, and page counts estimate the exact counts times rate.
//
// Request coverage is estimated over the requests that have at least one sampled
// page (a request with none says nothing about its requirement).
//
// Hot pages make fixed-rate sampling noisy: one page referenced by every request
// weighs as much as the rest of the sample when it falls in it. Callers correct
// that with CurveAccumulator::AdjustReferences (SHARDS-adj) once all references
// are counted: pass rate * (all page references).
//
// Thread safety: none.
#ifndef KVWATCH_CURVE_SAMPLED_ENGINE_H_
#define KVWATCH_CURVE_SAMPLED_ENGINE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "curve/mix.h"
#include "curve/stack_distance.h"

namespace kvwatch::curve {

class SampledEngine {
 public:
  // rate in (0, 1]. options.max_pages counts true pages: the engine tracks
  // max_pages * rate sampled pages.
  SampledEngine(const EngineOptions& options, double rate);

  // Whether page is in the sample.
  bool Sampled(PageId page) const { return (Mix(page) >> 40) < threshold_; }

  // Fills *out with the request's sampled pages' outcome (possibly empty).
  void Process(std::span<const PageId> pages, RequestOutcome* out);

  double rate() const { return rate_; }
  const StackDistanceEngine& engine() const { return engine_; }

 private:
  // Seeded: without the seed, id 0 (the shared first page of every request in
  // traces with sequential ids) would always be sampled.
  static std::uint64_t Mix(std::uint64_t k) { return Mix64(k ^ 0x9E3779B97F4A7C15ULL); }

  double rate_;
  std::uint64_t threshold_;
  StackDistanceEngine engine_;
  std::vector<PageId> sampled_;
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_SAMPLED_ENGINE_H_
