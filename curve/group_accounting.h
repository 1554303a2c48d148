// GroupAccounting: the live agent's tenants and classes (issue 11), the
// per-request loop of curve/tenants.h packaged for a long-running stream:
// the two folders (top K tenants and top K classes by page references, the rest
// "other"), the derived-class classifier, the GroupTracker (capacity misses,
// evictor matrix, footprint, optional isolated engines), lifetime counters and
// sliding windows of per-group curves.
//
// Use, per request, with the agent's ONE shared engine built with
// SharedEngineOptions():
//   const GroupTags tags = accounting.Classify(request);
//   engine.Process(request.pages, tags, &outcome);
//   accounting.Add(request, tags, outcome, t);
// and Advance(t) to move the windows' clock while idle. Snapshot() copies what a
// scrape renders.
//
// What the numbers mean (docs/semantics.md; curve/tenants.h):
//   - lifetime: counters since the accounting started (or was restored), without
//     bucketed curves: per group the requests, page references, unlimited hits,
//     hits in the shared cache at each configured capacity (exact), capacity
//     misses, the evictor matrix, unattributed misses, isolated hits, footprints;
//   - windows: the same per time window (curve.windows), with each group's
//     bucketed curve in the shared cache (page hit ratio and request coverage at
//     every bucket bound) and, with isolated curves, in a cache of its own.
// Relabelling: when a folder gives a slot to another name (TenantFolder::Refresh,
// every `refresh_every` requests), the slot's counts are cleared everywhere
// (lifetime, every window slice, the isolated engine), so a label's numbers never
// include another tenant's; pages whose latest reference was by the slot's old
// owner stay attributed to the slot (the engine knows slots, not names).
// The classifier remembers one entry per request chain; it is cleared when it
// holds more than `classifier_max_chains` (later continuations of forgotten
// chains are classed "first" until seen again).
//
// Cost per request: two folder observations, the tracker's Observe (see
// curve/tenants.h), one lifetime add and one add per window of the group's two
// bucketed curves.
//
// Thread safety: none; the agent serializes calls under its mutex.
#ifndef KVWATCH_CURVE_GROUP_ACCOUNTING_H_
#define KVWATCH_CURVE_GROUP_ACCOUNTING_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "curve/policy_replay.h"
#include "curve/sliding_windows.h"
#include "curve/stack_distance.h"
#include "curve/tenants.h"

namespace kvwatch::curve {

// The `tenants` section of the agent's config.
struct TenantOptions {
  // Per-tenant and per-class accounting in the live agent (exact engine only).
  bool enabled = true;
  // Tenants with their own label (the top K by page references); the rest are "other". 1..254.
  std::uint32_t top_k = 8;
  // Classes with their own label (record classes and the derived ones). 1..254.
  std::uint32_t class_top_k = 8;
  // Keep each tenant group's isolated curve (an LRU cache of its own) to measure interference.
  bool isolated = false;
  // Requests between two folder refreshes (not a config key).
  std::uint64_t refresh_every = 10000;

  base::Status Validate(std::string_view prefix) const;
  bool operator==(const TenantOptions&) const = default;
};

struct GroupAccountingOptions {
  TenantOptions tenants;
  // The agent's engine options: the isolated engines use them, and
  // SharedEngineOptions() adds the group dimensions to them.
  EngineOptions engine;
  // The window curves' bucket bounds (LogBucketBounds plus the capacities); must
  // outlive the accounting.
  const std::vector<std::uint64_t>* bounds = nullptr;
  double coverage_share = 1.0;
  // Configured capacities (increasing, each in [1, engine.max_pages]): where
  // capacity misses and the evictor matrix are counted exactly.
  std::vector<std::uint64_t> capacities;
  // Bytes per token per GPU rank; 0: no footprint.
  double bytes_per_token = 0;
  // Tokens per page: tells the derived-class classifier whether a request's last
  // page is partial (RequestClassifier::FullPages).
  std::uint64_t page_tokens = 16;
  // Window durations in seconds (each > 0).
  std::vector<double> windows_s;
  std::size_t classifier_max_chains = std::size_t{1} << 22;
};

// A request's groups as the shared engine's tags: {tenant group, class group}.
using GroupTags = std::array<std::uint8_t, 2>;

class GroupAccounting {
 public:
  explicit GroupAccounting(GroupAccountingOptions options);
  ~GroupAccounting();
  GroupAccounting(const GroupAccounting&) = delete;
  GroupAccounting& operator=(const GroupAccounting&) = delete;

  // The shared engine's options: options.engine with the group dimensions and
  // decompose_from = the smallest capacity.
  EngineOptions SharedEngineOptions() const { return SharedEngineOptions(options_); }
  static EngineOptions SharedEngineOptions(const GroupAccountingOptions& options);

  // Counts the request's tenant and class in the folders and returns its groups;
  // clears what a relabelled slot held. REQUIRES: Add() of this request follows
  // before the next Classify() (the classifier remembers the request there).
  GroupTags Classify(const Request& request);
  // Adds the request, whose shared-engine outcome (Process with `tags`) is
  // `outcome`, at window time t.
  void Add(const Request& request, GroupTags tags, const RequestOutcome& outcome, double t);
  // Moves the windows' clock (expiring old slices).
  void Advance(double t);
  // Forgets everything (a rejected state file).
  void Clear();
  // Empties the windows and restarts their clock, keeping the lifetime counters
  // and folders (a restored clock that was beyond the allowed skew).
  void ResetWindows();

  // What a scrape renders, copied. The curves refer to this accounting's layouts:
  // valid while it lives.
  struct View {
    std::vector<std::string> tenant_labels;  // by group id; "" for a slot never owned
    std::vector<std::string> class_labels;
    GroupCurves lifetime;
    std::vector<GroupCurves> windows;  // per window, when asked for
    std::size_t memory_bytes = 0;      // MemoryBytes()
  };
  View Snapshot(bool windows) const;

  const GroupAccountingOptions& options() const { return options_; }
  // The class folder's label of a class group (Classify's tags[1]): a sanitized
  // name, "other", or "" for a slot never owned.
  const std::string& class_label(std::uint32_t group) const { return classes_.label(group); }
  // The lifetime layout (no bucketed curves) and the windows' (with them).
  const GroupLayout& lifetime_layout() const { return lifetime_layout_; }
  const GroupLayout& window_layout() const { return window_layout_; }
  std::size_t MemoryBytes() const;

  // Checkpoint (appends / consumes): the folders, the lifetime counters and the
  // windows; the classifier and the isolated engines start empty after a restore.
  // false when malformed or laid out differently.
  void Serialize(std::vector<std::uint8_t>* out) const;
  bool Deserialize(std::span<const std::uint8_t>* in);

 private:
  void ClearSlot(std::uint32_t dimension, std::uint32_t group);

  GroupAccountingOptions options_;
  GroupLayout lifetime_layout_;
  GroupLayout window_layout_;
  TenantFolder tenants_;
  TenantFolder classes_;
  RequestClassifier classifier_;
  std::uint32_t pending_turn_ = 0;  // the derived turn Classify() found, remembered by Add()
  std::unique_ptr<GroupTracker> tracker_;
  GroupCurves lifetime_;
  SlidingWindows<GroupCurves> windows_;
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_GROUP_ACCOUNTING_H_
