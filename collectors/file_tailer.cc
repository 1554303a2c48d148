#include "collectors/file_tailer.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <optional>
#include <set>
#include <utility>

namespace kvwatch::collectors {

namespace {

using base::Result;
using base::Status;

constexpr std::uint32_t kMarkerBytes = 32;  // fluent-bit's FLB_TAIL_DB_OFFSET_MARKER_SIZE
constexpr std::size_t kMaxFingerprintBytes = 64 << 10;
constexpr std::int64_t kCopyCtimeSlackNs = 1'000'000'000;  // file timestamps use a coarse clock
constexpr std::size_t kMaxCheckpointBytes = 64 << 20;
constexpr std::string_view kCheckpointMagic = "kvwatch-file-tailer-checkpoint";
constexpr std::uint64_t kCheckpointVersion = 1;
constexpr std::uint32_t kDirWatchMask =
    IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_ONLYDIR;
constexpr std::uint32_t kFileWatchMask = IN_MODIFY | IN_ATTRIB | IN_MOVE_SELF | IN_DELETE_SELF;

// FNV-1a, 64 bits: a checksum for identities, not a cryptographic hash.
constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;
std::uint64_t Fnv1a(std::string_view data, std::uint64_t hash = kFnvOffset) {
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string ErrnoText(int error) { return std::strerror(error); }

// pread until `length` bytes or end of file; -1 on error (errno set).
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

std::int64_t ToNs(const timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::int64_t RealtimeNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ToNs(ts);
}

std::string Dirname(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool HasGlobMagic(std::string_view text) {
  return text.find_first_of("*?[") != std::string_view::npos;
}

// The current name of an open file (via /proc), without " (deleted)"; empty if unknown.
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

// The path of the regular file with this identity in `dir`, or "".
std::string FindInode(const std::string& dir, std::uint64_t dev, std::uint64_t ino) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return "";
  std::string found;
  while (const dirent* entry = ::readdir(d)) {
    if (entry->d_ino != ino) continue;
    const std::string path = dir + "/" + entry->d_name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<std::uint64_t>(st.st_dev) == dev) {
      found = path;
      break;
    }
  }
  ::closedir(d);
  return found;
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

// Percent-escapes the bytes that would break the checkpoint's space-separated lines.
std::string EscapePath(std::string_view path) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : path) {
    if (c <= 0x20 || c == 0x7f || c == '%') {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::optional<std::string> UnescapePath(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    unsigned value = 0;
    if (i + 2 >= text.size()) return std::nullopt;
    const auto [end, ec] = std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16);
    if (ec != std::errc() || end != text.data() + i + 3) return std::nullopt;
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

template <class Int>
bool ParseInt(std::string_view text, Int& value, int base = 10) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  return ec == std::errc() && end == text.data() + text.size();
}

std::vector<std::string_view> SplitSpaces(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (start <= line.size()) {
    const std::size_t space = line.find(' ', start);
    const std::size_t end = space == std::string_view::npos ? line.size() : space;
    fields.push_back(line.substr(start, end - start));
    if (space == std::string_view::npos) break;
    start = space + 1;
  }
  return fields;
}

std::string Hex16(std::uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(value));
  return buf;
}

Result<std::string> ReadSmallFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Result<std::string>::Error(path + ": cannot open: " + ErrnoText(errno));
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return Result<std::string>::Error(path + ": read error: " + ErrnoText(error));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxCheckpointBytes) {
      ::close(fd);
      return Result<std::string>::Error(path + ": larger than " +
                                        std::to_string(kMaxCheckpointBytes) + " bytes");
    }
  }
  ::close(fd);
  return text;
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Error(path + ": write error: " + ErrnoText(errno));
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return Status::Ok();
}

