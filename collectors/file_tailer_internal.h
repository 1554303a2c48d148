// Internal to FileTailer (collectors/file_tailer.cc, file_tailer_restore.cc,
// file_tailer_read.cc); not a public API. The state FileTailer keeps per followed
// file and per Poll() pass, which the three files of the class share.
//
// Thread safety: as FileTailer's (one thread).
#ifndef KVWATCH_COLLECTORS_FILE_TAILER_INTERNAL_H_
#define KVWATCH_COLLECTORS_FILE_TAILER_INTERNAL_H_

#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "collectors/file_identity.h"
#include "collectors/file_tailer.h"

namespace kvwatch::collectors {

// Where a followed file stands with respect to the patterns.
enum class FileState {
  kActive,   // a pattern finds it
  kRotated,  // renamed to a name no pattern finds: drained until rotate_wait expires
  kDeleted,  // unlinked: drained, then closed
};

// One followed file: its descriptor and inotify watch, its position (what is
// checkpointed), and the state of the line being assembled.
struct FileTailer::TailedFile {
  TailedFile() = default;
  TailedFile(const TailedFile&) = delete;
  TailedFile& operator=(const TailedFile&) = delete;
  ~TailedFile() {
    if (fd >= 0) ::close(fd);
  }

  int fd = -1;
  int watch = -1;  // inotify watch on the inode, or -1
  std::size_t source = 0;
  FileState state = FileState::kActive;
  Position pos;
  std::uint64_t read_offset = 0;  // next byte to read; >= pos.offset
  std::uint64_t last_size = 0;    // size at the last check
  std::string partial;            // bytes [pos.offset, read_offset) of an unfinished line
  bool skipping = false;          // inside a line longer than max_line_bytes
  std::uint64_t skipped_bytes = 0;
  bool at_eof = false;          // the last read pass reached the end
  bool error_reported = false;  // a read error was reported and has not recovered
  std::chrono::steady_clock::time_point rotated_at{};
};

// One Poll(): the callbacks, what the pass did so far, and its clock readings.
struct FileTailer::Pass {
  const TailCallbacks& callbacks;
  TailPollSummary summary;
  std::chrono::steady_clock::time_point now;
  std::int64_t now_ns = 0;
};

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_FILE_TAILER_INTERNAL_H_
