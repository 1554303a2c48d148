#include "collectors/engine_metrics_collector.h"

#include <httplib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace kvwatch::collectors {
namespace {

// Log lines kept between two Polls; more are dropped (the counters keep totals).
constexpr std::size_t kMaxPendingLogs = 20;
// Malformed exposition lines logged per scrape.
constexpr std::size_t kBadLinesLogged = 3;

// The scraper's own metric families (the engine's are engine_signals.h's).
constexpr base::MetricDef kScrapeMetrics[] = {
    {"kvwatch_engine_counter_resets_total", base::MetricType::kCounter,
     "Scrapes in which some engine counter went back (engine restarts); exported engine counters keep a running "
     "total across them.",
     "collector"},
    {"kvwatch_engine_scrape_backoff_seconds", base::MetricType::kGauge,
     "Delay before the next scrape of the engine: the interval, doubled per consecutive failure up to the "
     "interval x max_backoff_factor.",
     "collector"},
};

// What one scrape found, before it is applied to the collector's state.
struct ScrapeResult {
  std::optional<EngineSnapshot> snapshot;  // set when the scrape succeeded
  std::map<std::string, std::uint64_t> errors;
  std::vector<std::string> messages;
  double wall_s = 0;
};

std::string_view TransportReason(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout:
    case httplib::Error::SSLConnection:
      return "connect";
    case httplib::Error::Read:
    case httplib::Error::Write:
      return "read";
    default:
      return "http";
  }
}

ScrapeResult Scrape(httplib::Client& client, const std::string& url, const std::string& path,
                    const EngineSnapshotOptions& snapshot_options) {
  ScrapeResult r;
  const httplib::Result res = client.Get(path.c_str());
  r.wall_s = WallNow();
  if (!res) {
    ++r.errors[std::string(TransportReason(res.error()))];
    r.messages.push_back(url + ": GET failed: " + httplib::to_string(res.error()));
    return r;
  }
  if (res->status < 200 || res->status > 299) {
    ++r.errors["http_status"];
    r.messages.push_back(url + ": expected HTTP 2xx, got " + std::to_string(res->status));
    return r;
  }
  const Exposition exposition = ParseExposition(res->body);
  if (!exposition.errors.empty()) {
    r.errors["bad_line"] += exposition.errors.size();
    for (std::size_t i = 0; i < exposition.errors.size() && i < kBadLinesLogged; ++i) {
      const ExpositionLineError& e = exposition.errors[i];
      r.messages.push_back(url + ": line " + std::to_string(e.line) + ", column " + std::to_string(e.column) + ": " +
                           e.reason);
    }
  }
  EngineSnapshot snapshot = MapEngineSnapshot(exposition, snapshot_options);
  if (snapshot.bad_values > 0) {
    r.errors["bad_value"] += snapshot.bad_values;
    r.messages.push_back(url + ": " + std::to_string(snapshot.bad_values) +
                         " sample(s) negative, infinite or NaN, dropped for this scrape (the first: " +
                         snapshot.first_bad_value + "; expected a finite value >= 0)");
  }
  if (snapshot.matched_samples == 0) {
    ++r.errors["no_engine_metrics"];
    r.messages.push_back(url + ": expected vLLM (vllm:) or SGLang (sglang:) metrics, found none in " +
                         std::to_string(res->body.size()) + " bytes");
    return r;
  }
  r.snapshot = std::move(snapshot);
  return r;
}

// The increase of (numerator, denominator) since the previous scrape, as a ratio;
// nullopt on the first observation or when the denominator did not move.
std::optional<double> IntervalRatio(RunningTotal& num, RunningTotal& den, std::optional<double> num_value,
                                    std::optional<double> den_value) {
  if (!num_value || !den_value) return std::nullopt;
  const bool had_both = num.seen() && den.seen();
  const double dn = num.Observe(*num_value);
  const double dd = den.Observe(*den_value);
  if (!had_both || dd <= 0) return std::nullopt;
  return std::clamp(dn / dd, 0.0, 1.0);
}