// tmp file in the same directory, fsync, rename over `path`, fsync the directory.
Status WriteFileAtomically(const std::string& path, std::string_view text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Error(tmp + ": cannot create: " + ErrnoText(errno));
  Status written = WriteAll(fd, text, tmp);
  if (written.ok() && ::fsync(fd) != 0)
    written = Status::Error(tmp + ": fsync: " + ErrnoText(errno));
  if (::close(fd) != 0 && written.ok())
    written = Status::Error(tmp + ": close: " + ErrnoText(errno));
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return written;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    return Status::Error("rename " + tmp + " -> " + path + ": " + ErrnoText(error));
  }
  const std::string dir = Dirname(path);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return Status::Error(dir + ": cannot open directory: " + ErrnoText(errno));
  const bool synced = ::fsync(dir_fd) == 0;
  const int error = errno;
  ::close(dir_fd);
  if (!synced) return Status::Error(dir + ": fsync of directory: " + ErrnoText(error));
  return Status::Ok();
}

}  // namespace

// ---------------------------------------------------------------------------
// Internal types.

// A hash over `len` bytes of a file (len 0: nothing to check).
struct ContentHash {
  std::uint32_t len = 0;
  std::uint64_t hash = kFnvOffset;
};

// Identity plus committed position of a file: what a checkpoint entry holds.
struct FileTailer::Position {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  ContentHash head;               // the first head.len bytes
  ContentHash marker;             // the marker.len bytes just before `offset`
  std::uint64_t offset = 0;       // just after the last delivered (or skipped) line
  std::uint64_t line = 0;         // lines before `offset`
  std::int64_t validated_ns = 0;  // CLOCK_REALTIME when the content last checked out
  std::string path;               // last known name
};

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

struct FileTailer::Candidate {
  std::string path;
  std::size_t source = 0;
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
};

struct FileTailer::Pass {
  const TailCallbacks& callbacks;
  TailPollSummary summary;
  std::chrono::steady_clock::time_point now;
  std::int64_t now_ns = 0;
};

