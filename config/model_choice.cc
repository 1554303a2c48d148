#include "config/model_choice.h"

#include <cstdio>

#include "config/model_config.h"

namespace kvwatch::config {

namespace {

using R = base::Result<ResolvedModel>;

R Error(const char* name, const std::string& message) { return R::Error(std::string(name) + ": " + message); }

// %.4g, as the tables print parameter counts.
std::string Short(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

// The spec from the preset or the config.json, nullopt when neither is given.
base::Result<std::optional<curve::ModelSpec>> ReadSpec(const ModelChoice& c, const ModelNames& n) {
  using S = base::Result<std::optional<curve::ModelSpec>>;
  if (!c.model.empty()) {
    auto preset = curve::LookupModelPreset(c.model);
    if (!preset.ok()) return S::Error(std::string(n.model) + ": " + preset.error());
    return std::optional<curve::ModelSpec>(preset.value());
  }
  if (!c.model_config.empty()) {
    auto parsed = ReadModelConfigFile(c.model_config);
    if (!parsed.ok()) return S::Error(std::string(n.model_config) + ": " + parsed.error());
    return std::optional<curve::ModelSpec>(parsed.value());
  }
  return std::optional<curve::ModelSpec>();
}

// parameters, total_parameters and kv_dtype applied to the spec (or refused without one).
base::Status ApplyOverrides(const ModelChoice& c, const ModelNames& n, std::optional<curve::ModelSpec>* spec) {
  const std::string needs = "needs " + std::string(n.model) + " or " + n.model_config;
  auto fail = [](const char* name, const std::string& m) { return base::Status::Error(std::string(name) + ": " + m); };
  if (c.parameters) {
    if (!*spec) return fail(n.parameters, needs);
    if (!(*c.parameters > 0)) return fail(n.parameters, "must be > 0");
    (*spec)->parameters = *c.parameters;
  }
  if (c.total_parameters) {
    if (!*spec) return fail(n.total_parameters, needs);
    if (!(*c.total_parameters >= (*spec)->parameters)) {
      return fail(n.total_parameters, "must be >= the active parameters (" + Short((*spec)->parameters) + ")");
    }
    (*spec)->total_parameters = *c.total_parameters;
  }
  if (!c.kv_dtype.empty()) {
    if (!*spec) return fail(n.kv_dtype, needs);
    auto bytes = curve::DtypeBytes(c.kv_dtype);
    if (!bytes.ok()) return fail(n.kv_dtype, bytes.error());
    (*spec)->bytes_per_element = bytes.value();
  }
  return base::Status::Ok();
}

}  // namespace

base::Result<ResolvedModel> ResolveModel(const ModelChoice& c, const ModelNames& n) {
  if (c.tensor_parallel < 1) return Error(n.tensor_parallel, "must be at least 1");
  const int sources = !c.model.empty() + !c.model_config.empty() + c.bytes_per_token.has_value();
  if (sources > 1) {
    return Error(n.model,
                 "give only one of " + std::string(n.model) + ", " + n.model_config + " and " + n.bytes_per_token);
  }
  ResolvedModel r;
  r.tensor_parallel = c.tensor_parallel;
  auto spec = ReadSpec(c, n);
  if (!spec.ok()) return R::Error(spec.error());
  r.spec = std::move(spec).value();
  if (base::Status s = ApplyOverrides(c, n, &r.spec); !s.ok()) return R::Error(s.error());
  if (r.spec) {
    r.spec_source = c.model.empty() ? n.model_config : n.model;
    auto bpt = curve::BytesPerTokenPerRank(*r.spec, c.tensor_parallel);
    if (!bpt.ok()) return Error(n.tensor_parallel, bpt.error());
    r.bytes_per_token = static_cast<double>(bpt.value());
  } else if (c.bytes_per_token) {
    if (!(*c.bytes_per_token > 0)) return Error(n.bytes_per_token, "must be > 0");
    if (c.tensor_parallel != 1) {
      return Error(n.tensor_parallel, "applies to " + std::string(n.model) + " or " + n.model_config + "; " +
                                          n.bytes_per_token + " is per rank");
    }
    r.bytes_per_token = *c.bytes_per_token;
  }
  return r;
}

}  // namespace kvwatch::config
