// The replica's admission rules (sim/replica.h, docs/simulate.md "Admission") and
// their names; sim/admission.h has the estimators the rules use.
//
// Thread safety: constants and pure functions.
#ifndef KVWATCH_SIM_ADMISSION_RULE_H_
#define KVWATCH_SIM_ADMISSION_RULE_H_

#include <string_view>

#include "base/status.h"

namespace kvwatch::sim {

// How waiting requests are admitted (docs/simulate.md, "Admission"):
//   greedy            the blocks of the chunk it would prefill this step fit now
//                     (the engines' default).
//   reserve-max       also: the sum over running requests of their reserved peak
//                     (prompt + max output tokens, in blocks) plus its own fits the
//                     pool.
//   reserve-quantile  the same with the class's output-length quantile q, learned
//                     from the class's finished requests (max output before any).
//   rate-cap          also: admissions per step capped at the eviction-free rate
//                     estimate, (pool blocks - half a request's peak blocks) / mean
//                     block-steps per request (Little's law for memory), over the
//                     last 256 finished requests (sim/admission.h, RateCap).
enum class Admission { kGreedy, kReserveMax, kReserveQuantile, kRateCap };
inline constexpr Admission kAllAdmissions[] = {Admission::kGreedy, Admission::kReserveMax, Admission::kReserveQuantile,
                                               Admission::kRateCap};
std::string_view AdmissionName(Admission);                 // "greedy", "reserve-max", "reserve-quantile", "rate-cap"
base::Result<Admission> ParseAdmission(std::string_view);  // error lists the names

}  // namespace kvwatch::sim

#endif  // KVWATCH_SIM_ADMISSION_RULE_H_
