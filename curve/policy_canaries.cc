#include "curve/policy_canaries.h"

#include <algorithm>
#include <cstring>

#include "base/byte_io.h"
#include "curve/stack_distance.h"

namespace kvwatch::curve {

namespace {

// Marks the start of a canaries checkpoint ("KVPC"), and its layout version (3:
// every policy writes its core: sglang and vllm with their running requests,
// curve/policy_lifetime.h, arc and s3fifo their core too, curve/policy_core_cache.h;
// 2: lru and fifo wrote their core; a checkpoint of an older version is refused
// and the canaries start fresh).
constexpr std::uint32_t kCheckpointTag = 0x4350564b;
constexpr std::uint32_t kCheckpointVersion = 3;

// Every option that shapes the canaries' state or its future, in a fixed order:
// a checkpoint restores only into canaries whose encoding is byte-identical.
std::vector<std::uint8_t> EncodeOptions(const CanaryOptions& o) {
  std::vector<std::uint8_t> out;
  out.reserve(256);  // also spares g++ 12 a false -Wstringop-overflow on the first insert
  base::AppendPod<std::uint64_t>(&out, o.policies.size());
  for (PolicyKind kind : o.policies) base::AppendPod<std::uint8_t>(&out, static_cast<std::uint8_t>(kind));
  base::AppendPod<std::uint64_t>(&out, o.capacities.size());
  for (std::uint64_t c : o.capacities) base::AppendPod(&out, c);
  base::AppendPod<std::uint8_t>(&out, static_cast<std::uint8_t>(o.touch_order));
  base::AppendPod(&out, o.coverage_share);
  base::AppendPod(&out, o.lifetime.decode_tokens_per_s);
  base::AppendPod(&out, o.lifetime.page_tokens);
  for (const auto* rules : {&o.priorities.tenant, &o.priorities.cls}) {
    base::AppendPod<std::uint64_t>(&out, rules->size());
    for (const auto& [name, level] : *rules) {
      base::AppendString(&out, name);
      base::AppendPod(&out, level);
    }
  }
  base::AppendPod<std::uint64_t>(&out, o.windows_s.size());
  for (double w : o.windows_s) base::AppendPod(&out, w);
  base::AppendPod(&out, o.s3fifo_promotion_hits);
  return out;
}

void AppendTotals(std::vector<std::uint8_t>* out, const PolicyTotals& t) {
  for (std::uint64_t v : {t.requests, t.page_refs, t.page_hits, t.covered_requests, t.preemptions}) {
    base::AppendPod(out, v);
  }
}

bool ReadTotals(std::span<const std::uint8_t>* in, PolicyTotals* t) {
  for (std::uint64_t* v : {&t->requests, &t->page_refs, &t->page_hits, &t->covered_requests, &t->preemptions}) {
    if (!base::ReadPod(in, v)) return false;
  }
  return true;
}

// Whether the derived class can change what a canary does: it feeds only
// SimRequest::category, which only workload-aware reads, and, through class
// rules, SimRequest::priority, which only priority reads (curve/policy.h).
bool UsesClass(const CanaryOptions& o) {
  return std::any_of(o.policies.begin(), o.policies.end(), [&](PolicyKind kind) {
    return kind == PolicyKind::kWorkloadAware || (kind == PolicyKind::kPriority && !o.priorities.cls.empty());
  });
}

}  // namespace

PolicyCanaries::PolicyCanaries(const CanaryOptions& options, std::size_t canaries)
    : options_(options),
      uses_class_(UsesClass(options)),
      windows_(options.windows_s, Slice{std::vector<PolicyTotals>(canaries)}) {
  queued_.reserve(kSettleRequests);
  outcomes_.reserve(kSettleRequests * canaries);
}

base::Result<std::unique_ptr<PolicyCanaries>> PolicyCanaries::Create(const CanaryOptions& options) {
  using R = base::Result<std::unique_ptr<PolicyCanaries>>;
  for (PolicyKind kind : options.policies) {
    if (NeedsFuture(kind)) {
      return R::Error("policy '" + std::string(PolicyName(kind)) + "' needs the future: it runs only in replay");
    }
  }
  std::unique_ptr<PolicyCanaries> c(new PolicyCanaries(options, options.policies.size() * options.capacities.size()));
  for (PolicyKind kind : options.policies) {
    for (std::uint64_t capacity : options.capacities) {
      PolicyOptions po;
      po.kind = kind;
      po.capacity = capacity;
      po.touch_order = options.touch_order;
      po.s3fifo_promotion_hits = options.s3fifo_promotion_hits;
      if (c->FromEngine(kind)) {  // read from the engine's outcome: no cache of its own
        if (base::Status s = CheckPolicyOptions(po); !s.ok()) return R::Error(s.error());
        c->canaries_.push_back(Canary{kind, capacity, nullptr, {}});
        continue;
      }
      auto cache = MakePolicyCache(po);
      if (!cache.ok()) return R::Error(cache.error());
      c->canaries_.push_back(Canary{kind, capacity, std::move(cache.value()), {}});
    }
  }
  return c;
}

void PolicyCanaries::Add(const Request& request, std::uint32_t unlimited_hits, double t, const RequestOutcome* exact) {
  if (Due()) Settle();
  Queued& q = queued_.emplace_back();
  q.first = queued_pages_.size();
  q.pages = request.pages.size();
  q.unlimited_hits = unlimited_hits;
  q.t = t;
  queued_pages_.insert(queued_pages_.end(), request.pages.begin(), request.pages.end());
  SimRequest& sim = q.sim;
  ApplyLifetime(request, request.has_timestamp() ? request.timestamp_s : t, options_.lifetime, &sim);
  std::string_view cls;  // empty unless a canary reads it: then no class rule applies (UsesClass)
  if (uses_class_) {
    if (classifier_.size() > kMaxClassifierChains) classifier_.Clear();
    // unlimited_hits is 0 when unknown (sampled mode): every request then ends a
    // chain (RequestClassifier::Remember).
    const std::size_t full_pages =
        RequestClassifier::FullPages(request.pages.size(), request.input_tokens, options_.lifetime.page_tokens);
    cls = RequestClassifier::ClassOfTurn(classifier_.Observe(request.pages, full_pages, unlimited_hits));
    // Categories: the derived classes, in kDerivedClasses order.
    sim.category = static_cast<std::uint32_t>(std::find(std::begin(kDerivedClasses), std::end(kDerivedClasses), cls) -
                                              std::begin(kDerivedClasses));
  }
  if (!options_.priorities.empty()) sim.priority = options_.priorities.For(request.tenant, cls);
  // The lru canaries read the engine's outcome now: it is the caller's, for this request only.
  outcomes_.resize(outcomes_.size() + canaries_.size());
  SimOutcome* outcomes = &outcomes_[outcomes_.size() - canaries_.size()];
  for (std::size_t i = 0; i < canaries_.size(); ++i) {
    if (canaries_[i].cache) continue;
    // Page i hits at capacity C iff its prefix maximum is below C; the prefix
    // maxima ascend, and kCold / kBeyondTracked are above every capacity.
    const auto& m = exact->prefix_max;
    outcomes[i].hits =
        static_cast<std::uint32_t>(std::lower_bound(m.begin(), m.end(), canaries_[i].capacity,
                                                    [](std::uint64_t d, std::uint64_t cap) { return d < cap; }) -
                                   m.begin());
  }
}

void PolicyCanaries::Settle() const {
  if (queued_.empty()) return;
  const std::size_t n = canaries_.size();
  for (Queued& q : queued_) {
    q.sim.pages = std::span<const PageId>(queued_pages_).subspan(q.first, q.pages);
  }
  for (std::size_t i = 0; i < n; ++i) {
    PolicyCache* cache = canaries_[i].cache.get();
    if (cache == nullptr) continue;
    for (std::size_t r = 0; r < queued_.size(); ++r) outcomes_[r * n + i] = cache->Process(queued_[r].sim);
  }
  for (std::size_t r = 0; r < queued_.size(); ++r) {
    const Queued& q = queued_[r];
    const SimOutcome* outcomes = &outcomes_[r * n];
    const std::size_t pages = q.pages;
    for (std::size_t i = 0; i < n; ++i) {
      canaries_[i].lifetime.Add(pages, outcomes[i], q.unlimited_hits, options_.coverage_share);
    }
    windows_.Add(q.t, [&](Slice& slice) {
      for (std::size_t i = 0; i < n; ++i) {
        slice.totals[i].Add(pages, outcomes[i], q.unlimited_hits, options_.coverage_share);
      }
    });
  }
  queued_.clear();
  queued_pages_.clear();
  outcomes_.clear();
}

PolicyTotals PolicyCanaries::Window(std::size_t canary, std::size_t w) const {
  Settle();
  PolicyTotals sum;
  for (const Slice& slice : windows_.rings()[w].ring) sum.Merge(slice.totals[canary]);
  return sum;
}

std::size_t PolicyCanaries::MemoryBytes() const {
  Settle();
  std::size_t bytes = classifier_.MemoryBytes();
  for (const Canary& c : canaries_) bytes += c.cache ? c.cache->MemoryBytes() : 0;
  return bytes + windows_.size() * SlidingWindows<Slice>::kSlicesPerWindow * canaries_.size() * sizeof(PolicyTotals);
}

void PolicyCanaries::Serialize(std::vector<std::uint8_t>* out) const {
  Settle();
  base::AppendPod(out, kCheckpointTag);
  base::AppendPod(out, kCheckpointVersion);
  const std::vector<std::uint8_t> options = EncodeOptions(options_);
  base::AppendPod<std::uint64_t>(out, options.size());
  out->insert(out->end(), options.begin(), options.end());
  classifier_.Serialize(out);
  std::vector<std::uint8_t> cache;
  for (const Canary& c : canaries_) {
    AppendTotals(out, c.lifetime);
    // Length-prefixed, so that a cache must consume exactly its own bytes.
    cache.clear();
    if (c.cache) c.cache->Serialize(&cache);
    base::AppendPod<std::uint64_t>(out, cache.size());
    out->insert(out->end(), cache.begin(), cache.end());
  }
  base::AppendPod<std::uint8_t>(out, windows_.started() ? 1 : 0);
  base::AppendPod(out, windows_.now());
  for (const auto& w : windows_.rings()) {
    base::AppendPod(out, w.newest_slice);
    for (const Slice& slice : w.ring) {
      for (const PolicyTotals& t : slice.totals) AppendTotals(out, t);
    }
  }
}

bool PolicyCanaries::Deserialize(std::span<const std::uint8_t>* in) {
  // Everything is read into new parts first; the object changes only on success
  // (the queue is settled either way: what was added stays added on failure).
  Settle();
  std::span<const std::uint8_t> at = *in;
  std::uint32_t tag = 0, version = 0;
  std::uint64_t options_size = 0;
  if (!base::ReadPod(&at, &tag) || tag != kCheckpointTag || !base::ReadPod(&at, &version) ||
      version != kCheckpointVersion || !base::ReadCount(&at, &options_size, 1)) {
    return false;
  }
  const std::vector<std::uint8_t> options = EncodeOptions(options_);
  if (options_size != options.size() || std::memcmp(at.data(), options.data(), options.size()) != 0) return false;
  at = at.subspan(options.size());

  RequestClassifier classifier;
  if (!classifier.Deserialize(&at, kMaxClassifierChains + 1)) return false;
  std::vector<PolicyTotals> lifetimes(canaries_.size());
  std::vector<std::unique_ptr<PolicyCache>> caches;
  for (std::size_t i = 0; i < canaries_.size(); ++i) {
    std::uint64_t size = 0;
    if (!ReadTotals(&at, &lifetimes[i]) || !base::ReadCount(&at, &size, 1)) return false;
    if (FromEngine(canaries_[i].kind)) {
      // Nothing to rebuild: the restored engine carries this canary's state (any
      // bytes the checkpoint holds for it are skipped).
      at = at.subspan(static_cast<std::size_t>(size));
      caches.emplace_back();
      continue;
    }
    PolicyOptions po;
    po.kind = canaries_[i].kind;
    po.capacity = canaries_[i].capacity;
    po.touch_order = options_.touch_order;
    po.s3fifo_promotion_hits = options_.s3fifo_promotion_hits;
    auto cache = MakePolicyCache(po);
    if (!cache.ok()) return false;
    std::span<const std::uint8_t> bytes = at.first(static_cast<std::size_t>(size));
    if (!cache.value()->Deserialize(&bytes) || !bytes.empty()) return false;
    at = at.subspan(static_cast<std::size_t>(size));
    caches.push_back(std::move(cache.value()));
  }

  std::uint8_t started = 0;
  double now = 0;
  if (!base::ReadPod(&at, &started) || started > 1 || !base::ReadPod(&at, &now)) return false;
  SlidingWindows<Slice> windows(options_.windows_s, Slice{std::vector<PolicyTotals>(canaries_.size())});
  windows.Restore(started != 0, now);
  for (auto& w : windows.rings()) {
    if (!base::ReadPod(&at, &w.newest_slice)) return false;
    for (Slice& slice : w.ring) {
      for (PolicyTotals& t : slice.totals) {
        if (!ReadTotals(&at, &t)) return false;
      }
    }
  }

  // Chains restored for canaries that never read the class would only hold memory.
  if (!uses_class_) classifier.Clear();
  classifier_ = std::move(classifier);
  for (std::size_t i = 0; i < canaries_.size(); ++i) {
    canaries_[i].cache = std::move(caches[i]);
    canaries_[i].lifetime = lifetimes[i];
  }
  windows_ = std::move(windows);
  *in = at;
  return true;
}

std::optional<std::uint32_t> PolicyCanaries::CheckpointVersion(std::span<const std::uint8_t> in) {
  std::uint32_t tag = 0, version = 0;
  if (!base::ReadPod(&in, &tag) || tag != kCheckpointTag || !base::ReadPod(&in, &version)) return std::nullopt;
  return version;
}

std::uint32_t PolicyCanaries::CheckpointVersionWritten() { return kCheckpointVersion; }

}  // namespace kvwatch::curve
