#include "alerts/alert.h"

namespace kvwatch::alerts {

std::string_view StateName(AlertState state) {
  switch (state) {
    case AlertState::kInactive:
      return "inactive";
    case AlertState::kPending:
      return "pending";
    case AlertState::kFiring:
      return "firing";
    case AlertState::kResolved:
      return "resolved";
  }
  return "unknown";
}

std::string_view EventName(EventKind kind) {
  switch (kind) {
    case EventKind::kPending:
      return "pending";
    case EventKind::kFiring:
      return "firing";
    case EventKind::kResolved:
      return "resolved";
    case EventKind::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string_view ObservationKindName(ObservationKind kind) {
  switch (kind) {
    case ObservationKind::kNoData:
      return "no_data";
    case ObservationKind::kBelowMinVolume:
      return "below_min_volume";
    case ObservationKind::kValid:
      return "valid";
  }
  return "unknown";
}

}  // namespace kvwatch::alerts
