#include "collectors/tail_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/atomic_file.h"
#include "collectors/file_scan.h"

namespace kvwatch::collectors::tail {

namespace {

using base::Result;
using base::Status;

constexpr std::size_t kMaxCheckpointBytes = 64 << 20;
constexpr std::string_view kCheckpointMagic = "kvwatch-file-tailer-checkpoint";
constexpr std::uint64_t kCheckpointVersion = 2;
constexpr std::uint64_t kCheckpointVersionWithoutSources = 1;

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

}  // namespace

// One "file" line: dev ino head_len head_hash marker_len marker_hash offset
// line validated_ns path (percent-escaped).
std::string FormatCheckpointEntry(const FilePosition& p) {
  return "file " + std::to_string(p.dev) + " " + std::to_string(p.ino) + " " + std::to_string(p.head.len) + " " +
         Hex16(p.head.hash) + " " + std::to_string(p.marker.len) + " " + Hex16(p.marker.hash) + " " +
         std::to_string(p.offset) + " " + std::to_string(p.line) + " " + std::to_string(p.validated_ns) + " " +
         EscapePath(p.path) + "\n";
}

std::optional<std::string> ParseCheckpointEntry(std::string_view line, FilePosition& p) {
  const std::vector<std::string_view> f = SplitSpaces(line);
  if (f.size() != 11 || f[0] != "file") {
    return "expected 'file' and 10 space-separated fields, got " + std::to_string(f.size()) + " fields";
  }
  std::optional<std::string> path = UnescapePath(f[10]);
  if (!ParseInt(f[1], p.dev)) return "bad device number '" + std::string(f[1]) + "'";
  if (!ParseInt(f[2], p.ino)) return "bad inode number '" + std::string(f[2]) + "'";
  if (!ParseInt(f[3], p.head.len) || p.head.len > kMaxFingerprintBytes || !ParseInt(f[4], p.head.hash, 16)) {
    return "bad head fingerprint";
  }
  if (!ParseInt(f[5], p.marker.len) || p.marker.len > kMarkerBytes || !ParseInt(f[6], p.marker.hash, 16)) {
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

namespace {

std::string FormatSourceMark(const SourceMark& s) {
  return "source " + std::to_string(s.since_ns) + " " + EscapePath(s.pattern) + "\n";
}

std::optional<std::string> ParseSourceMark(std::string_view line, SourceMark& s) {
  const std::vector<std::string_view> f = SplitSpaces(line);
  if (f.size() != 3) return "expected 'source <ns> <pattern>', got " + std::to_string(f.size()) + " fields";
  if (!ParseInt(f[1], s.since_ns)) return "bad timestamp '" + std::string(f[1]) + "'";
  std::optional<std::string> pattern = UnescapePath(f[2]);
  if (!pattern || pattern->empty()) return "bad pattern '" + std::string(f[2]) + "'";
  s.pattern = std::move(*pattern);
  return std::nullopt;
}

}  // namespace

Result<std::vector<FilePosition>> ParseCheckpoint(std::string_view text, const std::string& name,
                                                  std::vector<SourceMark>* sources) {
  using R = Result<std::vector<FilePosition>>;
  std::vector<FilePosition> entries;
  std::size_t at = 0;
  std::size_t line_number = 0;
  bool ended = false;
  while (at < text.size()) {
    const std::size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) {
      return R::Error(name + ":" + std::to_string(line_number + 1) + ": truncated (last line has no newline)");
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
      if (version != kCheckpointVersion && version != kCheckpointVersionWithoutSources) {
        return R::Error(where + "unsupported version " + std::to_string(version) + " (this build reads version " +
                        std::to_string(kCheckpointVersion) + ")");
      }
    } else if (line.starts_with("end ")) {
      const std::vector<std::string_view> f = SplitSpaces(line);
      std::uint64_t count = 0;
      std::uint64_t hash = 0;
      if (f.size() != 3 || !ParseInt(f[1], count) || !ParseInt(f[2], hash, 16)) {
        return R::Error(where + "expected 'end <count> <hash>'");
      }
      if (count != entries.size()) {
        return R::Error(where + "the end line counts " + std::to_string(count) + " entries, found " +
                        std::to_string(entries.size()));
      }
      if (hash != Fnv1a(text.substr(0, at))) return R::Error(where + "checksum mismatch");
      ended = true;
    } else if (line.starts_with("source ")) {
      SourceMark mark;
      if (std::optional<std::string> error = ParseSourceMark(line, mark)) return R::Error(where + *error);
      if (sources) sources->push_back(std::move(mark));
    } else {
      FilePosition p;
      if (std::optional<std::string> error = ParseCheckpointEntry(line, p)) return R::Error(where + *error);
      entries.push_back(std::move(p));
    }
    at = nl + 1;
  }
  if (!ended) return R::Error(name + ": truncated (no 'end' line)");
  return entries;
}

std::string SerializeCheckpoint(const std::vector<FilePosition>& entries, const std::vector<SourceMark>& sources) {
  std::string text = std::string(kCheckpointMagic) + " " + std::to_string(kCheckpointVersion) + "\n";
  for (const FilePosition& entry : entries) text += FormatCheckpointEntry(entry);
  for (const SourceMark& source : sources) text += FormatSourceMark(source);
  text += "end " + std::to_string(entries.size()) + " " + Hex16(Fnv1a(text)) + "\n";
  return text;
}

Status WriteCheckpoint(const std::string& path, const std::vector<FilePosition>& entries,
                       const std::vector<SourceMark>& sources) {
  return base::WriteFileAtomically(path, SerializeCheckpoint(entries, sources));
}

// A complete "<path>.tmp" is newer than <path> (a crash came between its fsync
// and the rename), so it is preferred; an incomplete one is a torn write and
// is ignored silently.
LoadedCheckpoint LoadCheckpoint(const std::string& path) {
  LoadedCheckpoint loaded;
  Result<std::string> tmp = base::ReadWholeFile(path + ".tmp", kMaxCheckpointBytes);
  if (tmp.ok()) {
    std::vector<SourceMark> sources;
    Result<std::vector<FilePosition>> parsed = ParseCheckpoint(tmp.value(), path + ".tmp", &sources);
    if (parsed.ok()) {
      loaded.sources = std::move(sources);
      loaded.entries = std::move(parsed).value();
      loaded.loaded = true;
      return loaded;
    }
  }
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) return loaded;  // first start
  Result<std::string> text = base::ReadWholeFile(path, kMaxCheckpointBytes);
  if (!text.ok()) {
    loaded.error = "checkpoint unreadable: " + text.error();
    return loaded;
  }
  Result<std::vector<FilePosition>> parsed = ParseCheckpoint(text.value(), path, &loaded.sources);
  if (!parsed.ok()) {
    loaded.sources.clear();
    loaded.error = "checkpoint corrupt: " + parsed.error();
    return loaded;
  }
  loaded.entries = std::move(parsed).value();
  loaded.loaded = true;
  return loaded;
}

}  // namespace kvwatch::collectors::tail