// An engine histogram as a running total across engine restarts: the first
// observation is taken as is; later ones add each bucket's increase; a count or
// bucket going back is a restart (the new values are the increase since); other
// bounds than the last (another engine version) restart the totals at the new
// bounds (the exported counts then go back once: Prometheus reads a reset).
class RunningHistogram {
 public:
  // Returns whether the engine restarted (or changed its bounds) since the last.
  bool Observe(const EngineHistogram& h) {
    const bool first = !total_.has_value();
    const bool same_bounds = total_ && total_->buckets.size() == h.buckets.size() &&
                             std::equal(h.buckets.begin(), h.buckets.end(), total_->buckets.begin(),
                                        [](const auto& a, const auto& b) { return a.first == b.first; });
    if (!same_bounds) {
      total_ = EngineHistogramSignal{h.buckets, h.count, h.sum};
      last_ = h;
      return !first;
    }
    bool reset = h.count < last_.count || h.sum < last_.sum;
    for (std::size_t i = 0; i < h.buckets.size() && !reset; ++i) reset = h.buckets[i].second < last_.buckets[i].second;
    for (std::size_t i = 0; i < h.buckets.size(); ++i) {
      total_->buckets[i].second += h.buckets[i].second - (reset ? 0 : last_.buckets[i].second);
    }
    total_->count += h.count - (reset ? 0 : last_.count);
    total_->sum += h.sum - (reset ? 0 : last_.sum);
    last_ = h;
    return reset;
  }
  const std::optional<EngineHistogramSignal>& total() const { return total_; }

 private:
  std::optional<EngineHistogramSignal> total_;
  EngineHistogram last_;
};

}  // namespace

double RunningTotal::Observe(double value) {
  double increase = value;  // first value, or a reset: all of it is new
  if (last_ && value >= *last_) increase = value - *last_;
  if (last_ && value < *last_) ++resets_;
  last_ = value;
  total_ += increase;
  return increase;
}

std::optional<double> IntervalMean::Observe(std::optional<double> sum, std::optional<double> count) {
  constexpr double kMaxValue = 9007199254740992.0;  // 2^53
  auto plausible = [](double v) { return std::isfinite(v) && v >= 0 && v <= kMaxValue; };
  if (!sum || !count || !plausible(*sum) || !plausible(*count)) return std::nullopt;
  const std::uint64_t resets_before = sum_.resets() + count_.resets();
  double d_sum = sum_.Observe(*sum);
  double d_count = count_.Observe(*count);
  if (sum_.resets() + count_.resets() != resets_before) {
    d_sum = *sum;
    d_count = *count;
  }
  if (!(d_count > 0)) return std::nullopt;
  return d_sum / d_count;
}

base::Result<ScrapeTarget> ParseScrapeUrl(const std::string& url) {
  using R = base::Result<ScrapeTarget>;
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return R::Error("expected http://host[:port][/path], got \"" + url + "\"");
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    return R::Error("expected an http:// or https:// URL, got \"" + url + "\"");
  }
  const std::size_t host_start = scheme_end + 3;
  const std::size_t path_start = url.find('/', host_start);
  ScrapeTarget t;
  t.origin = url.substr(0, path_start);
  t.path = path_start == std::string::npos ? "/metrics" : url.substr(path_start);
  if (t.origin.size() == host_start) return R::Error("expected a host after \"" + scheme + "://\" in \"" + url + "\"");
  return t;
}

struct EngineMetricsCollector::State {
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stop = false;

  CollectorStats stats;
  std::uint64_t scrapes = 0;
  int failures = 0;
  std::chrono::milliseconds next_delay{0};
  std::vector<std::string> pending_logs;
  std::uint64_t logs_dropped = 0;

  RunningTotal preemptions, retracted, admission, aborted;
  RunningTotal hits, queries, cached, prompt;
  RunningTotal device_hits, sourced_prompt, external_hits, external_queries;
  std::array<RunningTotal, kPromptSources> prompt_sources;
  std::array<RunningHistogram, kResidencyHistograms> residency;
  IntervalMean inter_token_latency, prefill_time, time_to_first_token, queue_time;
  std::uint64_t counter_resets = 0;
  std::optional<double> kv_cache_usage, running, waiting, hit_ratio, capacity_pages, decode_rate, prefill_seconds;
  std::optional<double> external_hit_ratio, kv_used, kv_evictable, kv_available, page_tokens;
  std::optional<double> page_tokens_logged;  // the engine page size a mismatch was last logged for

  // Called with mu held.
  void Apply(ScrapeResult& r, const EngineMetricsCollectorOptions& o);
  void ApplySnapshot(const EngineSnapshot& s, std::uint32_t page_tokens);
  void CheckPageTokens(const EngineMetricsCollectorOptions& o);
};

