#include "agent/runtime/state_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/atomic_file.h"
#include "base/byte_io.h"

namespace kvwatch::agent {

namespace {

constexpr char kMagic[8] = {'K', 'V', 'W', 'S', 'T', 'A', 'T', 'E'};
constexpr std::size_t kHeaderBytes = sizeof(kMagic) + sizeof(std::uint32_t) + sizeof(std::uint64_t) +
                                     sizeof(std::uint32_t);
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
};

std::uint32_t Crc32(std::span<const std::uint8_t> bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
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
  for (const auto& [name, bytes] : parts.collectors) add(Kind::kCollector, name, bytes);
  std::memcpy(body.data(), &count, sizeof(count));

  StateBytes out(kMagic, kMagic + sizeof(kMagic));
  out.reserve(kHeaderBytes + body.size());
  base::AppendPod(&out, kStateVersion);
  base::AppendPod<std::uint64_t>(&out, body.size());
  base::AppendPod(&out, Crc32(body));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

base::Result<StateParts> DecodeState(std::span<const std::uint8_t> in) {
  using R = base::Result<StateParts>;
  if (in.size() < sizeof(kMagic) || std::memcmp(in.data(), kMagic, sizeof(kMagic)) != 0) {
    return R::Error("not a kvwatch state file (no KVWSTATE header)");
  }
  in = in.subspan(sizeof(kMagic));
  std::uint32_t version = 0;
  std::uint64_t length = 0;
  std::uint32_t crc = 0;
  if (!base::ReadPod(&in, &version)) return R::Error("truncated in the header");
  if (version != kStateVersion) {
    return R::Error("version " + std::to_string(version) + " (this build reads version " +
                    std::to_string(kStateVersion) + ")");
  }
  if (!base::ReadPod(&in, &length) || !base::ReadPod(&in, &crc)) return R::Error("truncated in the header");
  if (length != in.size()) {
    return R::Error("truncated: the header announces " + std::to_string(length) + " bytes, the file holds " +
                    std::to_string(in.size()));
  }
  if (Crc32(in) != crc) return R::Error("checksum mismatch (the file is corrupt)");

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
      case Kind::kCollector:
        if (parts.Collector(name) != nullptr) return R::Error(where + "collector \"" + name + "\" twice");
        parts.collectors.emplace_back(std::move(name), std::move(bytes));
        break;
      default:
        return R::Error(where + "unknown kind " + std::to_string(kind));
    }
  }
  if (!in.empty()) return R::Error("unexpected bytes after the last section");
  if (!fingerprint || !engine || !curves) return R::Error("a required section (fingerprint, engine, curves) is missing");
  return parts;
}

base::Status WriteStateFile(const std::string& path, const StateParts& parts) {
  const StateBytes bytes = EncodeState(parts);
  return base::WriteFileAtomically(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

LoadedState ReadStateFile(const std::string& path) {
  LoadedState loaded;
  auto decode = [](const std::string& file) -> base::Result<StateParts> {
    base::Result<std::string> text = base::ReadWholeFile(file, kMaxStateBytes);
    if (!text.ok()) return base::Result<StateParts>::Error(text.error());
    return DecodeState(AsBytes(text.value()));
  };
  // A complete temporary file is the newer state (the kill came before its rename).
  const std::string tmp = path + ".tmp";
  std::error_code ec;
  if (std::filesystem::exists(tmp, ec)) {
    base::Result<StateParts> parts = decode(tmp);
    if (parts.ok()) {
      loaded.outcome = LoadedState::Outcome::kLoaded;
      loaded.parts = std::move(parts).value();
      loaded.from = tmp;
      return loaded;
    }
  }
  if (!std::filesystem::exists(path, ec)) return loaded;
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

}  // namespace kvwatch::agent
