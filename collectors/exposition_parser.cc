#include "collectors/exposition_parser.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <map>
#include <unordered_map>

namespace kvwatch::collectors {

std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kUntyped:
      return "untyped";
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kSummary:
      return "summary";
  }
  return "untyped";
}

std::optional<std::string_view> Sample::Label(std::string_view label_name) const {
  for (const auto& [k, v] : labels) {
    if (k == label_name) return std::string_view(v);
  }
  return std::nullopt;
}

const MetricFamilyInfo* Exposition::FindFamily(std::string_view name) const {
  for (const MetricFamilyInfo& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const MetricFamilyInfo* Exposition::FamilyOf(std::string_view sample_name) const {
  if (const MetricFamilyInfo* f = FindFamily(sample_name)) return f;
  for (std::string_view suffix : {"_total", "_created", "_bucket", "_count", "_sum", "_info"}) {
    if (sample_name.size() > suffix.size() && sample_name.ends_with(suffix)) {
      if (const MetricFamilyInfo* f = FindFamily(sample_name.substr(0, sample_name.size() - suffix.size()))) {
        return f;
      }
    }
  }
  return nullptr;
}

namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsMetricNameStart(char c) { return IsAlpha(c) || c == '_' || c == ':'; }
bool IsMetricNameChar(char c) { return IsMetricNameStart(c) || IsDigit(c); }
bool IsLabelNameStart(char c) { return IsAlpha(c) || c == '_'; }
bool IsLabelNameChar(char c) { return IsLabelNameStart(c) || IsDigit(c); }

// Go's strconv.ParseFloat, as the format requires: decimal or hex floats,
// "Inf"/"Infinity"/"NaN" in any case, with an optional sign.
std::optional<double> ParseFloat(std::string_view t) {
  bool negative = false;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    negative = t[0] == '-';
    t.remove_prefix(1);
  }
  if (t.empty() || t[0] == '+' || t[0] == '-') return std::nullopt;
  std::chars_format format = std::chars_format::general;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    t.remove_prefix(2);
    format = std::chars_format::hex;
    if (t.empty() || t[0] == '+' || t[0] == '-') return std::nullopt;
  }
  double v = 0;
  const char* end = t.data() + t.size();
  auto [ptr, ec] = std::from_chars(t.data(), end, v, format);
  if (ptr != end || (ec != std::errc() && ec != std::errc::result_out_of_range)) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    // Go returns ±Inf for overflow and 0 for underflow; from_chars leaves v
    // unchanged, so recompute from the exponent's sign.
    const std::size_t e = t.find_first_of(format == std::chars_format::hex ? "pP" : "eE");
    const bool tiny = e != std::string_view::npos && e + 1 < t.size() && t[e + 1] == '-';
    v = tiny ? 0.0 : HUGE_VAL;
  }
  return negative ? -v : v;
}

std::optional<MetricType> ParseType(std::string_view t) {
  if (t == "counter") return MetricType::kCounter;
  if (t == "gauge") return MetricType::kGauge;
  if (t == "histogram") return MetricType::kHistogram;
  if (t == "summary") return MetricType::kSummary;
  if (t == "untyped") return MetricType::kUntyped;
  return std::nullopt;
}

// Parses one line into an Exposition; reports the first problem and stops.
class LineParser {
 public:
  LineParser(std::string_view line, std::size_t line_no, Exposition* out,
             std::unordered_map<std::string, std::size_t>* family_index)
      : s_(line), line_no_(line_no), out_(out), family_index_(family_index) {}

  void Parse() {
    SkipBlanks();
    if (AtEnd()) return;
    if (s_[pos_] == '#') {
      ParseComment();
    } else {
      ParseSample();
    }
  }