namespace {

// Hash of `len` bytes at `offset`; nullopt if the file is shorter. -1 error via errno.
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

// Whether the bytes `expected` covers still hash the same. nullopt: I/O error.
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

Result<std::unique_ptr<FileTailer>> FileTailer::Create(FileTailerOptions options) {
  using R = Result<std::unique_ptr<FileTailer>>;
  if (options.patterns.empty()) {
    return R::Error("FileTailerOptions.patterns: expected at least one path or glob pattern");
  }
  for (std::size_t i = 0; i < options.patterns.size(); ++i) {
    if (options.patterns[i].empty()) {
      return R::Error("FileTailerOptions.patterns[" + std::to_string(i) +
                      "]: expected a path or glob pattern, got an empty string");
    }
  }
  if (options.max_line_bytes == 0) {
    return R::Error("FileTailerOptions.max_line_bytes: expected at least 1");
  }
  if (options.read_chunk_bytes == 0 || options.read_chunk_bytes > (std::size_t{64} << 20)) {
    return R::Error("FileTailerOptions.read_chunk_bytes: expected 1 to 64 MiB, got " +
                    std::to_string(options.read_chunk_bytes));
  }
  if (options.fingerprint_bytes > kMaxFingerprintBytes) {
    return R::Error("FileTailerOptions.fingerprint_bytes: expected at most " +
                    std::to_string(kMaxFingerprintBytes) + ", got " +
                    std::to_string(options.fingerprint_bytes));
  }
  if (options.rotate_wait.count() < 0) {
    return R::Error("FileTailerOptions.rotate_wait: expected a duration >= 0");
  }
  if (!options.clock) options.clock = [] { return std::chrono::steady_clock::now(); };
  std::unique_ptr<FileTailer> tailer(new FileTailer(std::move(options)));
  return R(std::move(tailer));
}

FileTailer::FileTailer(FileTailerOptions options)
    : options_(std::move(options)), buffer_(options_.read_chunk_bytes) {
  if (options_.use_inotify) notify_fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (!options_.checkpoint_path.empty()) LoadCheckpoint();
}

FileTailer::~FileTailer() {
  files_.clear();  // closes the files; their watches go with notify_fd_
  if (notify_fd_ >= 0) ::close(notify_fd_);
}

// ---------------------------------------------------------------------------
// Poll.

TailPollSummary FileTailer::Poll(const TailCallbacks& callbacks) {
  Pass pass{callbacks, {}, options_.clock(), RealtimeNs()};
  DrainNotifications();
  if (!checkpoint_error_.empty()) {
    Emit(pass, TailEventKind::kCheckpointError, options_.patterns.size(), options_.checkpoint_path,
         0, checkpoint_error_ + "; starting without it");
    checkpoint_error_.clear();
  }
  const std::vector<Candidate> found = ExpandPatterns();
  HandleRotation(found, pass);
  if (!polled_) ResumeFromCheckpoint(found, pass);
  std::vector<TailedFile*> known;
  for (const TailedFilePtr& file : files_) known.push_back(file.get());
  for (TailedFile* file : known) CheckTruncation(*file, found, pass);
  OpenNewFiles(found, pass);
  // Old content first: files being drained (closed, with their final partial
  // line, when done), then the live ones, each in the order they were opened.
  for (const TailedFilePtr& file : files_) {
    if (file->state != FileState::kActive) ReadAvailable(*file, pass);
  }
  CloseFinished(pass);
  for (const TailedFilePtr& file : files_) {
    if (file->state == FileState::kActive) ReadAvailable(*file, pass);
  }
  UpdateWatches();
  polled_ = true;
  pass.summary.files_open = files_.size();
  return pass.summary;
}

void FileTailer::DrainNotifications() {
  if (notify_fd_ < 0) return;
  alignas(inotify_event) char buf[8192];
  for (;;) {
    const ssize_t n = ::read(notify_fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buf + at);
      if (event->mask & IN_IGNORED) {  // a watched directory went away: re-add it later
        std::erase_if(dir_watches_, [&](const auto& entry) { return entry.second == event->wd; });
      }
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
}

std::vector<FileTailer::Candidate> FileTailer::ExpandPatterns() const {
  std::vector<Candidate> found;
  std::set<std::pair<std::uint64_t, std::uint64_t>> seen;
  for (std::size_t source = 0; source < options_.patterns.size(); ++source) {
    for (std::string& path : Glob(options_.patterns[source], 0)) {
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (!seen.emplace(st.st_dev, st.st_ino).second) continue;  // hard link or second pattern
      found.push_back(Candidate{std::move(path), source, static_cast<std::uint64_t>(st.st_dev),
                                static_cast<std::uint64_t>(st.st_ino)});
    }
  }
  return found;
}

namespace {
template <class C>
const C* FindCandidate(const std::vector<C>& found, std::uint64_t dev, std::uint64_t ino) {
  for (const C& c : found) {
    if (c.dev == dev && c.ino == ino) return &c;
  }
  return nullptr;
}
}  // namespace

// Renames and deletions of open files: a file keeps its identity wherever it
// goes; one no pattern finds any more is rotated (or deleted) and drained.
void FileTailer::HandleRotation(const std::vector<Candidate>& found, Pass& pass) {
  for (const TailedFilePtr& file : files_) {
    if (const Candidate* c = FindCandidate(found, file->pos.dev, file->pos.ino)) {
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
    const std::string name = CurrentName(file->fd);
    if (st.st_nlink == 0) {
      file->state = FileState::kDeleted;
      if (!name.empty()) file->pos.path = name;
      EmitFor(pass, TailEventKind::kDeleted, *file, 1,
              "deleted while open; reading what is left, then closing it");
    } else if (file->state == FileState::kActive) {
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
    const Candidate* c = FindCandidate(found, entry.dev, entry.ino);
    const std::size_t source = c ? c->source : SourceForPath(entry.path);
    if (source == options_.patterns.size()) continue;  // no longer configured
    const std::string path = c ? c->path : FindInode(Dirname(entry.path), entry.dev, entry.ino);
    TailedFilePtr file = path.empty() ? nullptr : OpenFile(path, source, pass);
    if (file && (file->pos.dev != entry.dev || file->pos.ino != entry.ino)) {
      DropFile(std::move(file));
    }
    const bool holds = file && Holds(*file, entry);
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

// Whether `file` still holds `position`: the offset is within the file and the
// head and offset-marker hashes match.
bool FileTailer::Holds(const TailedFile& file, const Position& position) {
  return position.offset <= file.last_size && Matches(file.fd, 0, position.head) == true &&
         Matches(file.fd, position.offset - position.marker.len, position.marker) == true;
}

// "" if the bytes reading depends on are unchanged (head, the marker before the
// committed offset, the tail of a buffered unfinished line), else what
// changed; nullopt on an I/O error.
std::optional<std::string> FileTailer::ContentChange(const TailedFile& file) const {
  const std::optional<bool> head = Matches(file.fd, 0, file.pos.head);
  if (!head) return std::nullopt;
  if (!*head) return "content changed in place (first bytes differ)";
  const std::optional<bool> marker =
      Matches(file.fd, file.pos.offset - file.pos.marker.len, file.pos.marker);
  if (!marker) return std::nullopt;
  if (!*marker) return "content changed in place (bytes before the read offset differ)";
  if (file.skipping || file.partial.empty()) return "";
  const std::size_t n = std::min<std::size_t>(file.partial.size(), kMarkerBytes);
  std::string bytes(n, '\0');
  const ssize_t got = PreadFull(file.fd, bytes.data(), n, file.read_offset - n);
  if (got < 0) return std::nullopt;
  if (static_cast<std::size_t>(got) != n ||
      bytes != std::string_view(file.partial).substr(file.partial.size() - n)) {
    return "content changed in place (the unfinished last line differs)";
  }
  return "";
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
    std::optional<std::string> change = ContentChange(file);
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

// A copytruncate copy of `old` in its directory: a regular file we do not
// tail, changed since `old` last checked out, holding at least `old.offset`
// bytes whose head and offset marker hash like `old`'s. The longest wins.
FileTailer::TailedFilePtr FileTailer::FindCopy(const Position& old, std::size_t source,
                                               const std::vector<Candidate>& found, Pass& pass) {
  if (old.head.len == 0) return nullptr;  // no content to recognize it by
  const std::string dir_path = Dirname(old.path);
  DIR* dir = ::opendir(dir_path.c_str());
  if (!dir) return nullptr;
  std::string best_path;
  std::uint64_t best_size = 0;
  while (const dirent* d = ::readdir(dir)) {
    const std::string path = dir_path + "/" + d->d_name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const auto dev = static_cast<std::uint64_t>(st.st_dev);
    const auto ino = static_cast<std::uint64_t>(st.st_ino);
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (dev != old.dev || ino == old.ino || FindFile(dev, ino)) continue;
    if (size < old.offset || size < old.head.len) continue;
    if (ToNs(st.st_ctim) < old.validated_ns - kCopyCtimeSlackNs) continue;
    if (!best_path.empty() && size <= best_size) continue;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    const bool same = Matches(fd, 0, old.head) == true &&
                      Matches(fd, old.offset - old.marker.len, old.marker) == true;
    ::close(fd);
    if (same) {
      best_path = path;
      best_size = size;
    }
  }
  ::closedir(dir);
  if (best_path.empty()) return nullptr;
  TailedFilePtr copy = OpenFile(best_path, source, pass);
  if (copy && Matches(copy->fd, 0, old.head) != true) DropFile(std::move(copy));
  if (!copy) return nullptr;
  const Position identity = copy->pos;
  copy->pos = old;
  copy->pos.dev = identity.dev;
  copy->pos.ino = identity.ino;
  copy->pos.path = identity.path;
  copy->pos.validated_ns = pass.now_ns;
  copy->read_offset = old.offset;
  if (!FindCandidate(found, identity.dev, identity.ino)) {
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
  if (notify_fd_ >= 0) {
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    file->watch = ::inotify_add_watch(notify_fd_, self.c_str(), kFileWatchMask);
  }
  return file;
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

std::size_t FileTailer::SourceForPath(const std::string& path) const {
  for (std::size_t i = 0; i < options_.patterns.size(); ++i) {
    if (::fnmatch(options_.patterns[i].c_str(), path.c_str(), FNM_PATHNAME | FNM_PERIOD) == 0) {
      return i;
    }
  }
  return options_.patterns.size();
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
    const ssize_t n = PreadFull(file.fd, buffer_.data(), len, end - len);
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
    pass.callbacks.on_line(options_.patterns[file.source], file.pos.line, line);
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
    CloseFile(file);
    it = files_.erase(it);
  }
}

void FileTailer::CloseFile(TailedFile& file) {
  if (file.watch >= 0 && notify_fd_ >= 0) ::inotify_rm_watch(notify_fd_, file.watch);
  file.watch = -1;
}

// Closes a file opened but not kept. Watches are per inode: if a tailed file
// has the same inode, the watch is theirs too and stays.
void FileTailer::DropFile(TailedFilePtr file) {
  if (file && !FindFile(file->pos.dev, file->pos.ino)) CloseFile(*file);
}

void FileTailer::UpdateWatches() {
  if (notify_fd_ < 0) return;
  for (const std::string& pattern : options_.patterns) {
    const std::string dir = Dirname(pattern);
    std::vector<std::string> dirs =
        HasGlobMagic(dir) ? Glob(dir, GLOB_ONLYDIR) : std::vector<std::string>{dir};
    for (const std::string& d : dirs) {
      if (dir_watches_.count(d)) continue;
      const int wd = ::inotify_add_watch(notify_fd_, d.c_str(), kDirWatchMask);
      if (wd >= 0) dir_watches_[d] = wd;  // a missing directory is retried next pass
    }
  }
}

// ---------------------------------------------------------------------------
// Checkpoint.

namespace {

std::string SerializeCheckpoint(const std::vector<std::string>& entries) {
  std::string text =
      std::string(kCheckpointMagic) + " " + std::to_string(kCheckpointVersion) + "\n";
  for (const std::string& entry : entries) text += entry;
  text += "end " + std::to_string(entries.size()) + " " + Hex16(Fnv1a(text)) + "\n";
  return text;
}

}  // namespace

std::vector<FileTailer::Position> FileTailer::CollectPositions() const {
  std::vector<Position> positions = restored_;  // not yet resolved by a first Poll()
  for (const TailedFilePtr& file : files_) {
    if (file->state != FileState::kDeleted) positions.push_back(file->pos);
  }
  return positions;
}

Status FileTailer::Checkpoint() {
  if (options_.checkpoint_path.empty()) return Status::Ok();
  std::vector<std::string> lines;
  for (const Position& p : CollectPositions()) lines.push_back(FormatEntry(p));
  Status written = WriteFileAtomically(options_.checkpoint_path, SerializeCheckpoint(lines));
  if (!written.ok()) return Status::Error("checkpoint: " + written.error());
  return Status::Ok();
}

// One "file" line: dev ino head_len head_hash marker_len marker_hash offset
// line validated_ns path (percent-escaped).
std::string FileTailer::FormatEntry(const Position& p) {
  return "file " + std::to_string(p.dev) + " " + std::to_string(p.ino) + " " +
         std::to_string(p.head.len) + " " + Hex16(p.head.hash) + " " +
         std::to_string(p.marker.len) + " " + Hex16(p.marker.hash) + " " +
         std::to_string(p.offset) + " " + std::to_string(p.line) + " " +
         std::to_string(p.validated_ns) + " " + EscapePath(p.path) + "\n";
}

std::optional<std::string> FileTailer::ParseEntry(std::string_view line, Position& p) {
  const std::vector<std::string_view> f = SplitSpaces(line);
  if (f.size() != 11 || f[0] != "file") {
    return "expected 'file' and 10 space-separated fields, got " + std::to_string(f.size()) +
           " fields";
  }
  std::optional<std::string> path = UnescapePath(f[10]);
  if (!ParseInt(f[1], p.dev)) return "bad device number '" + std::string(f[1]) + "'";
  if (!ParseInt(f[2], p.ino)) return "bad inode number '" + std::string(f[2]) + "'";
  if (!ParseInt(f[3], p.head.len) || p.head.len > kMaxFingerprintBytes ||
      !ParseInt(f[4], p.head.hash, 16)) {
    return "bad head fingerprint";
  }
  if (!ParseInt(f[5], p.marker.len) || p.marker.len > kMarkerBytes ||
      !ParseInt(f[6], p.marker.hash, 16)) {
    return "bad offset marker";
  }
  if (!ParseInt(f[7], p.offset) || p.marker.len > p.offset) {
    return "bad offset '" + std::string(f[7]) + "'";
  }
  if (!ParseInt(f[8], p.line)) return "bad line number '" + std::string(f[8]) + "'";
  if (!ParseInt(f[9], p.validated_ns)) return "bad timestamp '" + std::string(f[9]) + "'";
  if (!path || path->empty()) return "bad path '" + std::string(f[10]) + "'";
  p.path = std::move(*path);
  return std::nullopt;
}

Result<std::vector<FileTailer::Position>> FileTailer::ParseCheckpoint(std::string_view text,
                                                                      const std::string& name) {
  using R = Result<std::vector<Position>>;
  std::vector<Position> entries;
  std::size_t at = 0;
  std::size_t line_number = 0;
  bool ended = false;
  while (at < text.size()) {
    const std::size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) {
      return R::Error(name + ":" + std::to_string(line_number + 1) +
                      ": truncated (last line has no newline)");
    }
    const std::string_view line = text.substr(at, nl - at);
    ++line_number;
    const std::string where = name + ":" + std::to_string(line_number) + ": ";
    if (ended) return R::Error(where + "unexpected data after the 'end' line");
    if (line_number == 1) {
      const std::vector<std::string_view> f = SplitSpaces(line);
      std::uint64_t version = 0;
      if (f.size() != 2 || f[0] != kCheckpointMagic || !ParseInt(f[1], version)) {
        return R::Error(where + "expected the header '" + std::string(kCheckpointMagic) + " " +
                        std::to_string(kCheckpointVersion) + "'");
      }
      if (version != kCheckpointVersion) {
        return R::Error(where + "unsupported version " + std::to_string(version) +
                        " (this build reads version " + std::to_string(kCheckpointVersion) + ")");
      }
    } else if (line.starts_with("end ")) {
      const std::vector<std::string_view> f = SplitSpaces(line);
      std::uint64_t count = 0;
      std::uint64_t hash = 0;
      if (f.size() != 3 || !ParseInt(f[1], count) || !ParseInt(f[2], hash, 16)) {
        return R::Error(where + "expected 'end <count> <hash>'");
      }
      if (count != entries.size()) {
        return R::Error(where + "the end line counts " + std::to_string(count) +
                        " entries, found " + std::to_string(entries.size()));
      }
      if (hash != Fnv1a(text.substr(0, at))) return R::Error(where + "checksum mismatch");
      ended = true;
    } else {
      Position p;
      if (std::optional<std::string> error = ParseEntry(line, p)) return R::Error(where + *error);
      entries.push_back(std::move(p));
    }
    at = nl + 1;
  }
  if (!ended) return R::Error(name + ": truncated (no 'end' line)");
  return entries;
}

// A complete "<path>.tmp" is newer than <path> (a crash came between its fsync
// and the rename), so it is preferred; an incomplete one is a torn write and
// is ignored silently.
void FileTailer::LoadCheckpoint() {
  const std::string& path = options_.checkpoint_path;
  Result<std::string> tmp = ReadSmallFile(path + ".tmp");
  if (tmp.ok()) {
    Result<std::vector<Position>> parsed = ParseCheckpoint(tmp.value(), path + ".tmp");
    if (parsed.ok()) {
      restored_ = std::move(parsed).value();
      checkpoint_loaded_ = true;
      return;
    }
  }
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) return;  // first start
  Result<std::string> text = ReadSmallFile(path);
  if (!text.ok()) {
    checkpoint_error_ = "checkpoint unreadable: " + text.error();
    return;
  }
  Result<std::vector<Position>> parsed = ParseCheckpoint(text.value(), path);
  if (!parsed.ok()) {
    checkpoint_error_ = "checkpoint corrupt: " + parsed.error();
    return;
  }
  restored_ = std::move(parsed).value();
  checkpoint_loaded_ = true;
}

}  // namespace kvwatch::collectors
