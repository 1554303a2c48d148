#include "collectors/file_identity.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace kvwatch::collectors::tail {

std::uint64_t Fnv1a(std::string_view data, std::uint64_t hash) {
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

ssize_t PreadFull(int fd, char* out, std::size_t length, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, out + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

namespace {

// Hash of `len` bytes at `offset`; no hash if the file is shorter.
struct HashRead {
  bool ok = false;  // false: I/O error
  std::optional<std::uint64_t> hash;
};

HashRead HashAt(int fd, std::uint64_t offset, std::uint32_t len) {
  std::string bytes(len, '\0');
  const ssize_t n = PreadFull(fd, bytes.data(), len, offset);
  if (n < 0) return {false, std::nullopt};
  if (static_cast<std::size_t>(n) < len) return {true, std::nullopt};
  return {true, Fnv1a(bytes)};
}

}  // namespace

std::optional<bool> Matches(int fd, std::uint64_t offset, const ContentHash& expected) {
  if (expected.len == 0) return true;
  const HashRead read = HashAt(fd, offset, expected.len);
  if (!read.ok) return std::nullopt;
  return read.hash.has_value() && *read.hash == expected.hash;
}

ContentHash HashHead(int fd, std::uint64_t size, std::size_t max_len) {
  const auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(size, max_len));
  const HashRead read = HashAt(fd, 0, len);
  if (!read.ok || !read.hash) return ContentHash{};
  return ContentHash{len, *read.hash};
}

ContentHash HashBefore(int fd, std::uint64_t offset) {
  const auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(offset, kMarkerBytes));
  const HashRead read = HashAt(fd, offset - len, len);
  if (!read.ok || !read.hash) return ContentHash{};
  return ContentHash{len, *read.hash};
}

bool Holds(int fd, std::uint64_t size, const FilePosition& position) {
  return position.offset <= size && Matches(fd, 0, position.head) == true &&
         Matches(fd, position.offset - position.marker.len, position.marker) == true;
}

std::int64_t ToNs(const timespec& ts) { return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec; }

std::int64_t RealtimeNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ToNs(ts);
}

}  // namespace kvwatch::collectors::tail
