#include "collectors/file_tailer.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "collectors/file_identity.h"
#include "collectors/file_scan.h"
#include "collectors/tail_checkpoint.h"

namespace kvwatch::collectors {

namespace {

using base::Result;
using base::Status;
using tail::ContentHash;
using tail::HashBefore;
using tail::HashHead;
using tail::kMaxFingerprintBytes;

std::string ErrnoText(int error) { return std::strerror(error); }

// File times come from a coarse clock (a jiffy behind the real time at most): an
// unread-rotation scan looks this much before the time it is given.
constexpr std::int64_t kMtimeSlackNs = 50'000'000;

}  // namespace

// ---------------------------------------------------------------------------
// Internal types.

enum class FileState {
  kActive,   // a pattern finds it
  kRotated,  // renamed to a name no pattern finds: drained until rotate_wait expires
  kDeleted,  // unlinked: drained, then closed
};

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

struct FileTailer::Pass {
  const TailCallbacks& callbacks;
  TailPollSummary summary;
  std::chrono::steady_clock::time_point now;
  std::int64_t now_ns = 0;
};
// ---------------------------------------------------------------------------
// Events.

std::string_view TailEventKindName(TailEventKind kind) {
  switch (kind) {
    case TailEventKind::kOpened:
      return "opened";
    case TailEventKind::kRotated:
      return "rotated";
    case TailEventKind::kTruncated:
      return "truncated";
    case TailEventKind::kDeleted:
      return "deleted";
    case TailEventKind::kClosed:
      return "closed";
    case TailEventKind::kLineTooLong:
      return "line_too_long";
    case TailEventKind::kReadError:
      return "read_error";
    case TailEventKind::kLostBytes:
      return "lost_bytes";
    case TailEventKind::kCheckpointError:
      return "checkpoint_error";
    case TailEventKind::kUnreadRotation:
      return "unread_rotation";
  }
  return "unknown";
}

void FileTailer::Emit(Pass& pass, TailEventKind kind, std::size_t source, std::string path,
                      std::uint64_t count, std::string message) {
  ++pass.summary.events;
  if (!pass.callbacks.on_event) return;
  TailEvent event;
  event.kind = kind;
  if (source < options_.patterns.size()) event.source = options_.patterns[source];
  event.path = std::move(path);
  event.count = count;
  event.message = std::move(message);
  pass.callbacks.on_event(event);
}

void FileTailer::EmitFor(Pass& pass, TailEventKind kind, const TailedFile& file,
                         std::uint64_t count, std::string message) {
  Emit(pass, kind, file.source, file.pos.path, count, std::move(message));
}

void FileTailer::ReportReadError(Pass& pass, TailedFile& file, const std::string& what, int error) {
  if (file.error_reported) return;
  file.error_reported = true;
  EmitFor(pass, TailEventKind::kReadError, file, static_cast<std::uint64_t>(error),
          what + " " + file.pos.path + " at offset " + std::to_string(file.read_offset) + ": " +
              ErrnoText(error));
}

// ---------------------------------------------------------------------------
// Construction.

base::Status FileTailer::ValidateOptions(const FileTailerOptions& options) {
  using base::Status;
  if (options.patterns.empty()) {
    return Status::Error("FileTailerOptions.patterns: expected at least one path or glob pattern");
  }
  for (std::size_t i = 0; i < options.patterns.size(); ++i) {
    if (options.patterns[i].empty()) {
      return Status::Error("FileTailerOptions.patterns[" + std::to_string(i) +
                           "]: expected a path or glob pattern, got an empty string");
    }
  }
  if (options.max_line_bytes == 0) {
    return Status::Error("FileTailerOptions.max_line_bytes: expected at least 1");
  }
  if (options.read_chunk_bytes == 0 || options.read_chunk_bytes > (std::size_t{64} << 20)) {
    return Status::Error("FileTailerOptions.read_chunk_bytes: expected 1 to 64 MiB, got " +
                         std::to_string(options.read_chunk_bytes));
  }
  if (options.fingerprint_bytes > kMaxFingerprintBytes) {
    return Status::Error("FileTailerOptions.fingerprint_bytes: expected at most " +
                         std::to_string(kMaxFingerprintBytes) + ", got " +
                         std::to_string(options.fingerprint_bytes));
  }
  if (options.rotate_wait.count() < 0) {
    return Status::Error("FileTailerOptions.rotate_wait: expected a duration >= 0");
  }
  return Status::Ok();
}

Result<std::unique_ptr<FileTailer>> FileTailer::Create(FileTailerOptions options) {
  using R = Result<std::unique_ptr<FileTailer>>;
  if (base::Status s = ValidateOptions(options); !s.ok()) return R::Error(s.error());
  if (!options.clock) options.clock = [] { return std::chrono::steady_clock::now(); };
  std::unique_ptr<FileTailer> tailer(new FileTailer(std::move(options)));
  return R(std::move(tailer));
}

FileTailer::FileTailer(FileTailerOptions options)
    : options_(std::move(options)), watch_(options_.use_inotify), buffer_(options_.read_chunk_bytes) {
  if (options_.checkpoint_path.empty()) return;
  tail::LoadedCheckpoint loaded = tail::LoadCheckpoint(options_.checkpoint_path);
  restored_ = std::move(loaded.entries);
  checkpoint_loaded_ = loaded.loaded;
  checkpoint_error_ = std::move(loaded.error);
}

FileTailer::~FileTailer() {
  files_.clear();  // closes the files; their watches go with watch_
}

// ---------------------------------------------------------------------------
// Poll.

TailPollSummary FileTailer::Poll(const TailCallbacks& callbacks) {
  Pass pass{callbacks, {}, options_.clock(), tail::RealtimeNs()};
  watch_.Drain();
  if (!checkpoint_error_.empty()) {
    Emit(pass, TailEventKind::kCheckpointError, options_.patterns.size(), options_.checkpoint_path,
         0, checkpoint_error_ + "; starting without it");
    checkpoint_error_.clear();
  }
  const std::vector<Candidate> found = tail::ExpandPatterns(options_.patterns);
  if (options_.after_expansion) options_.after_expansion();
  HandleRotation(found, pass);
  if (!polled_) ResumeFromCheckpoint(found, pass);
  std::vector<TailedFile*> known;
  for (const TailedFilePtr& file : files_) known.push_back(file.get());
  for (TailedFile* file : known) CheckTruncation(*file, found, pass);
  OpenNewFiles(found, pass);
  for (const auto& [source, since_ns] : unread_scan_) ReportUnreadRotations(source, since_ns, pass);
  unread_scan_.clear();
  // Old content first: files being drained (closed, with their final partial
  // line, when done), then the live ones, each in the order they were opened.
  for (const TailedFilePtr& file : files_) {
    if (file->state != FileState::kActive) ReadAvailable(*file, pass);
  }
  CloseFinished(pass);
  for (const TailedFilePtr& file : files_) {
    if (file->state == FileState::kActive) ReadAvailable(*file, pass);
  }
  watch_.WatchDirectories(options_.patterns);
  polled_ = true;
  last_pass_ns_ = pass.now_ns;
  pass.summary.files_open = files_.size();
  return pass.summary;
}

// Renames and deletions of open files: a file keeps its identity wherever it
// goes; one no pattern finds any more is rotated (or deleted) and drained.
void FileTailer::HandleRotation(const std::vector<Candidate>& found, Pass& pass) {
  for (const TailedFilePtr& file : files_) {
    if (const Candidate* c = tail::FindCandidate(found, file->pos.dev, file->pos.ino)) {
      if (c->path != file->pos.path) {
        EmitFor(pass, TailEventKind::kRotated, *file, 1,
                "renamed from " + file->pos.path + " to " + c->path + "; still tailed");
        file->pos.path = c->path;
      }
      file->state = FileState::kActive;
      continue;
    }
    if (file->state == FileState::kDeleted) continue;
    struct stat st {};
    if (::fstat(file->fd, &st) != 0) {
      ReportReadError(pass, *file, "fstat", errno);
      continue;
    }
    const std::string name = tail::CurrentName(file->fd);
    if (st.st_nlink == 0) {
      file->state = FileState::kDeleted;
      if (!name.empty()) file->pos.path = name;
      EmitFor(pass, TailEventKind::kDeleted, *file, 1,
              "deleted while open; reading what is left, then closing it");
    } else if (file->state == FileState::kActive) {
      ScheduleUnreadScan(file->source, file->pos.validated_ns);  // rotated away
      file->state = FileState::kRotated;
      file->rotated_at = pass.now;
      const std::string old_path = file->pos.path;
      if (!name.empty()) file->pos.path = name;
      EmitFor(
          pass, TailEventKind::kRotated, *file, 1,
          "rotated away from " + old_path + (name.empty() ? "" : " to " + name) + "; draining it");
    } else if (!name.empty()) {
      file->pos.path = name;
    }
  }
}

namespace {

bool HasGlob(std::string_view pattern) { return pattern.find_first_of("*?[") != std::string_view::npos; }

// Whether `name` is a rotated name of `base` (base.1, base-20250101, base_old...).
bool IsRotationName(std::string_view name, std::string_view base) {
  if (name.size() <= base.size() + 1 || name.substr(0, base.size()) != base) return false;
  const char sep = name[base.size()];
  return sep == '.' || sep == '-' || sep == '_';
}

std::string Basename(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

// The pattern a checkpointed file belongs to: the one that matches its last known
// name, or else the exact-path pattern it is a rotated file of (a copytruncate copy
// or a renamed file being drained when the checkpoint was taken).
std::size_t FileTailer::SourceForEntry(const std::string& path) const {
  const std::size_t source = tail::SourceForPath(options_.patterns, path);
  if (source < options_.patterns.size()) return source;
  for (std::size_t i = 0; i < options_.patterns.size(); ++i) {
    const std::string& p = options_.patterns[i];
    if (!HasGlob(p) && tail::Dirname(p) == tail::Dirname(path) && IsRotationName(Basename(path), Basename(p))) return i;
  }
  return options_.patterns.size();
}

// For an exact-path pattern: rotated files written after `since_ns` and not
// followed by the end of this pass were never seen (the earliest time asked wins).
void FileTailer::ScheduleUnreadScan(std::size_t source, std::int64_t since_ns) {
  if (source >= options_.patterns.size() || HasGlob(options_.patterns[source])) return;
  auto [it, added] = unread_scan_.emplace(source, since_ns);
  if (!added) it->second = std::min(it->second, since_ns);
}

// First Poll() only: put each checkpoint entry back where it was, in three
// phases. (1) Entries whose file is still there (found by a pattern or, renamed
// while we were down, by inode in its old directory) with the same content
// resume at their offset. (2) Entries whose file is gone or changed look for a
// copytruncate copy of their content. (3) The rest. Entries of files that were
// empty carry no content to check, so they wait for phase 3: their inode
// number may have been reused by a file that phase 2 recognizes as a copy.
void FileTailer::ResumeFromCheckpoint(const std::vector<Candidate>& found, Pass& pass) {
  std::vector<Position> entries = std::move(restored_);
  restored_.clear();
  struct Deferred {
    const Position* entry;
    std::size_t source;
    bool matched;        // a pattern finds the entry's inode
    TailedFilePtr file;  // the file with the entry's inode, if worth keeping
    bool holds;          // ... and it holds the entry's position (no content to check)
    std::string copy;    // path of the copy its data continues in
  };
  std::vector<Deferred> deferred;
  for (const Position& entry : entries) {
    if (FindFile(entry.dev, entry.ino)) continue;
    const Candidate* c = tail::FindCandidate(found, entry.dev, entry.ino);
    const std::size_t source = c ? c->source : SourceForEntry(entry.path);
    if (source == options_.patterns.size()) continue;  // no longer configured
    TailedFilePtr file = OpenByIdentity(c ? c->path : "", tail::Dirname(c ? c->path : entry.path), entry.dev,
                                        entry.ino, source, pass);
    // Renamed between the expansion and the open (a rotation right now): the name
    // it has now decides whether a pattern still finds it.
    if (c && file && file->pos.path != c->path &&
        tail::SourceForPath(options_.patterns, file->pos.path) == options_.patterns.size()) {
      c = nullptr;
    }
    const bool holds = file && tail::Holds(file->fd, file->last_size, entry);
    const bool evidence = entry.head.len > 0 || entry.marker.len > 0;
    if (holds && evidence) {
      ResumeAt(std::move(file), entry, c != nullptr, pass);
      continue;
    }
    if (!holds && !c) DropFile(std::move(file));  // an unrelated file reusing the inode
    deferred.push_back(Deferred{&entry, source, c != nullptr, std::move(file), holds, ""});
  }
  for (Deferred& d : deferred) {
    TailedFilePtr copy = FindCopy(*d.entry, d.source, found, pass);
    if (!copy) continue;
    d.copy = copy->pos.path;
    files_.push_back(std::move(copy));
  }
  for (Deferred& d : deferred) {
    ResolveDeferred(*d.entry, d.source, d.matched, std::move(d.file), d.holds, d.copy, pass);
  }
  // Rotations of exact-path patterns written after the checkpointed positions
  // were last validated (at the end of this pass, once every file is open).
  for (std::size_t source = 0; source < options_.patterns.size(); ++source) {
    if (HasGlob(options_.patterns[source])) continue;
    for (const Position& e : entries) {
      if (SourceForEntry(e.path) != source) continue;
      auto [it, added] = unread_scan_.emplace(source, e.validated_ns);
      if (!added) it->second = std::max(it->second, e.validated_ns);
    }
  }
}

namespace {

bool Compressed(std::string_view name) {
  for (std::string_view ext : {".gz", ".bz2", ".xz", ".zst", ".lz4", ".zip"}) {
    if (name.size() > ext.size() && name.substr(name.size() - ext.size()) == ext) return true;
  }
  return false;
}

// Lines in a file: its newlines, plus one for a final unterminated line; nullopt
// when it cannot be read.
std::optional<std::uint64_t> CountLines(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::uint64_t lines = 0;
  char last = '\n';
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    for (ssize_t i = 0; i < n; ++i) lines += buf[i] == '\n';
    last = buf[n - 1];
  }
  ::close(fd);
  return lines + (last != '\n' ? 1 : 0);
}

}  // namespace

// The rotated files of exact-path pattern `source` written after since_ns that the
// tailer does not follow: they appeared and were rotated away while it was down or
// between two passes (see "Unread rotations" in the header).
void FileTailer::ReportUnreadRotations(std::size_t source, std::int64_t since_ns, Pass& pass) {
  const std::string& pattern = options_.patterns[source];
  const std::string dir = tail::Dirname(pattern);
  const std::string base = Basename(pattern);
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(d)) {
    if (IsRotationName(entry->d_name, base)) names.emplace_back(entry->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const auto dev = static_cast<std::uint64_t>(st.st_dev);
    const auto ino = static_cast<std::uint64_t>(st.st_ino);
    if (FindFile(dev, ino) || tail::ToNs(st.st_mtim) <= since_ns) continue;
    if (auto closed = closed_.find({dev, ino}); closed != closed_.end() && tail::ToNs(st.st_mtim) <= closed->second) {
      continue;  // read to its end and closed, unchanged since
    }
    if (!unread_.insert({dev, ino}).second) continue;  // reported already
    unread_order_.emplace_back(dev, ino);
    if (unread_order_.size() > kMaxUnreadReported) {
      unread_.erase(unread_order_.front());
      unread_order_.erase(unread_order_.begin());
    }
    if (Compressed(name)) {
      Emit(pass, TailEventKind::kUnreadRotation, source, path, 0,
           "rotated away unseen and compressed: never read, its records are not counted");
      continue;
    }
    const std::optional<std::uint64_t> lines = CountLines(path);
    if (!lines) continue;
    Emit(pass, TailEventKind::kUnreadRotation, source, path, *lines,
         "rotated away unseen (the pattern does not match rotated names): " + std::to_string(*lines) +
             " lines never read, counted as dropped");
  }
}
// Adds `file` (which holds `entry`) at the entry's position. A file no
// pattern finds was renamed while we were down: it is drained like a rotated one.
void FileTailer::ResumeAt(TailedFilePtr file, const Position& entry, bool matched, Pass& pass) {
  const ContentHash head = file->pos.head;
  const std::string path = file->pos.path;
  file->pos = entry;
  file->pos.path = path;
  if (head.len > file->pos.head.len) file->pos.head = head;
  file->pos.validated_ns = pass.now_ns;
  file->read_offset = entry.offset;
  if (matched) {
    EmitFor(pass, TailEventKind::kOpened, *file, entry.offset,
            "resumed from the checkpoint at offset " + std::to_string(entry.offset));
  } else {
    file->state = FileState::kRotated;
    file->rotated_at = pass.now;
    EmitFor(pass, TailEventKind::kRotated, *file, 1,
            "renamed from " + entry.path + " while the tailer was down; resuming at offset " +
                std::to_string(entry.offset) + " and draining it");
  }
  files_.push_back(std::move(file));
}

// Phase 3 of ResumeFromCheckpoint for one entry; `copy` is the path of the copy
// its data continues in, or empty.
void FileTailer::ResolveDeferred(const Position& entry, std::size_t source, bool matched,
                                 TailedFilePtr file, bool holds, const std::string& copy,
                                 Pass& pass) {
  if (file && FindFile(file->pos.dev, file->pos.ino)) {
    DropFile(std::move(file));  // its inode number was reused by a copy claimed in phase 2
    holds = false;
  }
  const std::string rest =
      copy.empty() ? "data after offset " + std::to_string(entry.offset) + ", if any, was not read"
                   : "unread data after offset " + std::to_string(entry.offset) +
                         " continues from copy " + copy;
  if (file && holds) {
    ResumeAt(std::move(file), entry, matched, pass);
  } else if (file) {
    // Same inode, other content: truncated (maybe copytruncate) or the inode
    // was reused by a new file. Either way its content is new: read it from 0.
    ResetToStart(*file, file->last_size, pass);
    EmitFor(pass, TailEventKind::kTruncated, *file, file->last_size,
            "content changed while the tailer was down (truncated, or the inode reused); "
            "reading it from the beginning; " +
                rest);
    files_.push_back(std::move(file));
  } else {
    Emit(pass, copy.empty() ? TailEventKind::kDeleted : TailEventKind::kRotated, source, entry.path,
         1,
         "checkpointed file is gone or unreadable (deleted, moved or replaced while the tailer "
         "was down); " +
             rest);
  }
}

void FileTailer::CheckTruncation(TailedFile& file, const std::vector<Candidate>& found,
                                 Pass& pass) {
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) {
    ReportReadError(pass, file, "fstat", errno);
    return;
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  std::string reason;
  if (size < file.read_offset) {
    reason = "shrank from " + std::to_string(std::max(file.last_size, file.read_offset)) + " to " +
             std::to_string(size) + " bytes";
  } else {
    std::optional<std::string> change =
        tail::ContentChange(file.fd, file.pos, file.read_offset,
                            file.skipping ? std::string_view() : std::string_view(file.partial));
    if (!change) {
      ReportReadError(pass, file, "pread", errno);
      return;
    }
    reason = std::move(*change);
  }
  if (reason.empty()) {
    file.last_size = size;
    file.pos.validated_ns = pass.now_ns;
    return;
  }
  HandleTruncation(file, size, reason, found, pass);
}

void FileTailer::HandleTruncation(TailedFile& file, std::uint64_t new_size,
                                  const std::string& reason, const std::vector<Candidate>& found,
                                  Pass& pass) {
  ScheduleUnreadScan(file.source, file.pos.validated_ns);  // truncated
  TailedFilePtr copy = FindCopy(file.pos, file.source, found, pass);
  const std::uint64_t known = std::max(file.last_size, file.read_offset);
  const std::uint64_t lost = copy ? 0 : known - file.pos.offset;
  std::string message = reason + "; reading again from offset 0";
  if (copy) {
    message += "; unread old data continues from copy " + copy->pos.path + " at offset " +
               std::to_string(copy->pos.offset);
  } else {
    message +=
        "; no copy found: bytes appended after the last read and before the "
        "truncation, if any, were not seen";
  }
  EmitFor(pass, TailEventKind::kTruncated, file, new_size, message);
  if (lost > 0) {
    EmitFor(pass, TailEventKind::kLostBytes, file, lost,
            std::to_string(lost) + " bytes after offset " + std::to_string(file.pos.offset) +
                " were read or seen but not delivered before the truncation");
  }
  ResetToStart(file, new_size, pass);
  if (copy) InsertBefore(file, std::move(copy));
}

// Opens the copytruncate copy of `old` (tail::FindCopyPath; not one we tail)
// positioned where `old` was; a copy no pattern finds is drained like a rotated
// file. nullptr when there is none.
FileTailer::TailedFilePtr FileTailer::FindCopy(const Position& old, std::size_t source,
                                               const std::vector<Candidate>& found, Pass& pass) {
  const std::string best_path = tail::FindCopyPath(
      old, [this](std::uint64_t dev, std::uint64_t ino) { return FindFile(dev, ino) != nullptr; });
  if (best_path.empty()) return nullptr;
  TailedFilePtr copy = OpenFile(best_path, source, pass);
  if (copy && tail::Matches(copy->fd, 0, old.head) != true) DropFile(std::move(copy));
  if (!copy) return nullptr;
  const Position identity = copy->pos;
  copy->pos = old;
  copy->pos.dev = identity.dev;
  copy->pos.ino = identity.ino;
  copy->pos.path = identity.path;
  copy->pos.validated_ns = pass.now_ns;
  copy->read_offset = old.offset;
  if (!tail::FindCandidate(found, identity.dev, identity.ino)) {
    copy->state = FileState::kRotated;
    copy->rotated_at = pass.now;
  }
  return copy;
}

void FileTailer::OpenNewFiles(const std::vector<Candidate>& found, Pass& pass) {
  const bool at_end =
      !polled_ && !checkpoint_loaded_ && options_.start_position == TailStartPosition::kEnd;
  for (const Candidate& c : found) {
    if (FindFile(c.dev, c.ino)) continue;
    TailedFilePtr file = OpenFile(c.path, c.source, pass);
    if (!file) continue;
    if (FindFile(file->pos.dev, file->pos.ino)) {  // raced with a rename
      DropFile(std::move(file));
      continue;
    }
    if (at_end) StartAtEnd(*file);
    // A new file at an exact path after the first pass: a file created there and
    // rotated away since the last pass (the loop stalled longer than the writer's
    // rotation period while no file was followed at that path) was never seen.
    if (polled_) ScheduleUnreadScan(file->source, last_pass_ns_ - kMtimeSlackNs);
    EmitFor(pass, TailEventKind::kOpened, *file, file->pos.offset,
            file->pos.offset == 0
                ? std::string("reading from the beginning")
                : "starting at the end, offset " + std::to_string(file->pos.offset));
    files_.push_back(std::move(file));
  }
  // Forget errors of paths that are gone or opened, so a new failure is reported.
  std::erase_if(open_errors_, [&](const auto& entry) {
    return std::none_of(found.begin(), found.end(), [&](const Candidate& c) {
      return c.path == entry.first && !FindFile(c.dev, c.ino);
    });
  });
}

FileTailer::TailedFilePtr FileTailer::OpenFile(const std::string& path, std::size_t source,
                                               Pass& pass) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st {};
  std::string error;
  int code = 0;
  if (fd < 0) {
    code = errno;
    error = "cannot open: " + ErrnoText(code);
  } else if (::fstat(fd, &st) != 0) {
    code = errno;
    error = "fstat: " + ErrnoText(code);
  } else if (!S_ISREG(st.st_mode)) {
    code = EINVAL;
    error = "not a regular file";
  }
  if (!error.empty()) {
    if (fd >= 0) ::close(fd);
    std::string& last = open_errors_[path];
    if (last != error) {
      last = error;
      Emit(pass, TailEventKind::kReadError, source, path, static_cast<std::uint64_t>(code),
           path + ": " + error);
    }
    return nullptr;
  }
  auto file = std::make_unique<TailedFile>();
  file->fd = fd;
  file->source = source;
  file->pos.dev = static_cast<std::uint64_t>(st.st_dev);
  file->pos.ino = static_cast<std::uint64_t>(st.st_ino);
  file->pos.path = path;
  file->pos.validated_ns = pass.now_ns;
  file->last_size = static_cast<std::uint64_t>(st.st_size);
  file->pos.head = HashHead(fd, file->last_size, options_.fingerprint_bytes);
  file->watch = watch_.WatchFile(fd);
  return file;
}

// Opens the file with inode (dev, ino): at `path` if it is still there (empty: not
// known), else wherever it is now in `dir` (looked up by inode: a writer may rename
// it between the patterns' expansion and this open, as a rotation does). nullptr
// when it is gone.
FileTailer::TailedFilePtr FileTailer::OpenByIdentity(const std::string& path, const std::string& dir,
                                                     std::uint64_t dev, std::uint64_t ino, std::size_t source,
                                                     Pass& pass) {
  std::string at = path.empty() ? tail::FindInode(dir, dev, ino) : path;
  // A name can move again while we look it up; a few tries settle any real rotation.
  for (int attempt = 0; attempt < 3 && !at.empty(); ++attempt) {
    TailedFilePtr file = OpenFile(at, source, pass);
    if (file && file->pos.dev == dev && file->pos.ino == ino) return file;
    DropFile(std::move(file));
    at = tail::FindInode(dir, dev, ino);
  }
  return nullptr;
}

FileTailer::TailedFile* FileTailer::FindFile(std::uint64_t dev, std::uint64_t ino) const {
  for (const TailedFilePtr& file : files_) {
    if (file->pos.dev == dev && file->pos.ino == ino) return file.get();
  }
  return nullptr;
}

void FileTailer::InsertBefore(const TailedFile& anchor, TailedFilePtr file) {
  auto it = std::find_if(files_.begin(), files_.end(),
                         [&](const TailedFilePtr& f) { return f.get() == &anchor; });
  files_.insert(it, std::move(file));
}

// Positions a newly seen file after its last complete line, so that a line
// being written when we arrive is read whole. If that last line is already
// longer than max_line_bytes, the rest of it is skipped as too long.
void FileTailer::StartAtEnd(TailedFile& file) {
  const std::uint64_t size = file.last_size;
  const std::uint64_t window = std::min<std::uint64_t>(size, options_.max_line_bytes + 1);
  const std::uint64_t lowest = size - window;
  std::optional<std::uint64_t> start;
  for (std::uint64_t end = size; end > lowest && !start;) {
    const std::uint64_t len = std::min<std::uint64_t>(buffer_.size(), end - lowest);
    const ssize_t n = tail::PreadFull(file.fd, buffer_.data(), len, end - len);
    if (n != static_cast<ssize_t>(len)) break;
    const char* data = buffer_.data();
    for (std::uint64_t i = len; i > 0; --i) {
      if (data[i - 1] == '\n') {
        start = end - len + i;
        break;
      }
    }
    end -= len;
  }
  if (!start && lowest == 0) start = 0;  // the whole file is one unfinished line
  if (start) {
    file.pos.offset = file.read_offset = *start;
  } else {
    // The start of that line is beyond max_line_bytes: skip to its end. (A
    // checkpoint taken inside it records this mid-line offset.)
    file.pos.offset = file.read_offset = size;
    file.skipping = true;
    file.skipped_bytes = window;
  }
  file.pos.marker = HashBefore(file.fd, file.pos.offset);
}

void FileTailer::ResetToStart(TailedFile& file, std::uint64_t size, Pass& pass) {
  file.pos.offset = 0;
  file.pos.line = 0;
  file.pos.marker = ContentHash{};
  file.pos.head = HashHead(file.fd, size, options_.fingerprint_bytes);
  file.pos.validated_ns = pass.now_ns;
  file.read_offset = 0;
  file.last_size = size;
  file.partial.clear();
  file.skipping = false;
  file.skipped_bytes = 0;
  file.at_eof = false;
}

// ---------------------------------------------------------------------------
// Reading and line assembly.

void FileTailer::ReadAvailable(TailedFile& file, Pass& pass) {
  const std::uint64_t budget =
      options_.max_read_bytes_per_poll == 0 ? UINT64_MAX : options_.max_read_bytes_per_poll;
  const std::uint64_t committed_before = file.pos.offset;
  std::uint64_t consumed = 0;
  file.at_eof = false;
  for (;;) {
    const ssize_t n =
        ::pread(file.fd, buffer_.data(), buffer_.size(), static_cast<off_t>(file.read_offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ReportReadError(pass, file, "read", errno);
      break;
    }
    file.error_reported = false;
    if (n == 0) {
      file.at_eof = true;
      break;
    }
    const std::uint64_t chunk_offset = file.read_offset;
    file.read_offset += static_cast<std::uint64_t>(n);
    file.last_size = std::max(file.last_size, file.read_offset);
    pass.summary.bytes += static_cast<std::uint64_t>(n);
    consumed += static_cast<std::uint64_t>(n);
    ConsumeChunk(file, chunk_offset, std::string_view(buffer_.data(), n), pass);
    if (static_cast<std::size_t>(n) < buffer_.size()) {  // a short read: end of file for now
      file.at_eof = true;
      break;
    }
    if (consumed >= budget) {
      pass.summary.more_pending = true;
      break;
    }
  }
  if (file.pos.offset != committed_before || file.pos.head.len < options_.fingerprint_bytes) {
    RefreshHashes(file);
  }
}

// Extends the head hash while the file is shorter than fingerprint_bytes and
// recomputes the marker before the committed offset.
void FileTailer::RefreshHashes(TailedFile& file) {
  if (file.pos.head.len < options_.fingerprint_bytes && file.read_offset > file.pos.head.len) {
    file.pos.head = HashHead(file.fd, file.read_offset, options_.fingerprint_bytes);
  }
  file.pos.marker = HashBefore(file.fd, file.pos.offset);
}

// Splits `data` (the bytes at chunk_offset) into lines. Invariant: when
// `partial` is empty and we are not skipping, pos.offset is the offset of the
// next byte to look at.
void FileTailer::ConsumeChunk(TailedFile& file, std::uint64_t chunk_offset, std::string_view data,
                              Pass& pass) {
  std::size_t at = 0;
  while (at < data.size()) {
    if (file.partial.empty() && !file.skipping) {
      while (at < data.size() && data[at] == '\0') ++at;  // hole left by copytruncate
      file.pos.offset = chunk_offset + at;
      if (at == data.size()) break;
    }
    const void* nl = std::memchr(data.data() + at, '\n', data.size() - at);
    const std::size_t end = nl ? static_cast<const char*>(nl) - data.data() : data.size();
    const std::string_view piece = data.substr(at, end - at);
    if (!nl) {
      AppendToLine(file, piece);
      break;
    }
    if (file.partial.empty() && !file.skipping && piece.size() <= options_.max_line_bytes) {
      DeliverLine(file, piece, pass);  // the common case: no copy
    } else {
      AppendToLine(file, piece);
      if (file.skipping) {
        SkipLongLine(file, file.skipped_bytes, pass);
      } else {
        DeliverLine(file, file.partial, pass);
      }
    }
    file.partial.clear();
    file.skipping = false;
    file.skipped_bytes = 0;
    file.pos.offset = chunk_offset + end + 1;  // committed only after the callback returned
    at = end + 1;
  }
}

// Adds a piece of the unfinished line, switching to skipping once it is too long.
void FileTailer::AppendToLine(TailedFile& file, std::string_view piece) {
  if (file.skipping) {
    file.skipped_bytes += piece.size();
  } else if (file.partial.size() + piece.size() > options_.max_line_bytes) {
    file.skipping = true;
    file.skipped_bytes = file.partial.size() + piece.size();
    std::string().swap(file.partial);
  } else {
    file.partial.append(piece);
  }
}

void FileTailer::DeliverLine(TailedFile& file, std::string_view line, Pass& pass) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  ++file.pos.line;
  ++pass.summary.lines;
  if (pass.callbacks.on_line) {
    pass.callbacks.on_line(options_.patterns[file.source], file.pos.path, file.pos.line, line);
  }
}

void FileTailer::SkipLongLine(TailedFile& file, std::uint64_t length, Pass& pass) {
  ++file.pos.line;
  EmitFor(pass, TailEventKind::kLineTooLong, file, length,
          "line " + std::to_string(file.pos.line) + " is " + std::to_string(length) +
              " bytes, over max_line_bytes " + std::to_string(options_.max_line_bytes) +
              "; skipped");
}

// A rotated or deleted file is being closed: its unfinished last line is final.
void FileTailer::FlushPartialLine(TailedFile& file, Pass& pass) {
  if (file.skipping) {
    SkipLongLine(file, file.skipped_bytes, pass);
  } else if (!file.partial.empty()) {
    DeliverLine(file, file.partial, pass);
  } else {
    return;
  }
  file.partial.clear();
  file.skipping = false;
  file.skipped_bytes = 0;
  file.pos.offset = file.read_offset;
}

void FileTailer::CloseFinished(Pass& pass) {
  for (auto it = files_.begin(); it != files_.end();) {
    TailedFile& file = **it;
    bool close = false;
    if (file.state == FileState::kDeleted) {
      close = file.at_eof || file.error_reported;
    } else if (file.state == FileState::kRotated) {
      close = file.error_reported ||
              (file.at_eof && pass.now - file.rotated_at >= options_.rotate_wait);
    }
    if (!close) {
      ++it;
      continue;
    }
    if (!file.error_reported) FlushPartialLine(file, pass);
    EmitFor(pass, TailEventKind::kClosed, file, file.pos.offset,
            "stopped tailing at offset " + std::to_string(file.pos.offset));
    RememberClosed(file);
    CloseFile(file);
    it = files_.erase(it);
  }
}

// A file read to its end and closed is not an unread rotation while unchanged:
// remember its identity and modification time (the last kMaxClosedRemembered).
void FileTailer::RememberClosed(const TailedFile& file) {
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) return;
  const FileId id{file.pos.dev, file.pos.ino};
  if (closed_.insert_or_assign(id, tail::ToNs(st.st_mtim)).second) closed_order_.push_back(id);
  if (closed_order_.size() > kMaxClosedRemembered) {
    closed_.erase(closed_order_.front());
    closed_order_.pop_front();
  }
}

