// kvwatch: the command line. Each subcommand's options are declared here (CLI11 is
// heavy to compile, so it lives in this one file) and run by agent/<name>_command.cc.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "agent/cli/replay_command.h"
#include "agent/cli/simulate_command.h"
#include "agent/cli/synth_command.h"
#include "agent/runtime/agent_command.h"
#include "agent/runtime/metric_catalog.h"
#include "agent/runtime/version.h"
#include "config/agent_config.h"
#include "config/model_choice.h"
#include "curve/policy.h"
#include "curve/sizing.h"
#include "sim/time_model.h"

namespace {

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// "lru, fifo, ..., sieve": every registered policy (curve::kAllPolicies), so that a
// policy added to the registry is in --help without editing it here.
std::string PolicyNames() {
  std::string names;
  for (kvwatch::curve::PolicyKind kind : kvwatch::curve::kAllPolicies) {
    names += (names.empty() ? "" : ", ") + std::string(kvwatch::curve::PolicyName(kind));
  }
  return names;
}

// The model flags every command that sizes KV takes, one spelling each
// (config/model_choice.h): `agent` and `check-config` (over the config's keys of
// the same names), `replay` and `simulate`. tensor_parallel_given (the agent's
// override) is set when --tensor-parallel or its old spelling is given.
void AddModelFlags(CLI::App& cmd, kvwatch::config::ModelChoice& m, bool* tensor_parallel_given = nullptr) {
  cmd.add_option(
      "--model", m.model,
      "Model preset for the KV geometry (and the parameter count): " + Join(kvwatch::curve::ModelPresetNames()));
  cmd.add_option("--model-config", m.model_config, "A Hugging Face config.json to read the KV geometry from");
  cmd.add_option("--bytes-per-token", m.bytes_per_token,
                 "KV bytes per token per GPU rank, given directly (instead of a model)");
  cmd.add_option("--kv-dtype", m.kv_dtype, "KV cache element type overriding the model's: fp16, bf16, fp8, fp32");
  CLI::Option* tp = cmd.add_option("--tensor-parallel", m.tensor_parallel,
                                   "Ranks the KV heads are split over (must divide the KV heads, or be a multiple "
                                   "of them)")
                        ->capture_default_str();
  // The old spelling (simulate's until 0.1): still read, with a note.
  cmd.add_option_function<int>(
         "--tp",
         [&m, tensor_parallel_given, name = cmd.get_name()](int value) {
           std::fprintf(stderr, "kvwatch %s: --tp is deprecated; use --tensor-parallel\n", name.c_str());
           m.tensor_parallel = value;
           if (tensor_parallel_given != nullptr) *tensor_parallel_given = true;
         },
         "Deprecated spelling of --tensor-parallel")
      ->group("Deprecated spellings");
  if (tensor_parallel_given != nullptr) {
    tp->each([tensor_parallel_given](const std::string&) { *tensor_parallel_given = true; });
  }
}

// The parameter counts: replay's prefill cost and simulate's roofline and weights.
void AddComputeFlags(CLI::App& cmd, kvwatch::config::ModelChoice& m) {
  cmd.add_option("--parameters", m.parameters,
                 "Active parameters per token (e.g. 70.6e9), overriding the model's; a config.json has none");
  cmd.add_option("--total-parameters", m.total_parameters, "Every parameter, for a mixture of experts' weights");
}

// The traces, the output, the reported capacities, what a hit is, and the
// working-set targets.
void AddReplayCurveFlags(CLI::App& cmd, kvwatch::agent::ReplayOptions& o) {
  cmd.add_option("TRACE", o.traces, "Trace files (Mooncake or Qwen-Bailian JSON Lines, plain or .gz), - for stdin")
      ->required();
  cmd.add_option("--format", o.format, "Output: table (for people), json or csv (for scripts)")->capture_default_str();
  cmd.add_option("--capacities", o.capacities,
                 "Capacities in pages to report, comma-separated, each 1 to 2^53 (with --policy, to 4294967293; "
                 "default: 1, 2, 5, 10, ... up to the curve's end)")
      ->delimiter(',');
  cmd.add_option("--coverage-share", o.coverage_share,
                 "Share s in (0,1] of a request's unlimited hits it must keep to count as covered")
      ->capture_default_str();
  cmd.add_option("--touch-order", o.touch_order,
                 "Order a request's pages are referenced after the hit test: tail-first (engines' eviction "
                 "order) or head-first (KVSET)")
      ->capture_default_str();
  cmd.add_option("--max-pages", o.max_pages,
                 "M: the most distinct pages tracked; every number is exact for capacities <= M")
      ->capture_default_str();
  cmd.add_option("--page-tokens", o.page_tokens,
                 "Tokens per page (16 for vLLM's default block, 512 for the Mooncake traces). Default: the size "
                 "most records' input_length and pages fit, else 16; when given, checked against them");
  cmd.add_option("--page-hit-targets", o.page_hit_targets,
                 "Fractions of the unlimited page hits to size for, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--coverage-targets", o.coverage_targets, "Fractions of requests to cover, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
}

// Bytes: the model, a hybrid model's groups, the capacity plan and the tiers.
void AddReplayBytesFlags(CLI::App& cmd, kvwatch::agent::ReplayOptions& o) {
  AddModelFlags(cmd, o.model);
  AddComputeFlags(cmd, o.model);
  cmd.add_flag("--hybrid-check", o.hybrid_check,
               "With a hybrid model: simulate vLLM's step behaviours at the hybrid working sets beside the curve");
  cmd.add_option("--hybrid-pool-shares", o.hybrid_pool_shares,
                 "With a hybrid model: a pool of its own per KV cache group, each this share of the capacity, "
                 "comma-separated in the model's group order (SGLang, TensorRT-LLM); default one pool (vLLM)")
      ->delimiter(',');
  cmd.add_option("--metadata-bytes-per-page", o.metadata_bytes_per_page,
                 "Metadata per page (block tables, buffers) in the capacity plan")
      ->capture_default_str();
  cmd.add_option("--reserve", o.reserve, "Reserve as a fraction of the payload in the capacity plan")
      ->capture_default_str();
  cmd.add_option("--prefill-flops-per-second", o.prefill_flops_per_s,
                 "Prefill throughput, to give avoided prefill in seconds and tier hits in time");
  cmd.add_option(
      "--tier", o.tiers,
      "A tier NAME:PAGES[:GBPS[:LATENCY_US]] (PAGES 1 to 2^53), fastest first; repeat for each (e.g. --tier hbm:100000 "
      "--tier dram:400000:50:10)");
}

// Sampling, the plot, the knee, and how records are read.
void AddReplayReadingFlags(CLI::App& cmd, kvwatch::agent::ReplayOptions& o) {
  cmd.add_option("--sample-rate", o.sample_rate,
                 "Spatial sampling rate R in (0,1] for traces too large to track exactly (page counts are "
                 "scaled by 1/R)");
  cmd.add_option("--svg", o.svg, "Write a plot of page hit ratio and request coverage against capacity here");
  cmd.add_option("--knee-sensitivity", o.knee_sensitivity, "Kneedle sensitivity S")->capture_default_str();
  cmd.add_flag("--strict", o.strict, "Stop at the first bad line instead of skipping and counting it");
  cmd.add_option("--timestamp-unit", o.timestamp_unit,
                 "Unit of the timestamp field: auto (Mooncake ms, Qwen-Bailian s), ms or s")
      ->capture_default_str();
}

// Tenants and classes.
void AddReplayTenantFlags(CLI::App& cmd, kvwatch::agent::ReplayOptions& o) {
  cmd.add_option("--tenant-field", o.tenant_fields,
                 "Field(s) naming a record's tenant or class, first present wins (default: tenant, class, type)");
  cmd.add_flag("!--no-tenants", o.tenants, "Do not break the curve down per tenant");
  cmd.add_option("--top-tenants", o.top_tenants,
                 "Tenants keeping their own label in the interference tables; the rest are 'other'")
      ->capture_default_str();
  cmd.add_flag("--isolated", o.isolated, "Also replay each tenant alone in a cache of its own: lost hits per tenant");
  cmd.add_flag("--classes", o.classes,
               "Show the class, interference and footprint sections even when no request has a tenant or class");
}

// --policy and its options.
void AddReplayPolicyFlags(CLI::App& cmd, kvwatch::agent::ReplayOptions& o) {
  cmd.add_option("--policy", o.policies,
                 "Also simulate these eviction policies at every capacity, comma-separated, or all: " + PolicyNames() +
                     " (see docs/replay.md)");
  cmd.add_option("--decode-tokens-per-second", o.decode_tokens_per_s,
                 "sglang and vllm: a request runs for output_length / this after it arrives, holding its pages")
      ->capture_default_str();
  cmd.add_option("--priority", o.priorities,
                 "priority policy: retention priorities tenant:NAME=P,class:NAME=P (higher kept longer; others 0)");
  cmd.add_option("--s3fifo-promotion-hits", o.s3fifo_promotion_hits,
                 "s3fifo: hits a page needs in the small FIFO to move to the main one, 1..3 (libCacheSim: 2)")
      ->capture_default_str();
  cmd.add_option("--threads", o.threads, "Threads for --policy (0: every core)")->capture_default_str();
  cmd.add_option("--dump-references", o.dump_references,
                 "With --policy: also write the page references the policies simulate, in touch order, here as a "
                 "libCacheSim oracleGeneral trace (bench/libcachesim_compare.sh)");
}

void AddReplay(CLI::App& app, kvwatch::agent::ReplayOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "replay",
      "Run the LRU stack-distance engine over request traces (JSON Lines with hash_ids; plain, gzip or - for "
      "stdin) and print the capacity worksheet: page hit ratio and request coverage at every capacity, the "
      "working set for targets, the knee, bytes and tiers.");
  AddReplayCurveFlags(*cmd, o);
  AddReplayBytesFlags(*cmd, o);
  AddReplayReadingFlags(*cmd, o);
  AddReplayTenantFlags(*cmd, o);
  cmd->add_option("--progress", o.progress, "Progress bar on stderr: auto (when a terminal), always, never")
      ->capture_default_str();
  AddReplayPolicyFlags(*cmd, o);
  cmd->callback([&o]() { std::exit(kvwatch::agent::RunReplay(o)); });
}

// The traces, and what is written where.
void AddSimulateOutputFlags(CLI::App& cmd, kvwatch::agent::SimulateOptions& o) {
  cmd.add_option("TRACE", o.traces, "Trace files (JSON Lines with hash_ids, timestamps and lengths; plain, .gz, or -)")
      ->required();
  cmd.add_option("--format", o.format, "Output: table, json or csv")->capture_default_str();
  cmd.add_flag_callback(
      "--json", [&o]() { o.format = "json"; }, "The same as --format json");
  cmd.add_flag_callback(
      "--csv", [&o]() { o.format = "csv"; }, "The same as --format csv");
  cmd.add_option("--svg", o.svg, "Write a plot of SLA attainment and throughput against load here");
  cmd.add_option("--timeline", o.timeline,
                 "With one --load: write a plot over simulated time of each run's KV blocks (held, cached), requests "
                 "finished per second and preemptions here");
  cmd.add_option("--progress", o.progress, "Progress bar on stderr: auto (when a terminal), always, never")
      ->capture_default_str();
}

// The sweep: admission rules x eviction policies x load factors.
void AddSimulateSweepFlags(CLI::App& cmd, kvwatch::agent::SimulateOptions& o) {
  cmd.add_option("--admission", o.admissions,
                 "Admission rules, comma-separated: greedy, reserve-max, reserve-quantile, rate-cap")
      ->capture_default_str();
  cmd.add_option("--policy", o.policies,
                 "Eviction policies of the prefix cache, comma-separated, or all: " + PolicyNames() +
                     " (belady: an oracle over arrival order)")
      ->capture_default_str();
  cmd.add_option("--load", o.loads,
                 "Load factors, comma-separated, each 1e-6 to 1e6: arrival times are divided by each")
      ->delimiter(',')
      ->capture_default_str();
}

// The step time: a GPU's roofline for a model, coefficients given directly, or a
// fit to scraped metrics.
void AddStepTimeFlags(CLI::App& cmd, kvwatch::agent::SimulateOptions& o) {
  cmd.add_option("--gpu", o.gpu, "GPU preset for the roofline and the pool: " + Join(kvwatch::sim::GpuPresetNames()));
  AddModelFlags(cmd, o.model);
  AddComputeFlags(cmd, o.model);
  cmd.add_option("--compute-efficiency", o.compute_efficiency, "Fraction of the dense BF16 peak reached")
      ->capture_default_str();
  cmd.add_option("--memory-efficiency", o.memory_efficiency, "Fraction of the memory bandwidth reached")
      ->capture_default_str();
  cmd.add_option("--allreduce-latency", o.allreduce_latency, "One tensor-parallel all-reduce (2 per layer)")
      ->capture_default_str();
  cmd.add_option("--step-overhead", o.step_overhead, "Fixed scheduling time added to every step")
      ->capture_default_str();
  cmd.add_option("--step-coefficients", o.step_coefficients,
                 "Step time given directly: fixed=..,prefill_token=..,attention_pair=..,decode_sequence=..,"
                 "context_token=.. (seconds, or 10ms, 20us)");
  cmd.add_option("--calibrate", o.calibrate,
                 "Fit the step time to an engine's scraped /metrics text (vLLM or SGLang; at most 64 MiB); repeat for "
                 "scrapes at other loads");
}

// The KV pool and its blocks.
void AddPoolFlags(CLI::App& cmd, kvwatch::agent::SimulateOptions& o) {
  cmd.add_option("--pool-blocks", o.pool_blocks, "KV pool size in blocks per rank, given directly (1 to 4294967294)");
  cmd.add_option("--kv-bytes", o.kv_bytes, "KV pool size in bytes per rank (20GB, 18.5GiB)");
  cmd.add_option("--gpu-memory-utilization", o.gpu_memory_utilization,
                 "With --gpu: the pool is the GPU's memory x this minus the weights per rank (default 0.9)");
  cmd.add_option("--page-tokens", o.page_tokens, "Tokens per trace page (default: inferred from input_length)");
  cmd.add_option("--block-tokens", o.block_tokens, "Tokens per KV block; must divide the page (default: the page)");
}

// The scheduler: the step's budget, the queue, the admission rules' reservations.
void AddSchedulerFlags(CLI::App& cmd, kvwatch::agent::SimulateOptions& o) {
  cmd.add_option("--max-batched-tokens", o.max_batched_tokens, "Token budget per step")->capture_default_str();
  cmd.add_option("--max-running", o.max_running, "Running sequences at most")->capture_default_str();
  cmd.add_option("--queue-timeout", o.queue_timeout, "A request waiting longer is rejected (2s, 500ms, none)")
      ->capture_default_str();
  cmd.add_option("--queue-order", o.queue_order, "Waiting queue order: arrival, tier or priority")
      ->capture_default_str();
  cmd.add_option("--priority", o.priorities,
                 "Priorities tenant:NAME=P,class:NAME=P (higher first): --queue-order priority's order and the "
                 "priority eviction policy's retention levels");
  cmd.add_option("--max-output-tokens", o.max_output_tokens,
                 "reserve-max's output reservation, at most 2^24 (0: the trace's largest)")
      ->capture_default_str();
  cmd.add_option("--reserve-quantile", o.reserve_quantile, "reserve-quantile's output-length quantile of every class")
      ->capture_default_str();
  cmd.add_option("--class-quantile", o.class_quantiles,
                 "reserve-quantile's quantile for named classes: CLASS=Q,CLASS=Q (others: --reserve-quantile)");
}

// The SLA tiers, who is in which, and the attainment a load must reach.
void AddSlaFlags(CLI::App& cmd, kvwatch::agent::SimulateOptions& o) {
  cmd.add_option("--sla-tier", o.tiers,
                 "An SLA tier NAME:ttft=2s,itl=100ms; repeat for each (default: one tier 'all', ttft 2s, itl 100ms)");
  cmd.add_option("--sla-tier-of", o.tier_of,
                 "Who is in which SLA tier: tenant:NAME=TIER,class:NAME=TIER (others: the first)");
  // The old spellings (until 0.1): --tier is replay's cache tier, so simulate's
  // SLA tier is --sla-tier; still read, with a note.
  cmd.add_option_function<std::vector<std::string>>(
         "--tier",
         [&o](const std::vector<std::string>& tiers) {
           std::fprintf(stderr, "kvwatch simulate: --tier is deprecated; use --sla-tier\n");
           o.tiers.insert(o.tiers.end(), tiers.begin(), tiers.end());
         },
         "Deprecated spelling of --sla-tier")
      ->group("Deprecated spellings");
  cmd.add_option_function<std::string>(
         "--tier-of",
         [&o](const std::string& tier_of) {
           std::fprintf(stderr, "kvwatch simulate: --tier-of is deprecated; use --sla-tier-of\n");
           o.tier_of = tier_of;
         },
         "Deprecated spelling of --sla-tier-of")
      ->group("Deprecated spellings");
  cmd.add_option("--sla-target", o.sla_target, "Attainment every tier needs for a load to meet the SLA")
      ->capture_default_str();
}

// How trace records are read (lengths and arrivals when missing, timestamps,
// tenants), and the threads.
void AddSimulateTraceFlags(CLI::App& cmd, kvwatch::agent::SimulateOptions& o) {
  cmd.add_option("--output-tokens", o.output_tokens,
                 "Output length assumed for records without output_length (1 to 2^24)")
      ->capture_default_str();
  cmd.add_option("--rate", o.rate, "Arrival rate assumed when no record has a timestamp, requests/s (1e-6 to 1e9)")
      ->capture_default_str();
  cmd.add_flag("--spread-ties", o.spread_ties,
               "Spread requests sharing a timestamp evenly up to the next one, the last group over the gap before it "
               "(traces rounded to seconds)");
  cmd.add_option("--timestamp-unit", o.timestamp_unit, "Unit of the timestamp field: auto, ms or s")
      ->capture_default_str();
  cmd.add_option("--tenant-field", o.tenant_fields, "Field(s) naming a record's tenant or class");
  cmd.add_flag("--strict", o.strict, "Stop at the first bad line");
  cmd.add_option("--threads", o.threads, "Runs simulated at once (0: every core)")->capture_default_str();
}

void AddSimulate(CLI::App& app, kvwatch::agent::SimulateOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Replay a trace's arrivals through a simulated serving replica (continuous batching, a KV pool shared by "
      "running requests and the prefix cache) for each admission rule x eviction policy x load factor, and score "
      "throughput, TTFT, ITL, SLA attainment per tier, preemptions and rejections (docs/simulate.md).");
  AddSimulateOutputFlags(*cmd, o);
  AddSimulateSweepFlags(*cmd, o);
  AddStepTimeFlags(*cmd, o);
  AddPoolFlags(*cmd, o);
  AddSchedulerFlags(*cmd, o);
  AddSlaFlags(*cmd, o);
  AddSimulateTraceFlags(*cmd, o);
  cmd->callback([&o]() { std::exit(kvwatch::agent::RunSimulate(o)); });
}

