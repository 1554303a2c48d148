// `kvwatch simulate`'s result and its renderings: the table (for people), JSON
// (the contract in docs/simulate.md), CSV (one row per run) and the SVG of SLA
// attainment and throughput against load. The runs come from sim::SimulateReplica
// (agent/cli/simulate_command.cc); nothing here simulates. The timeline SVG plots
// a run's steps over simulated time.
//
// Thread safety: pure functions over values.
#ifndef KVWATCH_AGENT_RENDER_SIMULATE_OUTPUT_H_
#define KVWATCH_AGENT_RENDER_SIMULATE_OUTPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/step_time.h"
#include "sim/summary.h"

namespace kvwatch::agent {

// What the run was set up with, each figure with where it came from.
struct SimulateSettings {
  std::vector<std::string> sources;  // trace paths
  std::uint64_t requests = 0;        // requests read
  double trace_span_s = 0;           // first to last arrival at load 1
  // The time model: "roofline", "coefficients" or "calibrated", a sentence saying
  // how, and the coefficients every run used.
  std::string time_model;
  std::string time_model_detail;
  sim::LinearStepCoefficients coefficients;
  // The KV pool per rank and how it was derived (a sentence with the numbers).
  std::uint64_t pool_blocks = 0;
  std::uint32_t block_tokens = 0;
  std::string pool_source;  // "option", "kv-bytes" or "gpu-memory"
  std::string pool_detail;
  std::optional<double> kv_bytes_per_token;  // per rank, when a model is known
  std::uint64_t page_tokens = 0;             // tokens per trace page
  std::string page_tokens_source;            // "option", "inferred" or "default"
  // The scheduler.
  std::uint32_t max_batched_tokens = 0;
  std::uint32_t max_running = 0;
  double queue_timeout_s = 0;  // infinity: none
  std::string queue_order;
  // The tiers and the SLA rule: a combination meets the SLA at a load when every
  // tier's attainment is >= sla_target.
  std::vector<sim::TierTarget> tiers;
  std::vector<std::string> tier_members;  // per tier: who belongs ("every request", "tenant a, class b")
  double sla_target = 0.9;
  // What the trace lacked and what was assumed instead, one sentence each.
  std::vector<std::string> assumptions;
};

struct SimulateRun {
  std::string admission;
  std::string policy;
  double load = 1;
  sim::SimSummary summary;
  // Every tier's attainment >= the SLA target.
  bool meets_sla = false;
};

// Per admission x policy: the highest load of the sweep up to which every load
// meets the SLA (nullopt: not even the lowest), and the first load that does not
// (nullopt: every load meets it).
struct SimulateCombination {
  std::string admission;
  std::string policy;
  std::optional<double> max_load_meeting_sla;
  std::optional<double> first_load_failing_sla;
};

// One step of a run as the timeline plot needs it (from sim::StepRecord).
struct TimelineStep {
  double start_s = 0;
  double seconds = 0;
  std::uint64_t held_blocks = 0;    // held by running requests after the step's scheduling
  std::uint64_t cached_blocks = 0;  // free blocks with a page (the prefix cache)
  std::uint32_t finished = 0;
  std::uint32_t preempted = 0;
};

// Every step of one run (--timeline): same order as SimulateResult::runs.
struct SimulateTimeline {
  std::string admission;
  std::string policy;
  double load = 1;
  std::vector<TimelineStep> steps;
};

struct SimulateResult {
  SimulateSettings settings;
  std::vector<SimulateRun> runs;  // admission-major, then policy, then load ascending
  std::vector<SimulateCombination> combinations;
  std::vector<SimulateTimeline> timelines;  // one per run with --timeline, else empty
};

// Fills meets_sla of every run and the combinations from the runs (runs of one
// admission x policy are found by name; loads in any order).
void ScoreSla(SimulateResult* result);

std::string FormatSimulateTable(const SimulateResult& r);
std::string FormatSimulateJson(const SimulateResult& r);
std::string FormatSimulateCsv(const SimulateResult& r);
// Two panels against load: the lowest tier attainment (with the target) and output
// tokens per second; one line per admission x policy.
std::string RenderSimulateSvg(const SimulateResult& r);
// Over simulated time, one row per run of r.timelines: the KV blocks held by
// running requests and by the cache (mean per time bin, the pool as the top), the
// requests finished per second and the preemptions per bin. Each row is a <g> with
// data-admission, data-policy, data-load, data-steps, data-finished and
// data-preemptions (the steps' sums) and data-bursts (runs of preempting steps, a
// new one after 50 steps without, as tests/sim/paper_test.cc counts them)
// attributes; its title gives the run's summary.
std::string RenderTimelineSvg(const SimulateResult& r);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RENDER_SIMULATE_OUTPUT_H_