 private:
  bool AtEnd() const { return pos_ >= s_.size(); }
  void SkipBlanks() {
    while (!AtEnd() && IsBlank(s_[pos_])) ++pos_;
  }
  std::string_view Token() {
    const std::size_t start = pos_;
    while (!AtEnd() && !IsBlank(s_[pos_])) ++pos_;
    return s_.substr(start, pos_ - start);
  }
  std::string_view MetricName() {
    const std::size_t start = pos_;
    if (AtEnd() || !IsMetricNameStart(s_[pos_])) return {};
    while (!AtEnd() && IsMetricNameChar(s_[pos_])) ++pos_;
    return s_.substr(start, pos_ - start);
  }
  void Fail(std::string reason) { Fail(pos_, std::move(reason)); }
  void Fail(std::size_t at, std::string reason) {
    out_->errors.push_back(ExpositionLineError{line_no_, at + 1, std::move(reason)});
  }

  MetricFamilyInfo& Family(std::string_view name) {
    auto [it, inserted] = family_index_->try_emplace(std::string(name), out_->families.size());
    if (inserted) {
      MetricFamilyInfo family;
      family.name = std::string(name);
      out_->families.push_back(std::move(family));
    }
    return out_->families[it->second];
  }

  void ParseComment() {
    ++pos_;  // '#'
    SkipBlanks();
    const std::string_view keyword = Token();
    if (keyword != "HELP" && keyword != "TYPE") return;  // a plain comment
    SkipBlanks();
    const std::size_t name_at = pos_;
    const std::string_view name = MetricName();
    if (name.empty() || (!AtEnd() && !IsBlank(s_[pos_]))) {
      return Fail(name_at, "expected a metric name after # " + std::string(keyword));
    }
    SkipBlanks();
    if (keyword == "TYPE") return ParseTypeLine(name);
    ParseHelpLine(name);
  }

  void ParseTypeLine(std::string_view name) {
    const std::size_t type_at = pos_;
    const std::string_view word = Token();
    const std::optional<MetricType> type = ParseType(word);
    if (!type) {
      return Fail(type_at, "expected counter, gauge, histogram, summary or untyped, got '" + std::string(word) + "'");
    }
    SkipBlanks();
    if (!AtEnd()) return Fail("unexpected text after the metric type");
    MetricFamilyInfo& f = Family(name);
    if (f.has_type) return Fail(type_at, "second TYPE line for '" + std::string(name) + "'");
    f.type = *type;
    f.has_type = true;
  }

  void ParseHelpLine(std::string_view name) {
    std::string help;
    for (std::size_t i = pos_; i < s_.size(); ++i) {
      if (s_[i] == '\\' && i + 1 < s_.size() && (s_[i + 1] == '\\' || s_[i + 1] == 'n')) {
        help.push_back(s_[i + 1] == 'n' ? '\n' : '\\');
        ++i;
      } else {
        help.push_back(s_[i]);
      }
    }
    MetricFamilyInfo& f = Family(name);
    if (f.help) return Fail("second HELP line for '" + std::string(name) + "'");
    f.help = std::move(help);
  }