void EngineMetricsCollector::State::CheckPageTokens(const EngineMetricsCollectorOptions& o) {
  if (!page_tokens || *page_tokens == o.page_tokens || page_tokens == page_tokens_logged) return;
  page_tokens_logged = page_tokens;
  if (pending_logs.size() >= kMaxPendingLogs) return;
  pending_logs.push_back(o.url + ": the engine's pages hold " +
                         std::to_string(static_cast<std::uint64_t>(*page_tokens)) + " tokens, page_tokens is " +
                         std::to_string(o.page_tokens) +
                         ": kvwatch's pages are not the engine's blocks, so its curve at the engine's capacity "
                         "is not the engine's cache (expected page_tokens: " +
                         std::to_string(static_cast<std::uint64_t>(*page_tokens)) + ")");
}

void EngineMetricsCollector::State::Apply(ScrapeResult& r, const EngineMetricsCollectorOptions& o) {
  ++scrapes;
  for (const auto& [reason, n] : r.errors) stats.errors[reason] += n;
  for (std::string& m : r.messages) {
    if (pending_logs.size() < kMaxPendingLogs) {
      pending_logs.push_back(std::move(m));
    } else {
      ++logs_dropped;
    }
  }
  stats.up = r.snapshot.has_value();
  if (r.snapshot) {
    stats.last_success_s = r.wall_s;
    failures = 0;
    ApplySnapshot(*r.snapshot, o.page_tokens);
    CheckPageTokens(o);
  } else if (failures < 30) {
    ++failures;
  }
  const std::int64_t factor =
      std::min<std::int64_t>(std::int64_t{1} << std::min(failures, 30), std::max(o.max_backoff_factor, 1));
  next_delay = o.interval * factor;
}

void EngineMetricsCollector::State::ApplySnapshot(const EngineSnapshot& s, std::uint32_t page_tokens) {
  bool reset = false;
  auto follow = [&](RunningTotal& total, std::optional<double> value) {
    if (!value) return;
    const std::uint64_t resets_before = total.resets();
    total.Observe(*value);
    reset = reset || total.resets() != resets_before;
  };
  follow(preemptions, s.preemptions_total);
  follow(retracted, s.retracted_requests_total);
  follow(admission, s.admission_rejections_total);
  follow(aborted, s.aborted_requests_total);

  // Prompt tokens by source, and their sum for the hit ratio.
  std::optional<double> sourced, device;
  bool by_source = false, complete = true;  // sources seen; none seen before is missing now
  for (std::size_t i = 0; i < kPromptSources; ++i) {
    const std::optional<double>& v = s.prompt_tokens_by_source[i];
    by_source = by_source || v || prompt_sources[i].seen();
    complete = complete && (v || !prompt_sources[i].seen());
    follow(prompt_sources[i], v);
    if (v) sourced = sourced.value_or(0) + *v;
  }
  if (sourced && complete) {
    device = s.prompt_tokens_by_source[static_cast<std::size_t>(PromptSource::kDeviceHit)].value_or(0);
  }

  // Hit ratio of the interval: the GPU-cache share of all prompt tokens where
  // the engine says where they came from (vLLM's prompt_tokens_by_source,
  // SGLang's prefill_effective_tokens); else vLLM's queried and hit tokens, or SGLang's prompt and
  // cached tokens. A source that goes missing for a scrape (a hostile value)
  // leaves the interval out rather than reading as a reset.
  const auto resets_of = [&] {
    return hits.resets() + queries.resets() + cached.resets() + prompt.resets() + device_hits.resets() +
           sourced_prompt.resets() + external_hits.resets() + external_queries.resets();
  };
  const std::uint64_t resets_before = resets_of();
  std::optional<double> ratio;
  if (by_source) {
    if (device) ratio = IntervalRatio(device_hits, sourced_prompt, device, sourced);
  } else if (s.prefix_cache_queries_tokens_total && s.prefix_cache_hits_tokens_total) {
    ratio = IntervalRatio(hits, queries, s.prefix_cache_hits_tokens_total, s.prefix_cache_queries_tokens_total);
  } else if (s.cached_tokens_total && s.prompt_tokens_total) {
    ratio = IntervalRatio(cached, prompt, s.cached_tokens_total, s.prompt_tokens_total);
  }
  const std::optional<double> external = IntervalRatio(
      external_hits, external_queries, s.external_prefix_cache_hits_total, s.external_prefix_cache_queries_total);
  if (external) external_hit_ratio = external;
  for (std::size_t i = 0; i < kResidencyHistograms; ++i) {
    if (s.residency[i]) reset = residency[i].Observe(*s.residency[i]) || reset;
  }
  reset = reset || resets_of() != resets_before;
  if (ratio) hit_ratio = ratio;
  if (reset) ++counter_resets;

  // Decode rate: tokens over seconds of inter-token latency, of the increases
  // since the previous scrape (the first scrape: the engine's totals so far);
  // kept when an interval generated nothing.
  // Guarded as the prefill time is (IntervalMean: hostile values skipped, a
  // reset of either line read as a restart).
  const std::optional<double> itl =
      inter_token_latency.Observe(s.inter_token_latency_sum_s, s.inter_token_latency_count);
  if (itl && *itl > 0 && *itl <= kMaxInterTokenSeconds) decode_rate = 1 / *itl;

  // Prefill seconds per request over the interval: vLLM's prefill phase where
  // it is exported (either line of it), else time to first token minus queue
  // time (both reported); kept when the interval gives none.
  const std::optional<double> prefill = prefill_time.Observe(s.prefill_time_sum_s, s.prefill_time_count);
  const std::optional<double> ttft =
      time_to_first_token.Observe(s.time_to_first_token_sum_s, s.time_to_first_token_count);
  const std::optional<double> queue = queue_time.Observe(s.queue_time_sum_s, s.queue_time_count);
  std::optional<double> prefill_mean;
  if (s.prefill_time_sum_s || s.prefill_time_count) {
    prefill_mean = prefill;
  } else if (ttft && queue) {
    prefill_mean = std::max(*ttft - *queue, 0.0);
  }
  if (prefill_mean && *prefill_mean <= kMaxPrefillSeconds) prefill_seconds = prefill_mean;

  if (s.kv_cache_usage) kv_cache_usage = s.kv_cache_usage;
  if (s.requests_running) running = s.requests_running;
  if (s.requests_waiting) waiting = s.requests_waiting;
  if (s.kv_used_tokens) kv_used = s.kv_used_tokens;
  if (s.kv_evictable_tokens) kv_evictable = s.kv_evictable_tokens;
  if (s.kv_available_tokens) kv_available = s.kv_available_tokens;
  if (s.block_size && *s.block_size > 0) {
    this->page_tokens = s.block_size;
  } else if (s.page_size && *s.page_size > 0) {
    this->page_tokens = s.page_size;
  }
  const double tokens_per_page = static_cast<double>(std::max<std::uint32_t>(page_tokens, 1));
  if (s.num_gpu_blocks && s.block_size && *s.block_size > 0) {
    capacity_pages = std::floor(*s.num_gpu_blocks * *s.block_size / tokens_per_page);
  } else if (s.num_gpu_blocks) {
    capacity_pages = std::floor(*s.num_gpu_blocks);
  } else if (s.num_pages && s.page_size && *s.page_size > 0) {
    capacity_pages = std::floor(*s.num_pages * *s.page_size / tokens_per_page);
  } else if (s.max_total_num_tokens) {
    capacity_pages = std::floor(*s.max_total_num_tokens / tokens_per_page);
  }
}

