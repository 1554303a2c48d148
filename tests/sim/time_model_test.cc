#include "sim/time_model.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvwatch::sim {
namespace {

curve::ModelSpec SmallModel() {
  curve::ModelSpec m;
  m.name = "small";
  m.layers = 2;
  m.query_heads = 4;
  m.kv_heads = 2;
  m.head_dim = 8;
  m.bytes_per_element = 2;
  m.parameters = 1e9;
  return m;
}

GpuSpec SmallGpu() {
  GpuSpec g;
  g.name = "toy";
  g.dense_bf16_flops = 1e12;
  g.memory_bandwidth = 1e11;
  return g;
}

TEST(RooflineTest, HandComputedCase) {
  RooflineOptions o;
  o.tensor_parallel = 2;
  o.compute_efficiency = 0.5;
  o.memory_efficiency = 0.5;
  o.allreduce_latency_s = 1e-5;
  o.step_overhead_s = 1e-3;
  auto c = RooflineCoefficients(SmallModel(), SmallGpu(), o);
  ASSERT_TRUE(c.ok()) << c.error();
  // Compute: 2 ranks x 1e12 x 0.5 = 1e12 FLOP/s. 2 x 1e9 FLOPs per token.
  EXPECT_DOUBLE_EQ(c.value().per_prefill_token_s, 2e-3);
  EXPECT_DOUBLE_EQ(c.value().per_decode_sequence_s, 2e-3);
  // 4 x 2 layers x 4 heads x 8 = 256 FLOPs per pair.
  EXPECT_DOUBLE_EQ(c.value().per_attention_pair_s, 2.56e-10);
  // KV per token per rank: 2 x 2 layers x 2 heads x 8 x 2 bytes / 2 ranks = 64 B at
  // 1e11 x 0.5 B/s = 1.28e-9 s, plus the attention FLOPs 2.56e-10.
  EXPECT_DOUBLE_EQ(c.value().per_context_token_s, 1.536e-9);
  // Weights: 2e9 bytes / 2 ranks / 5e10 = 0.02 s; 2 x 2 layers x 10 us; 1 ms.
  EXPECT_DOUBLE_EQ(c.value().fixed_s, 0.02 + 4e-5 + 1e-3);
}

TEST(RooflineTest, OneRankHasNoAllreduce) {
  RooflineOptions o;
  o.compute_efficiency = 1;
  o.memory_efficiency = 1;
  auto c = RooflineCoefficients(SmallModel(), SmallGpu(), o);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_DOUBLE_EQ(c.value().fixed_s, 2e9 / 1e11);
  EXPECT_DOUBLE_EQ(c.value().per_prefill_token_s, 2e-3);
}

TEST(RooflineTest, MixtureReadsEveryExpertButComputesTheActiveOnes) {
  curve::ModelSpec m = SmallModel();
  m.total_parameters = 4e9;
  RooflineOptions o;
  o.compute_efficiency = 1;
  o.memory_efficiency = 1;
  auto c = RooflineCoefficients(m, SmallGpu(), o);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c.value().fixed_s, 8e9 / 1e11);
  EXPECT_DOUBLE_EQ(c.value().per_prefill_token_s, 2e-3);
}

TEST(RooflineTest, MixturePresetsCarryEveryParameter) {
  auto mixtral = curve::LookupModelPreset("mixtral-8x7b");
  ASSERT_TRUE(mixtral.ok());
  EXPECT_DOUBLE_EQ(TotalParameters(mixtral.value()), 46.7e9);
  EXPECT_DOUBLE_EQ(mixtral.value().parameters, 12.9e9);
  auto dense = curve::LookupModelPreset("llama-3-8b");
  ASSERT_TRUE(dense.ok());
  EXPECT_DOUBLE_EQ(TotalParameters(dense.value()), 8.03e9);
  RooflineOptions o;
  o.compute_efficiency = 1;
  o.memory_efficiency = 1;
  auto c = RooflineCoefficients(mixtral.value(), LookupGpuPreset("h100").value(), o);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_DOUBLE_EQ(c.value().fixed_s, 46.7e9 * 2 / 3.35e12);
  EXPECT_DOUBLE_EQ(c.value().per_prefill_token_s, 2 * 12.9e9 / 989e12);
}

