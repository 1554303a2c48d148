// Tests of config/model_config.h with config.json texts shaped like the real ones.
#include "config/model_config.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace kvwatch::config {
namespace {

using base::Result;
using curve::ModelSpec;

ModelSpec MustParse(const std::string& json, const ModelConfigOptions& options = {}) {
  Result<ModelSpec> spec = ParseModelConfig(json, options);
  EXPECT_TRUE(spec.ok()) << (spec.ok() ? "" : spec.error());
  return spec.ok() ? spec.value() : ModelSpec{};
}

std::string MustFail(const std::string& json, const ModelConfigOptions& options = {}) {
  Result<ModelSpec> spec = ParseModelConfig(json, options);
  EXPECT_FALSE(spec.ok()) << "parsed: " << json;
  return spec.ok() ? std::string() : spec.error();
}

std::uint64_t Bytes(const ModelSpec& spec, int tp = 1) {
  Result<std::uint64_t> b = curve::BytesPerTokenPerRank(spec, tp);
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error());
  return b.ok() ? b.value() : 0;
}

// meta-llama/Meta-Llama-3-8B config.json.
const char* kLlama3_8B = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 8192,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
})";

// Qwen/Qwen2.5-7B-Instruct config.json.
const char* kQwen25_7B = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_act": "silu",
  "hidden_size": 3584,
  "initializer_range": 0.02,
  "intermediate_size": 18944,
  "max_position_embeddings": 32768,
  "max_window_layers": 28,
  "model_type": "qwen2",
  "num_attention_heads": 28,
  "num_hidden_layers": 28,
  "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 131072,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 152064
})";

// deepseek-ai/DeepSeek-V3 config.json (auto_map and a few MoE keys trimmed).
const char* kDeepSeekV3 = R"({
  "architectures": ["DeepseekV3ForCausalLM"],
  "attention_bias": false,
  "first_k_dense_replace": 3,
  "hidden_act": "silu",
  "hidden_size": 7168,
  "intermediate_size": 18432,
  "kv_lora_rank": 512,
  "max_position_embeddings": 163840,
  "model_type": "deepseek_v3",
  "moe_intermediate_size": 2048,
  "n_routed_experts": 256,
  "n_shared_experts": 1,
  "num_attention_heads": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 61,
  "num_key_value_heads": 128,
  "num_nextn_predict_layers": 1,
  "q_lora_rank": 1536,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "quantization_config": {
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [128, 128]
  },
  "rope_scaling": {
    "beta_fast": 32, "beta_slow": 1, "factor": 40,
    "mscale": 1.0, "mscale_all_dim": 1.0,
    "original_max_position_embeddings": 4096, "type": "yarn"
  },
  "rope_theta": 10000,
  "tie_word_embeddings": false,
  "topk_method": "noaux_tc",
  "torch_dtype": "bfloat16",
  "transformers_version": "4.33.1",
  "use_cache": true,
  "v_head_dim": 128,
  "vocab_size": 129280
})";

// Llama-4-Scout-shaped multimodal config: the language model under text_config,
// a vision tower with its own num_hidden_layers beside it.
const char* kLlama4Scout = R"({
  "architectures": ["Llama4ForConditionalGeneration"],
  "boi_token_index": 200080,
  "model_type": "llama4",
  "text_config": {
    "attention_chunk_size": 8192,
    "head_dim": 128,
    "hidden_size": 5120,
    "intermediate_size": 8192,
    "model_type": "llama4_text",
    "num_attention_heads": 40,
    "num_hidden_layers": 48,
    "num_key_value_heads": 8,
    "num_local_experts": 16,
    "rope_scaling": {"factor": 16.0, "rope_type": "llama3"},
    "torch_dtype": "bfloat16",
    "vocab_size": 202048
  },
  "torch_dtype": "bfloat16",
  "vision_config": {
    "hidden_size": 1408,
    "model_type": "llama4_vision_model",
    "num_attention_heads": 16,
    "num_hidden_layers": 34,
    "patch_size": 14
  }
})";

// --- Real shapes ------------------------------------------------------------------

