#include "agent/runtime/load_metrics.h"

#include <cmath>

#include "agent/render/text_format.h"
#include "agent/runtime/agent.h"

namespace kvwatch::agent {
namespace {

using base::MetricDef;
using base::MetricType;

enum LoadFamily {
  kLoadFactor,
  kLoadRequests,
  kTokenSeconds,
  kDecodeRate,
  kPrefillSeconds,
  kCapacityTokens,
  kOutputTokens
};

bool Positive(std::optional<double> v) { return v && *v > 0 && std::isfinite(*v); }
bool NonNegative(std::optional<double> v) { return v && *v >= 0 && std::isfinite(*v); }

// Mean KV token-seconds per sized request of a slice with sized requests.
double MeanTokenSeconds(const curve::KvLoadSlice& slice, const KvLoadSources& sources) {
  return slice.TokenSeconds(sources.decode_tokens_per_s, sources.prefill_s) / static_cast<double>(slice.sized());
}

}  // namespace

const MetricDef kLoadMetrics[7] = {
    {"kvwatch_kv_load_factor", MetricType::kGauge,
     "KV load factor over the window (Little's law for memory): arrival rate x mean KV token-seconds per request "
     "/ KV capacity in tokens. Near 1, admission outruns memory and preemptions follow. Absent without requests "
     "with prompt and output token counts in the window, or without a KV capacity.",
     "window"},
    {"kvwatch_kv_load_requests", MetricType::kGauge,
     "Requests with prompt and output token counts in the window: the load factor's mean KV token-seconds rests "
     "on them (the arrival rate counts every request).",
     "window"},
    {"kvwatch_kv_token_seconds_per_request", MetricType::kGauge,
     "Mean KV token-seconds a request holds over the window: prompt tokens x (prefill time + output tokens / "
     "decode rate) + output tokens^2 / (2 x decode rate), over the requests with both token counts.",
     "window"},
    {"kvwatch_kv_load_decode_tokens_per_second", MetricType::kGauge,
     "Decode rate per sequence the load factor uses, tokens/s: source engine (1 / the mean inter-token latency "
     "the engine's /metrics reported over its last scrape interval, averaged over the engines) or config "
     "(curve.decode_tokens_per_second).",
     "source"},
    {"kvwatch_kv_load_prefill_seconds", MetricType::kGauge,
     "Prefill time per request the load factor charges each prompt for, seconds: source engine (the mean the "
     "engine's /metrics reported over its last scrape interval: vLLM's request prefill time, else time to first "
     "token minus queue time; averaged over the engines) or config (curve.prefill_seconds).",
     "source"},
    {"kvwatch_kv_load_capacity_tokens", MetricType::kGauge,
     "KV capacity in tokens the load factor divides by: source engine (the sum of the engines' reported "
     "capacities) or config (the largest of curve.capacities), times page_tokens.",
     "source"},
    {"kvwatch_class_output_tokens", MetricType::kGauge,
     "Output-length quantile of the class's requests over the window, in tokens: a fraction (0.5, 0.9, 0.99) of "
     "them generated at most this many (what a reservation per class would use). The upper end of the bucket "
     "holding the nearest-rank quantile, exact below 32 tokens and at most "
     "6.25% above otherwise.",
     "window,class,fraction"},
};

KvLoadSources KvLoadSourcesOf(const AgentOptions& options, const std::vector<CollectorCopy>& collectors) {
  // Several engine /metrics collectors are the replica's engines (data-parallel
  // ranks scraped one by one) whose requests all reach this agent: their KV
  // capacities add up, and their decode rates and prefill times are averaged.
  KvLoadSources s;
  double decode_sum = 0, prefill_sum = 0, capacity_pages = 0;
  int decode_n = 0, prefill_n = 0, capacity_n = 0;
  for (const CollectorCopy& c : collectors) {
    if (Positive(c.signals.decode_tokens_per_s)) {
      decode_sum += *c.signals.decode_tokens_per_s;
      ++decode_n;
    }
    if (NonNegative(c.signals.prefill_seconds)) {
      prefill_sum += *c.signals.prefill_seconds;
      ++prefill_n;
    }
    if (Positive(c.signals.capacity_pages)) {
      capacity_pages += *c.signals.capacity_pages;
      ++capacity_n;
    }
  }
  s.decode_tokens_per_s = decode_n > 0 ? decode_sum / decode_n : options.curve.decode_tokens_per_second;
  s.decode_source = decode_n > 0 ? "engine" : "config";
  s.prefill_s = prefill_n > 0 ? prefill_sum / prefill_n : options.curve.prefill_seconds;
  s.prefill_source = prefill_n > 0 ? "engine" : "config";
  const auto page_tokens = static_cast<double>(options.page_tokens);
  if (capacity_n > 0) {
    s.capacity_tokens = capacity_pages * page_tokens;
    s.capacity_source = "engine";
  } else if (!options.curve.capacities.empty()) {
    s.capacity_tokens = static_cast<double>(options.curve.capacities.back()) * page_tokens;
    s.capacity_source = "config";
  }
  return s;
}

std::optional<curve::KvLoad> WindowKvLoad(const AnalysisSnapshot::LoadWindow& window, const KvLoadSources& sources) {
  if (!sources.capacity_tokens) return std::nullopt;
  return curve::KvLoadOf(window.slice, window.span_s, sources.decode_tokens_per_s, *sources.capacity_tokens,
                         sources.prefill_s);
}

void AppendLoadMetrics(MetricsBuilder& m, const AgentOptions& options, const AgentSnapshot& snapshot) {
  const AnalysisSnapshot& s = snapshot.analysis;
  const KvLoadSources sources = KvLoadSourcesOf(options, snapshot.collectors);
  for (std::size_t i = 0; i < s.load.size() && i < options.curve.windows.size(); ++i) {
    const Labels labels = {{"window", options.curve.windows[i].name}};
    if (const std::optional<curve::KvLoad> load = WindowKvLoad(s.load[i], sources)) {
      m.Add(kLoadMetrics[kLoadFactor], load->load_factor, labels);
    }
    const curve::KvLoadSlice& slice = s.load[i].slice;
    m.Add(kLoadMetrics[kLoadRequests], static_cast<double>(slice.sized()), labels);
    if (slice.sized() > 0) {
      m.Add(kLoadMetrics[kTokenSeconds], MeanTokenSeconds(slice, sources), labels);
    }
  }
  m.Add(kLoadMetrics[kDecodeRate], sources.decode_tokens_per_s, {{"source", sources.decode_source}});
  m.Add(kLoadMetrics[kPrefillSeconds], sources.prefill_s, {{"source", sources.prefill_source}});
  if (sources.capacity_tokens) {
    m.Add(kLoadMetrics[kCapacityTokens], *sources.capacity_tokens, {{"source", sources.capacity_source}});
  }
  for (std::size_t i = 0; i < s.load.size() && i < options.curve.windows.size(); ++i) {
    for (const auto& [label, histogram] : s.load[i].slice.classes()) {
      for (double q : kOutputQuantiles) {
        const std::optional<std::uint64_t> tokens = curve::OutputLengthQuantile(histogram, q);
        if (!tokens) continue;
        m.Add(kLoadMetrics[kOutputTokens], static_cast<double>(*tokens),
              {{"window", options.curve.windows[i].name}, {"class", label}, {"fraction", FractionLabel(q)}});
      }
    }
  }
}

CurveApiContext::KvLoad KvLoadApiOf(const AgentOptions& options, const AgentSnapshot& snapshot, std::size_t window) {
  const AnalysisSnapshot::LoadWindow& w = snapshot.analysis.load[window];
  const KvLoadSources sources = KvLoadSourcesOf(options, snapshot.collectors);
  CurveApiContext::KvLoad k;
  k.requests = w.slice.requests();
  k.sized_requests = w.slice.sized();
  k.span_seconds = w.span_s;
  if (const std::optional<curve::KvLoad> load = WindowKvLoad(w, sources)) k.load_factor = load->load_factor;
  if (w.slice.sized() > 0) {
    k.mean_kv_token_seconds = MeanTokenSeconds(w.slice, sources);
  }
  k.decode_tokens_per_second = sources.decode_tokens_per_s;
  k.decode_source = sources.decode_source;
  k.prefill_seconds = sources.prefill_s;
  k.prefill_source = sources.prefill_source;
  k.capacity_tokens = sources.capacity_tokens;
  k.capacity_source = sources.capacity_source;
  for (const auto& [label, histogram] : w.slice.classes()) {
    std::vector<std::pair<std::string, std::uint64_t>> quantiles;
    for (double q : kOutputQuantiles) {
      if (const std::optional<std::uint64_t> tokens = curve::OutputLengthQuantile(histogram, q)) {
        quantiles.emplace_back(FractionLabel(q), *tokens);
      }
    }
    k.output_tokens.emplace_back(label, std::move(quantiles));
  }
  return k;
}

std::optional<alerts::KvLoadSample> KvLoadSampleOf(const AgentOptions& options, const AgentSnapshot& snapshot,
                                                   std::optional<std::size_t> window) {
  const AnalysisSnapshot& s = snapshot.analysis;
  if (!window || *window >= s.load.size()) return std::nullopt;
  const KvLoadSources sources = KvLoadSourcesOf(options, snapshot.collectors);
  const std::optional<curve::KvLoad> load = WindowKvLoad(s.load[*window], sources);
  if (!load) return std::nullopt;
  alerts::KvLoadSample k;
  k.load_factor = load->load_factor;
  k.sized_requests = static_cast<double>(s.load[*window].slice.sized());
  k.arrivals_per_s = load->arrivals_per_s;
  k.mean_token_seconds = load->mean_token_seconds;
  k.capacity_tokens = load->capacity_tokens;
  k.decode_tokens_per_s = sources.decode_tokens_per_s;
  k.prefill_s = sources.prefill_s;
  return k;
}

}  // namespace kvwatch::agent
