#include "curve/tenants.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "base/byte_io.h"

namespace kvwatch::curve {

std::string SanitizeLabel(std::string_view name) {
  if (name.empty()) return "none";
  std::string out(name.substr(0, kMaxLabelBytes));
  for (char& c : out) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == ':' || c == '-' || c == '+';
    if (!ok) c = '_';
  }
  if (out == kOtherLabel) out = "_other";
  return out;
}

std::uint32_t DerivedTurn(const Request& request, std::span<const PageId> pages, const RequestClassifier& classifier) {
  return request.request_class.empty() ? classifier.Turn(pages) : 0;
}

std::string_view ClassOf(const Request& request, std::uint32_t derived_turn) {
  if (!request.request_class.empty()) return request.request_class;
  return RequestClassifier::ClassOfTurn(derived_turn);
}

void RememberClass(const Request& request, std::span<const PageId> pages, std::uint32_t derived_turn,
                   std::uint64_t page_tokens, std::uint32_t unlimited_hits, RequestClassifier* classifier) {
  if (derived_turn == 0) return;
  classifier->Remember(pages, derived_turn,
                       RequestClassifier::FullPages(pages.size(), request.input_tokens, page_tokens), unlimited_hits);
}

// --- TenantFolder --------------------------------------------------------------------

TenantFolder::TenantFolder(const TenantFolderOptions& options) : options_(options) {
  options_.top_k = std::clamp<std::uint32_t>(options_.top_k, 1, 254);
  options_.table_size = std::max(options_.table_size, options_.top_k);
  labels_.assign(options_.top_k + 1, std::string());
  labels_[options_.top_k] = std::string(kOtherLabel);
  entries_.reserve(options_.table_size);
  heap_.reserve(options_.table_size);
  heap_pos_.reserve(options_.table_size);
  index_.reserve(options_.table_size);
}

void TenantFolder::SiftDown(std::size_t i) {
  const std::size_t n = heap_.size();
  for (;;) {
    std::size_t smallest = i;
    const std::size_t l = 2 * i + 1, r = l + 1;
    if (l < n && entries_[heap_[l]].count < entries_[heap_[smallest]].count) smallest = l;
    if (r < n && entries_[heap_[r]].count < entries_[heap_[smallest]].count) smallest = r;
    if (smallest == i) return;
    std::swap(heap_[i], heap_[smallest]);
    heap_pos_[heap_[i]] = static_cast<std::uint32_t>(i);
    heap_pos_[heap_[smallest]] = static_cast<std::uint32_t>(smallest);
    i = smallest;
  }
}

void TenantFolder::Count(const std::string& name, std::uint64_t weight) {
  if (auto it = index_.find(name); it != index_.end()) {
    entries_[it->second].count += weight;
    SiftDown(heap_pos_[it->second]);  // a larger count moves down a min-heap
    return;
  }
  if (entries_.size() < options_.table_size) {
    const auto e = static_cast<std::uint32_t>(entries_.size());
    entries_.push_back(Entry{name, weight, 0});
    index_.emplace(name, e);
    heap_.push_back(e);
    heap_pos_.push_back(static_cast<std::uint32_t>(heap_.size() - 1));
    // Sift up.
    for (std::size_t i = heap_.size() - 1; i > 0;) {
      const std::size_t parent = (i - 1) / 2;
      if (entries_[heap_[parent]].count <= entries_[heap_[i]].count) break;
      std::swap(heap_[i], heap_[parent]);
      heap_pos_[heap_[i]] = static_cast<std::uint32_t>(i);
      heap_pos_[heap_[parent]] = static_cast<std::uint32_t>(parent);
      i = parent;
    }
    return;
  }
  // Space-Saving: the new name replaces the smallest counter and inherits its count.
  const std::uint32_t e = heap_[0];
  Entry& entry = entries_[e];
  index_.erase(entry.name);
  entry.name = name;
  entry.error = entry.count;
  entry.count += weight;
  index_.emplace(name, e);
  SiftDown(0);
}

std::uint32_t TenantFolder::Observe(std::string_view name, std::uint64_t weight) {
  scratch_ = SanitizeLabel(name);
  Count(scratch_, weight);
  ++observations_;
  ++since_refresh_;
  if (options_.refresh_every != 0 && since_refresh_ >= options_.refresh_every) Refresh();
  if (auto it = owners_.find(scratch_); it != owners_.end()) return it->second;
  for (std::uint32_t s = 0; s < options_.top_k; ++s) {
    if (labels_[s].empty()) {
      labels_[s] = scratch_;
      owners_.emplace(scratch_, s);
      changed_.push_back(s);
      return s;
    }
  }
  return other();
}

