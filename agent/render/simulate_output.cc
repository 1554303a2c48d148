#include "agent/render/simulate_output.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <sstream>

#include "agent/render/text_format.h"
#include "base/json_writer.h"
#include "sim/time_model.h"

namespace kvwatch::agent {

namespace {

// "1.5 s", "120 ms", "35 us": three significant digits.
std::string Seconds(double s) {
  if (!std::isfinite(s)) return "none";
  char buf[32];
  if (s >= 100) return Grouped(std::round(s)) + " s";
  if (s >= 1 || s == 0) {
    std::snprintf(buf, sizeof(buf), "%.3g s", s);
  } else if (s >= 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.3g ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3g us", s * 1e6);
  }
  return buf;
}

std::string Load(double load) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", load);
  return buf;
}

double Share(double part, double whole) { return whole > 0 ? part / whole : 0; }

void Quantiles(base::JsonWriter& w, const char* key, const sim::LatencyQuantiles& q) {
  w.Key(key);
  w.BeginObject();
  w.Key("p50");
  w.Number(q.p50);
  w.Key("p90");
  w.Number(q.p90);
  w.Key("p99");
  w.Number(q.p99);
  w.EndObject();
}

void Coefficients(base::JsonWriter& w, const sim::LinearStepCoefficients& c) {
  w.BeginObject();
  w.Key("fixed_s");
  w.Number(c.fixed_s);
  w.Key("per_prefill_token_s");
  w.Number(c.per_prefill_token_s);
  w.Key("per_attention_pair_s");
  w.Number(c.per_attention_pair_s);
  w.Key("per_decode_sequence_s");
  w.Number(c.per_decode_sequence_s);
  w.Key("per_context_token_s");
  w.Number(c.per_context_token_s);
  w.EndObject();
}

// A run's mean latencies (sim/summary.h, MeanLatency) by their JSON key, in the
// order of the JSON and the CSV columns (docs/simulate.md, the JSON contract).
std::array<std::pair<const char*, double>, 6> MeanLatencyFields(const sim::MeanLatency& m) {
  return {{{"in_system", m.in_system},
           {"finished", m.finished},
           {"queue_wait", m.queue_wait},
           {"prefill", m.prefill},
           {"ttft", m.ttft},
           {"decode", m.decode}}};
}

std::string Number(double v) {
  if (!std::isfinite(v)) return "";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

}  // namespace

void ScoreSla(SimulateResult* result) {
  result->combinations.clear();
  std::map<std::pair<std::string, std::string>, std::vector<SimulateRun*>> by_combination;
  std::vector<std::pair<std::string, std::string>> order;
  for (SimulateRun& run : result->runs) {
    run.meets_sla = true;
    for (const sim::TierScore& t : run.summary.tiers) {
      run.meets_sla = run.meets_sla && t.attainment >= result->settings.sla_target;
    }
    auto key = std::make_pair(run.admission, run.policy);
    if (!by_combination.count(key)) order.push_back(key);
    by_combination[key].push_back(&run);
  }
  for (const auto& key : order) {
    std::vector<SimulateRun*> runs = by_combination[key];
    std::sort(runs.begin(), runs.end(), [](const SimulateRun* a, const SimulateRun* b) { return a->load < b->load; });
    SimulateCombination c{key.first, key.second, std::nullopt, std::nullopt};
    for (const SimulateRun* run : runs) {
      if (!run->meets_sla) {
        c.first_load_failing_sla = run->load;
        break;
      }
      c.max_load_meeting_sla = run->load;
    }
    result->combinations.push_back(c);
  }
}

namespace {

// The settings above the table: the trace, the time model, the pool, the
// scheduler, the SLA and the assumptions.
void WriteSimulateSettingsLines(std::ostringstream& out, const SimulateSettings& s) {
  std::string sources;
  for (const std::string& src : s.sources) sources += (sources.empty() ? "" : ", ") + src;
  out << "kvwatch simulate: " << Grouped(static_cast<double>(s.requests)) << " requests from " << sources << " over "
      << Seconds(s.trace_span_s) << " at load 1";
  if (s.trace_span_s > 0) out << " (" << Fixed(static_cast<double>(s.requests) / s.trace_span_s, 2) << " req/s)";
  out << "\n";
  out << "time model: " << s.time_model << ": " << s.time_model_detail << "\n";
  out << "  step seconds: " << sim::FormatStepCoefficients(s.coefficients) << "\n";
  out << "KV pool: " << Grouped(static_cast<double>(s.pool_blocks)) << " blocks of " << s.block_tokens
      << " tokens per rank (" << s.pool_detail << ")\n";
  out << "scheduler: " << s.max_batched_tokens << " tokens per step, " << s.max_running
      << " running at most, queue timeout " << Seconds(s.queue_timeout_s) << ", queue order " << s.queue_order << "\n";
  out << "SLA: every tier's attainment >= " << Fixed(s.sla_target, 2) << "; tiers:";
  for (std::size_t i = 0; i < s.tiers.size(); ++i) {
    out << (i ? ";" : "") << " " << s.tiers[i].name << " (TTFT <= " << Seconds(s.tiers[i].ttft_s)
        << ", ITL <= " << Seconds(s.tiers[i].itl_s) << ": " << (i < s.tier_members.size() ? s.tier_members[i] : "")
        << ")";
  }
  out << "\n";
  for (const std::string& a : s.assumptions) out << "assumed: " << a << "\n";
  out << "\n";
}

std::vector<std::string> RunTableHead(const SimulateSettings& s) {
  std::vector<std::string> head = {"admission", "policy", "load",    "req/s", "out tok/s", "TTFT p50",
                                   "p90",       "p99",    "ITL p50", "p90",   "p99"};
  for (const sim::TierTarget& t : s.tiers) head.push_back("SLA " + t.name);
  for (const char* h : {"preempt", "recomputed", "rejected", "KV running", "KV cache", "hit ratio"}) head.push_back(h);
  return head;
}

std::vector<std::string> RunTableRow(const SimulateRun& run, const SimulateSettings& s) {
  const sim::SimSummary& m = run.summary;
  std::vector<std::string> row = {run.admission,
                                  run.policy,
                                  Load(run.load),
                                  Fixed(m.requests_per_s, 2),
                                  Grouped(m.output_tokens_per_s),
                                  Seconds(m.ttft.p50),
                                  Seconds(m.ttft.p90),
                                  Seconds(m.ttft.p99),
                                  Seconds(m.itl.p50),
                                  Seconds(m.itl.p90),
                                  Seconds(m.itl.p99)};
  for (std::size_t i = 0; i < s.tiers.size(); ++i) {
    row.push_back(i < m.tiers.size() ? Fixed(m.tiers[i].attainment, 3) : "-");
  }
  row.push_back(Grouped(static_cast<double>(m.preemptions)));
  row.push_back(Grouped(static_cast<double>(m.recomputed_tokens)));
  row.push_back(Grouped(static_cast<double>(m.rejected)));
  row.push_back(Fixed(100 * Share(m.mean_running_blocks, static_cast<double>(m.pool_blocks)), 1) + "%");
  row.push_back(Fixed(100 * Share(m.mean_cached_blocks, static_cast<double>(m.pool_blocks)), 1) + "%");
  row.push_back(Fixed(m.prefix_hit_ratio, 4));
  return row;
}

// One row per run, each column as wide as its widest cell.
void WriteRunTable(std::ostringstream& out, const SimulateResult& r) {
  const std::vector<std::string> head = RunTableHead(r.settings);
  std::vector<std::vector<std::string>> rows;
  for (const SimulateRun& run : r.runs) rows.push_back(RunTableRow(run, r.settings));
  std::vector<std::size_t> width(head.size());
  for (std::size_t i = 0; i < head.size(); ++i) width[i] = head[i].size();
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i) {
      out << (i ? "  " : "") << Pad(cells[i], width[i], /*left=*/i < 2);
    }
    out << "\n";
  };
  line(head);
  for (const auto& row : rows) line(row);
  out << "(KV running and KV cache: time-averaged shares of the pool held by running requests and by cached free "
         "blocks)\n\n";
}

