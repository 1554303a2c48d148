// libFuzzer target: the agent's state file through its loader
// (agent/runtime/state_file.h and the readers of its sections). A state file's
// CRC-32 turns away almost every random file before its sections are read, so
// the sections' readers are fuzzed directly too, as the loader hands them their
// bytes: the first byte picks one (the curve engine, the lifetime curve and
// windows, a trace-file collector's positions and counters, the KV-event
// tracker's block state, the policy canaries) and the rest is its part.
// Invariants: nothing crashes or allocates without bound; a decoded state file
// encodes to one that decodes to the same parts; a rejected part leaves an error
// message.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "agent/runtime/state_file.h"
#include "collectors/kv_event_tracker.h"
#include "collectors/trace_file_collector.h"
#include "curve/bucketed_curve.h"
#include "curve/policy_canaries.h"
#include "curve/stack_distance.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

using Bytes = std::span<const std::uint8_t>;

void Engine(Bytes in) {
  kvwatch::curve::EngineOptions o;
  o.max_pages = 1024;
  kvwatch::curve::StackDistanceEngine engine(o);
  (void)engine.Deserialize(in);
}

void Curves(Bytes in) {
  static const std::vector<std::uint64_t> bounds = kvwatch::curve::LogBucketBounds(1024, 4);
  kvwatch::curve::BucketedCurve lifetime(&bounds, 1.0);
  kvwatch::curve::WindowedCurves windows({300, 3600}, &bounds, 1.0);
  if (lifetime.Deserialize(&in)) (void)windows.Deserialize(&in);
}

void TraceFile(Bytes in) {
  kvwatch::collectors::TraceFileCollectorOptions o;
  o.name = "fuzz";
  o.tailer.patterns = {"/nonexistent/kvwatch-fuzz/trace.log"};
  o.tailer.use_inotify = false;
  auto collector = kvwatch::collectors::TraceFileCollector::Create(o, nullptr);
  Check(collector.ok());
  const kvwatch::base::Status s = collector.value()->RestoreState(in);
  Check(s.ok() || !s.error().empty());
}

void KvTracker(Bytes in) {
  kvwatch::collectors::KvEventTracker tracker;
  const kvwatch::base::Status s = tracker.RestoreState(in, 2);
  Check(s.ok() || !s.error().empty());
}

void Canaries(Bytes in) {
  kvwatch::curve::CanaryOptions o;
  o.policies = {kvwatch::curve::PolicyKind::kLru, kvwatch::curve::PolicyKind::kS3Fifo,
                kvwatch::curve::PolicyKind::kVllm, kvwatch::curve::PolicyKind::kSglang};
  o.capacities = {8, 64};
  o.windows_s = {300};
  auto canaries = kvwatch::curve::PolicyCanaries::Create(o);
  Check(canaries.ok());
  (void)canaries.value()->Deserialize(&in);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Bytes bytes(data, size);
  auto parts = kvwatch::agent::DecodeState(bytes);
  if (parts.ok()) {
    // Encoding what was decoded decodes to the same parts (sections may come back
    // in the writer's order, so the bytes may differ).
    const kvwatch::agent::StateParts& p = parts.value();
    auto again = kvwatch::agent::DecodeState(kvwatch::agent::EncodeState(p));
    Check(again.ok());
    const kvwatch::agent::StateParts& q = again.value();
    Check(p.fingerprint == q.fingerprint && p.engine == q.engine && p.curves == q.curves && p.groups == q.groups &&
          p.canaries == q.canaries && p.alerts == q.alerts && p.collectors == q.collectors);
  } else {
    Check(!parts.error().empty());
  }
  if (size == 0) return 0;
  const Bytes part = bytes.subspan(1);
  switch (data[0] % 5) {
    case 0:
      Engine(part);
      break;
    case 1:
      Curves(part);
      break;
    case 2:
      TraceFile(part);
      break;
    case 3:
      KvTracker(part);
      break;
    default:
      Canaries(part);
      break;
  }
  return 0;
}
