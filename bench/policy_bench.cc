// Simulation speed of each eviction policy (curve/policy.h) on the coding-agent
// trace in ../shared/data/weka (skipped when absent), at one capacity, beside the
// stack-distance engine + curve accumulator (what gives the LRU curve at every
// capacity at once) measured in the same run. Each row is one core; the counter
// Mrefs_per_s is page references simulated per second, in millions.
//
//   build/bench/policy_bench --benchmark_counters_tabular=true
//
// The weka trace's pages are 512 tokens (input_length / hash_ids); generated
// pages for sglang and vllm use that, at the default decode rate of 50 tokens/s.
//
// VsLibCacheSim/<policy> (issue 26): lru, fifo, arc and s3fifo against loops that
// do what libCacheSim's cache->get does, over the same requests with the same
// check-then-touch semantics (a request's hits are its leading resident pages,
// then every page is one get in touch order), timed alternately in the same
// iteration (thread CPU time); ratio = kvwatch's references per second / the baseline's. The
// baseline's data structures are libCacheSim's (github.com/1a1a11a/libCacheSim,
// read at commit 15463060, LRU.c, FIFO.c, ARC.c, S3FIFO.c, chainedHashTableV2.c,
// cacheObj.h): a chained hash table of object pointers (2^23 buckets, its
// HASH_POWER_DEFAULT, doubling past 2 objects a bucket), one malloc'd object of
// about 80 bytes per cached id (freed on eviction), intrusive doubly linked
// queues of object pointers; S3-FIFO as three FIFO caches (small, main, ghost),
// each with its own table, an object moving between them freed and allocated
// again, as S3FIFO.c does. No libCacheSim code is used; the loops are written
// from those files' logic.
//
//   build/bench/policy_bench --benchmark_filter=VsLibCacheSim --benchmark_counters_tabular=true
//
// Canaries (issue 26): the live agent's canary path (curve/policy_canaries.h,
// PolicyCanaries::Add) with the agent-load bench's set: lru (the engine policy),
// sglang, vllm and s3fifo at 20,000 and 100,000 pages (eight canaries) and the
// default windows (5m, 1h, 24h), over the trace's requests. In the same iteration
// the same eight caches are driven bare (PolicyCache::Process on the stored
// requests, no classifier, totals or windows, one cache after the other over the
// whole trace, so each cache's working set stays warm, which the canaries, eight
// caches per request, cannot have); ratio = the canaries' references per second /
// the bare caches'. Thread CPU time. Mrefs_per_s counts each reference once (all eight
// canaries per reference), so 1 / Mrefs_per_s is the canaries' microseconds per
// reference in the agent's budget (docs/performance.md).
//
//   build/bench/policy_bench --benchmark_filter=Canaries --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/mix.h"
#include "collectors/trace_reader.h"
#include "curve/curve_accumulator.h"
#include "curve/policy.h"
#include "curve/policy_canaries.h"
#include "curve/policy_replay.h"
#include "curve/stack_distance.h"

