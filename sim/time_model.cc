#include "sim/time_model.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/quantity_text.h"

namespace kvwatch::sim {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

struct GpuPreset {
  const char* name;
  std::vector<const char*> aliases;
  double tflops;    // dense BF16 tensor TFLOP/s
  double tb_per_s;  // memory bandwidth, TB/s
  double gib;       // memory: the datasheet's GB, read as GiB (see below)
  const char* source;
};

// Dense BF16 tensor-core throughput (the datasheets print the sparse figure,
// twice this, with an asterisk), memory bandwidth and capacity of the SXM parts
// (L40S: PCIe, GDDR6), from NVIDIA's datasheets. The capacities are read as GiB,
// close to what the devices report (an H100 80GB shows 81,559 MiB, 79.6 GiB, in
// nvidia-smi; 80 GB would be 74.5 GiB).
const std::vector<GpuPreset>& GpuPresets() {
  static const std::vector<GpuPreset> kPresets = {
      {"a100",
       {"a100-80gb", "a100-sxm"},
       312,
       2.039,
       80,
       "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM: BF16 312 TFLOPS dense, 2,039 GB/s HBM2e)"},
      {"h100",
       {"h100-sxm", "h100-80gb"},
       989,
       3.35,
       80,
       "NVIDIA H100 Tensor Core GPU datasheet (SXM: BF16 1,979 TFLOPS with sparsity, 989 dense; 3.35 TB/s HBM3)"},
      {"h200",
       {"h200-sxm"},
       989,
       4.8,
       141,
       "NVIDIA H200 Tensor Core GPU datasheet (SXM: BF16 1,979 TFLOPS with sparsity, 989 dense; 4.8 TB/s HBM3e, "
       "141 GB)"},
      {"b200",
       {"hgx-b200"},
       2250,
       8.0,
       180,
       "NVIDIA HGX B200 datasheet (per GPU: FP16/BF16 4.5 PFLOPS with sparsity, 2.25 dense; 8 TB/s HBM3e, 180 GB)"},
      {"l40s",
       {},
       362.05,
       0.864,
       48,
       "NVIDIA L40S datasheet (BF16 733 TFLOPS with sparsity, 362.05 dense; 864 GB/s GDDR6, 48 GB)"},
  };
  return kPresets;
}

// Least squares of y = a + b x (unweighted). nullopt when every x is the same.
std::optional<std::pair<double, double>> LineFit(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
  }
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (!(sxx > 1e-12 * std::max(1.0, mx * mx))) return std::nullopt;
  const double b = sxy / sxx;
  return std::make_pair(my - b * mx, b);
}

}  // namespace

base::Result<GpuSpec> LookupGpuPreset(std::string_view name) {
  const std::string want = Lower(name);
  for (const GpuPreset& p : GpuPresets()) {
    bool match = want == p.name;
    for (const char* a : p.aliases) match = match || want == a;
    if (!match) continue;
    GpuSpec g;
    g.name = p.name;
    g.dense_bf16_flops = p.tflops * 1e12;
    g.memory_bandwidth = p.tb_per_s * 1e12;
    g.memory_bytes = p.gib * 1073741824.0;
    g.source = p.source;
    return g;
  }
  std::string known;
  for (const std::string& n : GpuPresetNames()) known += (known.empty() ? "" : ", ") + n;
  return base::Result<GpuSpec>::Error("unknown GPU '" + std::string(name) + "' (known: " + known + ")");
}

std::vector<std::string> GpuPresetNames(bool include_aliases) {
  std::vector<std::string> out;
  for (const GpuPreset& p : GpuPresets()) {
    out.emplace_back(p.name);
    if (include_aliases) {
      for (const char* a : p.aliases) out.emplace_back(a);
    }
  }
  return out;
}

double TotalParameters(const curve::ModelSpec& spec) {
  return spec.total_parameters > 0 ? spec.total_parameters : spec.parameters;
}

