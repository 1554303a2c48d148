// WindowSet: the curve windows (curve.windows), each with its name as written
// ("5m", which labels its series and API answers) and its length in seconds,
// ordered by length. The agent's window curves, policy canaries and group
// windows are indexed in this order, so window i's name and seconds are read
// here rather than recovered from one another.
//
// Thread safety: an immutable value after construction.
#ifndef KVWATCH_CURVE_WINDOW_SET_H_
#define KVWATCH_CURVE_WINDOW_SET_H_

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvwatch::curve {

struct Window {
  std::string name;  // e.g. "5m"
  double seconds = 0;

  bool operator==(const Window&) const = default;
};

class WindowSet {
 public:
  WindowSet() = default;
  WindowSet(std::initializer_list<Window> windows) : WindowSet(std::vector<Window>(windows)) {}
  // Sorted by length (stably: equal lengths keep their order; the config refuses them).
  explicit WindowSet(std::vector<Window> windows) : windows_(std::move(windows)) {
    std::stable_sort(windows_.begin(), windows_.end(),
                     [](const Window& a, const Window& b) { return a.seconds < b.seconds; });
  }

  std::size_t size() const { return windows_.size(); }
  bool empty() const { return windows_.empty(); }
  const Window& operator[](std::size_t i) const { return windows_[i]; }
  const Window& front() const { return windows_.front(); }
  std::vector<Window>::const_iterator begin() const { return windows_.begin(); }
  std::vector<Window>::const_iterator end() const { return windows_.end(); }

  // Each window's length, in order: what WindowedCurves, the canaries and the
  // group accounting take.
  std::vector<double> Seconds() const {
    std::vector<double> seconds;
    for (const Window& w : windows_) seconds.push_back(w.seconds);
    return seconds;
  }
  // "5m, 1h, 24h".
  std::string NameList() const {
    std::string names;
    for (const Window& w : windows_) names += (names.empty() ? "" : ", ") + w.name;
    return names;
  }
  // The index of the window named `name`, or of length `seconds`.
  std::optional<std::size_t> Find(std::string_view name) const {
    for (std::size_t i = 0; i < windows_.size(); ++i) {
      if (windows_[i].name == name) return i;
    }
    return std::nullopt;
  }
  std::optional<std::size_t> FindSeconds(double seconds) const {
    for (std::size_t i = 0; i < windows_.size(); ++i) {
      if (windows_[i].seconds == seconds) return i;
    }
    return std::nullopt;
  }

  bool operator==(const WindowSet&) const = default;

 private:
  std::vector<Window> windows_;
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_WINDOW_SET_H_
