#include "curve/policy_replay.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "base/byte_io.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve {

std::uint32_t RequestClassifier::Turn(std::span<const PageId> pages) const {
  for (std::size_t i = pages.size(); i-- > 0;) {
    if (const std::uint32_t* t = turns_.Find(pages[i])) return *t + 1;
  }
  return 1;
}

void RequestClassifier::Remember(std::span<const PageId> pages, std::uint32_t turn, std::size_t full_pages,
                                 std::uint32_t seen_prefix) {
  full_pages = std::min(full_pages, pages.size());
  if (full_pages == 0) return;
  const PageId end = pages[full_pages - 1];
  if (std::uint32_t* t = turns_.Find(end)) {
    *t = turn;
  } else if (seen_prefix < full_pages) {
    turns_.Insert(end, turn);
  }
}

std::size_t RequestClassifier::FullPages(std::size_t pages, std::int64_t input_tokens, std::uint64_t page_tokens) {
  if (pages == 0 || input_tokens < 0 || page_tokens == 0) return pages;
  const auto tokens = static_cast<std::uint64_t>(input_tokens);
  const bool partial = (pages - 1) * page_tokens < tokens && tokens < pages * page_tokens;
  return partial ? pages - 1 : pages;
}

void RequestClassifier::Serialize(std::vector<std::uint8_t>* out) const {
  base::AppendPod<std::uint64_t>(out, turns_.size());
  turns_.ForEach([&](std::uint64_t page, std::uint32_t turn) {
    base::AppendPod(out, page);
    base::AppendPod(out, turn);
  });
}

bool RequestClassifier::Deserialize(std::span<const std::uint8_t>* in, std::size_t max_chains) {
  std::uint64_t n = 0;
  if (turns_.size() != 0 || !base::ReadCount(in, &n, sizeof(PageId) + sizeof(std::uint32_t)) || n > max_chains) {
    return false;
  }
  turns_.Reserve(n);
  for (std::uint64_t k = 0; k < n; ++k) {
    PageId page = 0;
    std::uint32_t turn = 0;
    if (!base::ReadPod(in, &page) || !base::ReadPod(in, &turn) || turn == 0 || turn == PageMap::kEmpty ||
        turns_.Find(page) != nullptr) {
      return false;
    }
    turns_.Insert(page, turn);
  }
  return true;
}

std::string_view RequestClassifier::ClassOfTurn(std::uint32_t turn) {
  if (turn <= 1) return kDerivedClasses[0];
  if (turn == 2) return kDerivedClasses[1];
  if (turn <= 4) return kDerivedClasses[2];
  if (turn <= 8) return kDerivedClasses[3];
  return kDerivedClasses[4];
}

void ApplyLifetime(const Request& request, double arrival_s, const LifetimeOptions& options, SimRequest* sim) {
  sim->arrival_s = arrival_s;
  sim->end_s = std::nan("");
  if (std::isnan(arrival_s)) {
    // No clock: the request finishes before the next arrives.
  } else if (request.has_timestamp() && std::isfinite(request.end_timestamp_s)) {
    // The trace says when it finished: the same duration from arrival_s.
    sim->end_s = arrival_s + std::max(0.0, request.end_timestamp_s - request.timestamp_s);
  } else if (request.output_tokens >= 0 && options.decode_tokens_per_s > 0) {
    sim->end_s = arrival_s + static_cast<double>(request.output_tokens) / options.decode_tokens_per_s;
  }
  const std::uint64_t p = std::max<std::uint64_t>(1, options.page_tokens);
  std::uint64_t out = 0;
  if (request.output_tokens >= 0 && request.input_tokens >= 0) {
    const std::uint64_t total = (static_cast<std::uint64_t>(request.input_tokens + request.output_tokens) + p - 1) / p;
    out = total > request.pages.size() ? total - request.pages.size() : 0;
  } else if (request.output_tokens >= 0) {
    out = (static_cast<std::uint64_t>(request.output_tokens) + p - 1) / p;
  }
  sim->output_pages = static_cast<std::uint32_t>(std::min<std::uint64_t>(out, 0xffffffffu));
}

std::int32_t PriorityRules::For(std::string_view tenant_name, std::string_view class_name) const {
  if (auto it = tenant.find(tenant_name); it != tenant.end()) return it->second;
  if (auto it = cls.find(class_name); it != cls.end()) return it->second;
  return 0;
}

base::Result<PriorityRules> ParsePriorityRules(std::string_view text) {
  PriorityRules rules;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    start = end + 1;
    const std::size_t eq = item.rfind('=');
    if (eq == std::string_view::npos || eq == 0) {
      return base::Result<PriorityRules>::Error("expected tenant:NAME=P, class:NAME=P or NAME=P, got '" +
                                                std::string(item) + "'");
    }
    std::string_view name = item.substr(0, eq);
    std::string_view value = item.substr(eq + 1);
    std::int32_t level = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), level);
    if (ec != std::errc() || ptr != value.data() + value.size()) {
      return base::Result<PriorityRules>::Error("priority of '" + std::string(name) + "' must be an integer, got '" +
                                                std::string(value) + "'");
    }
    auto* map = &rules.tenant;
    if (name.starts_with("class:")) {
      map = &rules.cls;
      name.remove_prefix(6);
    } else if (name.starts_with("tenant:")) {
      name.remove_prefix(7);
    }
    if (name.empty()) return base::Result<PriorityRules>::Error("empty name in '" + std::string(item) + "'");
    (*map)[std::string(name)] = level;
  }
  return rules;
}