TEST(ModelConfigTest, Llama3_8B) {
  const ModelSpec spec = MustParse(kLlama3_8B);
  EXPECT_EQ(spec.layers, 32);
  EXPECT_EQ(spec.query_heads, 32);
  EXPECT_EQ(spec.kv_heads, 8);
  EXPECT_EQ(spec.head_dim, 128);  // hidden_size / num_attention_heads
  EXPECT_EQ(spec.bytes_per_element, 2);
  EXPECT_FALSE(spec.mla);
  EXPECT_EQ(spec.name, "llama");    // model_type when there is no _name_or_path
  EXPECT_EQ(spec.parameters, 0.0);  // not in config.json, not estimated
  EXPECT_EQ(Bytes(spec), 128u * 1024);
  // Same geometry as the built-in preset.
  Result<ModelSpec> preset = curve::LookupModelPreset("llama-3-8b");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(Bytes(spec, 4), Bytes(preset.value(), 4));
}

TEST(ModelConfigTest, Qwen25_7B) {
  const ModelSpec spec = MustParse(kQwen25_7B);
  EXPECT_EQ(spec.layers, 28);
  EXPECT_EQ(spec.query_heads, 28);
  EXPECT_EQ(spec.kv_heads, 4);
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(Bytes(spec), 2u * 28 * 4 * 128 * 2);
  EXPECT_EQ(Bytes(spec, 8), 2u * 28 * 1 * 128 * 2);
}

TEST(ModelConfigTest, DeepSeekV3IsLatentAttention) {
  const ModelSpec spec = MustParse(kDeepSeekV3);
  EXPECT_TRUE(spec.mla);
  EXPECT_EQ(spec.layers, 61);
  EXPECT_EQ(spec.kv_lora_rank, 512);
  EXPECT_EQ(spec.qk_rope_head_dim, 64);
  EXPECT_EQ(spec.query_heads, 128);
  EXPECT_EQ(spec.head_dim, (128 + 64 + 128) / 2);
  EXPECT_EQ(spec.bytes_per_element, 2);
  EXPECT_EQ(Bytes(spec), (512u + 64) * 61 * 2);
  EXPECT_EQ(Bytes(spec, 8), (512u + 64) * 61 * 2);
}

TEST(ModelConfigTest, MultimodalConfigReadsTextConfig) {
  const ModelSpec spec = MustParse(kLlama4Scout);
  EXPECT_EQ(spec.layers, 48);  // not the vision tower's 34
  EXPECT_EQ(spec.query_heads, 40);
  EXPECT_EQ(spec.kv_heads, 8);
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.name, "llama4");
  EXPECT_EQ(Bytes(spec), 2u * 48 * 8 * 128 * 2);
}

TEST(ModelConfigTest, TextConfigWinsAndTheTopLevelFillsIn) {
  // Qwen2-VL style: flat keys at the top, and a text_config that differs from them
  // in num_key_value_heads; the dtype is only at the top.
  const ModelSpec spec = MustParse(R"({
    "model_type": "qwen2_vl",
    "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 28,
    "hidden_size": 3584, "torch_dtype": "float32",
    "text_config": {"num_key_value_heads": 4},
    "vision_config": {"depth": 32, "num_heads": 16}
  })");
  EXPECT_EQ(spec.layers, 28);
  EXPECT_EQ(spec.kv_heads, 4);
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.bytes_per_element, 4);
}

// --- Defaults and variants -----------------------------------------------------------

TEST(ModelConfigTest, KvHeadsDefaultToAttentionHeadsAndHeadDimToHiddenOverHeads) {
  ModelSpec spec = MustParse(R"({"num_hidden_layers": 32, "num_attention_heads": 32,
                                 "hidden_size": 4096})");
  EXPECT_EQ(spec.kv_heads, 32);
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.bytes_per_element, 2);  // no dtype: 2
  EXPECT_EQ(Bytes(spec), 524'288u);      // Llama 2 7B
  // null counts as absent.
  spec = MustParse(R"({"num_hidden_layers": 32, "num_attention_heads": 32,
                       "num_key_value_heads": null, "head_dim": null, "hidden_size": 4096,
                       "torch_dtype": null})");
  EXPECT_EQ(spec.kv_heads, 32);
  EXPECT_EQ(spec.head_dim, 128);
  // An explicit head_dim wins over hidden_size / heads (Gemma-like: 256 != 3072/16).
  spec = MustParse(R"({"num_hidden_layers": 28, "num_attention_heads": 16,
                       "num_key_value_heads": 16, "head_dim": 256, "hidden_size": 3072})");
  EXPECT_EQ(spec.head_dim, 256);
}

