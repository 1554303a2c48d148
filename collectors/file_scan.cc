#include "collectors/file_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <utility>

namespace kvwatch::collectors::tail {

namespace {

constexpr std::int64_t kCopyCtimeSlackNs = 1'000'000'000;  // file timestamps use a coarse clock

}  // namespace

std::vector<Candidate> ExpandPatterns(const std::vector<std::string>& patterns) {
  std::vector<Candidate> found;
  std::set<std::pair<std::uint64_t, std::uint64_t>> seen;
  for (std::size_t source = 0; source < patterns.size(); ++source) {
    for (std::string& path : Glob(patterns[source], 0)) {
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (!seen.emplace(st.st_dev, st.st_ino).second) continue;  // hard link or second pattern
      found.push_back(Candidate{std::move(path), source, static_cast<std::uint64_t>(st.st_dev),
                                static_cast<std::uint64_t>(st.st_ino)});
    }
  }
  return found;
}

const Candidate* FindCandidate(const std::vector<Candidate>& found, std::uint64_t dev, std::uint64_t ino) {
  for (const Candidate& c : found) {
    if (c.dev == dev && c.ino == ino) return &c;
  }
  return nullptr;
}

std::size_t SourceForPath(const std::vector<std::string>& patterns, const std::string& path) {
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    if (::fnmatch(patterns[i].c_str(), path.c_str(), FNM_PATHNAME | FNM_PERIOD) == 0) {
      return i;
    }
  }
  return patterns.size();
}

std::vector<std::string> Glob(const std::string& pattern, int flags) {
  std::vector<std::string> paths;
  glob_t g{};
  if (::glob(pattern.c_str(), flags, nullptr, &g) == 0) {
    for (std::size_t i = 0; i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  return paths;
}

bool HasGlobMagic(std::string_view text) { return text.find_first_of("*?[") != std::string_view::npos; }

std::string Dirname(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string CurrentName(int fd) {
  char buf[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string name(buf, static_cast<std::size_t>(n));
  constexpr std::string_view kDeleted = " (deleted)";
  if (name.size() > kDeleted.size() && name.ends_with(kDeleted)) {
    name.resize(name.size() - kDeleted.size());
  }
  return name;
}

std::string FindInode(const std::string& dir, std::uint64_t dev, std::uint64_t ino) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return "";
  std::string found;
  while (const dirent* entry = ::readdir(d)) {
    if (entry->d_ino != ino) continue;
    const std::string path = dir + "/" + entry->d_name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_dev) == dev) {
      found = path;
      break;
    }
  }
  ::closedir(d);
  return found;
}

std::string FindCopyPath(
    const FilePosition& old,
    const std::function<bool(std::uint64_t dev, std::uint64_t ino, const std::string& path)>& is_tailed) {
  if (old.head.len == 0) return "";  // no content to recognize it by
  const std::string dir_path = Dirname(old.path);
  DIR* dir = ::opendir(dir_path.c_str());
  if (!dir) return "";
  std::string best_path;
  std::uint64_t best_size = 0;
  while (const dirent* d = ::readdir(dir)) {
    const std::string path = dir_path + "/" + d->d_name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const auto dev = static_cast<std::uint64_t>(st.st_dev);
    const auto ino = static_cast<std::uint64_t>(st.st_ino);
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (dev != old.dev || ino == old.ino || is_tailed(dev, ino, path)) continue;
    if (size < old.offset || size < old.head.len) continue;
    if (ToNs(st.st_ctim) < old.validated_ns - kCopyCtimeSlackNs) continue;
    if (!best_path.empty() && size <= best_size) continue;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    const bool same = Matches(fd, 0, old.head) == true && Matches(fd, old.offset - old.marker.len, old.marker) == true;
    ::close(fd);
    if (same) {
      best_path = path;
      best_size = size;
    }
  }
  ::closedir(dir);
  return best_path;
}

std::optional<std::string> ContentChange(int fd, const FilePosition& pos, std::uint64_t read_offset,
                                         std::string_view partial_tail) {
  const std::optional<bool> head = Matches(fd, 0, pos.head);
  if (!head) return std::nullopt;
  if (!*head) return "content changed in place (first bytes differ)";
  const std::optional<bool> marker = Matches(fd, pos.offset - pos.marker.len, pos.marker);
  if (!marker) return std::nullopt;
  if (!*marker) return "content changed in place (bytes before the read offset differ)";
  if (partial_tail.empty()) return "";
  const std::size_t n = std::min<std::size_t>(partial_tail.size(), kMarkerBytes);
  std::string bytes(n, '\0');
  const ssize_t got = PreadFull(fd, bytes.data(), n, read_offset - n);
  if (got < 0) return std::nullopt;
  if (static_cast<std::size_t>(got) != n || bytes != partial_tail.substr(partial_tail.size() - n)) {
    return "content changed in place (the unfinished last line differs)";
  }
  return "";
}

}  // namespace kvwatch::collectors::tail
