// `kvwatch simulate`'s flags turned into a SimulateSetup (agent/cli/simulate_command.h):
// the time model, the tiers, the sweep, and the KV pool once the page size is known.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "agent/cli/calibrate.h"
#include "agent/cli/page_tokens.h"
#include "agent/cli/simulate_command.h"
#include "agent/render/text_format.h"
#include "base/quantity_text.h"
#include "config/model_choice.h"

namespace kvwatch::agent {

using base::Result;

namespace {

using base::Status;

Status Flag(const std::string& flag, const std::string& message) { return Status::Error(flag + ": " + message); }

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// NAME:ttft=2s,itl=100ms (either target may be left out: the defaults).
Result<sim::TierTarget> ParseTier(std::string_view text) {
  using R = Result<sim::TierTarget>;
  const std::size_t colon = text.find(':');
  sim::TierTarget t{std::string(text.substr(0, colon)), 2.0, 0.1};
  if (t.name.empty()) return R::Error("expected NAME:ttft=2s,itl=100ms, got '" + std::string(text) + "'");
  if (colon == std::string_view::npos) return t;
  for (std::string_view item : Split(text.substr(colon + 1), ',')) {
    const std::size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    if (eq == std::string_view::npos || (key != "ttft" && key != "itl")) {
      return R::Error("tier " + t.name + ": expected ttft=DURATION or itl=DURATION, got '" + std::string(item) + "'");
    }
    auto v = base::DurationFlag(item.substr(eq + 1));
    if (!v.ok()) return R::Error("tier " + t.name + ": " + std::string(key) + ": " + v.error());
    if (!(v.value() > 0)) return R::Error("tier " + t.name + ": " + std::string(key) + " must be > 0");
    (key == "ttft" ? t.ttft_s : t.itl_s) = v.value();
  }
  return t;
}

// --format and --progress.
Status CheckOutput(const SimulateOptions& o) {
  if (o.format != "table" && o.format != "json" && o.format != "csv") {
    return Flag("--format", "expected table, json or csv, got '" + o.format + "'");
  }
  if (o.progress != "auto" && o.progress != "always" && o.progress != "never") {
    return Flag("--progress", "expected auto, always or never, got '" + o.progress + "'");
  }
  return Status::Ok();
}

// The sweep: --admission x --policy x --load.
Status ResolveSweep(const SimulateOptions& o, SimulateSetup* s) {
  for (std::string_view name : Split(o.admissions, ',')) {
    auto a = sim::ParseAdmission(name);
    if (!a.ok()) return Flag("--admission", a.error());
    if (std::find(s->admissions.begin(), s->admissions.end(), a.value()) == s->admissions.end()) {
      s->admissions.push_back(a.value());
    }
  }
  if (s->admissions.empty()) return Flag("--admission", "give at least one rule");
  auto kinds = curve::ParsePolicyList(o.policies);
  if (!kinds.ok()) return Flag("--policy", kinds.error());
  for (curve::PolicyKind k : kinds.value()) {
    if (!sim::SupportedByReplica(k)) {
      return Flag("--policy", std::string(curve::PolicyName(k)) + " is not simulated in a replica (it supports " +
                                  sim::SupportedByReplicaNames() + ")");
    }
  }
  s->policies = kinds.value();
  if (s->policies.empty()) return Flag("--policy", "give at least one policy");
  for (double l : o.loads) {
    if (!(l >= kMinLoad && l <= kMaxLoad)) {
      return Flag("--load", "each load factor must be between 1e-06 and 1e+06, got " + Significant4(l));
    }
  }
  s->loads = o.loads;
  std::sort(s->loads.begin(), s->loads.end());
  s->loads.erase(std::unique(s->loads.begin(), s->loads.end()), s->loads.end());
  if (s->loads.empty()) return Flag("--load", "give at least one load factor");
  return Status::Ok();
}

// The model flags (config/model_choice.h) and --gpu.
Status ResolveModelAndGpu(const SimulateOptions& o, SimulateSetup* s) {
  auto model = config::ResolveModel(o.model, config::kModelFlags);
  if (!model.ok()) return Status::Error(model.error());
  s->model = model.value().spec;
  s->tensor_parallel = model.value().tensor_parallel;
  s->settings.kv_bytes_per_token = model.value().bytes_per_token;
  if (!o.gpu.empty()) {
    auto gpu = sim::LookupGpuPreset(o.gpu);
    if (!gpu.ok()) return Flag("--gpu", gpu.error());
    s->gpu = gpu.value();
  }
  return Status::Ok();
}

// The roofline of the model on the GPU (nullopt without both), with its options.
Result<std::optional<sim::LinearStepCoefficients>> Roofline(const SimulateOptions& o, const SimulateSetup& s,
                                                            sim::RooflineOptions* roof) {
  using R = Result<std::optional<sim::LinearStepCoefficients>>;
  roof->tensor_parallel = s.tensor_parallel;
  roof->compute_efficiency = o.compute_efficiency;
  roof->memory_efficiency = o.memory_efficiency;
  auto allreduce = base::DurationFlag(o.allreduce_latency);
  if (!allreduce.ok()) return R::Error("--allreduce-latency: " + allreduce.error());
  roof->allreduce_latency_s = allreduce.value();
  auto overhead = base::DurationFlag(o.step_overhead);
  if (!overhead.ok()) return R::Error("--step-overhead: " + overhead.error());
  roof->step_overhead_s = overhead.value();
  if (!s.gpu || !s.model) return std::optional<sim::LinearStepCoefficients>();
  auto c = sim::RooflineCoefficients(*s.model, *s.gpu, *roof);
  if (!c.ok()) {
    const std::string& e = c.error();
    const std::string flag = e.find("efficiency") != std::string::npos   ? "--compute-efficiency/--memory-efficiency"
                             : e.find("parameters") != std::string::npos ? "--parameters"
                                                                         : "--model";
    return R::Error(flag + ": " + e);
  }
  return std::optional<sim::LinearStepCoefficients>(c.value());
}

// The step-time model: --step-coefficients, --calibrate (shaped by the roofline
// when there is one), or the roofline of --gpu and the model.
Status ResolveTimeModel(const SimulateOptions& o, SimulateSetup* s) {
  SimulateSettings& st = s->settings;
  sim::RooflineOptions roof;
  auto roofline_or = Roofline(o, *s, &roof);
  if (!roofline_or.ok()) return Status::Error(roofline_or.error());
  const std::optional<sim::LinearStepCoefficients>& roofline = roofline_or.value();
  const std::string hardware =
      s->model && s->gpu ? s->model->name + " on " + std::to_string(s->tensor_parallel) + " x " + s->gpu->name : "";
  if (!o.step_coefficients.empty() + !o.calibrate.empty() > 1) {
    return Flag("--step-coefficients", "give --step-coefficients or --calibrate, not both");
  }
  if (!o.step_coefficients.empty()) {
    auto c = sim::ParseStepCoefficients(o.step_coefficients);
    if (!c.ok()) return Flag("--step-coefficients", c.error());
    s->coefficients = c.value();
    st.time_model = "coefficients";
    st.time_model_detail = "given with --step-coefficients";
  } else if (!o.calibrate.empty()) {
    std::vector<sim::CalibrationObservation> observations;
    for (const std::string& path : o.calibrate) {
      auto obs = ReadCalibrationFile(path);
      if (!obs.ok()) return Flag("--calibrate", obs.error());
      observations.push_back(obs.value());
    }
    auto fit = sim::FitStepCoefficients(observations, roofline);
    if (!fit.ok()) return Flag("--calibrate", fit.error());
    s->coefficients = fit.value().coefficients;
    st.time_model = "calibrated";
    st.time_model_detail = "fitted to " + std::to_string(observations.size()) + " /metrics scrape(s), " +
                           fit.value().method + (roofline ? " (shape: the roofline of " + hardware + ")" : "");
  } else if (roofline) {
    s->coefficients = *roofline;
    st.time_model = "roofline";
    st.time_model_detail = hardware + " (dense BF16 " + Significant4(s->gpu->dense_bf16_flops / 1e12) + " TFLOP/s, " +
                           Significant4(s->gpu->memory_bandwidth / 1e12) + " TB/s per GPU; efficiency compute " +
                           Significant4(roof.compute_efficiency) + ", memory " + Significant4(roof.memory_efficiency) +
                           "; all-reduce " + Significant4(roof.allreduce_latency_s * 1e6) + " us x 2 per layer)";
  } else {
    return Flag("--gpu",
                "no time model: give --gpu with --model (or --model-config and --parameters), "
                "--step-coefficients, or --calibrate FILE");
  }
  return Status::Ok();
}

// The KV pool's inputs (settled by SettleSimulatePool once the trace is read).
Status ResolvePoolInputs(const SimulateOptions& o, SimulateSetup* s) {
  if (!o.pool_blocks + o.kv_bytes.empty() == 0)
    return Flag("--pool-blocks", "give --pool-blocks or --kv-bytes, not both");
  if (o.pool_blocks) {
    if (*o.pool_blocks < 1 || *o.pool_blocks > kMaxPoolBlocks) {
      return Flag("--pool-blocks", "must be between 1 and " + std::to_string(kMaxPoolBlocks) + ", got " +
                                       std::to_string(*o.pool_blocks));
    }
    s->pool_blocks = o.pool_blocks;
  }
  if (!o.kv_bytes.empty()) {
    auto b = base::SizeFlag(o.kv_bytes);
    if (!b.ok()) return Flag("--kv-bytes", b.error());
    if (!(b.value() > 0)) return Flag("--kv-bytes", "must be > 0");
    if (!s->settings.kv_bytes_per_token) {
      return Flag("--kv-bytes", "needs the bytes per token: --model, --model-config or --bytes-per-token");
    }
    s->kv_bytes = b.value();
  }
  if (o.gpu_memory_utilization) {
    if (!(*o.gpu_memory_utilization > 0 && *o.gpu_memory_utilization <= 1)) {
      return Flag("--gpu-memory-utilization", "must be in (0, 1]");
    }
    if (s->pool_blocks || s->kv_bytes) {
      return Flag("--gpu-memory-utilization",
                  "applies when the pool comes from --gpu (no --pool-blocks or --kv-bytes)");
    }
    s->gpu_memory_utilization = *o.gpu_memory_utilization;
    s->gpu_memory_utilization_given = true;
  }
  if (!s->pool_blocks && !s->kv_bytes && !(s->gpu && s->model)) {
    return Flag("--pool-blocks", "no KV pool size: give --pool-blocks, --kv-bytes with a model, or --gpu with a model");
  }
  if (o.page_tokens && (*o.page_tokens < 1 || *o.page_tokens > kMaxPageTokens)) {
    return Flag("--page-tokens", "must be between 1 and " + std::to_string(kMaxPageTokens));
  }
  s->page_tokens = o.page_tokens;
  if (o.block_tokens && *o.block_tokens < 1) return Flag("--block-tokens", "must be at least 1");
  s->block_tokens = o.block_tokens;
  return Status::Ok();
}

// --queue-order and the --priority rules it and the priority policy read.
Status ResolveQueueOrder(const SimulateOptions& o, SimulateSetup* s) {
  if (o.queue_order == "arrival") {
    s->replica.queue_order = sim::QueueOrder::kArrival;
  } else if (o.queue_order == "tier") {
    s->replica.queue_order = sim::QueueOrder::kTier;
  } else if (o.queue_order == "priority") {
    s->replica.queue_order = sim::QueueOrder::kPriority;
  } else {
    return Flag("--queue-order", "expected arrival, tier or priority, got '" + o.queue_order + "'");
  }
  auto rules = curve::ParsePriorityRules(o.priorities);
  if (!rules.ok()) return Flag("--priority", rules.error());
  s->priorities = rules.value();
  if (s->replica.queue_order == sim::QueueOrder::kPriority && s->priorities.empty()) {
    return Flag("--queue-order", "priority needs --priority rules (tenant:NAME=P,class:NAME=P)");
  }
  return Status::Ok();
}

// The scheduler: batch limits, the queue, reserve-max's and reserve-quantile's reservations.
Status ResolveScheduler(const SimulateOptions& o, SimulateSetup* s) {
  if (o.max_batched_tokens < 1) return Flag("--max-batched-tokens", "must be at least 1");
  if (o.max_running < 1) return Flag("--max-running", "must be at least 1");
  s->replica.max_batched_tokens = o.max_batched_tokens;
  s->replica.max_running = o.max_running;
  if (o.queue_timeout != "none") {
    auto t = base::DurationFlag(o.queue_timeout);
    if (!t.ok()) return Flag("--queue-timeout", t.error() + " or none");
    if (!(t.value() > 0)) return Flag("--queue-timeout", "must be > 0 (or none)");
    s->replica.queue_timeout_s = t.value();
  }
  if (Status st = ResolveQueueOrder(o, s); !st.ok()) return st;
  if (o.max_output_tokens > kMaxOutputTokens) {
    return Flag("--max-output-tokens", "must be at most " + std::to_string(kMaxOutputTokens) + " (or 0)");
  }
  s->replica.max_output_tokens = o.max_output_tokens;
  if (!(o.reserve_quantile > 0 && o.reserve_quantile <= 1)) return Flag("--reserve-quantile", "must be in (0, 1]");
  s->replica.class_quantiles.assign(sim::kMaxClasses, o.reserve_quantile);
  // Per class name; the names become class ids when the trace is read (BuildReplicaRequests).
  for (std::string_view item : Split(o.class_quantiles, ',')) {
    const std::size_t eq = item.rfind('=');
    const std::string name(item.substr(0, eq == std::string_view::npos ? 0 : eq));
    const std::string_view number = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    double q = 0;
    auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), q);
    if (name.empty() || number.empty() || ec != std::errc() || ptr != number.data() + number.size() ||
        !(q > 0 && q <= 1)) {
      return Flag("--class-quantile", "expected CLASS=Q with Q in (0, 1], got '" + std::string(item) + "'");
    }
    if (!s->class_quantiles.emplace(name, q).second) return Flag("--class-quantile", "class " + name + " given twice");
  }
  return Status::Ok();
}