// Per admission x policy: the highest load of the sweep meeting the SLA.
void WriteSlaVerdicts(std::ostringstream& out, const SimulateResult& r) {
  out << "highest load meeting the SLA (every tier >= " << Fixed(r.settings.sla_target, 2) << "):\n";
  std::size_t policy_width = 8;  // "workload-aware" is wider
  for (const SimulateCombination& c : r.combinations) policy_width = std::max(policy_width, c.policy.size());
  for (const SimulateCombination& c : r.combinations) {
    out << "  " << Pad(c.admission, 16, true) << " " << Pad(c.policy, policy_width, true) << " ";
    if (!c.max_load_meeting_sla) {
      out << "none (fails at " << Load(*c.first_load_failing_sla) << ", the lowest load)";
    } else if (!c.first_load_failing_sla) {
      out << Load(*c.max_load_meeting_sla) << " (every load of the sweep meets it)";
    } else {
      out << Load(*c.max_load_meeting_sla) << " (leaves it at " << Load(*c.first_load_failing_sla) << ")";
    }
    out << "\n";
  }
}

}  // namespace

std::string FormatSimulateTable(const SimulateResult& r) {
  std::ostringstream out;
  WriteSimulateSettingsLines(out, r.settings);
  WriteRunTable(out, r);
  WriteSlaVerdicts(out, r);
  return out.str();
}

