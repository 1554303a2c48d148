#include "agent/cli/simulate_command.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "agent/cli/page_tokens.h"
#include "agent/cli/progress.h"
#include "agent/render/text_format.h"
#include "collectors/trace_reader.h"
#include "curve/tenants.h"

namespace kvwatch::agent {

namespace {

// A block id for block j of a trace page split into smaller blocks (splitmix64 of
// the pair): equal pages give equal blocks, so prefixes stay shared.
curve::PageId SubBlock(curve::PageId page, std::uint64_t j) {
  std::uint64_t z = page * 0x9e3779b97f4a7c15ULL + j + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The most block ids a run keeps for the trace's prompts (1 GiB of ids): a small
// --block-tokens over long prompts would otherwise end in bad_alloc.
constexpr std::uint64_t kMaxTraceBlocks = std::uint64_t{1} << 27;

// What BuildReplicaRequests saw on its way through the trace, for the assumptions
// the output states.
struct TraceCounts {
  std::uint64_t records = 0;
  // Records taken with an assumption.
  std::uint64_t no_time = 0, no_output = 0, zero_output = 0, no_input = 0, beyond_classes = 0;
  // Records the replica cannot run, left out and said (never the whole run): no
  // pages (nothing to prefill or share), a timestamp beyond +-1e11 s, a prompt
  // beyond 2^32 tokens, an output beyond 2^24 tokens.
  std::uint64_t no_pages = 0, far_time = 0, huge_prompt = 0, huge_output = 0;
  // Requests sharing an arrival time, and the distinct times.
  std::uint64_t tied = 0, distinct = 0;
  bool any_time = false;    // some record has a usable timestamp
  std::uint64_t split = 1;  // blocks per trace page
  std::vector<std::uint64_t> tier_counts;
};

bool FarTime(const curve::Request& t) { return t.has_timestamp() && !(std::fabs(t.timestamp_s) <= kMaxTraceSeconds); }

// Turns trace records into replica requests one at a time: arrival, lengths,
// blocks, class, tier and priority.
class RequestConverter {
 public:
  RequestConverter(const std::vector<curve::Request>& trace, const SimulateSetup& setup, TraceCounts* counts)
      : setup_(setup), counts_(*counts) {
    counts_.records = trace.size();
    counts_.split = setup.settings.page_tokens / setup.settings.block_tokens;
    counts_.tier_counts.assign(setup.replica.tiers.size(), 0);
    for (const curve::Request& t : trace) counts_.any_time = counts_.any_time || (t.has_timestamp() && !FarTime(t));
  }

  // Record i as a request; nullopt when it is left out (counted). Errors: the
  // trace's blocks beyond kMaxTraceBlocks.
  base::Result<std::optional<sim::ReplicaRequest>> Convert(const curve::Request& t, std::size_t i) {
    using R = base::Result<std::optional<sim::ReplicaRequest>>;
    const std::optional<sim::ReplicaRequest> none;
    if (t.pages.empty()) {
      ++counts_.no_pages;
      return none;
    }
    if (FarTime(t)) {
      ++counts_.far_time;
      return none;
    }
    if (t.output_tokens > static_cast<std::int64_t>(kMaxOutputTokens)) {
      ++counts_.huge_output;
      return none;
    }
    sim::ReplicaRequest r;
    r.arrival_s = Arrival(t, i);
    const std::uint64_t prompt = Prompt(t);
    if (prompt > std::numeric_limits<std::uint32_t>::max()) {
      ++counts_.huge_prompt;
      return none;
    }
    r.prompt_tokens = static_cast<std::uint32_t>(std::max<std::uint64_t>(prompt, 1));
    if (t.output_tokens >= 0) {
      // At most kMaxOutputTokens; 0: a request that prefills and ends without a token.
      r.output_tokens = static_cast<std::uint32_t>(t.output_tokens);
      counts_.zero_output += t.output_tokens == 0;
    } else {
      r.output_tokens = setup_.output_tokens;
      ++counts_.no_output;
    }
    if (base::Status s = AddBlocks(t, i, &r); !s.ok()) return R::Error(s.error());
    Classify(t, &r);
    return std::optional<sim::ReplicaRequest>(std::move(r));
  }

  // The classes seen, by name, with their ids.
  const std::map<std::string, std::uint32_t, std::less<>>& classes() const { return classes_; }

 private:
  // Without any timestamp: evenly at --rate; a record without one arrives with
  // the record before it.
  double Arrival(const curve::Request& t, std::size_t i) {
    if (!counts_.any_time) return static_cast<double>(i) / setup_.rate;
    if (t.has_timestamp()) return last_time_ = t.timestamp_s;
    ++counts_.no_time;
    return last_time_;
  }

  // input_length, else pages x page size.
  std::uint64_t Prompt(const curve::Request& t) {
    if (t.input_tokens > 0) return static_cast<std::uint64_t>(t.input_tokens);
    ++counts_.no_input;
    return t.pages.size() * setup_.settings.page_tokens;
  }

  // The request's block ids: its pages, or each page split into smaller blocks.
  base::Status AddBlocks(const curve::Request& t, std::size_t i, sim::ReplicaRequest* r) {
    const std::uint64_t split = counts_.split;
    const std::uint32_t block_tokens = setup_.settings.block_tokens;
    const std::uint64_t blocks =
        split == 1
            ? t.pages.size()
            : std::min<std::uint64_t>((static_cast<std::uint64_t>(r->prompt_tokens) + block_tokens - 1) / block_tokens,
                                      split * t.pages.size());
    total_blocks_ += blocks;
    if (total_blocks_ > kMaxTraceBlocks) {
      return base::Status::Error("the trace's prompts come to more than " + GroupedCount(kMaxTraceBlocks) +
                                 " blocks of " + std::to_string(block_tokens) + " tokens by record " +
                                 std::to_string(i + 1) +
                                 " (the simulator keeps every block id: 8 bytes each); use a larger --block-tokens "
                                 "or fewer records");
    }
    if (split == 1) {
      r->pages = t.pages;
    } else {
      for (curve::PageId page : t.pages) {
        for (std::uint64_t j = 0; j < split && r->pages.size() < blocks; ++j) r->pages.push_back(SubBlock(page, j));
      }
    }
    return base::Status::Ok();
  }

  // Class, tier and priority. The derived class needs the request's hits in an
  // unlimited cache (curve/tenants.h): its leading pages seen before.
  void Classify(const curve::Request& t, sim::ReplicaRequest* r) {
    std::uint32_t unlimited_hits = 0;
    while (unlimited_hits < t.pages.size() && seen_pages_.contains(t.pages[unlimited_hits])) ++unlimited_hits;
    seen_pages_.insert(t.pages.begin(), t.pages.end());
    const std::uint32_t turn = curve::DerivedTurn(t, t.pages, classifier_);
    const std::string_view cls = curve::ClassOf(t, turn);
    curve::RememberClass(t, t.pages, turn, setup_.settings.page_tokens, unlimited_hits, &classifier_);
    auto it = classes_.find(cls);
    if (it == classes_.end())
      it = classes_.emplace(std::string(cls), static_cast<std::uint32_t>(classes_.size())).first;
    r->class_id = std::min<std::uint32_t>(it->second, sim::kMaxClasses - 1);
    counts_.beyond_classes += it->second >= sim::kMaxClasses;
    r->tier = setup_.tier_map.For(t.tenant, cls);
    ++counts_.tier_counts[r->tier];
    r->priority = setup_.priorities.For(t.tenant, cls);
  }

  const SimulateSetup& setup_;
  TraceCounts& counts_;
  double last_time_ = 0;
  std::uint64_t total_blocks_ = 0;  // at most kMaxTraceBlocks
  curve::RequestClassifier classifier_;
  std::unordered_set<curve::PageId> seen_pages_;
  std::map<std::string, std::uint32_t, std::less<>> classes_;
};

// Requests sharing an arrival time: counted, and spread with --spread-ties over
// the gap to the next time; the last group, which has no next time, over the gap
// from the time before it (one time only: at --rate).
void SpreadTies(const SimulateSetup& setup, std::vector<sim::ReplicaRequest>* requests, TraceCounts* counts) {
  std::vector<sim::ReplicaRequest>& out = *requests;
  double previous_time = 0;
  for (std::size_t i = 0; i < out.size();) {
    std::size_t j = i;
    while (j < out.size() && out[j].arrival_s == out[i].arrival_s) ++j;
    const double time = out[i].arrival_s;
    if (j - i > 1) {
      counts->tied += j - i;
      if (setup.spread_ties) {
        const double span = j < out.size()         ? out[j].arrival_s - time
                            : counts->distinct > 0 ? time - previous_time
                                                   : static_cast<double>(j - i) / setup.rate;
        const double gap = span / static_cast<double>(j - i);
        for (std::size_t k = i; k < j; ++k) out[k].arrival_s += gap * static_cast<double>(k - i);
      }
    }
    ++counts->distinct;
    previous_time = time;
    i = j;
  }
}

// --class-quantile's names as the trace's class ids.
base::Status ApplyClassQuantiles(const std::map<std::string, std::uint32_t, std::less<>>& classes,
                                 SimulateSetup* setup) {
  for (const auto& [name, q] : setup->class_quantiles) {
    const auto it = classes.find(name);
    if (it == classes.end()) {
      std::string known;
      for (const auto& entry : classes) known += (known.empty() ? "" : ", ") + entry.first;
      return base::Status::Error("--class-quantile: no request of class '" + name +
                                 "' in the trace (its classes: " + known + ")");
    }
    setup->replica.class_quantiles[std::min<std::uint32_t>(it->second, sim::kMaxClasses - 1)] = q;
  }
  return base::Status::Ok();
}

// The records left out, and why.
void StateLeftOut(const TraceCounts& c, std::vector<std::string>* a) {
  const std::string n = GroupedCount(c.records);
  if (c.no_pages > 0) {
    a->push_back(GroupedCount(c.no_pages) + " of " + n +
                 " records have no hash_ids: left out (nothing to prefill or share)");
  }
  if (c.far_time > 0) {
    a->push_back(GroupedCount(c.far_time) + " of " + n +
                 " records have a timestamp beyond +-1e11 s (over 3,000 years from 1970): left out");
  }
  if (c.huge_prompt > 0) {
    a->push_back(GroupedCount(c.huge_prompt) + " of " + n +
                 " records have a prompt over 4,294,967,295 tokens (input_length, or pages x page size): left out");
  }
  if (c.huge_output > 0) {
    a->push_back(GroupedCount(c.huge_output) + " of " + n + " records have an output_length over " +
                 GroupedCount(kMaxOutputTokens) + " tokens: left out");
  }
}

// What the trace left to assumption or out, as the output's assumptions say it.
void StateAssumptions(const TraceCounts& c, SimulateSetup* setup) {
  SimulateSettings& st = setup->settings;
  auto& a = st.assumptions;
  const std::string n = GroupedCount(c.records);
  if (!c.any_time && c.records > 0) {
    a.push_back(
        std::string(c.far_time > 0 ? "no record has a timestamp within +-1e11 s" : "no record has a timestamp") +
        ": arrivals evenly spaced at " + Fixed(setup->rate, 3) + " requests/s (--rate) at load 1");
  } else if (c.no_time > 0) {
    a.push_back(GroupedCount(c.no_time) + " of " + n +
                " records have no timestamp: each arrives with the record before it");
  }
  if (c.any_time && c.tied > 0) {
    a.push_back(GroupedCount(c.tied) + " of " + n + " requests share an arrival time with another (" +
                GroupedCount(c.distinct) + " distinct times): " +
                (!setup->spread_ties ? "each group arrives at once, at every load (--spread-ties spreads them)"
                 : c.distinct > 1    ? "each group spread evenly up to the next time, the last over the gap before "
                                       "it (--spread-ties)"
                                     : "spread evenly at --rate (--spread-ties)"));
  }
  StateLeftOut(c, &a);
  if (c.no_output > 0) {
    a.push_back(GroupedCount(c.no_output) + " of " + n + " records have no output_length: " +
                std::to_string(setup->output_tokens) + " output tokens assumed (--output-tokens)");
  }
  if (c.zero_output > 0) {
    a.push_back(GroupedCount(c.zero_output) + " of " + n +
                " records have output_length 0: each prefills its prompt and ends without a token");
  }
  if (c.no_input > 0) {
    a.push_back(GroupedCount(c.no_input) + " of " + n + " records have no input_length: pages x " +
                std::to_string(st.page_tokens) + " tokens assumed");
  }
  if (st.page_tokens_source != "option") {
    a.push_back(std::to_string(st.page_tokens) + " tokens per trace page (" +
                (st.page_tokens_source == "inferred" ? "inferred from input_length and the pages"
                                                     : "no record gives input_length: vLLM's default block") +
                "; --page-tokens sets it)");
  }
  if (setup->priorities.empty() && std::find(setup->policies.begin(), setup->policies.end(),
                                             curve::PolicyKind::kPriority) != setup->policies.end()) {
    a.push_back("no --priority rules: every request has priority 0, so the priority policy evicts as lru");
  }
  if (c.split > 1) {
    a.push_back("each trace page split into " + std::to_string(c.split) + " blocks of " +
                std::to_string(st.block_tokens) + " tokens (--block-tokens)");
  }
  if (c.beyond_classes > 0) {
    a.push_back(GroupedCount(c.beyond_classes) +
                " requests of classes beyond the first 64 share the 64th's output quantile");
  }
  for (std::size_t i = 0; i < c.tier_counts.size() && i < st.tier_members.size(); ++i) {
    st.tier_members[i] += " (" + GroupedCount(c.tier_counts[i]) + " requests)";
  }
}

}  // namespace

base::Result<std::vector<sim::ReplicaRequest>> BuildReplicaRequests(const std::vector<curve::Request>& trace,
                                                                    SimulateSetup* setup) {
  using R = base::Result<std::vector<sim::ReplicaRequest>>;
  TraceCounts counts;
  RequestConverter converter(trace, *setup, &counts);
  std::vector<sim::ReplicaRequest> out;
  out.reserve(trace.size());
  for (std::size_t i = 0; i < trace.size(); ++i) {
    auto r = converter.Convert(trace[i], i);
    if (!r.ok()) return R::Error(r.error());
    if (r.value()) out.push_back(std::move(*r.value()));
  }
  std::stable_sort(out.begin(), out.end(), [](const sim::ReplicaRequest& a, const sim::ReplicaRequest& b) {
    return a.arrival_s < b.arrival_s;
  });
  SpreadTies(*setup, &out, &counts);
  if (base::Status s = ApplyClassQuantiles(converter.classes(), setup); !s.ok()) return R::Error(s.error());
  if (out.empty()) {
    return R::Error("no record can be simulated: " + GroupedCount(counts.no_pages) + " without hash_ids, " +
                    GroupedCount(counts.far_time) + " with a timestamp beyond +-1e11 s, " +
                    GroupedCount(counts.huge_prompt) + " with a prompt over 4,294,967,295 tokens, " +
                    GroupedCount(counts.huge_output) + " with an output over " + GroupedCount(kMaxOutputTokens) +
                    " tokens");
  }
  const double t0 = out.front().arrival_s;
  for (sim::ReplicaRequest& r : out) r.arrival_s -= t0;
  setup->settings.requests = out.size();
  setup->settings.trace_span_s = out.back().arrival_s;
  StateAssumptions(counts, setup);
  return out;
}

namespace {

// Prints "kvwatch simulate: message" and gives back the exit status.
int FailSimulate(int status, const std::string& message) {
  std::fprintf(stderr, "kvwatch simulate: %s\n", message.c_str());
  return status;
}

// What the options ask of the run beyond ResolveSimulateOptions: a trace, a
// timestamp unit, and one load for --timeline.
base::Result<collectors::TimestampUnit> CheckRunOptions(const SimulateOptions& options, const SimulateSetup& setup) {
  using R = base::Result<collectors::TimestampUnit>;
  if (!options.timeline.empty() && setup.loads.size() != 1) {
    return R::Error("--timeline: needs exactly one --load, got " + std::to_string(setup.loads.size()));
  }
  if (options.traces.empty()) return R::Error("no TRACE given (a path, or - for standard input)");
  auto unit = collectors::ParseTimestampUnit(options.timestamp_unit);
  if (!unit) return R::Error("--timestamp-unit: expected auto, ms or s, got '" + options.timestamp_unit + "'");
  return *unit;
}

// The whole trace in memory (every run replays all of it), the token counts the
// page size is inferred from, and the bad lines skipped (the first 20 said).
struct LoadedTrace {
  std::vector<curve::Request> requests;
  std::vector<TokenPages> evidence;
  std::uint64_t bad_lines = 0;
};

base::Result<LoadedTrace> ReadSimulateTrace(const SimulateOptions& options, collectors::TimestampUnit unit,
                                            ProgressBar& bar) {
  LoadedTrace trace;
  for (const std::string& path : options.traces) {
    collectors::TraceReaderOptions ro;
    ro.strict = options.strict;
    ro.record.timestamp_unit = unit;
    if (!options.tenant_fields.empty()) ro.record.tenant_fields = options.tenant_fields;
    collectors::TraceCallbacks callbacks;
    // input_length 0 beside pages is a contradiction (a prompt has a token);
    // without pages the record is left out anyway (no hash_ids).
    callbacks.check = [](const curve::Request& request) -> std::string {
      if (request.input_tokens != 0 || request.pages.empty()) return {};
      return "input_length is 0 but hash_ids has " + std::to_string(request.pages.size()) +
             (request.pages.size() == 1 ? " page" : " pages") +
             ": expected the prompt's token count (at least 1), or no input_length to assume pages x page size";
    };
    callbacks.on_request = [&](curve::Request& request) {
      if (request.input_tokens > 0) {
        trace.evidence.push_back({static_cast<std::uint64_t>(request.input_tokens), request.pages.size()});
      }
      trace.requests.push_back(std::move(request));
      request = curve::Request();
    };
    callbacks.on_bad_line = [&](std::string_view source, std::uint64_t line, std::string_view message) {
      bar.Clear();
      if (trace.bad_lines++ < 20) {
        std::fprintf(stderr, "kvwatch simulate: %.*s:%llu: %.*s\n", static_cast<int>(source.size()), source.data(),
                     static_cast<unsigned long long>(line), static_cast<int>(message.size()), message.data());
      }
    };
    callbacks.on_progress = [&](std::uint64_t done, std::uint64_t total) { bar.Update(path, done, total); };
    auto summary = collectors::ReadTrace(path, ro, callbacks);
    bar.Clear();
    if (!summary.ok()) return base::Result<LoadedTrace>::Error(summary.error());
  }
  if (trace.requests.empty()) return base::Result<LoadedTrace>::Error("the trace has no request");
  return trace;
}

// The runs in the output's order (admission, policy, load), not run yet; with
// --timeline, an empty timeline beside each.
SimulateResult PlanRuns(const SimulateSetup& s, bool timeline) {
  SimulateResult result;
  result.settings = s.settings;
  for (sim::Admission a : s.admissions) {
    for (curve::PolicyKind p : s.policies) {
      for (double load : s.loads) {
        SimulateRun run;
        run.admission = std::string(sim::AdmissionName(a));
        run.policy = std::string(curve::PolicyName(p));
        run.load = load;
        result.runs.push_back(run);
      }
    }
  }
  if (timeline) {
    for (const SimulateRun& run : result.runs) result.timelines.push_back({run.admission, run.policy, run.load, {}});
  }
  return result;
}

// The sweep's shared state across its worker threads: the requests simulated
// per run, for one progress bar over all, the results and the first error.
struct Sweep {
  Sweep(const SimulateSetup& s, const std::vector<sim::ReplicaRequest>& r, bool with_timeline, ProgressBar& b,
        SimulateResult* out)
      : setup(s),
        requests(r),
        time(s.coefficients),
        timeline(with_timeline),
        bar(b),
        result(out),
        done(out->runs.size(), 0) {}

