#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kvwatch::base {

namespace {

FaultHook fault_hook = nullptr;

void Fault(std::string_view point) {
  if (fault_hook != nullptr) fault_hook(point);
}

std::string Dirname(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Error(path + ": write: " + std::strerror(errno));
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return Status::Ok();
}

}  // namespace

void SetFaultHook(FaultHook hook) { fault_hook = hook; }

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  // Whatever is at tmp (a torn file, a FIFO, a link) is replaced, never opened.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) {
    return Status::Error(tmp + ": cannot remove the old temporary file: " + std::strerror(errno));
  }
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Error(tmp + ": cannot create: " + std::strerror(errno));
  Fault("created");
  Status written = WriteAll(fd, bytes, tmp);
  if (written.ok()) Fault("written");
  if (written.ok() && ::fsync(fd) != 0) written = Status::Error(tmp + ": fsync: " + std::strerror(errno));
  if (::close(fd) != 0 && written.ok()) written = Status::Error(tmp + ": close: " + std::strerror(errno));
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return written;
  }
  Fault("synced");
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    return Status::Error("rename " + tmp + " -> " + path + ": " + std::strerror(error));
  }
  Fault("renamed");
  const std::string dir = Dirname(path);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return Status::Error(dir + ": cannot open directory: " + std::strerror(errno));
  const bool synced = ::fsync(dir_fd) == 0;
  const int error = errno;
  ::close(dir_fd);
  if (!synced) return Status::Error(dir + ": fsync of directory: " + std::strerror(error));
  Fault("done");
  return Status::Ok();
}

std::string DescribeFileType(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFIFO:
      return "a FIFO";
    case S_IFSOCK:
      return "a socket";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFLNK:
      return "a symbolic link";
    default:
      return "not a regular file";
  }
}

Result<RegularFile> RegularFile::Open(const std::string& path) {
  using R = Result<RegularFile>;
  // O_NONBLOCK: opening a FIFO without a writer must not wait for one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    struct stat st {};
    if (error == ELOOP && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      return R::Error(path + ": is a symbolic link (not followed)");
    }
    return R::Error(path + ": cannot open: " + std::strerror(error));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return R::Error(path + ": fstat: " + std::strerror(error));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return R::Error(path + ": is " + DescribeFileType(st.st_mode) + ", not a regular file");
  }
  return RegularFile(path, fd, static_cast<std::uint64_t>(st.st_size));
}

RegularFile::RegularFile(RegularFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      size_(other.size_),
      bytes_read_(other.bytes_read_) {}

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    bytes_read_ = other.bytes_read_;
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status RegularFile::Read(std::size_t n, std::string* out) {
  const std::size_t start = out->size();
  out->resize(start + n);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd_, out->data() + start + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int error = errno;
      out->resize(start + got);
      return Status::Error(path_ + ": read: " + std::strerror(error));
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
    bytes_read_ += static_cast<std::uint64_t>(r);
  }
  if (got < n) {
    out->resize(start + got);
    return Status::Error(path_ + ": ends after " + std::to_string(bytes_read_) + " bytes");
  }
  return Status::Ok();
}

Result<std::string> ReadWholeFile(const std::string& path, std::size_t max_bytes) {
  Result<RegularFile> file = RegularFile::Open(path);
  if (!file.ok()) return Result<std::string>::Error(file.error());
  if (file.value().size() > max_bytes) {
    return Result<std::string>::Error(path + ": larger than " + std::to_string(max_bytes) + " bytes (" +
                                      std::to_string(file.value().size()) + "); not read");
  }
  std::string text;
  if (Status s = file.value().Read(static_cast<std::size_t>(file.value().size()), &text); !s.ok()) {
    return Result<std::string>::Error(s.error());
  }
  return text;
}

}  // namespace kvwatch::base