TEST(ModelConfigTest, NullTextConfigAndLatentWithoutCostDimensions) {
  ModelSpec spec = MustParse(R"({"num_hidden_layers": 4, "num_attention_heads": 8,
                                 "hidden_size": 512, "text_config": null})");
  EXPECT_EQ(spec.head_dim, 64);
  // MLA: the bytes need only kv_lora_rank and qk_rope_head_dim; without
  // qk_nope_head_dim / v_head_dim and with an indivisible hidden_size, head_dim
  // (a prefill-cost figure) stays unknown.
  spec = MustParse(R"({"num_hidden_layers": 27, "num_attention_heads": 3,
                       "hidden_size": 2048, "kv_lora_rank": 512, "qk_rope_head_dim": 64})");
  EXPECT_TRUE(spec.mla);
  EXPECT_EQ(spec.head_dim, 0);
  EXPECT_EQ(Bytes(spec), (512u + 64) * 27 * 2);
  EXPECT_FALSE(curve::PrefillCostForModel(spec).ok());
}

TEST(ModelConfigTest, DtypeAndOverride) {
  const std::string base = R"({"num_hidden_layers": 2, "num_attention_heads": 4,
                               "hidden_size": 256, "torch_dtype": ")";
  EXPECT_EQ(MustParse(base + R"(float16"})").bytes_per_element, 2);
  EXPECT_EQ(MustParse(base + R"(bfloat16"})").bytes_per_element, 2);
  EXPECT_EQ(MustParse(base + R"(float32"})").bytes_per_element, 4);
  EXPECT_EQ(MustParse(base + R"(float8_e4m3fn"})").bytes_per_element, 1);
  // Newer transformers write "dtype".
  EXPECT_EQ(MustParse(R"({"num_hidden_layers": 2, "num_attention_heads": 4,
                          "hidden_size": 256, "dtype": "float32"})")
                .bytes_per_element,
            4);
  ModelConfigOptions fp8;
  fp8.bytes_per_element = 1;
  EXPECT_EQ(MustParse(base + R"(bfloat16"})", fp8).bytes_per_element, 1);
  // An unknown dtype is an error that names the key, unless overridden.
  const std::string error = MustFail(base + R"(int4"})");
  EXPECT_NE(error.find("torch_dtype"), std::string::npos) << error;
  EXPECT_NE(error.find("int4"), std::string::npos) << error;
  EXPECT_EQ(MustParse(base + R"(int4"})", fp8).bytes_per_element, 1);
  ModelConfigOptions zero;
  zero.bytes_per_element = 0;
  MustFail(base + R"(bfloat16"})", zero);
}

TEST(ModelConfigTest, FalconStyleKeys) {
  // tiiuae/falcon-40b (RefinedWeb naming).
  ModelSpec spec = MustParse(R"({"model_type": "RefinedWeb", "n_layer": 60, "n_head": 128,
                                 "n_head_kv": 8, "hidden_size": 8192,
                                 "torch_dtype": "bfloat16"})");
  EXPECT_EQ(spec.layers, 60);
  EXPECT_EQ(spec.kv_heads, 8);
  EXPECT_EQ(spec.head_dim, 64);
  EXPECT_EQ(Bytes(spec), 120u * 1024);
  // tiiuae/falcon-7b: multi-query attention, one KV head.
  spec = MustParse(R"({"n_layer": 32, "n_head": 71, "multi_query": true,
                       "hidden_size": 4544})");
  EXPECT_EQ(spec.kv_heads, 1);
  EXPECT_EQ(spec.head_dim, 64);
}

