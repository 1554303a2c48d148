#include "alerts/kv_load.h"

#include <utility>

#include "alerts/format.h"
#include "alerts/thresholds.h"

namespace kvwatch::alerts {

base::Status KvLoadOptions::Validate(std::string_view prefix) const {
  const std::string where(prefix);
  return FirstError({
      ValidateThresholds(where, fire_threshold, clear_threshold),
      ValidatePositive(where + ".fire_threshold", fire_threshold),
      ValidatePositive(where + ".window", static_cast<double>(window.count())),
      ValidateNonNegative(where + ".min_short_window_requests", min_short_window_requests),
      rule.Validate(where + ".rule"),
  });
}

KvLoadDetector::KvLoadDetector(KvLoadOptions options)
    : options_(std::move(options)), window_(FormatDuration(options_.window)) {}

Observation KvLoadDetector::Evaluate(const DetectorInput& input) {
  const std::optional<KvLoadSample>& load = input.inputs.kv_load;
  if (!load) {
    return Observation::NoData("no KV load factor over " + window_ +
                               ": no request with prompt and output token counts, or no KV capacity");
  }
  if (auto quiet = CheckVolume(load->sized_requests, options_.min_short_window_requests,
                               "requests with token counts in the " + window_ + " window")) {
    return *quiet;
  }
  const double rho = load->load_factor;
  Annotations a;
  a["load_factor"] = FormatNumber(rho);
  a["arrivals_per_second"] = FormatNumber(load->arrivals_per_s);
  a["mean_kv_token_seconds"] = FormatNumber(load->mean_token_seconds);
  a["kv_capacity_tokens"] = FormatCount(load->capacity_tokens);
  a["decode_tokens_per_second"] = FormatNumber(load->decode_tokens_per_s);
  a["prefill_seconds"] = FormatNumber(load->prefill_s);
  a["summary"] = "KV load factor over " + window_ + " is " + FormatNumber(rho) + " (" + FormatPercent(rho) +
                 " of the KV capacity)";
  a["description"] = "Requests arrive at " + FormatNumber(load->arrivals_per_s) + "/s and each holds " +
                     FormatNumber(load->mean_token_seconds) + " KV token-seconds on average (prefill " +
                     FormatNumber(load->prefill_s) + " s, decode at " + FormatNumber(load->decode_tokens_per_s) +
                     " tokens/s), " + FormatPercent(rho) + " of the " + FormatCount(load->capacity_tokens) +
                     "-token KV capacity (Little's law): admission is outrunning memory and preemptions follow. "
                     "Fires at " +
                     FormatNumber(options_.fire_threshold) + " and clears below " +
                     FormatNumber(options_.clear_threshold) + ".";
  return Observation::Valid(rho, options_.fire_threshold, options_.clear_threshold, std::move(a));
}

}  // namespace kvwatch::alerts
