// Time sanity: which record timestamps may drive the windows' clock.
//
// The windows' clock (agent/runtime) follows the records' own timestamps, so one
// record from the far future would move every window past all later records. A
// collector checks each timestamp it hands on against the agent's wall clock:
//   - kInvalid: not finite, or negative (reason "bad_timestamp");
//   - kFuture:  more than max_ahead_s ahead of the wall clock (reason
//               "future_timestamp").
// Either way the record is bad input: counted by that reason, logged with where it
// came from (file and line, or endpoint and sequence number), and not handed on.
// Records in a relative time base (Mooncake's milliseconds since the trace began)
// are far behind the wall clock and pass; a jump within a relative base cannot be
// told from a gap in the trace, and is not checked.
#ifndef KVWATCH_COLLECTORS_TIME_SANITY_H_
#define KVWATCH_COLLECTORS_TIME_SANITY_H_

#include <cmath>
#include <string_view>

namespace kvwatch::collectors {

// Default of curve.max_clock_skew: how far ahead of the wall clock a record's
// timestamp may be (clocks of engine hosts and the agent's host differ by
// seconds under NTP; minutes are a broken clock or a broken record).
inline constexpr double kDefaultMaxClockSkewS = 300;

enum class TimestampVerdict { kOk, kInvalid, kFuture };

inline TimestampVerdict CheckTimestamp(double t_s, double wall_now_s, double max_ahead_s) {
  if (!std::isfinite(t_s) || t_s < 0) return TimestampVerdict::kInvalid;
  if (t_s > wall_now_s + max_ahead_s) return TimestampVerdict::kFuture;
  return TimestampVerdict::kOk;
}

// The error reason of a verdict ("" for kOk): a stable metric label.
inline std::string_view TimestampReason(TimestampVerdict v) {
  switch (v) {
    case TimestampVerdict::kInvalid:
      return "bad_timestamp";
    case TimestampVerdict::kFuture:
      return "future_timestamp";
    case TimestampVerdict::kOk:
      break;
  }
  return "";
}

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_TIME_SANITY_H_
