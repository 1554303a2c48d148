// Validation helpers shared by the detectors' options: thresholds with hysteresis
// (clear <= fire) and plain non-negative numbers. Errors name the offending field.
//
// Thread safety: free functions without state.
#ifndef KVWATCH_ALERTS_THRESHOLDS_H_
#define KVWATCH_ALERTS_THRESHOLDS_H_

#include <initializer_list>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kvwatch::alerts {

// Ok when both are finite and clear_threshold <= fire_threshold; the error names
// `<prefix>.fire_threshold` / `<prefix>.clear_threshold`.
base::Status ValidateThresholds(std::string_view prefix, double fire_threshold, double clear_threshold);

// Ok when `value` is finite and >= 0; the error names `field`.
base::Status ValidateNonNegative(std::string_view field, double value);

// Ok when `value` is finite and > 0; the error names `field`.
base::Status ValidatePositive(std::string_view field, double value);

// The first error of `statuses`, or Ok. Lets an options struct list its checks.
base::Status FirstError(std::initializer_list<base::Status> statuses);

}  // namespace kvwatch::alerts

#endif  // KVWATCH_ALERTS_THRESHOLDS_H_
