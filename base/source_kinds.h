// Source vocabulary shared by collectors/ (which reads the sources) and config/
// (which names them in the agent's YAML): small enums and their spellings, no
// code, so that the config parser can fill the collectors' settings without
// depending on collectors/, and both accept the same words.
//
// Thread safety: plain values.
#ifndef KVWATCH_BASE_SOURCE_KINDS_H_
#define KVWATCH_BASE_SOURCE_KINDS_H_

#include <string_view>

namespace kvwatch::base {

// One spelling of an enum value in text (config files, flags).
template <class V>
struct Spelling {
  std::string_view name;
  V value;
};

// Unit of a request trace's "timestamp" (collectors/trace_record.h says how kAuto
// decides).
enum class TimestampUnit { kAuto, kMilliseconds, kSeconds };
// Its spellings; the first of each value is its name.
inline constexpr Spelling<TimestampUnit> kTimestampUnitSpellings[] = {
    {"auto", TimestampUnit::kAuto},       {"ms", TimestampUnit::kMilliseconds},
    {"s", TimestampUnit::kSeconds},       {"milliseconds", TimestampUnit::kMilliseconds},
    {"seconds", TimestampUnit::kSeconds},
};

// Where a tailed file starts when first seen without a checkpoint
// (collectors/file_tailer.h; collectors.trace_files[].start_at).
enum class TailStartPosition {
  kEnd,        // skip what the file holds when first seen (fluent-bit's default)
  kBeginning,  // read it all
};
inline constexpr Spelling<TailStartPosition> kTailStartPositionSpellings[] = {
    {"end", TailStartPosition::kEnd},
    {"beginning", TailStartPosition::kBeginning},
};

// Which serving engine wrote a log file (collectors/engine_log_collector.h); kAuto
// recognizes each line's engine.
enum class EngineLogKind { kAuto, kVllm, kSglang };
inline constexpr Spelling<EngineLogKind> kEngineLogKindSpellings[] = {
    {"auto", EngineLogKind::kAuto},
    {"vllm", EngineLogKind::kVllm},
    {"sglang", EngineLogKind::kSglang},
};

}  // namespace kvwatch::base

#endif  // KVWATCH_BASE_SOURCE_KINDS_H_
