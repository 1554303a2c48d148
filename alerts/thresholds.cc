#include "alerts/thresholds.h"

#include <cmath>

#include "alerts/format.h"

namespace kvwatch::alerts {

base::Status ValidateThresholds(std::string_view prefix, double fire_threshold, double clear_threshold) {
  const std::string where(prefix);
  if (!std::isfinite(fire_threshold)) {
    return base::Status::Error(where + ".fire_threshold: expected a finite number, got " +
                               FormatNumber(fire_threshold));
  }
  if (!std::isfinite(clear_threshold)) {
    return base::Status::Error(where + ".clear_threshold: expected a finite number, got " +
                               FormatNumber(clear_threshold));
  }
  if (clear_threshold > fire_threshold) {
    return base::Status::Error(where + ".clear_threshold: expected at most fire_threshold (" +
                               FormatNumber(fire_threshold, 6) + ") for hysteresis, got " +
                               FormatNumber(clear_threshold, 6));
  }
  return base::Status::Ok();
}

base::Status ValidateNonNegative(std::string_view field, double value) {
  if (std::isfinite(value) && value >= 0) return base::Status::Ok();
  return base::Status::Error(std::string(field) + ": expected a finite number >= 0, got " + FormatNumber(value, 6));
}

base::Status ValidatePositive(std::string_view field, double value) {
  if (std::isfinite(value) && value > 0) return base::Status::Ok();
  return base::Status::Error(std::string(field) + ": expected a finite number > 0, got " + FormatNumber(value, 6));
}

base::Status FirstError(std::initializer_list<base::Status> statuses) {
  for (const base::Status& status : statuses) {
    if (!status.ok()) return status;
  }
  return base::Status::Ok();
}

}  // namespace kvwatch::alerts