TEST(RooflineTest, PresetsAreSane) {
  auto model = curve::LookupModelPreset("llama-3-70b");
  ASSERT_TRUE(model.ok());
  for (const std::string& name : GpuPresetNames()) {
    auto gpu = LookupGpuPreset(name);
    ASSERT_TRUE(gpu.ok()) << name;
    EXPECT_GT(gpu.value().dense_bf16_flops, 1e14) << name;
    EXPECT_LT(gpu.value().dense_bf16_flops, 1e16) << name;
    EXPECT_GT(gpu.value().memory_bandwidth, 5e11) << name;
    EXPECT_GE(gpu.value().memory_bytes, 48e9) << name;
    EXPECT_FALSE(gpu.value().source.empty()) << name;
    RooflineOptions o;
    o.tensor_parallel = 4;
    auto c = RooflineCoefficients(model.value(), gpu.value(), o);
    ASSERT_TRUE(c.ok()) << c.error();
    // A decode step of Llama-3-70B on 4 GPUs reads 35 GB of weights per rank:
    // between 3 ms (B200) and 60 ms (L40S).
    EXPECT_GT(c.value().fixed_s, 3e-3) << name;
    EXPECT_LT(c.value().fixed_s, 60e-3) << name;
    // A prefill token: 2 x 70.6e9 FLOPs over 4 GPUs, tens of microseconds.
    EXPECT_GT(c.value().per_prefill_token_s, 10e-6) << name;
    EXPECT_LT(c.value().per_prefill_token_s, 300e-6) << name;
  }
  // H100 by hand: 2 x 70.6e9 / (4 x 989e12 x 0.6) = 59.49 us a token; weights
  // 141.2e9 B / (4 x 3.35e12 x 0.8) = 13.17 ms plus 2 x 80 x 10 us = 14.77 ms.
  RooflineOptions o;
  o.tensor_parallel = 4;
  auto h100 = RooflineCoefficients(model.value(), LookupGpuPreset("H100").value(), o);
  ASSERT_TRUE(h100.ok());
  EXPECT_NEAR(h100.value().per_prefill_token_s, 59.49e-6, 0.01e-6);
  EXPECT_NEAR(h100.value().fixed_s, 14.77e-3, 0.01e-3);
  // H200 and H100 compute alike; the H200 reads faster.
  auto h200 = RooflineCoefficients(model.value(), LookupGpuPreset("h200").value(), o);
  EXPECT_DOUBLE_EQ(h200.value().per_prefill_token_s, h100.value().per_prefill_token_s);
  EXPECT_LT(h200.value().fixed_s, h100.value().fixed_s);
}

TEST(RooflineTest, BadInputNamesWhatIsWrong) {
  auto unknown = LookupGpuPreset("v100");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().find("unknown GPU 'v100'"), std::string::npos);
  EXPECT_NE(unknown.error().find("h100"), std::string::npos);
  curve::ModelSpec m = SmallModel();
  m.parameters = 0;
  auto no_params = RooflineCoefficients(m, SmallGpu());
  ASSERT_FALSE(no_params.ok());
  EXPECT_NE(no_params.error().find("parameters"), std::string::npos);
  RooflineOptions o;
  o.compute_efficiency = 1.5;
  EXPECT_FALSE(RooflineCoefficients(SmallModel(), SmallGpu(), o).ok());
  o = {};
  o.tensor_parallel = 3;  // 2 KV heads: 3 neither divides nor is a multiple
  auto tp = RooflineCoefficients(SmallModel(), SmallGpu(), o);
  ASSERT_FALSE(tp.ok());
}

TEST(StepCoefficientsTest, ParsesKeysAndDurations) {
  auto c = ParseStepCoefficients("fixed=10ms,prefill_token=20us,context_token=1e-8,decode_sequence=0.0001");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_DOUBLE_EQ(c.value().fixed_s, 0.01);
  EXPECT_DOUBLE_EQ(c.value().per_prefill_token_s, 20e-6);
  EXPECT_DOUBLE_EQ(c.value().per_context_token_s, 1e-8);
  EXPECT_DOUBLE_EQ(c.value().per_decode_sequence_s, 1e-4);
  EXPECT_DOUBLE_EQ(c.value().per_attention_pair_s, 0);
  auto again = ParseStepCoefficients(FormatStepCoefficients(c.value()));
  ASSERT_TRUE(again.ok());
  EXPECT_DOUBLE_EQ(again.value().fixed_s, 0.01);
}

TEST(StepCoefficientsTest, BadTextNamesTheKey) {
  auto negative = ParseStepCoefficients("fixed=-1");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().find("fixed"), std::string::npos);
  auto unknown = ParseStepCoefficients("fixd=1");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().find("'fixd'"), std::string::npos);
  EXPECT_FALSE(ParseStepCoefficients("fixed=abc").ok());
  EXPECT_FALSE(ParseStepCoefficients("fixed=0").ok());
  EXPECT_FALSE(ParseStepCoefficients("fixed").ok());
}

