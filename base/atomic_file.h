// Atomic file replacement: the one way kvwatch writes a file that a crash must
// leave either old or new, never torn (the agent's state file, the tailer's
// stand-alone checkpoint).
//
// WriteFileAtomically(path, bytes): writes "<path>.tmp" in the same directory,
// fsyncs it, renames it over `path` and fsyncs the directory. A crash at any
// instant leaves `path` holding the previous complete file or the new one; a
// "<path>.tmp" may be left behind (complete or torn), and is overwritten by the
// next write. An error names the file and the failing step; `path` is then
// still intact and the temporary file removed.
//
// The temporary file is unlinked before it is created anew (O_EXCL, O_NOFOLLOW),
// so a FIFO, a symbolic link or a torn file left at "<path>.tmp" is replaced,
// never opened: a FIFO there would block the open for good.
//
// Reading: OpenRegularFile opens only a regular file, without following a final
// symbolic link and without blocking (O_NONBLOCK|O_NOFOLLOW, then fstat): a FIFO,
// a socket, a device, a directory or a symbolic link at the path is refused with
// an error naming the path and what it is. Its size is known before anything is
// read, so a reader checks a header and a size cap first and never reads a huge
// (or sparse) file whole.
//
// Fault points (crash tests only): SetFaultHook installs a function called at
// each step with the step's name — "created", "written", "synced", "renamed"
// (before the directory's fsync), "done". A test process kills itself there
// (tests/agent/runtime/crash_agent.cc) to prove that a kill between any two steps
// loses nothing. No hook is installed outside tests; the check is one load of a
// pointer per step.
//
// Thread safety: WriteFileAtomically may run on several threads for different
// paths; two writers of one path race as any two writers of a file do.
// SetFaultHook must be called before any write.
#ifndef KVWATCH_BASE_ATOMIC_FILE_H_
#define KVWATCH_BASE_ATOMIC_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"

namespace kvwatch::base {

Status WriteFileAtomically(const std::string& path, std::string_view bytes);

// A regular file open for reading (see above). Move-only; closes on destruction.
class RegularFile {
 public:
  // Errors: "<path>: cannot open: No such file or directory", "<path>: is a FIFO,
  // not a regular file", "<path>: is a symbolic link (not followed)".
  static Result<RegularFile> Open(const std::string& path);

  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  // The size fstat gave at open.
  std::uint64_t size() const { return size_; }
  // Reads exactly n bytes (appended to *out); an error names the file and says
  // "ends after" when the file is shorter.
  Status Read(std::size_t n, std::string* out);
  // Bytes read so far (what a size cap bounds; tests check it).
  std::uint64_t bytes_read() const { return bytes_read_; }

 private:
  RegularFile(std::string path, int fd, std::uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint64_t bytes_read_ = 0;
};

// What a stat mode is, for messages: "a FIFO", "a directory", "a regular file".
std::string DescribeFileType(unsigned mode);

// Reads a whole regular file (RegularFile) of at most max_bytes; a larger one is
// refused from its size, before any byte is read. Reads the size fstat reports
// (so not for /proc files, which report 0). An error names the file.
Result<std::string> ReadWholeFile(const std::string& path, std::size_t max_bytes);

using FaultHook = void (*)(std::string_view point);
void SetFaultHook(FaultHook hook);

}  // namespace kvwatch::base

#endif  // KVWATCH_BASE_ATOMIC_FILE_H_