  // Reads a quoted label value (pos_ at the opening quote).
  bool LabelValue(std::string* value) {
    ++pos_;
    while (!AtEnd()) {
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c == '\\') {
        if (pos_ + 1 >= s_.size()) break;
        const char e = s_[pos_ + 1];
        if (e != '\\' && e != '"' && e != 'n') {
          Fail("invalid escape '\\" + std::string(1, e) + "' in a label value (expected \\\\, \\\" or \\n)");
          return false;
        }
        value->push_back(e == 'n' ? '\n' : e);
        pos_ += 2;
        continue;
      }
      value->push_back(c);
      ++pos_;
    }
    Fail("unterminated label value");
    return false;
  }

  bool LabelSet(Labels* labels) {
    ++pos_;  // '{'
    while (true) {
      SkipBlanks();
      if (AtEnd()) {
        Fail("unterminated label set (expected '}')");
        return false;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      const std::size_t start = pos_;
      if (!IsLabelNameStart(s_[pos_])) {
        Fail("expected a label name or '}'");
        return false;
      }
      while (!AtEnd() && IsLabelNameChar(s_[pos_])) ++pos_;
      std::string name(s_.substr(start, pos_ - start));
      SkipBlanks();
      if (AtEnd() || s_[pos_] != '=') {
        Fail("expected '=' after label name '" + name + "'");
        return false;
      }
      ++pos_;
      SkipBlanks();
      if (AtEnd() || s_[pos_] != '"') {
        Fail("expected '\"' to open the value of label '" + name + "'");
        return false;
      }
      std::string value;
      if (!LabelValue(&value)) return false;
      labels->emplace_back(std::move(name), std::move(value));
      SkipBlanks();
      if (!AtEnd() && s_[pos_] == ',') {
        ++pos_;
      } else if (AtEnd() || s_[pos_] != '}') {
        Fail("expected ',' or '}' after a label value");
        return false;
      }
    }
  }

  void ParseSample() {
    Sample sample;
    sample.line = line_no_;
    sample.name = std::string(MetricName());
    if (sample.name.empty()) return Fail("expected a metric name or '#'");
    const std::size_t after_name = pos_;
    SkipBlanks();
    if (!AtEnd() && s_[pos_] == '{') {
      if (!LabelSet(&sample.labels)) return;
      SkipBlanks();
    } else if (pos_ == after_name && !AtEnd()) {
      return Fail("invalid character in metric name");
    }
    const std::size_t value_at = pos_;
    const std::string_view value = Token();
    if (value.empty()) return Fail("expected a sample value");
    const std::optional<double> v = ParseFloat(value);
    if (!v) return Fail(value_at, "invalid sample value '" + std::string(value) + "'");
    sample.value = *v;
    SkipBlanks();
    if (!AtEnd()) {
      const std::size_t ts_at = pos_;
      const std::string_view ts = Token();
      std::int64_t ms = 0;
      auto [ptr, ec] = std::from_chars(ts.data(), ts.data() + ts.size(), ms);
      if (ec != std::errc() || ptr != ts.data() + ts.size()) {
        return Fail(ts_at, "invalid timestamp '" + std::string(ts) + "' (expected integer milliseconds)");
      }
      sample.timestamp_ms = ms;
      SkipBlanks();
      if (!AtEnd()) return Fail("unexpected text after the timestamp");
    }
    std::sort(sample.labels.begin(), sample.labels.end());
    for (std::size_t i = 1; i < sample.labels.size(); ++i) {
      if (sample.labels[i].first == sample.labels[i - 1].first) {
        return Fail(0, "duplicate label name '" + sample.labels[i].first + "'");
      }
    }
    out_->samples.push_back(std::move(sample));
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  std::size_t line_no_;
  Exposition* out_;
  std::unordered_map<std::string, std::size_t>* family_index_;
};

}  // namespace

Exposition ParseExposition(std::string_view text) {
  Exposition out;
  std::unordered_map<std::string, std::size_t> family_index;
  std::size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    while (!line.empty() && (line.back() == '\r' || IsBlank(line.back()))) line.remove_suffix(1);
    LineParser(line, line_no, &out, &family_index).Parse();
  }
  return out;
}

// ---- Engine metric mapping ------------------------------------------------------------