namespace {

using namespace kvwatch::curve;

constexpr std::uint64_t kCapacity = 20000;

struct Loaded {
  StoredTrace trace;
  std::vector<Request> requests;  // as read, for the canaries (Canaries)
  bool ok = false;
};

const Loaded& Weka() {
  static Loaded w = [] {
    Loaded l;
    // The environment's KVWATCH_SHARED_DATA, when set, overrides the build's (a worktree
    // elsewhere than beside ../shared).
    const char* env = std::getenv("KVWATCH_SHARED_DATA");
    const std::string path =
        std::string(env != nullptr ? env : KVWATCH_SHARED_DATA) + "/weka/claude_code_sessions_merged.jsonl.gz";
    if (!std::filesystem::exists(path)) return l;
    EngineOptions eo;
    eo.remembered_evictions = 0;
    StackDistanceEngine engine(eo);
    RequestOutcome out;
    RequestClassifier classifier;
    LifetimeOptions lifetime;
    lifetime.page_tokens = 512;
    kvwatch::collectors::TraceCallbacks cb;
    cb.on_request = [&](Request& r) {
      engine.Process(r.pages, &out);
      const std::size_t full = RequestClassifier::FullPages(r.pages.size(), r.input_tokens, lifetime.page_tokens);
      l.trace.Add(r, RequestClassifier::ClassOfTurn(classifier.Observe(r.pages, full, out.unlimited_hits)),
                  out.unlimited_hits, lifetime);
      l.requests.push_back(r);
    };
    auto s = kvwatch::collectors::ReadTrace(path, {}, cb);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.error().c_str());
      return l;
    }
    PriorityRules rules;
    rules.cls["turn9+"] = 2;
    rules.cls["turn5-8"] = 1;
    if (!l.trace.AssignPriorities(rules).ok()) return l;
    l.trace.ComputeNextUse(TouchOrder::kTailFirst);
    l.ok = true;
    return l;
  }();
  return w;
}

// The trace, or nullptr with the benchmark skipped.
const Loaded* WekaOrSkip(benchmark::State& state) {
  const Loaded& w = Weka();
  if (!w.ok) {
    state.SkipWithError("../shared/data/weka is absent");
    return nullptr;
  }
  return &w;
}

// CPU time of this thread: the machine is shared, and wall time follows the load.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The counters of a timed pair: millions of references per second of each side
// (named `ours` and `base`), and ratio = the base's time / ours.
void PairCounters(benchmark::State& state, std::uint64_t page_refs, double ours_s, double base_s, const char* ours,
                  const char* base) {
  const double refs = static_cast<double>(page_refs) * static_cast<double>(state.iterations());
  state.counters[ours] = refs / ours_s * 1e-6;
  state.counters[base] = refs / base_s * 1e-6;
  state.counters["ratio"] = base_s / ours_s;
}

void StackEngine(benchmark::State& state) {
  const Loaded* loaded = WekaOrSkip(state);
  if (loaded == nullptr) return;
  const Loaded& w = *loaded;
  std::uint64_t hits = 0;
  for (auto _ : state) {
    EngineOptions eo;
    eo.remembered_evictions = 0;
    StackDistanceEngine engine(eo);
    CurveAccumulator acc;
    RequestOutcome out;
    for (std::size_t i = 0; i < w.trace.size(); ++i) {
      engine.Process(w.trace.At(i).pages, &out);
      acc.Add(out);
    }
    hits = acc.PageHits(kCapacity);
  }
  state.counters["Mrefs_per_s"] = benchmark::Counter(static_cast<double>(w.trace.page_refs()) * 1e-6,
                                                     benchmark::Counter::kIsIterationInvariantRate);
  state.counters["hit_ratio"] = static_cast<double>(hits) / static_cast<double>(w.trace.page_refs());
}

// The trace, or nullptr (the benchmark skipped); *o the policy at kCapacity, labelled.
const Loaded* Setup(benchmark::State& state, PolicyKind kind, PolicyOptions* o) {
  const Loaded* w = WekaOrSkip(state);
  if (w == nullptr) return nullptr;
  o->kind = kind;
  o->capacity = kCapacity;
  state.SetLabel(std::string(PolicyName(kind)));
  return w;
}

void Policy(benchmark::State& state) {
  PolicyOptions o;
  const Loaded* loaded = Setup(state, kAllPolicies[state.range(0)], &o);
  if (loaded == nullptr) return;
  const Loaded& w = *loaded;
  PolicyRunResult last;
  for (auto _ : state) {
    auto run = RunPolicy(w.trace, o, 1.0);
    if (!run.ok()) {
      state.SkipWithError(run.error().c_str());
      return;
    }
    last = std::move(run.value());
  }
  state.counters["Mrefs_per_s"] = benchmark::Counter(static_cast<double>(w.trace.page_refs()) * 1e-6,
                                                     benchmark::Counter::kIsIterationInvariantRate);
  state.counters["hit_ratio"] = last.total.PageHitRatio();
  state.counters["sim_MB"] = static_cast<double>(last.memory_bytes) / 1e6;
}