TEST(ModelConfigTest, NameAndParametersComeFromOptionsFirst) {
  const std::string json = R"({"_name_or_path": "meta-llama/Llama-2-7b-hf",
    "model_type": "llama", "num_hidden_layers": 32, "num_attention_heads": 32,
    "hidden_size": 4096})";
  EXPECT_EQ(MustParse(json).name, "meta-llama/Llama-2-7b-hf");
  ModelConfigOptions options;
  options.name = "mine";
  options.parameters = 6.74e9;
  const ModelSpec spec = MustParse(json, options);
  EXPECT_EQ(spec.name, "mine");
  EXPECT_EQ(spec.parameters, 6.74e9);
  EXPECT_TRUE(curve::PrefillCostForModel(spec).ok());
}

// --- Bad input ------------------------------------------------------------------------

TEST(ModelConfigTest, NotJsonOrNotAnObject) {
  for (const char* text : {"", "hello", "{", R"({"num_hidden_layers": 32)", "[1, 2, 3]", "42", R"("text")"}) {
    SCOPED_TRACE(text);
    const std::string error = MustFail(text);
    EXPECT_TRUE(error.find("not valid JSON") != std::string::npos ||
                error.find("expected a JSON object") != std::string::npos ||
                error.find("invalid JSON") != std::string::npos)
        << error;
  }
  std::string error = MustFail(R"({"num_hidden_layers": 3x2, "num_attention_heads": 2})");
  EXPECT_NE(error.find("num_hidden_layers: invalid JSON number at byte 22"), std::string::npos) << error;
  error = MustFail("[1, 2]");
  EXPECT_EQ(error, "expected a JSON object at the top level");
  error = MustFail(std::string(kLlama3_8B) + " {}");
  EXPECT_NE(error.find("after the top-level JSON object"), std::string::npos) << error;
}

TEST(ModelConfigTest, MissingKeysAreNamed) {
  std::string error = MustFail(R"({"num_attention_heads": 32, "hidden_size": 4096})");
  EXPECT_NE(error.find("num_hidden_layers: missing"), std::string::npos) << error;
  error = MustFail(R"({"num_hidden_layers": 32, "hidden_size": 4096})");
  EXPECT_NE(error.find("num_attention_heads: missing"), std::string::npos) << error;
  error = MustFail(R"({"num_hidden_layers": 32, "num_attention_heads": 32})");
  EXPECT_NE(error.find("head_dim: missing"), std::string::npos) << error;
  EXPECT_NE(error.find("hidden_size"), std::string::npos) << error;
  error = MustFail(R"({"num_hidden_layers": 32, "num_attention_heads": 3,
                       "hidden_size": 4096})");
  EXPECT_NE(error.find("not a multiple of num_attention_heads 3"), std::string::npos) << error;
  error = MustFail(R"({"num_hidden_layers": 61, "num_attention_heads": 128,
                       "kv_lora_rank": 512})");
  EXPECT_NE(error.find("qk_rope_head_dim: missing"), std::string::npos) << error;
  EXPECT_NE(error.find("kv_lora_rank"), std::string::npos) << error;
}

