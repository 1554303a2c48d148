// Tests of curve/sizing.h: the test vectors of docs/semantics.md section 4, tensor
// parallelism, MLA, the capacity plan, the depth-weighted cost and the presets.
#include "curve/sizing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace kvwatch::curve {
namespace {

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;
constexpr std::uint64_t kGiB = 1024 * kMiB;

ModelSpec Preset(const std::string& name) {
  base::Result<ModelSpec> spec = LookupModelPreset(name);
  EXPECT_TRUE(spec.ok()) << (spec.ok() ? "" : spec.error());
  return spec.ok() ? spec.value() : ModelSpec{};
}

std::uint64_t PerRank(const ModelSpec& spec, int tp = 1) {
  base::Result<std::uint64_t> b = BytesPerTokenPerRank(spec, tp);
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error());
  return b.ok() ? b.value() : 0;
}

// --- Section 4 test vectors (FP16) ------------------------------------------------

TEST(SizingTest, Llama2_7BHolds524288BytesPerTokenAndTwoGiBPer4096Tokens) {
  const ModelSpec spec = Preset("llama-2-7b");
  EXPECT_EQ(spec.layers, 32);
  EXPECT_EQ(spec.kv_heads, 32);
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(PerRank(spec), 524'288u);
  base::Result<std::uint64_t> request = PageBytes(4096, PerRank(spec));
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(request.value(), 2 * kGiB);
}

TEST(SizingTest, Llama65BHoldsTwoAndAHalfMiBPerToken) {
  const ModelSpec spec = Preset("llama-65b");
  EXPECT_EQ(spec.layers, 80);
  EXPECT_EQ(spec.kv_heads, 64);
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(PerRank(spec), 5 * kMiB / 2);
}

TEST(SizingTest, Llama3_70BHolds320KiBPerToken) { EXPECT_EQ(PerRank(Preset("llama-3-70b")), 320 * kKiB); }

TEST(SizingTest, Falcon40BHolds120KiBPerToken) {
  const ModelSpec spec = Preset("falcon-40b");
  EXPECT_EQ(spec.layers, 60);
  EXPECT_EQ(spec.kv_heads, 8);
  EXPECT_EQ(spec.head_dim, 64);
  EXPECT_EQ(PerRank(spec), 120 * kKiB);
}

TEST(SizingTest, HundredThousandPagesOf16TokensAt60KiBWithA20PercentReserve) {
  base::Result<CapacityPlan> plan = PlanCapacity(100'000, 16, 60 * kKiB);
  ASSERT_TRUE(plan.ok()) << plan.error();
  EXPECT_EQ(plan.value().payload_bytes, 96'000'000 * kKiB);
  EXPECT_NEAR(static_cast<double>(plan.value().payload_bytes) / kGiB, 91.6, 0.05);
  EXPECT_EQ(plan.value().reserve_bytes, 0u);
  EXPECT_EQ(plan.value().total_bytes, plan.value().payload_bytes);

  CapacityPlanOptions options;
  options.reserve_fraction = 0.2;
  plan = PlanCapacity(100'000, 16, 60 * kKiB, options);
  ASSERT_TRUE(plan.ok()) << plan.error();
  const CapacityPlan& p = plan.value();
  EXPECT_EQ(p.page_bytes, 16 * 60 * kKiB);
  EXPECT_EQ(p.payload_bytes, 96'000'000 * kKiB);
  EXPECT_EQ(p.metadata_bytes, 0u);
  EXPECT_EQ(p.reserve_bytes, 19'200'000 * kKiB);  // 20% of the payload
  EXPECT_EQ(p.total_bytes, 115'200'000 * kKiB);
  EXPECT_NEAR(static_cast<double>(p.total_bytes) / kGiB, 109.9, 0.05);
}

// --- Capacity plan ------------------------------------------------------------------

TEST(SizingTest, CapacityPlanRowsAreNamedStatedAndSum) {
  CapacityPlanOptions options;
  options.metadata_bytes_per_page = 64;
  options.reserve_fraction = 0.125;
  base::Result<CapacityPlan> plan = PlanCapacity(1000, 16, 131072, options);
  ASSERT_TRUE(plan.ok()) << plan.error();
  const CapacityPlan& p = plan.value();
  EXPECT_EQ(p.payload_bytes, 1000u * 16 * 131072);
  EXPECT_EQ(p.metadata_bytes, 64'000u);
  EXPECT_EQ(p.reserve_bytes, p.payload_bytes / 8);
  EXPECT_EQ(p.total_bytes, p.payload_bytes + p.metadata_bytes + p.reserve_bytes);
  EXPECT_EQ(p.reserve_fraction, 0.125);
  ASSERT_EQ(p.rows.size(), 4u);
  EXPECT_EQ(p.rows[0].name, "payload");
  EXPECT_EQ(p.rows[0].bytes, p.payload_bytes);
  EXPECT_EQ(p.rows[0].formula, "1000 pages * 16 tokens * 131072 bytes per token");
  EXPECT_EQ(p.rows[1].name, "metadata");
  EXPECT_EQ(p.rows[1].bytes, p.metadata_bytes);
  EXPECT_EQ(p.rows[1].formula, "1000 pages * 64 bytes per page");
  EXPECT_EQ(p.rows[2].name, "reserve");
  EXPECT_EQ(p.rows[2].bytes, p.reserve_bytes);
  EXPECT_EQ(p.rows[2].formula, "12.5% of payload");
  EXPECT_EQ(p.rows[3].name, "total");
  EXPECT_EQ(p.rows[3].bytes, p.total_bytes);
}

TEST(SizingTest, CapacityPlanRejectsBadFiguresWithAReason) {
  for (double bad : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    CapacityPlanOptions options;
    options.reserve_fraction = bad;
    base::Result<CapacityPlan> plan = PlanCapacity(10, 16, 1024, options);
    ASSERT_FALSE(plan.ok());
    EXPECT_NE(plan.error().find("reserve fraction"), std::string::npos) << plan.error();
  }
  base::Result<CapacityPlan> plan = PlanCapacity(10, 0, 1024);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().find("tokens per page"), std::string::npos);
  plan = PlanCapacity(10, 16, 0);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().find("bytes per token"), std::string::npos);
  plan = PlanCapacity(std::numeric_limits<std::uint64_t>::max() / 4, 16, 1024);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().find("overflow"), std::string::npos);
  // Zero pages is a valid (empty) plan; a 100% reserve doubles the payload.
  CapacityPlanOptions full;
  full.reserve_fraction = 1.0;
  plan = PlanCapacity(0, 16, 1024, full);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan.value().total_bytes, 0u);
  plan = PlanCapacity(3, 16, 1024, full);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan.value().total_bytes, 2u * 3 * 16 * 1024);
}

