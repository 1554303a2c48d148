#include "curve/sizing.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

namespace kvwatch::curve {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Quoted(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('\'');
  out.append(s);
  out.push_back('\'');
  return out;
}

std::string ModelLabel(const ModelSpec& spec) {
  return spec.name.empty() ? std::string("the model") : Quoted(spec.name);
}

// a * b, or an error naming what overflowed.
base::Result<std::uint64_t> CheckedMul(std::uint64_t a, std::uint64_t b, const char* what) {
  std::uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    return base::Result<std::uint64_t>::Error(std::string(what) + " overflows 64 bits (" + std::to_string(a) + " * " +
                                              std::to_string(b) + ")");
  }
  return out;
}

base::Status RequirePositive(int value, const char* field, const ModelSpec& spec) {
  if (value > 0) return base::Status::Ok();
  return base::Status::Error(ModelLabel(spec) + ": " + field + " must be a positive integer, got " +
                             std::to_string(value));
}

// Formats a fraction as a percentage without trailing zeros: 0.2 -> "20%".
std::string Percent(double fraction) {
  std::string s = std::to_string(fraction * 100.0);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s + "%";
}

struct Preset {
  const char* name;
  std::vector<const char*> aliases;
  int layers;
  int kv_heads;
  int head_dim;
  int query_heads;
  double parameters;
  // MLA only (0 otherwise).
  int kv_lora_rank;
  int qk_rope_head_dim;
  // Mixtures of experts only: every parameter (0: the same as parameters).
  double total_parameters = 0;
  // Hybrid models only: the KV cache groups (empty: all layers full attention).
  std::vector<KvGroupSpec> groups = {};
};

KvGroupSpec Group(KvGroupKind kind, int layers, int window_tokens = 0) {
  return KvGroupSpec{kind, layers, window_tokens, 0, 1};
}
KvGroupSpec LinearGroup(int layers, std::uint64_t state_elements, int state_split) {
  return KvGroupSpec{KvGroupKind::kLinear, layers, 0, state_elements, state_split};
}

