// The replica's step loop (sim/replica.h): arrivals, the vLLM-V1-like schedule
// (running requests, then admissions), preemption by recompute, and the figures
// the summary is built from (sim/replica_summary.cc).
#include "sim/replica.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <set>
#include <string>

#include "curve/policy_core.h"
#include "sim/admission.h"
#include "sim/replica_internal.h"

namespace kvwatch::sim {

bool SupportedByReplica(curve::PolicyKind kind) {
  // The pool is a curve::PolicyCore: every policy with an eviction order there.
  return curve::HasCore(kind);
}

std::string SupportedByReplicaNames() {
  std::string names;
  for (curve::PolicyKind kind : curve::kAllPolicies) {
    if (!SupportedByReplica(kind)) continue;
    names += (names.empty() ? "" : ", ") + std::string(curve::PolicyName(kind));
  }
  return names;
}

namespace internal {
namespace {

constexpr std::uint32_t kNoBlock = curve::kNoSlot;

// belady's oracle over the whole input; null for the other policies.
std::unique_ptr<curve::NextUseOracle> FutureOf(const ReplicaOptions& o, std::span<const ReplicaRequest> reqs) {
  if (o.eviction != curve::PolicyKind::kBelady) return nullptr;
  std::vector<std::span<const curve::PageId>> pages;
  pages.reserve(reqs.size());
  for (const ReplicaRequest& q : reqs) pages.emplace_back(q.pages);
  return std::make_unique<curve::NextUseOracle>(pages);
}

enum class State : std::uint8_t { kFuture, kWaiting, kRunning, kDone };

struct ReqState {
  std::vector<std::uint32_t> blocks;  // held, prefix order
  std::uint64_t computed = 0;         // tokens whose KV is in the pool
  std::uint64_t redo_until = 0;       // tokens before this position were computed before a preemption
  std::uint32_t generated = 0;
  std::uint64_t reserved = 0;    // blocks reserved (reserve rules)
  std::int64_t preempt_seq = 0;  // kArrival: most recently preempted first
  std::uint64_t epoch = 0;       // the pool's clock at its latest admission
  double last_token = 0;
  double block_steps = 0;
  State state = State::kFuture;
  bool admitted_once = false;
  bool resuming = false;  // preempted, not yet emitted a token since
};

struct WaitKey {
  std::int64_t a, b;
  std::uint32_t idx;
  bool operator<(const WaitKey& o) const { return a != o.a ? a < o.a : b != o.b ? b < o.b : idx < o.idx; }
};

class Replica {
 public:
  Replica(const ReplicaOptions& o, std::span<const ReplicaRequest> reqs, const StepTimeModel& time,
          const Progress& progress, const ReplicaObserver& observer, std::uint32_t max_output)
      : o_(o),
        reqs_(reqs),
        time_(time),
        progress_(progress),
        observer_(observer),
        future_(FutureOf(o, reqs)),
        pool_(curve::CoreOptions{o.eviction, o.pool_blocks, future_.get()}),
        st_(reqs.size()),
        quantiles_(kMaxClasses),
        rate_(o.pool_blocks, o.block_tokens, max_output),
        max_output_(max_output),
        rec_(o, reqs.size()) {}

  RunRecord Run() {
    const std::size_t n = reqs_.size();
    if (n == 0) return std::move(rec_);
    now_ = reqs_[0].arrival_s;
    rec_.start_s = now_;
    while (rec_.done < n) {
      while (next_ < n && reqs_[next_].arrival_s <= now_) Arrive(static_cast<std::uint32_t>(next_++));
      ExpireTimeouts();
      if (running_.empty() && waiting_.empty()) {
        if (next_ >= n) break;
        const double t = reqs_[next_].arrival_s;
        rec_.cached_area += static_cast<double>(pool_.free_with_page()) * (t - now_);
        now_ = t;
        continue;
      }
      Step();
    }
    rec_.end_s = std::max(rec_.last_departure, rec_.start_s);
    if (progress_) progress_(rec_.done, n);
    return std::move(rec_);
  }