TEST(SizingTest, PageAndPayloadBytesMultiplyAndDetectOverflow) {
  base::Result<std::uint64_t> page = PageBytes(16, 60 * kKiB);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page.value(), 960 * kKiB);
  base::Result<std::uint64_t> payload = PayloadBytes(3, 16, 60 * kKiB);
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(payload.value(), 3 * 960 * kKiB);
  EXPECT_FALSE(PageBytes(std::numeric_limits<std::uint64_t>::max(), 2).ok());
  EXPECT_FALSE(PayloadBytes(std::numeric_limits<std::uint64_t>::max() / 16 + 1, 16, 1).ok());
  EXPECT_TRUE(PayloadBytes(std::numeric_limits<std::uint64_t>::max() / 16, 16, 1).ok());
}

// --- Tensor parallelism -----------------------------------------------------------------

TEST(SizingTest, TensorParallelSplitsKvHeadsOverAtMostKvHeadsRanks) {
  const ModelSpec llama70 = Preset("llama-3-70b");  // 8 KV heads
  EXPECT_EQ(PerRank(llama70, 1), 320 * kKiB);
  EXPECT_EQ(PerRank(llama70, 2), 160 * kKiB);
  EXPECT_EQ(PerRank(llama70, 4), 80 * kKiB);
  EXPECT_EQ(PerRank(llama70, 8), 40 * kKiB);
  // More ranks than KV heads: heads are replicated, each rank still holds one.
  EXPECT_EQ(PerRank(llama70, 16), 40 * kKiB);
  EXPECT_EQ(PerRank(llama70, 64), 40 * kKiB);

  const ModelSpec qwen7 = Preset("qwen2.5-7b");  // 28 layers, 4 KV heads
  EXPECT_EQ(PerRank(qwen7, 1), 2u * 28 * 4 * 128 * 2);
  EXPECT_EQ(PerRank(qwen7, 2), 2u * 28 * 2 * 128 * 2);
  EXPECT_EQ(PerRank(qwen7, 8), 2u * 28 * 1 * 128 * 2);

  const ModelSpec llama7 = Preset("llama-2-7b");  // 32 KV heads
  EXPECT_EQ(PerRank(llama7, 32), 16 * kKiB);
  EXPECT_EQ(PerRank(llama7, 64), 16 * kKiB);
  base::Result<std::uint64_t> whole = BytesPerToken(llama70);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole.value(), 320 * kKiB);
}