namespace {

enum Slot {
  kPreemptions,
  kRetracted,
  kQueries,
  kHits,
  kPromptTokens,
  kCachedTokens,
  kFinished,
  kAborted,
  kRejections,
  kEvicted,
  kUsage,
  kRunning,
  kWaiting,
  kMaxTokens,
  kItlSum,
  kItlCount,
  kPrefillSum,
  kPrefillCount,
  kTtftSum,
  kTtftCount,
  kQueueSum,
  kQueueCount,
  kExternalQueries,
  kExternalHits,
  kKvUsedTokens,
  kKvEvictableTokens,
  kKvAvailableTokens,
  kPageSize,
  kNumPages,
  kSlotCount,
};

// Priority of a name within its slot: the first level with samples wins, so a
// bare or deprecated name is only a fallback.
constexpr int kLevels = 3;

struct NameRule {
  std::string_view name;
  Slot slot;
  int level;
};

constexpr NameRule kRules[] = {
    {"vllm:num_preemptions_total", kPreemptions, 0},
    {"vllm:num_preemptions", kPreemptions, 1},
    {"sglang:num_retracted_requests_total", kRetracted, 0},
    {"sglang:num_retracted_requests", kRetracted, 1},
    // vLLM's gpu_prefix_cache_* and gpu_cache_usage_perc (before 0.9) are no
    // longer read: vLLM's loggers.py of 2026 registers neither, and their
    // replacements below exist in every vLLM since.
    {"vllm:prefix_cache_queries_total", kQueries, 0},
    {"vllm:prefix_cache_queries", kQueries, 1},
    {"vllm:prefix_cache_hits_total", kHits, 0},
    {"vllm:prefix_cache_hits", kHits, 1},
    {"vllm:prompt_tokens_total", kPromptTokens, 0},
    {"vllm:prompt_tokens", kPromptTokens, 1},
    {"sglang:prompt_tokens_total", kPromptTokens, 0},
    {"sglang:prompt_tokens", kPromptTokens, 1},
    {"sglang:cached_tokens_total", kCachedTokens, 0},
    {"sglang:cached_tokens", kCachedTokens, 1},
    {"vllm:request_success_total", kFinished, 0},
    {"vllm:request_success", kFinished, 1},
    {"sglang:num_requests_total", kFinished, 0},
    {"sglang:num_requests", kFinished, 1},
    {"sglang:num_aborted_requests_total", kAborted, 0},
    {"sglang:num_aborted_requests", kAborted, 1},
    {"vllm:admission_rejections_total", kRejections, 0},
    {"vllm:admission_rejections", kRejections, 1},
    {"sglang:evicted_tokens_total", kEvicted, 0},
    {"sglang:evicted_tokens", kEvicted, 1},
    {"vllm:kv_cache_usage_perc", kUsage, 0},
    {"sglang:token_usage", kUsage, 0},
    {"vllm:num_requests_running", kRunning, 0},
    {"sglang:num_running_reqs", kRunning, 0},
    {"vllm:num_requests_waiting", kWaiting, 0},
    {"sglang:num_queue_reqs", kWaiting, 0},
    {"sglang:max_total_num_tokens", kMaxTokens, 0},
    // Inter-token latency: one observation per generated token (vLLM V1, SGLang);
    // vLLM's deprecated per-token name, then its per-request mean, as fallbacks.
    {"vllm:inter_token_latency_seconds_sum", kItlSum, 0},
    {"vllm:inter_token_latency_seconds_count", kItlCount, 0},
    {"sglang:inter_token_latency_seconds_sum", kItlSum, 0},
    {"sglang:inter_token_latency_seconds_count", kItlCount, 0},
    {"vllm:time_per_output_token_seconds_sum", kItlSum, 1},
    {"vllm:time_per_output_token_seconds_count", kItlCount, 1},
    {"sglang:time_per_output_token_seconds_sum", kItlSum, 1},
    {"sglang:time_per_output_token_seconds_count", kItlCount, 1},
    {"vllm:request_time_per_output_token_seconds_sum", kItlSum, 2},
    {"vllm:request_time_per_output_token_seconds_count", kItlCount, 2},
    // Per-request latencies, for the prefill time: vLLM's prefill phase, else
    // time to first token minus queue time.
    {"vllm:request_prefill_time_seconds_sum", kPrefillSum, 0},
    {"vllm:request_prefill_time_seconds_count", kPrefillCount, 0},
    {"vllm:time_to_first_token_seconds_sum", kTtftSum, 0},
    {"vllm:time_to_first_token_seconds_count", kTtftCount, 0},
    {"sglang:time_to_first_token_seconds_sum", kTtftSum, 0},
    {"sglang:time_to_first_token_seconds_count", kTtftCount, 0},
    {"vllm:request_queue_time_seconds_sum", kQueueSum, 0},
    {"vllm:request_queue_time_seconds_count", kQueueCount, 0},
    {"sglang:queue_time_seconds_sum", kQueueSum, 0},
    {"sglang:queue_time_seconds_count", kQueueCount, 0},
    // A KV connector's prefix cache (vLLM, vllm/v1/metrics/loggers.py).
    {"vllm:external_prefix_cache_queries_total", kExternalQueries, 0},
    {"vllm:external_prefix_cache_queries", kExternalQueries, 1},
    {"vllm:external_prefix_cache_hits_total", kExternalHits, 0},
    {"vllm:external_prefix_cache_hits", kExternalHits, 1},
    // SGLang's KV pool and its pages (python/sglang/srt/observability/
    // metrics_collector.py, SchedulerMetricsCollector).
    {"sglang:kv_used_tokens", kKvUsedTokens, 0},
    {"sglang:kv_evictable_tokens", kKvEvictableTokens, 0},
    {"sglang:kv_available_tokens", kKvAvailableTokens, 0},
    {"sglang:page_size", kPageSize, 0},
    {"sglang:num_pages", kNumPages, 0},
};

// Labelled counters of prompt tokens by source: the label and its values.
struct SourceRule {
  std::string_view name;
  int level;
  std::string_view label;
};
constexpr SourceRule kSourceRules[] = {
    {"vllm:prompt_tokens_by_source_total", 0, "source"},
    {"vllm:prompt_tokens_by_source", 1, "source"},
    {"sglang:prefill_effective_tokens_total", 0, "mode"},
    {"sglang:prefill_effective_tokens", 1, "mode"},
};
std::optional<PromptSource> SourceOf(std::string_view value) {
  if (value == "local_compute" || value == "input") return PromptSource::kCompute;
  if (value == "local_cache_hit" || value == "device_hit") return PromptSource::kDeviceHit;
  if (value == "host_hit") return PromptSource::kHostHit;
  if (value == "storage_hit") return PromptSource::kStorageHit;
  if (value == "external_kv_transfer") return PromptSource::kExternalHit;
  return std::nullopt;
}

// vLLM's residency histograms, by ResidencyHistogram.
constexpr std::string_view kResidencyNames[kResidencyHistograms] = {
    "vllm:kv_block_lifetime_seconds",
    "vllm:kv_block_idle_before_evict_seconds",
    "vllm:kv_block_reuse_gap_seconds",
};

struct Accumulator {
  double value = 0.0;
  bool any = false;
  void Add(double v, bool take_max) {
    value = !any ? v : (take_max ? std::max(value, v) : value + v);
    any = true;
  }
};

class SnapshotBuilder {
 public:
  explicit SnapshotBuilder(const EngineSnapshotOptions& options) : options_(options) {}

