// `kvwatch replay --policy ... --dump-references FILE`: the page references the
// policies simulate, written as a trace other cache simulators read, so that their
// policies can be run over exactly kvwatch's sequence (bench/libcachesim_compare.sh
// runs libCacheSim's this way).
//
// The format is libCacheSim's oracleGeneral binary trace (github.com/1a1a11a/
// libCacheSim, libCacheSim/traceReader/customizedReader/oracle/oracleGeneralBin.h,
// read at commit aa0fc40): one packed 24-byte record per reference, in the host's
// byte order (little-endian on x86-64 and arm64) as libCacheSim reads it,
//   uint32 clock_time          the request's number, from 1 (modulo 2^32): the
//                              records of one request share it, so a reader
//                              finds each request's pages again
//   uint64 obj_id              the page id
//   uint32 obj_size            1 (every page one object)
//   int64  next_access_vtime   the number (from 0, in this sequence) of the next
//                              reference to the same page, -1 for none (Belady)
// in the policies' touch order: each request's pages in --touch-order (tail-first:
// the last page first), requests in arrival order. A request without pages writes
// nothing. Its leading resident pages, the prefix hits replay counts, are the
// request's records read backwards under tail-first.
//
// Thread safety: none; the trace is not modified by anyone else meanwhile.
#ifndef KVWATCH_AGENT_REFERENCE_DUMP_H_
#define KVWATCH_AGENT_REFERENCE_DUMP_H_

#include <string>

#include "base/status.h"
#include "curve/policy_replay.h"
#include "curve/stack_distance.h"

namespace kvwatch::agent {

inline constexpr std::size_t kOracleGeneralRecordBytes = 24;

// Writes `trace` to `path` (created or truncated). Computes the trace's next uses
// for `order` when they are not there yet (StoredTrace::ComputeNextUse, which
// belady reads too). An error names the file and what failed.
base::Status WriteOracleGeneral(curve::StoredTrace& trace, curve::TouchOrder order, const std::string& path);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_REFERENCE_DUMP_H_