namespace {

// "time_model" and "pool" of "settings".
void WriteTimeModelAndPoolJson(base::JsonWriter& w, const SimulateSettings& s) {
  w.Key("time_model");
  w.BeginObject();
  w.Key("kind");
  w.String(s.time_model);
  w.Key("detail");
  w.String(s.time_model_detail);
  w.Key("coefficients");
  Coefficients(w, s.coefficients);
  w.EndObject();
  w.Key("pool");
  w.BeginObject();
  w.Key("blocks");
  w.Uint(s.pool_blocks);
  w.Key("block_tokens");
  w.Uint(s.block_tokens);
  w.Key("source");
  w.String(s.pool_source);
  w.Key("detail");
  w.String(s.pool_detail);
  w.Key("kv_bytes_per_token");
  w.Optional(s.kv_bytes_per_token);
  w.EndObject();
}

// "tiers" of "settings": each SLA tier's targets and members.
void WriteTierTargetsJson(base::JsonWriter& w, const SimulateSettings& s) {
  w.Key("tiers");
  w.BeginArray();
  for (std::size_t i = 0; i < s.tiers.size(); ++i) {
    w.BeginObject();
    w.Key("name");
    w.String(s.tiers[i].name);
    w.Key("ttft_s");
    w.Number(s.tiers[i].ttft_s);
    w.Key("itl_s");
    w.Number(s.tiers[i].itl_s);
    w.Key("members");
    w.String(i < s.tier_members.size() ? s.tier_members[i] : "");
    w.EndObject();
  }
  w.EndArray();
}

// "settings": the time model, the pool, the scheduler, the SLA tiers and the assumptions.
void WriteSimulateSettingsJson(base::JsonWriter& w, const SimulateSettings& s) {
  w.Key("settings");
  w.BeginObject();
  w.Key("sources");
  w.BeginArray();
  for (const std::string& src : s.sources) w.String(src);
  w.EndArray();
  w.Key("requests");
  w.Uint(s.requests);
  w.Key("trace_span_s");
  w.Number(s.trace_span_s);
  WriteTimeModelAndPoolJson(w, s);
  w.Key("page_tokens");
  w.Uint(s.page_tokens);
  w.Key("page_tokens_source");
  w.String(s.page_tokens_source);
  w.Key("max_batched_tokens");
  w.Uint(s.max_batched_tokens);
  w.Key("max_running");
  w.Uint(s.max_running);
  w.Key("queue_timeout_s");
  w.Number(s.queue_timeout_s);  // null: none
  w.Key("queue_order");
  w.String(s.queue_order);
  w.Key("sla_target");
  w.Number(s.sla_target);
  WriteTierTargetsJson(w, s);
  w.Key("assumptions");
  w.BeginArray();
  for (const std::string& a : s.assumptions) w.String(a);
  w.EndArray();
  w.EndObject();
}

// "mean_latency_s" and "tiers" of a run: its mean latency's parts, and per SLA
// tier its counts, attainment and latency quantiles.
void WriteLatencyJson(base::JsonWriter& w, const sim::SimSummary& m) {
  w.Key("mean_latency_s");
  w.BeginObject();
  for (const auto& [key, value] : MeanLatencyFields(m.mean_latency)) {
    w.Key(key);
    w.Number(value);
  }
  w.EndObject();
  w.Key("tiers");
  w.BeginArray();
  for (const sim::TierScore& t : m.tiers) {
    w.BeginObject();
    w.Key("name");
    w.String(t.name);
    w.Key("requests");
    w.Uint(t.requests);
    w.Key("met");
    w.Uint(t.met);
    w.Key("rejected");
    w.Uint(t.rejected);
    w.Key("attainment");
    w.Number(t.attainment);
    Quantiles(w, "ttft_s", t.ttft);
    Quantiles(w, "itl_s", t.itl);
    w.EndObject();
  }
  w.EndArray();
}

// One run's object of "runs": its figures, per tier, the KV pool's and the SLA verdict.
void WriteRunJson(base::JsonWriter& w, const SimulateRun& run) {
  const sim::SimSummary& m = run.summary;
  w.BeginObject();
  w.Key("admission");
  w.String(run.admission);
  w.Key("policy");
  w.String(run.policy);
  w.Key("load");
  w.Number(run.load);
  w.Key("requests");
  w.Uint(m.requests);
  w.Key("finished");
  w.Uint(m.finished);
  w.Key("rejected");
  w.Uint(m.rejected);
  w.Key("simulated_s");
  w.Number(m.simulated_s);
  w.Key("requests_per_s");
  w.Number(m.requests_per_s);
  w.Key("output_tokens_per_s");
  w.Number(m.output_tokens_per_s);
  Quantiles(w, "ttft_s", m.ttft);
  Quantiles(w, "itl_s", m.itl);
  WriteLatencyJson(w, m);
  w.Key("meets_sla");
  w.Bool(run.meets_sla);
  w.Key("preemptions");
  w.Uint(m.preemptions);
  w.Key("recomputed_tokens");
  w.Uint(m.recomputed_tokens);
  w.Key("kv");
  w.BeginObject();
  w.Key("pool_blocks");
  w.Uint(m.pool_blocks);
  w.Key("mean_running_blocks");
  w.Number(m.mean_running_blocks);
  w.Key("mean_cached_blocks");
  w.Number(m.mean_cached_blocks);
  w.EndObject();
  w.Key("prefix_hit_ratio");
  w.Number(m.prefix_hit_ratio);
  w.Key("mean_in_system");
  w.Number(m.mean_in_system);
  w.Key("steps");
  w.Uint(m.steps);
  w.EndObject();
}
}  // namespace