std::uint32_t TenantFolder::GroupOf(std::string_view name) const {
  const std::string label = SanitizeLabel(name);
  auto it = owners_.find(label);
  return it == owners_.end() ? other() : it->second;
}

std::uint64_t TenantFolder::Volume(std::string_view name) const {
  auto it = index_.find(SanitizeLabel(name));
  return it == index_.end() ? 0 : entries_[it->second].count;
}

const std::vector<std::uint32_t>& TenantFolder::Refresh() {
  since_refresh_ = 0;
  changed_.clear();
  // The top K counters, largest first; ties by name so the choice is deterministic.
  std::vector<std::uint32_t> order(entries_.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  const std::size_t k = std::min<std::size_t>(options_.top_k, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](std::uint32_t a, std::uint32_t b) {
                      if (entries_[a].count != entries_[b].count) return entries_[a].count > entries_[b].count;
                      return entries_[a].name < entries_[b].name;
                    });
  std::unordered_map<std::string, bool> top;
  for (std::size_t i = 0; i < k; ++i) top.emplace(entries_[order[i]].name, true);
  // Owners that left the top K free their slots.
  for (std::uint32_t s = 0; s < options_.top_k; ++s) {
    if (!labels_[s].empty() && top.find(labels_[s]) == top.end()) {
      owners_.erase(labels_[s]);
      labels_[s].clear();
      changed_.push_back(s);
    }
  }
  // Newcomers take the lowest free slots.
  std::uint32_t free_slot = 0;
  for (std::size_t i = 0; i < k; ++i) {
    const std::string& name = entries_[order[i]].name;
    if (owners_.count(name) != 0) continue;
    while (free_slot < options_.top_k && !labels_[free_slot].empty()) ++free_slot;
    if (free_slot == options_.top_k) break;
    labels_[free_slot] = name;
    owners_.emplace(name, free_slot);
    if (std::find(changed_.begin(), changed_.end(), free_slot) == changed_.end()) changed_.push_back(free_slot);
  }
  std::sort(changed_.begin(), changed_.end());
  return changed_;
}

std::size_t TenantFolder::MemoryBytes() const {
  std::size_t bytes = entries_.capacity() * sizeof(Entry) + heap_.capacity() * 4 + heap_pos_.capacity() * 4 +
                      index_.bucket_count() * sizeof(void*) + labels_.capacity() * sizeof(std::string);
  for (const Entry& e : entries_) bytes += e.name.capacity() > 15 ? e.name.capacity() + 1 : 0;
  // Map nodes: key copy, value and two pointers.
  bytes += index_.size() * (sizeof(std::string) + kMaxLabelBytes + 4 + 2 * sizeof(void*));
  bytes += owners_.size() * (sizeof(std::string) + kMaxLabelBytes + 4 + 2 * sizeof(void*));
  return bytes;
}

void TenantFolder::Serialize(std::vector<std::uint8_t>* out) const {
  base::AppendPod<std::uint32_t>(out, options_.top_k);
  base::AppendPod<std::uint64_t>(out, observations_);
  base::AppendPod<std::uint64_t>(out, since_refresh_);
  auto put_string = [&](const std::string& text) {
    base::AppendPod<std::uint32_t>(out, static_cast<std::uint32_t>(text.size()));
    out->insert(out->end(), text.begin(), text.end());
  };
  for (std::uint32_t g = 0; g < options_.top_k; ++g) put_string(labels_[g]);
  base::AppendPod<std::uint32_t>(out, static_cast<std::uint32_t>(entries_.size()));
  for (const Entry& e : entries_) {
    put_string(e.name);
    base::AppendPod<std::uint64_t>(out, e.count);
    base::AppendPod<std::uint64_t>(out, e.error);
  }
}

