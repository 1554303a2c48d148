// Source vocabulary shared by collectors/ (which reads the sources) and config/
// (which names them in the agent's YAML): small enums only, no code, so that the
// config parser can fill the collectors' settings without depending on collectors/.
//
// Thread safety: plain values.
#ifndef KVWATCH_BASE_SOURCE_KINDS_H_
#define KVWATCH_BASE_SOURCE_KINDS_H_

namespace kvwatch::base {

// Unit of a request trace's "timestamp" (collectors/trace_record.h says how kAuto
// decides).
enum class TimestampUnit { kAuto, kMilliseconds, kSeconds };

// Which serving engine wrote a log file (collectors/engine_log_collector.h); kAuto
// recognizes each line's engine.
enum class EngineLogKind { kAuto, kVllm, kSglang };

}  // namespace kvwatch::base

#endif  // KVWATCH_BASE_SOURCE_KINDS_H_
