// File identity for FileTailer (collectors/file_tailer.h, "Identity"): a file is
// (st_dev, st_ino) plus two content checks, a 64-bit hash of its first bytes and
// a hash of the <= kMarkerBytes bytes just before the committed offset
// (fluent-bit's offset marker). FilePosition is an identity plus the committed
// position in that file: what the tailer keeps per open file and what one
// checkpoint entry holds (collectors/tail_checkpoint.h). The hashing functions
// read through a descriptor the caller owns with pread(2), so they never move
// its file offset.
//
// Thread safety: free functions with no shared state; FilePosition and
// ContentHash are plain values.
#ifndef KVWATCH_COLLECTORS_FILE_IDENTITY_H_
#define KVWATCH_COLLECTORS_FILE_IDENTITY_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

namespace kvwatch::collectors::tail {

constexpr std::uint32_t kMarkerBytes = 32;  // fluent-bit's FLB_TAIL_DB_OFFSET_MARKER_SIZE
// The largest head fingerprint (FileTailerOptions::fingerprint_bytes).
constexpr std::size_t kMaxFingerprintBytes = 64 << 10;

// FNV-1a, 64 bits: a checksum for identities, not a cryptographic hash.
constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;
std::uint64_t Fnv1a(std::string_view data, std::uint64_t hash = kFnvOffset);

// A hash over `len` bytes of a file (len 0: nothing to check).
struct ContentHash {
  std::uint32_t len = 0;
  std::uint64_t hash = kFnvOffset;
};

// Identity plus committed position of a file: what a checkpoint entry holds.
struct FilePosition {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  ContentHash head;               // the first head.len bytes
  ContentHash marker;             // the marker.len bytes just before `offset`
  std::uint64_t offset = 0;       // just after the last delivered (or skipped) line
  std::uint64_t line = 0;         // lines before `offset`
  std::int64_t validated_ns = 0;  // CLOCK_REALTIME when the content last checked out
  std::string path;               // last known name
};

// pread until `length` bytes or end of file; the count read, or -1 on error
// (errno set).
ssize_t PreadFull(int fd, char* out, std::size_t length, std::uint64_t offset);

// Whether the bytes `expected` covers (at `offset`) still hash the same: false
// also when the file is too short. nullopt: I/O error.
std::optional<bool> Matches(int fd, std::uint64_t offset, const ContentHash& expected);

// The hash of the first min(size, max_len) bytes; an empty ContentHash when
// they cannot be read.
ContentHash HashHead(int fd, std::uint64_t size, std::size_t max_len);

// The offset marker: the hash of the <= kMarkerBytes bytes before `offset`.
ContentHash HashBefore(int fd, std::uint64_t offset);

// Whether the file open as `fd`, `size` bytes long, still holds `position`:
// the offset is within the file and the head and offset-marker hashes match.
bool Holds(int fd, std::uint64_t size, const FilePosition& position);

// A timestamp in nanoseconds, and CLOCK_REALTIME now (FilePosition::validated_ns).
std::int64_t ToNs(const timespec& ts);
std::int64_t RealtimeNs();

}  // namespace kvwatch::collectors::tail

#endif  // KVWATCH_COLLECTORS_FILE_IDENTITY_H_