// From each model's config.json: num_hidden_layers, num_key_value_heads,
// head_dim (or hidden_size / num_attention_heads), num_attention_heads; the
// parameter counts are the model cards' (active parameters for mixtures of experts).
const std::vector<Preset>& Presets() {
  static const std::vector<Preset> kPresets = {
      // name, aliases, layers, kv_heads, head_dim, query_heads, parameters, MLA
      {"llama-2-7b", {"llama2-7b"}, 32, 32, 128, 32, 6.74e9, 0, 0},
      {"llama-2-13b", {"llama2-13b"}, 40, 40, 128, 40, 13.0e9, 0, 0},
      {"llama-2-70b", {"llama2-70b"}, 80, 8, 128, 64, 69.0e9, 0, 0},
      {"llama-3-8b", {"llama3-8b", "llama-3.1-8b", "llama3.1-8b"}, 32, 8, 128, 32, 8.03e9, 0, 0},
      {"llama-3-70b", {"llama3-70b", "llama-3.1-70b", "llama3.1-70b", "llama-3.3-70b"}, 80, 8, 128, 64, 70.6e9, 0, 0},
      {"llama-3.1-405b", {"llama3.1-405b"}, 126, 8, 128, 128, 405.9e9, 0, 0},
      {"llama-65b", {"llama-1-65b"}, 80, 64, 128, 64, 65.2e9, 0, 0},
      {"mistral-7b", {}, 32, 8, 128, 32, 7.24e9, 0, 0},
      // Mixtral: 46.7B parameters in all, 12.9B active per token (2 of 8 experts).
      {"mixtral-8x7b", {}, 32, 8, 128, 32, 12.9e9, 0, 0, 46.7e9},
      {"qwen2.5-7b", {}, 28, 4, 128, 28, 7.61e9, 0, 0},
      {"qwen2.5-14b", {}, 48, 8, 128, 40, 14.7e9, 0, 0},
      {"qwen2.5-32b", {}, 64, 8, 128, 40, 32.5e9, 0, 0},
      {"qwen2.5-72b", {}, 80, 8, 128, 64, 72.7e9, 0, 0},
      // Falcon-40B: n_head 128, n_head_kv 8, hidden_size 8192 (head_dim 64).
      {"falcon-40b", {}, 60, 8, 64, 128, 41.8e9, 0, 0},
      // DeepSeek-V3: MLA (kv_lora_rank 512, qk_rope_head_dim 64), 128 query heads,
      // qk_nope_head_dim 128 and v_head_dim 128 (cost head_dim (128+64+128)/2 = 160),
      // 671B parameters in all, 37B active.
      {"deepseek-v3", {"deepseek-r1"}, 61, 128, 160, 128, 37e9, 512, 64, 671e9},
      // Hybrid models (tests/curve/sizing_test.cc checks each against its
      // published config.json). gpt-oss (openai/gpt-oss-20b, -120b): layer_types
      // alternate sliding_attention (first) and full_attention, sliding_window
      // 128; 64 query heads, 8 KV heads of 64; 20.9B / 116.8B parameters, 3.6B /
      // 5.1B active (model card).
      {"gpt-oss-20b",
       {},
       24,
       8,
       64,
       64,
       3.6e9,
       0,
       0,
       20.9e9,
       {Group(KvGroupKind::kSlidingWindow, 12, 128), Group(KvGroupKind::kFull, 12)}},
      {"gpt-oss-120b",
       {},
       36,
       8,
       64,
       64,
       5.1e9,
       0,
       0,
       116.8e9,
       {Group(KvGroupKind::kSlidingWindow, 18, 128), Group(KvGroupKind::kFull, 18)}},
      // Gemma 3 27B (google/gemma-3-27b-it, text_config): 62 layers,
      // sliding_window_pattern 6 (layers 5, 11, ..., 59 full: 10 of 62),
      // sliding_window 1024; 32 query heads, 16 KV heads of 128; 27B parameters.
      {"gemma-3-27b",
       {"gemma3-27b"},
       62,
       16,
       128,
       32,
       27e9,
       0,
       0,
       0,
       {Group(KvGroupKind::kSlidingWindow, 52, 1024), Group(KvGroupKind::kFull, 10)}},
      // Llama 4 Scout (meta-llama/Llama-4-Scout-17B-16E-Instruct, text_config): 48
      // layers, no_rope_layers 0 on every 4th (the full-attention NoPE layers: 12),
      // chunked local attention on the others, attention_chunk_size 8192; 40
      // query heads, 8 KV heads of 128; 109B parameters, 17B active.
      {"llama-4-scout",
       {"llama4-scout", "llama-4-scout-17b-16e"},
       48,
       8,
       128,
       40,
       17e9,
       0,
       0,
       109e9,
       {Group(KvGroupKind::kChunkedLocal, 36, 8192), Group(KvGroupKind::kFull, 12)}},
      // Qwen3-Next 80B-A3B (Qwen/Qwen3-Next-80B-A3B-Instruct): 48 layers,
      // full_attention_interval 4 (12 full, 36 gated DeltaNet); full attention 16
      // query heads, 2 KV heads of 256; linear: conv kernel 4 over
      // 2 * 16 key heads * 128 + 32 value heads * 128 = 8192 channels (3 * 8192
      // conv state) and a 32 * 128 * 128 recurrent state: 548,864 elements per
      // layer, split over the 16 key heads; 80B parameters, 3B active.
      {"qwen3-next-80b-a3b",
       {"qwen3-next-80b"},
       48,
       2,
       256,
       16,
       3e9,
       0,
       0,
       80e9,
       {LinearGroup(36, 3 * 8192 + 32 * 128 * 128, 16), Group(KvGroupKind::kFull, 12)}},
  };
  return kPresets;
}

ModelSpec SpecOf(const Preset& p) {
  ModelSpec spec;
  spec.name = p.name;
  spec.layers = p.layers;
  spec.kv_heads = p.kv_heads;
  spec.head_dim = p.head_dim;
  spec.bytes_per_element = 2;
  spec.mla = p.kv_lora_rank > 0;
  spec.kv_lora_rank = p.kv_lora_rank;
  spec.qk_rope_head_dim = p.qk_rope_head_dim;
  spec.parameters = p.parameters;
  spec.query_heads = p.query_heads;
  spec.total_parameters = p.total_parameters;
  spec.groups = p.groups;
  return spec;
}

}  // namespace

const char* KvGroupKindName(KvGroupKind kind) {
  switch (kind) {
    case KvGroupKind::kFull:
      return "full";
    case KvGroupKind::kSlidingWindow:
      return "sliding_window";
    case KvGroupKind::kChunkedLocal:
      return "chunked_local";
    case KvGroupKind::kLinear:
      return "linear";
  }
  return "unknown";
}

