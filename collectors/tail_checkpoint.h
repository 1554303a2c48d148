// FileTailer's checkpoint file (collectors/file_tailer.h, "Checkpoint"): the
// committed FilePosition of every tailed file, so that a restart neither loses
// nor repeats a line. A text file: the header "kvwatch-file-tailer-checkpoint 2",
// one "file ..." line per entry, one "source ..." line per pattern (version 2;
// version 1 had none and still loads), and "end <count> <hash>" guarding against
// a truncated or edited file. Written atomically ("<path>.tmp", fsync, rename over
// <path>, fsync of the directory); a complete leftover "<path>.tmp" is newer
// and is preferred when loading.
//
// Thread safety: free functions with no shared state. Two writers of one path
// at once race as any two writers of a file do.
#ifndef KVWATCH_COLLECTORS_TAIL_CHECKPOINT_H_
#define KVWATCH_COLLECTORS_TAIL_CHECKPOINT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "collectors/file_identity.h"

namespace kvwatch::collectors::tail {

// One "file" line, with its '\n': dev ino head_len head_hash marker_len
// marker_hash offset line validated_ns path (percent-escaped).
std::string FormatCheckpointEntry(const FilePosition& p);
// Parses one "file" line (without '\n') into `p`; the error text, or nullopt.
std::optional<std::string> ParseCheckpointEntry(std::string_view line, FilePosition& p);

// One pattern's mark: when the tailer that saved the checkpoint last looked at
// the files of `pattern` (the start of its last pass). A rotated file of that
// pattern written later, that a restart does not follow, was not read by it
// (FileTailer's unread rotations). One "source" line: since_ns and the
// percent-escaped pattern.
struct SourceMark {
  std::string pattern;
  std::int64_t since_ns = 0;
  bool operator==(const SourceMark&) const = default;
};

// The whole file: header, one line per entry and per source mark, end line (the
// count is of entries).
std::string SerializeCheckpoint(const std::vector<FilePosition>& entries, const std::vector<SourceMark>& sources = {});
// The entries of a whole file (and, if `sources` is given, its source marks);
// an error names `name`, the line and what is wrong.
base::Result<std::vector<FilePosition>> ParseCheckpoint(std::string_view text, const std::string& name,
                                                        std::vector<SourceMark>* sources = nullptr);

// Atomically replaces `path` with `entries` and `sources`; its directory must
// exist. An error names the file and the failing step; the previous file is then
// still intact.
base::Status WriteCheckpoint(const std::string& path, const std::vector<FilePosition>& entries,
                             const std::vector<SourceMark>& sources = {});

// What LoadCheckpoint found.
struct LoadedCheckpoint {
  std::vector<FilePosition> entries;
  std::vector<SourceMark> sources;
  bool loaded = false;  // a valid checkpoint was read (it may hold no entries)
  std::string error;    // "checkpoint unreadable: ..." or "checkpoint corrupt: ..."; "" if none
};

// Reads the checkpoint at `path`, preferring a complete "<path>.tmp" (a crash
// came between its fsync and the rename; an incomplete one is a torn write and
// is ignored silently). No file at all is a first start: not loaded, no error.
LoadedCheckpoint LoadCheckpoint(const std::string& path);

}  // namespace kvwatch::collectors::tail

#endif  // KVWATCH_COLLECTORS_TAIL_CHECKPOINT_H_