 private:
  std::uint64_t BlocksFor(std::uint64_t tokens) const { return (tokens + o_.block_tokens - 1) / o_.block_tokens; }
  std::uint64_t Tokens(std::uint32_t r) const { return reqs_[r].prompt_tokens + st_[r].generated; }
  // A request's whole KV, at its finish: prompt + output - 1 tokens (at least the prompt).
  std::uint64_t PeakBlocks(const ReplicaRequest& q) const {
    return BlocksFor(std::uint64_t{q.prompt_tokens} + std::max<std::uint32_t>(q.output_tokens, 1) - 1);
  }

  WaitKey Key(std::uint32_t r) const {
    const ReplicaRequest& q = reqs_[r];
    switch (o_.queue_order) {
      case QueueOrder::kTier:
        return {q.tier, r, r};
      case QueueOrder::kPriority:
        return {-static_cast<std::int64_t>(q.priority), r, r};
      case QueueOrder::kArrival:
        break;
    }
    if (st_[r].preempt_seq > 0) return {-1, -st_[r].preempt_seq, r};
    return {0, r, r};
  }

  void Depart(std::uint32_t r, double t) {
    st_[r].state = State::kDone;
    rec_.latency_sum += t - reqs_[r].arrival_s;
    rec_.last_departure = std::max(rec_.last_departure, t);
    --in_system_;
    ++rec_.done;
    if (progress_ && (rec_.done & 1023) == 0) progress_(rec_.done, reqs_.size());
  }

  void Reject(std::uint32_t r) {
    rec_.Rejected(r, reqs_[r], now_);
    Depart(r, now_);
  }

  void Arrive(std::uint32_t r) {
    ++in_system_;
    const ReplicaRequest& q = reqs_[r];
    // A request whose whole KV cannot fit would preempt itself forever.
    if (PeakBlocks(q) > o_.pool_blocks) {
      Reject(r);
      return;
    }
    st_[r].state = State::kWaiting;
    waiting_.insert(Key(r));
    if (std::isfinite(o_.queue_timeout_s)) timeouts_.push_back(r);
  }

  void ExpireTimeouts() {
    while (!timeouts_.empty() && now_ - reqs_[timeouts_.front()].arrival_s > o_.queue_timeout_s) {
      const std::uint32_t r = timeouts_.front();
      timeouts_.pop_front();
      if (st_[r].state != State::kWaiting || st_[r].admitted_once) continue;
      waiting_.erase(Key(r));
      Reject(r);
    }
  }

  // Free blocks needed to extend request r's blocks from `from` to `to` (a page
  // already in the pool is shared: free only if its block is free).
  std::uint64_t Demand(std::uint32_t r, std::uint64_t from, std::uint64_t to) const {
    const auto& pages = reqs_[r].pages;
    std::uint64_t demand = 0;
    for (std::uint64_t k = from; k < to; ++k) {
      if (k < pages.size()) {
        const std::uint32_t b = pool_.Find(pages[k]);
        if (b != kNoBlock) {
          demand += pool_.IsFree(b) ? 1 : 0;
          continue;
        }
      }
      ++demand;
    }
    return demand;
  }

  // The request the pool's next references are for.
  void Refer(std::uint32_t r) {
    const ReplicaRequest& q = reqs_[r];
    pool_.SetReferrer({r, q.priority, q.class_id});
  }

  void Extend(std::uint32_t r, std::uint64_t to) {
    const auto& pages = reqs_[r].pages;
    auto& blocks = st_[r].blocks;
    Refer(r);
    for (std::uint64_t k = blocks.size(); k < to; ++k) {
      if (k < pages.size()) {
        std::uint32_t b = pool_.Find(pages[k]);
        if (b != kNoBlock) {
          pool_.Hold(b);
        } else {
          b = pool_.AcquireFor(pages[k]);
          pool_.Admit(b, pages[k], k > 0 ? blocks[k - 1] : kNoBlock, st_[r].epoch, k);
        }
        blocks.push_back(b);
      } else {
        blocks.push_back(pool_.Acquire());
      }
    }
  }

  void Preempt(std::uint32_t r) {
    ReqState& s = st_[r];
    pool_.ReleaseAll(s.blocks);
    s.blocks.clear();
    s.redo_until = std::max(s.redo_until, s.computed);
    s.computed = 0;
    s.resuming = true;
    s.state = State::kWaiting;
    s.preempt_seq = ++preempt_seq_;
    rec_.Preempted(r);
    waiting_.insert(Key(r));
  }