// --sla-tier-of: who belongs to which tier; the tiers' members as the output says them.
Status ResolveTierMembers(const SimulateOptions& o, SimulateSetup* s) {
  std::vector<std::string> members(s->replica.tiers.size());
  for (std::string_view item : Split(o.tier_of, ',')) {
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return Flag("--sla-tier-of", "expected tenant:NAME=TIER, got '" + std::string(item) + "'");
    std::string_view who = item.substr(0, eq);
    const std::string tier(item.substr(eq + 1));
    auto it = std::find_if(s->replica.tiers.begin(), s->replica.tiers.end(),
                           [&](const sim::TierTarget& t) { return t.name == tier; });
    if (it == s->replica.tiers.end())
      return Flag("--sla-tier-of", "unknown tier '" + tier + "' (give it with --sla-tier)");
    const auto index = static_cast<std::uint32_t>(it - s->replica.tiers.begin());
    const bool is_class = who.rfind("class:", 0) == 0;
    if (is_class) {
      who.remove_prefix(6);
    } else if (who.rfind("tenant:", 0) == 0) {
      who.remove_prefix(7);
    }
    if (who.empty()) return Flag("--sla-tier-of", "empty name in '" + std::string(item) + "'");
    (is_class ? s->tier_map.cls : s->tier_map.tenant)[std::string(who)] = index;
    std::string& m = members[index];
    m += (m.empty() ? "" : ", ") + std::string(is_class ? "class " : "tenant ") + std::string(who);
  }
  const bool mapped = !s->tier_map.tenant.empty() || !s->tier_map.cls.empty();
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (i == 0) {
      members[i] = !mapped              ? "every request"
                   : members[i].empty() ? "every request not in another tier"
                                        : members[i] + ", and every request not in another tier";
    }
    if (members[i].empty()) members[i] = "nobody";
  }
  s->settings.tier_members = members;
  return Status::Ok();
}

