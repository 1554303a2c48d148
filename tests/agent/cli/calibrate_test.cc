// `kvwatch simulate --calibrate`: an engine's /metrics text to the fit's figures
// (agent/cli/calibrate.h), on text generated from known step coefficients.
#include "agent/cli/calibrate.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvwatch::agent {
namespace {

struct Load {
  double requests, prompt, cached, output, running;
};

// A histogram's lines (a few buckets, the sum and the count) split over two
// engines' label sets, as a DP-2 vLLM serves them.
std::string Histogram(const std::string& name, double sum, double count) {
  std::string out = "# HELP " + name + " Histogram.\n# TYPE " + name + " histogram\n";
  for (int engine = 0; engine < 2; ++engine) {
    const std::string labels = "engine=\"" + std::to_string(engine) + "\",model_name=\"m\"";
    out += name + "_bucket{" + labels + ",le=\"0.1\"} 0\n";
    out += name + "_bucket{" + labels + ",le=\"+Inf\"} " + std::to_string(count / 2) + "\n";
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g", sum / 2);
    out += name + "_sum{" + labels + "} " + buf + "\n";
    out += name + "_count{" + labels + "} " + std::to_string(count / 2) + "\n";
  }
  return out;
}

std::string Counter(const std::string& name, double v, const std::string& type = "counter") {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return "# TYPE " + name + " " + type + "\n" + name + "{model_name=\"m\"} " + buf + "\n";
}

// What an engine following the fit's model reports (docs/simulate.md "The fit").
std::string Scrape(const sim::LinearStepCoefficients& c, const Load& l, bool sglang) {
  const double context = l.prompt + l.output / 2;
  const double step = c.fixed_s + c.per_decode_sequence_s * l.running + c.per_context_token_s * l.running * context;
  const double gaps = l.requests * (l.output - 1);
  const double prefill = l.requests * step + c.per_prefill_token_s * l.requests * (l.prompt - l.cached);
  if (sglang) {
    const double queue = 3.5 * l.requests;  // subtracted from TTFT
    return Histogram("sglang:time_to_first_token_seconds", prefill + queue, l.requests) +
           Histogram("sglang:queue_time_seconds", queue, l.requests) +
           Histogram("sglang:inter_token_latency_seconds", step * gaps, gaps) +
           Counter("sglang:prompt_tokens_total", l.requests * l.prompt) +
           Counter("sglang:cached_tokens_total", l.requests * l.cached) +
           Counter("sglang:generation_tokens_total", l.requests * l.output) +
           Counter("sglang:num_running_reqs", l.running, "gauge");
  }
  return Histogram("vllm:request_prefill_time_seconds", prefill, l.requests) +
         Histogram("vllm:inter_token_latency_seconds", step * gaps, gaps) +
         Counter("vllm:prompt_tokens_total", l.requests * l.prompt) +
         Counter("vllm:prefix_cache_hits_total", l.requests * l.cached) +
         Counter("vllm:generation_tokens_total", l.requests * l.output) +
         Counter("vllm:num_requests_running", l.running, "gauge");
}

sim::LinearStepCoefficients Truth() {
  sim::LinearStepCoefficients c;
  c.fixed_s = 0.0147;
  c.per_prefill_token_s = 59.5e-6;
  c.per_context_token_s = 2.4e-8;
  return c;
}

void ExpectRecovered(bool sglang) {
  const sim::LinearStepCoefficients truth = Truth();
  const std::vector<Load> loads = {{2000, 3000, 1000, 300, 12}, {6000, 2500, 800, 250, 96}, {800, 6000, 2000, 400, 40}};
  std::vector<sim::CalibrationObservation> observations;
  for (std::size_t i = 0; i < loads.size(); ++i) {
    auto o = ObservationFromMetrics(Scrape(truth, loads[i], sglang), "scrape" + std::to_string(i));
    ASSERT_TRUE(o.ok()) << o.error();
    EXPECT_DOUBLE_EQ(o.value().requests, loads[i].requests);
    EXPECT_DOUBLE_EQ(o.value().computed_prompt_tokens, loads[i].requests * (loads[i].prompt - loads[i].cached));
    observations.push_back(o.value());
  }
  auto fit = sim::FitStepCoefficients(observations, std::nullopt);
  ASSERT_TRUE(fit.ok()) << fit.error();
  EXPECT_NEAR(fit.value().coefficients.fixed_s, truth.fixed_s, 1e-9);
  EXPECT_NEAR(fit.value().coefficients.per_context_token_s, truth.per_context_token_s, 1e-14);
  EXPECT_NEAR(fit.value().coefficients.per_prefill_token_s, truth.per_prefill_token_s, 1e-11);
}

TEST(CalibrateTest, RecoversCoefficientsFromVllmScrapes) { ExpectRecovered(false); }

TEST(CalibrateTest, RecoversCoefficientsFromSglangScrapes) { ExpectRecovered(true); }

TEST(CalibrateTest, OlderVllmNamesAreAccepted) {
  std::string text = Scrape(Truth(), {100, 1000, 0, 100, 4}, false);
  for (auto [from, to] :
       {std::pair<std::string, std::string>{"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"},
        {"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"},
        {"vllm:prompt_tokens_total", "vllm:prompt_tokens"}}) {
    for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  }
  auto o = ObservationFromMetrics(text, "old");
  ASSERT_TRUE(o.ok()) << o.error();
  EXPECT_DOUBLE_EQ(o.value().prompt_tokens, 100000);
  EXPECT_GT(o.value().itl_count, 0);
}

TEST(CalibrateTest, MissingMetricIsNamed) {
  std::string text = Scrape(Truth(), {100, 1000, 0, 100, 4}, false);
  const std::string gone = "vllm:num_requests_running";
  text = text.substr(0, text.find("# TYPE " + gone));
  auto o = ObservationFromMetrics(text, "m.txt");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error(), "m.txt: missing metric vllm:num_requests_running");
  auto none = ObservationFromMetrics("# TYPE up gauge\nup 1\n", "x.txt");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find("no vllm: or sglang: metric"), std::string::npos);
}

TEST(CalibrateTest, NegativeValueIsNamed) {
  std::string text = Scrape(Truth(), {100, 1000, 0, 100, 4}, false);
  text += "vllm:generation_tokens_total{model_name=\"n\"} -20000\n";
  auto o = ObservationFromMetrics(text, "neg.txt");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().find("neg.txt: vllm:generation_tokens_total is -10000"), std::string::npos) << o.error();
}

TEST(CalibrateTest, MalformedLineGivesItsPosition) {
  auto o = ObservationFromMetrics("vllm:prompt_tokens_total{a=\"b\" 3\n", "bad.txt");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().rfind("bad.txt:1:", 0), 0u) << o.error();
}

TEST(CalibrateTest, UnreadableFileIsNamed) {
  auto o = ReadCalibrationFile("/nonexistent/metrics.txt");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error(), "/nonexistent/metrics.txt: cannot open");
}

}  // namespace
}  // namespace kvwatch::agent
