#include "agent/cli/replay_command.h"

#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "agent/cli/progress.h"
#include "agent/cli/reference_dump.h"
#include "agent/cli/request_batches.h"
#include "agent/render/replay_svg.h"
#include "collectors/trace_reader.h"
#include "config/model_choice.h"
#include "curve/tenants.h"
#include "curve/tiers.h"

namespace kvwatch::agent {

using base::Result;

namespace {

using base::Status;

Status OptionError(const std::string& option, const std::string& message) {
  return Status::Error(option + ": " + message);
}

bool ValidFraction(double f) { return std::isfinite(f) && f > 0 && f <= 1; }

// --format and --progress.
Status CheckOutput(const ReplayOptions& o) {
  if (o.format != "table" && o.format != "json" && o.format != "csv") {
    return OptionError("--format", "expected table, json or csv, got '" + o.format + "'");
  }
  if (o.progress != "auto" && o.progress != "always" && o.progress != "never") {
    return OptionError("--progress", "expected auto, always or never");
  }
  return Status::Ok();
}

// The engine: what a hit is (--coverage-share, --touch-order), how much it
// tracks (--max-pages) and whether it samples (--sample-rate); --page-tokens'
// range.
Status ResolveEngine(const ReplayOptions& o, ResolvedReplay* r) {
  if (!ValidFraction(o.coverage_share)) {
    return OptionError("--coverage-share", "must be in (0, 1], got " + std::to_string(o.coverage_share));
  }
  if (o.touch_order == "tail-first") {
    r->engine.touch_order = curve::TouchOrder::kTailFirst;
  } else if (o.touch_order == "head-first") {
    r->engine.touch_order = curve::TouchOrder::kHeadFirst;
  } else {
    return OptionError("--touch-order", "expected tail-first or head-first, got '" + o.touch_order + "'");
  }
  if (o.max_pages < 1 || o.max_pages >= curve::kBeyondTracked) {
    return OptionError("--max-pages", "must be between 1 and " + std::to_string(curve::kBeyondTracked - 1));
  }
  r->engine.max_pages = static_cast<std::uint32_t>(o.max_pages);
  r->engine.remembered_evictions = 0;  // offline: tell beyond-tracked from cold exactly
  // Trace formats number a request's pages consecutively (the weka and Mooncake
  // traces): the map's runs layout puts neighbouring ids in one or two cache
  // lines, a quarter less CPU on the weka trace, and probes hashed ids as the
  // mixed layout does (docs/performance.md, "The page map's layout").
  r->engine.page_layout = curve::PageMapLayout::kRuns;
  if (o.page_tokens && (*o.page_tokens < 1 || *o.page_tokens > kMaxPageTokens)) {
    return OptionError("--page-tokens", "must be between 1 and " + std::to_string(kMaxPageTokens));
  }
  if (o.sample_rate && !ValidFraction(*o.sample_rate)) return OptionError("--sample-rate", "must be in (0, 1]");
  if (o.sample_rate && *o.sample_rate < 1) {
    r->report.count_scale = 1.0 / *o.sample_rate;
    r->report.sampled = true;
  }
  return Status::Ok();
}

// The model flags (config/model_choice.h): bytes per token, the prefill cost, a
// hybrid model's KV cache groups, --hybrid-check and --prefill-flops-per-second.
Status ResolveModelSizing(const ReplayOptions& o, std::uint64_t page_tokens, ResolvedReplay* r) {
  if (o.prefill_flops_per_s && !(*o.prefill_flops_per_s > 0)) {
    return OptionError("--prefill-flops-per-second", "must be > 0");
  }
  auto model = config::ResolveModel(o.model, config::kModelFlags);
  if (!model.ok()) return Status::Error(model.error());
  const config::ResolvedModel& m = model.value();
  r->settings.tensor_parallel = static_cast<std::uint32_t>(m.tensor_parallel);
  r->report.bytes_per_token = m.bytes_per_token;
  if (m.spec) {
    r->settings.model = m.spec->name;
    auto cost = curve::PrefillCostForModel(*m.spec);
    if (cost.ok()) r->report.prefill_cost = cost.value();
    if (!m.spec->groups.empty()) {
      // Checked now with the page size given or the default; sized again once
      // the page size is settled (only the page bytes depend on it).
      auto groups = curve::SizeKvGroups(*m.spec, m.tensor_parallel, page_tokens);
      if (!groups.ok()) return OptionError(m.spec_source, groups.error());
      r->hybrid_model = m.spec;
    }
  }
  if (o.hybrid_check && !r->hybrid_model) {
    return OptionError("--hybrid-check", "needs a hybrid model (--model or --model-config with KV cache groups)");
  }
  r->hybrid_check = o.hybrid_check;
  if (!o.hybrid_pool_shares.empty()) {
    if (!r->hybrid_model) {
      return OptionError("--hybrid-pool-shares",
                         "needs a hybrid model (--model or --model-config with KV cache groups)");
    }
    if (o.hybrid_check) {
      return OptionError("--hybrid-pool-shares", "cannot go with --hybrid-check, which simulates vLLM's one pool");
    }
    if (base::Status s = curve::ValidatePoolShares(o.hybrid_pool_shares, r->hybrid_model->groups.size()); !s.ok()) {
      return OptionError("--hybrid-pool-shares", s.error());
    }
    r->hybrid_pool_shares = o.hybrid_pool_shares;
  }
  if (o.prefill_flops_per_s && !r->report.prefill_cost) {
    return OptionError("--prefill-flops-per-second",
                       "needs a model with a parameter count (--model, or --model-config with --parameters)");
  }
  return Status::Ok();
}

// The worksheet: targets, the knee, the capacity plan, the tiers, the capacities.
Status ResolveReport(const ReplayOptions& o, std::uint64_t page_tokens, ResolvedReplay* r) {
  for (double f : o.page_hit_targets) {
    if (!ValidFraction(f)) return OptionError("--page-hit-targets", "each target must be in (0, 1]");
  }
  for (double f : o.coverage_targets) {
    if (!ValidFraction(f)) return OptionError("--coverage-targets", "each target must be in (0, 1]");
  }
  if (!(o.knee_sensitivity > 0) || !std::isfinite(o.knee_sensitivity)) {
    return OptionError("--knee-sensitivity", "must be a number > 0");
  }
  if (o.reserve < 0 || o.reserve > 1 || !std::isfinite(o.reserve)) {
    return OptionError("--reserve", "must be a fraction in [0, 1]");
  }
  for (const std::string& text : o.tiers) {
    auto tier = curve::ParseTierSpec(text);
    if (!tier.ok()) return OptionError("--tier", tier.error());
    r->tiers.push_back(tier.value());
  }
  r->plan.metadata_bytes_per_page = o.metadata_bytes_per_page;
  r->plan.reserve_fraction = o.reserve;
  // Every entry, before anything uses them: a whole number of pages from 1 to 2^53
  // (the tiers' limit; a policy simulates at most kBeyondTracked - 1 pages).
  const std::uint64_t most_capacity =
      o.policies.empty() ? static_cast<std::uint64_t>(curve::kMaxTierCapacityPages) : curve::kBeyondTracked - 1;
  for (std::size_t i = 0; i < o.capacities.size(); ++i) {
    const std::uint64_t c = o.capacities[i];
    if (c < 1 || c > most_capacity) {
      return OptionError("--capacities", "entry " + std::to_string(i + 1) + " is " + std::to_string(c) +
                                             ": each capacity must be from 1 to " + std::to_string(most_capacity) +
                                             " pages" + (o.policies.empty() ? "" : " with --policy"));
    }
  }
  r->report.capacities = o.capacities;
  std::sort(r->report.capacities.begin(), r->report.capacities.end());
  r->report.capacities.erase(std::unique(r->report.capacities.begin(), r->report.capacities.end()),
                             r->report.capacities.end());
  r->report.page_hit_targets = o.page_hit_targets;
  r->report.coverage_targets = o.coverage_targets;
  r->report.page_tokens = page_tokens;
  r->report.prefill_flops_per_s = o.prefill_flops_per_s;
  r->report.knee_sensitivity = o.knee_sensitivity;
  return Status::Ok();
}

// --policy and what only it reads (--decode-tokens-per-second, --priority,
// --s3fifo-promotion-hits, --threads).
Status ResolvePolicies(const ReplayOptions& o, std::uint64_t page_tokens, ResolvedReplay* r) {
  if (o.policies.empty()) {
    if (!o.priorities.empty()) return OptionError("--priority", "applies to --policy priority");
    if (!o.dump_references.empty()) {
      return OptionError("--dump-references", "writes the references --policy simulates: give --policy");
    }
    return Status::Ok();
  }
  auto kinds = curve::ParsePolicyList(o.policies);
  if (!kinds.ok()) return OptionError("--policy", kinds.error());
  if (r->report.sampled) return OptionError("--policy", "simulates every page exactly; drop --sample-rate");
  if (!(o.decode_tokens_per_s > 0) || !std::isfinite(o.decode_tokens_per_s)) {
    return OptionError("--decode-tokens-per-second", "must be a number > 0");
  }
  auto rules = curve::ParsePriorityRules(o.priorities);
  if (!rules.ok()) return OptionError("--priority", rules.error());
  if (o.s3fifo_promotion_hits < 1 || o.s3fifo_promotion_hits > curve::kMaxS3FifoPromotionHits) {
    return OptionError("--s3fifo-promotion-hits", "must be in 1.." + std::to_string(curve::kMaxS3FifoPromotionHits));
  }
  PolicyReplayOptions p;
  p.policies = kinds.value();
  p.capacities = r->report.capacities;
  p.touch_order = r->engine.touch_order;
  p.coverage_share = o.coverage_share;
  p.lifetime.decode_tokens_per_s = o.decode_tokens_per_s;
  p.lifetime.page_tokens = page_tokens;
  p.priorities = o.priorities;
  p.threads = o.threads;
  p.s3fifo_promotion_hits = o.s3fifo_promotion_hits;
  if (std::find(p.policies.begin(), p.policies.end(), curve::PolicyKind::kPriority) != p.policies.end() &&
      rules.value().empty()) {
    return OptionError("--priority", "the priority policy needs rules, e.g. --priority tenant:NAME=2,class:first=0");
  }
  r->policies = std::move(p);
  return Status::Ok();
}

// Tenants and classes (--no-tenants, --classes, --top-tenants, --isolated) and
// the capacities their interference numbers are given at.
Status ResolveGroups(const ReplayOptions& o, std::uint64_t page_tokens, ResolvedReplay* r) {
  r->lifetime.decode_tokens_per_s = o.decode_tokens_per_s > 0 ? o.decode_tokens_per_s : 50;
  r->lifetime.page_tokens = page_tokens;
  r->groups = o.tenants && !r->report.sampled;
  r->show_groups = o.classes;
  if (o.top_tenants == 0 || o.top_tenants > 254) return OptionError("--top-tenants", "must be in 1..254");
  r->top_tenants = o.top_tenants;
  r->isolated = o.isolated;
  if (o.isolated && !r->groups) {
    return OptionError("--isolated", "needs exact mode with tenants (no --sample-rate, no --no-tenants)");
  }
  for (std::uint64_t c : r->report.capacities) {
    if (c > 0 && c <= o.max_pages) r->group_capacities.push_back(c);
  }
  if (o.capacities.empty()) {
    for (std::uint64_t c = 10; c <= o.max_pages; c *= 10) r->group_capacities.push_back(c);
  }
  return Status::Ok();
}

// The settings the output repeats.
void RecordSettings(const ReplayOptions& o, std::uint64_t page_tokens, ResolvedReplay* r) {
  r->settings.touch_order = o.touch_order;
  r->settings.coverage_share = o.coverage_share;
  r->settings.max_pages = o.max_pages;
  r->settings.page_tokens = page_tokens;
  r->settings.page_tokens_source = o.page_tokens ? "option" : "default";
  r->settings.sample_rate = o.sample_rate;
  r->settings.bytes_per_token = r->report.bytes_per_token;
  r->settings.knee_sensitivity = o.knee_sensitivity;
}

}  // namespace

Result<ResolvedReplay> ResolveReplayOptions(const ReplayOptions& o) {
  ResolvedReplay r;
  // The page size until the records settle it (SettlePageTokens).
  const std::uint64_t page_tokens = o.page_tokens.value_or(kDefaultPageTokens);
  Status s = CheckOutput(o);
  if (s.ok()) s = ResolveEngine(o, &r);
  if (s.ok()) s = ResolveModelSizing(o, page_tokens, &r);
  if (s.ok()) s = ResolveReport(o, page_tokens, &r);
  if (s.ok()) s = ResolvePolicies(o, page_tokens, &r);
  if (s.ok()) s = ResolveGroups(o, page_tokens, &r);
  if (!s.ok()) return Result<ResolvedReplay>::Error(s.error());
  RecordSettings(o, page_tokens, &r);
  return r;
}

void SettlePageTokens(ResolvedReplay* r, std::span<const TokenPages> sample) {
  const auto guess = InferPageTokens(sample);
  r->settings.inference_records = 0;
  for (const TokenPages& t : sample) r->settings.inference_records += t.tokens > 0 && t.pages > 0;
  r->settings.inferred_page_tokens.reset();
  if (!guess) return;
  r->settings.inferred_page_tokens = guess->page_tokens;
  if (r->settings.page_tokens_source == "option") return;
  // Every figure counted in tokens or bytes follows: the report, request
  // lifetimes (generated pages), the policies' lifetimes, the tiers.
  const std::uint64_t p = guess->page_tokens;
  r->settings.page_tokens = p;
  r->settings.page_tokens_source = "inferred";
  r->report.page_tokens = p;
  r->lifetime.page_tokens = p;
  if (r->policies) r->policies->lifetime.page_tokens = p;
}

// Tenants and classes (curve/tenants.h): the shared engine decomposes distances
// by {tenant group, class group}; the folders relabel every kRefreshEvery
// requests, and the counts are moved into label-keyed totals just before, so a
// relabelled slot never mixes two tenants.
struct Replayer::Groups {
  static constexpr std::uint64_t kRefreshEvery = 10000;
  curve::GroupLayout layout;
  curve::TenantFolder tenants;
  curve::TenantFolder classes;
  curve::RequestClassifier classifier;
  std::unique_ptr<curve::GroupTracker> tracker;
  std::unique_ptr<curve::GroupCurves> curves;
  curve::LabelledTotals by_tenant, by_class;
  struct ClassAcc {
    curve::CompactCurveAccumulator acc;  // compact: a record's class may be any string
    std::uint64_t page_refs = 0;
  };
  std::map<std::string, ClassAcc, std::less<>> class_acc;  // by class name
  std::map<std::string, std::vector<double>> footprints;   // by class name
  curve::RunningKv running;
  bool running_known = false;
  bool labelled = false;  // some request had a tenant or class label
  std::uint64_t since_refresh = 0;
  curve::SimRequest sim;

