// ProgressBar: a one-line progress bar on a terminal (stderr), redrawn at most ten
// times a second. Disabled, every call is a no-op, so callers need no branches.
#ifndef KVWATCH_AGENT_PROGRESS_H_
#define KVWATCH_AGENT_PROGRESS_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace kvwatch::agent {

class ProgressBar {
 public:
  ProgressBar(std::FILE* out, bool enabled) : out_(out), enabled_(enabled) {}
  ~ProgressBar() { Clear(); }

  // done of total units (total 0: unknown).
  void Update(const std::string& label, std::uint64_t done, std::uint64_t total) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    constexpr int kWidth = 30;
    if (total > 0) {
      const double f = std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
      const int fill = static_cast<int>(f * kWidth);
      std::fprintf(out_, "\r%s [%.*s%*s] %3d%%", Tail(label).c_str(), fill, "##############################",
                   kWidth - fill, "", static_cast<int>(f * 100));
    } else {
      std::fprintf(out_, "\r%s %.1f MB", Tail(label).c_str(), static_cast<double>(done) / 1e6);
    }
    std::fflush(out_);
  }

  // Erases the bar so other output starts on a clean line.
  void Clear() {
    if (!enabled_ || !drawn_) return;
    std::fprintf(out_, "\r\033[K");
    std::fflush(out_);
    drawn_ = false;
  }

 private:
  static std::string Tail(const std::string& s) { return s.size() <= 40 ? s : "..." + s.substr(s.size() - 37); }

  std::FILE* out_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_PROGRESS_H_