void AddSynth(CLI::App& app, kvwatch::agent::SynthCommandOptions& o) {
  kvwatch::collectors::SynthOptions& s = o.synth;
  CLI::App* cmd = app.add_subcommand(
      "synth",
      "Write a synthetic multi-tenant workload as JSON Lines (tenants with shared system prompts, multi-turn "
      "sessions whose chains grow, one-shot requests, Poisson arrivals, an optional shift part-way), readable "
      "by replay and the agent; or, with --shape fixed, requests all alike (one prompt length, output lengths "
      "taken in turn, no shared prefix) for kvwatch simulate.");
  cmd->add_option("-o,--output", o.output, "Where to write, - for standard output")->capture_default_str();
  cmd->add_option("--shape", o.shape,
                  "chat (tenants, sessions, one-shot requests) or fixed (every request alike: --prompt-tokens, "
                  "--output-tokens)")
      ->capture_default_str();
  cmd->add_option("--arrivals", o.arrivals, "poisson, or even (request i at i / rate; --shape fixed only)")
      ->capture_default_str();
  cmd->add_option("--prompt-tokens", o.prompt_tokens, "--shape fixed: prompt tokens of every request (default 512)");
  cmd->add_option("--output-tokens", o.output_tokens,
                  "--shape fixed: output tokens, or several (383,641) taken in turn, request i the (i mod n)-th "
                  "(default 512)")
      ->delimiter(',');
  cmd->add_option("--seed", s.seed, "Seed of the random stream")->capture_default_str();
  cmd->add_option("--rate", s.rate_per_s, "Arrival rate, requests per second (1e-6 to 1e9)")->capture_default_str();
  cmd->add_option("--duration", s.duration_s, "Seconds of traffic, at most 1e10; 0 = no time limit")
      ->capture_default_str();
  cmd->add_option("--requests", s.max_requests, "Stop after this many requests; 0 = no count limit")
      ->capture_default_str();
  cmd->add_option("--tenants", s.tenants, "Tenants, each with its own system prompt")->capture_default_str();
  cmd->add_option("--system-prompt-min-pages", s.system_prompt_min_pages, "Shortest system prompt, pages")
      ->capture_default_str();
  cmd->add_option("--system-prompt-max-pages", s.system_prompt_max_pages, "Longest system prompt, pages")
      ->capture_default_str();
  cmd->add_option("--sessions", s.active_sessions, "Multi-turn sessions open at once")->capture_default_str();
  cmd->add_option("--one-shot-fraction", s.one_shot_fraction, "Fraction of arrivals that are one-shot requests")
      ->capture_default_str();
  cmd->add_option("--mean-turns", s.mean_session_turns, "Mean turns per session")->capture_default_str();
  cmd->add_option("--page-tokens", s.page_tokens, "Tokens per page (for the token counts)")->capture_default_str();
  cmd->add_option("--shift-start", s.shift.start_s, "Start of the workload shift, seconds (off unless end > start)")
      ->capture_default_str();
  cmd->add_option("--shift-end", s.shift.end_s, "End of the workload shift, seconds")->capture_default_str();
  cmd->add_option("--shift-share", s.shift.share, "Fraction of arrivals going to the shift tenant")
      ->capture_default_str();
  cmd->add_option("--shift-system-prompt-pages", s.shift.system_prompt_pages, "The shift tenant's system prompt")
      ->capture_default_str();
  cmd->add_option("--shift-mean-turns", s.shift.mean_session_turns, "Mean turns of the shift tenant's sessions")
      ->capture_default_str();
  cmd->callback([&o]() { std::exit(kvwatch::agent::RunSynth(o)); });
}

