#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/sections.h"
#include "curve/policy.h"
#include "curve/policy_replay.h"

namespace kvwatch::config::internal {

using base::Result;
using base::Status;

namespace {

constexpr Choice<curve::TouchOrder> kTouchOrders[] = {
    {"tail-first", curve::TouchOrder::kTailFirst},
    {"head-first", curve::TouchOrder::kHeadFirst},
};

}  // namespace

Status ParseEngineSection(FieldReader& r, const Entry& section, EngineSettings* engine) {
  return r.ForEachKey(section, [&](const Entry& e) -> Status {
    const std::string& k = e.pattern;
    if (k == "engine.max_pages") return r.ReadInt(e, 1, std::int64_t{1} << 31, &engine->max_pages);
    if (k == "engine.touch_order") return r.ReadChoice(e, kTouchOrders, &engine->touch_order);
    if (k == "engine.coverage_share") return r.ReadFraction(e, &engine->coverage_share);
    if (k == "engine.sample_rate") return r.ReadFraction(e, &engine->sample_rate);
    if (k == "engine.sample_max_pages") {
      return r.ReadInt(e, 0, std::int64_t{1} << 31, &engine->sample_max_pages);
    }
    if (k == "engine.remembered_evictions") {
      return r.ReadInt(e, 0, std::numeric_limits<std::int64_t>::max(), &engine->remembered_evictions);
    }
    return r.Unhandled(e);
  });
}

namespace {

Status ParseWindows(FieldReader& r, const Entry& e, curve::WindowSet* out) {
  if (Status s = r.CheckType(e, ConfigType::kDurationList); !s.ok()) return s;
  Result<std::vector<Entry>> items = r.Items(e);
  if (!items.ok()) return items.status();
  if (items.value().empty()) return r.Expected(e, "at least one window");
  std::map<double, std::string> seen;  // seconds -> path
  std::vector<curve::Window> windows;
  for (const Entry& item : items.value()) {
    curve::Window window;
    if (Status s = r.ReadDuration(item, true, &window.seconds); !s.ok()) return s;
    if (auto [it, added] = seen.emplace(window.seconds, item.path); !added) {
      return r.Fail(item, "the same duration as " + it->second);
    }
    window.name = item.node.Scalar();
    windows.push_back(std::move(window));
  }
  *out = curve::WindowSet(std::move(windows));  // sorted by length
  return Status::Ok();
}

Status ParseCapacities(FieldReader& r, const Entry& e, std::vector<std::uint64_t>* capacities, CurveNotes* notes) {
  if (Status s = r.CheckType(e, ConfigType::kIntList); !s.ok()) return s;
  Result<std::vector<Entry>> items = r.Items(e);
  if (!items.ok()) return items.status();
  std::map<std::uint64_t, std::string> seen;  // pages -> path
  notes->capacity_paths.clear();
  for (const Entry& item : items.value()) {
    std::uint64_t pages = 0;
    if (Status s = r.ReadInt(item, 1, std::numeric_limits<std::int64_t>::max(), &pages); !s.ok()) {
      return s;
    }
    if (auto [it, added] = seen.emplace(pages, item.path); !added) {
      return r.Fail(item, "duplicate of " + it->second);
    }
    notes->capacity_paths.emplace_back(pages, item.path);
  }
  capacities->clear();
  for (const auto& [pages, path] : seen) capacities->push_back(pages);
  return Status::Ok();
}

// A policy that can run live.
Status ReadOnlinePolicy(const FieldReader& r, const Entry& e, curve::PolicyKind* out) {
  std::string name;
  if (Status s = r.ReadString(e, &name); !s.ok()) return s;
  Result<curve::PolicyKind> kind = curve::ParsePolicyName(name);
  if (!kind.ok()) return r.Fail(e, kind.error());
  if (curve::NeedsFuture(kind.value())) {
    return r.Fail(e, "policy '" + name + "' needs the future: it runs only in replay");
  }
  *out = kind.value();
  return Status::Ok();
}

Status ReadOnlinePolicies(FieldReader& r, const Entry& e, std::vector<curve::PolicyKind>* out) {
  if (Status s = r.CheckType(e, ConfigType::kStringList); !s.ok()) return s;
  Result<std::vector<Entry>> items = r.Items(e);
  if (!items.ok()) return items.status();
  out->clear();
  for (const Entry& item : items.value()) {
    curve::PolicyKind kind{};
    if (Status s = ReadOnlinePolicy(r, item, &kind); !s.ok()) return s;
    out->push_back(kind);
  }
  return Status::Ok();
}

}  // namespace

Status ParseCurveSection(FieldReader& r, const Entry& section, CurveSettings* curve, CurveNotes* notes) {
  return r.ForEachKey(section, [&](const Entry& e) -> Status {
    const std::string& k = e.pattern;
    if (k == "curve.windows") return ParseWindows(r, e, &curve->windows);
    if (k == "curve.buckets_per_octave") return r.ReadInt(e, 4, 64, &curve->buckets_per_octave);
    if (k == "curve.page_hit_targets") return r.ReadFractionList(e, &curve->page_hit_targets);
    if (k == "curve.coverage_targets") return r.ReadFractionList(e, &curve->coverage_targets);
    if (k == "curve.capacities") return ParseCapacities(r, e, &curve->capacities, notes);
    if (k == "curve.knee_sensitivity") {
      return r.ReadNumber(e, Positive, "> 0", &curve->knee_sensitivity);
    }
    if (k == "curve.knee_window_min_requests") {
      return r.ReadInt(e, 0, std::numeric_limits<std::int64_t>::max(), &curve->knee_window_min_requests);
    }
    if (k == "curve.policies") return ReadOnlinePolicies(r, e, &curve->policies);
    if (k == "curve.engine_policy") return ReadOnlinePolicy(r, e, &curve->engine_policy);
    if (k == "curve.decode_tokens_per_second") {
      return r.ReadNumber(e, Positive, "> 0", &curve->decode_tokens_per_second);
    }
    if (k == "curve.prefill_seconds") {
      return r.ReadNumber(e, NonNegative, ">= 0", &curve->prefill_seconds);
    }
    if (k == "curve.max_clock_skew") return r.ReadDuration(e, true, &curve->max_clock_skew_s);
    if (k == "curve.s3fifo_promotion_hits") {
      return r.ReadInt(e, 1, curve::kMaxS3FifoPromotionHits, &curve->s3fifo_promotion_hits);
    }
    if (k == "curve.policy_priorities") {
      std::string text;
      if (Status s = r.ReadString(e, &text); !s.ok()) return s;
      Result<curve::PriorityRules> rules = curve::ParsePriorityRules(text);
      if (!rules.ok()) return r.Fail(e, rules.error());
      curve->policy_priorities = std::move(rules).value();
      return Status::Ok();
    }
    return r.Unhandled(e);
  });
}

Status ResolveCurve(const FieldReader& r, const CurveNotes& notes, AgentConfig* c) {
  if (!r.Written("engine.remembered_evictions")) c->engine.remembered_evictions = c->engine.max_pages;
  for (const auto& [pages, path] : notes.capacity_paths) {
    if (pages > c->engine.max_pages) {
      return r.FailAtPath(path, std::to_string(pages) + " pages is beyond engine.max_pages (" +
                                    std::to_string(c->engine.max_pages) +
                                    "), where curves are not exact; raise engine.max_pages");
    }
  }
  if (!c->curve.policies.empty()) {
    if (c->curve.capacities.empty()) {
      return r.FailAtPath("curve.policies", "policy canaries run at curve.capacities; give the replica's cache sizes");
    }
    const std::size_t canaries = c->curve.CanaryPolicies().size() * c->curve.capacities.size();
    if (canaries > 64) {
      return r.FailAtPath("curve.policies", std::to_string(canaries) +
                                                " canaries (policies x capacities, with curve.engine_policy); at "
                                                "most 64");
    }
  }
  return Status::Ok();
}

}  // namespace kvwatch::config::internal

namespace kvwatch::config {

std::vector<curve::PolicyKind> CurveSettings::CanaryPolicies() const {
  if (policies.empty()) return {};
  std::vector<curve::PolicyKind> kinds = {engine_policy};
  for (curve::PolicyKind kind : policies) {
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
  }
  return kinds;
}

}  // namespace kvwatch::config
