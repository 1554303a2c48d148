#include "agent/runtime/hybrid_analysis.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include "base/byte_io.h"
#include "curve/stack_distance.h"

namespace kvwatch::agent {

base::Result<std::optional<HybridModel>> HybridModelFor(const curve::ModelSpec& spec, int tensor_parallel,
                                                        std::uint64_t page_tokens, curve::TouchOrder touch_order,
                                                        std::uint64_t max_pages, std::uint64_t remembered_evictions,
                                                        double full_page_bytes) {
  using R = base::Result<std::optional<HybridModel>>;
  if (spec.groups.empty()) return std::optional<HybridModel>();
  auto options = curve::HybridOptionsFor(spec, tensor_parallel, page_tokens, touch_order);
  if (!options.ok()) return R::Error(options.error());
  auto sized = curve::SizeKvGroups(spec, tensor_parallel, page_tokens);
  if (!sized.ok()) return R::Error(sized.error());
  HybridModel m;
  m.engine = std::move(options).value();
  m.groups = std::move(sized).value();
  // The bound: engine.max_pages pages of the full-attention count, at most the
  // engine's range of units.
  const curve::HybridEngine probe(m.engine);
  const std::uint64_t unit = probe.unit_bytes();
  const double wanted = static_cast<double>(max_pages) * full_page_bytes;
  const double most = static_cast<double>(curve::kBeyondTracked - 1) * static_cast<double>(unit);
  std::uint64_t largest = 0;
  for (const curve::HybridGroup& g : m.engine.groups) largest = std::max(largest, g.page_bytes);
  m.engine.max_bytes = std::max(largest, static_cast<std::uint64_t>(std::min(wanted, most)));
  m.engine.remembered_evictions = remembered_evictions * m.engine.groups.size();
  if (base::Status s = curve::ValidateHybridOptions(m.engine); !s.ok()) return R::Error(s.error());
  return std::optional<HybridModel>(std::move(m));
}

std::uint64_t HybridStateItems(const HybridModel& model) {
  const curve::HybridEngine probe(model.engine);
  return model.engine.max_bytes / probe.unit_bytes() + model.engine.remembered_evictions;
}

std::string HybridGroupMismatch(const HybridModel* model, const std::vector<collectors::EngineKvGroup>& announced) {
  struct Kind {
    std::string name;
    std::int64_t window = 0;
  };
  std::vector<Kind> mine;
  if (model == nullptr) {
    mine.push_back({curve::KvGroupKindName(curve::KvGroupKind::kFull), 0});
  } else {
    for (const curve::KvGroupSizing& g : model->groups)
      mine.push_back({curve::KvGroupKindName(g.spec.kind), g.spec.window_tokens});
  }
  auto model_text = [&]() -> std::string {
    if (model == nullptr) return "the agent counts every layer as full attention (no hybrid model or model_config)";
    std::string t = "the configured model's groups: ";
    for (std::size_t i = 0; i < mine.size(); ++i) {
      if (i > 0) t.append(", ");
      t.append(mine[i].name);
      if (mine[i].window > 0) t.append(" ").append(std::to_string(mine[i].window));
    }
    return t;
  };
  std::vector<std::string> seen;
  for (const collectors::EngineKvGroup& a : announced) {
    if (a.kind == "unannounced") continue;
    seen.push_back(a.kind);
    auto same_kind = [&](const Kind& k) { return k.name == a.kind; };
    if (std::none_of(mine.begin(), mine.end(), same_kind)) {
      return "KV cache group " + std::to_string(a.group) + " announces kind " + a.kind + "; " + model_text();
    }
    if (a.kind == "sliding_window" && a.window_tokens > 0 && std::none_of(mine.begin(), mine.end(), [&](const Kind& k) {
          return same_kind(k) && k.window == a.window_tokens;
        })) {
      return "KV cache group " + std::to_string(a.group) + " announces a sliding window of " +
             std::to_string(a.window_tokens) + " tokens; " + model_text();
    }
  }
  if (seen.empty()) return "";
  for (const Kind& k : mine) {
    if (std::find(seen.begin(), seen.end(), k.name) == seen.end()) {
      return "no KV cache group announces kind " + k.name + "; " + model_text();
    }
  }
  return "";
}

namespace {

std::vector<std::uint64_t> Bounds(std::uint64_t max_units, std::uint32_t per_octave,
                                  const std::vector<std::uint64_t>& capacity_units) {
  std::vector<std::uint64_t> bounds = curve::LogBucketBounds(max_units, per_octave);
  for (std::uint64_t c : capacity_units) {
    if (c > 0) bounds.push_back(c);
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  return bounds;
}

}  // namespace

HybridAnalysis::HybridAnalysis(const HybridModel& model, std::vector<double> windows_s,
                               std::uint32_t buckets_per_octave, const std::vector<std::uint64_t>& capacities,
                               double full_page_bytes, double coverage_share)
    : model_(model), windows_s_(std::move(windows_s)), coverage_share_(coverage_share), engine_(model.engine) {
  const double unit = static_cast<double>(engine_.unit_bytes());
  for (std::uint64_t c : capacities) {
    const double units = std::floor(static_cast<double>(c) * full_page_bytes / unit);
    capacity_units_.push_back(std::min<std::uint64_t>(static_cast<std::uint64_t>(units), engine_.max_units()));
  }
  bounds_ = Bounds(engine_.max_units(), buckets_per_octave, capacity_units_);
  lifetime_ = curve::BucketedCurve(&bounds_, coverage_share_);
  ResetWindows();
}

void HybridAnalysis::Ingest(const curve::Request& request, double t) {
  engine_.Process(request.pages, request.input_tokens, request.output_tokens, &outcome_);
  windows_->Add(outcome_, t, 1, &lifetime_);
}

HybridSnapshot HybridAnalysis::TakeSnapshot(bool windows, const std::vector<double>& page_hit_targets,
                                            const std::vector<double>& coverage_targets) const {
  HybridSnapshot s;
  s.model = &model_;
  s.unit_bytes = engine_.unit_bytes();
  s.max_units = engine_.max_units();
  s.capacity_units = capacity_units_;
  s.lifetime = lifetime_;
  s.tracked_items = engine_.tracked_items();
  s.tracked_bytes = engine_.total_bytes();
  s.evicted_items = engine_.evicted_items();
  s.memory_bytes = engine_.MemoryBytes();
  if (!windows) return s;
  for (std::size_t i = 0; i < windows_->size(); ++i) {
    s.windows.push_back(windows_->Window(i));
    const curve::BucketedCurve& w = s.windows.back();
    std::vector<HybridSnapshot::GroupBytes> rows;
    auto add = [&](const char* target, double f, std::optional<std::uint64_t> units) {
      if (!units) return;
      rows.push_back({target, f, *units, engine_.GroupBytesAt(*units * s.unit_bytes)});
    };
    for (double f : page_hit_targets) add("page_hit", f, w.WorkingSetForPageHits(f));
    for (double f : coverage_targets) add("request_coverage", f, w.WorkingSetForCoverage(f));
    s.group_bytes.push_back(std::move(rows));
  }
  return s;
}

void HybridAnalysis::Serialize(std::vector<std::uint8_t>* out) const {
  const std::string fingerprint = Fingerprint();
  base::AppendPod<std::uint64_t>(out, fingerprint.size());
  out->insert(out->end(), fingerprint.begin(), fingerprint.end());
  const std::vector<std::uint8_t> engine = engine_.Serialize();
  base::AppendPod<std::uint64_t>(out, engine.size());
  out->insert(out->end(), engine.begin(), engine.end());
  lifetime_.Serialize(out);
  windows_->Serialize(out);
}

std::string HybridAnalysis::Restore(std::span<const std::uint8_t> in) {
  std::uint64_t size = 0;
  if (!base::ReadPod(&in, &size) || size > in.size()) return "malformed";
  const std::string saved(reinterpret_cast<const char*>(in.data()), size);
  if (saved != Fingerprint()) return "saved with other settings:" + saved;
  in = in.subspan(size);
  if (!base::ReadPod(&in, &size) || size > in.size() || !engine_.Deserialize(in.first(size))) return "engine state";
  in = in.subspan(size);
  if (!lifetime_.Deserialize(&in) || !windows_->Deserialize(&in) || !in.empty()) return "curves";
  return {};
}

void HybridAnalysis::Reset() {
  engine_.Clear();
  lifetime_.Clear();
  ResetWindows();
}

void HybridAnalysis::ResetWindows() {
  windows_ = std::make_unique<curve::WindowedCurves>(windows_s_, &bounds_, coverage_share_);
}

// What must match for a saved hybrid state to mean the same thing.
std::string HybridAnalysis::Fingerprint() const {
  std::ostringstream f;
  f << " hybrid=" << model_.engine.page_tokens << "/" << model_.engine.max_bytes << "/"
    << model_.engine.remembered_evictions << "/" << (model_.engine.early_free ? "early" : "late") << ":";
  for (const curve::HybridGroup& g : model_.engine.groups) {
    f << curve::KvGroupKindName(g.kind) << "," << g.window_tokens << "," << g.page_bytes << ";";
  }
  f << " hybrid_bounds=" << bounds_.size() << ":" << bounds_.back();
  return f.str();
}

}  // namespace kvwatch::agent