base::Result<std::vector<KvGroupSizing>> SizeKvGroups(const ModelSpec& spec, int tensor_parallel,
                                                      std::uint64_t page_tokens) {
  using R = base::Result<std::vector<KvGroupSizing>>;
  if (spec.groups.empty()) return R::Error(ModelLabel(spec) + " has no KV cache groups (all full attention)");
  if (base::Status s = ValidateModelSpec(spec); !s.ok()) return R::Error(s.error());
  if (tensor_parallel < 1) {
    return R::Error("tensor-parallel size must be at least 1, got " + std::to_string(tensor_parallel));
  }
  if (page_tokens == 0) return R::Error("tokens per page must be positive");
  std::vector<KvGroupSizing> out;
  int layers = 0;
  for (std::size_t i = 0; i < spec.groups.size(); ++i) {
    const KvGroupSpec& g = spec.groups[i];
    const std::string label = ModelLabel(spec) + " group " + std::to_string(i) + " (" + KvGroupKindName(g.kind) + ")";
    if (g.layers <= 0) return R::Error(label + ": layers must be positive, got " + std::to_string(g.layers));
    layers += g.layers;
    const bool windowed = g.kind == KvGroupKind::kSlidingWindow || g.kind == KvGroupKind::kChunkedLocal;
    if (windowed && g.window_tokens <= 0) {
      return R::Error(label + ": the window (chunk) must be a positive number of tokens, got " +
                      std::to_string(g.window_tokens));
    }
    KvGroupSizing sized;
    sized.spec = g;
    if (g.kind == KvGroupKind::kLinear) {
      if (g.state_elements == 0 || g.state_split <= 0) return R::Error(label + ": the state size is unknown");
      if (g.state_split % tensor_parallel != 0) {
        return R::Error(label + ": tensor-parallel size " + std::to_string(tensor_parallel) +
                        " does not divide the state's " + std::to_string(g.state_split) + " heads");
      }
      const auto tp = static_cast<std::uint64_t>(tensor_parallel);
      // One layer's state on one rank: the split part, plus the B/C groups a rank
      // holds (a copy of the one group when tensor parallelism does not divide them).
      const std::uint64_t grouped = static_cast<std::uint64_t>(g.state_groups) * g.state_group_elements;
      if (grouped > g.state_elements) return R::Error(label + ": the state's groups exceed the state");
      std::uint64_t groups_per_rank = 0;
      if (g.state_groups > 0) {
        if (g.state_groups % tensor_parallel == 0) {
          groups_per_rank = static_cast<std::uint64_t>(g.state_groups) / tp;
        } else if (g.state_groups == 1) {
          groups_per_rank = 1;
        } else {
          return R::Error(label + ": tensor-parallel size " + std::to_string(tensor_parallel) +
                          " does not divide the state's " + std::to_string(g.state_groups) +
                          " groups (vLLM requires that, or a single group)");
        }
      }
      // Bytes over the group's layers: the split part divided after the product (as
      // a rank holds 1/tp of every layer), the held groups whole.
      std::uint64_t parts[2] = {g.state_elements - grouped, groups_per_rank * g.state_group_elements};
      for (std::uint64_t& part : parts) {
        base::Result<std::uint64_t> elements = CheckedMul(part, static_cast<std::uint64_t>(g.layers), "state elements");
        if (!elements.ok()) return R::Error(elements.error());
        base::Result<std::uint64_t> bytes =
            CheckedMul(elements.value(), static_cast<std::uint64_t>(spec.bytes_per_element), "state bytes");
        if (!bytes.ok()) return R::Error(bytes.error());
        part = bytes.value();
      }
      sized.state_bytes = parts[0] / tp + parts[1];
      sized.page_bytes = sized.state_bytes;
    } else {
      ModelSpec part = spec;
      part.layers = g.layers;
      base::Result<std::uint64_t> bpt = BytesPerTokenPerRank(part, tensor_parallel);
      if (!bpt.ok()) return R::Error(bpt.error());
      sized.bytes_per_token = bpt.value();
      base::Result<std::uint64_t> page = PageBytes(page_tokens, sized.bytes_per_token);
      if (!page.ok()) return R::Error(page.error());
      sized.page_bytes = page.value();
    }
    out.push_back(sized);
  }
  if (layers != spec.layers) {
    return R::Error(ModelLabel(spec) + ": the KV cache groups hold " + std::to_string(layers) +
                    " layers, the model has " + std::to_string(spec.layers));
  }
  return out;
}

