// Offline policy simulation over a stored trace: what `kvwatch replay --policy`
// runs, one (policy, capacity) at a time, and the request facts every policy
// needs (class, lifetime, priority, next use) derived once from the trace.
//
// Request classes: the record's own class when the caller has one, otherwise
// derived from the stream by RequestClassifier (below). Tenants: the record's
// tenant label ("" = none).
//
// Thread safety: a StoredTrace is read-only once built; RunPolicy may run on
// several threads at once over the same trace.
#ifndef KVWATCH_CURVE_POLICY_REPLAY_H_
#define KVWATCH_CURVE_POLICY_REPLAY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "curve/page_map.h"
#include "curve/policy.h"
#include "curve/request.h"

namespace kvwatch::curve {

// Derived request classes, from the page stream alone (docs/tenants.md, "Class").
//
// A request continues an earlier request R when its pages extend R's FULL pages
// and R's last full page was new when R arrived (R added content of its own, not
// only a prefix it shared with earlier requests, such as a system prompt); its
// turn is R's turn + 1. Any other request is turn 1: it starts a new chain. Turns
// are bucketed: "first", "turn2", "turn3-4", "turn5-8", "turn9+".
//
// Full pages: sources that hash only full pages (vLLM's KV events, the
// coding-agent trace: n = floor(L / P) pages for L prompt tokens) list nothing
// else; sources that hash the partial last page too (the Mooncake traces:
// n = ceil(L / P)) end with a page holding the prompt's last L - (n-1)P < P
// tokens, whose id the next turn never repeats (its page n carries more tokens).
// FullPages() tells them apart per request from its token count: the last page
// is partial exactly when (n-1)P < L < nP. Without a token count every page is
// taken as full (the rule of full-page sources).
//
// Why R must have added its last full page: a chain end that is only a shared
// prefix (a system prompt, or the Mooncake traces' first block, which every
// request starts with) would make every later request sharing it a
// continuation. Whether it was new is the stack engine's view: the request's
// unlimited hits T (the pages before its first never-seen page) is below its
// full pages exactly when its last full page was new.
inline constexpr std::string_view kDerivedClasses[] = {"first", "turn2", "turn3-4", "turn5-8", "turn9+"};

class RequestClassifier {
 public:
  // The request's turn (1 for "first") from the chains remembered so far. The
  // turn of the deepest of its pages that ends a remembered chain, plus one.
  // Cost: one hash lookup per page, from the last, until one matches.
  std::uint32_t Turn(std::span<const PageId> pages) const;
  // Remembers the request, whose Turn() was `turn`, as the end of its chain: its
  // last full page (pages[full_pages - 1]) gets `turn` when it already ends a
  // chain, or when seen_prefix (the engine's unlimited hits for the request;
  // 0 when unknown) is below full_pages. Nothing when full_pages is 0.
  void Remember(std::span<const PageId> pages, std::uint32_t turn, std::size_t full_pages, std::uint32_t seen_prefix);
  // Turn() then Remember(): for callers that have the engine's outcome first.
  std::uint32_t Observe(std::span<const PageId> pages, std::size_t full_pages, std::uint32_t seen_prefix) {
    const std::uint32_t turn = Turn(pages);
    Remember(pages, turn, full_pages, seen_prefix);
    return turn;
  }
  // The full pages of a prompt of `pages` pages and input_tokens tokens (-1:
  // unknown) at page_tokens tokens a page: pages - 1 when the last page is
  // partial ((pages-1) * page_tokens < input_tokens < pages * page_tokens),
  // else pages.
  static std::size_t FullPages(std::size_t pages, std::int64_t input_tokens, std::uint64_t page_tokens);
  // Its bucketed class name, one of kDerivedClasses.
  static std::string_view ClassOfTurn(std::uint32_t turn);
  std::size_t MemoryBytes() const { return turns_.MemoryBytes(); }
  // Forgets every chain (bounded memory for long-running use).
  void Clear() { turns_ = PageMap(); }
  std::size_t size() const { return turns_.size(); }

  // Checkpoint encoding (appends / consumes): every chain end with its turn.
  // Deserialize is false when truncated, when a page is listed twice or a turn is 0,
  // or with more than max_chains chains. REQUIRES: the classifier is empty.
  void Serialize(std::vector<std::uint8_t>* out) const;
  bool Deserialize(std::span<const std::uint8_t>* in, std::size_t max_chains);