  void Add(const Sample& s) {
    const bool vllm = s.name.starts_with("vllm:");
    if (!vllm && !s.name.starts_with("sglang:")) return;
    const std::optional<std::string_view> model = s.Label("model_name");
    if (options_.model_name && model && *model != *options_.model_name) return;
    (vllm ? saw_vllm_ : saw_sglang_) = true;
    if (model && (models_.empty() || models_.back() != *model)) models_.emplace_back(*model);
    if (s.name == "vllm:cache_config_info") return AddCacheConfig(s);
    if (AddPromptSource(s) || AddResidency(s)) return;
    for (const NameRule& rule : kRules) {
      if (rule.name != s.name) continue;
      const bool abort =
          rule.slot == kFinished && s.Label("finished_reason") == std::optional<std::string_view>("abort");
      // Every number used is a count, a sum of seconds or a fraction: never
      // negative or infinite. Such a sample (or NaN) drops its whole field for
      // this scrape, as a half sum would read as a counter reset.
      if (!Plausible(s.value)) {
        NoteBad(s.name, s.value);
        bad_[rule.slot] = true;
        if (abort) bad_[kAborted] = true;
        return;
      }
      acc_[rule.slot][rule.level].Add(s.value, rule.slot == kUsage || rule.slot == kPageSize);
      if (abort) acc_[kAborted][rule.level].Add(s.value, false);
      ++matched_;
      return;
    }
  }

