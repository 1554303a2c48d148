// FileTailer (file_tailer.h): what survives a gap. The first Poll() after a
// checkpoint puts each entry back (resumed, followed to its copy, or reported);
// rotated files an exact-path pattern never saw are reported as unread rotations;
// a file truncated or changed in place is read again from 0, its unread old data
// from its copytruncate copy when one is found.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <utility>

#include "collectors/file_identity.h"
#include "collectors/file_scan.h"
#include "collectors/file_tailer.h"
#include "collectors/file_tailer_internal.h"
#include "collectors/tail_checkpoint.h"

namespace kvwatch::collectors {

namespace {

using tail::ContentHash;

}  // namespace

// ---------------------------------------------------------------------------
// Checkpoint resume, unread rotations, truncation and copies.

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
    TailedFilePtr file =
        OpenByIdentity(c ? c->path : "", tail::Dirname(c ? c->path : entry.path), entry.dev, entry.ino, source, pass);
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
  // were last validated (at the end of this pass, once every file is open). A
  // pattern without positions (its file appeared after the save, or none was
  // there) looks from its mark, when the saved pass looked: a file that appeared
  // after the save and was rotated away while we were down (read by the run that
  // died, or not at all) is counted, not silently forgotten.
  for (std::size_t source = 0; source < options_.patterns.size(); ++source) {
    if (HasGlob(options_.patterns[source])) continue;
    for (const Position& e : entries) {
      if (SourceForEntry(e.path) != source) continue;
      auto [it, added] = unread_scan_.emplace(source, e.validated_ns);
      if (!added) it->second = std::max(it->second, e.validated_ns);
    }
    if (unread_scan_.count(source)) continue;
    for (const tail::SourceMark& mark : restored_sources_) {
      if (mark.pattern == options_.patterns[source]) unread_scan_.emplace(source, mark.since_ns);
    }
  }
  restored_sources_.clear();
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
    if (FindFile(dev, ino) || tail::ToNs(st.st_mtim) <= since_ns - kMtimeSlackNs) continue;
    if (auto closed = closed_.find({dev, ino}); closed != closed_.end() && tail::ToNs(st.st_mtim) <= closed->second) {
      continue;  // read to its end and closed, unchanged since
    }
    if (CountedUnread(dev, ino, path)) continue;  // reported already
    if (st.st_size == 0) continue;                // nothing unread in it (yet)
    if (HoldsFollowedContent(path, static_cast<std::uint64_t>(st.st_size))) continue;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    const ContentHash head = tail::HashHead(fd, static_cast<std::uint64_t>(st.st_size), UnreadHeadBytes());
    ::close(fd);
    if (head.len == 0) continue;  // unreadable
    RememberUnread({dev, ino}, head);
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
// How many first bytes identify a file counted as unread: as many as identify a
// followed file (FileTailerOptions::fingerprint_bytes), at least an offset
// marker's.
std::size_t FileTailer::UnreadHeadBytes() const {
  return std::max<std::size_t>(options_.fingerprint_bytes, tail::kMarkerBytes);
}

// Whether the file (dev, ino) at `path` is one already counted as unread: the
// identity, and the first bytes it had then. A file that reuses the inode number
// of a counted one deleted since (logrotate deletes the oldest, then copies) is
// not: counting it as the old one would lose it silently (and, as a copytruncate
// copy, leave its unread rest unread).
bool FileTailer::CountedUnread(std::uint64_t dev, std::uint64_t ino, const std::string& path) const {
  const auto it = unread_.find({dev, ino});
  if (it == unread_.end()) return false;
  if (it->second.len == 0) return true;  // saved without its head: any content
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return true;  // cannot tell: as before
  const std::optional<bool> same = tail::Matches(fd, 0, it->second);
  ::close(fd);
  return same != false;
}

// Remembers a file counted as unread (replacing what was remembered of an earlier
// file with its inode number); the last kMaxUnreadReported are kept.
void FileTailer::RememberUnread(const FileId& id, const ContentHash& head) {
  if (unread_.count(id)) {
    std::erase_if(unread_order_, [&](const UnreadFile& f) { return f.id == id; });
  }
  unread_[id] = head;
  unread_order_.push_back({id, head});
  if (unread_order_.size() > kMaxUnreadReported) {
    unread_.erase(unread_order_.front().id);
    unread_order_.erase(unread_order_.begin());
  }
}

// Whether the file at `path` (`size` bytes) starts as a file we follow does: a
// copytruncate copy of content being read (made, and its original not truncated
// yet, or truncated since the last look), or a partial one being written. Its
// lines are read from the followed file, or from it once the truncation is seen
// (FindCopy): counting it as unread as well would count them twice (a restart
// between logrotate's copy and its truncation did).
bool FileTailer::HoldsFollowedContent(const std::string& path, std::uint64_t size) const {
  if (size == 0) return false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  bool holds = false;
  for (const TailedFilePtr& file : files_) {
    const ContentHash& head = file->pos.head;
    if (head.len > 0 && size >= head.len) {
      holds = tail::Matches(fd, 0, head) == true;
    } else {
      // Shorter than the followed file's head fingerprint (or it has none yet):
      // compare the bytes themselves with what the followed file holds now.
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(size, 4096));
      std::string mine(n, '\0'), theirs(n, '\0');
      holds = tail::PreadFull(fd, mine.data(), n, 0) == static_cast<ssize_t>(n) &&
              tail::PreadFull(file->fd, theirs.data(), n, 0) == static_cast<ssize_t>(n) && mine == theirs;
    }
    if (holds) break;
  }
  ::close(fd);
  return holds;
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
void FileTailer::ResolveDeferred(const Position& entry, std::size_t source, bool matched, TailedFilePtr file,
                                 bool holds, const std::string& copy, Pass& pass) {
  if (file && FindFile(file->pos.dev, file->pos.ino)) {
    DropFile(std::move(file));  // its inode number was reused by a copy claimed in phase 2
    holds = false;
  }
  const std::string rest =
      copy.empty() ? "data after offset " + std::to_string(entry.offset) + ", if any, was not read"
                   : "unread data after offset " + std::to_string(entry.offset) + " continues from copy " + copy;
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
    Emit(pass, copy.empty() ? TailEventKind::kDeleted : TailEventKind::kRotated, source, entry.path, 1,
         "checkpointed file is gone or unreadable (deleted, moved or replaced while the tailer "
         "was down); " +
             rest);
  }
}

