// `kvwatch replay`: runs the curve engine offline over request traces and prints
// the capacity worksheet (docs/semantics.md section 7).
//
// Replayer is the computation, fed one request at a time, so tests and benchmarks
// can drive it without files; RunReplay adds reading, progress and output.
//
// Thread safety: a Replayer belongs to one thread at a time. RunReplay runs two
// threads: a reader thread parses (and decompresses) the traces into batches of
// requests, handed through a bounded queue to the calling thread, which runs the
// Replayer; progress and bad-line reports are written by the reader thread only.
#ifndef KVWATCH_AGENT_REPLAY_COMMAND_H_
#define KVWATCH_AGENT_REPLAY_COMMAND_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "agent/cli/page_tokens.h"
#include "agent/cli/replay_hybrid.h"
#include "agent/cli/replay_policies.h"
#include "agent/render/replay_result.h"
#include "base/status.h"
#include "config/model_choice.h"
#include "curve/curve_accumulator.h"
#include "curve/policy_replay.h"
#include "curve/report.h"
#include "curve/request.h"
#include "curve/sampled_engine.h"
#include "curve/sizing.h"
#include "curve/stack_distance.h"
#include "curve/tiers.h"

namespace kvwatch::agent {

struct ReplayOptions {
  std::vector<std::string> traces;        // paths, or "-" for standard input
  std::string format = "table";           // table | json | csv
  std::vector<std::uint64_t> capacities;  // empty: a 1-2-5 series
  double coverage_share = 1.0;
  std::string touch_order = "tail-first";
  // --max-pages: 2^26 (about 3.6 GB at most), not the agent's 2^20: one offline
  // run, over before memory matters, that should be exact on the largest traces
  // (see curve/stack_distance.h for the three defaults).
  std::uint64_t max_pages = 1u << 26;
  // --page-tokens; unset: inferred from the records' input_length and pages
  // (SettlePageTokens), else kDefaultPageTokens.
  std::optional<std::uint64_t> page_tokens;
  std::vector<double> page_hit_targets = curve::kStandardTargets;
  std::vector<double> coverage_targets = curve::kStandardTargets;
  // Bytes per token and the prefill cost: the model flags every command takes
  // (config/model_choice.h).
  config::ModelChoice model;
  std::uint64_t metadata_bytes_per_page = 0;
  double reserve = 0;
  std::optional<double> prefill_flops_per_s;
  std::vector<std::string> tiers;  // NAME:PAGES[:GBPS[:US]]
  std::optional<double> sample_rate;
  std::string svg;
  double knee_sensitivity = 1.0;
  bool strict = false;
  std::string timestamp_unit = "auto";
  std::vector<std::string> tenant_fields;  // empty: the reader's defaults
  bool tenants = true;
  std::string progress = "auto";  // auto | always | never
  // --policy: eviction policies to simulate beside the curve ("" = none).
  std::string policies;
  double decode_tokens_per_s = 50;
  std::string priorities;                   // --priority rules for the priority policy
  unsigned threads = 0;                     // 0: every core
  std::uint32_t s3fifo_promotion_hits = 1;  // --s3fifo-promotion-hits
  // --dump-references: the references --policy simulates, written here as a
  // libCacheSim oracleGeneral trace (agent/cli/reference_dump.h); "" = none.
  std::string dump_references;
  // Tenants and classes (curve/tenants.h; exact mode, unless --no-tenants): on
  // when the first request has a tenant or class label, or with --classes or
  // --isolated; otherwise the plain engine runs and the output is unchanged.
  std::uint32_t top_tenants = 8;  // --top-tenants K
  bool isolated = false;          // --isolated: per-tenant isolated curves
  bool classes = false;           // --classes: show the sections for unlabelled traces too
  // --hybrid-check: with a hybrid model, simulate vLLM's step behaviours at the
  // hybrid working sets beside the one-pass curve (agent/cli/replay_hybrid.h).
  bool hybrid_check = false;
  // --hybrid-pool-shares: with a hybrid model, one pool per KV cache group, each
  // this share of the capacity (SGLang, TensorRT-LLM); empty: one pool (vLLM).
  std::vector<std::uint64_t> hybrid_pool_shares;
};

// Checks the options and resolves the model; the error names the option.
struct ResolvedReplay {
  curve::EngineOptions engine;
  curve::ReportOptions report;
  ReplaySettings settings;
  std::vector<curve::TierSpec> tiers;
  curve::CapacityPlanOptions plan;
  // Set when --policy was given; capacities are filled in by the replayer when
  // --capacities was not given (the report's 1-2-5 points).
  std::optional<PolicyReplayOptions> policies;
  // Tenants and classes: on in exact mode unless --no-tenants.
  bool groups = false;
  bool show_groups = false;  // --classes
  std::uint32_t top_tenants = 8;
  bool isolated = false;
  // Capacities of the interference numbers: --capacities, else 10, 100, ... up to --max-pages.
  std::vector<std::uint64_t> group_capacities;
  curve::LifetimeOptions lifetime;  // running KV from --decode-tokens-per-second
  // A model with KV cache groups (sliding-window, chunked-local or linear
  // layers): the hybrid curve runs beside the main one (agent/cli/replay_hybrid.h).
  std::optional<curve::ModelSpec> hybrid_model;
  bool hybrid_check = false;
  std::vector<std::uint64_t> hybrid_pool_shares;  // checked against the model's groups
};
base::Result<ResolvedReplay> ResolveReplayOptions(const ReplayOptions& options);

// Tokens per page when neither --page-tokens nor the records say: vLLM's default block.
inline constexpr std::uint64_t kDefaultPageTokens = 16;

// Settles the page size before the first request is replayed, from `sample` (the
// first records read): --page-tokens when given, else the size most of the
// sample's records fit (InferPageTokens), else kDefaultPageTokens. Records
// the inferred size in settings either way, so the whole run can be checked
// against it.
void SettlePageTokens(ResolvedReplay* resolved, std::span<const TokenPages> sample);

class Replayer {
 public:
  explicit Replayer(const ResolvedReplay& resolved);
  ~Replayer();