  EngineSnapshot Build() {
    EngineSnapshot snap;
    snap.engine = saw_vllm_ ? EngineKind::kVllm : saw_sglang_ ? EngineKind::kSglang : EngineKind::kUnknown;
    std::sort(models_.begin(), models_.end());
    models_.erase(std::unique(models_.begin(), models_.end()), models_.end());
    snap.model_names = std::move(models_);
    snap.preemptions_total = Value(kPreemptions);
    snap.retracted_requests_total = Value(kRetracted);
    snap.prefix_cache_queries_tokens_total = Value(kQueries);
    snap.prefix_cache_hits_tokens_total = Value(kHits);
    snap.prompt_tokens_total = Value(kPromptTokens);
    snap.cached_tokens_total = Value(kCachedTokens);
    snap.requests_finished_total = Value(kFinished);
    snap.aborted_requests_total = Value(kAborted);
    snap.admission_rejections_total = Value(kRejections);
    snap.evicted_tokens_total = Value(kEvicted);
    snap.kv_cache_usage = Value(kUsage);
    snap.requests_running = Value(kRunning);
    snap.requests_waiting = Value(kWaiting);
    snap.max_total_num_tokens = Value(kMaxTokens);
    snap.inter_token_latency_sum_s = Value(kItlSum);
    snap.inter_token_latency_count = Value(kItlCount);
    snap.prefill_time_sum_s = Value(kPrefillSum);
    snap.prefill_time_count = Value(kPrefillCount);
    snap.time_to_first_token_sum_s = Value(kTtftSum);
    snap.time_to_first_token_count = Value(kTtftCount);
    snap.queue_time_sum_s = Value(kQueueSum);
    snap.queue_time_count = Value(kQueueCount);
    snap.external_prefix_cache_queries_total = Value(kExternalQueries);
    snap.external_prefix_cache_hits_total = Value(kExternalHits);
    snap.kv_used_tokens = Value(kKvUsedTokens);
    snap.kv_evictable_tokens = Value(kKvEvictableTokens);
    snap.kv_available_tokens = Value(kKvAvailableTokens);
    snap.page_size = Value(kPageSize);
    snap.num_pages = Value(kNumPages);
    for (std::size_t i = 0; i < kPromptSources; ++i) {
      if (source_bad_[i]) continue;
      for (const Accumulator& a : sources_[i]) {
        if (a.any) {
          snap.prompt_tokens_by_source[i] = a.value;
          break;
        }
      }
    }
    for (std::size_t i = 0; i < kResidencyHistograms; ++i) snap.residency[i] = BuildHistogram(i);
    if (blocks_.any && !blocks_bad_) snap.num_gpu_blocks = blocks_.value;
    snap.block_size = block_size_;
    snap.matched_samples = matched_;
    snap.bad_values = bad_values_;
    snap.first_bad_value = std::move(first_bad_value_);
    return snap;
  }

 private:
  static bool Plausible(double v) { return std::isfinite(v) && v >= 0; }

  void NoteBad(std::string_view what, double v) {
    if (bad_values_++ > 0) return;
    first_bad_value_ = std::string(what) + " is " +
                       (std::isnan(v)   ? std::string("NaN")
                        : std::isinf(v) ? (v > 0 ? "+Inf" : "-Inf")
                                        : std::to_string(v));
  }

  std::optional<double> Value(Slot slot) const {
    if (bad_[slot]) return std::nullopt;
    for (const Accumulator& a : acc_[slot]) {
      if (a.any) return a.value;
    }
    return std::nullopt;
  }

  static std::optional<double> NumberLabel(const Sample& s, std::string_view name) {
    const std::optional<std::string_view> text = s.Label(name);
    if (!text) return std::nullopt;
    return ParseFloat(*text);
  }

  // vllm:prompt_tokens_by_source / sglang:prefill_effective_tokens; true when s is one.
  bool AddPromptSource(const Sample& s) {
    for (const SourceRule& rule : kSourceRules) {
      if (rule.name != s.name) continue;
      const std::optional<std::string_view> value = s.Label(rule.label);
      const std::optional<PromptSource> source = value ? SourceOf(*value) : std::nullopt;
      if (!source) return true;  // a source this build does not know
      const auto i = static_cast<std::size_t>(*source);
      if (!Plausible(s.value)) {
        NoteBad(s.name, s.value);
        source_bad_[i] = true;
        return true;
      }
      sources_[i][static_cast<std::size_t>(rule.level)].Add(s.value, false);
      ++matched_;
      return true;
    }
    return false;
  }