// The SLA tiers (--sla-tier), their members and --sla-target.
Status ResolveTiers(const SimulateOptions& o, SimulateSetup* s) {
  for (const std::string& text : o.tiers) {
    auto t = ParseTier(text);
    if (!t.ok()) return Flag("--sla-tier", t.error());
    for (const sim::TierTarget& other : s->replica.tiers) {
      if (other.name == t.value().name) return Flag("--sla-tier", "tier " + other.name + " given twice");
    }
    s->replica.tiers.push_back(t.value());
  }
  if (s->replica.tiers.empty()) s->replica.tiers.push_back({"all", 2.0, 0.1});
  if (Status st = ResolveTierMembers(o, s); !st.ok()) return st;
  s->settings.tiers = s->replica.tiers;
  if (!(o.sla_target > 0 && o.sla_target <= 1)) return Flag("--sla-target", "must be in (0, 1]");
  s->settings.sla_target = o.sla_target;
  return Status::Ok();
}

// What is assumed where the trace says nothing: --output-tokens, --rate, --spread-ties.
Status ResolveAssumptions(const SimulateOptions& o, SimulateSetup* s) {
  if (o.output_tokens < 1 || o.output_tokens > kMaxOutputTokens) {
    return Flag("--output-tokens", "must be between 1 and " + std::to_string(kMaxOutputTokens));
  }
  s->output_tokens = o.output_tokens;
  if (!(o.rate >= 1e-6 && o.rate <= 1e9)) return Flag("--rate", "must be between 1e-06 and 1e+09 requests/s");
  s->rate = o.rate;
  s->spread_ties = o.spread_ties;
  return Status::Ok();
}

