#include "collectors/trace_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

namespace kvwatch::collectors {

namespace {

using base::Result;
using base::Status;

constexpr unsigned char kGzipMagic0 = 0x1f;
constexpr unsigned char kGzipMagic1 = 0x8b;
constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

std::string ErrnoText(int error) { return std::strerror(error); }

// The bytes of a trace source, decompressed when the source is gzip. Plain data is
// read straight into the caller's buffer; gzip data is inflated straight into it.
class ByteSource {
 public:
  ByteSource(std::string name, std::size_t chunk_bytes)
      : name_(std::move(name)), chunk_bytes_(std::max<std::size_t>(chunk_bytes, 4096)) {}
  ~ByteSource() {
    if (gzip_) inflateEnd(&zs_);
    if (owns_fd_) ::close(fd_);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Opens `path` ("-" = standard input) and sniffs the gzip magic.
  Status Open(std::string_view path);
  // Fills up to `capacity` bytes at `out`; 0 means the end of the data.
  Result<std::size_t> Read(char* out, std::size_t capacity);

  bool gzip() const { return gzip_; }
  // Source bytes consumed so far (compressed bytes for gzip) and the source size
  // (0 when unknown).
  std::uint64_t consumed() const { return raw_read_ - (gzip_ ? zs_.avail_in : raw_size_ - raw_pos_); }
  std::uint64_t total() const { return total_; }

 private:
  Result<std::size_t> ReadRaw(char* out, std::size_t capacity);
  Result<std::size_t> ReadPlain(char* out, std::size_t capacity);
  Result<std::size_t> Inflate(char* out, std::size_t capacity);

  std::string name_;
  std::size_t chunk_bytes_;
  int fd_ = -1;
  bool owns_fd_ = false;
  std::uint64_t total_ = 0;
  std::uint64_t raw_read_ = 0;
  // Raw bytes read ahead: the sniffed first chunk (plain) or the inflate input (gzip).
  std::unique_ptr<unsigned char[]> raw_;
  std::size_t raw_size_ = 0;
  std::size_t raw_pos_ = 0;
  bool gzip_ = false;
  bool member_done_ = false;  // the last gzip member ended; more may follow
  z_stream zs_{};
};

Status ByteSource::Open(std::string_view path) {
  if (path == "-") {
    fd_ = STDIN_FILENO;
  } else {
    fd_ = ::open(std::string(path).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return Status::Error("cannot open " + name_ + ": " + ErrnoText(errno));
    owns_fd_ = true;
  }
  struct stat st;
  if (::fstat(fd_, &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Error("cannot read " + name_ + ": is a directory");
    if (S_ISREG(st.st_mode)) total_ = static_cast<std::uint64_t>(st.st_size);
  }
  raw_ = std::make_unique<unsigned char[]>(chunk_bytes_);
  // Sniff: read until at least two bytes are known (or the input ends).
  while (raw_size_ < 2) {
    auto got = ReadRaw(reinterpret_cast<char*>(raw_.get()) + raw_size_, chunk_bytes_ - raw_size_);
    if (!got.ok()) return got.status();
    if (got.value() == 0) break;
    raw_size_ += got.value();
  }
  gzip_ = raw_size_ >= 2 && raw_[0] == kGzipMagic0 && raw_[1] == kGzipMagic1;
  if (gzip_) {
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) {
      gzip_ = false;
      return Status::Error("cannot read " + name_ + ": zlib initialization failed");
    }
    zs_.next_in = raw_.get();
    zs_.avail_in = static_cast<uInt>(raw_size_);
  }
  return Status::Ok();
}

Result<std::size_t> ByteSource::ReadRaw(char* out, std::size_t capacity) {
  for (;;) {
    const ssize_t n = ::read(fd_, out, capacity);
    if (n >= 0) {
      raw_read_ += static_cast<std::uint64_t>(n);
      return static_cast<std::size_t>(n);
    }
    if (errno != EINTR) return Result<std::size_t>::Error("cannot read " + name_ + ": " + ErrnoText(errno));
  }
}

Result<std::size_t> ByteSource::Read(char* out, std::size_t capacity) {
  return gzip_ ? Inflate(out, capacity) : ReadPlain(out, capacity);
}

Result<std::size_t> ByteSource::ReadPlain(char* out, std::size_t capacity) {
  if (raw_pos_ < raw_size_) {  // the sniffed bytes first
    const std::size_t n = std::min(capacity, raw_size_ - raw_pos_);
    std::memcpy(out, raw_.get() + raw_pos_, n);
    raw_pos_ += n;
    return n;
  }
  return ReadRaw(out, capacity);
}

Result<std::size_t> ByteSource::Inflate(char* out, std::size_t capacity) {
  zs_.next_out = reinterpret_cast<Bytef*>(out);
  zs_.avail_out = static_cast<uInt>(std::min<std::size_t>(capacity, UINT32_MAX));
  const uInt requested = zs_.avail_out;
  while (zs_.avail_out == requested) {
    if (zs_.avail_in == 0) {
      auto got = ReadRaw(reinterpret_cast<char*>(raw_.get()), chunk_bytes_);
      if (!got.ok()) return got;
      if (got.value() == 0) {
        if (member_done_) return std::size_t{0};
        return Result<std::size_t>::Error(name_ + ": unexpected end of gzip data (truncated file?) after " +
                                          std::to_string(raw_read_) + " compressed bytes");
      }
      zs_.next_in = raw_.get();
      zs_.avail_in = static_cast<uInt>(got.value());
    }
    if (member_done_) {  // another gzip member follows (as `cat a.gz b.gz` makes)
      inflateReset(&zs_);
      member_done_ = false;
    }
    const int ret = inflate(&zs_, Z_NO_FLUSH);
    if (ret == Z_STREAM_END) {
      member_done_ = true;
    } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
      return Result<std::size_t>::Error(name_ + ": corrupt gzip data near compressed byte " +
                                        std::to_string(consumed()) + " (" +
                                        (zs_.msg != nullptr ? zs_.msg : "zlib error " + std::to_string(ret)) + ")");
    }
  }
  return static_cast<std::size_t>(requested - zs_.avail_out);
}

// Splits the decoded bytes into lines and parses each in place. The buffer holds
// [begin_, end_) unconsumed bytes (at most one partial line between reads) and
// always has kPaddingBytes allocated beyond its capacity for simdjson.
class LineReader {
 public:
  LineReader(ByteSource& source, const TraceReaderOptions& options, const TraceCallbacks& callbacks,
             TraceReadSummary* summary)
      : source_(source),
        options_(options),
        callbacks_(callbacks),
        summary_(*summary),
        parser_(options.record),
        max_line_(std::clamp<std::size_t>(options.max_line_bytes, 1, SIZE_MAX / 4)) {}

