// File discovery for FileTailer (collectors/file_tailer.h, Poll()): the
// configured patterns expanded into candidate files, and the file-system
// lookups behind rotation and truncation: the current name of an open file, a
// file found by inode (renamed while the tailer was down), a copytruncate copy
// of known content, and whether an open file's content changed in place. What
// the tailer then does with a rotated or truncated file (events, draining,
// reading again from 0) stays in file_tailer.cc.
//
// Thread safety: free functions with no shared state; they only read the file
// system.
#ifndef KVWATCH_COLLECTORS_FILE_SCAN_H_
#define KVWATCH_COLLECTORS_FILE_SCAN_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/file_identity.h"

namespace kvwatch::collectors::tail {

// A regular file a pattern finds, with the index of the first pattern that does.
struct Candidate {
  std::string path;
  std::size_t source = 0;
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
};

// Every regular file the patterns find, once per (dev, ino): a hard link or a
// file a later pattern also matches belongs to the first.
std::vector<Candidate> ExpandPatterns(const std::vector<std::string>& patterns);

// The candidate with this identity, or nullptr.
const Candidate* FindCandidate(const std::vector<Candidate>& found, std::uint64_t dev, std::uint64_t ino);

// The index of the first pattern fnmatch(3) matches `path` with, or
// patterns.size() when none does.
std::size_t SourceForPath(const std::vector<std::string>& patterns, const std::string& path);

// glob(3) with `flags`; no match or an error gives none.
std::vector<std::string> Glob(const std::string& pattern, int flags);
bool HasGlobMagic(std::string_view text);
// The directory part of `path` ("." without a slash, "/" for the root).
std::string Dirname(const std::string& path);

// The current name of an open file (via /proc), without " (deleted)"; empty if unknown.
std::string CurrentName(int fd);

// The path of the regular file with this identity in `dir`, or "".
std::string FindInode(const std::string& dir, std::uint64_t dev, std::uint64_t ino);

// A copytruncate copy of `old` in its directory: a regular file on old's device
// with another inode that `is_tailed` (given its identity and path) does not
// claim, changed since `old` last checked out, holding at least `old.offset`
// bytes whose head and offset marker hash like `old`'s. The longest wins; "" when there is none or `old` has no head
// hash to recognize it by.
std::string FindCopyPath(
    const FilePosition& old,
    const std::function<bool(std::uint64_t dev, std::uint64_t ino, const std::string& path)>& is_tailed);

// "" if the bytes reading depends on are unchanged in the file open as `fd`:
// the head, the marker before the committed offset `pos.offset`, and
// `partial_tail`, the buffered unfinished line that ends at `read_offset`
// (empty: none). Otherwise what changed; nullopt on an I/O error.
std::optional<std::string> ContentChange(int fd, const FilePosition& pos, std::uint64_t read_offset,
                                         std::string_view partial_tail);

}  // namespace kvwatch::collectors::tail

#endif  // KVWATCH_COLLECTORS_FILE_SCAN_H_