std::string FormatSimulateJson(const SimulateResult& r) {
  base::JsonWriter w;
  w.BeginObject();
  WriteSimulateSettingsJson(w, r.settings);

  w.Key("runs");
  w.BeginArray();
  for (const SimulateRun& run : r.runs) WriteRunJson(w, run);
  w.EndArray();

  w.Key("combinations");
  w.BeginArray();
  for (const SimulateCombination& c : r.combinations) {
    w.BeginObject();
    w.Key("admission");
    w.String(c.admission);
    w.Key("policy");
    w.String(c.policy);
    w.Key("max_load_meeting_sla");
    w.Optional(c.max_load_meeting_sla);
    w.Key("first_load_failing_sla");
    w.Optional(c.first_load_failing_sla);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Take() + "\n";
}

std::string FormatSimulateCsv(const SimulateResult& r) {
  std::ostringstream out;
  out << "admission,policy,load,requests,finished,rejected,simulated_s,requests_per_s,output_tokens_per_s,"
         "ttft_p50_s,ttft_p90_s,ttft_p99_s,itl_p50_s,itl_p90_s,itl_p99_s";
  for (const auto& [key, value] : MeanLatencyFields({})) out << ",mean_latency_" << key << "_s";
  out << ",meets_sla,preemptions,recomputed_tokens,pool_blocks,mean_running_blocks,mean_cached_blocks,prefix_hit_ratio,"
         "mean_in_system,steps";
  for (const sim::TierTarget& t : r.settings.tiers) out << "," << CsvQuote("attainment_" + t.name);
  out << "\n";
  for (const SimulateRun& run : r.runs) {
    const sim::SimSummary& m = run.summary;
    out << CsvQuote(run.admission) << "," << CsvQuote(run.policy) << "," << Number(run.load) << "," << m.requests << ","
        << m.finished << "," << m.rejected << "," << Number(m.simulated_s) << "," << Number(m.requests_per_s) << ","
        << Number(m.output_tokens_per_s) << "," << Number(m.ttft.p50) << "," << Number(m.ttft.p90) << ","
        << Number(m.ttft.p99) << "," << Number(m.itl.p50) << "," << Number(m.itl.p90) << "," << Number(m.itl.p99);
    for (const auto& [key, value] : MeanLatencyFields(m.mean_latency)) out << "," << Number(value);
    out << "," << (run.meets_sla ? "true" : "false") << "," << m.preemptions << "," << m.recomputed_tokens << ","
        << m.pool_blocks << "," << Number(m.mean_running_blocks) << "," << Number(m.mean_cached_blocks) << ","
        << Number(m.prefix_hit_ratio) << "," << Number(m.mean_in_system) << "," << m.steps;
    for (std::size_t i = 0; i < r.settings.tiers.size(); ++i) {
      out << "," << (i < m.tiers.size() ? Number(m.tiers[i].attainment) : "");
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace kvwatch::agent