  Groups(const ResolvedReplay& r)
      : tenants({.top_k = r.top_tenants, .table_size = 1024, .refresh_every = 0}),
        classes({.top_k = 8, .table_size = 1024, .refresh_every = 0}) {
    layout.tenant_groups = tenants.groups();
    layout.class_groups = classes.groups();
    layout.capacities = r.group_capacities;
    layout.isolated = r.isolated;
    layout.bytes_per_token = r.report.bytes_per_token.value_or(0);
    layout.coverage_share = r.settings.coverage_share;
    curve::EngineOptions isolated = r.engine;
    tracker = std::make_unique<curve::GroupTracker>(&layout, isolated);
    curves = std::make_unique<curve::GroupCurves>(&layout);
  }
  void Flush(curve::LabelledTotals* t, curve::LabelledTotals* c) const {
    t->Absorb(*curves, 0, tenants.labels());
    c->Absorb(*curves, 1, classes.labels());
  }
  void Refresh() {
    Flush(&by_tenant, &by_class);
    curves->Clear();
    for (std::uint32_t g : tenants.Refresh()) tracker->ResetTenant(g);
    classes.Refresh();
    since_refresh = 0;
  }
};

Replayer::Replayer(const ResolvedReplay& resolved)
    : resolved_(resolved),
      total_(resolved.settings.coverage_share),
      page_tokens_check_(resolved.settings.page_tokens,
                         resolved.settings.inferred_page_tokens != resolved.settings.page_tokens
                             ? resolved.settings.inferred_page_tokens
                             : std::nullopt) {
  if (resolved_.report.sampled) {
    sampled_ = std::make_unique<curve::SampledEngine>(resolved_.engine, *resolved_.settings.sample_rate);
  } else if (resolved_.groups && (resolved_.show_groups || resolved_.isolated)) {
    EnableGroups();
  } else {
    exact_ = std::make_unique<curve::StackDistanceEngine>(resolved_.engine);
  }
  if (resolved_.policies) stored_ = std::make_unique<curve::StoredTrace>();
  if (resolved_.hybrid_model) {
    const std::uint64_t p = resolved_.settings.page_tokens;
    auto options = curve::HybridOptionsFor(
        *resolved_.hybrid_model, static_cast<int>(resolved_.settings.tensor_parallel), p, resolved_.engine.touch_order);
    auto groups = curve::SizeKvGroups(*resolved_.hybrid_model, static_cast<int>(resolved_.settings.tensor_parallel), p);
    // Both were checked by ResolveReplayOptions; only the page bytes changed.
    if (options.ok() && groups.ok()) {
      options.value().pool_shares = resolved_.hybrid_pool_shares;
      hybrid_ = std::make_unique<HybridReplay>(options.value(), groups.value(), resolved_.settings.coverage_share,
                                               resolved_.hybrid_check);
    }
  }
  if (!resolved_.tiers.empty()) {
    const double page_bytes =
        resolved_.report.bytes_per_token.value_or(0) * static_cast<double>(resolved_.report.page_tokens);
    tiers_ =
        std::make_unique<curve::TierAccumulator>(resolved_.tiers, page_bytes, resolved_.report.page_tokens,
                                                 resolved_.report.prefill_cost, resolved_.report.prefill_flops_per_s);
  }
}

Replayer::~Replayer() = default;

// The engine with the group decomposition; the tenant and class sections follow.
void Replayer::EnableGroups() {
  groups_ = std::make_unique<Groups>(resolved_);
  exact_ = std::make_unique<curve::StackDistanceEngine>(
      curve::GroupTracker::SharedEngineOptions(resolved_.engine, groups_->layout));
}

void Replayer::Add(const curve::Request& request, std::span<const curve::PageId> pages) {
  // Tenants and classes are on when the FIRST request has a tenant or class label
  // (or with --classes / --isolated): a trace without labels keeps the plain engine
  // and its output unchanged.
  if (requests_ == 0 && !groups_ && resolved_.groups && (!request.tenant.empty() || !request.request_class.empty())) {
    EnableGroups();
  }
  ++requests_;
  page_refs_ += pages.size();
  if (hybrid_) hybrid_->Add(pages, request.input_tokens, request.output_tokens);
  if (request.input_tokens > 0) {
    page_tokens_check_.Add(static_cast<std::uint64_t>(request.input_tokens), pages.size());
  }
  // Every request counts under its tenant's label as the agent sanitizes it
  // (curve::SanitizeLabel: "none" without a tenant); the map is reported when
  // some request had a tenant.
  // Until some request has a tenant, every one is "none", whose curve is the
  // whole trace's: no second accumulator (a trace without tenants pays nothing).
  // The first request with a tenant starts "none" from the whole trace's curve.
  if (!any_tenant_ && !request.tenant.empty()) {
    any_tenant_ = true;
    if (requests_ > 1) {
      tenants_.emplace(curve::SanitizeLabel(""),
                       Tenant{curve::CompactCurveAccumulator(total_), page_refs_ - pages.size()});
    }
  }
  if (any_tenant_ && (request.tenant != last_tenant_name_ || last_tenant_ == nullptr)) {
    const std::string label = curve::SanitizeLabel(request.tenant);
    auto it = tenants_.find(label);
    if (it == tenants_.end()) {
      it = tenants_.emplace(label, Tenant{curve::CompactCurveAccumulator(resolved_.settings.coverage_share), 0}).first;
    }
    last_tenant_name_ = request.tenant;
    last_tenant_ = &it->second;
  }
  Tenant* tenant = any_tenant_ ? last_tenant_ : nullptr;
  if (tenant != nullptr) tenant->page_refs += pages.size();
  if (sampled_) {
    sampled_->Process(pages, &outcome_);
    // A request with no sampled page says nothing about its requirement.
    if (outcome_.size() == 0) return;
  } else if (groups_) {
    AddGroups(request, pages, tenant);
    return;
  } else {
    exact_->Process(pages, &outcome_);
  }
  AddOutcome(request, pages, tenant);
}

void Replayer::AddGroups(const curve::Request& request, std::span<const curve::PageId> pages, Tenant* tenant) {
  Groups& g = *groups_;
  if (g.since_refresh >= Groups::kRefreshEvery) g.Refresh();
  ++g.since_refresh;
  g.labelled = g.labelled || !request.tenant.empty() || !request.request_class.empty();
  const std::uint32_t tenant_group = g.tenants.Observe(request.tenant, pages.size());
  const std::uint32_t turn = curve::DerivedTurn(request, pages, g.classifier);
  const std::string_view cls = curve::ClassOf(request, turn);
  const std::uint32_t class_group = g.classes.Observe(cls, pages.size());
  for (std::uint32_t changed : g.tenants.changed()) g.tracker->ResetTenant(changed);
  g.tenants.ClearChanged();
  g.classes.ClearChanged();
  const std::uint8_t tags[2] = {static_cast<std::uint8_t>(tenant_group), static_cast<std::uint8_t>(class_group)};
  exact_->Process(pages, tags, &outcome_);
  curve::RememberClass(request, pages, turn, resolved_.settings.page_tokens, outcome_.unlimited_hits, &g.classifier);
  AddOutcome(request, pages, tenant);
  const curve::GroupRequest& gr = g.tracker->Observe(tenant_group, class_group, request, pages, outcome_);
  g.curves->Add(gr);
  // Class rows by the same sanitized names as the interference tables, folded
  // only there.
  auto it = g.class_acc.find(cls);
  if (it == g.class_acc.end()) it = g.class_acc.find(curve::SanitizeLabel(cls));
  if (it == g.class_acc.end()) {
    it = g.class_acc
             .emplace(curve::SanitizeLabel(cls),
                      Groups::ClassAcc{curve::CompactCurveAccumulator(resolved_.settings.coverage_share), 0})
             .first;
  }
  it->second.acc.Add(outcome_);
  it->second.page_refs += pages.size();
  if (gr.footprint_bytes >= 0) {
    g.footprints[it->first].push_back(gr.footprint_bytes);
    if (request.has_timestamp()) {
      curve::ApplyLifetime(request, request.timestamp_s, resolved_.lifetime, &g.sim);
      g.running.Add(g.sim.arrival_s, g.sim.end_s, gr.footprint_bytes);
      g.running_known = true;
    }
  }
}

void Replayer::AddOutcome(const curve::Request& request, std::span<const curve::PageId> pages, Tenant* tenant) {
  total_.Add(outcome_);
  if (tenant != nullptr) tenant->acc.Add(outcome_);
  if (tiers_) tiers_->Add(outcome_);
  if (stored_) {
    const curve::Request* whole = &request;
    if (pages.data() != request.pages.data() || pages.size() != request.pages.size()) {
      stored_request_.CopyFactsFrom(request);
      stored_request_.pages.assign(pages.begin(), pages.end());
      whole = &stored_request_;
    }
    const std::size_t full =
        curve::RequestClassifier::FullPages(pages.size(), request.input_tokens, resolved_.settings.page_tokens);
    const std::uint32_t turn = classifier_.Observe(pages, full, outcome_.unlimited_hits);
    stored_->Add(*whole, curve::RequestClassifier::ClassOfTurn(turn), outcome_.unlimited_hits,
                 resolved_.policies->lifetime);
  }
}

curve::CurveAccumulator Replayer::Adjusted(const curve::CurveAccumulator& acc, std::uint64_t page_refs) const {
  curve::CurveAccumulator adjusted = acc;
  if (sampled_) {
    adjusted.AdjustReferences(
        static_cast<std::uint64_t>(std::llround(static_cast<double>(page_refs) * sampled_->rate())));
  }
  return adjusted;
}

curve::CurveReport Replayer::Report(const curve::CurveAccumulator& acc, std::uint64_t page_refs,
                                    const curve::ReportOptions& options) const {
  // Exact: no adjustment, so no copy of the histograms (they span every distance).
  if (!sampled_) return curve::BuildCurveReport(acc, options);
  return curve::BuildCurveReport(Adjusted(acc, page_refs), options);
}

curve::CurveReport Replayer::Report(const curve::CurveAccumulator& acc, std::uint64_t page_refs) const {
  return Report(acc, page_refs, resolved_.report);
}

curve::CurveReport Replayer::GroupReport(const curve::CompactCurveAccumulator& acc, std::uint64_t page_refs) const {
  // Only the whole trace's curve is plotted: no plot samples (200 points each)
  // for a group, since a trace may have a tenant per user.
  curve::ReportOptions options = resolved_.report;
  options.plot_points = 0;
  return Report(acc.Dense(), page_refs, options);
}

namespace {

// A class's projected peak KV per request: nearest-rank quantiles of `values`.
FootprintRow Footprint(const std::string& cls, std::vector<double> values) {
  FootprintRow row;
  row.cls = cls;
  row.requests = values.size();
  row.p50 = curve::NearestRankQuantile(&values, 0.5);
  row.p90 = curve::NearestRankQuantile(&values, 0.9);
  row.p99 = curve::NearestRankQuantile(&values, 0.99);
  row.max = curve::NearestRankQuantile(&values, 1.0);
  return row;
}

// The capacity plan at the plan fraction's page-hit working set, when bytes are
// known and it converged.
std::vector<PlanRow> PlanRows(const ReplayResult& r, const ResolvedReplay& resolved) {
  std::vector<PlanRow> rows;
  if (!resolved.report.bytes_per_token) return rows;
  for (const auto& e : r.total.working_set) {
    if (e.target != "page_hit" || std::fabs(e.fraction - r.plan_fraction) > 1e-12 || !e.capacity_pages) continue;
    auto plan = curve::PlanCapacity(*e.capacity_pages, resolved.report.page_tokens,
                                    static_cast<std::uint64_t>(*resolved.report.bytes_per_token), resolved.plan);
    if (!plan.ok()) break;
    for (const auto& row : plan.value().rows) rows.push_back(PlanRow{row.name, static_cast<double>(row.bytes)});
  }
  return rows;
}

}  // namespace

ReplayGroups Replayer::GroupsResult() const {
  const Groups& g = *groups_;
  ReplayGroups out;
  out.capacities = g.layout.capacities;
  out.top_tenants = resolved_.top_tenants;
  out.isolated = resolved_.isolated;
  curve::LabelledTotals by_tenant = g.by_tenant, by_class = g.by_class;
  g.Flush(&by_tenant, &by_class);
  for (const auto& [name, totals] : by_tenant.rows()) out.tenants.push_back({name, totals});
  for (const auto& [name, totals] : by_class.rows()) out.classes.push_back({name, totals});
  for (const auto& [name, cls] : g.class_acc) out.class_reports.emplace_back(name, GroupReport(cls.acc, cls.page_refs));
  for (const auto& [name, values] : g.footprints) out.footprint.push_back(Footprint(name, values));
  if (g.running_known) {
    curve::RunningKv running = g.running;
    running.Finish();
    out.running_kv_known = true;
    out.running_kv_mean_bytes = running.mean_bytes();
    out.running_kv_peak_bytes = running.peak_bytes();
  }
  return out;
}

ReplayResult Replayer::Result() const {
  ReplayResult r;
  r.settings = resolved_.settings;
  r.settings.token_records = page_tokens_check_.records();
  r.settings.fitting_records = page_tokens_check_.fitting();
  r.settings.page_rule = PageRuleName(page_tokens_check_.rule());
  r.settings.inferred_fitting_records = r.settings.inferred_page_tokens == r.settings.page_tokens
                                            ? page_tokens_check_.fitting()
                                            : page_tokens_check_.other_fitting();
  r.total = Report(total_, page_refs_);
  r.total.requests = requests_;
  // Every distinct page has exactly one cold miss: offline replay remembers every
  // eviction, so a page seen before is never cold again.
  r.distinct_pages = static_cast<std::uint64_t>(std::llround(r.total.cold_misses));
  const curve::StackDistanceEngine& engine = exact_ ? *exact_ : sampled_->engine();
  r.engine_bytes = engine.MemoryBytes();
  r.tracked_pages = engine.tracked_pages();
  if (any_tenant_) {
    for (const auto& [name, tenant] : tenants_) r.tenants.emplace_back(name, GroupReport(tenant.acc, tenant.page_refs));
  }
  if (groups_) r.groups = GroupsResult();
  if (hybrid_) r.hybrid = hybrid_->Result(resolved_.report, resolved_.report.bytes_per_token.value_or(0));
  if (tiers_) {
    r.tiers = tiers_->totals();
    r.tier_total_capacity = tiers_->total_capacity();
    r.tier_prefix_hits = tiers_->prefix_hits();
    r.tier_in_time_known = tiers_->in_time_known();
    r.tier_hits_in_time = tiers_->hits_in_time();
  }
  r.plan = PlanRows(r, resolved_);
  return r;
}

namespace {

// Prints "kvwatch replay: message" and gives back the exit status.
int FailReplay(int status, const std::string& message) {
  std::fprintf(stderr, "kvwatch replay: %s\n", message.c_str());
  return status;
}

// What the options ask of the run beyond ResolveReplayOptions: a timestamp unit
// and a trace.
base::Result<collectors::TimestampUnit> CheckRunOptions(const ReplayOptions& options) {
  using R = base::Result<collectors::TimestampUnit>;
  auto unit = collectors::ParseTimestampUnit(options.timestamp_unit);
  if (!unit) return R::Error("--timestamp-unit: expected auto, ms or s, got '" + options.timestamp_unit + "'");
  if (options.traces.empty()) return R::Error("no TRACE given (a path, or - for standard input)");
  return *unit;
}

void TuneHeap() {
  // The engine's tables and the curve's histograms grow by doubling to the size of
  // the trace's distinct pages, freeing the smaller block each time. Keep freed
  // memory in the heap for the next growth instead of returning it to the kernel
  // and faulting fresh zeroed pages in again (on the weka trace: about a fifth
  // fewer page faults and a tenth less CPU). Replay is a one-shot process.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 16 << 20);
}

// What the reader thread shares with the replaying one: the batches, and
// standard error (the progress bar and the bad-line reports). Only the reader
// writes to stderr until it is joined (the mutex keeps it so should that change).
struct TraceReading {
  explicit TraceReading(ProgressBar& progress) : bar(progress) {}
  BatchQueue queue;
  std::mutex output_mu;
  ProgressBar& bar;
};

// Reports a bad line on standard error: a trace's first 20, then once that only
// the count is kept.
void ReportBadLine(std::uint64_t& reported, std::string_view source, std::uint64_t line, std::string_view message) {
  if (reported++ < 20) {
    std::fprintf(stderr, "kvwatch replay: %.*s:%llu: %.*s\n", static_cast<int>(source.size()), source.data(),
                 static_cast<unsigned long long>(line), static_cast<int>(message.size()), message.data());
  } else if (reported == 21) {
    std::fprintf(stderr, "kvwatch replay: %.*s: more bad lines; only the count is kept\n",
                 static_cast<int>(source.size()), source.data());
  }
}

// Reads one trace into batches, handing each full one over; input counts what
// was read. False when the trace could not be read (said on standard error).
bool ReadOneTrace(const std::string& path, const collectors::TraceReaderOptions& ro, TraceReading& reading,
                  std::unique_ptr<RequestBatch>& batch, ReplayInput& input) {
  std::uint64_t reported = 0;
  collectors::TraceCallbacks callbacks;
  callbacks.on_request = [&](curve::Request& request) {
    batch->Push(request);
    if (batch->Full()) {
      reading.queue.PushFull(std::move(batch));
      batch = reading.queue.TakeFree();
    }
  };
  callbacks.on_bad_line = [&](std::string_view source, std::uint64_t line, std::string_view message) {
    std::lock_guard lock(reading.output_mu);
    reading.bar.Clear();
    ReportBadLine(reported, source, line, message);
  };
  callbacks.on_progress = [&](std::uint64_t done, std::uint64_t total) {
    std::lock_guard lock(reading.output_mu);
    reading.bar.Update(path, done, total);
  };
  auto summary = collectors::ReadTrace(path, ro, callbacks);
  std::lock_guard lock(reading.output_mu);
  reading.bar.Clear();
  if (!summary.ok()) {
    std::fprintf(stderr, "kvwatch replay: %s\n", summary.error().c_str());
    return false;
  }
  input.sources.push_back(path);
  input.lines += summary.value().lines;
  input.bad_lines += summary.value().bad_lines;
  input.blank_lines += summary.value().blank_lines;
  input.bytes += summary.value().bytes;
  return true;
}

// The reader thread's work: every trace in order into batches, up to the first
// that cannot be read, then the queue closed. False after such a trace.
bool ReadTraces(const ReplayOptions& options, collectors::TimestampUnit unit, TraceReading& reading,
                ReplayInput& input) {
  collectors::TraceReaderOptions ro;
  ro.strict = options.strict;
  ro.record.timestamp_unit = unit;
  if (!options.tenant_fields.empty()) ro.record.tenant_fields = options.tenant_fields;
  if (!options.tenants) ro.record.tenant_fields.clear();
  std::unique_ptr<RequestBatch> batch = reading.queue.TakeFree();
  bool ok = true;
  for (const std::string& path : options.traces) {
    ok = ReadOneTrace(path, ro, reading, batch, input);
    if (!ok) break;
  }
  // Requests delivered before a failure are processed, as before; the result is
  // then dropped.
  if (batch->size > 0) {
    reading.queue.PushFull(std::move(batch));
  } else {
    reading.queue.Recycle(std::move(batch));
  }
  reading.queue.Close();
  return ok;
}

// A batch's input tokens and pages per request, to settle the page size.
std::vector<TokenPages> PageTokensSample(const RequestBatch& batch) {
  std::vector<TokenPages> sample;
  for (std::size_t i = 0, begin = 0; i < batch.size; begin = batch.ends[i++]) {
    const std::int64_t tokens = batch.meta[i].input_tokens;
    sample.push_back({tokens > 0 ? static_cast<std::uint64_t>(tokens) : 0, batch.ends[i] - begin});
  }
  return sample;
}

void ReplayBatch(Replayer& replayer, const RequestBatch& batch) {
  std::size_t begin = 0;
  for (std::size_t i = 0; i < batch.size; ++i) {
    const std::size_t end = batch.ends[i];
    // The next request's first map entries load while this one is replayed.
    if (i + 1 < batch.size) {
      replayer.Prefetch(std::span<const curve::PageId>(batch.pages.data() + end, batch.ends[i + 1] - end));
    }
    replayer.Add(batch.meta[i], std::span<const curve::PageId>(batch.pages.data() + begin, end - begin));
    begin = end;
  }
}

// Reads every trace on a reader thread and replays its requests on this one into
// replayer (built on the first batch); input counts what was read. False when
// a trace could not be read (said on standard error).
bool ReadAndReplay(const ReplayOptions& options, collectors::TimestampUnit unit, ResolvedReplay* resolved,
                   ProgressBar& bar, std::unique_ptr<Replayer>& replayer, ReplayInput& input) {
  TraceReading reading(bar);
  bool read_failed = false;
  std::thread reader([&] {
    pthread_setname_np(pthread_self(), "kvwatch-reader");
    read_failed = !ReadTraces(options, unit, reading, input);
  });
  // The page size counts in every token and byte figure, the tiers' and the
  // policies' too, so it is settled before the first request is replayed: from the
  // first batch's records (up to RequestBatch::kMaxRequests requests), then
  // checked against every record.
  auto start = [&](std::span<const TokenPages> sample) {
    SettlePageTokens(resolved, sample);
    replayer = std::make_unique<Replayer>(*resolved);
  };
  while (auto batch = reading.queue.PopFull()) {
    if (!replayer) start(PageTokensSample(*batch));
    ReplayBatch(*replayer, *batch);
    reading.queue.Recycle(std::move(batch));
  }
  reader.join();
  if (read_failed) return false;
  if (!replayer) start({});  // no request at all
  return true;
}

// --policy: every policy at every capacity (the curve's points when none were
// given) over the stored requests.
Result<PolicyReplayResult> ReplayPolicies(Replayer& replayer, const ResolvedReplay& resolved,
                                          const ReplayResult& result, ProgressBar& bar) {
  PolicyReplayOptions popts = *resolved.policies;
  if (popts.capacities.empty()) {
    for (const auto& p : result.total.points) {
      if (p.capacity_pages > 0) popts.capacities.push_back(p.capacity_pages);
    }
  }
  auto policies = RunPolicies(*replayer.stored_trace(), popts, replayer.total(),
                              [&](std::uint64_t done, std::uint64_t total) { bar.Update("policies", done, total); });
  bar.Clear();
  return policies;
}

// The result in --format on standard output, the warnings on standard error, and
// the plot with --svg.
int WriteReplayOutputs(const ReplayOptions& options, const ReplayResult& result) {
  if (options.format == "json") {
    std::fputs(FormatJson(result).c_str(), stdout);
  } else if (options.format == "csv") {
    std::fputs(FormatCsv(result).c_str(), stdout);
  } else {
    std::fputs(FormatTable(result).c_str(), stdout);
  }
  if (auto warning = PageTokensWarning(result.settings)) {
    std::fprintf(stderr, "kvwatch replay: warning: %s\n", warning->c_str());
  }
  if (result.input.bad_lines > 0) {
    std::fprintf(stderr, "kvwatch replay: skipped %llu bad lines of %llu\n",
                 static_cast<unsigned long long>(result.input.bad_lines),
                 static_cast<unsigned long long>(result.input.lines));
  }
  if (!options.svg.empty()) {
    std::ofstream svg(options.svg, std::ios::binary | std::ios::trunc);
    svg << RenderSvg(result, {0.9, 0.95, 0.99});
    if (!svg.good()) return FailReplay(1, "--svg: cannot write '" + options.svg + "'");
  }
  return 0;
}

}  // namespace

int RunReplay(const ReplayOptions& options) {
  auto resolved = ResolveReplayOptions(options);
  if (!resolved.ok()) return FailReplay(2, resolved.error());
  auto unit = CheckRunOptions(options);
  if (!unit.ok()) return FailReplay(2, unit.error());
  TuneHeap();
  const bool progress_on = options.progress == "always" || (options.progress == "auto" && isatty(STDERR_FILENO));
  ProgressBar bar(stderr, progress_on);
  std::unique_ptr<Replayer> replayer;
  ReplayInput input;
  if (!ReadAndReplay(options, unit.value(), &resolved.value(), bar, replayer, input)) return 1;
  ReplayResult result = replayer->Result();
  result.input = input;
  if (replayer->stored_trace() != nullptr) {
    if (!options.dump_references.empty()) {
      if (Status s = WriteOracleGeneral(*replayer->stored_trace(), resolved.value().policies->touch_order,
                                        options.dump_references);
          !s.ok()) {
        return FailReplay(1, s.error());
      }
    }
    auto policies = ReplayPolicies(*replayer, resolved.value(), result, bar);
    if (!policies.ok()) return FailReplay(2, policies.error());
    result.policies = std::move(policies.value());
  }
  return WriteReplayOutputs(options, result);
}

}  // namespace kvwatch::agent
