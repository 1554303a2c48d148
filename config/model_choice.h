// The model and its KV sizing as every command takes it, resolved once:
// `kvwatch agent` (the config keys model, model_config, bytes_per_token, kv_dtype,
// tensor_parallel, and the flags of the same names that override them),
// `kvwatch replay` and `kvwatch simulate` (the same flags). ResolveModel decides
// which inputs go together, reads the preset or the config.json, applies the KV
// element type and the parameter counts, and gives the bytes per token per rank.
// Errors name the input as the caller spells it (ModelNames: a flag or a key).
//
// Thread safety: pure apart from reading the config.json; any thread.
#ifndef KVWATCH_CONFIG_MODEL_CHOICE_H_
#define KVWATCH_CONFIG_MODEL_CHOICE_H_

#include <optional>
#include <string>

#include "base/status.h"
#include "curve/sizing.h"

namespace kvwatch::config {

// What was given. At most one of model, model_config and bytes_per_token.
struct ModelChoice {
  std::string model;                       // a curve::LookupModelPreset name
  std::string model_config;                // path of a Hugging Face config.json
  std::optional<double> bytes_per_token;   // KV bytes per token per rank, given directly
  std::string kv_dtype;                    // overrides the model's KV element type
  int tensor_parallel = 1;                 // ranks the KV heads are split over
  std::optional<double> parameters;        // active parameters per token (a config.json has none)
  std::optional<double> total_parameters;  // every parameter of a mixture of experts
  // Whether any input was given (the agent's flags override the config's keys then).
  bool Given() const {
    return !model.empty() || !model_config.empty() || bytes_per_token || !kv_dtype.empty() || tensor_parallel != 1 ||
           parameters || total_parameters;
  }
};

// How errors name each input.
struct ModelNames {
  const char* model;
  const char* model_config;
  const char* bytes_per_token;
  const char* kv_dtype;
  const char* tensor_parallel;
  const char* parameters;
  const char* total_parameters;
};
inline constexpr ModelNames kModelFlags{"--model",           "--model-config", "--bytes-per-token", "--kv-dtype",
                                        "--tensor-parallel", "--parameters",   "--total-parameters"};
inline constexpr ModelNames kModelKeys{"model",           "model_config", "bytes_per_token", "kv_dtype",
                                       "tensor_parallel", "parameters",   "total_parameters"};

struct ResolvedModel {
  // From model or model_config, with kv_dtype and the parameter counts applied.
  std::optional<curve::ModelSpec> spec;
  // Per rank: the spec's at tensor_parallel, or bytes_per_token as given.
  std::optional<double> bytes_per_token;
  int tensor_parallel = 1;
  // The input the spec came from (names.model or names.model_config), for
  // errors about it found later; "" without a spec.
  std::string spec_source;
};

// Rules, each error "NAME: why": tensor_parallel >= 1; at most one of model,
// model_config and bytes_per_token; parameters, total_parameters and kv_dtype
// need model or model_config (parameters > 0, total_parameters >= the active
// ones); the KV heads split over tensor_parallel ranks (curve::BytesPerTokenPerRank);
// bytes_per_token > 0, per rank as given, so tensor_parallel stays 1 with it.
base::Result<ResolvedModel> ResolveModel(const ModelChoice& choice, const ModelNames& names);

}  // namespace kvwatch::config

#endif  // KVWATCH_CONFIG_MODEL_CHOICE_H_