// ------------------------------------------------------------------ libCacheSim-equivalent baselines

namespace libcs {

// cache_obj_t's fields as the simulators use them (packed, about 80 bytes).
#pragma pack(push, 1)
struct Obj {
  Obj* hash_next = nullptr;
  std::uint64_t id = 0;
  std::uint32_t size = 1;
  Obj* prev = nullptr;  // queue
  Obj* next = nullptr;
  std::uint32_t exp_time = 0;
  std::int64_t next_access_vtime = 0;  // misc
  std::int32_t freq = 0;               // misc / S3FIFO freq
  std::int32_t list = 0;               // ARC's lru_id
  bool ghost = false;
  char rest[23] = {};  // the rest of the per-algorithm union
};
#pragma pack(pop)

// chainedHashTableV2: bucket heads, objects chained through hash_next, insert at
// the bucket's head, delete walks the chain and frees.
class Table {
 public:
  explicit Table(int hashpower = 23) : power_(hashpower), buckets_(std::size_t{1} << hashpower, nullptr) {}
  ~Table() {
    for (Obj* o : buckets_) {
      while (o != nullptr) {
        Obj* n = o->hash_next;
        delete o;
        o = n;
      }
    }
  }
  Obj* Find(std::uint64_t id) const {
    for (Obj* o = buckets_[Bucket(id)]; o != nullptr; o = o->hash_next) {
      if (o->id == id) return o;
    }
    return nullptr;
  }
  Obj* Insert(std::uint64_t id) {
    if (n_ > 2 * buckets_.size()) Expand();
    Obj* o = new Obj;
    o->id = id;
    Link(o);
    ++n_;
    return o;
  }
  void Delete(Obj* o) {
    Obj** p = &buckets_[Bucket(o->id)];
    while (*p != o) p = &(*p)->hash_next;
    *p = o->hash_next;
    delete o;
    --n_;
  }

 private:
  std::size_t Bucket(std::uint64_t id) const { return kvwatch::base::Mix64(id) & (buckets_.size() - 1); }
  void Link(Obj* o) {
    Obj*& head = buckets_[Bucket(o->id)];
    o->hash_next = head;
    head = o;
  }
  void Expand() {
    std::vector<Obj*> old(std::size_t{1} << ++power_, nullptr);
    old.swap(buckets_);
    for (Obj* o : old) {
      while (o != nullptr) {
        Obj* n = o->hash_next;
        Link(o);
        o = n;
      }
    }
  }
  int power_;
  std::vector<Obj*> buckets_;
  std::size_t n_ = 0;
};

// A queue with its head the newest (prepend) and its tail the next to leave.
struct Queue {
  Obj* head = nullptr;
  Obj* tail = nullptr;
  std::uint64_t n = 0;
  void Prepend(Obj* o) {
    o->prev = nullptr;
    o->next = head;
    if (head != nullptr)
      head->prev = o;
    else
      tail = o;
    head = o;
    ++n;
  }
  void Remove(Obj* o) {
    if (o->prev != nullptr)
      o->prev->next = o->next;
    else
      head = o->next;
    if (o->next != nullptr)
      o->next->prev = o->prev;
    else
      tail = o->prev;
    o->prev = o->next = nullptr;
    --n;
  }
};

// LRU.c / FIFO.c: cache_get_base = find (LRU moves a hit to the head), on a miss
// evict the tail while full, then insert at the head.
class Lru {
 public:
  Lru(std::uint64_t capacity, bool fifo) : capacity_(capacity), fifo_(fifo) {}
  bool Check(std::uint64_t id) const { return table_.Find(id) != nullptr; }
  void Get(std::uint64_t id) {
    if (Obj* o = table_.Find(id)) {
      if (!fifo_) {
        q_.Remove(o);
        q_.Prepend(o);
      }
      return;
    }
    while (q_.n >= capacity_) {
      Obj* victim = q_.tail;
      q_.Remove(victim);
      table_.Delete(victim);
    }
    q_.Prepend(table_.Insert(id));
  }