TEST(ModelConfigTest, WrongTypesAreNamed) {
  struct Case {
    const char* json;
    const char* expected;
  };
  const Case cases[] = {
      {R"({"num_hidden_layers": "32", "num_attention_heads": 32, "hidden_size": 4096})",
       "num_hidden_layers: expected a positive integer, found a string"},
      {R"({"num_hidden_layers": 32.5, "num_attention_heads": 32, "hidden_size": 4096})",
       "num_hidden_layers: expected a positive integer, found a number that is not"},
      {R"({"num_hidden_layers": 0, "num_attention_heads": 32, "hidden_size": 4096})",
       "num_hidden_layers: expected a positive integer, found 0"},
      {R"({"num_hidden_layers": -4, "num_attention_heads": 32, "hidden_size": 4096})",
       "num_hidden_layers: expected a positive integer, found -4"},
      {R"({"num_hidden_layers": 99999999999, "num_attention_heads": 32, "hidden_size": 4096})",
       "num_hidden_layers: expected a positive integer, found 99999999999"},
      {R"({"num_hidden_layers": [32], "num_attention_heads": 32, "hidden_size": 4096})",
       "num_hidden_layers: expected a positive integer, found an array"},
      {R"({"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096,
           "num_key_value_heads": true})",
       "num_key_value_heads: expected a positive integer, found a boolean"},
      {R"({"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096,
           "torch_dtype": 16})",
       "torch_dtype: expected a string"},
      {R"({"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096,
           "text_config": 5})",
       "text_config: expected an object, found a number"},
      {R"({"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096,
           "text_config": {"num_key_value_heads": "8"}})",
       "text_config.num_key_value_heads: expected a positive integer, found a string"},
      {R"({"n_layer": 32, "n_head": 71, "multi_query": "yes", "hidden_size": 4544})",
       "multi_query: expected a boolean"},
      {R"({"_name_or_path": 7, "num_hidden_layers": 32, "num_attention_heads": 32,
           "hidden_size": 4096})",
       "_name_or_path: expected a string"},
  };
  for (const Case& c : cases) {
    const std::string error = MustFail(c.json);
    EXPECT_NE(error.find(c.expected), std::string::npos) << "error: " << error << "\nexpected: " << c.expected;
  }
}

// --- Files -------------------------------------------------------------------------------

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + "model_config_test_" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ModelConfigTest, ReadsAFileAndNamesThePathInErrors) {
  const std::string good = WriteTemp("qwen.json", kQwen25_7B);
  Result<ModelSpec> spec = ReadModelConfigFile(good);
  ASSERT_TRUE(spec.ok()) << spec.error();
  EXPECT_EQ(Bytes(spec.value()), 2u * 28 * 4 * 128 * 2);
  EXPECT_EQ(spec.value().name, "qwen2");

  const std::string unnamed = WriteTemp("unnamed.json", R"({"num_hidden_layers": 2, "num_attention_heads": 2,
                                     "hidden_size": 64})");
  spec = ReadModelConfigFile(unnamed);
  ASSERT_TRUE(spec.ok()) << spec.error();
  EXPECT_EQ(spec.value().name, unnamed);

  const std::string bad = WriteTemp("bad.json", R"({"num_attention_heads": 2})");
  spec = ReadModelConfigFile(bad);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.error().rfind(bad + ": ", 0), 0u) << spec.error();
  EXPECT_NE(spec.error().find("num_hidden_layers"), std::string::npos) << spec.error();

  const std::string missing = testing::TempDir() + "model_config_test_does_not_exist.json";
  spec = ReadModelConfigFile(missing);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.error().rfind(missing + ": ", 0), 0u) << spec.error();
  EXPECT_NE(spec.error().find("cannot open the file (No such file"), std::string::npos) << spec.error();

  for (const std::string& path : {good, unnamed, bad}) std::remove(path.c_str());
}

TEST(ModelConfigTest, ReadModelConfigFileRefusesDirectoriesAndEndlessFiles) {
  Result<ModelSpec> spec = ReadModelConfigFile(testing::TempDir());
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().find("is a directory, not a file"), std::string::npos) << spec.error();
  spec = ReadModelConfigFile("/dev/zero");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.error(), "/dev/zero: is larger than 16 MiB (not a config file?)");
}

// --- Hybrid models: KV cache groups -------------------------------------------

std::string Layers(int n, const std::string& every, const std::string& other, int period, int offset) {
  std::string out;
  for (int i = 0; i < n; ++i)
    out += std::string(i ? ", " : "") + "\"" + ((i % period) == offset ? every : other) + "\"";
  return out;
}