void AddAgent(CLI::App& app, kvwatch::agent::AgentFlags& flags) {
  CLI::App* cmd = app.add_subcommand(
      "agent",
      "Run beside a serving replica: ingest its requests (KV events, trace files; with no config, a built-in "
      "synthetic replica) and health signals (engine logs and /metrics), keep windowed curves, raise alerts, "
      "serve /metrics, /api/v1/curve, /api/v1/alerts and a live page. SIGTERM or SIGINT: save the state "
      "(state.path) and exit; SIGHUP: re-read web.config_file (TLS files, basic-auth users, headers). The model "
      "flags override the config's keys of the same names.");
  cmd->add_option("-c,--config", flags.config_path, "YAML config file (see docs/configuration.md)");
  AddModelFlags(*cmd, flags.model, &flags.tensor_parallel_given);
  cmd->callback([&flags]() { std::exit(kvwatch::agent::RunAgent(flags)); });

  CLI::App* check = app.add_subcommand(
      "check-config",
      "Validate an agent config file (with the model flags, as `agent` takes them) as start-up would, "
      "and exit");
  check->add_option("FILE", flags.config_path, "YAML config file")->required();
  AddModelFlags(*check, flags.model, &flags.tensor_parallel_given);
  check->callback([&flags]() { std::exit(kvwatch::agent::RunCheckConfig(flags)); });

  CLI::App* reference = app.add_subcommand("config-reference", "Print the agent config reference (markdown)");
  reference->callback([]() {
    std::fputs(kvwatch::config::ConfigReferenceMarkdown().c_str(), stdout);
    std::exit(0);
  });

  CLI::App* metrics = app.add_subcommand("metrics-reference", "Print the /metrics reference (markdown)");
  metrics->callback([]() {
    std::fputs(kvwatch::agent::MetricsReferenceMarkdown().c_str(), stdout);
    std::exit(0);
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvwatch: the KV-cache working set of an LLM serving replica, as capacity-to-hit-rate curves"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kvwatch ") + kvwatch::Version() + " (" + kvwatch::Revision() + ")");
  kvwatch::agent::ReplayOptions replay;
  AddReplay(app, replay);
  kvwatch::agent::SimulateOptions simulate;
  AddSimulate(app, simulate);
  kvwatch::agent::SynthCommandOptions synth;
  AddSynth(app, synth);
  kvwatch::agent::AgentFlags agent;
  AddAgent(app, agent);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