// The settings the output repeats.
void RecordSettings(const SimulateOptions& o, SimulateSetup* s) {
  SimulateSettings& st = s->settings;
  st.sources = o.traces;
  st.coefficients = s->coefficients;
  st.max_batched_tokens = s->replica.max_batched_tokens;
  st.max_running = s->replica.max_running;
  st.queue_timeout_s = s->replica.queue_timeout_s;
  st.queue_order = o.queue_order;
}

}  // namespace

std::uint32_t TierMap::For(std::string_view tenant_name, std::string_view class_name) const {
  if (auto it = tenant.find(tenant_name); it != tenant.end()) return it->second;
  if (auto it = cls.find(class_name); it != cls.end()) return it->second;
  return 0;
}

Result<SimulateSetup> ResolveSimulateOptions(const SimulateOptions& o) {
  SimulateSetup s;
  Status st = CheckOutput(o);
  if (st.ok()) st = ResolveSweep(o, &s);
  if (st.ok()) st = ResolveModelAndGpu(o, &s);
  if (st.ok()) st = ResolveTimeModel(o, &s);
  if (st.ok()) st = ResolvePoolInputs(o, &s);
  if (st.ok()) st = ResolveScheduler(o, &s);
  if (st.ok()) st = ResolveTiers(o, &s);
  if (st.ok()) st = ResolveAssumptions(o, &s);
  if (!st.ok()) return Result<SimulateSetup>::Error(st.error());
  RecordSettings(o, &s);
  return s;
}

