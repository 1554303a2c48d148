// `kvwatch simulate`: replays a trace's arrivals through a simulated serving
// replica (sim/replica.h) for each admission rule x eviction policy x load factor
// and scores every run against SLA tiers (docs/simulate.md).
//
// Setup (simulate_setup.cc) turns the flags into a SimulateSetup: the step-time
// model (roofline from --gpu and a model, --step-coefficients, or --calibrate),
// the tiers and who belongs to them, the sweep; the KV pool is settled once the
// trace's page size is known (SettleSimulatePool). RunSimulate reads the trace,
// builds the replica's requests (BuildReplicaRequests), runs the sweep on
// --threads threads and prints the result (agent/render/simulate_output.h).
//
// Thread safety: the functions are reentrant; RunSimulate runs the sweep's runs on
// worker threads, each on its own copy of the options and a shared read-only
// request list and time model.
#ifndef KVWATCH_AGENT_CLI_SIMULATE_COMMAND_H_
#define KVWATCH_AGENT_CLI_SIMULATE_COMMAND_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/render/simulate_output.h"
#include "base/status.h"
#include "config/model_choice.h"
#include "curve/policy.h"
#include "curve/policy_replay.h"
#include "curve/request.h"
#include "curve/sizing.h"
#include "sim/replica.h"
#include "sim/time_model.h"

namespace kvwatch::agent {

// Limits on what a trace record and the flags may say, beyond which a record is
// left out (and counted on an assumed: line) or a flag refused:
// a timestamp within +-1e11 s of 1970 (over 3,000 years; Unix seconds,
// milliseconds and relative traces all fall well inside);
inline constexpr double kMaxTraceSeconds = 1e11;
// an output of at most 2^24 tokens (16,777,216; far beyond any model's context);
inline constexpr std::uint32_t kMaxOutputTokens = std::uint32_t{1} << 24;
// a load factor in [1e-6, 1e6] (scaled arrival times stay finite);
inline constexpr double kMinLoad = 1e-6;
inline constexpr double kMaxLoad = 1e6;
// a pool of at most 2^32 - 2 blocks (the replica's block ids are 32 bits).
inline constexpr std::uint64_t kMaxPoolBlocks = 4294967294u;

struct SimulateOptions {
  std::vector<std::string> traces;  // paths, or "-" for standard input
  std::string format = "table";     // table | json | csv
  std::string svg;                  // write the plot here
  std::string timeline;             // write the timeline plot here (one load only)
  std::string progress = "auto";    // auto | always | never
  std::string timestamp_unit = "auto";
  std::vector<std::string> tenant_fields;
  bool strict = false;
  unsigned threads = 0;  // 0: every core

  // The sweep.
  std::string admissions = "greedy,reserve-quantile,rate-cap";
  std::string policies = "lru,vllm,s3fifo";
  std::vector<double> loads = {0.5, 1, 1.5, 2, 3};

  // The model (the flags every command takes: config/model_choice.h; a
  // config.json needs --parameters for the roofline) and the GPU.
  config::ModelChoice model;
  std::string gpu;
  double compute_efficiency = sim::kDefaultComputeEfficiency;
  double memory_efficiency = sim::kDefaultMemoryEfficiency;
  std::string allreduce_latency = "10us";
  std::string step_overhead = "0";
  // Or the coefficients given, or fitted from /metrics scrapes.
  std::string step_coefficients;
  std::vector<std::string> calibrate;

  // The KV pool per rank: blocks given, bytes given, or from the GPU's memory.
  std::optional<std::uint64_t> pool_blocks;
  std::string kv_bytes;                          // a size (base/quantity_text.h): "20GB", "18.5GiB", or bytes
  std::optional<double> gpu_memory_utilization;  // default 0.9 when the pool comes from the GPU
  std::optional<std::uint64_t> page_tokens;      // tokens per trace page (default: inferred)
  std::optional<std::uint32_t> block_tokens;     // tokens per KV block (default: the page size)

  // The scheduler.
  std::uint32_t max_batched_tokens = 8192;
  std::uint32_t max_running = 256;
  std::string queue_timeout = "none";
  std::string queue_order = "arrival";  // arrival | tier | priority
  std::string priorities;               // tenant:NAME=P,class:NAME=P
  std::uint32_t max_output_tokens = 0;  // reserve-max; 0: the trace's largest
  double reserve_quantile = 0.9;
  // reserve-quantile's q for named classes: CLASS=Q,CLASS=Q (others: reserve_quantile).
  std::string class_quantiles;

  // Tiers: NAME:ttft=2s,itl=100ms (repeatable), and who belongs to which.
  std::vector<std::string> tiers;
  std::string tier_of;  // tenant:NAME=TIER,class:NAME=TIER,NAME=TIER (a tenant)
  double sla_target = 0.9;

  // What is assumed where the trace says nothing.
  std::uint32_t output_tokens = 128;  // a record without output_length
  double rate = 1;                    // requests per second, when records have no timestamp
  // Requests sharing a timestamp (a trace rounded to seconds) spread evenly up to
  // the next timestamp instead of arriving at once.
  bool spread_ties = false;
};

// Who belongs to which tier: by tenant first, then by class; else tier 0.
struct TierMap {
  std::map<std::string, std::uint32_t, std::less<>> tenant, cls;
  std::uint32_t For(std::string_view tenant_name, std::string_view class_name) const;
};

struct SimulateSetup {
  std::vector<sim::Admission> admissions;
  std::vector<curve::PolicyKind> policies;
  std::vector<double> loads;  // ascending, distinct
  sim::LinearStepCoefficients coefficients;
  std::optional<curve::ModelSpec> model;
  std::optional<sim::GpuSpec> gpu;
  int tensor_parallel = 1;
  sim::ReplicaOptions replica;  // everything but eviction and admission (per run)
  TierMap tier_map;
  curve::PriorityRules priorities;
  std::map<std::string, double, std::less<>> class_quantiles;  // --class-quantile, by class name
  SimulateSettings settings;
  // For the pool, settled after the trace is read.
  std::optional<std::uint64_t> pool_blocks;
  std::optional<double> kv_bytes;
  double gpu_memory_utilization = 0.9;
  bool gpu_memory_utilization_given = false;
  std::optional<std::uint64_t> page_tokens;
  std::optional<std::uint32_t> block_tokens;
  std::uint32_t output_tokens = 128;
  double rate = 1;
  bool spread_ties = false;
};

// Checks the flags and builds everything but the pool. Errors name the flag.
base::Result<SimulateSetup> ResolveSimulateOptions(const SimulateOptions& options);

// Settles the page size (given, else `inferred`, else 16) and the block size, and
// the pool (blocks given; --kv-bytes over the model's bytes per token per rank;
// or the GPU's memory x utilization minus the weights per rank). Errors name the flag.
base::Status SettleSimulatePool(SimulateSetup* setup, std::optional<std::uint64_t> inferred_page_tokens);

// The replica's requests from the trace's at load 1 (arrivals relative to the
// first); fills setup->settings.assumptions and requests/trace_span_s. Pages are
// split into page_tokens / block_tokens blocks when the blocks are smaller.
// Errors: a request without pages, a prompt beyond 2^32 tokens.
base::Result<std::vector<sim::ReplicaRequest>> BuildReplicaRequests(const std::vector<curve::Request>& trace,
                                                                    SimulateSetup* setup);

// Runs the whole command; returns the exit code (0 ok, 1 bad or unreadable input,
// 2 bad flags).
int RunSimulate(const SimulateOptions& options);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_CLI_SIMULATE_COMMAND_H_