 private:
  PageMap turns_;  // last full page of an earlier prompt -> its request's turn
};

// Request lifetimes for sglang and vllm: end = the record's end_timestamp when it
// has one, else arrival + output tokens / decode rate (prefill time is not
// modelled); generated pages = the pages of prompt plus output minus the prompt's
// pages, at page_tokens tokens a page.
struct LifetimeOptions {
  double decode_tokens_per_s = 50;  // `--decode-tokens-per-second`
  std::uint64_t page_tokens = 16;
};
// Fills arrival_s (= arrival_s), end_s and output_pages of `sim` from the
// request's token counts. arrival_s may be NaN (no clock: lifetimes are zero).
void ApplyLifetime(const Request& request, double arrival_s, const LifetimeOptions& options, SimRequest* sim);

// Retention priorities: "tenant:NAME=P", "class:NAME=P" or "NAME=P" (a tenant),
// comma-separated; P an integer, higher kept longer; everything else has priority 0.
// A request's priority is its tenant's when given, else its class's, else 0.
struct PriorityRules {
  std::map<std::string, std::int32_t, std::less<>> tenant;
  std::map<std::string, std::int32_t, std::less<>> cls;
  bool empty() const { return tenant.empty() && cls.empty(); }
  std::int32_t For(std::string_view tenant_name, std::string_view class_name) const;

  bool operator==(const PriorityRules&) const = default;
};
base::Result<PriorityRules> ParsePriorityRules(std::string_view text);

// The counts of a set of requests under one policy at one capacity.
struct PolicyTotals {
  std::uint64_t requests = 0;
  std::uint64_t page_refs = 0;
  std::uint64_t page_hits = 0;
  // Requests that kept at least the coverage share of their unlimited hits (the
  // curve's request coverage, docs/semantics.md section 3).
  std::uint64_t covered_requests = 0;
  std::uint64_t preemptions = 0;  // vllm: preempted requests; sglang: not admitted whole

  double PageHitRatio() const {
    return page_refs == 0 ? 0 : static_cast<double>(page_hits) / static_cast<double>(page_refs);
  }
  double RequestCoverage() const {
    return requests == 0 ? 1 : static_cast<double>(covered_requests) / static_cast<double>(requests);
  }
  // Adds one request's outcome. unlimited_hits is the request's T (the stack
  // engine's unlimited hits).
  void Add(std::size_t pages, const SimOutcome& outcome, std::uint32_t unlimited_hits, double coverage_share);
  void Merge(const PolicyTotals& other);
};

// A whole trace in memory, in arrival order, with what the policies need.
class StoredTrace {
 public:
  // Appends a request. class_name: its class (the record's, or derived).
  // unlimited_hits: its T from the exact stack engine.
  void Add(const Request& request, std::string_view class_name, std::uint32_t unlimited_hits,
           const LifetimeOptions& lifetime);
  // Sets every request's priority; an error naming the tenant or class of a rule
  // that no request has.
  base::Status AssignPriorities(const PriorityRules& rules);
  // Computes each reference's next use, for belady.
  void ComputeNextUse(TouchOrder order);

  std::size_t size() const { return unlimited_hits_.size(); }
  std::uint64_t page_refs() const { return pages_.size(); }
  SimRequest At(std::size_t i) const;
  std::uint32_t tenant(std::size_t i) const { return tenant_[i]; }
  std::uint32_t cls(std::size_t i) const { return class_[i]; }
  std::uint32_t unlimited_hits(std::size_t i) const { return unlimited_hits_[i]; }
  // Index 0 of tenant_names() is "" (no tenant).
  const std::vector<std::string>& tenant_names() const { return tenant_names_; }
  const std::vector<std::string>& class_names() const { return class_names_; }

 private:
  static std::uint32_t Intern(std::string_view name, std::vector<std::string>* names,
                              std::map<std::string, std::uint32_t, std::less<>>* ids);

  std::vector<PageId> pages_;
  std::vector<std::uint64_t> offsets_{0};
  std::vector<double> arrival_;
  std::vector<double> end_;
  std::vector<std::uint32_t> output_pages_;
  std::vector<std::uint32_t> tenant_;
  std::vector<std::uint32_t> class_;
  std::vector<std::uint32_t> unlimited_hits_;
  std::vector<std::int32_t> priority_;
  std::vector<std::uint64_t> next_use_;  // per reference, in page order; empty until computed
  std::vector<std::string> tenant_names_{""};
  std::map<std::string, std::uint32_t, std::less<>> tenant_ids_{{"", 0}};
  std::vector<std::string> class_names_;
  std::map<std::string, std::uint32_t, std::less<>> class_ids_;
};

struct PolicyRunResult {
  PolicyKind kind = PolicyKind::kLru;
  std::uint64_t capacity = 0;
  PolicyTotals total;
  std::vector<PolicyTotals> by_tenant;  // indexed like StoredTrace::tenant_names()
  std::vector<PolicyTotals> by_class;   // indexed like StoredTrace::class_names()
  std::size_t memory_bytes = 0;         // the simulation's, at the end
};

// Runs one policy at one capacity over the whole trace. progress(requests done)
// is called every 65,536 requests when set. An error names the bad option.
// REQUIRES for belady: trace.ComputeNextUse was called with options.touch_order.
base::Result<PolicyRunResult> RunPolicy(const StoredTrace& trace, const PolicyOptions& options, double coverage_share,
                                        const std::function<void(std::uint64_t)>& progress = {});

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_POLICY_REPLAY_H_