namespace {

// The trace's tokens per page (--page-tokens, else inferred, else 16) and the
// KV block's (--block-tokens, else the page's), which must divide it.
base::Status SettleBlockTokens(SimulateSetup* s, std::optional<std::uint64_t> inferred_page_tokens) {
  SimulateSettings& st = s->settings;
  if (s->page_tokens) {
    st.page_tokens = *s->page_tokens;
    st.page_tokens_source = "option";
  } else if (inferred_page_tokens) {
    st.page_tokens = *inferred_page_tokens;
    st.page_tokens_source = "inferred";
  } else {
    st.page_tokens = 16;
    st.page_tokens_source = "default";
  }
  const std::uint64_t block = s->block_tokens.value_or(st.page_tokens);  // both at most kMaxPageTokens
  if (block > st.page_tokens || st.page_tokens % block != 0) {
    return base::Status::Error("--block-tokens: " + std::to_string(block) + " must divide the trace's " +
                               std::to_string(st.page_tokens) + " tokens per page");
  }
  st.block_tokens = static_cast<std::uint32_t>(block);
  s->replica.block_tokens = st.block_tokens;
  return base::Status::Ok();
}

// The pool's bytes per rank without --pool-blocks: --kv-bytes, else as vLLM
// sizes its pool, the GPU's memory x utilization minus what the weights take on
// one rank (activations, CUDA graphs and the allocator's slack are not
// subtracted). *flag names the option an error blames.
base::Result<double> PoolBytes(SimulateSetup* s, const std::string& per_block, std::string* flag) {
  SimulateSettings& st = s->settings;
  *flag = "--kv-bytes";
  if (s->kv_bytes) {
    st.pool_source = "kv-bytes";
    st.pool_detail = "--kv-bytes " + HumanBytes(*s->kv_bytes) + " / " + per_block;
    return *s->kv_bytes;
  }
  *flag = s->gpu_memory_utilization_given ? "--gpu-memory-utilization" : "--gpu";
  const double weights = sim::TotalParameters(*s->model) * 2 / s->tensor_parallel;
  const double bytes = s->gpu->memory_bytes * s->gpu_memory_utilization - weights;
  st.pool_source = "gpu-memory";
  st.pool_detail = s->gpu->name + " " + HumanBytes(s->gpu->memory_bytes) + " x " +
                   Significant4(s->gpu_memory_utilization) + " utilization - " + HumanBytes(weights) +
                   " of weights per rank (" + Significant4(sim::TotalParameters(*s->model) / 1e9) +
                   "B parameters x 2 bytes / " + std::to_string(s->tensor_parallel) +
                   ") = " + HumanBytes(std::max(0.0, bytes)) + " / " + per_block;
  if (!(bytes > 0)) {
    return base::Result<double>::Error(*flag + ": the weights (" + HumanBytes(weights) + " per rank) do not fit in " +
                                       HumanBytes(s->gpu->memory_bytes * s->gpu_memory_utilization) +
                                       ": raise --tensor-parallel or --gpu-memory-utilization");
  }
  return bytes;
}

}  // namespace