  Status Run();

 private:
  Status Fill();
  Status Scan(std::size_t from);
  Status Line(std::size_t begin, std::size_t end);
  Status BadLine(std::string_view message);
  void Reserve(std::size_t capacity);
  void Progress();

  ByteSource& source_;
  const TraceReaderOptions& options_;
  const TraceCallbacks& callbacks_;
  TraceReadSummary& summary_;
  TraceRecordParser parser_;
  curve::Request request_;
  const std::size_t max_line_;

  std::unique_ptr<char[]> buffer_;
  std::size_t capacity_ = 0;  // usable bytes; kPaddingBytes more are allocated
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  bool skipping_ = false;  // inside an over-long line, already reported
};

void LineReader::Reserve(std::size_t capacity) {
  if (capacity <= capacity_) return;
  // Value-initialized, so the padding simdjson may read is never uninitialized.
  auto bigger = std::make_unique<char[]>(capacity + TraceRecordParser::kPaddingBytes);
  if (end_ > begin_) std::memcpy(bigger.get(), buffer_.get() + begin_, end_ - begin_);  // buffer_ may be null
  end_ -= begin_;
  begin_ = 0;
  buffer_ = std::move(bigger);
  capacity_ = capacity;
}

void LineReader::Progress() {
  if (callbacks_.on_progress) callbacks_.on_progress(source_.consumed(), source_.total());
}

Status LineReader::Run() {
  Reserve(std::max<std::size_t>(options_.chunk_bytes, 4096));
  for (;;) {
    // Keep only the partial line, at the front.
    if (begin_ > 0) {
      std::memmove(buffer_.get(), buffer_.get() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    // A partial line fills the buffer: grow (it is at most max_line_ + 1 bytes here).
    if (end_ == capacity_) Reserve(std::min(2 * capacity_, max_line_ + 2));
    if (end_ == capacity_) {  // cannot happen: Scan() drops partial lines over max_line_ + 1
      return Status::Error(summary_.source + ": internal error: line buffer full");
    }
    auto got = source_.Read(buffer_.get() + end_, capacity_ - end_);
    if (!got.ok()) return got.status();
    Progress();
    if (got.value() == 0) break;
    const std::size_t from = end_;
    end_ += got.value();
    summary_.bytes += got.value();
    Status status = Scan(from);
    if (!status.ok()) return status;
  }
  Status status = Status::Ok();
  if (!skipping_ && end_ > begin_) status = Line(begin_, end_);  // last line, no terminator
  summary_.timestamp_unit = parser_.resolved_unit();
  return status;
}

Status LineReader::Scan(std::size_t from) {
  char* const base = buffer_.get();
  const char* p = base + from;
  const char* const end = base + end_;
  while (const char* newline = static_cast<const char*>(std::memchr(p, '\n', end - p))) {
    const std::size_t line_end = static_cast<std::size_t>(newline - base);
    if (skipping_) {
      skipping_ = false;
    } else {
      Status status = Line(begin_, line_end);
      if (!status.ok()) return status;
    }
    begin_ = line_end + 1;
    p = newline + 1;
  }
  if (skipping_) {
    begin_ = end_;                             // drop the rest of the over-long line
  } else if (end_ - begin_ > max_line_ + 1) {  // longer than max_line_ + "\r", no "\n" yet
    ++summary_.lines;
    skipping_ = true;
    begin_ = end_;
    return BadLine("line longer than " + std::to_string(max_line_) + " bytes");
  }
  return Status::Ok();
}

Status LineReader::Line(std::size_t begin, std::size_t end) {
  ++summary_.lines;
  const char* data = buffer_.get() + begin;
  std::size_t size = end - begin;
  if (size > 0 && data[size - 1] == '\r') --size;
  if (summary_.lines == 1 && std::string_view(data, size).starts_with(kUtf8Bom)) {
    data += kUtf8Bom.size();
    size -= kUtf8Bom.size();
  }
  if (size > max_line_) return BadLine("line longer than " + std::to_string(max_line_) + " bytes");
  const std::size_t readable_after =
      static_cast<std::size_t>(buffer_.get() + capacity_ + TraceRecordParser::kPaddingBytes - (data + size));
  auto result = parser_.ParseInPlace(std::string_view(data, size), readable_after, &request_);
  if (!result.ok()) return BadLine(result.error());
  if (result.value() == ParseOutcome::kBlank) {
    ++summary_.blank_lines;
    return Status::Ok();
  }
  if (callbacks_.check) {
    if (std::string refused = callbacks_.check(request_); !refused.empty()) return BadLine(refused);
  }
  ++summary_.records;
  summary_.page_refs += request_.pages.size();
  if (callbacks_.on_request) callbacks_.on_request(request_);
  return Status::Ok();
}

Status LineReader::BadLine(std::string_view message) {
  if (options_.strict) {
    return Status::Error(summary_.source + ":" + std::to_string(summary_.lines) + ": " + std::string(message));
  }
  ++summary_.bad_lines;
  if (callbacks_.on_bad_line) callbacks_.on_bad_line(summary_.source, summary_.lines, message);
  return Status::Ok();
}

}  // namespace

base::Result<TraceReadSummary> ReadTrace(std::string_view path, const TraceReaderOptions& options,
                                         const TraceCallbacks& callbacks) {
  TraceReadSummary summary;
  summary.source = path == "-" ? std::string("<stdin>") : std::string(path);
  ByteSource source(summary.source, options.chunk_bytes);
  Status status = source.Open(path);
  if (!status.ok()) return Result<TraceReadSummary>::Error(status.error());
  summary.gzip = source.gzip();
  LineReader reader(source, options, callbacks, &summary);
  status = reader.Run();
  summary.source_bytes = source.consumed();
  if (!status.ok()) return Result<TraceReadSummary>::Error(status.error());
  return summary;
}

}  // namespace kvwatch::collectors
