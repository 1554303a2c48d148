// SlidingWindows<Slice>: recent time windows over any additive summary (a
// bucketed curve, a policy's totals). Each window of duration D keeps a ring of
// kSlicesPerWindow slices of D / kSlicesPerWindow; the window's value is the merge
// of the slices that start after now - D, so it covers between D - D/60 and D of
// arrivals (docs/semantics.md section 5).
//
// Slice needs Clear() and Merge(const Slice&).
//
// Reading a window merges its 60 slices. Per window, the merge of the slices other
// than the newest is cached: it stays valid while the clock stays in the same
// newest slice and only the newest slice is added to, so repeated reads (scrapes)
// cost two merges. Adding to an older slice (a late record), moving the clock to
// another slice, Restore() and any use of the mutable rings() drop it.
//
// Thread safety: none; Window() is const but updates the cache, so even reads
// must be serialized (the agent reads under its mutex).
#ifndef KVWATCH_CURVE_SLIDING_WINDOWS_H_
#define KVWATCH_CURVE_SLIDING_WINDOWS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace kvwatch::curve {

template <typename Slice>
class SlidingWindows {
 public:
  static constexpr std::uint32_t kSlicesPerWindow = 60;

  struct Ring {
    double duration_s = 0;
    std::int64_t newest_slice = 0;  // slice index of now
    std::vector<Slice> ring;        // ring[index % kSlicesPerWindow]
  };

  // windows_s: window durations in seconds (each > 0); every slice starts as `empty`.
  SlidingWindows(const std::vector<double>& windows_s, const Slice& empty) {
    for (double d : windows_s) {
      Ring w;
      w.duration_s = d;
      w.ring.assign(kSlicesPerWindow, empty);
      windows_.push_back(std::move(w));
    }
    cache_.resize(windows_.size());
  }

  // Moves the clock to t (no-op when t is not later or not finite), expiring old slices.
  void Advance(double t) {
    if (!std::isfinite(t)) return;
    if (!started_) {
      started_ = true;
      now_ = t;
      for (Ring& w : windows_) w.newest_slice = SliceOf(w, t);
      return;
    }
    if (t <= now_) return;
    now_ = t;
    for (Ring& w : windows_) AdvanceRing(&w, SliceOf(w, t));
  }

  // Calls add(slice) for the slice of time t in every window, after advancing the
  // clock to t (a non-finite t means now). Times may go backwards a little: a time
  // older than a window's oldest slice is not counted there. Returns whether it
  // was counted in every window.
  template <typename AddFn>
  bool Add(double t, AddFn&& add) {
    Advance(t);
    if (!std::isfinite(t)) t = now_;
    bool everywhere = true;
    for (Ring& w : windows_) {
      const std::int64_t s = std::min(SliceOf(w, t), w.newest_slice);
      if (s <= w.newest_slice - static_cast<std::int64_t>(kSlicesPerWindow)) {
        everywhere = false;
        continue;
      }
      if (s != w.newest_slice) cache_[&w - windows_.data()].valid = false;
      add(w.ring[Index(s)]);
    }
    return everywhere;
  }

  // The merge of window i's slices into `sum` (pass an empty slice).
  Slice Window(std::size_t i, Slice sum) const {
    const Ring& w = windows_[i];
    const std::size_t newest = Index(w.newest_slice);
    Cache& c = cache_[i];
    if (!c.valid || c.newest_slice != w.newest_slice) {
      c.older = sum;
      c.older.Clear();
      for (std::size_t k = 0; k < w.ring.size(); ++k) {
        if (k != newest) c.older.Merge(w.ring[k]);
      }
      c.newest_slice = w.newest_slice;
      c.valid = true;
    }
    sum.Merge(c.older);
    sum.Merge(w.ring[newest]);
    return sum;
  }

  std::size_t size() const { return windows_.size(); }
  double window_seconds(std::size_t i) const { return windows_[i].duration_s; }
  double now() const { return now_; }
  bool started() const { return started_; }
  // For serialization and in-place edits (drops the cached merges).
  std::vector<Ring>& rings() {
    DropCache();
    return windows_;
  }
  const std::vector<Ring>& rings() const { return windows_; }
  void Restore(bool started, double now) {
    DropCache();
    started_ = started;
    now_ = now;
  }

 private:
  static std::size_t Index(std::int64_t s) {
    return static_cast<std::size_t>(((s % kSlicesPerWindow) + kSlicesPerWindow) % kSlicesPerWindow);
  }
  static std::int64_t SliceOf(const Ring& w, double t) {
    return static_cast<std::int64_t>(std::floor(t / (w.duration_s / kSlicesPerWindow)));
  }
  static void AdvanceRing(Ring* w, std::int64_t slice) {
    if (slice <= w->newest_slice) return;
    // Clear the slices that fall out; at most a full ring.
    const std::int64_t steps = std::min<std::int64_t>(slice - w->newest_slice, kSlicesPerWindow);
    for (std::int64_t k = 1; k <= steps; ++k) w->ring[Index(w->newest_slice + k)].Clear();
    w->newest_slice = slice;
  }

  // Per window: the merge of every slice but the newest, while valid.
  struct Cache {
    bool valid = false;
    std::int64_t newest_slice = 0;
    Slice older;
  };
  void DropCache() {
    for (Cache& c : cache_) c.valid = false;
  }

  std::vector<Ring> windows_;
  mutable std::vector<Cache> cache_;
  double now_ = 0;
  bool started_ = false;
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_SLIDING_WINDOWS_H_