base::Status ValidateModelSpec(const ModelSpec& spec) {
  for (const base::Status& s : {RequirePositive(spec.layers, "layers", spec),
                                RequirePositive(spec.bytes_per_element, "bytes_per_element", spec)}) {
    if (!s.ok()) return s;
  }
  if (spec.mla) {
    for (const base::Status& s : {RequirePositive(spec.kv_lora_rank, "kv_lora_rank", spec),
                                  RequirePositive(spec.qk_rope_head_dim, "qk_rope_head_dim", spec)}) {
      if (!s.ok()) return s;
    }
    return base::Status::Ok();
  }
  for (const base::Status& s :
       {RequirePositive(spec.kv_heads, "kv_heads", spec), RequirePositive(spec.head_dim, "head_dim", spec)}) {
    if (!s.ok()) return s;
  }
  return base::Status::Ok();
}

base::Result<std::uint64_t> BytesPerToken(const ModelSpec& spec) {
  if (base::Status s = ValidateModelSpec(spec); !s.ok()) return base::Result<std::uint64_t>::Error(s.error());
  // Factors of the product, each positive.
  std::vector<std::uint64_t> factors = {static_cast<std::uint64_t>(spec.layers),
                                        static_cast<std::uint64_t>(spec.bytes_per_element)};
  if (spec.mla) {
    factors.push_back(static_cast<std::uint64_t>(spec.kv_lora_rank) +
                      static_cast<std::uint64_t>(spec.qk_rope_head_dim));
  } else {
    factors.insert(factors.end(),
                   {2, static_cast<std::uint64_t>(spec.kv_heads), static_cast<std::uint64_t>(spec.head_dim)});
  }
  std::uint64_t bytes = 1;
  for (std::uint64_t f : factors) {
    base::Result<std::uint64_t> product = CheckedMul(bytes, f, "bytes per token");
    if (!product.ok()) return product;
    bytes = product.value();
  }
  return bytes;
}

base::Result<std::uint64_t> BytesPerTokenPerRank(const ModelSpec& spec, int tensor_parallel) {
  base::Result<std::uint64_t> whole = BytesPerToken(spec);
  if (!whole.ok()) return whole;
  if (tensor_parallel < 1) {
    return base::Result<std::uint64_t>::Error("tensor-parallel size must be at least 1, got " +
                                              std::to_string(tensor_parallel));
  }
  if (spec.mla) return whole;  // the latent is replicated on every rank
  const int tp = tensor_parallel;
  const int heads = spec.kv_heads;
  if (heads % tp != 0 && tp % heads != 0) {
    return base::Result<std::uint64_t>::Error(
        "tensor-parallel size " + std::to_string(tp) + " neither divides nor is a multiple of the " +
        std::to_string(heads) + " KV heads of " + ModelLabel(spec) + " (a rank cannot hold part of a head)");
  }
  const auto ranks_split = static_cast<std::uint64_t>(std::min(tp, heads));
  return whole.value() / ranks_split;  // exact: ranks_split divides kv_heads
}

base::Result<std::uint64_t> PageBytes(std::uint64_t page_tokens, std::uint64_t bytes_per_token) {
  return CheckedMul(page_tokens, bytes_per_token, "page bytes");
}

base::Result<std::uint64_t> PayloadBytes(std::uint64_t pages, std::uint64_t page_tokens,
                                         std::uint64_t bytes_per_token) {
  base::Result<std::uint64_t> page = PageBytes(page_tokens, bytes_per_token);
  if (!page.ok()) return page;
  return CheckedMul(pages, page.value(), "payload bytes");
}

base::Result<int> DtypeBytes(std::string_view dtype) {
  const std::string d = Lower(dtype);
  if (d == "float16" || d == "fp16" || d == "half" || d == "bfloat16" || d == "bf16") return 2;
  if (d == "float32" || d == "fp32" || d == "float") return 4;
  if (d.starts_with("float8") || d.starts_with("fp8")) return 1;
  return base::Result<int>::Error("unsupported dtype " + Quoted(dtype) +
                                  "; expected float16, bfloat16, float32 or float8 (fp16, bf16, "
                                  "fp32, fp8 and half are accepted too)");
}