// The figures an engine following the fit's model would report.
CalibrationObservation Observe(const LinearStepCoefficients& c, double requests, double prompt, double cached,
                               double output, double running) {
  CalibrationObservation o;
  o.requests = requests;
  o.prompt_tokens = requests * prompt;
  o.computed_prompt_tokens = requests * (prompt - cached);
  o.generation_tokens = requests * output;
  o.running = running;
  const double context = prompt + output / 2;
  const double l = c.fixed_s + c.per_decode_sequence_s * running + c.per_context_token_s * running * context;
  o.itl_count = requests * (output - 1);
  o.itl_sum_s = o.itl_count * l;
  o.prefill_time_sum_s = requests * l + c.per_prefill_token_s * o.computed_prompt_tokens;
  return o;
}

TEST(CalibrationFitTest, RecoversCoefficientsFromTwoLoads) {
  LinearStepCoefficients truth;
  truth.fixed_s = 0.015;
  truth.per_prefill_token_s = 60e-6;
  truth.per_context_token_s = 2e-8;
  std::vector<CalibrationObservation> obs = {Observe(truth, 1000, 2000, 500, 200, 8),
                                             Observe(truth, 3000, 1500, 300, 300, 64),
                                             Observe(truth, 500, 4000, 1000, 100, 32)};
  auto fit = FitStepCoefficients(obs, std::nullopt);
  ASSERT_TRUE(fit.ok()) << fit.error();
  EXPECT_NEAR(fit.value().coefficients.fixed_s, truth.fixed_s, 1e-12);
  EXPECT_NEAR(fit.value().coefficients.per_context_token_s, truth.per_context_token_s, 1e-16);
  EXPECT_NEAR(fit.value().coefficients.per_prefill_token_s, truth.per_prefill_token_s, 1e-12);
  EXPECT_EQ(fit.value().method, "least squares over 3 observations");
}

TEST(CalibrationFitTest, OneObservationScalesTheShape) {
  LinearStepCoefficients shape;
  shape.fixed_s = 0.01;
  shape.per_prefill_token_s = 50e-6;
  shape.per_attention_pair_s = 1e-10;
  shape.per_decode_sequence_s = 50e-6;
  shape.per_context_token_s = 1e-8;
  LinearStepCoefficients truth = shape;  // the engine is 1.5 times slower at decode
  truth.fixed_s *= 1.5;
  truth.per_decode_sequence_s *= 1.5;
  truth.per_context_token_s *= 1.5;
  truth.per_prefill_token_s = 80e-6;
  const CalibrationObservation obs[] = {Observe(truth, 1000, 2000, 0, 200, 16)};
  auto fit = FitStepCoefficients(obs, shape);
  ASSERT_TRUE(fit.ok()) << fit.error();
  EXPECT_NEAR(fit.value().coefficients.fixed_s, truth.fixed_s, 1e-12);
  EXPECT_NEAR(fit.value().coefficients.per_context_token_s, truth.per_context_token_s, 1e-16);
  EXPECT_NEAR(fit.value().coefficients.per_decode_sequence_s, truth.per_decode_sequence_s, 1e-14);
  EXPECT_NEAR(fit.value().coefficients.per_prefill_token_s, 80e-6, 1e-12);
  EXPECT_NEAR(fit.value().coefficients.per_attention_pair_s, 1.6e-10, 1e-20);
}

TEST(CalibrationFitTest, BadFiguresGiveErrors) {
  LinearStepCoefficients truth;
  truth.fixed_s = 0.01;
  truth.per_prefill_token_s = 1e-5;
  truth.per_context_token_s = 1e-8;
  CalibrationObservation a = Observe(truth, 100, 1000, 0, 100, 4);
  a.source = "a.txt";
  // One observation, no shape.
  auto single = FitStepCoefficients(std::span(&a, 1), std::nullopt);
  ASSERT_FALSE(single.ok());
  EXPECT_NE(single.error().find("one observation"), std::string::npos);
  // A negative figure names the source and the figure.
  CalibrationObservation bad = a;
  bad.itl_sum_s = -1;
  auto negative = FitStepCoefficients(std::span(&bad, 1), truth);
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().find("a.txt: inter-token latency sum"), std::string::npos);
  // No requests.
  bad = a;
  bad.requests = 0;
  EXPECT_FALSE(FitStepCoefficients(std::span(&bad, 1), truth).ok());
  // The same load twice cannot separate the terms.
  std::vector<CalibrationObservation> same = {a, a};
  auto flat = FitStepCoefficients(same, std::nullopt);
  ASSERT_FALSE(flat.ok());
  EXPECT_NE(flat.error().find("different loads"), std::string::npos);
  // Prefill faster than a decode step: contradicts the model.
  bad = a;
  bad.prefill_time_sum_s = 0;
  auto fast = FitStepCoefficients(std::span(&bad, 1), truth);
  ASSERT_FALSE(fast.ok());
  EXPECT_NE(fast.error().find("contradict"), std::string::npos);
}

}  // namespace
}  // namespace kvwatch::sim