TEST(SizingTest, TensorParallelThatDoesNotDivideTheKvHeadsIsAnError) {
  const ModelSpec llama70 = Preset("llama-3-70b");
  for (int tp : {3, 5, 6, 12, 20}) {
    base::Result<std::uint64_t> b = BytesPerTokenPerRank(llama70, tp);
    ASSERT_FALSE(b.ok()) << "tp=" << tp;
    EXPECT_NE(b.error().find("tensor-parallel size " + std::to_string(tp)), std::string::npos) << b.error();
    EXPECT_NE(b.error().find("8 KV heads"), std::string::npos) << b.error();
    EXPECT_NE(b.error().find("llama-3-70b"), std::string::npos) << b.error();
  }
  for (int tp : {0, -2}) {
    base::Result<std::uint64_t> b = BytesPerTokenPerRank(llama70, tp);
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.error().find("at least 1"), std::string::npos) << b.error();
  }
}

// --- MLA --------------------------------------------------------------------------

TEST(SizingTest, LatentAttentionStoresTheLatentOnEveryRank) {
  const ModelSpec ds = Preset("deepseek-v3");
  ASSERT_TRUE(ds.mla);
  EXPECT_EQ(ds.layers, 61);
  EXPECT_EQ(ds.kv_lora_rank, 512);
  EXPECT_EQ(ds.qk_rope_head_dim, 64);
  const std::uint64_t expected = (512 + 64) * 61 * 2;  // 70,272
  EXPECT_EQ(PerRank(ds, 1), expected);
  for (int tp : {2, 3, 8, 16, 256}) EXPECT_EQ(PerRank(ds, tp), expected) << tp;
  ModelSpec fp8 = ds;
  fp8.bytes_per_element = 1;
  EXPECT_EQ(PerRank(fp8, 8), expected / 2);
  // The standard-attention fields play no part.
  ModelSpec odd = ds;
  odd.kv_heads = 0;
  odd.head_dim = 0;
  EXPECT_EQ(PerRank(odd, 4), expected);
}

TEST(SizingTest, InvalidSpecsNameTheMissingField) {
  ModelSpec spec = Preset("llama-2-7b");
  spec.layers = 0;
  base::Result<std::uint64_t> b = BytesPerTokenPerRank(spec, 1);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().find("layers"), std::string::npos) << b.error();
  spec = Preset("llama-2-7b");
  spec.kv_heads = -1;
  b = BytesPerToken(spec);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().find("kv_heads"), std::string::npos) << b.error();
  spec = Preset("llama-2-7b");
  spec.bytes_per_element = 0;
  EXPECT_FALSE(ValidateModelSpec(spec).ok());
  spec = Preset("llama-2-7b");
  spec.layers = spec.kv_heads = spec.head_dim = std::numeric_limits<int>::max();
  b = BytesPerToken(spec);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().find("bytes per token overflows"), std::string::npos) << b.error();
  spec = Preset("deepseek-v3");
  spec.qk_rope_head_dim = 0;
  base::Status s = ValidateModelSpec(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("qk_rope_head_dim"), std::string::npos) << s.error();
}

TEST(SizingTest, DtypeNamesMapToElementBytes) {
  const std::pair<const char*, int> cases[] = {{"float16", 2},       {"bfloat16", 2}, {"BF16", 2},    {"fp16", 2},
                                               {"half", 2},          {"float32", 4},  {"fp32", 4},    {"float", 4},
                                               {"float8_e4m3fn", 1}, {"fp8", 1},      {"fp8_e5m2", 1}};
  for (const auto& [name, bytes] : cases) {
    base::Result<int> r = DtypeBytes(name);
    ASSERT_TRUE(r.ok()) << name;
    EXPECT_EQ(r.value(), bytes) << name;
  }
  for (const char* bad : {"int4", "", "auto", "float64"}) {
    base::Result<int> r = DtypeBytes(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().find("unsupported dtype"), std::string::npos);
  }
}