base::Result<LinearStepCoefficients> RooflineCoefficients(const curve::ModelSpec& model, const GpuSpec& gpu,
                                                          const RooflineOptions& o) {
  using R = base::Result<LinearStepCoefficients>;
  const std::string who = model.name.empty() ? "the model" : "model " + model.name;
  if (!(model.parameters > 0)) return R::Error(who + ": parameters unknown (give the parameter count)");
  if (model.layers <= 0) return R::Error(who + ": layers must be positive");
  if (model.query_heads <= 0) return R::Error(who + ": query heads (num_attention_heads) must be positive");
  if (model.head_dim <= 0) return R::Error(who + ": head dimension must be positive");
  if (!(gpu.dense_bf16_flops > 0) || !(gpu.memory_bandwidth > 0)) {
    return R::Error("GPU " + gpu.name + ": FLOP/s and memory bandwidth must be positive");
  }
  if (!(o.compute_efficiency > 0 && o.compute_efficiency <= 1)) {
    return R::Error("compute efficiency must be in (0, 1], got " + Num(o.compute_efficiency));
  }
  if (!(o.memory_efficiency > 0 && o.memory_efficiency <= 1)) {
    return R::Error("memory efficiency must be in (0, 1], got " + Num(o.memory_efficiency));
  }
  if (!(o.allreduce_latency_s >= 0) || !(o.step_overhead_s >= 0) || !(o.weight_bytes_per_parameter > 0)) {
    return R::Error("all-reduce latency and step overhead must be >= 0, weight bytes per parameter > 0");
  }
  auto kv = curve::BytesPerTokenPerRank(model, o.tensor_parallel);
  if (!kv.ok()) return R::Error(kv.error());
  const double t = o.tensor_parallel;
  const double flops = t * gpu.dense_bf16_flops * o.compute_efficiency;
  const double bandwidth = gpu.memory_bandwidth * o.memory_efficiency;  // per rank
  const double attention_flops = 4.0 * model.layers * model.query_heads * model.head_dim;
  LinearStepCoefficients c;
  c.per_prefill_token_s = 2.0 * model.parameters / flops;
  c.per_attention_pair_s = attention_flops / flops;
  c.per_decode_sequence_s = 2.0 * model.parameters / flops;
  c.per_context_token_s = static_cast<double>(kv.value()) / bandwidth + attention_flops / flops;
  c.fixed_s = TotalParameters(model) * o.weight_bytes_per_parameter / (t * bandwidth) +
              (o.tensor_parallel > 1 ? 2.0 * model.layers * o.allreduce_latency_s : 0.0) + o.step_overhead_s;
  return c;
}

base::Result<LinearStepCoefficients> ParseStepCoefficients(std::string_view text) {
  using R = base::Result<LinearStepCoefficients>;
  LinearStepCoefficients c;
  bool any = false;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) return R::Error("expected KEY=SECONDS, got '" + std::string(item) + "'");
    const std::string key(item.substr(0, eq));
    double* field = key == "fixed"             ? &c.fixed_s
                    : key == "prefill_token"   ? &c.per_prefill_token_s
                    : key == "attention_pair"  ? &c.per_attention_pair_s
                    : key == "decode_sequence" ? &c.per_decode_sequence_s
                    : key == "context_token"   ? &c.per_context_token_s
                                               : nullptr;
    if (field == nullptr) {
      return R::Error("unknown key '" + key +
                      "' (known: fixed, prefill_token, attention_pair, decode_sequence, context_token)");
    }
    const std::string_view value = item.substr(eq + 1);
    if (!value.empty() && value.front() == '-') return R::Error(key + ": must be >= 0, got " + std::string(value));
    const base::Result<double> v = base::DurationFlag(value);
    if (!v.ok()) return R::Error(key + ": " + v.error());
    *field = v.value();
    any = any || v.value() > 0;
  }
  if (!any) return R::Error("at least one coefficient must be > 0");
  return c;
}

std::string FormatStepCoefficients(const LinearStepCoefficients& c) {
  return "fixed=" + Num(c.fixed_s) + ",prefill_token=" + Num(c.per_prefill_token_s) +
         ",attention_pair=" + Num(c.per_attention_pair_s) + ",decode_sequence=" + Num(c.per_decode_sequence_s) +
         ",context_token=" + Num(c.per_context_token_s);
}