// openai/gpt-oss-120b config.json (the keys read; its others are skipped).
TEST(ModelConfigTest, GptOssLayerTypesGiveASlidingAndAFullGroup) {
  const std::string json = R"({"model_type": "gpt_oss", "num_hidden_layers": 36, "num_attention_heads": 64,
    "num_key_value_heads": 8, "head_dim": 64, "hidden_size": 2880, "sliding_window": 128,
    "torch_dtype": "bfloat16", "layer_types": [)" +
                           Layers(36, "sliding_attention", "full_attention", 2, 0) + "]}";
  const ModelSpec spec = MustParse(json);
  ASSERT_EQ(spec.groups.size(), 2u);
  base::Result<ModelSpec> preset = curve::LookupModelPreset("gpt-oss-120b");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(spec.groups, preset.value().groups);
  EXPECT_EQ(Bytes(spec), 73'728u);  // the full-attention count is unchanged
}

// google/gemma-3-27b-it config.json: the language model's keys in text_config.
TEST(ModelConfigTest, Gemma3SlidingWindowPatternGivesFiftyTwoSlidingLayers) {
  const ModelSpec spec = MustParse(R"({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text",
    "num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
    "hidden_size": 5376, "sliding_window": 1024, "sliding_window_pattern": 6}, "torch_dtype": "bfloat16"})");
  base::Result<ModelSpec> preset = curve::LookupModelPreset("gemma-3-27b");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(spec.groups, preset.value().groups);
}

// meta-llama/Llama-4-Scout-17B-16E-Instruct config.json, text_config.
TEST(ModelConfigTest, Llama4NoRopeLayersAreTheFullOnes) {
  std::string nope;
  for (int i = 0; i < 48; ++i) nope += std::string(i ? ", " : "") + ((i + 1) % 4 == 0 ? "0" : "1");
  const ModelSpec spec = MustParse(R"({"model_type": "llama4", "text_config": {"num_hidden_layers": 48,
    "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 5120,
    "attention_chunk_size": 8192, "no_rope_layers": [)" +
                                   nope + R"(]}, "torch_dtype": "bfloat16"})");
  base::Result<ModelSpec> preset = curve::LookupModelPreset("llama-4-scout");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(spec.groups, preset.value().groups);
}

// Qwen/Qwen3-Next-80B-A3B-Instruct config.json, with full_attention_interval and
// with the layer_types that newer copies carry: the same groups.
TEST(ModelConfigTest, Qwen3NextLinearLayersCarryTheirStateSize) {
  const std::string base = R"("model_type": "qwen3_next", "num_hidden_layers": 48, "num_attention_heads": 16,
    "num_key_value_heads": 2, "head_dim": 256, "hidden_size": 2048, "dtype": "bfloat16",
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_value_head_dim": 128)";
  const ModelSpec by_interval = MustParse("{" + base + R"(, "full_attention_interval": 4})");
  const ModelSpec by_types =
      MustParse("{" + base + R"(, "layer_types": [)" + Layers(48, "full_attention", "linear_attention", 4, 3) + "]}");
  base::Result<ModelSpec> preset = curve::LookupModelPreset("qwen3-next-80b-a3b");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(by_interval.groups, preset.value().groups);
  EXPECT_EQ(by_types.groups, preset.value().groups);
  // Without the linear dimensions the state cannot be sized: the key is named.
  const std::string error = MustFail(R"({"num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 64, "full_attention_interval": 2})");
  EXPECT_NE(error.find("linear_conv_kernel_dim: missing"), std::string::npos) << error;
}

TEST(ModelConfigTest, HybridKeysThatSayNothingKeepTheDensePath) {
  // Qwen2.5's sliding_window is unused (use_sliding_window false), Mistral 7B
  // v0.1's applies to every layer: neither makes groups; nor do layer_types that
  // are all full attention.
  EXPECT_TRUE(MustParse(R"({"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 64, "sliding_window": 4096, "use_sliding_window": false})")
                  .groups.empty());
  EXPECT_TRUE(MustParse(R"({"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64,
    "layer_types": ["full_attention", "full_attention"]})")
                  .groups.empty());
  std::string error = MustFail(R"({"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64,
    "layer_types": ["full_attention", "rwkv"]})");
  EXPECT_NE(error.find("layer_types[1]: unknown layer type 'rwkv'"), std::string::npos) << error;
  error = MustFail(R"({"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64,
    "layer_types": ["full_attention"]})");
  EXPECT_NE(error.find("layer_types: expected 2 entries"), std::string::npos) << error;
  error = MustFail(R"({"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64,
    "layer_types": ["full_attention", "sliding_attention"]})");
  EXPECT_NE(error.find("sliding_window: missing"), std::string::npos) << error;
}