// --- Depth-weighted prefill cost ----------------------------------------------------------

// Sum over the token positions of the given pages of (a + b * t), term by term.
long double BruteForcePagesFlops(const PrefillCost& cost, const std::vector<std::uint64_t>& pages,
                                 std::uint64_t page_tokens) {
  long double sum = 0;
  for (std::uint64_t i : pages) {
    for (std::uint64_t t = i * page_tokens; t < (i + 1) * page_tokens; ++t) {
      sum += static_cast<long double>(cost.a) + static_cast<long double>(cost.b) * t;
    }
  }
  return sum;
}

TEST(SizingTest, PageCostIsTheSumOverItsTokenPositions) {
  // Small integers: every sum is exact in double.
  const PrefillCost cost{3.0, 5.0};
  for (std::uint64_t p : {1u, 2u, 16u}) {
    for (std::uint64_t i : {0u, 1u, 7u, 100u}) {
      EXPECT_EQ(cost.PageFlops(i, p), static_cast<double>(BruteForcePagesFlops(cost, {i}, p)))
          << "i=" << i << " P=" << p;
    }
  }
  // Page 0 of 4 tokens: 4a + b(0+1+2+3) = 12 + 30.
  EXPECT_EQ(cost.PageFlops(0, 4), 42.0);
  // Page 2 of 4 tokens: positions 8..11: 4a + b(8+9+10+11) = 12 + 190.
  EXPECT_EQ(cost.PageFlops(2, 4), 202.0);
}

TEST(SizingTest, ClosedFormOverASetOfPagesMatchesBruteForce) {
  const PrefillCost small{3.0, 5.0};
  const std::vector<std::vector<std::uint64_t>> sets = {
      {}, {0}, {0, 1, 2, 3}, {5, 9, 9, 40}, {1, 3, 5, 7, 11, 13, 17, 19, 23}};
  for (std::uint64_t p : {1u, 16u, 32u}) {
    for (const auto& pages : sets) {
      std::uint64_t index_sum = 0;
      for (std::uint64_t i : pages) index_sum += i;
      EXPECT_EQ(small.PagesFlops(pages.size(), index_sum, p),
                static_cast<double>(BruteForcePagesFlops(small, pages, p)));
    }
  }
  // Real coefficients: agreement to rounding.
  base::Result<PrefillCost> llama = PrefillCostForModel(Preset("llama-3-70b"));
  ASSERT_TRUE(llama.ok()) << llama.error();
  const std::vector<std::uint64_t> pages = {0, 1, 2, 50, 51, 400, 1023};
  std::uint64_t index_sum = 0;
  for (std::uint64_t i : pages) index_sum += i;
  const long double brute = BruteForcePagesFlops(llama.value(), pages, 16);
  EXPECT_NEAR(llama.value().PagesFlops(pages.size(), index_sum, 16), static_cast<double>(brute),
              1e-12 * static_cast<double>(brute));
}

TEST(SizingTest, CostCoefficientsComeFromTheModel) {
  const ModelSpec spec = Preset("llama-2-7b");
  base::Result<PrefillCost> cost = PrefillCostForModel(spec);
  ASSERT_TRUE(cost.ok()) << cost.error();
  EXPECT_EQ(cost.value().a, 2 * 6.74e9);
  EXPECT_EQ(cost.value().b, 4.0 * 32 * 32 * 128);
  EXPECT_EQ(PageCostFlops(3, 16, spec), cost.value().PageFlops(3, 16));
  EXPECT_EQ(PagesCostFlops(4, 10, 16, spec), cost.value().PagesFlops(4, 10, 16));
  // Deeper pages cost more, by b * P * P per page of depth.
  EXPECT_NEAR(PageCostFlops(11, 16, spec) - PageCostFlops(10, 16, spec), cost.value().b * 16 * 16, 1e-3);

  // DeepSeek-V3: 37B active; head dimension (128 + 64 + 128) / 2 = 160.
  cost = PrefillCostForModel(Preset("deepseek-v3"));
  ASSERT_TRUE(cost.ok());
  EXPECT_EQ(cost.value().a, 74e9);
  EXPECT_EQ(cost.value().b, 4.0 * 61 * 128 * 160);

  ModelSpec unknown = spec;
  unknown.parameters = 0;
  cost = PrefillCostForModel(unknown);
  ASSERT_FALSE(cost.ok());
  EXPECT_NE(cost.error().find("parameter count"), std::string::npos) << cost.error();
  unknown = spec;
  unknown.query_heads = 0;
  cost = PrefillCostForModel(unknown);
  ASSERT_FALSE(cost.ok());
  EXPECT_NE(cost.error().find("query_heads"), std::string::npos) << cost.error();
}