 private:
  std::uint64_t capacity_;
  bool fifo_;
  Table table_;
  Queue q_;
};

// ARC.c: T1, T2 and the ghosts B1, B2 as four queues of objects in one table
// (ghosts flagged), the algorithm of Megiddo and Modha's Figure 4 (the same cases
// as curve/policy_core_arc.cc).
class Arc {
 public:
  explicit Arc(std::uint64_t capacity) : c_(capacity) {}
  bool Check(std::uint64_t id) const {
    const Obj* o = table_.Find(id);
    return o != nullptr && !o->ghost;
  }
  void Get(std::uint64_t id) {
    const double c = static_cast<double>(c_);
    if (Obj* o = table_.Find(id)) {
      if (!o->ghost) {
        Move(o, kT2);
        return;
      }
      const double b1 = static_cast<double>(q_[kB1].n), b2 = static_cast<double>(q_[kB2].n);
      if (o->list == kB1) {
        p_ = std::min(c, p_ + (b1 >= b2 ? 1.0 : b2 / b1));
      } else {
        p_ = std::max(0.0, p_ - (b2 >= b1 ? 1.0 : b1 / b2));
      }
      Replace(o->list == kB2);
      Move(o, kT2);
      return;
    }
    const std::uint64_t l1 = q_[kT1].n + q_[kB1].n;
    const std::uint64_t total = l1 + q_[kT2].n + q_[kB2].n;
    if (l1 == c_) {
      if (q_[kT1].n < c_) {
        Drop(q_[kB1].tail);
        Replace(false);
      } else {
        Drop(q_[kT1].tail);
      }
    } else if (total >= c_) {
      if (total == 2 * c_) Drop(q_[kB2].tail);
      Replace(false);
    }
    Obj* o = table_.Insert(id);
    o->list = kT1;
    q_[kT1].Prepend(o);
  }

 private:
  enum { kT1 = 0, kT2 = 1, kB1 = 2, kB2 = 3 };
  void Move(Obj* o, int to) {
    q_[o->list].Remove(o);
    o->list = to;
    o->ghost = to >= kB1;
    q_[to].Prepend(o);
  }
  void Drop(Obj* o) {
    q_[o->list].Remove(o);
    table_.Delete(o);
  }
  void Replace(bool in_b2) {
    const double t1 = static_cast<double>(q_[kT1].n);
    if (q_[kT1].n >= 1 && (t1 > p_ || (in_b2 && t1 == p_))) {
      Move(q_[kT1].tail, kB1);
    } else if (q_[kT2].n >= 1) {
      Move(q_[kT2].tail, kB2);
    }
  }
  std::uint64_t c_;
  double p_ = 0;
  Table table_;
  Queue q_[4];
};

// S3FIFO.c: a small, a main and a ghost FIFO, each a FIFO cache of its own
// (table and queue); moving an object between them removes it from one (free)
// and inserts it into the other (malloc).
class S3Fifo {
 public:
  S3Fifo(std::uint64_t capacity, int threshold)
      : small_size_(static_cast<std::uint64_t>(static_cast<double>(capacity) * 0.1)),
        main_size_(capacity - small_size_),
        ghost_size_(static_cast<std::uint64_t>(static_cast<double>(capacity) * 0.9)),
        threshold_(threshold) {}
  bool Check(std::uint64_t id) const { return small_.table.Find(id) != nullptr || main_.table.Find(id) != nullptr; }
  void Get(std::uint64_t id) {
    if (Obj* o = small_.table.Find(id)) {
      ++o->freq;
      return;
    }
    bool hit_on_ghost = false;
    if (Obj* g = ghost_.table.Find(id)) {
      ghost_.Remove(g);
      hit_on_ghost = true;
    }
    if (Obj* o = main_.table.Find(id)) {
      ++o->freq;
      return;
    }
    while (small_.q.n + main_.q.n >= small_size_ + main_size_) Evict();
    Obj* o = nullptr;
    if (hit_on_ghost || (!has_evicted_ && small_.q.n >= small_size_)) {
      o = main_.Insert(id);
    } else {
      o = small_.Insert(id);
    }
    o->freq = 0;
  }

