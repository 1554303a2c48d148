// Encoding helpers shared by the alert library's checkpoints (Alerter::Serialize
// and the stateful pieces it owns). Times are stored as they are: the
// system_clock tick count since the epoch, so a restored alert keeps its exact
// startsAt/endsAt. Host byte order, like base/byte_io.h (read back by the same
// build on the same machine).
//
// Thread safety: free functions without state.
#ifndef KVWATCH_ALERTS_CHECKPOINT_H_
#define KVWATCH_ALERTS_CHECKPOINT_H_

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "alerts/inputs.h"
#include "base/byte_io.h"

namespace kvwatch::alerts::checkpoint {

inline void AppendTime(std::vector<std::uint8_t>* out, TimePoint t) {
  base::AppendPod<std::int64_t>(out, static_cast<std::int64_t>(t.time_since_epoch().count()));
}

inline bool ReadTime(std::span<const std::uint8_t>* in, TimePoint* t) {
  std::int64_t ticks = 0;
  if (!base::ReadPod(in, &ticks)) return false;
  *t = TimePoint(TimePoint::duration(ticks));
  return true;
}

// A presence byte (0 or 1), then the value when present.
template <typename T, typename Append>
void AppendOptional(std::vector<std::uint8_t>* out, const std::optional<T>& v, Append&& append) {
  base::AppendPod<std::uint8_t>(out, v ? 1 : 0);
  if (v) append(out, *v);
}

template <typename T, typename Read>
bool ReadOptional(std::span<const std::uint8_t>* in, std::optional<T>* v, Read&& read) {
  std::uint8_t present = 0;
  if (!base::ReadPod(in, &present) || present > 1) return false;
  if (present == 0) {
    v->reset();
    return true;
  }
  T value{};
  if (!read(in, &value)) return false;
  *v = value;
  return true;
}

inline void AppendOptionalTime(std::vector<std::uint8_t>* out, const std::optional<TimePoint>& t) {
  AppendOptional(out, t, AppendTime);
}

inline bool ReadOptionalTime(std::span<const std::uint8_t>* in, std::optional<TimePoint>* t) {
  return ReadOptional(in, t, ReadTime);
}

inline void AppendOptionalDouble(std::vector<std::uint8_t>* out, const std::optional<double>& v) {
  AppendOptional(out, v, [](std::vector<std::uint8_t>* o, double x) { base::AppendPod(o, x); });
}

inline bool ReadOptionalDouble(std::span<const std::uint8_t>* in, std::optional<double>* v) {
  return ReadOptional(in, v, [](std::span<const std::uint8_t>* i, double* x) { return base::ReadPod(i, x); });
}

// Labels and annotations: a count, then key and value strings in key order.
inline void AppendStringMap(std::vector<std::uint8_t>* out, const std::map<std::string, std::string>& map) {
  base::AppendPod<std::uint64_t>(out, map.size());
  for (const auto& [key, value] : map) {
    base::AppendString(out, key);
    base::AppendString(out, value);
  }
}

inline bool ReadStringMap(std::span<const std::uint8_t>* in, std::map<std::string, std::string>* map) {
  std::uint64_t n = 0;
  // Each entry is at least its two lengths.
  if (!base::ReadCount(in, &n, 2 * sizeof(std::uint64_t))) return false;
  map->clear();
  for (std::uint64_t k = 0; k < n; ++k) {
    std::string key, value;
    if (!base::ReadString(in, &key) || !base::ReadString(in, &value)) return false;
    if (!map->emplace(std::move(key), std::move(value)).second) return false;  // a key twice
  }
  return true;
}

// A length-prefixed blob: the reader must consume exactly its bytes.
template <typename Write>
void AppendBlob(std::vector<std::uint8_t>* out, Write&& write) {
  const std::size_t at = out->size();
  base::AppendPod<std::uint64_t>(out, 0);
  write(out);
  const std::uint64_t size = out->size() - at - sizeof(std::uint64_t);
  std::memcpy(out->data() + at, &size, sizeof(size));
}

template <typename Read>
bool ReadBlob(std::span<const std::uint8_t>* in, Read&& read) {
  std::uint64_t size = 0;
  if (!base::ReadCount(in, &size, 1)) return false;
  std::span<const std::uint8_t> blob = in->first(static_cast<std::size_t>(size));
  if (!read(&blob) || !blob.empty()) return false;
  *in = in->subspan(static_cast<std::size_t>(size));
  return true;
}

}  // namespace kvwatch::alerts::checkpoint

#endif  // KVWATCH_ALERTS_CHECKPOINT_H_
