// SlidingWindows<Slice>: recent time windows over any additive summary (a
// bucketed curve, a policy's totals). Each window of duration D keeps a ring of
// kSlicesPerWindow slices of D / kSlicesPerWindow; the window's value is the merge
// of the slices that start after now - D, so it covers between D - D/60 and D of
// arrivals (../shared/docs/curve-semantics.md section 5).
//
// Slice needs Clear() and Merge(const Slice&).
//
// Thread safety: none.
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
      add(w.ring[Index(s)]);
    }
    return everywhere;
  }

  // The merge of window i's slices into `sum` (pass an empty slice).
  Slice Window(std::size_t i, Slice sum) const {
    for (const Slice& slice : windows_[i].ring) sum.Merge(slice);
    return sum;
  }

  std::size_t size() const { return windows_.size(); }
  double window_seconds(std::size_t i) const { return windows_[i].duration_s; }
  double now() const { return now_; }
  bool started() const { return started_; }
  // For serialization.
  std::vector<Ring>& rings() { return windows_; }
  const std::vector<Ring>& rings() const { return windows_; }
  void Restore(bool started, double now) {
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

  std::vector<Ring> windows_;
  double now_ = 0;
  bool started_ = false;
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_SLIDING_WINDOWS_H_