 private:
  struct Fifo {
    Table table;
    Queue q;
    Obj* Insert(std::uint64_t id) {
      Obj* o = table.Insert(id);
      q.Prepend(o);
      return o;
    }
    void Remove(Obj* o) {
      q.Remove(o);
      table.Delete(o);
    }
  };
  void Evict() {
    has_evicted_ = true;
    if (main_.q.n > main_size_ || small_.q.n == 0) {
      while (main_.q.n > 0) {
        Obj* o = main_.q.tail;
        const int freq = o->freq;
        const std::uint64_t id = o->id;
        main_.Remove(o);
        if (freq >= 1) {
          main_.Insert(id)->freq = std::min(freq, 3) - 1;
        } else {
          return;
        }
      }
      return;
    }
    while (small_.q.n > 0) {
      Obj* o = small_.q.tail;
      const int freq = o->freq;
      const std::uint64_t id = o->id;
      small_.Remove(o);
      if (freq >= threshold_) {
        main_.Insert(id);
      } else {
        if (ghost_.table.Find(id) == nullptr) {
          while (ghost_.q.n >= ghost_size_) ghost_.Remove(ghost_.q.tail);
          ghost_.Insert(id);
        }
        return;
      }
    }
  }
  std::uint64_t small_size_, main_size_, ghost_size_;
  int threshold_;
  bool has_evicted_ = false;
  Fifo small_, main_, ghost_;
};

// The same requests as RunPolicy: each request's leading resident pages are its
// hits, then its pages are referenced in touch order (tail first). Returns the hits.
template <typename Cache>
std::uint64_t Drive(const StoredTrace& trace, Cache& cache) {
  std::uint64_t hits = 0;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const std::span<const PageId> pages = trace.At(i).pages;
    for (PageId p : pages) {
      if (!cache.Check(p)) break;
      ++hits;
    }
    for (std::size_t k = pages.size(); k-- > 0;) cache.Get(pages[k]);
  }
  return hits;
}

std::uint64_t Run(PolicyKind kind, const StoredTrace& trace, std::uint64_t capacity, int s3fifo_threshold) {
  switch (kind) {
    case PolicyKind::kLru:
    case PolicyKind::kFifo: {
      Lru cache(capacity, kind == PolicyKind::kFifo);
      return Drive(trace, cache);
    }
    case PolicyKind::kArc: {
      Arc cache(capacity);
      return Drive(trace, cache);
    }
    default: {
      S3Fifo cache(capacity, s3fifo_threshold);
      return Drive(trace, cache);
    }
  }
}

}  // namespace libcs

constexpr PolicyKind kCompared[] = {PolicyKind::kLru, PolicyKind::kFifo, PolicyKind::kArc, PolicyKind::kS3Fifo};