// --- The worker ------------------------------------------------------------------------

struct EngineMetricsCollector::Worker {
  std::unique_ptr<httplib::Client> client;
  std::thread thread;
};

base::Status EngineMetricsCollector::ValidateOptions(const EngineMetricsCollectorOptions& options) {
  using base::Status;
  const std::string where = "engine_metrics collector '" + options.name + "': ";
  if (options.name.empty()) return Status::Error("engine_metrics collector: a name is required");
  if (options.interval.count() <= 0) return Status::Error(where + "expected an interval > 0");
  if (options.timeout.count() <= 0) return Status::Error(where + "expected a timeout > 0");
  if (options.max_backoff_factor < 1) return Status::Error(where + "expected max_backoff_factor >= 1");
  if (options.page_tokens == 0) return Status::Error(where + "expected page_tokens > 0");
  auto target = ParseScrapeUrl(options.url);
  if (!target.ok()) return Status::Error(where + "url: " + target.error());
  return Status::Ok();
}

base::Result<std::unique_ptr<EngineMetricsCollector>> EngineMetricsCollector::Create(
    EngineMetricsCollectorOptions options, CollectorLog log) {
  using R = base::Result<std::unique_ptr<EngineMetricsCollector>>;
  if (base::Status s = ValidateOptions(options); !s.ok()) return R::Error(s.error());
  auto target = ParseScrapeUrl(options.url);
  if (!target.ok()) return R::Error(target.error());
  return std::unique_ptr<EngineMetricsCollector>(
      new EngineMetricsCollector(std::move(options), std::move(target).value(), std::move(log)));
}