void FileTailer::CloseFile(TailedFile& file) {
  watch_.Unwatch(file.watch);
  file.watch = -1;
}

// Closes a file opened but not kept. Watches are per inode: if a tailed file
// has the same inode, the watch is theirs too and stays.
void FileTailer::DropFile(TailedFilePtr file) {
  if (file && !FindFile(file->pos.dev, file->pos.ino)) CloseFile(*file);
}

// ---------------------------------------------------------------------------
// Checkpoint.

std::vector<FileTailer::Position> FileTailer::CollectPositions() const {
  std::vector<Position> positions = restored_;  // not yet resolved by a first Poll()
  for (const TailedFilePtr& file : files_) {
    if (file->state != FileState::kDeleted) positions.push_back(file->pos);
  }
  return positions;
}

std::string FileTailer::SavePositions() const { return tail::SerializeCheckpoint(CollectPositions()); }

Status FileTailer::RestorePositions(std::string_view text) {
  if (polled_) return Status::Error("positions can only be restored before the first poll");
  Result<std::vector<Position>> parsed = tail::ParseCheckpoint(text, "saved positions");
  if (!parsed.ok()) return Status::Error(parsed.error());
  restored_ = std::move(parsed).value();
  checkpoint_loaded_ = true;
  checkpoint_error_.clear();
  return Status::Ok();
}

void FileTailer::RestoreUnreadReported(std::vector<FileId> ids) {
  if (ids.size() > kMaxUnreadReported) ids.erase(ids.begin(), ids.end() - kMaxUnreadReported);
  unread_order_ = std::move(ids);
  unread_ = std::set<FileId>(unread_order_.begin(), unread_order_.end());
}

Status FileTailer::Checkpoint() {
  if (options_.checkpoint_path.empty()) return Status::Ok();
  Status written = tail::WriteCheckpoint(options_.checkpoint_path, CollectPositions());
  if (!written.ok()) return Status::Error("checkpoint: " + written.error());
  return Status::Ok();
}

}  // namespace kvwatch::collectors
