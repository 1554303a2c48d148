// The step-time models of the serving-replica simulator (sim/): a roofline from a
// model and a GPU preset, coefficients given directly, and coefficients fitted
// from an engine's scraped /metrics figures. All three reduce to
// LinearStepCoefficients (sim/step_time.h); docs/simulate.md "The time model"
// states the formulas, the presets' sources and what the models leave out.
//
// Roofline, per GPU rank at tensor-parallel degree T (compute and memory terms are
// added, not maxed: a step is charged both):
//   per_prefill_token_s   = 2 * parameters / (T * flops * compute_efficiency)
//   per_attention_pair_s  = 4 * layers * query_heads * head_dim / (T * flops * compute_efficiency)
//   per_decode_sequence_s = 2 * parameters / (T * flops * compute_efficiency)
//   per_context_token_s   = kv_bytes_per_token_per_rank / (bandwidth * memory_efficiency)
//                         + 4 * layers * query_heads * head_dim / (T * flops * compute_efficiency)
//   fixed_s               = weight_bytes / (T * bandwidth * memory_efficiency)
//                         + (T > 1 ? 2 * layers * allreduce_latency_s : 0)
//                         + step_overhead_s
// parameters are the active ones (what a token's matmuls touch); weight_bytes =
// total parameters (every expert of a mixture) * weight_bytes_per_parameter, read
// once per step.
//
// The fit (FitStepCoefficients): each observation is one engine's cumulative
// figures (a scrape, or the difference of two). With R requests, computed prompt
// tokens Pc, prompt tokens P, generated tokens G, the per-request prefill times'
// sum S_pf, the inter-token gaps' sum S_itl over N_itl gaps and B running requests:
//   decode step time    l = S_itl / N_itl
//   mean context        C = P / R + G / (2 R)   (prompt plus half the output)
//   l = fixed + per_context_token * B * C      (the decode model being fitted)
//   S_pf = R * l + per_prefill_token * Pc      (a prefill is one step plus its tokens)
// With two or more observations at different B * C, fixed and per_context_token
// come from least squares; with one, a shape (the roofline's decode coefficients)
// is scaled to l. per_prefill_token = (sum S_pf - sum R * l) / sum Pc. The
// attention and per-sequence terms are the shape's (0 without one).
//
// Thread safety: pure functions over plain values; the preset table is immutable.
#ifndef KVWATCH_SIM_TIME_MODEL_H_
#define KVWATCH_SIM_TIME_MODEL_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "curve/sizing.h"
#include "sim/step_time.h"

namespace kvwatch::sim {

struct GpuSpec {
  std::string name;
  double dense_bf16_flops = 0;  // FLOP/s, dense (no sparsity), tensor cores
  double memory_bandwidth = 0;  // bytes/s of HBM (GDDR for the L40S)
  double memory_bytes = 0;      // device memory, bytes (the datasheet's GB read as GiB)
  std::string source;           // the datasheet the figures come from
};

// The built-in GPUs: a100, h100, h200, b200, l40s (case-insensitive; aliases
// listed by GpuPresetNames(true)). Error: unknown name, listing the known ones.
base::Result<GpuSpec> LookupGpuPreset(std::string_view name);
std::vector<std::string> GpuPresetNames(bool include_aliases = false);

// Default efficiency factors: the fraction of the datasheet peak a serving engine
// reaches. Compute: 0.6 of dense BF16 in large prefill GEMMs; memory: 0.8 of the
// bandwidth in decode's streaming reads.
inline constexpr double kDefaultComputeEfficiency = 0.6;
inline constexpr double kDefaultMemoryEfficiency = 0.8;
// One tensor-parallel all-reduce of a decode step's activations over NVLink,
// latency-bound: 10 microseconds; two per layer (after attention, after the MLP).
inline constexpr double kDefaultAllreduceLatencyS = 10e-6;

struct RooflineOptions {
  int tensor_parallel = 1;
  double compute_efficiency = kDefaultComputeEfficiency;
  double memory_efficiency = kDefaultMemoryEfficiency;
  double allreduce_latency_s = kDefaultAllreduceLatencyS;
  double step_overhead_s = 0;             // scheduler and launch time per step
  double weight_bytes_per_parameter = 2;  // bf16 weights
};

// Total parameters (every weight; a mixture of experts' whole set) of a spec:
// spec.total_parameters when set, else spec.parameters (dense).
double TotalParameters(const curve::ModelSpec& spec);

// The roofline coefficients. Errors name what is missing or bad: the model's
// parameters, layers, query heads or head dimension; the KV geometry (via
// curve::BytesPerTokenPerRank, naming the tensor-parallel degree); non-positive
// GPU figures; efficiencies outside (0, 1]; a negative latency or overhead.
base::Result<LinearStepCoefficients> RooflineCoefficients(const curve::ModelSpec& model, const GpuSpec& gpu,
                                                          const RooflineOptions& options = {});

// "fixed=0.01,prefill_token=2e-5,attention_pair=0,decode_sequence=0,context_token=1e-8"
// (seconds; keys may come in any order and be left out: 0; also the durations
// "10ms", "20us": base/quantity_text.h's durations, a bare number in seconds).
// Errors name the key; at least one value must be > 0.
base::Result<LinearStepCoefficients> ParseStepCoefficients(std::string_view text);
// The same form back, every key, in the order above.
std::string FormatStepCoefficients(const LinearStepCoefficients& c);

// One engine's figures for the fit (see the file comment).
struct CalibrationObservation {
  double requests = 0;                // R
  double prompt_tokens = 0;           // P
  double computed_prompt_tokens = 0;  // Pc: P minus prefix-cache hits
  double generation_tokens = 0;       // G
  double prefill_time_sum_s = 0;      // S_pf
  double itl_sum_s = 0;               // S_itl
  double itl_count = 0;               // N_itl
  double running = 0;                 // B
  std::string source;                 // where the figures came from, for errors
};

struct CalibrationFit {
  LinearStepCoefficients coefficients;
  // "least squares over N observations" or "roofline shape scaled by K".
  std::string method;
  std::vector<double> decode_step_s;  // l of each observation
};

// Errors name the observation's source and the figure: no requests, no ITL gaps,
// a negative or non-finite figure, computed prompt tokens above the prompt
// tokens, a single observation without a shape, observations that all share one
// B * C, or a fit with a negative coefficient (the figures contradict the model).
base::Result<CalibrationFit> FitStepCoefficients(std::span<const CalibrationObservation> observations,
                                                 const std::optional<LinearStepCoefficients>& shape);

}  // namespace kvwatch::sim

#endif  // KVWATCH_SIM_TIME_MODEL_H_
