// The agent's state file: everything a restart restores, committed in one atomic
// step, so that a kill at any instant restores a state in which each record is
// counted exactly once.
//
// What it holds (StateParts): the configuration fingerprint (what must match for
// the saved numbers to mean the same thing), the curve engine, the curves and
// windows with their clock, the tenant and class accounting, the policy canaries,
// the alert state, the KV load windows, and every collector's part (its positions: a tailer's files and
// offsets, a KV-event collector's last sequence numbers and block state). The
// collectors' parts are taken on the agent's loop thread between two polls, when
// every request they handed on is in the curves, and the whole is written by
// base::WriteFileAtomically (a temporary file, fsync, one rename, fsync of the
// folder): the curves and the positions they led to are never out of step.
//
// Format (version 2): "KVWSTATE", u32 version, u64 body length, u32 CRC-32 of the
// body (zlib), then the body: u32 section count, and per section u8 kind, u64 name
// length and name (a collector's configured name; empty for the others), u64 length
// and bytes. Host byte order: a state file is read back by the same build on the
// same machine. A file that is not a state file, is truncated, fails its CRC, or
// has another version is rejected as a whole, with an error that says which.
//
// Reading prefers a complete "<path>.tmp" (a kill came between its write and the
// rename: it is the newer of two consistent states); a torn one is ignored.
//
// Thread safety: free functions without shared state.
#ifndef KVWATCH_AGENT_RUNTIME_STATE_FILE_H_
#define KVWATCH_AGENT_RUNTIME_STATE_FILE_H_

#include <cstdint>
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
  std::vector<std::pair<std::string, StateBytes>> collectors;  // by configured name

  // The collector part named `name`, or nullptr.
  const StateBytes* Collector(const std::string& name) const;
};

inline constexpr std::uint32_t kStateVersion = 2;
// The largest state file read back: beyond any engine.max_pages the agent accepts.
inline constexpr std::size_t kMaxStateBytes = std::size_t{16} << 30;

StateBytes EncodeState(const StateParts& parts);
// The parts of an encoded state; an error says what is wrong (not a state file,
// truncated, checksum, version, malformed section).
base::Result<StateParts> DecodeState(std::span<const std::uint8_t> bytes);

// Writes the state atomically (base/atomic_file.h).
base::Status WriteStateFile(const std::string& path, const StateParts& parts);

struct LoadedState {
  enum class Outcome { kNone, kLoaded, kRejected } outcome = Outcome::kNone;
  StateParts parts;   // when kLoaded
  std::string from;   // the file read: path or "<path>.tmp"
  std::string error;  // when kRejected: why
};
// Reads the state at `path` (or its complete ".tmp"); kNone when neither exists.
LoadedState ReadStateFile(const std::string& path);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_STATE_FILE_H_
