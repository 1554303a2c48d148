// FileTailer (file_tailer.h): creation, one Poll() pass in order, renames and
// deletions of open files, opening new files (at their start or end), closing
// drained ones, events, and the positions it saves. The checkpoint resume, unread
// rotations and truncation (with copytruncate copies) are in file_tailer_restore.cc;
// reading and line assembly in file_tailer_read.cc.
#include "collectors/file_tailer.h"

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
#include "collectors/file_tailer_internal.h"
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

}  // namespace

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

void FileTailer::Emit(Pass& pass, TailEventKind kind, std::size_t source, std::string path, std::uint64_t count,
                      std::string message) {
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

void FileTailer::EmitFor(Pass& pass, TailEventKind kind, const TailedFile& file, std::uint64_t count,
                         std::string message) {
  Emit(pass, kind, file.source, file.pos.path, count, std::move(message));
}

void FileTailer::ReportReadError(Pass& pass, TailedFile& file, const std::string& what, int error) {
  if (file.error_reported) return;
  file.error_reported = true;
  EmitFor(pass, TailEventKind::kReadError, file, static_cast<std::uint64_t>(error),
          what + " " + file.pos.path + " at offset " + std::to_string(file.read_offset) + ": " + ErrnoText(error));
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
                         std::to_string(kMaxFingerprintBytes) + ", got " + std::to_string(options.fingerprint_bytes));
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
  restored_sources_ = std::move(loaded.sources);
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
    Emit(pass, TailEventKind::kCheckpointError, options_.patterns.size(), options_.checkpoint_path, 0,
         checkpoint_error_ + "; starting without it");
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
  if (options_.before_read) options_.before_read();
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
      EmitFor(pass, TailEventKind::kDeleted, *file, 1, "deleted while open; reading what is left, then closing it");
    } else if (file->state == FileState::kActive) {
      ScheduleUnreadScan(file->source, file->pos.validated_ns);  // rotated away
      file->state = FileState::kRotated;
      file->rotated_at = pass.now;
      const std::string old_path = file->pos.path;
      if (!name.empty()) file->pos.path = name;
      EmitFor(pass, TailEventKind::kRotated, *file, 1,
              "rotated away from " + old_path + (name.empty() ? "" : " to " + name) + "; draining it");
    } else if (!name.empty()) {
      file->pos.path = name;
    }
  }
}

// ---------------------------------------------------------------------------
// Opening, positioning and closing files.

void FileTailer::OpenNewFiles(const std::vector<Candidate>& found, Pass& pass) {
  const bool at_end = !polled_ && !checkpoint_loaded_ && options_.start_position == TailStartPosition::kEnd;
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
    if (polled_) ScheduleUnreadScan(file->source, last_pass_ns_);
    EmitFor(pass, TailEventKind::kOpened, *file, file->pos.offset,
            file->pos.offset == 0 ? std::string("reading from the beginning")
                                  : "starting at the end, offset " + std::to_string(file->pos.offset));
    files_.push_back(std::move(file));
  }
  // Forget errors of paths that are gone or opened, so a new failure is reported.
  std::erase_if(open_errors_, [&](const auto& entry) {
    return std::none_of(found.begin(), found.end(),
                        [&](const Candidate& c) { return c.path == entry.first && !FindFile(c.dev, c.ino); });
  });
}

FileTailer::TailedFilePtr FileTailer::OpenFile(const std::string& path, std::size_t source, Pass& pass) {
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
      Emit(pass, TailEventKind::kReadError, source, path, static_cast<std::uint64_t>(code), path + ": " + error);
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
FileTailer::TailedFilePtr FileTailer::OpenByIdentity(const std::string& path, const std::string& dir, std::uint64_t dev,
                                                     std::uint64_t ino, std::size_t source, Pass& pass) {
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
  auto it = std::find_if(files_.begin(), files_.end(), [&](const TailedFilePtr& f) { return f.get() == &anchor; });
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

void FileTailer::CloseFinished(Pass& pass) {
  for (auto it = files_.begin(); it != files_.end();) {
    TailedFile& file = **it;
    bool close = false;
    if (file.state == FileState::kDeleted) {
      close = file.at_eof || file.error_reported;
    } else if (file.state == FileState::kRotated) {
      close = file.error_reported || (file.at_eof && pass.now - file.rotated_at >= options_.rotate_wait);
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

std::vector<FileTailer::ClosedFile> FileTailer::ClosedRemembered() const {
  std::vector<ClosedFile> out;
  out.reserve(closed_order_.size());
  for (const FileId& id : closed_order_) out.push_back({id, closed_.at(id)});
  return out;
}

void FileTailer::RestoreClosedRemembered(std::vector<ClosedFile> files) {
  if (files.size() > kMaxClosedRemembered) files.erase(files.begin(), files.end() - kMaxClosedRemembered);
  closed_.clear();
  closed_order_.clear();
  for (const ClosedFile& f : files) {
    if (closed_.insert_or_assign(f.id, f.mtime_ns).second) closed_order_.push_back(f.id);
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

// Each pattern's mark is the start of the last pass (the files as they were then
// are accounted for: followed, closed, or reported); before the first pass, the
// marks restored.
std::vector<tail::SourceMark> FileTailer::CollectSourceMarks() const {
  if (!polled_) return restored_sources_;
  std::vector<tail::SourceMark> marks;
  for (const std::string& pattern : options_.patterns) marks.push_back({pattern, last_pass_ns_});
  return marks;
}

std::string FileTailer::SavePositions() const {
  return tail::SerializeCheckpoint(CollectPositions(), CollectSourceMarks());
}

Status FileTailer::RestorePositions(std::string_view text) {
  if (polled_) return Status::Error("positions can only be restored before the first poll");
  std::vector<tail::SourceMark> sources;
  Result<std::vector<Position>> parsed = tail::ParseCheckpoint(text, "saved positions", &sources);
  if (!parsed.ok()) return Status::Error(parsed.error());
  restored_ = std::move(parsed).value();
  restored_sources_ = std::move(sources);
  checkpoint_loaded_ = true;
  checkpoint_error_.clear();
  return Status::Ok();
}

void FileTailer::RestoreUnreadReported(std::vector<UnreadFile> files) {
  unread_.clear();
  unread_order_.clear();
  for (const UnreadFile& f : files) RememberUnread(f.id, f.head);
}

Status FileTailer::Checkpoint() {
  if (options_.checkpoint_path.empty()) return Status::Ok();
  Status written = tail::WriteCheckpoint(options_.checkpoint_path, CollectPositions(), CollectSourceMarks());
  if (!written.ok()) return Status::Error("checkpoint: " + written.error());
  return Status::Ok();
}

}  // namespace kvwatch::collectors
