// FileTailer: follows the log files named by a list of paths or glob(3) patterns
// and hands every complete line to a callback. It survives rename rotation,
// copytruncate, truncation and deletion, and it can keep a crash-safe checkpoint
// so that a restart neither loses nor repeats a line. The agent's live log
// collector owns one FileTailer and drives it from its event loop: this class
// owns no threads and no timers, and every call returns without blocking on the
// files' writers (it only does regular-file I/O).
//
// Conventions follow fluent-bit in_tail (plugins/in_tail/tail_file.c,
// tail_fs_inotify.c: the offset marker), Vector's file source
// (lib/file-source-common/src/fingerprinter.rs, checkpointer.rs), Grafana Alloy's
// loki.source.file (internal/tail/signature.go: the growing signature) and Filebeat
// filestream (filebeat/input/filestream/fswatch.go):
//
// Identity. A file is (st_dev, st_ino) plus two content checks: a 64-bit hash of
// its first bytes (up to fingerprint_bytes, growing with the file until it has
// that many; Alloy's progressive signature) and a hash of the <= 32 bytes just
// before the committed offset (fluent-bit's offset marker). While a file is open
// its inode cannot be reused, so at run time (dev, ino) decides which file is
// which and the hashes (plus the tail of a buffered unfinished line) detect
// content replaced in place; on restart all three must match before a
// checkpointed offset is trusted.
//
// Poll() makes one pass: re-expand the patterns, notice renames, deletions and
// truncations, open new files, then read every open file to its end (at most
// max_read_bytes_per_poll per file; the summary says when more is pending).
//   - Rename rotation: a file that no pattern finds any more but still has a
//     name is "rotated". It stays open and is read to its end on every pass for
//     rotate_wait (the writer may still append before it reopens), then closed.
//     The new file at the old path is a new identity, read from its beginning.
//     A renamed file whose new name still matches a pattern simply keeps being
//     tailed (same identity, nothing is read twice).
//   - Deletion while open (st_nlink == 0): the rest is read through the still
//     open descriptor in that pass, then the file is closed.
//   - Truncation: the size is below our read offset, or the head/offset hashes
//     changed. Reading restarts at offset 0 with line numbers from 1. For
//     copytruncate the tailer first looks, in the same directory, for a copy of
//     the old content (a regular file changed since our last check whose head and
//     offset-marker hashes equal ours and that is at least as long as our
//     offset): if found, the unread tail of the old content is read from the copy,
//     which is then followed like a rotated file. Otherwise the bytes the tailer
//     knew of but had not delivered (a buffered partial line, or data beyond a
//     read budget) are reported as kLostBytes; bytes appended after the last
//     pass and destroyed by the truncation cannot be measured, and the
//     kTruncated event says so.
//     Every read is checked, after it is made, against the head and offset-marker
//     hashes: a truncation after this pass's check (the file written again past
//     our offset) is left for the next pass, never read as the old content.
//   - Lines end with '\n'; the line handed out excludes it, and one trailing
//     '\r' is stripped as well (so CRLF files give the same lines as LF files).
//     NUL bytes at the start of a line are skipped (the hole a non-O_APPEND
//     writer leaves after copytruncate). A partial last line is buffered until
//     its '\n' arrives; when a rotated or deleted file is closed, its final
//     partial line is delivered as a line (nothing more can complete it).
//   - A line longer than max_line_bytes (without its terminator) is never
//     buffered whole: it is skipped, reported as kLineTooLong with its length,
//     and reading resumes intact at the next line. It still takes a line number.
//   - Start position: files found by the very first Poll() start at
//     start_position when no usable checkpoint was loaded (kEnd: after the last
//     complete line, so a line being written is read whole). Every file found
//     later, and every file unknown to a loaded checkpoint, is read from its
//     beginning (it appeared after the last run looked). Line numbers count
//     from where reading began, so a file started at its end numbers its first
//     new line 1.
//
// Checkpoint (optional, checkpoint_path): Checkpoint() records, for every open
// file, its identity, path and the offset just after the last line already
// handed to on_line (the offset advances only after the callback returns, so a
// buffered partial line is re-read after a restart, never lost or repeated).
// Call it periodically and at shutdown: after a crash, the lines delivered since
// the last Checkpoint() are delivered again (at-least-once); with a Checkpoint()
// after the last Poll(), a restart is exactly-once. The file is written atomically: "<path>.tmp",
// fsync, rename over <path>, fsync of the directory. At construction the checkpoint (or a complete
// leftover "<path>.tmp", which is newer) is loaded; the first Poll() resumes
// each entry at its offset if its identity is found by a pattern or, renamed
// while we were down, by inode in its old directory, and its hashes still
// match. The data of an entry whose file was truncated, replaced or deleted
// while we were down continues from its copytruncate copy if one is found (as
// above); a file under a pattern whose content changed is new content and is
// read from 0. Inode numbers freed while we were down may be reused (ext4 does
// so readily): a reused one fails the hashes, and one of an entry that had no
// content yet is resolved only after the copies were claimed. An unreadable or
// corrupt checkpoint is reported (kCheckpointError at the first Poll) and
// ignored: the tailer starts as if it had none.
// Format: a text file, "kvwatch-file-tailer-checkpoint 2", one "file ..." line
// per entry, one "source ..." line per pattern (its mark: when the last pass
// began), and "end <count> <hash>" guarding against truncated or edited files.
//
// Unread rotations (exact-path patterns): a pattern without glob characters does
// not find its rotated files (app.log.1, app.log-20250101), so a file that was
// created and rotated away while the tailer was down, or between two passes (the
// loop stalled longer than the writer's rotation period), is never read. When the
// tailer sees its file rotated away or truncated, when it opens a new file at the
// path after its first pass, when a file it follows that had no content yet first
// has some (copied and truncated between two passes, it left nothing to tell), and
// at the first Poll() after a checkpoint was loaded, every regular file in the
// pattern's directory whose name is the pattern's name plus a separator (. - _)
// and more, that the tailer does not follow, and that was modified after the
// tailer last validated that pattern's file (or its checkpointed positions, or,
// for a pattern the checkpoint has no position for, its mark; or, for a new file,
// after the previous pass began), is such a file: it is reported once as
// kUnreadRotation with its line count (and its path), and never read afterwards
// (not even as a copytruncate copy); it is known by its inode and its first
// bytes, so a later file reusing the inode number is another file. An empty one
// holds nothing unread and is not reported. A file that starts as a file the tailer
// follows does is not one: it is a copy of content being read (logrotate copied,
// and has not truncated yet), read from the original or, once the truncation is
// seen, from the copy.
// A compressed one (.gz, .bz2, .xz, .zst, .lz4, .zip) is reported with count 0 and
// says so. A glob that matches the rotated names ("app.log*") reads them instead.
//
// Change notification (Linux, optional): NotifyFd() is an inotify descriptor
// that becomes readable when a watched directory or open file changes. Wait on it
// (e.g. boost::asio::posix::stream_descriptor over a dup() of it: the descriptor
// stays owned by the tailer) and call Poll(); Poll() drains it. Polling on an
// interval works without it and is still needed for files outside the watched
// directories (and as a safety net for dropped notifications).
//
// Labels: the source name passed to on_line and TailEvent::source is the
// configured pattern string (low-cardinality, fit for a metric label), never
// the name of a rotated file; the path passed to on_line and TailEvent::path
// carry the real path, for logs.
//
// Limitations: files must be append-only (a rewrite in place is a truncation).
// A file created and rotated away between two passes was never seen and is only
// read if a pattern matches its rotated name (e.g. "app.log*"); likewise a
// second copytruncate before the tailer saw the first copy's content. A
// pattern should not match copytruncate copies that may be moved or compressed
// before the tailer identifies them (it would read them from 0). Lines are
// in order within a file; across files (old and new after rotation) the old
// file's lines of a pass come first.
//
// Thread safety: none. All methods must be called from one thread (the event
// loop); callbacks run on that thread inside Poll() and must not call back into
// the tailer.
#ifndef KVWATCH_COLLECTORS_FILE_TAILER_H_
#define KVWATCH_COLLECTORS_FILE_TAILER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/source_kinds.h"
#include "base/status.h"
#include "collectors/collector_options.h"  // FileTailerOptions
#include "collectors/file_identity.h"      // tail::ContentHash
#include "collectors/file_watch.h"

