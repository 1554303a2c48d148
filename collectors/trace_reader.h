// ReadTrace: reads one whole request trace (JSON Lines, one request a line; see
// collectors/trace_record.h for the record shapes) and hands every parsed request
// to a callback. This is the input side of `kvwatch replay`.
//
// Source: a file path, plain or gzip (detected by the magic bytes 1f 8b, never by
// the extension; concatenated gzip members are read as one stream), or "-" for
// standard input (plain or gzip alike). Lines end with "\n" or "\r\n"; the last
// line may lack its terminator; a UTF-8 byte-order mark at the very start is
// skipped. Blank (whitespace-only) lines are counted and skipped silently.
//
// Bad lines (not JSON, no hash_ids, a negative id, ... or longer than
// max_line_bytes) are recoverable: each is counted and passed to on_bad_line with
// the source name, its 1-based line number and a message, and reading continues.
// With strict = true the first bad line instead ends the read with the error
// "<source>:<line>: <message>" (on_bad_line is not called). I/O failures (cannot
// open, read error, corrupt or truncated gzip data) always end the read with an
// error naming the source; requests delivered before that stay delivered.
//
// Speed: the source is read in chunk_bytes pieces (plain data straight into the
// line buffer, gzip inflated straight into it) and each line is parsed in place,
// without copying, by one reused TraceRecordParser and one reused Request.
//
// Thread safety: ReadTrace is reentrant; the callbacks run on the calling thread.
#ifndef KVWATCH_COLLECTORS_TRACE_READER_H_
#define KVWATCH_COLLECTORS_TRACE_READER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "collectors/trace_record.h"
#include "curve/request.h"

namespace kvwatch::collectors {

struct TraceReaderOptions {
  // Record parsing: timestamp unit and tenant field names. Default: auto unit,
  // tenant fields "tenant", "class", "type". The auto unit is decided per trace.
  TraceRecordOptions record;
  // Stop at the first bad line with an error. Default: false (report and skip).
  bool strict = false;
  // A line whose content (without "\n" / "\r\n") is longer than this is a bad line
  // "line longer than N bytes" and is skipped without being buffered whole.
  // Default: 64 MiB.
  std::size_t max_line_bytes = std::size_t{64} << 20;
  // Size of each read from the source, in bytes. Default: 1 MiB.
  std::size_t chunk_bytes = std::size_t{1} << 20;
};

struct TraceReadSummary {
  std::string source;              // the path, or "<stdin>" for "-"
  bool gzip = false;               // the source was gzip-compressed
  std::uint64_t lines = 0;         // all lines: records + blank + bad
  std::uint64_t records = 0;       // requests handed to on_request
  std::uint64_t blank_lines = 0;   // empty or whitespace-only lines
  std::uint64_t bad_lines = 0;     // lines reported to on_bad_line
  std::uint64_t page_refs = 0;     // sum of the records' page counts
  std::uint64_t bytes = 0;         // bytes of (decompressed) text read
  std::uint64_t source_bytes = 0;  // bytes read from the source (compressed for gzip)
  // The timestamp unit used: the configured one, or kAuto's decision for this
  // trace (still kAuto when no record had a non-zero timestamp or a chat_id).
  TimestampUnit timestamp_unit = TimestampUnit::kAuto;
};

struct TraceCallbacks {
  // Each parsed request, in file order. The Request object is reused for the next
  // line: the callee may read it or move its contents out, but not keep a
  // reference. May be empty (the read then only counts and validates).
  std::function<void(curve::Request& request)> on_request;
  // Called with each parsed request before on_request: a non-empty message makes
  // its line a bad line (counted, passed to on_bad_line, or the error in strict
  // mode) and on_request is not called. For a caller's own rules on a field
  // (the message should name it). May be empty.
  std::function<std::string(const curve::Request& request)> check;
  // Each bad line (not called in strict mode). May be empty.
  std::function<void(std::string_view source, std::uint64_t line, std::string_view message)> on_bad_line;
  // Progress after every chunk read from the source and once at the end:
  // source_bytes consumed so far (compressed bytes for gzip) and the source's total
  // size, or 0 when unknown (a pipe). May be empty.
  std::function<void(std::uint64_t source_bytes_done, std::uint64_t source_bytes_total)> on_progress;
};

// Reads the trace at `path` ("-" = standard input) to its end. Returns the summary,
// or an error as described in the header comment.
[[nodiscard]] base::Result<TraceReadSummary> ReadTrace(std::string_view path, const TraceReaderOptions& options,
                                                       const TraceCallbacks& callbacks);

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_TRACE_READER_H_
