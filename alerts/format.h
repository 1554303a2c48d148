// Text formatting for alert labels and annotations: numbers, bytes, percentages,
// durations and RFC 3339 times. Pure, locale-independent (std::to_chars), and
// deterministic, so annotations compare equal across evaluations and in tests.
//
// Thread safety: free functions without state.
#ifndef KVWATCH_ALERTS_FORMAT_H_
#define KVWATCH_ALERTS_FORMAT_H_

#include <chrono>
#include <string>

#include "alerts/inputs.h"

namespace kvwatch::alerts {

// `value` with at most `significant` significant digits, shortest form ("0.25",
// "0.3333"); magnitudes of 10^significant up to 10^15 as rounded integers ("12346"),
// beyond in exponent form ("1.5e+15"). NaN gives "NaN", infinities "+Inf"/"-Inf"
// (Prometheus spelling).
std::string FormatNumber(double value, int significant = 4);

// `value` rounded to the nearest integer ("1234"); for page and byte counts.
std::string FormatCount(double value);

// Bytes in IEC units with three significant digits: "512 B", "1.5 GiB".
std::string FormatBytes(double bytes);

// A fraction as a percentage: 0.253 -> "25.3%".
std::string FormatPercent(double fraction);

// A duration as a short label: 3600s -> "1h", 86400s -> "24h", 90s -> "1m30s",
// 300s -> "5m", 0s -> "0s". Hours are not folded into days ("24h", as PromQL users
// write it).
std::string FormatDuration(std::chrono::seconds duration);

// RFC 3339 in UTC with milliseconds: "2024-05-01T12:00:00.000Z".
std::string FormatRfc3339(TimePoint time);

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_FORMAT_H_