namespace kvwatch::collectors {

namespace tail {
struct Candidate;
struct FilePosition;
struct SourceMark;
}  // namespace tail

using TailStartPosition = base::TailStartPosition;  // base/source_kinds.h, shared with config/

enum class TailEventKind {
  kOpened,           // started tailing a file; count = offset reading starts at
  kRotated,          // renamed (or followed to a copytruncate copy); count = 1
  kTruncated,        // shrank or changed in place; count = its new size in bytes
  kDeleted,          // unlinked while open, or a checkpointed file is gone; count = 1
  kClosed,           // stopped tailing after draining; count = final offset
  kLineTooLong,      // a line over max_line_bytes was skipped; count = its length
  kReadError,        // stat/open/read failed (reported once until it recovers); count = errno
  kLostBytes,        // known bytes that will never be delivered; count = bytes
  kCheckpointError,  // checkpoint unreadable or corrupt, ignored; count = 0
  kUnreadRotation,   // a rotated file that appeared and was rotated away while the
                     // tailer was down, never read (see "Unread rotations"); count = its lines
};

// "opened", "rotated", "truncated", "deleted", "closed", "line_too_long",
// "read_error", "lost_bytes", "checkpoint_error", "unread_rotation": stable, for metric labels.
std::string_view TailEventKindName(TailEventKind kind);

struct TailEvent {
  TailEventKind kind = TailEventKind::kOpened;
  std::string_view source;  // the configured pattern; empty for checkpoint errors
  std::string path;         // the file's real path (the checkpoint's, for kCheckpointError)
  std::uint64_t count = 0;  // meaning per kind, see TailEventKind
  std::string message;      // human-readable detail for logs
};

struct TailCallbacks {
  // One complete line, without "\n" (and without one trailing "\r"), of the
  // file at `path` (its current name: the file a glob found, or the rotated name
  // of a file still being drained), found through the pattern `source`.
  // line_number is 1-based within the file (see "Start position" above). Logs
  // name path:line_number; metrics label by source. The views are valid only
  // during the call.
  std::function<void(std::string_view source, std::string_view path, std::uint64_t line_number, std::string_view line)>
      on_line;
  // Anomalies and lifecycle events; may be empty.
  std::function<void(const TailEvent& event)> on_event;
};

// What one Poll() did.
struct TailPollSummary {
  std::uint64_t lines = 0;     // lines handed to on_line
  std::uint64_t bytes = 0;     // bytes read from files
  std::uint64_t events = 0;    // events handed to on_event
  std::size_t files_open = 0;  // files open after the pass
  bool more_pending = false;   // a file hit max_read_bytes_per_poll: poll again soon
};

class FileTailer {
 public:
  // Validates the options, loads the checkpoint if any (a bad checkpoint is not
  // an error: it is reported by the first Poll) and creates the inotify
  // descriptor if asked. Touches no log file until Poll().
  static base::Result<std::unique_ptr<FileTailer>> Create(FileTailerOptions options);
  // The checks of Create() on the options alone, touching nothing (no file, no
  // inotify descriptor): what `kvwatch check-config` runs.
  static base::Status ValidateOptions(const FileTailerOptions& options);