base::Result<CapacityPlan> PlanCapacity(std::uint64_t pages, std::uint64_t page_tokens, std::uint64_t bytes_per_token,
                                        const CapacityPlanOptions& options) {
  using R = base::Result<CapacityPlan>;
  if (page_tokens == 0) return R::Error("tokens per page must be positive");
  if (bytes_per_token == 0) return R::Error("bytes per token must be positive");
  const double f = options.reserve_fraction;
  if (!std::isfinite(f) || f < 0 || f > 1) {
    return R::Error("reserve fraction must be between 0 and 1 (0.2 = 20%), got " + std::to_string(f));
  }
  CapacityPlan plan;
  plan.pages = pages;
  plan.page_tokens = page_tokens;
  plan.bytes_per_token = bytes_per_token;
  plan.reserve_fraction = f;
  base::Result<std::uint64_t> page = PageBytes(page_tokens, bytes_per_token);
  if (!page.ok()) return R::Error(page.error());
  plan.page_bytes = page.value();
  base::Result<std::uint64_t> payload = PayloadBytes(pages, page_tokens, bytes_per_token);
  if (!payload.ok()) return R::Error(payload.error());
  plan.payload_bytes = payload.value();
  base::Result<std::uint64_t> metadata = CheckedMul(pages, options.metadata_bytes_per_page, "metadata bytes");
  if (!metadata.ok()) return R::Error(metadata.error());
  plan.metadata_bytes = metadata.value();
  // f <= 1, so the reserve is at most the payload and fits in 64 bits.
  plan.reserve_bytes = static_cast<std::uint64_t>(std::llround(static_cast<long double>(plan.payload_bytes) * f));
  std::uint64_t total = 0;
  if (__builtin_add_overflow(plan.payload_bytes, plan.metadata_bytes, &total) ||
      __builtin_add_overflow(total, plan.reserve_bytes, &total)) {
    return R::Error("total bytes overflow 64 bits");
  }
  plan.total_bytes = total;

  const std::string c = std::to_string(pages);
  plan.rows = {
      {"payload", plan.payload_bytes,
       c + " pages * " + std::to_string(page_tokens) + " tokens * " + std::to_string(bytes_per_token) +
           " bytes per token"},
      {"metadata", plan.metadata_bytes,
       c + " pages * " + std::to_string(options.metadata_bytes_per_page) + " bytes per page"},
      {"reserve", plan.reserve_bytes, Percent(f) + " of payload"},
      {"total", plan.total_bytes, "payload + metadata + reserve"},
  };
  return plan;
}

double PrefillCost::PageFlops(std::uint64_t page_index, std::uint64_t page_tokens) const {
  return PagesFlops(1, page_index, page_tokens);
}

double PrefillCost::PagesFlops(std::uint64_t page_count, std::uint64_t page_index_sum,
                               std::uint64_t page_tokens) const {
  const double n = static_cast<double>(page_count);
  const double p = static_cast<double>(page_tokens);
  const double per_page = p * a + b * p * (p - 1) / 2;  // the cost of page 0
  return n * per_page + b * p * p * static_cast<double>(page_index_sum);
}

base::Result<PrefillCost> PrefillCostForModel(const ModelSpec& spec) {
  using R = base::Result<PrefillCost>;
  if (!(spec.parameters > 0) || !std::isfinite(spec.parameters)) {
    return R::Error(ModelLabel(spec) + ": the parameter count is unknown; depth-weighted prefill cost needs it");
  }
  for (const base::Status& s :
       {RequirePositive(spec.layers, "layers", spec), RequirePositive(spec.query_heads, "query_heads", spec),
        RequirePositive(spec.head_dim, "head_dim", spec)}) {
    if (!s.ok()) return R::Error(s.error());
  }
  return PrefillCost{2.0 * spec.parameters, 4.0 * spec.layers * spec.query_heads * spec.head_dim};
}

double PageCostFlops(std::uint64_t page_index, std::uint64_t page_tokens, const ModelSpec& spec) {
  return PagesCostFlops(1, page_index, page_tokens, spec);
}

double PagesCostFlops(std::uint64_t page_count, std::uint64_t page_index_sum, std::uint64_t page_tokens,
                      const ModelSpec& spec) {
  const PrefillCost cost{2.0 * spec.parameters, 4.0 * spec.layers * spec.query_heads * spec.head_dim};
  return cost.PagesFlops(page_count, page_index_sum, page_tokens);
}

base::Result<ModelSpec> LookupModelPreset(std::string_view name) {
  const std::string wanted = Lower(name);
  for (const Preset& p : Presets()) {
    bool match = wanted == p.name;
    for (const char* alias : p.aliases) match = match || wanted == alias;
    if (match) return SpecOf(p);
  }
  std::string known;
  for (const std::string& n : ModelPresetNames()) known += (known.empty() ? "" : ", ") + n;
  return base::Result<ModelSpec>::Error("unknown model " + Quoted(name) + "; known models: " + known);
}

std::vector<std::string> ModelPresetNames(bool include_aliases) {
  std::vector<std::string> names;
  for (const Preset& p : Presets()) {
    names.emplace_back(p.name);
    if (include_aliases) names.insert(names.end(), p.aliases.begin(), p.aliases.end());
  }
  return names;
}

}  // namespace kvwatch::curve
