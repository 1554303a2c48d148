// Atomic file replacement: the one way kvwatch writes a file that a crash must
// leave either old or new, never torn (the agent's state file, the tailer's
// stand-alone checkpoint).
//
// WriteFileAtomically(path, bytes): writes "<path>.tmp" in the same directory,
// fsyncs it, renames it over `path` and fsyncs the directory. A crash at any
// instant leaves `path` holding the previous complete file or the new one; a
// "<path>.tmp" may be left behind (complete or torn), and is overwritten by the
// next write. An error names the file and the failing step; `path` is then
// still intact and the temporary file removed.
//
// Fault points (crash tests only): SetFaultHook installs a function called at
// each step with the step's name — "created", "written", "synced", "renamed"
// (before the directory's fsync), "done". A test process kills itself there
// (tests/agent/crash_child.cc) to prove that a kill between any two steps
// loses nothing. No hook is installed outside tests; the check is one load of a
// pointer per step.
//
// Thread safety: WriteFileAtomically may run on several threads for different
// paths; two writers of one path race as any two writers of a file do.
// SetFaultHook must be called before any write.
#ifndef KVWATCH_BASE_ATOMIC_FILE_H_
#define KVWATCH_BASE_ATOMIC_FILE_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace kvwatch::base {

Status WriteFileAtomically(const std::string& path, std::string_view bytes);

// Reads a whole file of at most max_bytes; an error names the file.
Result<std::string> ReadWholeFile(const std::string& path, std::size_t max_bytes);

using FaultHook = void (*)(std::string_view point);
void SetFaultHook(FaultHook hook);

}  // namespace kvwatch::base

#endif  // KVWATCH_BASE_ATOMIC_FILE_H_