// --- Presets ------------------------------------------------------------------------------

TEST(SizingTest, PresetsHaveTheirPublishedKvGeometry) {
  struct Row {
    const char* name;
    std::uint64_t bytes_per_token;
  };
  // 2 * layers * kv_heads * head_dim * 2 bytes (MLA: (512 + 64) * 61 * 2).
  const Row rows[] = {
      {"llama-2-7b", 2u * 32 * 32 * 128 * 2},
      {"llama-2-13b", 2u * 40 * 40 * 128 * 2},
      {"llama-2-70b", 2u * 80 * 8 * 128 * 2},
      {"llama-3-8b", 2u * 32 * 8 * 128 * 2},
      {"llama-3-70b", 2u * 80 * 8 * 128 * 2},
      {"llama-3.1-405b", 2u * 126 * 8 * 128 * 2},
      {"llama-65b", 2u * 80 * 64 * 128 * 2},
      {"mistral-7b", 2u * 32 * 8 * 128 * 2},
      {"mixtral-8x7b", 2u * 32 * 8 * 128 * 2},
      {"qwen2.5-7b", 2u * 28 * 4 * 128 * 2},
      {"qwen2.5-14b", 2u * 48 * 8 * 128 * 2},
      {"qwen2.5-32b", 2u * 64 * 8 * 128 * 2},
      {"qwen2.5-72b", 2u * 80 * 8 * 128 * 2},
      {"falcon-40b", 2u * 60 * 8 * 64 * 2},
      {"deepseek-v3", (512u + 64) * 61 * 2},
      // Hybrid models counted as all full attention (their groups: SizingHybridTest).
      {"gpt-oss-20b", 2u * 24 * 8 * 64 * 2},
      {"gpt-oss-120b", 2u * 36 * 8 * 64 * 2},
      {"gemma-3-27b", 2u * 62 * 16 * 128 * 2},
      {"llama-4-scout", 2u * 48 * 8 * 128 * 2},
      {"qwen3-next-80b-a3b", 2u * 48 * 2 * 256 * 2},
  };
  std::set<std::string> tested;
  for (const Row& r : rows) {
    EXPECT_EQ(PerRank(Preset(r.name)), r.bytes_per_token) << r.name;
    tested.insert(r.name);
  }
  // Every preset is in the table above, valid, and usable for the cost.
  for (const std::string& name : ModelPresetNames()) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(tested.count(name)) << "untested preset";
    const ModelSpec spec = Preset(name);
    EXPECT_EQ(spec.name, name);
    EXPECT_EQ(spec.bytes_per_element, 2);
    EXPECT_TRUE(ValidateModelSpec(spec).ok());
    EXPECT_TRUE(PrefillCostForModel(spec).ok());
    if (!spec.mla) {
      EXPECT_EQ(spec.query_heads % spec.kv_heads, 0);  // GQA groups are whole
    }
  }
}

TEST(SizingTest, PresetLookupIsCaseInsensitiveAndKnowsAliases) {
  EXPECT_EQ(Preset("LLaMA-3-70B").name, "llama-3-70b");
  EXPECT_EQ(Preset("llama-3.1-70b").name, "llama-3-70b");
  EXPECT_EQ(Preset("Llama-3.1-8B").name, "llama-3-8b");
  EXPECT_EQ(Preset("DeepSeek-R1").name, "deepseek-v3");
  base::Result<ModelSpec> unknown = LookupModelPreset("gpt-5");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().find("unknown model 'gpt-5'"), std::string::npos) << unknown.error();
  EXPECT_NE(unknown.error().find("llama-2-7b"), std::string::npos) << unknown.error();

  const std::vector<std::string> names = ModelPresetNames();
  const std::vector<std::string> with_aliases = ModelPresetNames(true);
  EXPECT_GE(names.size(), 15u);
  EXPECT_GT(with_aliases.size(), names.size());
  for (const char* required :
       {"llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "mistral-7b", "mixtral-8x7b",
        "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b", "deepseek-v3", "falcon-40b", "llama-65b"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  }
  for (const std::string& alias : with_aliases) {
    EXPECT_TRUE(LookupModelPreset(alias).ok()) << alias;
  }
  EXPECT_EQ(std::set<std::string>(with_aliases.begin(), with_aliases.end()).size(),
            with_aliases.size());  // no name is listed twice
}