  FileTailer(const FileTailer&) = delete;
  FileTailer& operator=(const FileTailer&) = delete;
  // Closes every file and the inotify descriptor. Does not write a checkpoint.
  ~FileTailer();

  // One non-blocking pass over all patterns and open files (see above).
  TailPollSummary Poll(const TailCallbacks& callbacks);

  // Atomically writes the checkpoint (no-op if checkpoint_path is empty). It
  // covers only lines already delivered. An error names the file and the
  // failing step; the previous checkpoint is then still intact.
  base::Status Checkpoint();

  // The positions Checkpoint() would write, as text (tail_checkpoint.h's format),
  // for a caller that commits them in its own atomic step with the state they led
  // to (the agent's state file: collectors/collector.h, AppendState).
  std::string SavePositions() const;
  // Before the first Poll() only: resume from positions saved by SavePositions(),
  // exactly as from a loaded checkpoint file (and instead of it). An error names
  // what is wrong with the text; nothing is changed then.
  base::Status RestorePositions(std::string_view text);
  // The rotated files already reported as kUnreadRotation, oldest first (the last
  // kMaxUnreadReported): kept by the caller with the positions so that a restart
  // does not report (and count) them again. Restore before the first Poll().
  // Each is (dev, ino) and the hash of its first bytes when it was reported: an
  // inode number is reused once its file is deleted, and a file with the number
  // but other first bytes is another file (a later rotation, or a copytruncate
  // copy to read), not the one counted. A head of length 0 (a state saved before
  // heads were kept) takes any content for the file counted.
  using FileId = std::pair<std::uint64_t, std::uint64_t>;
  struct UnreadFile {
    FileId id;
    tail::ContentHash head;
  };
  static constexpr std::size_t kMaxUnreadReported = 4096;
  const std::vector<UnreadFile>& UnreadReported() const { return unread_order_; }
  void RestoreUnreadReported(std::vector<UnreadFile> files);
  // The files read to their end and closed, with their modification time then,
  // oldest first (the last kMaxClosedRemembered): kept by the caller too, so that a
  // restart does not count one that closed just before the state was saved as an
  // unread rotation (the scan looks kMtimeSlackNs back, below). Restore before the
  // first Poll().
  struct ClosedFile {
    FileId id;
    std::int64_t mtime_ns = 0;
  };
  static constexpr std::size_t kMaxClosedRemembered = 4096;
  std::vector<ClosedFile> ClosedRemembered() const;
  void RestoreClosedRemembered(std::vector<ClosedFile> files);
  // File times come from the kernel's coarse clock, up to a tick behind the real
  // time that positions are validated at (a file written 1 ms after a pass can carry
  // a time 3 ms before it): an unread-rotation scan counts files modified up to this
  // long before the time it is given. Files it follows, files it closed unchanged
  // and files already reported are never counted, so the slack cannot count a file
  // twice.
  static constexpr std::int64_t kMtimeSlackNs = 50'000'000;

