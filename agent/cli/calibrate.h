// `kvwatch simulate --calibrate FILE`: an engine's scraped /metrics text turned
// into the figures sim::FitStepCoefficients fits (sim/time_model.h). The text is
// parsed by collectors/exposition_parser.h; every figure is summed over label
// sets (engines, DP ranks, models). Which metric gives which figure:
//
//   figure                   vLLM                                        SGLang
//   requests R               vllm:request_prefill_time_seconds_count      sglang:time_to_first_token_seconds_count
//                            (else vllm:time_to_first_token_seconds_count)
//   prefill time sum S_pf    vllm:request_prefill_time_seconds_sum        sglang:time_to_first_token_seconds_sum
//                            (else TTFT sum - vllm:request_queue_time_     - sglang:queue_time_seconds_sum
//                            seconds_sum)
//   ITL sum, count           vllm:inter_token_latency_seconds (else        sglang:inter_token_latency_seconds (else
//                            vllm:time_per_output_token_seconds)          sglang:time_per_output_token_seconds)
//   prompt tokens P          vllm:prompt_tokens_total                     sglang:prompt_tokens_total
//   prefix-cache hit tokens  vllm:prefix_cache_hits_total (0 if absent)   sglang:cached_tokens_total (0 if absent)
//   generation tokens G      vllm:generation_tokens_total                 sglang:generation_tokens_total
//   running requests B       vllm:num_requests_running                    sglang:num_running_reqs
//
// Counters are also accepted without their _total suffix. The engine is told by
// the prefix of the names present.
//
// Thread safety: pure apart from reading the file.
#ifndef KVWATCH_AGENT_CLI_CALIBRATE_H_
#define KVWATCH_AGENT_CLI_CALIBRATE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"
#include "sim/time_model.h"

namespace kvwatch::agent {

// The figures of one scrape. Errors start with `source` and name the missing
// metric (with the alternatives tried) or the malformed line.
base::Result<sim::CalibrationObservation> ObservationFromMetrics(std::string_view text, const std::string& source);

// The largest scrape file read: 64 MiB, far above any engine's /metrics body.
inline constexpr std::size_t kMaxCalibrationFileBytes = std::size_t{64} << 20;

// Reads the file at path (at most kMaxCalibrationFileBytes; a directory is an
// error) and calls ObservationFromMetrics.
base::Result<sim::CalibrationObservation> ReadCalibrationFile(const std::string& path);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_CLI_CALIBRATE_H_