  // A _bucket, _sum or _count line of a residency histogram; true when s is one.
  bool AddResidency(const Sample& s) {
    for (std::size_t i = 0; i < kResidencyHistograms; ++i) {
      const std::string_view base = kResidencyNames[i];
      if (!s.name.starts_with(base)) continue;
      const std::string_view suffix = std::string_view(s.name).substr(base.size());
      if (suffix != "_bucket" && suffix != "_sum" && suffix != "_count") return false;
      Residency& r = residency_[i];
      if (!Plausible(s.value)) {
        NoteBad(s.name, s.value);
        r.bad = true;
        return true;
      }
      if (suffix == "_sum") {
        r.sum.Add(s.value, false);
      } else if (suffix == "_count") {
        r.count.Add(s.value, false);
      } else {
        const std::optional<double> le = NumberLabel(s, "le");
        if (!le || std::isnan(*le)) {
          NoteBad(std::string(s.name) + " le", le.value_or(std::nan("")));
          r.bad = true;
          return true;
        }
        r.buckets[*le] += s.value;
      }
      ++matched_;
      return true;
    }
    return false;
  }

  // Summed over engines; nullopt when absent, hostile, without a +Inf bucket or
  // not cumulative.
  std::optional<EngineHistogram> BuildHistogram(std::size_t i) {
    const Residency& r = residency_[i];
    if (r.bad || r.buckets.empty() || !r.count.any) return std::nullopt;
    EngineHistogram h;
    h.count = r.count.value;
    h.sum = r.sum.any ? r.sum.value : 0;
    double previous = 0;
    for (const auto& [le, n] : r.buckets) {
      if (n < previous) {
        NoteBad(std::string(kResidencyNames[i]) + "_bucket counts not cumulative at le " + std::to_string(le) + ":", n);
        return std::nullopt;
      }
      previous = n;
      h.buckets.emplace_back(le, n);
    }
    if (!std::isinf(h.buckets.back().first)) return std::nullopt;
    return h;
  }

  void AddCacheConfig(const Sample& s) {
    const std::optional<double> blocks = NumberLabel(s, "num_gpu_blocks");
    const std::optional<double> size = NumberLabel(s, "block_size");
    const bool blocks_ok = blocks.has_value() && Plausible(*blocks);
    const bool size_ok = size.has_value() && Plausible(*size) && *size > 0;
    if (blocks.has_value() && !blocks_ok) {
      NoteBad("vllm:cache_config_info num_gpu_blocks", *blocks);
      blocks_bad_ = true;
    }
    if (size.has_value() && !size_ok) NoteBad("vllm:cache_config_info block_size", *size);
    if (blocks_ok) blocks_.Add(*blocks, false);
    if (size_ok && !block_size_) block_size_ = size;
    if (blocks_ok || size_ok) ++matched_;
  }

  const EngineSnapshotOptions& options_;
  std::array<std::array<Accumulator, kLevels>, kSlotCount> acc_{};
  Accumulator blocks_;
  bool blocks_bad_ = false;
  std::array<bool, kSlotCount> bad_{};
  std::array<std::array<Accumulator, 2>, kPromptSources> sources_{};
  std::array<bool, kPromptSources> source_bad_{};
  struct Residency {
    std::map<double, double> buckets;  // le -> count, summed over engines
    Accumulator sum, count;
    bool bad = false;
  };
  std::array<Residency, kResidencyHistograms> residency_{};
  std::size_t bad_values_ = 0;
  std::string first_bad_value_;
  std::optional<double> block_size_;
  std::vector<std::string> models_;
  bool saw_vllm_ = false;
  bool saw_sglang_ = false;
  std::size_t matched_ = 0;
};

}  // namespace

std::string_view PromptSourceName(PromptSource source) {
  switch (source) {
    case PromptSource::kCompute:
      return "compute";
    case PromptSource::kDeviceHit:
      return "device_hit";
    case PromptSource::kHostHit:
      return "host_hit";
    case PromptSource::kStorageHit:
      return "storage_hit";
    case PromptSource::kExternalHit:
      break;
  }
  return "external_hit";
}

EngineSnapshot MapEngineSnapshot(const Exposition& exposition, const EngineSnapshotOptions& options) {
  SnapshotBuilder builder(options);
  for (const Sample& s : exposition.samples) builder.Add(s);
  return builder.Build();
}

}  // namespace kvwatch::collectors
