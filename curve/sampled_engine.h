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
// Fixed-size mode (max_sampled_pages > 0; SHARDS fixed-size, section 4.2 of the
// paper). The rate starts at `rate` and adapts down so that the sample set S (the
// distinct sampled pages seen and not yet dropped) never holds more than
// max_sampled_pages pages after a request. Exactly what happens:
//   - sampling compares the full 64-bit mix of a page id with a 64-bit threshold T
//     (sampled iff mix < T; the rate is R = T / 2^64). Mix64 is a bijection, so
//     distinct pages have distinct hash values;
//   - a max-heap holds (hash, page) of every page in S;
//   - after each request, while |S| > max_sampled_pages: pop the page with the
//     largest hash h, set T = h (that page and every page with a larger hash leave
//     the sample for good, since T never rises), drop the page from S and from the
//     exact engine (StackDistanceEngine::Forget: it no longer counts in any
//     distance, and a later reference would not be sampled);
//   - a request's distances are scaled by 1 / R with R the rate in force while its
//     pages were sampled (before the lowering that request may cause);
//   - counts. The paper multiplies every histogram count by R'/R when the rate
//     drops from R to R'. With integer counts, many small drops would round small
//     buckets away, and the agent's Prometheus counters must never decrease. So
//     instead each sampled request is counted with weight() = round(kWeightUnit /
//     R): the counts then hold the same proportions as the rescaled ones (weights
//     relative to each other are exactly R'/R), ratios read off them directly, and
//     count / kWeightUnit estimates the count in the full stream.
// The exact engine is then bounded to min(max_pages * rate, max_sampled_pages)
// pages, and MemoryBytes() stays flat however many distinct pages arrive. At a
// fixed rate (max_sampled_pages == 0) weight() is the constant round(kWeightUnit
// / rate), and sampling and outcomes are as before.
//
// Thread safety: none.
#ifndef KVWATCH_CURVE_SAMPLED_ENGINE_H_
#define KVWATCH_CURVE_SAMPLED_ENGINE_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "base/mix.h"
#include "curve/page_map.h"
#include "curve/stack_distance.h"

namespace kvwatch::curve {

class SampledEngine {
 public:
  // A sampled reference's weight at rate 1 (see weight()).
  static constexpr std::uint64_t kWeightUnit = 1024;

  // rate in (0, 1]. options.max_pages counts true pages: the engine tracks
  // max_pages * rate sampled pages. max_sampled_pages > 0 turns on fixed-size
  // mode: the rate adapts down from `rate` so that at most that many sampled
  // pages are kept.
  SampledEngine(const EngineOptions& options, double rate, std::uint32_t max_sampled_pages = 0);

  // Whether page is in the sample (at the current rate).
  bool Sampled(PageId page) const { return all_ || Mix(page) < threshold_; }

  // Fills *out with the request's sampled pages' outcome (possibly empty).
  void Process(std::span<const PageId> pages, RequestOutcome* out);

  // The current rate (lowered in fixed-size mode).
  double rate() const { return rate_; }
  // The weight of the last request's outcome: round(kWeightUnit / R), R the rate
  // its pages were sampled at. count / kWeightUnit estimates full-stream counts.
  std::uint64_t weight() const { return weight_; }
  std::uint32_t max_sampled_pages() const { return max_sampled_; }
  // Pages in the sample set (fixed-size mode; else the engine's tracked pages).
  std::size_t sampled_pages() const { return max_sampled_ ? members_.size() : engine_.tracked_pages(); }
  const StackDistanceEngine& engine() const { return engine_; }
  // The exact engine plus the sample set and its heap.
  std::size_t MemoryBytes() const;
  void Clear();

  // Checkpoint of the full state (rate, sample set, engine).
  std::vector<std::uint8_t> Serialize() const;
  // False (and the engine cleared) when the bytes are not a valid state.
  bool Deserialize(std::span<const std::uint8_t> bytes);

 private:
  // Seeded: without the seed, id 0 (the shared first page of every request in
  // traces with sequential ids) would always be sampled.
  static std::uint64_t Mix(std::uint64_t k) { return base::Mix64(k ^ 0x9E3779B97F4A7C15ULL); }
  void SetRateFromThreshold();
  void Shrink();

  double initial_rate_;
  double rate_;
  bool all_;                 // rate 1: every page is sampled
  std::uint64_t threshold_;  // sampled iff Mix(page) < threshold_ (when !all_)
  std::uint64_t weight_;
  std::uint32_t max_sampled_;
  StackDistanceEngine engine_;
  std::vector<PageId> sampled_;
  PageMap members_;                                     // fixed-size: the sample set S
  std::vector<std::pair<std::uint64_t, PageId>> heap_;  // fixed-size: max-heap of (hash, page) over S
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_SAMPLED_ENGINE_H_
