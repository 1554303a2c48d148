// FileTailer (file_tailer.h): reading an open file to its end (within the pass's
// budget) and assembling lines: CRLF, the NUL hole of copytruncate, lines over
// max_line_bytes skipped, a final partial line flushed when its file closes; the
// offset committed only after on_line returns, and the identity hashes refreshed.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "collectors/file_identity.h"
#include "collectors/file_tailer.h"
#include "collectors/file_tailer_internal.h"

namespace kvwatch::collectors {

namespace {

using tail::HashBefore;
using tail::HashHead;

}  // namespace

// ---------------------------------------------------------------------------
// Reading and line assembly.

void FileTailer::ReadAvailable(TailedFile& file, Pass& pass) {
  const std::uint64_t budget = options_.max_read_bytes_per_poll == 0 ? UINT64_MAX : options_.max_read_bytes_per_poll;
  const std::uint64_t committed_before = file.pos.offset;
  const tail::ContentHash marker_before = file.pos.marker;  // the bytes before committed_before
  const bool checkable = file.pos.head.len > 0 || marker_before.len > 0;
  std::uint64_t consumed = 0;
  file.at_eof = false;
  for (;;) {
    const ssize_t n = ::pread(file.fd, buffer_.data(), buffer_.size(), static_cast<off_t>(file.read_offset));
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
    // Truncated, and written again past our offset, since CheckTruncation looked
    // this pass (a copytruncate while the pass drained other files): the bytes
    // just read would be new content taken for the old. The content before them,
    // checked after the read, still being ours proves they are ours (a truncation
    // never brings old content back); otherwise they are left for the next pass,
    // which sees the truncation.
    if (checkable && (tail::Matches(file.fd, 0, file.pos.head) != true ||
                      tail::Matches(file.fd, committed_before - marker_before.len, marker_before) != true)) {
      break;
    }
    const std::uint64_t chunk_offset = file.read_offset;
    file.read_offset += static_cast<std::uint64_t>(n);
    file.last_size = std::max(file.last_size, file.read_offset);
    pass.summary.bytes += static_cast<std::uint64_t>(n);
    consumed += static_cast<std::uint64_t>(n);
    const std::uint64_t offset_before = file.pos.offset;
    ConsumeChunk(file, chunk_offset, std::string_view(buffer_.data(), n), pass);
    if (file.pos.offset != offset_before) UpdateMarker(file, chunk_offset, std::string_view(buffer_.data(), n));
    if (chunk_offset == 0 && file.pos.head.len < options_.fingerprint_bytes) {  // likewise the head
      const std::size_t len = std::min<std::size_t>(static_cast<std::size_t>(n), options_.fingerprint_bytes);
      file.pos.head =
          tail::ContentHash{static_cast<std::uint32_t>(len), tail::Fnv1a(std::string_view(buffer_.data(), len))};
    }
    if (static_cast<std::size_t>(n) < buffer_.size()) {  // a short read: end of file for now
      file.at_eof = true;
      break;
    }
    if (consumed >= budget) {
      pass.summary.more_pending = true;
      break;
    }
  }
  // Extends the head hash while the file is shorter than fingerprint_bytes.
  if (file.pos.head.len < options_.fingerprint_bytes && file.read_offset > file.pos.head.len) {
    file.pos.head = HashHead(file.fd, file.read_offset, options_.fingerprint_bytes);
  }
}

// The marker before the committed offset, from the bytes just consumed (`data`, at
// chunk_offset): hashing the file again could hash a truncation's new content, and
// the copy would then not be recognized. Only when the bytes before the offset
// began in an earlier chunk (a line longer than the marker crossing chunks) are
// they read again.
void FileTailer::UpdateMarker(TailedFile& file, std::uint64_t chunk_offset, std::string_view data) {
  const std::uint64_t len = std::min<std::uint64_t>(file.pos.offset, tail::kMarkerBytes);
  const std::uint64_t from = file.pos.offset - len;
  if (from >= chunk_offset && file.pos.offset <= chunk_offset + data.size()) {
    file.pos.marker =
        tail::ContentHash{static_cast<std::uint32_t>(len), tail::Fnv1a(data.substr(from - chunk_offset, len))};
  } else {
    file.pos.marker = HashBefore(file.fd, file.pos.offset);
  }
}

// Splits `data` (the bytes at chunk_offset) into lines. Invariant: when
// `partial` is empty and we are not skipping, pos.offset is the offset of the
// next byte to look at.
void FileTailer::ConsumeChunk(TailedFile& file, std::uint64_t chunk_offset, std::string_view data, Pass& pass) {
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
          "line " + std::to_string(file.pos.line) + " is " + std::to_string(length) + " bytes, over max_line_bytes " +
              std::to_string(options_.max_line_bytes) + "; skipped");
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

}  // namespace kvwatch::collectors
