#include "agent/cli/calibrate.h"

#include <cmath>
#include <fstream>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>

#include "base/text_file.h"
#include "collectors/exposition_parser.h"

namespace kvwatch::agent {

namespace {

// Sums of samples by name over every label set (NaN skipped).
class Sums {
 public:
  explicit Sums(const collectors::Exposition& e) {
    for (const collectors::Sample& s : e.samples) {
      if (std::isnan(s.value)) continue;
      sums_[s.name] += s.value;
    }
  }
  bool HasPrefix(std::string_view prefix) const {
    for (const auto& [name, v] : sums_) {
      if (name.rfind(prefix, 0) == 0) return true;
    }
    return false;
  }
  // The first name present (a name ending in _total also without that suffix)
  // and its sum, or nullopt.
  std::optional<std::pair<std::string, double>> Find(std::initializer_list<std::string_view> names) const {
    for (std::string_view n : names) {
      if (auto it = sums_.find(n); it != sums_.end()) return *it;
      const std::string_view total = "_total";
      if (n.size() > total.size() && n.substr(n.size() - total.size()) == total) {
        if (auto it = sums_.find(n.substr(0, n.size() - total.size())); it != sums_.end()) return *it;
      }
    }
    return std::nullopt;
  }
  std::optional<double> First(std::initializer_list<std::string_view> names) const {
    auto found = Find(names);
    if (!found) return std::nullopt;
    return found->second;
  }

 private:
  std::map<std::string, double, std::less<>> sums_;
};

std::string Names(std::initializer_list<std::string_view> names) {
  std::string out;
  for (std::string_view n : names) out += (out.empty() ? "" : " or ") + std::string(n);
  return out;
}

}  // namespace

base::Result<sim::CalibrationObservation> ObservationFromMetrics(std::string_view text, const std::string& source) {
  using R = base::Result<sim::CalibrationObservation>;
  const collectors::Exposition e = collectors::ParseExposition(text);
  if (!e.errors.empty()) {
    const auto& err = e.errors.front();
    return R::Error(source + ":" + std::to_string(err.line) + ":" + std::to_string(err.column) + ": " + err.reason);
  }
  const Sums sums(e);
  const bool vllm = sums.HasPrefix("vllm:");
  const bool sglang = sums.HasPrefix("sglang:");
  if (!vllm && !sglang) return R::Error(source + ": no vllm: or sglang: metric (not an engine's /metrics?)");
  sim::CalibrationObservation o;
  o.source = source;
  std::string missing, negative;
  auto need = [&](double* out, std::initializer_list<std::string_view> names) {
    if (auto found = sums.Find(names)) {
      *out = found->second;
      if ((found->second < 0 || !std::isfinite(found->second)) && negative.empty()) {
        negative = found->first + " is " + std::to_string(found->second) + " (expected a finite value >= 0)";
      }
    } else if (missing.empty()) {
      missing = Names(names);
    }
  };
  double hits = 0;
  if (vllm) {
    need(&o.requests, {"vllm:request_prefill_time_seconds_count", "vllm:time_to_first_token_seconds_count"});
    if (auto prefill = sums.First({"vllm:request_prefill_time_seconds_sum"})) {
      o.prefill_time_sum_s = *prefill;
    } else {
      double ttft = 0, queue = 0;
      need(&ttft, {"vllm:request_prefill_time_seconds_sum", "vllm:time_to_first_token_seconds_sum"});
      need(&queue, {"vllm:request_queue_time_seconds_sum"});
      o.prefill_time_sum_s = ttft - queue;
    }
    need(&o.itl_sum_s, {"vllm:inter_token_latency_seconds_sum", "vllm:time_per_output_token_seconds_sum"});
    need(&o.itl_count, {"vllm:inter_token_latency_seconds_count", "vllm:time_per_output_token_seconds_count"});
    need(&o.prompt_tokens, {"vllm:prompt_tokens_total"});
    need(&o.generation_tokens, {"vllm:generation_tokens_total"});
    need(&o.running, {"vllm:num_requests_running"});
    hits = sums.First({"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"}).value_or(0);
  } else {
    double ttft = 0, queue = 0;
    need(&o.requests, {"sglang:time_to_first_token_seconds_count"});
    need(&ttft, {"sglang:time_to_first_token_seconds_sum"});
    need(&queue, {"sglang:queue_time_seconds_sum"});
    o.prefill_time_sum_s = ttft - queue;
    need(&o.itl_sum_s, {"sglang:inter_token_latency_seconds_sum", "sglang:time_per_output_token_seconds_sum"});
    need(&o.itl_count, {"sglang:inter_token_latency_seconds_count", "sglang:time_per_output_token_seconds_count"});
    need(&o.prompt_tokens, {"sglang:prompt_tokens_total"});
    need(&o.generation_tokens, {"sglang:generation_tokens_total"});
    need(&o.running, {"sglang:num_running_reqs"});
    hits = sums.First({"sglang:cached_tokens_total"}).value_or(0);
  }
  if (!missing.empty()) return R::Error(source + ": missing metric " + missing);
  if (!negative.empty()) return R::Error(source + ": " + negative);
  o.computed_prompt_tokens = o.prompt_tokens - hits;
  if (hits < 0) return R::Error(source + ": negative prefix-cache hit tokens");
  return o;
}

base::Result<sim::CalibrationObservation> ReadCalibrationFile(const std::string& path) {
  using R = base::Result<sim::CalibrationObservation>;
  std::ifstream in(path, std::ios::binary);
  if (!in) return R::Error(path + ": cannot open");
  // A scrape is kilobytes to a few megabytes; a device or a huge log named by
  // mistake is refused, not read without end.
  std::string text;
  if (std::string problem =
          base::ReadBoundedText(path, in, &text, kMaxCalibrationFileBytes, "an engine's /metrics scrape");
      !problem.empty()) {
    return R::Error(path + ": " + problem);
  }
  return ObservationFromMetrics(text, path);
}

}  // namespace kvwatch::agent