bool TenantFolder::Deserialize(std::span<const std::uint8_t>* in) {
  std::span<const std::uint8_t> at = *in;
  std::uint32_t k = 0, n = 0;
  std::uint64_t observations = 0, since = 0;
  if (!base::ReadPod(&at, &k) || k != options_.top_k || !base::ReadPod(&at, &observations) ||
      !base::ReadPod(&at, &since)) {
    return false;
  }
  auto get_string = [&](std::string* text) {
    std::uint32_t size = 0;
    if (!base::ReadPod(&at, &size) || size > kMaxLabelBytes || at.size() < size) return false;
    text->assign(reinterpret_cast<const char*>(at.data()), size);
    at = at.subspan(size);
    return true;
  };
  std::vector<std::string> labels(options_.top_k + 1);
  labels[options_.top_k] = std::string(kOtherLabel);
  for (std::uint32_t g = 0; g < options_.top_k; ++g) {
    if (!get_string(&labels[g])) return false;
  }
  if (!base::ReadPod(&at, &n) || n > options_.table_size) return false;
  std::vector<Entry> entries(n);
  for (Entry& e : entries) {
    if (!get_string(&e.name) || !base::ReadPod(&at, &e.count) || !base::ReadPod(&at, &e.error)) return false;
  }
  TenantFolder restored(options_);
  restored.labels_ = std::move(labels);
  for (std::uint32_t g = 0; g < options_.top_k; ++g) {
    if (!restored.labels_[g].empty() && !restored.owners_.emplace(restored.labels_[g], g).second) return false;
  }
  for (Entry& e : entries) {
    if (restored.index_.count(e.name) != 0) return false;
    restored.Count(e.name, e.count);
    restored.entries_[restored.index_[e.name]].error = e.error;
  }
  restored.observations_ = observations;
  restored.since_refresh_ = since;
  *this = std::move(restored);
  *in = at;
  return true;
}

// --- GroupCurves ----------------------------------------------------------------------

std::uint32_t FootprintBucket(double bytes) {
  if (!(bytes > 1)) return 0;
  int exp = 0;
  const double mantissa = std::frexp(bytes, &exp);  // bytes = mantissa * 2^exp, mantissa in [0.5, 1)
  const int k = mantissa == 0.5 ? exp - 1 : exp;    // smallest k with bytes <= 2^k
  return static_cast<std::uint32_t>(std::clamp(k, 0, static_cast<int>(kFootprintBuckets) - 1));
}

GroupCurves::GroupCurves(const GroupLayout* layout) : layout_(layout) {
  const std::size_t caps = layout_->capacities.size();
  for (std::uint32_t d = 0; d < 2; ++d) {
    const std::uint32_t g = Groups(d);
    if (layout_->bounds != nullptr) shared_[d].assign(g, BucketedCurve(layout_->bounds, layout_->coverage_share));
    hits_[d].assign(g * caps, 0);
    unattributed_[d].assign(g * caps, 0);
    requests_[d].assign(g, 0);
    page_refs_[d].assign(g, 0);
    unlimited_[d].assign(g, 0);
    blame_[d].assign(caps * g * g, 0.0);
  }
  if (layout_->isolated) {
    if (layout_->bounds != nullptr) {
      isolated_.assign(layout_->tenant_groups, BucketedCurve(layout_->bounds, layout_->coverage_share));
    }
    isolated_hits_.assign(layout_->tenant_groups * caps, 0);
  }
  footprint_.assign(static_cast<std::size_t>(layout_->class_groups) * kFootprintBuckets, 0);
  footprint_sum_.assign(layout_->class_groups, 0.0);
}

std::size_t GroupCurves::Cell(std::uint32_t, std::uint32_t group, std::size_t c) const {
  return group * layout_->capacities.size() + c;
}