// The bytes of one state per cached prefix point, per rank, for a linear group.
std::uint64_t StateBytes(const ModelSpec& spec, int tensor_parallel, std::size_t group) {
  base::Result<std::vector<curve::KvGroupSizing>> sized = curve::SizeKvGroups(spec, tensor_parallel, 16);
  EXPECT_TRUE(sized.ok()) << sized.error();
  return sized.ok() ? sized.value()[group].state_bytes : 0;
}

// ai21labs/Jamba-v0.1 config.json (Mamba-1): attention where i % 8 == 4.
// By hand: intermediate 2 * 4096 = 8192; a layer's state (4 - 1) * 8192 conv +
// 8192 * 16 SSM = 155,648 elements, 311,296 bytes in bf16; 28 Mamba layers.
TEST(ModelConfigTest, JambaMambaOneLayersByPeriodAndOffset) {
  const std::string base = R"("model_type": "jamba", "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "hidden_size": 4096, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
    "torch_dtype": "bfloat16", "attn_layer_period": 8)";
  const ModelSpec spec = MustParse("{" + base + R"(, "attn_layer_offset": 4})");
  ASSERT_EQ(spec.groups.size(), 2u);
  EXPECT_EQ(spec.layers, 32);
  EXPECT_EQ(spec.groups[0].kind, curve::KvGroupKind::kLinear);  // layer 0 is Mamba
  EXPECT_EQ(spec.groups[0].layers, 28);
  EXPECT_EQ(spec.groups[0].state_elements, 155648u);
  EXPECT_EQ(spec.groups[1].kind, curve::KvGroupKind::kFull);
  EXPECT_EQ(spec.groups[1].layers, 4);
  EXPECT_EQ(StateBytes(spec, 1, 0), 28u * 311296u);
  EXPECT_EQ(StateBytes(spec, 2, 0), 28u * 311296u / 2);
  // The offset is required with the period, and must be below it.
  std::string error = MustFail("{" + base + "}");
  EXPECT_NE(error.find("attn_layer_offset: expected an integer from 0 to attn_layer_period - 1 (7), found nothing"),
            std::string::npos)
      << error;
  error = MustFail("{" + base + R"(, "attn_layer_offset": 8})");
  EXPECT_NE(error.find("found 8"), std::string::npos) << error;
  error = MustFail(R"({"num_hidden_layers": 4, "num_attention_heads": 4, "head_dim": 64, "hidden_size": 256,
    "attn_layer_period": 2, "attn_layer_offset": 1, "mamba_d_conv": 4, "mamba_expand": 2})");
  EXPECT_NE(error.find("mamba_d_state: missing (expected a positive integer) (required by Mamba layers)"),
            std::string::npos)
      << error;
}