void PolicyTotals::Add(std::size_t pages, const SimOutcome& outcome, std::uint32_t unlimited_hits,
                       double coverage_share) {
  ++requests;
  page_refs += pages;
  page_hits += outcome.hits;
  if (outcome.hits >= RequiredHits(coverage_share, unlimited_hits)) ++covered_requests;
  preemptions += outcome.preempted_running + (outcome.preempted ? 1 : 0);
}

void PolicyTotals::Merge(const PolicyTotals& o) {
  requests += o.requests;
  page_refs += o.page_refs;
  page_hits += o.page_hits;
  covered_requests += o.covered_requests;
  preemptions += o.preemptions;
}

std::uint32_t StoredTrace::Intern(std::string_view name, std::vector<std::string>* names,
                                  std::map<std::string, std::uint32_t, std::less<>>* ids) {
  if (auto it = ids->find(name); it != ids->end()) return it->second;
  const auto id = static_cast<std::uint32_t>(names->size());
  names->emplace_back(name);
  ids->emplace(std::string(name), id);
  return id;
}

void StoredTrace::Add(const Request& request, std::string_view class_name, std::uint32_t unlimited_hits,
                      const LifetimeOptions& lifetime) {
  pages_.insert(pages_.end(), request.pages.begin(), request.pages.end());
  offsets_.push_back(pages_.size());
  SimRequest sim;
  ApplyLifetime(request, request.timestamp_s, lifetime, &sim);
  arrival_.push_back(sim.arrival_s);
  end_.push_back(sim.end_s);
  output_pages_.push_back(sim.output_pages);
  tenant_.push_back(Intern(request.tenant, &tenant_names_, &tenant_ids_));
  class_.push_back(Intern(class_name, &class_names_, &class_ids_));
  unlimited_hits_.push_back(unlimited_hits);
  priority_.push_back(0);
}

base::Status StoredTrace::AssignPriorities(const PriorityRules& rules) {
  for (const auto& [name, level] : rules.tenant) {
    if (!tenant_ids_.contains(name) || name.empty()) {
      return base::Status::Error("tenant '" + name + "' does not appear in the trace");
    }
  }
  for (const auto& [name, level] : rules.cls) {
    const bool derived =
        std::find(std::begin(kDerivedClasses), std::end(kDerivedClasses), name) != std::end(kDerivedClasses);
    if (!derived && !class_ids_.contains(name)) {
      return base::Status::Error("class '" + name + "' does not appear in the trace");
    }
  }
  for (std::size_t i = 0; i < size(); ++i) {
    priority_[i] = rules.For(tenant_names_[tenant_[i]], class_names_[class_[i]]);
  }
  return base::Status::Ok();
}

void StoredTrace::ComputeNextUse(TouchOrder order) {
  next_use_.assign(pages_.size(), kNeverUsed);
  PageMap index;                        // page -> slot in last_use
  std::vector<std::uint64_t> last_use;  // the page's next touch, seen walking backwards
  std::uint64_t g = pages_.size();      // global touch index, counted down
  for (std::size_t r = size(); r-- > 0;) {
    const std::uint64_t begin = offsets_[r];
    const std::size_t n = offsets_[r + 1] - begin;
    // Touch k of the request is at position pos(k); walk the touches backwards.
    for (std::size_t k = n; k-- > 0;) {
      const std::size_t pos = order == TouchOrder::kTailFirst ? n - 1 - k : k;
      --g;
      const PageId page = pages_[begin + pos];
      if (std::uint32_t* slot = index.Find(page)) {
        next_use_[begin + pos] = last_use[*slot];
        last_use[*slot] = g;
      } else {
        index.Insert(page, static_cast<std::uint32_t>(last_use.size()));
        last_use.push_back(g);
      }
    }
  }
}

SimRequest StoredTrace::At(std::size_t i) const {
  SimRequest r;
  const std::uint64_t begin = offsets_[i];
  const std::uint64_t n = offsets_[i + 1] - begin;
  r.pages = std::span<const PageId>(pages_.data() + begin, n);
  r.arrival_s = arrival_[i];
  r.end_s = end_[i];
  r.output_pages = output_pages_[i];
  r.priority = priority_[i];
  r.category = std::min(class_[i], kMaxCategories - 1);
  if (!next_use_.empty()) r.next_use = std::span<const std::uint64_t>(next_use_.data() + begin, n);
  return r;
}

base::Result<PolicyRunResult> RunPolicy(const StoredTrace& trace, const PolicyOptions& options, double coverage_share,
                                        const std::function<void(std::uint64_t)>& progress) {
  auto cache = MakePolicyCache(options);
  if (!cache.ok()) return base::Result<PolicyRunResult>::Error(cache.error());
  PolicyRunResult result;
  result.kind = options.kind;
  result.capacity = options.capacity;
  result.by_tenant.resize(trace.tenant_names().size());
  result.by_class.resize(trace.class_names().size());
  PolicyCache& sim = *cache.value();
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const SimRequest request = trace.At(i);
    const SimOutcome outcome = sim.Process(request);
    const std::uint32_t t = trace.unlimited_hits(i);
    result.total.Add(request.pages.size(), outcome, t, coverage_share);
    result.by_tenant[trace.tenant(i)].Add(request.pages.size(), outcome, t, coverage_share);
    result.by_class[trace.cls(i)].Add(request.pages.size(), outcome, t, coverage_share);
    if (progress && (i & 0xffff) == 0xffff) progress(i + 1);
  }
  if (progress) progress(trace.size());
  result.memory_bytes = sim.MemoryBytes();
  return result;
}

}  // namespace kvwatch::curve