  void Schedule(std::uint32_t r, std::uint64_t n) {
    ReqState& s = st_[r];
    const std::uint64_t tokens = Tokens(r);
    if (s.generated >= 1 && !s.resuming && n == 1 && s.computed + 1 == tokens) {
      ++work_.decode_sequences;
      work_.decode_context_tokens += tokens;
    } else {
      work_.prefill_tokens += n;
      work_.prefill_attention_token_pairs += s.computed * n;
      const std::uint64_t again = s.redo_until > s.computed ? std::min(n, s.redo_until - s.computed) : 0;
      rec_.recomputed_tokens += again;
      rec_.outcomes[r].recomputed_tokens += again;
    }
    s.computed += n;
    budget_ -= n;
    scheduled_.push_back(r);
  }

  // Running requests first, in admission order; a request that cannot get its
  // blocks preempts the newest until it fits or has preempted itself (then stop).
  void ScheduleRunning() {
    for (std::size_t i = 0; i < running_.size() && budget_ > 0;) {
      const std::uint32_t r = running_[i];
      ReqState& s = st_[r];
      const std::uint64_t n = std::min<std::uint64_t>(Tokens(r) - s.computed, budget_);
      const std::uint64_t to = BlocksFor(s.computed + n);
      bool self = false;
      while (pool_.Obtainable() < Demand(r, s.blocks.size(), to)) {
        const std::uint32_t victim = running_.back();
        running_.pop_back();
        Preempt(victim);
        ++step_preempted_;
        if (victim == r) {
          self = true;
          break;
        }
      }
      if (self) break;
      Extend(r, to);
      Schedule(r, n);
      ++i;
    }
  }

  std::uint64_t Forecast(std::uint32_t r) {
    const ReplicaRequest& q = reqs_[r];
    std::uint64_t out = max_output_;
    if (o_.admission == Admission::kReserveQuantile && quantiles_.count(q.class_id) > 0) {
      const double qq = q.class_id < o_.class_quantiles.size() ? o_.class_quantiles[q.class_id] : 0.9;
      out = quantiles_.Quantile(q.class_id, qq);
    }
    return std::max<std::uint64_t>(out, st_[r].generated + 1);
  }

  void AdmitWaiting() {
    const bool reserve = o_.admission == Admission::kReserveMax || o_.admission == Admission::kReserveQuantile;
    const bool cap = o_.admission == Admission::kRateCap;
    std::uint64_t reserved_sum = 0;
    if (reserve) {
      for (std::uint32_t r : running_) reserved_sum += std::max<std::uint64_t>(st_[r].reserved, st_[r].blocks.size());
    }
    if (cap) {
      rate_.StartStep();
      if (running_.empty()) rate_.Allow();
    }
    while (!waiting_.empty() && budget_ > 0 && running_.size() < o_.max_running) {
      const std::uint32_t r = waiting_.begin()->idx;
      const ReplicaRequest& q = reqs_[r];
      ReqState& s = st_[r];
      const std::uint64_t tokens = Tokens(r);
      // The head's prefix hits; a head blocked step after step is not scanned again
      // while no page comes or goes.
      if (r != scan_request_ || pool_.page_version() != scan_version_) {
        hits_.clear();
        for (curve::PageId p : q.pages) {
          const std::uint32_t b = pool_.Find(p);
          if (b == kNoBlock) break;
          hits_.push_back(b);
        }
        scan_request_ = r;
        scan_version_ = pool_.page_version();
      }
      const std::uint64_t hit_tokens =
          std::min<std::uint64_t>(hits_.size() * std::uint64_t{o_.block_tokens}, q.prompt_tokens);
      const std::uint64_t c0 = std::min(hit_tokens, tokens - 1);
      const std::uint64_t n = std::min<std::uint64_t>(tokens - c0, budget_);
      const std::uint64_t to = std::max<std::uint64_t>(BlocksFor(c0 + n), hits_.size());
      std::uint64_t demand = 0;
      for (std::uint32_t b : hits_) demand += pool_.IsFree(b) ? 1 : 0;
      demand += Demand(r, hits_.size(), to);
      if (demand > pool_.Obtainable()) break;
      std::uint64_t reservation = 0;
      if (reserve) {
        reservation = BlocksFor(q.prompt_tokens + Forecast(r) - 1);
        if (!running_.empty() && reserved_sum + reservation > o_.pool_blocks) break;
      }
      if (cap && !rate_.CanAdmit()) break;
      // Admit.
      waiting_.erase(waiting_.begin());
      scan_request_ = kNoBlock;
      Refer(r);
      for (std::uint32_t b : hits_) {
        pool_.Hold(b);
        s.blocks.push_back(b);
      }
      s.epoch = pool_.NewEpoch();
      s.computed = c0;
      if (!s.admitted_once) {
        s.admitted_once = true;
        rec_.FirstAdmission(r, now_, static_cast<std::uint32_t>(hits_.size()), hit_tokens, q.prompt_tokens);
        if (cap) rate_.Admitted(q.prompt_tokens);
      }
      s.reserved = reservation;
      reserved_sum += reservation;
      if (cap) rate_.Spend();
      s.state = State::kRunning;
      running_.push_back(r);
      ++step_admitted_;
      Extend(r, to);
      Schedule(r, n);
    }
  }