// nvidia/Nemotron-H-8B-Base-8K config.json (Mamba-2): 24 'M', 4 '*', 24 '-'
// layers. By hand: intermediate 128 heads * 64 = 8192; conv (4 - 1) * (8192 + 2 *
// 8 groups * 128) = 30,720, SSM 128 * 64 * 128 = 1,048,576: 1,079,296 elements a
// layer. The MLP layers hold nothing: the model has 28 cached layers.
TEST(ModelConfigTest, NemotronHPatternLettersAndMambaTwoState) {
  const std::string base = R"("model_type": "nemotron_h", "num_hidden_layers": 52, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 4096, "mamba_num_heads": 128,
    "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4, "expand": 2,
    "torch_dtype": "bfloat16")";
  const ModelSpec spec =
      MustParse("{" + base + R"(, "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"})");
  EXPECT_EQ(spec.layers, 28);
  ASSERT_EQ(spec.groups.size(), 2u);
  EXPECT_EQ(spec.groups[0].kind, curve::KvGroupKind::kLinear);
  EXPECT_EQ(spec.groups[0].layers, 24);
  EXPECT_EQ(spec.groups[0].state_elements, 1079296u);
  EXPECT_EQ(spec.groups[1].layers, 4);
  EXPECT_EQ(StateBytes(spec, 1, 0), 24u * 1079296u * 2);
  // 8 groups split over 8 ranks: every part divides.
  EXPECT_EQ(StateBytes(spec, 8, 0), 24u * 1079296u * 2 / 8);
  // 16 ranks do not divide 8 groups, and vLLM replicates only a single group.
  base::Result<std::vector<curve::KvGroupSizing>> sized = curve::SizeKvGroups(spec, 16, 16);
  ASSERT_FALSE(sized.ok());
  EXPECT_NE(sized.error().find("does not divide the state's 8 groups"), std::string::npos) << sized.error();
  // The same layers as newer configs list them.
  std::string blocks;
  for (char c : std::string("M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-")) {
    blocks += std::string(blocks.empty() ? "" : ", ") + (c == 'M'   ? "\"mamba\""
                                                         : c == '*' ? "\"attention\""
                                                                    : "\"mlp\"");
  }
  EXPECT_EQ(MustParse("{" + base + R"(, "layers_block_type": [)" + blocks + "]}").groups, spec.groups);
  std::string error = MustFail("{" + base + R"(, "hybrid_override_pattern": "M*"})");
  EXPECT_NE(error.find("hybrid_override_pattern: expected 52 letters (num_hidden_layers), found 2"), std::string::npos)
      << error;
  error = MustFail(R"({"num_hidden_layers": 3, "num_attention_heads": 4, "head_dim": 64,
    "hybrid_override_pattern": "M*X"})");
  EXPECT_NE(error.find("hybrid_override_pattern[2]: unknown layer letter 'X'"), std::string::npos) << error;
  error = MustFail(R"({"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64,
    "hybrid_override_pattern": "--"})");
  EXPECT_NE(error.find("hold no KV cache or state"), std::string::npos) << error;
}

// ibm-ai-platform/Bamba-9B config.json (Mamba-2, Bamba's keys): attention at layers
// 9, 18, 27. By hand: intermediate 2 * 4096 = 8192; conv 3 * (8192 + 2 * 1 * 128) =
// 25,344, SSM 128 * 64 * 128 = 1,048,576: 1,073,920 elements a layer. Its single
// group of B/C channels (768 conv elements) is held whole by every rank.
TEST(ModelConfigTest, BambaAttentionIndicesAndAReplicatedGroup) {
  const std::string base = R"("model_type": "bamba", "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "hidden_size": 4096, "mamba_n_heads": 128, "mamba_d_head": 64,
    "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2, "torch_dtype": "bfloat16")";
  const ModelSpec spec = MustParse("{" + base + R"(, "attn_layer_indices": [9, 18, 27]})");
  ASSERT_EQ(spec.groups.size(), 2u);
  EXPECT_EQ(spec.groups[0].layers, 29);
  EXPECT_EQ(spec.groups[0].state_elements, 1073920u);
  EXPECT_EQ(spec.groups[1].layers, 3);
  EXPECT_EQ(StateBytes(spec, 1, 0), 29u * 1073920u * 2);
  EXPECT_EQ(StateBytes(spec, 2, 0), 29u * ((1073920u - 768u) / 2 + 768u) * 2);
  // Granite 4.0 (GraniteMoeHybrid) names the same kinds in layer_types.
  std::string types;
  for (int i = 0; i < 32; ++i) {
    types += std::string(i ? ", " : "") + (i == 9 || i == 18 || i == 27 ? "\"attention\"" : "\"mamba\"");
  }
  EXPECT_EQ(MustParse("{" + base + R"(, "layer_types": [)" + types + "]}").groups, spec.groups);
  const std::string error = MustFail("{" + base + R"(, "attn_layer_indices": [9, 32]})");
  EXPECT_NE(error.find("attn_layer_indices[1]: expected a layer index from 0 to 31, found 32"), std::string::npos)
      << error;
  // Falcon-H1's parallel hybrid is not modelled: every layer counts as full attention.
  EXPECT_TRUE(MustParse(R"({"model_type": "falcon_h1", "num_hidden_layers": 8, "num_attention_heads": 4,
    "head_dim": 64, "attn_layer_indices": [1, 4]})")
                  .groups.empty());
}

}  // namespace
}  // namespace kvwatch::config
