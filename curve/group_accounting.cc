#include "curve/group_accounting.h"

#include <utility>

#include "base/byte_io.h"

namespace kvwatch::curve {
namespace {

constexpr std::uint32_t kMaxTopK = 254;  // group ids are tags of one byte, "other" included

GroupLayout MakeLayout(const GroupAccountingOptions& o, const std::vector<std::uint64_t>* bounds) {
  GroupLayout layout;
  layout.tenant_groups = o.tenants.top_k + 1;
  layout.class_groups = o.tenants.class_top_k + 1;
  layout.bounds = bounds;
  layout.coverage_share = o.coverage_share;
  layout.capacities = o.capacities;
  layout.isolated = o.tenants.isolated;
  layout.bytes_per_token = o.bytes_per_token;
  return layout;
}

TenantFolderOptions FolderOptions(std::uint32_t top_k, std::uint64_t refresh_every) {
  TenantFolderOptions f;
  f.top_k = top_k;
  f.table_size = std::max<std::uint32_t>(1024, top_k);
  f.refresh_every = refresh_every;
  return f;
}

}  // namespace

base::Status TenantOptions::Validate(std::string_view prefix) const {
  const std::string p(prefix);
  if (top_k < 1 || top_k > kMaxTopK) return base::Status::Error(p + "top_k: expected 1 to 254");
  if (class_top_k < 1 || class_top_k > kMaxTopK) return base::Status::Error(p + "class_top_k: expected 1 to 254");
  return base::Status::Ok();
}

GroupAccounting::GroupAccounting(GroupAccountingOptions options)
    : options_(std::move(options)),
      lifetime_layout_(MakeLayout(options_, nullptr)),
      window_layout_(MakeLayout(options_, options_.bounds)),
      tenants_(FolderOptions(options_.tenants.top_k, options_.tenants.refresh_every)),
      classes_(FolderOptions(options_.tenants.class_top_k, options_.tenants.refresh_every)),
      tracker_(std::make_unique<GroupTracker>(&lifetime_layout_, options_.engine)),
      lifetime_(&lifetime_layout_),
      windows_(options_.windows_s, GroupCurves(&window_layout_)) {}

GroupAccounting::~GroupAccounting() = default;

EngineOptions GroupAccounting::SharedEngineOptions(const GroupAccountingOptions& options) {
  return GroupTracker::SharedEngineOptions(options.engine, MakeLayout(options, nullptr));
}

GroupTags GroupAccounting::Classify(const Request& request) {
  if (classifier_.size() > options_.classifier_max_chains) classifier_.Clear();
  const std::uint32_t tenant = tenants_.Observe(request.tenant, request.pages.size());
  pending_turn_ = DerivedTurn(request, request.pages, classifier_);
  const std::uint32_t cls = classes_.Observe(ClassOf(request, pending_turn_), request.pages.size());
  for (std::uint32_t g : tenants_.changed()) ClearSlot(0, g);
  for (std::uint32_t g : classes_.changed()) ClearSlot(1, g);
  tenants_.ClearChanged();
  classes_.ClearChanged();
  return {static_cast<std::uint8_t>(tenant), static_cast<std::uint8_t>(cls)};
}

void GroupAccounting::ClearSlot(std::uint32_t dimension, std::uint32_t group) {
  if (dimension == 0) tracker_->ResetTenant(group);
  lifetime_.ClearGroup(dimension, group);
  for (auto& ring : windows_.rings()) {
    for (GroupCurves& slice : ring.ring) slice.ClearGroup(dimension, group);
  }
}

void GroupAccounting::Add(const Request& request, GroupTags tags, const RequestOutcome& outcome, double t) {
  RememberClass(request, request.pages, pending_turn_, options_.page_tokens, outcome.unlimited_hits, &classifier_);
  pending_turn_ = 0;
  const GroupRequest& r = tracker_->Observe(tags[0], tags[1], request, request.pages, outcome);
  lifetime_.Add(r);
  windows_.Add(t, [&r](GroupCurves& slice) { slice.Add(r); });
}

void GroupAccounting::Advance(double t) { windows_.Advance(t); }

void GroupAccounting::ResetWindows() {
  windows_ = SlidingWindows<GroupCurves>(options_.windows_s, GroupCurves(&window_layout_));
}

void GroupAccounting::Clear() {
  tenants_ = TenantFolder(FolderOptions(options_.tenants.top_k, options_.tenants.refresh_every));
  classes_ = TenantFolder(FolderOptions(options_.tenants.class_top_k, options_.tenants.refresh_every));
  classifier_.Clear();
  tracker_ = std::make_unique<GroupTracker>(&lifetime_layout_, options_.engine);
  lifetime_.Clear();
  windows_ = SlidingWindows<GroupCurves>(options_.windows_s, GroupCurves(&window_layout_));
}

GroupAccounting::View GroupAccounting::Snapshot(bool windows) const {
  View v{tenants_.labels(), classes_.labels(), lifetime_, {}, MemoryBytes()};
  if (windows) {
    for (std::size_t i = 0; i < windows_.size(); ++i)
      v.windows.push_back(windows_.Window(i, GroupCurves(&window_layout_)));
  }
  return v;
}

std::size_t GroupAccounting::MemoryBytes() const {
  // The folders, the classifier and the isolated engines; the curves are small
  // fixed arrays per group (see the series count in curve/tenants.h).
  return tenants_.MemoryBytes() + classes_.MemoryBytes() + classifier_.MemoryBytes() + tracker_->MemoryBytes();
}

void GroupAccounting::Serialize(std::vector<std::uint8_t>* out) const {
  tenants_.Serialize(out);
  classes_.Serialize(out);
  lifetime_.Serialize(out);
  base::AppendPod<std::uint8_t>(out, windows_.started() ? 1 : 0);
  base::AppendPod(out, windows_.now());
  base::AppendPod<std::uint64_t>(out, windows_.size());
  for (const auto& w : windows_.rings()) {
    base::AppendPod(out, w.duration_s);
    base::AppendPod(out, w.newest_slice);
    for (const GroupCurves& slice : w.ring) slice.Serialize(out);
  }
}

bool GroupAccounting::Deserialize(std::span<const std::uint8_t>* in) {
  std::uint8_t started = 0;
  double now = 0;
  std::uint64_t n = 0;
  if (!tenants_.Deserialize(in) || !classes_.Deserialize(in) || !lifetime_.Deserialize(in) ||
      !base::ReadPod(in, &started) || !base::ReadPod(in, &now) || !base::ReadPod(in, &n) || n != windows_.size()) {
    return false;
  }
  windows_.Restore(started != 0, now);
  for (auto& w : windows_.rings()) {
    double d = 0;
    if (!base::ReadPod(in, &d) || d != w.duration_s || !base::ReadPod(in, &w.newest_slice)) return false;
    for (GroupCurves& slice : w.ring) {
      if (!slice.Deserialize(in)) return false;
    }
  }
  return true;
}

}  // namespace kvwatch::curve
