// Per-request records and the run's summary (sim/replica_internal.h, sim/summary.h).
#include <algorithm>

#include "sim/replica_internal.h"

namespace kvwatch::sim::internal {

void RunRecord::Rejected(std::uint32_t r, const ReplicaRequest& q, double t) {
  outcomes[r].rejected = true;
  outcomes[r].finish_s = t;
  ++rejected;
  if (!tiers.empty()) {
    ++tiers[q.tier].requests;
    ++tiers[q.tier].rejected;
  }
}

void RunRecord::Token(std::uint32_t r, const ReplicaRequest& q, std::uint32_t generated, double t, double last) {
  if (generated == 1) {
    outcomes[r].first_token_s = t;
    ttft.Add(t - q.arrival_s);
    if (!tiers.empty()) tiers[q.tier].ttft.Add(t - q.arrival_s);
    return;
  }
  itl.Add(t - last);
  if (!tiers.empty()) tiers[q.tier].itl.Add(t - last);
}

void RunRecord::Finished(std::uint32_t r, const ReplicaRequest& q, double t) {
  RequestOutcome& out = outcomes[r];
  out.finished = true;
  out.finish_s = t;
  if (q.output_tokens == 0) out.first_token_s = t;  // no token: its prefill ended here
  ++finished;
  output_tokens += q.output_tokens;
  wait_sum += out.first_admission_s - q.arrival_s;
  prefill_sum += out.first_token_s - out.first_admission_s;
  decode_sum += t - out.first_token_s;
  if (tiers.empty()) return;
  TierRecord& tier = tiers[q.tier];
  ++tier.requests;
  const TierTarget& target = tier_targets[q.tier];
  const double ttft_s = out.first_token_s - q.arrival_s;
  const double tpot = q.output_tokens > 1 ? (t - out.first_token_s) / (q.output_tokens - 1) : 0;
  if (ttft_s <= target.ttft_s && tpot <= target.itl_s) ++tier.met;
}

SimSummary Summarize(const ReplicaOptions& o, RunRecord* rec) {
  SimSummary s;
  s.simulated_s = rec->end_s - rec->start_s;
  s.requests = rec->outcomes.size();
  s.finished = rec->finished;
  s.rejected = rec->rejected;
  const double span = s.simulated_s > 0 ? s.simulated_s : 0;
  auto per_s = [&](double x) { return span > 0 ? x / span : 0.0; };
  s.output_tokens_per_s = per_s(static_cast<double>(rec->output_tokens));
  s.requests_per_s = per_s(static_cast<double>(rec->finished));
  s.ttft = rec->ttft.Quantiles();
  s.itl = rec->itl.Quantiles();
  auto mean = [](double sum, std::uint64_t n) { return n == 0 ? 0.0 : sum / static_cast<double>(n); };
  MeanLatency& m = s.mean_latency;
  m.in_system = mean(rec->latency_sum, rec->done);
  m.queue_wait = mean(rec->wait_sum, rec->finished);
  m.prefill = mean(rec->prefill_sum, rec->finished);
  m.decode = mean(rec->decode_sum, rec->finished);
  m.ttft = m.queue_wait + m.prefill;
  m.finished = m.ttft + m.decode;
  for (std::size_t t = 0; t < rec->tiers.size(); ++t) {
    TierRecord& tr = rec->tiers[t];
    TierScore score;
    score.name = o.tiers[t].name;
    score.requests = tr.requests;
    score.met = tr.met;
    score.rejected = tr.rejected;
    score.attainment = tr.requests == 0 ? 1 : static_cast<double>(tr.met) / static_cast<double>(tr.requests);
    score.ttft = tr.ttft.Quantiles();
    score.itl = tr.itl.Quantiles();
    s.tiers.push_back(std::move(score));
  }
  s.preemptions = rec->preemptions;
  s.recomputed_tokens = rec->recomputed_tokens;
  s.mean_running_blocks = per_s(rec->held_area);
  s.mean_cached_blocks = per_s(rec->cached_area);
  s.pool_blocks = o.pool_blocks;
  s.prefix_hit_ratio =
      rec->prompt_tokens == 0 ? 0 : static_cast<double>(rec->hit_tokens) / static_cast<double>(rec->prompt_tokens);
  s.mean_in_system = per_s(rec->in_system_area);
  s.steps = rec->steps;
  return s;
}

}  // namespace kvwatch::sim::internal