  void Step() {
    budget_ = o_.max_batched_tokens;
    work_ = StepWork{};
    scheduled_.clear();
    step_preempted_ = step_admitted_ = 0;
    ScheduleRunning();
    if (step_preempted_ == 0) AdmitWaiting();
    if (scheduled_.empty()) {
      // Cannot happen with a request that fits the pool (checked on arrival) and an
      // empty replica; kept so that a bug stops rather than spins.
      if (waiting_.empty()) return;
      const std::uint32_t r = waiting_.begin()->idx;
      waiting_.erase(waiting_.begin());
      Reject(r);
      return;
    }
    const double dt = time_.StepSeconds(work_);
    const double end = now_ + dt;
    rec_.in_system_area += static_cast<double>(in_system_) * dt;
    for (std::size_t k = next_; k < reqs_.size() && reqs_[k].arrival_s <= end; ++k) {
      rec_.in_system_area += end - reqs_[k].arrival_s;
    }
    rec_.held_area += static_cast<double>(pool_.held()) * dt;
    rec_.cached_area += static_cast<double>(pool_.free_with_page()) * dt;
    StepRecord step;
    if (observer_.on_step) {
      step.start_s = now_;
      step.seconds = dt;
      step.work = work_;
      step.admitted = step_admitted_;
      step.preempted = step_preempted_;
      step.held_blocks = pool_.held();
      step.cached_free_blocks = pool_.free_with_page();
      step.free_blocks = pool_.Obtainable();
    }
    now_ = end;
    std::uint32_t finished = 0;
    for (std::uint32_t r : scheduled_) {
      ReqState& s = st_[r];
      s.block_steps += static_cast<double>(s.blocks.size());
      if (s.computed < Tokens(r)) continue;
      if (reqs_[r].output_tokens > 0) {  // else prefill only: finished, no token
        ++s.generated;
        s.resuming = false;
        rec_.Token(r, reqs_[r], s.generated, end, s.last_token);
        s.last_token = end;
        if (s.generated < reqs_[r].output_tokens) continue;
      }
      pool_.ReleaseAll(s.blocks);
      s.blocks.clear();
      s.blocks.shrink_to_fit();
      rec_.Finished(r, reqs_[r], end);
      quantiles_.Add(reqs_[r].class_id, reqs_[r].output_tokens);
      rate_.Finished(s.block_steps, PeakBlocks(reqs_[r]));
      Depart(r, end);
      ++finished;
    }
    if (finished > 0) std::erase_if(running_, [&](std::uint32_t r) { return st_[r].state == State::kDone; });
    ++rec_.steps;
    if (observer_.on_step) {
      step.running = static_cast<std::uint32_t>(running_.size());
      step.waiting = static_cast<std::uint32_t>(waiting_.size());
      step.finished = finished;
      observer_.on_step(step);
    }
  }