void GroupCurves::Add(const GroupRequest& r) {
  const std::size_t caps = layout_->capacities.size();
  const std::uint64_t w = r.weight;
  // Both dimensions' curves count the same outcome: read it once.
  if (!shared_[0].empty() && !shared_[1].empty()) {
    BucketedCurve* const curves[2] = {&shared_[0][r.tenant], &shared_[1][r.cls]};
    BucketedCurve::AddToEach(curves, *r.shared, w);
  } else {
    if (!shared_[0].empty()) shared_[0][r.tenant].Add(*r.shared, w);
    if (!shared_[1].empty()) shared_[1][r.cls].Add(*r.shared, w);
  }
  for (std::uint32_t d = 0; d < 2; ++d) {
    const std::uint32_t g = d == 0 ? r.tenant : r.cls;
    requests_[d][g] += w;
    page_refs_[d][g] += r.shared->size() * w;
    unlimited_[d][g] += static_cast<std::uint64_t>(r.shared->unlimited_hits) * w;
    for (std::size_t c = 0; c < caps; ++c) {
      hits_[d][Cell(d, g, c)] += static_cast<std::uint64_t>(r.shared_hits[c]) * w;
      unattributed_[d][Cell(d, g, c)] += static_cast<std::uint64_t>(r.unattributed[c]) * w;
    }
  }
  if (layout_->isolated && r.isolated != nullptr) {
    if (!isolated_.empty()) isolated_[r.tenant].Add(*r.isolated, w);
    for (std::size_t c = 0; c < caps; ++c) {
      isolated_hits_[Cell(0, r.tenant, c)] += static_cast<std::uint64_t>(r.isolated_hits[c]) * w;
    }
  }
  const std::size_t groups[2] = {Groups(0), Groups(1)};
  const std::size_t victims[2] = {r.tenant, r.cls};
  double* const blame[2] = {blame_[0].data(), blame_[1].data()};
  const double wd = static_cast<double>(w);
  for (const GroupRequest::Blame& b : r.blame) {
    const std::uint32_t d = b.dimension;
    blame[d][(b.capacity_index * groups[d] + victims[d]) * groups[d] + b.evictor] += b.pages * wd;
  }
  if (r.footprint_bytes >= 0) {
    footprint_[static_cast<std::size_t>(r.cls) * kFootprintBuckets + FootprintBucket(r.footprint_bytes)] += w;
    footprint_sum_[r.cls] += r.footprint_bytes * static_cast<double>(w);
  }
}

void GroupCurves::Merge(const GroupCurves& o) {
  auto add = [](auto& a, const auto& b) {
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) a[i] += b[i];
  };
  for (std::uint32_t d = 0; d < 2; ++d) {
    for (std::size_t g = 0; g < shared_[d].size() && g < o.shared_[d].size(); ++g) shared_[d][g].Merge(o.shared_[d][g]);
    add(hits_[d], o.hits_[d]);
    add(unattributed_[d], o.unattributed_[d]);
    add(requests_[d], o.requests_[d]);
    add(page_refs_[d], o.page_refs_[d]);
    add(unlimited_[d], o.unlimited_[d]);
    add(blame_[d], o.blame_[d]);
  }
  for (std::size_t g = 0; g < isolated_.size() && g < o.isolated_.size(); ++g) isolated_[g].Merge(o.isolated_[g]);
  add(isolated_hits_, o.isolated_hits_);
  add(footprint_, o.footprint_);
  add(footprint_sum_, o.footprint_sum_);
}

void GroupCurves::Clear() {
  auto zero = [](auto& v) { std::fill(v.begin(), v.end(), 0); };
  for (std::uint32_t d = 0; d < 2; ++d) {
    for (BucketedCurve& c : shared_[d]) c.Clear();
    zero(hits_[d]);
    zero(unattributed_[d]);
    zero(requests_[d]);
    zero(page_refs_[d]);
    zero(unlimited_[d]);
    zero(blame_[d]);
  }
  for (BucketedCurve& c : isolated_) c.Clear();
  zero(isolated_hits_);
  zero(footprint_);
  zero(footprint_sum_);
}

void GroupCurves::ClearGroup(std::uint32_t d, std::uint32_t group) {
  const std::size_t caps = layout_->capacities.size();
  const std::uint32_t groups = Groups(d);
  if (group >= groups) return;
  if (group < shared_[d].size()) shared_[d][group].Clear();
  for (std::size_t c = 0; c < caps; ++c) {
    hits_[d][Cell(d, group, c)] = 0;
    unattributed_[d][Cell(d, group, c)] = 0;
    for (std::uint32_t other = 0; other < groups; ++other) {
      blame_[d][(c * groups + group) * groups + other] = 0;  // as victim
      blame_[d][(c * groups + other) * groups + group] = 0;  // as evictor
    }
  }
  requests_[d][group] = page_refs_[d][group] = unlimited_[d][group] = 0;
  if (d == 0) {
    if (group < isolated_.size()) isolated_[group].Clear();
    for (std::size_t c = 0; c < caps && !isolated_hits_.empty(); ++c) isolated_hits_[Cell(0, group, c)] = 0;
  } else {
    std::fill_n(footprint_.begin() + static_cast<std::ptrdiff_t>(group) * kFootprintBuckets, kFootprintBuckets, 0);
    footprint_sum_[group] = 0;
  }
}

