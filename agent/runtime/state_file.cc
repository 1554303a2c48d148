#include "agent/runtime/state_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/atomic_file.h"
#include "base/byte_io.h"

namespace kvwatch::agent {

namespace {

constexpr char kMagic[8] = {'K', 'V', 'W', 'S', 'T', 'A', 'T', 'E'};
constexpr std::size_t kHeaderBytes = kStateHeaderBytes;
static_assert(kHeaderBytes == sizeof(kMagic) + sizeof(std::uint32_t) + sizeof(std::uint64_t) + sizeof(std::uint32_t));
// More sections than any configuration has (collectors are bounded by the config).
constexpr std::uint32_t kMaxSections = 1 << 16;

enum class Kind : std::uint8_t {
  kFingerprint = 1,
  kEngine = 2,
  kCurves = 3,
  kGroups = 4,
  kCanaries = 5,
  kAlerts = 6,
  kCollector = 7,
  kLoad = 8,
  kHybrid = 9,
};

// The CRC-32 of the body; from version 3 on, of the u32 version and then the
// body, so that a flipped bit in the version is caught too (version 2 files
// checked the body only).
std::uint32_t Crc32(std::uint32_t version, std::span<const std::uint8_t> bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  if (version >= 3) crc = crc32(crc, reinterpret_cast<const Bytef*>(&version), sizeof(version));
  // zlib takes uInt lengths: feed large bodies in slices.
  while (!bytes.empty()) {
    const std::size_t n = std::min<std::size_t>(bytes.size(), 1u << 30);
    crc = crc32(crc, bytes.data(), static_cast<uInt>(n));
    bytes = bytes.subspan(n);
  }
  return static_cast<std::uint32_t>(crc);
}

void AppendSection(StateBytes* out, Kind kind, const std::string& name, std::span<const std::uint8_t> bytes) {
  base::AppendPod(out, static_cast<std::uint8_t>(kind));
  base::AppendPod<std::uint64_t>(out, name.size());
  out->insert(out->end(), name.begin(), name.end());
  base::AppendPod<std::uint64_t>(out, bytes.size());
  out->insert(out->end(), bytes.begin(), bytes.end());
}

std::span<const std::uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace

const StateBytes* StateParts::Collector(const std::string& name) const {
  for (const auto& [n, bytes] : collectors) {
    if (n == name) return &bytes;
  }
  return nullptr;
}

StateBytes EncodeState(const StateParts& parts) {
  StateBytes body;
  std::uint32_t count = 0;
  base::AppendPod(&body, count);  // patched below
  auto add = [&](Kind kind, const std::string& name, std::span<const std::uint8_t> bytes) {
    AppendSection(&body, kind, name, bytes);
    ++count;
  };
  add(Kind::kFingerprint, "", AsBytes(parts.fingerprint));
  add(Kind::kEngine, "", parts.engine);
  add(Kind::kCurves, "", parts.curves);
  if (!parts.groups.empty()) add(Kind::kGroups, "", parts.groups);
  if (!parts.canaries.empty()) add(Kind::kCanaries, "", parts.canaries);
  if (!parts.alerts.empty()) add(Kind::kAlerts, "", parts.alerts);
  if (!parts.load.empty()) add(Kind::kLoad, "", parts.load);
  if (!parts.hybrid.empty()) add(Kind::kHybrid, "", parts.hybrid);
  for (const auto& [name, bytes] : parts.collectors) add(Kind::kCollector, name, bytes);
  std::memcpy(body.data(), &count, sizeof(count));

  StateBytes out(kMagic, kMagic + sizeof(kMagic));
  out.reserve(kHeaderBytes + body.size());
  base::AppendPod(&out, kStateVersion);
  base::AppendPod<std::uint64_t>(&out, body.size());
  base::AppendPod(&out, Crc32(kStateVersion, body));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

namespace {

struct Header {
  std::uint32_t version = 0;
  std::uint64_t length = 0;  // of the body
  std::uint32_t crc = 0;
};

// Checks the first bytes of a state of file_size bytes (head: at most the header)
// before any of the body is read: the magic, the version, and the announced
// length against the file's and against max_bytes.
base::Result<Header> CheckHeader(std::span<const std::uint8_t> in, std::uint64_t file_size, std::uint64_t max_bytes) {
  using R = base::Result<Header>;
  if (in.size() < sizeof(kMagic) || std::memcmp(in.data(), kMagic, sizeof(kMagic)) != 0) {
    return R::Error("not a kvwatch state file (no KVWSTATE header)");
  }
  in = in.subspan(sizeof(kMagic));
  std::uint32_t version = 0;
  Header h;
  if (!base::ReadPod(&in, &version)) return R::Error("truncated in the header");
  if (version < kStateOldestVersion || version > kStateVersion) {
    return R::Error("version " + std::to_string(version) + " (this build reads versions " +
                    std::to_string(kStateOldestVersion) + " to " + std::to_string(kStateVersion) + ")");
  }
  h.version = version;
  if (!base::ReadPod(&in, &h.length) || !base::ReadPod(&in, &h.crc)) return R::Error("truncated in the header");
  const std::uint64_t body = file_size - kHeaderBytes;
  if (h.length != body) {
    return R::Error("truncated: the header announces " + std::to_string(h.length) + " bytes, the file holds " +
                    std::to_string(body));
  }
  if (h.length > max_bytes) {
    return R::Error("the header announces " + std::to_string(h.length) + " bytes, more than the " +
                    std::to_string(max_bytes) + " this configuration's state can hold (docs/guarantees.md); not read");
  }
  return h;
}

base::Result<StateParts> DecodeBody(std::span<const std::uint8_t> in, const Header& header) {
  using R = base::Result<StateParts>;
  if (Crc32(header.version, in) != header.crc) return R::Error("checksum mismatch (the file is corrupt)");

  StateParts parts;
  std::uint32_t count = 0;
  if (!base::ReadPod(&in, &count) || count > kMaxSections) return R::Error("bad section count");
  bool fingerprint = false, engine = false, curves = false;
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint8_t kind = 0;
    std::uint64_t name_len = 0, len = 0;
    const std::string where = "section " + std::to_string(i + 1) + ": ";
    if (!base::ReadPod(&in, &kind) || !base::ReadPod(&in, &name_len) || name_len > in.size()) {
      return R::Error(where + "truncated");
    }
    std::string name(reinterpret_cast<const char*>(in.data()), name_len);
    in = in.subspan(name_len);
    if (!base::ReadPod(&in, &len) || len > in.size()) return R::Error(where + "truncated");
    StateBytes bytes(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(len));
    in = in.subspan(len);
    switch (static_cast<Kind>(kind)) {
      case Kind::kFingerprint:
        parts.fingerprint.assign(bytes.begin(), bytes.end());
        fingerprint = true;
        break;
      case Kind::kEngine:
        parts.engine = std::move(bytes);
        engine = true;
        break;
      case Kind::kCurves:
        parts.curves = std::move(bytes);
        curves = true;
        break;
      case Kind::kGroups:
        parts.groups = std::move(bytes);
        break;
      case Kind::kCanaries:
        parts.canaries = std::move(bytes);
        break;
      case Kind::kAlerts:
        parts.alerts = std::move(bytes);
        break;
      case Kind::kLoad:
        parts.load = std::move(bytes);
        break;
      case Kind::kHybrid:
        parts.hybrid = std::move(bytes);
        break;
      case Kind::kCollector:
        if (parts.Collector(name) != nullptr) return R::Error(where + "collector \"" + name + "\" twice");
        parts.collectors.emplace_back(std::move(name), std::move(bytes));
        break;
      default:
        return R::Error(where + "unknown kind " + std::to_string(kind));
    }
  }
  if (!in.empty()) return R::Error("unexpected bytes after the last section");
  if (!fingerprint || !engine || !curves)
    return R::Error("a required section (fingerprint, engine, curves) is missing");
  return parts;
}

}  // namespace

base::Result<StateParts> DecodeState(std::span<const std::uint8_t> in) {
  base::Result<Header> header = CheckHeader(in.first(std::min(in.size(), kHeaderBytes)), in.size(), kMaxStateBytes);
  if (!header.ok()) return base::Result<StateParts>::Error(header.error());
  return DecodeBody(in.subspan(kHeaderBytes), header.value());
}

std::uint64_t StateByteLimit(const StateBounds& b) {
  return kStateBaseBytes + kStateBytesPerEnginePage * (b.max_pages + b.remembered_evictions + b.hybrid_items) +
         kStateBytesPerCanaryPage * b.canary_pages + kStateBytesPerCollectorPage * b.max_pages * b.collectors;
}

base::Status WriteStateFile(const std::string& path, const StateParts& parts) {
  const StateBytes bytes = EncodeState(parts);
  return base::WriteFileAtomically(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

LoadedState ReadStateFile(const std::string& path, std::uint64_t max_bytes) {
  LoadedState loaded;
  // The header and the size first (a FIFO, a device or a 2 GiB sparse file is
  // refused before its body is read), then the body.
  auto decode = [&](const std::string& file) -> base::Result<StateParts> {
    using R = base::Result<StateParts>;
    base::Result<base::RegularFile> opened = base::RegularFile::Open(file);
    if (!opened.ok()) return R::Error(opened.error());
    base::RegularFile& f = opened.value();
    std::string head;
    base::Status read = f.Read(static_cast<std::size_t>(std::min<std::uint64_t>(f.size(), kHeaderBytes)), &head);
    base::Result<Header> header =
        read.ok() ? CheckHeader(AsBytes(head), f.size(), max_bytes) : base::Result<Header>::Error(read.error());
    std::string body;
    if (header.ok()) read = f.Read(static_cast<std::size_t>(header.value().length), &body);
    loaded.bytes_read += f.bytes_read();
    if (!header.ok()) return R::Error(header.error());
    if (!read.ok()) return R::Error(read.error());
    return DecodeBody(AsBytes(body), header.value());
  };
  // Present in any form (a dangling link or a FIFO too: they are rejected, not missed).
  auto present = [](const std::string& file) {
    std::error_code ec;
    return std::filesystem::symlink_status(file, ec).type() != std::filesystem::file_type::not_found;
  };
  // A complete temporary file is the newer state (the kill came before its rename).
  const std::string tmp = path + ".tmp";
  if (present(tmp)) {
    base::Result<StateParts> parts = decode(tmp);
    if (parts.ok()) {
      loaded.outcome = LoadedState::Outcome::kLoaded;
      loaded.parts = std::move(parts).value();
      loaded.from = tmp;
      return loaded;
    }
  }
  if (!present(path)) return loaded;
  loaded.from = path;
  base::Result<StateParts> parts = decode(path);
  if (!parts.ok()) {
    loaded.outcome = LoadedState::Outcome::kRejected;
    loaded.error = parts.error();
    return loaded;
  }
  loaded.outcome = LoadedState::Outcome::kLoaded;
  loaded.parts = std::move(parts).value();
  return loaded;
}

base::Result<std::unique_ptr<StateLock>> StateLock::Acquire(const std::string& state_path) {
  using R = base::Result<std::unique_ptr<StateLock>>;
  const std::string path = state_path + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) return R::Error(path + ": cannot open the lock file: " + std::strerror(errno));
  std::unique_ptr<StateLock> lock(new StateLock(path, fd));  // closes fd on every return below
  struct stat st {};
  if (::fstat(fd, &st) != 0) return R::Error(path + ": fstat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return R::Error(path + ": is " + base::DescribeFileType(st.st_mode) + ", not a regular file");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error != EWOULDBLOCK) return R::Error(path + ": flock: " + std::strerror(error));
    // The holder wrote its pid right after locking; an empty file: it is about to.
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    std::string pid = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    return R::Error(path + " is held by another kvwatch agent (pid " + (pid.empty() ? "unknown" : pid) +
                    "): two agents must not share a state file");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return R::Error(path + ": cannot write the pid: " + std::strerror(errno));
  }
  return lock;
}

StateLock::~StateLock() {
  // The file stays (removing it would race a third agent's open); the lock goes with the descriptor.
  ::close(fd_);
}

}  // namespace kvwatch::agent
