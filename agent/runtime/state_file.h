// The agent's state file: everything a restart restores, committed in one atomic
// step, so that a kill at any instant restores a state in which each record is
// counted exactly once.
//
// What it holds (StateParts): the configuration fingerprint (what must match for
// the saved numbers to mean the same thing), the curve engine, the curves and
// windows with their clock, the tenant and class accounting, the policy canaries,
// the alert state, the KV load windows, a hybrid model's engine and curves
// (agent/runtime/hybrid_analysis.h), and every collector's part (its positions: a tailer's files and
// offsets, a KV-event collector's last sequence numbers and block state). The
// collectors' parts are taken on the agent's loop thread between two polls, when
// every request they handed on is in the curves, and the whole is written by
// base::WriteFileAtomically (a temporary file, fsync, one rename, fsync of the
// folder): the curves and the positions they led to are never out of step.
//
// Format (version 3): "KVWSTATE", u32 version, u64 body length, u32 CRC-32 of the
// body (zlib), then the body: u32 section count, and per section u8 kind, u64 name
// length and name (a collector's configured name; empty for the others), u64 length
// and bytes. Host byte order: a state file is read back by the same build on the
// same machine. Version 3 added the hybrid section (kind 9) and has the CRC cover
// the version too; a version 2 file (no hybrid section, the CRC of the body
// only) is read too (a hybrid model's curve then starts empty). A file that is not a state file, is truncated, fails
// its CRC, or has another version is rejected as a whole, with an error that says which.
//
// Reading prefers a complete "<path>.tmp" (a kill came between its write and the
// rename: it is the newer of two consistent states); a torn one is ignored.
// Only a regular file is read (base::RegularFile: a FIFO, socket, device,
// directory or symbolic link at the path is rejected, never opened for reading
// or followed), and its header and size are checked before its body is read: a
// body longer than the file, or than the size limit, is rejected after reading
// the 24 header bytes. The size limit (StateByteLimit) is what the configured
// state can hold at most; a 2 GiB file, sparse or not, is never read whole.
//
// StateLock: "<path>.lock", flock'ed for the agent's life, with the holder's pid
// written in it, so that a second agent given the same state.path is refused at
// start-up instead of overwriting the first one's state.
//
// Thread safety: free functions without shared state.
#ifndef KVWATCH_AGENT_RUNTIME_STATE_FILE_H_
#define KVWATCH_AGENT_RUNTIME_STATE_FILE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace kvwatch::agent {

using StateBytes = std::vector<std::uint8_t>;

struct StateParts {
  std::string fingerprint;
  StateBytes engine;    // the exact or the sampled engine
  StateBytes curves;    // lifetime curve, windows, the windows' clock, sampled totals
  StateBytes groups;    // tenants and classes; empty when off
  StateBytes canaries;  // the policy canaries; empty without curve.policies
  StateBytes alerts;    // the alert runner; empty when alerts are off
  StateBytes load;      // the KV load windows (curve/kv_load.h); empty in files of older builds
  StateBytes hybrid;    // a hybrid model's engine and curves; empty for a dense model and in version 2 files
  std::vector<std::pair<std::string, StateBytes>> collectors;  // by configured name

  // The collector part named `name`, or nullptr.
  const StateBytes* Collector(const std::string& name) const;
};

inline constexpr std::uint32_t kStateVersion = 3;
// The oldest version this build reads (version 2: no hybrid section).
inline constexpr std::uint32_t kStateOldestVersion = 2;
// The header: "KVWSTATE", version, body length, CRC.
inline constexpr std::size_t kStateHeaderBytes = 8 + 4 + 8 + 4;
// The largest state DecodeState accepts from memory (tests, the fuzz target);
// the agent reads files against StateByteLimit.
inline constexpr std::size_t kMaxStateBytes = std::size_t{16} << 30;

// What bounds a state's size: the configuration.
struct StateBounds {
  std::uint64_t max_pages = 0;             // engine.max_pages
  std::uint64_t remembered_evictions = 0;  // engine.remembered_evictions
  std::uint64_t canary_pages = 0;          // the canaries' cache sizes, summed over policies and capacities
  std::uint64_t collectors = 0;            // configured collectors
  // A hybrid model's engine: its most tracked items (max_bytes over the smallest
  // group page) plus its remembered evictions; 0 for a dense model.
  std::uint64_t hybrid_items = 0;
};
// Bytes per part, each above what the encoders write (documented in
// docs/guarantees.md): the engine writes at most 8 + 2 bytes per tracked page and
// 8 per remembered eviction (the hybrid engine 9 per tracked item and 8 per
// remembered eviction, counted at the engine's 32 per item); a canary's cache at most 3 words per cached page;
// a KV-event collector at most 4 x engine.max_pages block entries of a few words.
// Curves, windows, groups (top_k <= 254 each), alerts and load windows are
// bounded by the config and far below kStateBaseBytes.
inline constexpr std::uint64_t kStateBaseBytes = std::uint64_t{256} << 20;
inline constexpr std::uint64_t kStateBytesPerEnginePage = 32;
inline constexpr std::uint64_t kStateBytesPerCanaryPage = 64;
inline constexpr std::uint64_t kStateBytesPerCollectorPage = 4 * 64;
// The largest state file the configuration can legitimately produce: base +
// 32 x (max_pages + remembered_evictions + hybrid items) + 64 x canary pages +
// 256 x max_pages per collector. A larger file is rejected unread (for the defaults, 2^20 pages:
// 320 MiB and 256 MiB per collector).
std::uint64_t StateByteLimit(const StateBounds& bounds);

StateBytes EncodeState(const StateParts& parts);
// The parts of an encoded state; an error says what is wrong (not a state file,
// truncated, checksum, version, malformed section).
base::Result<StateParts> DecodeState(std::span<const std::uint8_t> bytes);

// Writes the state atomically (base/atomic_file.h).
base::Status WriteStateFile(const std::string& path, const StateParts& parts);

struct LoadedState {
  enum class Outcome { kNone, kLoaded, kRejected } outcome = Outcome::kNone;
  StateParts parts;              // when kLoaded
  std::string from;              // the file read: path or "<path>.tmp"
  std::string error;             // when kRejected: why
  std::uint64_t bytes_read = 0;  // from both files (what the size limit bounds; tests check it)
};
// Reads the state at `path` (or its complete ".tmp"), rejecting a file whose body
// is longer than max_bytes unread; kNone when neither exists.
LoadedState ReadStateFile(const std::string& path, std::uint64_t max_bytes = kMaxStateBytes);

// An exclusive lock on a state path, held until destruction (or the process's
// end): flock(LOCK_EX|LOCK_NB) on "<state path>.lock", which then holds the
// holder's pid.
class StateLock {
 public:
  // Errors: "<path>.lock is held by another kvwatch agent (pid 1234): two agents
  // must not share a state file", or why the lock file cannot be opened.
  static base::Result<std::unique_ptr<StateLock>> Acquire(const std::string& state_path);
  ~StateLock();
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  StateLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_STATE_FILE_H_