void GroupCurves::Serialize(std::vector<std::uint8_t>* out) const {
  auto put = [&](const auto& v) {
    for (const auto& x : v) base::AppendPod(out, x);
  };
  for (std::uint32_t d = 0; d < 2; ++d) {
    for (const BucketedCurve& c : shared_[d]) c.Serialize(out);
    put(hits_[d]);
    put(requests_[d]);
    put(page_refs_[d]);
    put(unlimited_[d]);
    put(unattributed_[d]);
    put(blame_[d]);
  }
  for (const BucketedCurve& c : isolated_) c.Serialize(out);
  put(isolated_hits_);
  put(footprint_);
  put(footprint_sum_);
}

bool GroupCurves::Deserialize(std::span<const std::uint8_t>* in) {
  auto get = [&](auto& v) {
    for (auto& x : v) {
      if (!base::ReadPod(in, &x)) return false;
    }
    return true;
  };
  for (std::uint32_t d = 0; d < 2; ++d) {
    for (BucketedCurve& c : shared_[d]) {
      if (!c.Deserialize(in)) return false;
    }
    if (!get(hits_[d]) || !get(requests_[d]) || !get(page_refs_[d]) || !get(unlimited_[d]) || !get(unattributed_[d]) ||
        !get(blame_[d])) {
      return false;
    }
  }
  for (BucketedCurve& c : isolated_) {
    if (!c.Deserialize(in)) return false;
  }
  return get(isolated_hits_) && get(footprint_) && get(footprint_sum_);
}

std::uint64_t GroupCurves::shared_hits(std::uint32_t d, std::uint32_t g, std::size_t c) const {
  return hits_[d][Cell(d, g, c)];
}

std::uint64_t GroupCurves::capacity_misses(std::uint32_t d, std::uint32_t g, std::size_t c) const {
  return unlimited_[d][g] - hits_[d][Cell(d, g, c)];
}

std::uint64_t GroupCurves::isolated_hits(std::uint32_t g, std::size_t c) const {
  return isolated_hits_.empty() ? 0 : isolated_hits_[Cell(0, g, c)];
}

double GroupCurves::evicted_by(std::uint32_t d, std::size_t c, std::uint32_t victim, std::uint32_t evictor) const {
  const std::uint32_t g = Groups(d);
  return blame_[d][(c * g + victim) * g + evictor];
}

std::uint64_t GroupCurves::unattributed(std::uint32_t d, std::uint32_t g, std::size_t c) const {
  return unattributed_[d][Cell(d, g, c)];
}

std::span<const std::uint64_t> GroupCurves::footprint_buckets(std::uint32_t class_group) const {
  return std::span<const std::uint64_t>(footprint_)
      .subspan(static_cast<std::size_t>(class_group) * kFootprintBuckets, kFootprintBuckets);
}

// --- GroupTracker ---------------------------------------------------------------------

namespace {

// Hits at capacity C: pages with m(i) < C; prefix_max is non-decreasing.
std::uint32_t HitsAt(const RequestOutcome& o, std::uint64_t capacity) {
  const std::uint32_t c = capacity >= kBeyondTracked ? kBeyondTracked : static_cast<std::uint32_t>(capacity);
  return static_cast<std::uint32_t>(std::lower_bound(o.prefix_max.begin(), o.prefix_max.end(), c) -
                                    o.prefix_max.begin());
}

}  // namespace

GroupTracker::GroupTracker(const GroupLayout* layout, const EngineOptions& isolated_engine)
    : layout_(layout), isolated_options_(isolated_engine) {
  isolated_options_.group_dimensions.clear();
  if (layout_->isolated) isolated_.resize(layout_->tenant_groups);
}

GroupTracker::~GroupTracker() = default;

EngineOptions GroupTracker::SharedEngineOptions(EngineOptions base, const GroupLayout& layout) {
  base.group_dimensions = {layout.tenant_groups, layout.class_groups};
  base.decompose_from =
      layout.capacities.empty()
          ? kBeyondTracked
          : static_cast<std::uint32_t>(std::clamp<std::uint64_t>(layout.capacities.front(), 1, kBeyondTracked));
  return base;
}