  const ReplicaOptions& o_;
  std::span<const ReplicaRequest> reqs_;
  const StepTimeModel& time_;
  const Progress& progress_;
  const ReplicaObserver& observer_;
  std::unique_ptr<curve::NextUseOracle> future_;  // belady
  curve::PolicyCore pool_;                        // the KV pool: a slot is a block
  std::vector<ReqState> st_;
  OutputQuantiles quantiles_;
  RateCap rate_;
  std::uint64_t max_output_;
  RunRecord rec_;
  std::vector<std::uint32_t> running_;  // admission order
  std::set<WaitKey> waiting_;
  std::deque<std::uint32_t> timeouts_;  // arrival order
  std::vector<std::uint32_t> scheduled_;
  std::vector<std::uint32_t> hits_;
  std::uint32_t scan_request_ = kNoBlock;  // whose hits hits_ holds, at scan_version_
  std::uint64_t scan_version_ = 0;
  StepWork work_;
  std::uint64_t budget_ = 0;
  std::uint32_t step_preempted_ = 0, step_admitted_ = 0;
  std::int64_t preempt_seq_ = 0;
  std::size_t next_ = 0;
  std::uint64_t in_system_ = 0;
  double now_ = 0;
};

base::Status Validate(const ReplicaOptions& o, std::span<const ReplicaRequest> reqs) {
  using S = base::Status;
  if (o.pool_blocks < 1) return S::Error("pool_blocks: must be at least 1");
  if (o.pool_blocks >= kNoBlock) return S::Error("pool_blocks: at most 4294967294");
  if (o.block_tokens < 1) return S::Error("block_tokens: must be at least 1");
  if (o.max_batched_tokens < 1) return S::Error("max_batched_tokens: must be at least 1");
  if (o.max_running < 1) return S::Error("max_running: must be at least 1");
  if (!SupportedByReplica(o.eviction)) {
    return S::Error("eviction: policy '" + std::string(curve::PolicyName(o.eviction)) +
                    "' is not supported by the replica (supported: " + SupportedByReplicaNames() + ")");
  }
  for (std::size_t c = 0; c < o.class_quantiles.size(); ++c) {
    const double q = o.class_quantiles[c];
    if (!(q > 0 && q <= 1)) return S::Error("class_quantiles[" + std::to_string(c) + "]: must be in (0, 1]");
  }
  if (!(o.queue_timeout_s > 0)) return S::Error("queue_timeout_s: must be > 0");
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const ReplicaRequest& q = reqs[i];
    const std::string where = "request " + std::to_string(i) + ": ";
    if (!std::isfinite(q.arrival_s)) return S::Error(where + "arrival_s: not a finite number");
    if (i > 0 && q.arrival_s < reqs[i - 1].arrival_s)
      return S::Error(where + "arrival_s: earlier than the request before");
    if (q.prompt_tokens < 1) return S::Error(where + "prompt_tokens: must be at least 1");
    if (q.tier >= std::max<std::size_t>(1, o.tiers.size())) return S::Error(where + "tier: no such tier");
    if (q.class_id >= kMaxClasses) return S::Error(where + "class_id: must be below 64");
  }
  return S::Ok();
}

}  // namespace
}  // namespace internal

base::Result<SimSummary> SimulateReplicaObserved(const ReplicaOptions& options,
                                                 std::span<const ReplicaRequest> requests, const StepTimeModel& time,
                                                 const Progress& progress, const ReplicaObserver& observer) {
  if (base::Status s = internal::Validate(options, requests); !s.ok())
    return base::Result<SimSummary>::Error(s.error());
  std::uint32_t max_output = options.max_output_tokens;
  if (max_output == 0) {
    for (const ReplicaRequest& q : requests) max_output = std::max(max_output, q.output_tokens);
  }
  internal::Replica replica(options, requests, time, progress, observer, std::max<std::uint32_t>(1, max_output));
  internal::RunRecord record = replica.Run();
  if (observer.outcomes != nullptr) *observer.outcomes = record.outcomes;
  return internal::Summarize(options, &record);
}

base::Result<SimSummary> SimulateReplica(const ReplicaOptions& options, std::span<const ReplicaRequest> requests,
                                         const StepTimeModel& time, const Progress& progress) {
  return SimulateReplicaObserved(options, requests, time, progress, ReplicaObserver{});
}

}  // namespace kvwatch::sim