void FileTailer::CheckTruncation(TailedFile& file, const std::vector<Candidate>& found, Pass& pass) {
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
    std::optional<std::string> change = tail::ContentChange(
        file.fd, file.pos, file.read_offset, file.skipping ? std::string_view() : std::string_view(file.partial));
    if (!change) {
      ReportReadError(pass, file, "pread", errno);
      return;
    }
    reason = std::move(*change);
  }
  if (reason.empty()) {
    // A file with no content yet (just created or truncated) that has some now: a
    // copytruncate of it since the last pass (the loop stalled for the writer's
    // whole rotation period) left nothing to tell, so its rotated files are looked at.
    if (file.pos.head.len == 0 && file.read_offset == 0 && size > 0) {
      ScheduleUnreadScan(file.source, file.pos.validated_ns);
    }
    file.last_size = size;
    file.pos.validated_ns = pass.now_ns;
    return;
  }
  HandleTruncation(file, size, reason, found, pass);
}

void FileTailer::HandleTruncation(TailedFile& file, std::uint64_t new_size, const std::string& reason,
                                  const std::vector<Candidate>& found, Pass& pass) {
  ScheduleUnreadScan(file.source, file.pos.validated_ns);  // truncated
  TailedFilePtr copy = FindCopy(file.pos, file.source, found, pass);
  const std::uint64_t known = std::max(file.last_size, file.read_offset);
  const std::uint64_t lost = copy ? 0 : known - file.pos.offset;
  std::string message = reason + "; reading again from offset 0";
  if (copy) {
    message +=
        "; unread old data continues from copy " + copy->pos.path + " at offset " + std::to_string(copy->pos.offset);
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
  // A file already counted as an unread rotation is never read as well (a file
  // reusing its inode number is another file).
  const std::string best_path =
      tail::FindCopyPath(old, [this](std::uint64_t dev, std::uint64_t ino, const std::string& path) {
        return FindFile(dev, ino) != nullptr || CountedUnread(dev, ino, path);
      });
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
}  // namespace kvwatch::collectors
