// The one duration grammar and the one size grammar, read alike by the config
// (config/field_reader.cc: every duration and size key) and the command line
// (agent/cli: --queue-timeout, --allreduce-latency, --step-overhead, the tiers'
// ttft= and itl=, --step-coefficients, --kv-bytes), so a value written in one
// place means the same in the other.
//
//   duration  one or more NUMBER UNIT terms, summed: 250ms, 30s, 1h30m, 1.5h, 20us;
//             units us, ms, s, m, h, d. A bare NUMBER is seconds where the caller
//             takes one (Bare::kSeconds: the command line, where fixed=0.02 has
//             always meant seconds); the config refuses it (Bare::kRefused).
//   size      NUMBER [UNIT] bytes: 65536, 64KiB, 1 MiB, 18.5GiB, 2e10; units B,
//             KiB MiB GiB TiB (powers of 1024), KB MB GB TB (powers of 1000),
//             one space allowed before the unit.
//   NUMBER    a non-negative decimal: digits with at most one point, and an
//             optional exponent (2e-5, 1.5e3); no sign, no inf or nan.
//
// Thread safety: pure functions.
#ifndef KVWATCH_BASE_QUANTITY_TEXT_H_
#define KVWATCH_BASE_QUANTITY_TEXT_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "base/status.h"

namespace kvwatch::base {

// What a bare number (no unit) means in a duration.
enum class Bare { kRefused, kSeconds };

// Seconds, finite and >= 0; nullopt when text is not a duration.
std::optional<double> ParseDuration(std::string_view text, Bare bare);

// Bytes, finite and >= 0; nullopt when text is not a size.
std::optional<double> ParseSize(std::string_view text);
// A size that is a whole number of bytes up to 2^64 - 1, exact for an integer
// NUMBER (1.5KiB = 1536 is whole; 0.5B is not); nullopt otherwise.
std::optional<std::uint64_t> ParseWholeSize(std::string_view text);

// What the messages say was expected ("expected " + these).
inline constexpr std::string_view kDurationExamples = "a duration such as 250ms, 30s or 1h30m";
inline constexpr std::string_view kSizeExamples = "a size such as 65536, 64KiB or 1MiB";

// The command line's readings (a bare duration is seconds), with the error
// "expected a duration such as 250ms, 30s or 1h30m, or seconds, got 'TEXT'"
// (a size: "expected a size such as 65536, 64KiB or 1MiB, got 'TEXT'"); the
// caller prefixes the flag.
base::Result<double> DurationFlag(std::string_view text);
base::Result<double> SizeFlag(std::string_view text);

}  // namespace kvwatch::base

#endif  // KVWATCH_BASE_QUANTITY_TEXT_H_