  // The inotify descriptor, or -1 when disabled or unavailable. Owned by the
  // tailer; readable when Poll() has something to look at.
  int NotifyFd() const { return watch_.fd(); }

  std::size_t FilesOpen() const { return files_.size(); }
  const FileTailerOptions& options() const { return options_; }

 private:
  // The pieces live in their own files: identity (file_identity.h), discovery
  // and the rotation/truncation lookups (file_scan.h), the checkpoint file
  // (tail_checkpoint.h) and inotify (file_watch.h). This class orchestrates.
  using Position = tail::FilePosition;
  using Candidate = tail::Candidate;
  struct TailedFile;
  struct Pass;
  using TailedFilePtr = std::unique_ptr<TailedFile>;

  explicit FileTailer(FileTailerOptions options);

  // Pass steps, in order.
  void HandleRotation(const std::vector<Candidate>& found, Pass& pass);
  void ResumeFromCheckpoint(const std::vector<Candidate>& found, Pass& pass);
  void ResumeAt(TailedFilePtr file, const Position& entry, bool matched, Pass& pass);
  void ScheduleUnreadScan(std::size_t source, std::int64_t since_ns);
  void ReportUnreadRotations(std::size_t source, std::int64_t since_ns, Pass& pass);
  bool HoldsFollowedContent(const std::string& path, std::uint64_t size) const;
  std::size_t UnreadHeadBytes() const;
  bool CountedUnread(std::uint64_t dev, std::uint64_t ino, const std::string& path) const;
  void RememberUnread(const FileId& id, const tail::ContentHash& head);
  std::size_t SourceForEntry(const std::string& path) const;
  void ResolveDeferred(const Position& entry, std::size_t source, bool matched, TailedFilePtr file, bool holds,
                       const std::string& copy, Pass& pass);
  void CheckTruncation(TailedFile& file, const std::vector<Candidate>& found, Pass& pass);
  void HandleTruncation(TailedFile& file, std::uint64_t new_size, const std::string& reason,
                        const std::vector<Candidate>& found, Pass& pass);
  void OpenNewFiles(const std::vector<Candidate>& found, Pass& pass);
  void ReadAvailable(TailedFile& file, Pass& pass);
  void CloseFinished(Pass& pass);