EngineMetricsCollector::EngineMetricsCollector(EngineMetricsCollectorOptions options, ScrapeTarget target,
                                               CollectorLog log)
    : options_(std::move(options)),
      log_(std::move(log)),
      state_(std::make_unique<State>()),
      worker_(std::make_unique<Worker>()) {
  state_->next_delay = options_.interval;
  worker_->client = std::make_unique<httplib::Client>(target.origin);
  httplib::Client& client = *worker_->client;
  const auto timeout_us = std::chrono::duration_cast<std::chrono::microseconds>(options_.timeout);
  client.set_connection_timeout(timeout_us);
  client.set_read_timeout(timeout_us);
  client.set_write_timeout(timeout_us);
  client.set_keep_alive(false);
  worker_->thread = std::thread([this, path = target.path] {
    State& s = *state_;
    std::unique_lock<std::mutex> lock(s.mu);
    while (!s.stop) {
      lock.unlock();
      ScrapeResult r = Scrape(*worker_->client, options_.url, path, options_.snapshot);
      lock.lock();
      if (s.stop) break;
      s.Apply(r, options_);
      s.cv.wait_for(lock, s.next_delay, [&s] { return s.stop; });
    }
  });
}

EngineMetricsCollector::~EngineMetricsCollector() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
  // Aborts a request in flight; one about to start is bounded by the timeout.
  worker_->client->stop();
  if (worker_->thread.joinable()) worker_->thread.join();
}

void EngineMetricsCollector::Poll(RequestSink& /*sink*/, double /*wall_now_s*/) {
  std::vector<std::string> logs;
  std::uint64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    logs.swap(state_->pending_logs);
    std::swap(dropped, state_->logs_dropped);
  }
  if (!log_) return;
  for (const std::string& m : logs) log_(options_.name, m);
  if (dropped > 0) log_(options_.name, std::to_string(dropped) + " more scrape problems not logged");
}

CollectorStats EngineMetricsCollector::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

std::uint64_t EngineMetricsCollector::scrapes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->scrapes;
}

std::chrono::milliseconds EngineMetricsCollector::next_delay() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->next_delay;
}

EngineSignals EngineMetricsCollector::engine_signals() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  const State& s = *state_;
  EngineSignals g;
  if (s.preemptions.seen()) g.preemptions = s.preemptions.total();
  if (s.retracted.seen()) g.retracted_requests = s.retracted.total();
  if (s.admission.seen()) g.rejections.push_back({"admission", s.admission.total()});
  if (s.aborted.seen()) g.rejections.push_back({"abort", s.aborted.total()});
  g.kv_cache_usage = s.kv_cache_usage;
  g.prefix_cache_hit_ratio = s.hit_ratio;
  g.requests_running = s.running;
  g.requests_waiting = s.waiting;
  g.capacity_pages = s.capacity_pages;
  g.decode_tokens_per_s = s.decode_rate;
  g.prefill_seconds = s.prefill_seconds;
  for (std::size_t i = 0; i < kPromptSources; ++i) {
    if (s.prompt_sources[i].seen()) {
      g.prompt_tokens.push_back(
          {std::string(PromptSourceName(static_cast<PromptSource>(i))), s.prompt_sources[i].total()});
    }
  }
  g.external_prefix_cache_hit_ratio = s.external_hit_ratio;
  g.kv_used_tokens = s.kv_used;
  g.kv_evictable_tokens = s.kv_evictable;
  g.kv_available_tokens = s.kv_available;
  g.page_tokens = s.page_tokens;
  for (std::size_t i = 0; i < kResidencyHistograms; ++i) g.residency[i] = s.residency[i].total();
  return g;
}

void EngineMetricsCollector::AppendSamples(std::vector<MetricSample>* out) const {
  const EngineSignals g = engine_signals();
  AppendEngineCounterSamples(g, options_.name, out);
  AppendEngineGaugeSamples(g, options_.name, out);
  double resets = 0, backoff = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    resets = static_cast<double>(state_->counter_resets);
    backoff = std::chrono::duration<double>(state_->next_delay).count();
  }
  out->push_back(MakeSample(kScrapeMetrics[0], options_.name, resets));
  out->push_back(MakeSample(kScrapeMetrics[1], options_.name, backoff));
}

base::MetricDefs EngineMetricsScrapeMetricDefs() {
  base::MetricDefs defs;
  for (const base::MetricDef& def : kScrapeMetrics) defs.push_back(&def);
  return defs;
}

}  // namespace kvwatch::collectors