base::Result<CalibrationFit> FitStepCoefficients(std::span<const CalibrationObservation> observations,
                                                 const std::optional<LinearStepCoefficients>& shape) {
  using R = base::Result<CalibrationFit>;
  if (observations.empty()) return R::Error("no observation to fit");
  CalibrationFit fit;
  std::vector<double> x, y;  // B * C, and l minus the shape's per-sequence term
  double prefill_excess = 0, computed = 0;
  const double per_sequence = shape ? shape->per_decode_sequence_s : 0;
  for (const CalibrationObservation& o : observations) {
    const std::string where = o.source.empty() ? "" : o.source + ": ";
    const std::pair<const char*, double> figures[] = {{"requests", o.requests},
                                                      {"prompt tokens", o.prompt_tokens},
                                                      {"computed prompt tokens", o.computed_prompt_tokens},
                                                      {"generation tokens", o.generation_tokens},
                                                      {"prefill time sum", o.prefill_time_sum_s},
                                                      {"inter-token latency sum", o.itl_sum_s},
                                                      {"inter-token latency count", o.itl_count},
                                                      {"running requests", o.running}};
    for (const auto& [name, v] : figures) {
      if (!std::isfinite(v) || v < 0) return R::Error(where + name + " must be a finite number >= 0, got " + Num(v));
    }
    if (!(o.requests > 0)) return R::Error(where + "no finished requests");
    if (!(o.itl_count > 0)) return R::Error(where + "no inter-token gaps (the ITL histogram's count is 0)");
    if (!(o.computed_prompt_tokens > 0)) return R::Error(where + "no computed prompt tokens");
    if (o.computed_prompt_tokens > o.prompt_tokens) {
      return R::Error(where + "computed prompt tokens (" + Num(o.computed_prompt_tokens) + ") exceed prompt tokens (" +
                      Num(o.prompt_tokens) + ")");
    }
    const double l = o.itl_sum_s / o.itl_count;
    const double context = o.prompt_tokens / o.requests + o.generation_tokens / (2 * o.requests);
    fit.decode_step_s.push_back(l);
    x.push_back(o.running * context);
    y.push_back(l - per_sequence * o.running);
    prefill_excess += o.prefill_time_sum_s - o.requests * l;
    computed += o.computed_prompt_tokens;
  }
  LinearStepCoefficients c;
  if (observations.size() == 1) {
    if (!shape) {
      return R::Error(
          "one observation cannot split the decode step time into a fixed part and a per-context-token part: give "
          "a shape (a GPU and a model) or more observations at different loads");
    }
    const double model_l =
        shape->fixed_s + shape->per_decode_sequence_s * observations[0].running + shape->per_context_token_s * x[0];
    if (!(model_l > 0)) return R::Error("the shape predicts a zero decode step");
    const double k = fit.decode_step_s[0] / model_l;
    c.fixed_s = k * shape->fixed_s;
    c.per_decode_sequence_s = k * shape->per_decode_sequence_s;
    c.per_context_token_s = k * shape->per_context_token_s;
    fit.method = "roofline decode shape scaled by " + Num(k);
  } else {
    auto line = LineFit(x, y);
    if (!line) {
      return R::Error("every observation has the same running requests x mean context (" + Num(x[0]) +
                      "): scrape at different loads");
    }
    c.fixed_s = line->first;
    c.per_context_token_s = line->second;
    c.per_decode_sequence_s = per_sequence;
    fit.method = "least squares over " + std::to_string(observations.size()) + " observations";
    if (c.fixed_s < 0) return R::Error("the fit gives a negative fixed step time (" + Num(c.fixed_s) + " s)");
    if (c.per_context_token_s < 0) {
      return R::Error("the fit gives a negative time per context token (" + Num(c.per_context_token_s) +
                      " s): ITL falls as the batch's context grows");
    }
  }
  c.per_prefill_token_s = prefill_excess / computed;
  if (c.per_prefill_token_s < 0) {
    return R::Error("prefill takes less than one decode step per request (prefill time per computed token " +
                    Num(c.per_prefill_token_s) + " s): the figures contradict the model");
  }
  if (shape && shape->per_prefill_token_s > 0) {
    c.per_attention_pair_s = shape->per_attention_pair_s * c.per_prefill_token_s / shape->per_prefill_token_s;
  }
  fit.coefficients = c;
  return fit;
}

}  // namespace kvwatch::sim