  // Files.
  TailedFilePtr OpenFile(const std::string& path, std::size_t source, Pass& pass);
  TailedFilePtr OpenByIdentity(const std::string& path, const std::string& dir, std::uint64_t dev, std::uint64_t ino,
                               std::size_t source, Pass& pass);
  TailedFile* FindFile(std::uint64_t dev, std::uint64_t ino) const;
  void InsertBefore(const TailedFile& anchor, TailedFilePtr file);
  TailedFilePtr FindCopy(const Position& old, std::size_t source, const std::vector<Candidate>& found, Pass& pass);
  void StartAtEnd(TailedFile& file);
  void ResetToStart(TailedFile& file, std::uint64_t size, Pass& pass);
  void CloseFile(TailedFile& file);
  void RememberClosed(const TailedFile& file);
  void DropFile(TailedFilePtr file);

  // Line assembly.
  void ConsumeChunk(TailedFile& file, std::uint64_t chunk_offset, std::string_view data, Pass& pass);
  void AppendToLine(TailedFile& file, std::string_view piece);
  void DeliverLine(TailedFile& file, std::string_view line, Pass& pass);
  void SkipLongLine(TailedFile& file, std::uint64_t length, Pass& pass);
  void FlushPartialLine(TailedFile& file, Pass& pass);
  void UpdateMarker(TailedFile& file, std::uint64_t chunk_offset, std::string_view data);

  // Events.
  void Emit(Pass& pass, TailEventKind kind, std::size_t source, std::string path, std::uint64_t count,
            std::string message);
  void EmitFor(Pass& pass, TailEventKind kind, const TailedFile& file, std::uint64_t count, std::string message);
  void ReportReadError(Pass& pass, TailedFile& file, const std::string& what, int error);

  // Checkpoint.
  std::vector<Position> CollectPositions() const;
  std::vector<tail::SourceMark> CollectSourceMarks() const;

  // Constant after construction.
  const FileTailerOptions options_;

  tail::FileWatch watch_;                            // the inotify descriptor and its watches
  std::vector<TailedFilePtr> files_;                 // in the order they were opened
  std::vector<Position> restored_;                   // checkpoint entries, until the first Poll()
  std::vector<tail::SourceMark> restored_sources_;   // ... and its source marks
  bool checkpoint_loaded_ = false;                   // a valid checkpoint was read
  std::string checkpoint_error_;                     // reported by the first Poll()
  bool polled_ = false;                              // the first Poll() has run
  std::int64_t last_pass_ns_ = 0;                    // wall time the last Poll() began
  std::map<std::string, std::string> open_errors_;   // path -> last reported error
  std::vector<char> buffer_;                         // read_chunk_bytes
  std::map<std::size_t, std::int64_t> unread_scan_;  // this pass: source -> rotated after (ns)
  std::map<FileId, tail::ContentHash> unread_;       // reported unread -> head then ...
  std::vector<UnreadFile> unread_order_;             // ... in the order reported (bounded)
  std::map<FileId, std::int64_t> closed_;            // closed after draining -> mtime then ...
  std::deque<FileId> closed_order_;                  // ... oldest first (bounded)
};

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_FILE_TAILER_H_
