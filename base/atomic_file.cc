#include "base/atomic_file.h"

#include <fcntl.h>
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
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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

Result<std::string> ReadWholeFile(const std::string& path, std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Result<std::string>::Error(path + ": cannot open: " + std::strerror(errno));
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return Result<std::string>::Error(path + ": read: " + std::strerror(error));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > max_bytes) {
      ::close(fd);
      return Result<std::string>::Error(path + ": larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
  ::close(fd);
  return text;
}

}  // namespace kvwatch::base