// --- Status / Result ---------------------------------------------------------------------------

TEST(StatusTest, ResultHoldsAValueOrAnError) {
  base::Result<int> ok = 5;
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value(), 5);
  EXPECT_TRUE(ok.status().ok());
  base::Result<int> bad = base::Result<int>::Error("no");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "no");
  EXPECT_EQ(bad.status().error(), "no");
  EXPECT_EQ(base::Result<int>::Error("").error(), "unknown error");
  base::Result<std::string> text = std::string("");
  EXPECT_TRUE(text.ok());  // an empty value is still a value
  EXPECT_TRUE(base::Status().ok());
  EXPECT_FALSE(base::Status::Error("x").ok());
  EXPECT_DEATH((void)bad.value(), "value\\(\\) called on an error Result: no");
  EXPECT_DEATH((void)ok.error(), "error\\(\\) called on an ok Result");
}

// --- Hybrid models: KV cache groups per preset ----------------------------------
// Each preset against its published config.json on Hugging Face (the values are
// quoted in the comments), bytes per token per group computed by hand: per layer
// 2 (K and V) * KV heads * head dim * 2 bytes (bf16).

std::vector<KvGroupSizing> Groups(const std::string& name, int tp = 1, std::uint64_t page_tokens = 16) {
  base::Result<std::vector<KvGroupSizing>> g = SizeKvGroups(Preset(name), tp, page_tokens);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error());
  return g.ok() ? g.value() : std::vector<KvGroupSizing>{};
}

// openai/gpt-oss-120b config.json: num_hidden_layers 36, num_attention_heads 64,
// num_key_value_heads 8, head_dim 64, sliding_window 128, layer_types alternating
// "sliding_attention", "full_attention" (sliding first).
TEST(SizingHybridTest, GptOss120bHasEighteenSlidingAndEighteenFullLayers) {
  const std::vector<KvGroupSizing> g = Groups("gpt-oss-120b");
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].spec.kind, KvGroupKind::kSlidingWindow);
  EXPECT_EQ(g[0].spec.layers, 18);
  EXPECT_EQ(g[0].spec.window_tokens, 128);
  EXPECT_EQ(g[0].bytes_per_token, 2u * 18 * 8 * 64 * 2);  // 36,864
  EXPECT_EQ(g[0].page_bytes, 16u * 36'864);
  EXPECT_EQ(g[1].spec.kind, KvGroupKind::kFull);
  EXPECT_EQ(g[1].bytes_per_token, 36'864u);
  // A full-attention count of the same model: all 36 layers.
  EXPECT_EQ(PerRank(Preset("gpt-oss-120b")), 2u * 36 * 8 * 64 * 2);
  // TP 8 splits the 8 KV heads of both groups.
  EXPECT_EQ(Groups("gpt-oss-120b", 8)[0].bytes_per_token, 36'864u / 8);
}

// openai/gpt-oss-20b config.json: num_hidden_layers 24, the same heads and window.
TEST(SizingHybridTest, GptOss20bHasTwelveAndTwelve) {
  const std::vector<KvGroupSizing> g = Groups("gpt-oss-20b");
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].spec.layers, 12);
  EXPECT_EQ(g[0].bytes_per_token, 2u * 12 * 8 * 64 * 2);  // 24,576
  EXPECT_EQ(g[1].spec.layers, 12);
  EXPECT_EQ(g[1].bytes_per_token, 24'576u);
}

// google/gemma-3-27b-it config.json, text_config: num_hidden_layers 62,
// num_attention_heads 32, num_key_value_heads 16, head_dim 128, sliding_window
// 1024, sliding_window_pattern 6 (every 6th layer full: 10 of 62).
TEST(SizingHybridTest, Gemma3_27bHasFiftyTwoSlidingAndTenFullLayers) {
  const std::vector<KvGroupSizing> g = Groups("gemma-3-27b");
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].spec.kind, KvGroupKind::kSlidingWindow);
  EXPECT_EQ(g[0].spec.window_tokens, 1024);
  EXPECT_EQ(g[0].spec.layers, 52);
  EXPECT_EQ(g[0].bytes_per_token, 2u * 52 * 16 * 128 * 2);  // 425,984
  EXPECT_EQ(g[1].spec.layers, 10);
  EXPECT_EQ(g[1].bytes_per_token, 2u * 10 * 16 * 128 * 2);  // 81,920
}

