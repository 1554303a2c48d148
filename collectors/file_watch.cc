#include "collectors/file_watch.h"

#include <glob.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>

#include "collectors/file_scan.h"

namespace kvwatch::collectors::tail {

namespace {

constexpr std::uint32_t kDirWatchMask =
    IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_ONLYDIR;
constexpr std::uint32_t kFileWatchMask = IN_MODIFY | IN_ATTRIB | IN_MOVE_SELF | IN_DELETE_SELF;

}  // namespace

FileWatch::FileWatch(bool enabled) {
  if (enabled) fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
}

FileWatch::~FileWatch() {
  if (fd_ >= 0) ::close(fd_);
}

void FileWatch::Drain() {
  if (fd_ < 0) return;
  alignas(inotify_event) char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buf + at);
      if (event->mask & IN_IGNORED) {  // a watched directory went away: re-add it later
        std::erase_if(dir_watches_, [&](const auto& entry) { return entry.second == event->wd; });
      }
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
}

void FileWatch::WatchDirectories(const std::vector<std::string>& patterns) {
  if (fd_ < 0) return;
  for (const std::string& pattern : patterns) {
    const std::string dir = Dirname(pattern);
    std::vector<std::string> dirs = HasGlobMagic(dir) ? Glob(dir, GLOB_ONLYDIR) : std::vector<std::string>{dir};
    for (const std::string& d : dirs) {
      if (dir_watches_.count(d)) continue;
      const int wd = ::inotify_add_watch(fd_, d.c_str(), kDirWatchMask);
      if (wd >= 0) dir_watches_[d] = wd;  // a missing directory is retried next pass
    }
  }
}

int FileWatch::WatchFile(int file_fd) {
  if (fd_ < 0) return -1;
  const std::string self = "/proc/self/fd/" + std::to_string(file_fd);
  return ::inotify_add_watch(fd_, self.c_str(), kFileWatchMask);
}

void FileWatch::Unwatch(int watch) {
  if (watch >= 0 && fd_ >= 0) ::inotify_rm_watch(fd_, watch);
}

}  // namespace kvwatch::collectors::tail