  const SimulateSetup& setup;
  const std::vector<sim::ReplicaRequest>& requests;  // at load 1
  const sim::LinearStepTime time;
  const bool timeline;
  ProgressBar& bar;
  SimulateResult* result;
  std::mutex mu;
  std::vector<std::uint64_t> done;  // per run
  std::string error;                // the first run's that failed

  void Progress(std::size_t index, std::uint64_t d) {
    std::lock_guard lock(mu);
    done[index] = d;
    std::uint64_t sum = 0;
    for (std::uint64_t v : done) sum += v;
    bar.Update("simulate", sum, static_cast<std::uint64_t>(result->runs.size()) * requests.size());
  }
};

// Run `index` (admission a, policy p) over the requests at its load.
void RunOne(Sweep& sweep, const std::vector<sim::ReplicaRequest>& scaled, std::size_t a, std::size_t p,
            std::size_t index) {
  const SimulateSetup& s = sweep.setup;
  sim::ReplicaOptions ro = s.replica;
  ro.admission = s.admissions[a];
  ro.eviction = s.policies[p];
  auto progress = [&sweep, index](std::uint64_t d, std::uint64_t) { sweep.Progress(index, d); };
  std::vector<TimelineStep> steps;
  sim::ReplicaObserver observer;
  if (sweep.timeline) {
    observer.on_step = [&steps](const sim::StepRecord& step) {
      steps.push_back(
          {step.start_s, step.seconds, step.held_blocks, step.cached_free_blocks, step.finished, step.preempted});
    };
  }
  auto summary = sim::SimulateReplicaObserved(ro, scaled, sweep.time, progress, observer);
  std::lock_guard lock(sweep.mu);
  SimulateResult& result = *sweep.result;
  if (sweep.timeline) result.timelines[index].steps = std::move(steps);
  if (!summary.ok()) {
    if (sweep.error.empty()) {
      sweep.error = result.runs[index].admission + " / " + result.runs[index].policy + ": " + summary.error();
    }
    return;
  }
  result.runs[index].summary = std::move(summary.value());
}

// Every admission x policy at load index li, on up to `threads` threads; the
// load's arrivals are scaled once, shared by its runs.
void RunLoad(Sweep& sweep, std::size_t li, unsigned threads) {
  const SimulateSetup& s = sweep.setup;
  const std::size_t per_load = s.admissions.size() * s.policies.size();
  std::vector<sim::ReplicaRequest> scaled = sweep.requests;
  for (sim::ReplicaRequest& r : scaled) r.arrival_s /= s.loads[li];
  std::atomic<std::size_t> next{0};
  auto worker = [&]() {
    for (std::size_t k = next++; k < per_load; k = next++) {
      const std::size_t a = k / s.policies.size(), p = k % s.policies.size();
      RunOne(sweep, scaled, a, p, (a * s.policies.size() + p) * s.loads.size() + li);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

// The whole sweep, one load at a time; an error names the run that failed.
base::Status RunSweep(const SimulateSetup& s, const std::vector<sim::ReplicaRequest>& requests, unsigned threads,
                      bool timeline, ProgressBar& bar, SimulateResult* result) {
  Sweep sweep(s, requests, timeline, bar, result);
  const std::size_t per_load = s.admissions.size() * s.policies.size();
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, per_load));
  for (std::size_t li = 0; li < s.loads.size() && sweep.error.empty(); ++li) RunLoad(sweep, li, threads);
  bar.Clear();
  if (!sweep.error.empty()) return base::Status::Error(sweep.error);
  return base::Status::Ok();
}

// Writes a plot to `path`; false when the file cannot be written.
bool WritePlot(const std::string& path, const std::string& svg) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << svg;
  return out.good();
}

// The result in --format on standard output, the bad lines' count on standard
// error, and the plots asked for.
int WriteSimulateOutputs(const SimulateOptions& options, const SimulateResult& result, std::uint64_t bad_lines) {
  if (options.format == "json") {
    std::fputs(FormatSimulateJson(result).c_str(), stdout);
  } else if (options.format == "csv") {
    std::fputs(FormatSimulateCsv(result).c_str(), stdout);
  } else {
    std::fputs(FormatSimulateTable(result).c_str(), stdout);
  }
  if (bad_lines > 0) {
    std::fprintf(stderr, "kvwatch simulate: skipped %llu bad lines\n", static_cast<unsigned long long>(bad_lines));
  }
  if (!options.svg.empty() && !WritePlot(options.svg, RenderSimulateSvg(result))) {
    return FailSimulate(1, "--svg: cannot write '" + options.svg + "'");
  }
  if (!options.timeline.empty() && !WritePlot(options.timeline, RenderTimelineSvg(result))) {
    return FailSimulate(1, "--timeline: cannot write '" + options.timeline + "'");
  }
  return 0;
}

}  // namespace

int RunSimulate(const SimulateOptions& options) {
  auto setup = ResolveSimulateOptions(options);
  if (!setup.ok()) return FailSimulate(2, setup.error());
  SimulateSetup& s = setup.value();
  auto unit = CheckRunOptions(options, s);
  if (!unit.ok()) return FailSimulate(2, unit.error());
  const bool progress_on = options.progress == "always" || (options.progress == "auto" && isatty(STDERR_FILENO));
  ProgressBar bar(stderr, progress_on);
  auto trace = ReadSimulateTrace(options, unit.value(), bar);
  if (!trace.ok()) return FailSimulate(1, trace.error());
  const auto guess = InferPageTokens(trace.value().evidence);
  auto settled = SettleSimulatePool(&s, guess ? std::optional(guess->page_tokens) : std::nullopt);
  if (!settled.ok()) return FailSimulate(2, settled.error());
  auto built = BuildReplicaRequests(trace.value().requests, &s);
  if (!built.ok()) return FailSimulate(1, built.error());
  const std::uint64_t bad_lines = trace.value().bad_lines;
  trace.value() = LoadedTrace();  // the replica has its own requests now
  SimulateResult result = PlanRuns(s, !options.timeline.empty());
  if (base::Status run = RunSweep(s, built.value(), options.threads, !options.timeline.empty(), bar, &result);
      !run.ok()) {
    return FailSimulate(2, run.error());
  }
  ScoreSla(&result);
  return WriteSimulateOutputs(options, result, bad_lines);
}

}  // namespace kvwatch::agent