void GroupTracker::ResetTenant(std::uint32_t group) {
  if (group < isolated_.size() && isolated_[group]) isolated_[group]->Clear();
}

std::size_t GroupTracker::MemoryBytes() const {
  std::size_t bytes = 0;
  for (const auto& e : isolated_) bytes += e ? e->MemoryBytes() : 0;
  return bytes;
}

const GroupRequest& GroupTracker::Observe(std::uint32_t tenant, std::uint32_t cls, const Request& request,
                                          std::span<const PageId> pages, const RequestOutcome& shared,
                                          std::uint64_t weight) {
  const std::vector<std::uint64_t>& caps = layout_->capacities;
  GroupRequest& r = request_;
  r.tenant = std::min(tenant, layout_->tenant_groups - 1);
  r.cls = std::min(cls, layout_->class_groups - 1);
  r.shared = &shared;
  r.weight = weight;
  r.isolated = nullptr;
  r.shared_hits.resize(caps.size());
  r.isolated_hits.assign(caps.size(), 0);
  r.unattributed.assign(caps.size(), 0);
  r.blame.clear();
  for (std::size_t c = 0; c < caps.size(); ++c) r.shared_hits[c] = HitsAt(shared, caps[c]);

  if (layout_->isolated) {
    auto& engine = isolated_[r.tenant];
    if (!engine) engine = std::make_unique<StackDistanceEngine>(isolated_options_);
    engine->Process(pages, &isolated_outcome_);
    r.isolated = &isolated_outcome_;
    for (std::size_t c = 0; c < caps.size(); ++c) r.isolated_hits[c] = HitsAt(isolated_outcome_, caps[c]);
  }

  // Capacity misses: pages i < T with m(i) >= C. Walk the runs of equal prefix
  // maximum from the first page missing at the smallest capacity.
  if (!caps.empty() && shared.unlimited_hits > r.shared_hits[0]) {
    const std::size_t total = shared.group_distance.empty() || shared.decomposed.empty()
                                  ? 0
                                  : shared.group_distance.size() / shared.decomposed.size();
    const std::uint32_t dims_groups[2] = {layout_->tenant_groups, layout_->class_groups};
    const std::size_t groups_total = static_cast<std::size_t>(dims_groups[0]) + dims_groups[1];
    // A run that misses at capacities 0..missed-1 adds its shares to dense[missed - 1];
    // a suffix sum at the end spreads them to every smaller capacity.
    dense_.assign(caps.size() * groups_total, 0.0);
    std::size_t k = 0;  // index into shared.decomposed
    std::size_t i = r.shared_hits[0];
    while (i < shared.unlimited_hits) {
      const std::uint32_t m = shared.prefix_max[i];
      std::size_t end = i + 1;
      while (end < shared.unlimited_hits && shared.prefix_max[end] == m) ++end;
      const double run = static_cast<double>(end - i);
      // Capacities this run misses at: caps[c] <= m.
      const std::size_t missed = static_cast<std::size_t>(std::upper_bound(caps.begin(), caps.end(), m) - caps.begin());
      const std::uint32_t* parts = nullptr;
      if (m < kBeyondTracked && total == static_cast<std::size_t>(dims_groups[0]) + dims_groups[1]) {
        while (k < shared.decomposed.size() && shared.distance[shared.decomposed[k]] < m) ++k;
        if (k < shared.decomposed.size() && shared.distance[shared.decomposed[k]] == m) {
          parts = &shared.group_distance[k * total];
        }
      }
      if (parts == nullptr) {
        for (std::size_t c = 0; c < missed; ++c) r.unattributed[c] += static_cast<std::uint32_t>(end - i);
      } else if (missed > 0) {
        double* row = &dense_[(missed - 1) * groups_total];
        const double scale = run / static_cast<double>(m);
        for (std::size_t x = 0; x < groups_total; ++x) row[x] += scale * static_cast<double>(parts[x]);
      }
      i = end;
    }
    for (std::size_t c = caps.size() - 1; c-- > 0;) {
      for (std::size_t x = 0; x < groups_total; ++x) dense_[c * groups_total + x] += dense_[(c + 1) * groups_total + x];
    }
    // The non-zero cells in (capacity, dimension, group) order, written without
    // a branch per cell (most cells of a missing request are non-zero).
    r.blame.resize(dense_.size());
    std::size_t used = 0;
    for (std::size_t c = 0; c < caps.size(); ++c) {
      const double* row = &dense_[c * groups_total];
      std::size_t x = 0;
      for (std::uint32_t d = 0; d < 2; ++d) {
        for (std::uint32_t g = 0; g < dims_groups[d]; ++g, ++x) {
          r.blame[used] = GroupRequest::Blame{static_cast<std::uint32_t>(c), d, g, row[x]};
          used += row[x] != 0 ? 1 : 0;
        }
      }
    }
    r.blame.resize(used);
  }

  r.footprint_bytes = -1;
  if (layout_->bytes_per_token > 0 && request.input_tokens >= 0) {
    r.footprint_bytes = static_cast<double>(request.input_tokens + std::max<std::int64_t>(request.output_tokens, 0)) *
                        layout_->bytes_per_token;
  }
  return r;
}