  void Add(const curve::Request& request) { Add(request, request.pages); }
  // The same with the request's pages given apart (request.pages is ignored), for
  // callers that keep pages in a flat buffer.
  void Add(const curve::Request& request, std::span<const curve::PageId> pages);
  // A hint that a request with these pages comes next (no effect on results).
  void Prefetch(std::span<const curve::PageId> pages) const {
    if (exact_) exact_->Prefetch(pages);
  }
  // The result so far (input statistics are the caller's).
  ReplayResult Result() const;

  const curve::CurveAccumulator& total() const { return total_; }
  // --policy: every request kept for the policies' simulations; nullptr without.
  curve::StoredTrace* stored_trace() { return stored_.get(); }
  // In sampled mode, acc corrected for the sample's size (SHARDS-adj); else acc.
  curve::CurveAccumulator Adjusted(const curve::CurveAccumulator& acc, std::uint64_t page_refs) const;

 private:
  // BuildCurveReport of Adjusted(acc, page_refs), without copying acc when exact.
  curve::CurveReport Report(const curve::CurveAccumulator& acc, std::uint64_t page_refs) const;
  curve::CurveReport Report(const curve::CurveAccumulator& acc, std::uint64_t page_refs,
                            const curve::ReportOptions& options) const;
  // A tenant's or a class's report: Report of its curve, without the plot samples.
  curve::CurveReport GroupReport(const curve::CompactCurveAccumulator& acc, std::uint64_t page_refs) const;
  // The tenant and class sections of Result (groups_ set).
  ReplayGroups GroupsResult() const;

  ResolvedReplay resolved_;
  std::unique_ptr<curve::StackDistanceEngine> exact_;
  std::unique_ptr<curve::SampledEngine> sampled_;
  curve::RequestOutcome outcome_;
  curve::CurveAccumulator total_;
  std::uint64_t requests_ = 0;
  std::uint64_t page_refs_ = 0;  // all references, sampled or not
  struct Tenant {
    curve::CompactCurveAccumulator acc;  // compact: a trace may have a tenant per user
    std::uint64_t page_refs = 0;
  };
  std::map<std::string, Tenant> tenants_;  // by label (curve::SanitizeLabel), "none" included
  bool any_tenant_ = false;                // some request had a tenant: tenants_ is reported
  std::string last_tenant_name_;           // the last request's raw tenant and its entry
  Tenant* last_tenant_ = nullptr;
  std::unique_ptr<curve::TierAccumulator> tiers_;
  std::unique_ptr<HybridReplay> hybrid_;  // a model with KV cache groups only
  // --policy: every request kept, with its class and unlimited hits.
  std::unique_ptr<curve::StoredTrace> stored_;
  curve::RequestClassifier classifier_;
  // The records' token counts against the page size in use (and the inferred one).
  PageTokensCheck page_tokens_check_;
  // --policy with pages given apart: the request rebuilt for the stored trace.
  curve::Request stored_request_;
  // Tenants and classes (curve/tenants.h), defined in replay_command.cc.
  struct Groups;
  std::unique_ptr<Groups> groups_;

  void EnableGroups();
  // The per-request work after the engine: totals, tenants, tiers, --policy.
  void AddOutcome(const curve::Request& request, std::span<const curve::PageId> pages, Tenant* tenant);
  // The engine with tenant and class groups, then AddOutcome and the group numbers.
  void AddGroups(const curve::Request& request, std::span<const curve::PageId> pages, Tenant* tenant);
};

// Runs the whole command; returns the process exit code (0 ok, 1 bad input in
// strict mode or unreadable trace, 2 bad options).
int RunReplay(const ReplayOptions& options);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_REPLAY_COMMAND_H_