base::Status SettleSimulatePool(SimulateSetup* s, std::optional<std::uint64_t> inferred_page_tokens) {
  if (base::Status settled = SettleBlockTokens(s, inferred_page_tokens); !settled.ok()) return settled;
  SimulateSettings& st = s->settings;
  const std::uint64_t block = st.block_tokens;
  const std::string per_block =
      st.kv_bytes_per_token ? HumanBytes(*st.kv_bytes_per_token * static_cast<double>(block)) + " per block" : "";
  if (s->pool_blocks) {
    st.pool_blocks = *s->pool_blocks;
    st.pool_source = "option";
    st.pool_detail = "given with --pool-blocks" + (per_block.empty() ? "" : "; " + per_block);
  } else {
    std::string flag;
    const base::Result<double> bytes = PoolBytes(s, per_block, &flag);
    if (!bytes.ok()) return base::Status::Error(bytes.error());
    const double blocks = std::floor(bytes.value() / (*st.kv_bytes_per_token * static_cast<double>(block)));
    if (!(blocks >= 1)) return base::Status::Error(flag + ": room for less than one KV block");
    if (!(blocks <= static_cast<double>(kMaxPoolBlocks))) {
      return base::Status::Error(flag + ": room for " + Significant4(blocks) + " KV blocks, more than the " +
                                 std::to_string(kMaxPoolBlocks) + " a pool can have");
    }
    st.pool_blocks = static_cast<std::uint64_t>(blocks);
  }
  s->replica.pool_blocks = st.pool_blocks;
  return base::Status::Ok();
}

}  // namespace kvwatch::agent
