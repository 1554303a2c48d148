// config/model_choice.h: the one model resolution of agent, replay and simulate.
#include "config/model_choice.h"

#include <gtest/gtest.h>

#include <string>

namespace kvwatch::config {
namespace {

std::string ErrorOf(const ModelChoice& c, const ModelNames& names = kModelFlags) {
  auto r = ResolveModel(c, names);
  return r.ok() ? "" : r.error();
}

TEST(ModelChoiceTest, APresetGivesBytesPerTokenPerRank) {
  ModelChoice c;
  c.model = "llama-3-70b";  // 80 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes = 327,680
  c.tensor_parallel = 4;
  auto r = ResolveModel(c, kModelFlags);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().bytes_per_token, std::optional<double>(81920));
  EXPECT_EQ(r.value().spec_source, "--model");
  c.kv_dtype = "fp8";
  EXPECT_EQ(ResolveModel(c, kModelFlags).value().bytes_per_token, std::optional<double>(40960));
}

TEST(ModelChoiceTest, NothingGivenIsNoModel) {
  auto r = ResolveModel(ModelChoice{}, kModelFlags);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value().spec);
  EXPECT_FALSE(r.value().bytes_per_token);
  EXPECT_FALSE(ModelChoice{}.Given());
}

TEST(ModelChoiceTest, BytesPerTokenIsPerRankAsGiven) {
  ModelChoice c;
  c.bytes_per_token = 131072;
  EXPECT_EQ(ResolveModel(c, kModelFlags).value().bytes_per_token, std::optional<double>(131072));
  c.tensor_parallel = 2;
  EXPECT_EQ(ErrorOf(c), "--tensor-parallel: applies to --model or --model-config; --bytes-per-token is per rank");
  c.tensor_parallel = 1;
  c.bytes_per_token = 0;
  EXPECT_EQ(ErrorOf(c), "--bytes-per-token: must be > 0");
}

TEST(ModelChoiceTest, ErrorsNameTheInputAsTheCallerSpellsIt) {
  ModelChoice two;
  two.model = "llama-3-8b";
  two.bytes_per_token = 5;
  EXPECT_EQ(ErrorOf(two), "--model: give only one of --model, --model-config and --bytes-per-token");
  EXPECT_EQ(ErrorOf(two, kModelKeys), "model: give only one of model, model_config and bytes_per_token");
  ModelChoice dtype;
  dtype.kv_dtype = "fp8";
  EXPECT_EQ(ErrorOf(dtype), "--kv-dtype: needs --model or --model-config");
  ModelChoice tp;
  tp.model = "llama-3-8b";
  tp.tensor_parallel = 3;
  EXPECT_NE(ErrorOf(tp, kModelKeys).find("tensor_parallel: tensor-parallel size 3"), std::string::npos);
  tp.tensor_parallel = 0;
  EXPECT_EQ(ErrorOf(tp), "--tensor-parallel: must be at least 1");
  ModelChoice unknown;
  unknown.model = "nope";
  EXPECT_EQ(ErrorOf(unknown).rfind("--model: unknown model 'nope'", 0), 0u) << ErrorOf(unknown);
  ModelChoice missing;
  missing.model_config = "/nonexistent/config.json";
  EXPECT_EQ(ErrorOf(missing).rfind("--model-config: ", 0), 0u) << ErrorOf(missing);
}

TEST(ModelChoiceTest, ParameterCountsNeedAModel) {
  ModelChoice c;
  c.parameters = 8e9;
  EXPECT_EQ(ErrorOf(c), "--parameters: needs --model or --model-config");
  c.model = "llama-3-8b";
  auto r = ResolveModel(c, kModelFlags);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().spec->parameters, 8e9);
  c.total_parameters = 7e9;
  EXPECT_EQ(ErrorOf(c), "--total-parameters: must be >= the active parameters (8e+09)");
  c.total_parameters = 9e9;
  EXPECT_EQ(ResolveModel(c, kModelFlags).value().spec->total_parameters, 9e9);
  c.parameters = 0;
  c.total_parameters.reset();
  EXPECT_EQ(ErrorOf(c), "--parameters: must be > 0");
}

}  // namespace
}  // namespace kvwatch::config