void VsLibCacheSim(benchmark::State& state) {
  PolicyOptions o;
  const Loaded* loaded = Setup(state, kCompared[state.range(0)], &o);
  if (loaded == nullptr) return;
  const Loaded& w = *loaded;
  const auto now = ThreadCpuSeconds;
  double ours_s = 0, base_s = 0;
  std::uint64_t ours_hits = 0, base_hits = 0;
  for (auto _ : state) {
    const double t0 = now();
    base_hits = libcs::Run(o.kind, w.trace, o.capacity, o.s3fifo_promotion_hits);
    const double t1 = now();
    auto run = RunPolicy(w.trace, o, 1.0);
    const double t2 = now();
    if (!run.ok()) {
      state.SkipWithError(run.error().c_str());
      return;
    }
    ours_hits = run.value().total.page_hits;
    base_s += t1 - t0;
    ours_s += t2 - t1;
  }
  PairCounters(state, w.trace.page_refs(), ours_s, base_s, "kvwatch_Mrefs_s", "libcs_Mrefs_s");
  state.counters["hit_ratio"] = static_cast<double>(ours_hits) / static_cast<double>(w.trace.page_refs());
  state.counters["libcs_hit_ratio"] = static_cast<double>(base_hits) / static_cast<double>(w.trace.page_refs());
}

// The agent-load bench's canaries (bench/agent_load_bench.cc, --policies
// sglang,vllm,s3fifo --capacities 20000,100000, plus the engine policy lru).
CanaryOptions AgentCanaries() {
  CanaryOptions co;
  co.policies = {PolicyKind::kLru, PolicyKind::kSglang, PolicyKind::kVllm, PolicyKind::kS3Fifo};
  co.capacities = {20000, 100000};
  co.lifetime.page_tokens = 512;
  co.windows_s = {300, 3600, 86400};
  return co;
}

void Canaries(benchmark::State& state) {
  const Loaded* loaded = WekaOrSkip(state);
  if (loaded == nullptr) return;
  const Loaded& w = *loaded;
  const auto now = ThreadCpuSeconds;
  const CanaryOptions co = AgentCanaries();
  double ours_s = 0, base_s = 0;
  std::uint64_t ours_hits = 0, base_hits = 0;
  for (auto _ : state) {
    const double t0 = now();
    base_hits = 0;
    for (PolicyKind kind : co.policies) {
      for (std::uint64_t capacity : co.capacities) {
        PolicyOptions po;
        po.kind = kind;
        po.capacity = capacity;
        auto cache = MakePolicyCache(po);
        if (!cache.ok()) {
          state.SkipWithError(cache.error().c_str());
          return;
        }
        for (std::size_t i = 0; i < w.trace.size(); ++i) base_hits += cache.value()->Process(w.trace.At(i)).hits;
      }
    }
    const double t1 = now();
    auto canaries = PolicyCanaries::Create(co);
    if (!canaries.ok()) {
      state.SkipWithError(canaries.error().c_str());
      return;
    }
    PolicyCanaries& c = *canaries.value();
    for (std::size_t i = 0; i < w.requests.size(); ++i) {
      const Request& r = w.requests[i];
      c.Add(r, w.trace.unlimited_hits(i), r.has_timestamp() ? r.timestamp_s : static_cast<double>(i) * 1e-3);
    }
    const double t2 = now();
    ours_hits = 0;
    for (std::size_t k = 0; k < c.size(); ++k) ours_hits += c.Lifetime(k).page_hits;
    base_s += t1 - t0;
    ours_s += t2 - t1;
  }
  PairCounters(state, w.trace.page_refs(), ours_s, base_s, "Mrefs_per_s", "bare_Mrefs_s");
  // Equal when the canaries simulate what the bare caches do (same requests, lifetimes).
  state.counters["hits"] = static_cast<double>(ours_hits);
  state.counters["bare_hits"] = static_cast<double>(base_hits);
}

}  // namespace

BENCHMARK(StackEngine)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(Policy)
    ->ArgName("policy")
    ->DenseRange(0, std::size(kAllPolicies) - 1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

BENCHMARK(VsLibCacheSim)
    ->ArgName("policy")
    ->DenseRange(0, std::size(kCompared) - 1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(Canaries)->Unit(benchmark::kMillisecond)->Iterations(1);

BENCHMARK_MAIN();