// meta-llama/Llama-4-Scout-17B-16E-Instruct config.json, text_config:
// num_hidden_layers 48, num_attention_heads 40, num_key_value_heads 8, head_dim
// 128, attention_chunk_size 8192, no_rope_layers 0 on every 4th layer.
TEST(SizingHybridTest, Llama4ScoutHasThirtySixChunkedAndTwelveFullLayers) {
  const std::vector<KvGroupSizing> g = Groups("llama-4-scout");
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].spec.kind, KvGroupKind::kChunkedLocal);
  EXPECT_EQ(g[0].spec.window_tokens, 8192);
  EXPECT_EQ(g[0].bytes_per_token, 2u * 36 * 8 * 128 * 2);  // 147,456
  EXPECT_EQ(g[1].bytes_per_token, 2u * 12 * 8 * 128 * 2);  // 49,152
}

// Qwen/Qwen3-Next-80B-A3B-Instruct config.json: num_hidden_layers 48,
// full_attention_interval 4, num_key_value_heads 2, head_dim 256,
// linear_conv_kernel_dim 4, linear_num_key_heads 16, linear_key_head_dim 128,
// linear_num_value_heads 32, linear_value_head_dim 128, dtype bfloat16.
TEST(SizingHybridTest, Qwen3NextHasThirtySixLinearLayersWithAStateEach) {
  const std::vector<KvGroupSizing> g = Groups("qwen3-next-80b-a3b");
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].spec.kind, KvGroupKind::kLinear);
  EXPECT_EQ(g[0].spec.layers, 36);
  // conv (4 - 1) * (2*16*128 + 32*128) = 24,576, recurrent 32*128*128 = 524,288.
  const std::uint64_t per_layer = 3 * (2 * 16 * 128 + 32 * 128) + 32 * 128 * 128;
  EXPECT_EQ(per_layer, 548'864u);
  EXPECT_EQ(g[0].state_bytes, per_layer * 36 * 2);  // 39,518,208 bytes per cached state
  EXPECT_EQ(g[0].page_bytes, g[0].state_bytes);
  EXPECT_EQ(g[0].bytes_per_token, 0u);
  EXPECT_EQ(g[1].bytes_per_token, 2u * 12 * 2 * 256 * 2);  // 24,576
  // TP 2: both KV heads split, and the state halves.
  const std::vector<KvGroupSizing> tp2 = Groups("qwen3-next-80b-a3b", 2);
  EXPECT_EQ(tp2[0].state_bytes, per_layer * 36);
  EXPECT_EQ(tp2[1].bytes_per_token, 12'288u);
  // TP 32 does not divide the 16 key heads of the state.
  base::Result<std::vector<KvGroupSizing>> bad = SizeKvGroups(Preset("qwen3-next-80b-a3b"), 32, 16);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("does not divide the state's 16 heads"), std::string::npos) << bad.error();
}

TEST(SizingHybridTest, DenseModelsHaveNoGroupsAndGroupsMustAddUp) {
  EXPECT_TRUE(Preset("llama-3-8b").groups.empty());
  EXPECT_FALSE(SizeKvGroups(Preset("llama-3-8b"), 1, 16).ok());
  ModelSpec spec = Preset("gpt-oss-20b");
  spec.groups[1].layers = 11;
  base::Result<std::vector<KvGroupSizing>> bad = SizeKvGroups(spec, 1, 16);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("hold 23 layers, the model has 24"), std::string::npos) << bad.error();
  spec = Preset("gpt-oss-20b");
  spec.groups[0].window_tokens = 0;
  EXPECT_FALSE(SizeKvGroups(spec, 1, 16).ok());
}

}  // namespace
}  // namespace kvwatch::curve