// --- LabelledTotals -------------------------------------------------------------------

void LabelledTotals::Absorb(const GroupCurves& curves, std::uint32_t d, const std::vector<std::string>& labels) {
  const std::size_t caps = curves.layout().capacities.size();
  const std::uint32_t groups = d == 0 ? curves.layout().tenant_groups : curves.layout().class_groups;
  auto name = [&](std::uint32_t g) -> std::string {
    if (g < labels.size() && !labels[g].empty()) return labels[g];
    return "(unassigned)";
  };
  for (std::uint32_t g = 0; g < groups; ++g) {
    if (curves.requests(d, g) == 0) continue;
    LabelTotals& row = rows_[name(g)];
    row.hits.resize(caps, 0);
    row.isolated_hits.resize(caps, 0);
    row.unattributed.resize(caps, 0);
    row.requests += curves.requests(d, g);
    row.page_refs += curves.page_refs(d, g);
    row.unlimited_hits += curves.unlimited_hits(d, g);
    for (std::size_t c = 0; c < caps; ++c) {
      row.hits[c] += curves.shared_hits(d, g, c);
      if (d == 0) row.isolated_hits[c] += curves.isolated_hits(g, c);
      row.unattributed[c] += curves.unattributed(d, g, c);
      for (std::uint32_t e = 0; e < groups; ++e) {
        const double v = curves.evicted_by(d, c, g, e);
        if (v == 0) continue;
        std::vector<double>& cell = row.evicted_by[name(e)];
        cell.resize(caps, 0);
        cell[c] += v;
      }
    }
  }
}

// --- RunningKv ------------------------------------------------------------------------

void RunningKv::AdvanceTo(double t) {
  while (!ends_.empty() && ends_.front().t <= t) {
    std::pop_heap(ends_.begin(), ends_.end(), std::greater<End>());
    const End e = ends_.back();
    ends_.pop_back();
    if (e.t > now_) {
      integral_ += level_ * (e.t - now_);
      now_ = e.t;
    }
    level_ -= e.bytes;
    if (ends_.empty()) level_ = 0;  // no drift from rounding
  }
  if (t > now_ && std::isfinite(t)) {
    integral_ += level_ * (t - now_);
    now_ = t;
  }
}

void RunningKv::Add(double arrival_s, double end_s, double bytes) {
  if (!std::isfinite(arrival_s) || !(bytes > 0)) return;
  if (!started_) {
    started_ = true;
    first_ = now_ = arrival_s;
  }
  ++requests_;
  AdvanceTo(arrival_s);
  if (!(end_s > arrival_s) || !std::isfinite(end_s)) return;  // holds nothing for any time
  level_ += bytes;
  peak_ = std::max(peak_, level_);
  ends_.push_back(End{end_s, bytes});
  std::push_heap(ends_.begin(), ends_.end(), std::greater<End>());
}

void RunningKv::Finish() { AdvanceTo(std::numeric_limits<double>::infinity()); }

double RunningKv::mean_bytes() const {
  const double span = now_ - first_;
  return span > 0 ? integral_ / span : 0;
}

double NearestRankQuantile(std::vector<double>* values, double q) {
  if (values->empty()) return std::nan("");
  const std::size_t n = values->size();
  std::size_t rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(n) - 1e-9));
  rank = std::clamp<std::size_t>(rank, 1, n);
  std::nth_element(values->begin(), values->begin() + static_cast<std::ptrdiff_t>(rank - 1), values->end());
  return (*values)[rank - 1];
}

}  // namespace kvwatch::curve
