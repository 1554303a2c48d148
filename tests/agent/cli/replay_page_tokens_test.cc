// Tokens per page from the records (agent/cli/page_tokens.h) and what `kvwatch
// replay` does with them: infers the page size when --page-tokens is not given,
// checks the option against the records when it is, says which in the settings
// line and the JSON, and warns on a mismatch. Small synthetic records throughout;
// the last test reads the shared Mooncake trace and skips when it is absent.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agent/cli/page_tokens.h"
#include "agent/cli/replay_command.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

namespace fs = std::filesystem;
using testing_support::Millis;
using testing_support::RunCommand;

constexpr PageRule kCeil = PageRule::kPartialLastPage;
constexpr PageRule kFloor = PageRule::kFullPagesOnly;

std::uint64_t CeilDiv(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// Deterministic prompt lengths in [1, max_tokens].
std::vector<std::uint64_t> Lengths(std::size_t n, std::uint64_t max_tokens, std::uint64_t seed = 7) {
  std::vector<std::uint64_t> out;
  std::uint64_t x = seed;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    out.push_back((x >> 33) % max_tokens + 1);
  }
  return out;
}

std::vector<TokenPages> Records(const std::vector<std::uint64_t>& lengths, std::uint64_t page_tokens, PageRule rule) {
  std::vector<TokenPages> out;
  for (std::uint64_t l : lengths) {
    out.push_back({l, rule == kCeil ? CeilDiv(l, page_tokens) : l / page_tokens});
  }
  return out;
}

TEST(PageTokensTest, RecordsOfTheRealFormatsFit) {
  // A Mooncake record: 6,758 tokens in 14 pages of 512, the last one partial.
  EXPECT_TRUE(PagesFit(6758, 14, 512, kCeil));
  EXPECT_FALSE(PagesFit(6758, 14, 512, kFloor));
  EXPECT_FALSE(PagesFit(6758, 14, 16, kCeil));
  // The coding-agent stream: 71,175 tokens in 139 full pages of 512.
  EXPECT_TRUE(PagesFit(71175, 139, 512, kFloor));
  EXPECT_FALSE(PagesFit(71175, 139, 512, kCeil));
  EXPECT_FALSE(PagesFit(0, 1, 16, kCeil));
  EXPECT_FALSE(PagesFit(16, 0, 16, kFloor));
  EXPECT_FALSE(PagesFit(16, 1, 0, kCeil));
}

TEST(PageTokensTest, FittingRangeIsExactlyTheSizesThatFit) {
  for (PageRule rule : {kCeil, kFloor}) {
    for (std::uint64_t tokens = 1; tokens <= 160; ++tokens) {
      for (std::uint64_t pages = 1; pages <= 40; ++pages) {
        const auto range = FittingPageTokens(tokens, pages, rule);
        const std::uint64_t far = 4 * tokens + 8;  // every size beyond the prompt behaves alike
        bool any = false;
        for (std::uint64_t p = 1; p <= far; ++p) {
          const bool fits = PagesFit(tokens, pages, p, rule);
          any = any || fits;
          const bool in_range = range && range->lo <= p && p <= range->hi;
          ASSERT_EQ(fits, in_range) << PageRuleName(rule) << " tokens " << tokens << " pages " << pages << " P " << p;
        }
        EXPECT_EQ(any, range.has_value()) << tokens << " " << pages;
        if (range && range->hi == PageTokensRange::kUnbounded) {
          EXPECT_EQ(pages, 1u);
        }
      }
    }
  }
  EXPECT_FALSE(FittingPageTokens(10, 9, kCeil).has_value());  // no size puts 10 tokens in 9 pages
  EXPECT_FALSE(FittingPageTokens(10, 9, kFloor).has_value());
  EXPECT_FALSE(FittingPageTokens(0, 1, kCeil).has_value());
}

TEST(PageTokensTest, InfersMooncakesPartialLastPage) {
  const auto records = Records(Lengths(1000, 30000), 512, kCeil);
  const auto guess = InferPageTokens(records);
  ASSERT_TRUE(guess.has_value());
  EXPECT_EQ(guess->page_tokens, 512u);
  EXPECT_EQ(guess->rule, kCeil);
  EXPECT_EQ(guess->records, 1000u);
  EXPECT_EQ(guess->fitting, 1000u);
}

TEST(PageTokensTest, InfersFullPagesOnly) {
  const auto records = Records(Lengths(1000, 30000), 64, kFloor);
  const auto guess = InferPageTokens(records);
  ASSERT_TRUE(guess.has_value());
  EXPECT_EQ(guess->page_tokens, 64u);
  EXPECT_EQ(guess->rule, kFloor);
  // Prompts shorter than a page have no full page: they do not count.
  std::uint64_t counted = 0;
  for (const auto& r : records) counted += r.pages > 0;
  EXPECT_EQ(guess->records, counted);
  EXPECT_EQ(guess->fitting, counted);
}

TEST(PageTokensTest, InfersASizeThatIsNotAPowerOfTwo) {
  // Under one rule the records pin 500 exactly; letting each record pick its rule
  // would have let 455..500 fit them all.
  const auto records = Records(Lengths(2000, 20000), 500, kCeil);
  const auto guess = InferPageTokens(records);
  ASSERT_TRUE(guess.has_value());
  EXPECT_EQ(guess->page_tokens, 500u);
  EXPECT_EQ(guess->fitting, 2000u);
}

TEST(PageTokensTest, PrefersThePowerOfTwoAmongSizesThatFitAsMany) {
  // A few multi-page records fit 505..520 (say): 512 is the one an engine uses.
  const std::vector<TokenPages> records = {{6758, 14}, {7322, 15}, {2290, 5}, {1000, 2}};
  const auto range = FittingPageTokens(6758, 14, kCeil);
  ASSERT_TRUE(range.has_value());
  EXPECT_LT(range->lo, 512u);  // 483..519: sizes below 512 fit too
  const auto guess = InferPageTokens(records);
  ASSERT_TRUE(guess.has_value());
  EXPECT_EQ(guess->page_tokens, 512u);
  EXPECT_EQ(guess->fitting, 4u);
}

TEST(PageTokensTest, SinglePagePromptsGiveTheSmallestPowerOfTwoThatHoldsThem) {
  // Weak evidence: every prompt fits in one page, so any size from the longest
  // prompt up fits; the smallest power of two is the answer, and no bigger.
  std::vector<TokenPages> records;
  for (std::uint64_t l = 1; l <= 100; ++l) records.push_back({l, 1});
  const auto guess = InferPageTokens(records);
  ASSERT_TRUE(guess.has_value());
  EXPECT_EQ(guess->page_tokens, 128u);
  EXPECT_EQ(guess->fitting, 100u);
}

TEST(PageTokensTest, AMajorityIsNeeded) {
  auto a = Records(Lengths(600, 30000, 1), 512, kCeil);
  const auto b = Records(Lengths(400, 30000, 2), 16, kCeil);
  a.insert(a.end(), b.begin(), b.end());
  auto guess = InferPageTokens(a);
  ASSERT_TRUE(guess.has_value());
  EXPECT_EQ(guess->page_tokens, 512u);
  EXPECT_EQ(guess->records, 1000u);
  EXPECT_GE(guess->fitting, 600u);
  EXPECT_LT(guess->fitting, 620u);  // a short 16-token prompt may fit 512 too

  // 40/30/30: no size fits more than half.
  auto c = Records(Lengths(400, 30000, 3), 512, kCeil);
  for (std::uint64_t p : {16u, 64u}) {
    const auto more = Records(Lengths(300, 30000, p), p, kCeil);
    c.insert(c.end(), more.begin(), more.end());
  }
  EXPECT_FALSE(InferPageTokens(c).has_value());
}

// An absurd input_length (1e18 tokens in 2 pages) fits only sizes far beyond any
// engine's block: it does not vote, and alone gives no guess (`kvwatch simulate`
// once divided by the 32-bit truncation of such a size).
TEST(PageTokensTest, SizesBeyondTheLargestPageDoNotVote) {
  const std::vector<TokenPages> absurd = {{1000000000000000000u, 2}};
  EXPECT_FALSE(InferPageTokens(absurd).has_value());
  auto records = Records(Lengths(10, 30000, 4), 512, kCeil);
  records.push_back({1000000000000000000u, 2});
  const auto guess = InferPageTokens(records);
  ASSERT_TRUE(guess.has_value());
  EXPECT_EQ(guess->page_tokens, 512u);
  EXPECT_EQ(guess->records, 10u);  // the absurd one is not evidence
  EXPECT_EQ(guess->fitting, 10u);
  // One page of 5,000,000 tokens: the single-page range is cut at kMaxPageTokens.
  const std::vector<TokenPages> one_page = {{5000000, 1}, {5000000, 1}};
  EXPECT_FALSE(InferPageTokens(one_page).has_value());
  const std::vector<TokenPages> small = {{700, 1}, {700, 1}};
  ASSERT_TRUE(InferPageTokens(small).has_value());
  EXPECT_EQ(InferPageTokens(small)->page_tokens, 1024u);
}

TEST(PageTokensTest, NoTokenCountsNoGuess) {
  EXPECT_FALSE(InferPageTokens({}).has_value());
  const std::vector<TokenPages> no_tokens = {{0, 14}, {0, 3}};
  EXPECT_FALSE(InferPageTokens(no_tokens).has_value());
}

TEST(PageTokensTest, CheckCountsEachSizeUnderItsBetterRule) {
  PageTokensCheck check(16, 512);
  for (const TokenPages& r : Records(Lengths(100, 30000), 512, kCeil)) check.Add(r.tokens, r.pages);
  check.Add(0, 5);  // no token count: not a record of the check
  EXPECT_EQ(check.records(), 100u);
  EXPECT_EQ(check.other_fitting(), 100u);
  EXPECT_LT(check.fitting(), 5u);

  PageTokensCheck floor_check(64, std::nullopt);
  for (const TokenPages& r : Records(Lengths(100, 30000), 64, kFloor)) floor_check.Add(r.tokens, r.pages);
  EXPECT_EQ(floor_check.rule(), kFloor);
  EXPECT_EQ(floor_check.fitting(), floor_check.records());
  EXPECT_EQ(floor_check.other_fitting(), 0u);
}

TEST(PageTokensTest, SettleUsesTheOptionOrTheInferenceOrTheDefault) {
  const auto sample = Records(Lengths(200, 30000), 512, kCeil);
  ReplayOptions o;
  o.policies = "lru";
  auto inferred = ResolveReplayOptions(o);
  ASSERT_TRUE(inferred.ok()) << inferred.error();
  EXPECT_EQ(inferred.value().settings.page_tokens, kDefaultPageTokens);
  SettlePageTokens(&inferred.value(), sample);
  const ResolvedReplay& r = inferred.value();
  EXPECT_EQ(r.settings.page_tokens, 512u);
  EXPECT_EQ(r.settings.page_tokens_source, "inferred");
  EXPECT_EQ(r.settings.inferred_page_tokens, 512u);
  EXPECT_EQ(r.settings.inference_records, 200u);
  // Every figure in tokens follows.
  EXPECT_EQ(r.report.page_tokens, 512u);
  EXPECT_EQ(r.lifetime.page_tokens, 512u);
  ASSERT_TRUE(r.policies.has_value());
  EXPECT_EQ(r.policies->lifetime.page_tokens, 512u);

  o.page_tokens = 16;
  auto given = ResolveReplayOptions(o);
  ASSERT_TRUE(given.ok());
  SettlePageTokens(&given.value(), sample);
  EXPECT_EQ(given.value().settings.page_tokens, 16u);
  EXPECT_EQ(given.value().settings.page_tokens_source, "option");
  EXPECT_EQ(given.value().settings.inferred_page_tokens, 512u);
  EXPECT_EQ(given.value().report.page_tokens, 16u);

  o.page_tokens.reset();
  auto none = ResolveReplayOptions(o);
  ASSERT_TRUE(none.ok());
  SettlePageTokens(&none.value(), {});
  EXPECT_EQ(none.value().settings.page_tokens, kDefaultPageTokens);
  EXPECT_EQ(none.value().settings.page_tokens_source, "default");
  EXPECT_FALSE(none.value().settings.inferred_page_tokens.has_value());
}

TEST(PageTokensTest, WarningOnlyWhenTheRecordsDisagree) {
  ReplaySettings s;
  s.page_tokens = 512;
  s.page_tokens_source = "inferred";
  s.inferred_page_tokens = 512;
  s.token_records = 10;
  s.fitting_records = s.inferred_fitting_records = 10;
  EXPECT_FALSE(PageTokensWarning(s).has_value());
  EXPECT_EQ(PageTokensSetting(s),
            "512 tokens per page (inferred from input_length and pages: 10 of 10 records fit, "
            "last page partial)");
  s.page_tokens = 16;
  s.page_tokens_source = "option";
  s.fitting_records = 0;
  ASSERT_TRUE(PageTokensWarning(s).has_value());
  EXPECT_NE(PageTokensWarning(s)->find("--page-tokens 16 does not fit the records: 0 of 10"), std::string::npos);
  EXPECT_EQ(PageTokensSetting(s), "16 tokens per page (--page-tokens; 0 of 10 records fit, 10 fit 512)");
  s.token_records = 0;
  EXPECT_FALSE(PageTokensWarning(s).has_value());
  EXPECT_EQ(PageTokensSetting(s), "16 tokens per page (--page-tokens)");
}

// The command on files: a fixture writing small traces.
class ReplayPageTokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvwatch_page_tokens_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Mooncake-shaped records: prompts of Lengths(), pages of page_tokens (ceil),
  // page i of every prompt the same id (one shared prefix chain).
  std::string Trace(const std::string& name, std::size_t n, std::uint64_t page_tokens, bool with_tokens,
                    std::uint64_t seed = 7) {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path);
    for (std::uint64_t l : Lengths(n, 8000, seed)) {
      out << "{\"timestamp\": 0, ";
      if (with_tokens) out << "\"input_length\": " << l << ", \"output_length\": 10, ";
      out << "\"hash_ids\": [";
      for (std::uint64_t p = 0; p < CeilDiv(l, page_tokens); ++p) out << (p ? ", " : "") << p;
      out << "]}\n";
    }
    return path;
  }
  testing_support::CommandResult Replay(std::vector<std::string> args) {
    std::vector<std::string> argv = {KVWATCH_BINARY, "replay", "--progress", "never"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, Millis(120000));
  }
  fs::path dir_;
};

TEST_F(ReplayPageTokensTest, InfersThePageSizeAndSaysSo) {
  const std::string trace = Trace("t.jsonl", 300, 512, true);
  auto r = Replay({"--format", "json", "--bytes-per-token", "1000", "--capacities", "10", trace});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_EQ(r.err, "");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS) << r.out;
  simdjson::dom::element s = doc["settings"];
  EXPECT_EQ(uint64_t(s["page_tokens"]), 512u);
  EXPECT_EQ(std::string_view(s["page_tokens_source"]), "inferred");
  EXPECT_EQ(uint64_t(s["page_tokens_check"]["records"]), 300u);
  EXPECT_EQ(uint64_t(s["page_tokens_check"]["fitting"]), 300u);
  EXPECT_EQ(std::string_view(s["page_tokens_check"]["rule"]), "ceil");
  EXPECT_EQ(uint64_t(s["page_tokens_check"]["inferred_page_tokens"]), 512u);
  EXPECT_EQ(uint64_t(s["page_tokens_check"]["inference_records"]), 300u);
  // Bytes and tokens are counted in 512-token pages.
  simdjson::dom::element p = doc["points"].at(0);
  EXPECT_DOUBLE_EQ(double(p["capacity_bytes"]), 10.0 * 512 * 1000);
  EXPECT_DOUBLE_EQ(double(p["reused_tokens"]), double(uint64_t(p["page_hits"])) * 512);

  auto table = Replay({trace});
  ASSERT_TRUE(table.Exited(0)) << table.Describe();
  EXPECT_NE(table.out.find("512 tokens per page (inferred from input_length and pages: 300 of 300 records fit, "
                           "last page partial)"),
            std::string::npos)
      << table.out;
}

TEST_F(ReplayPageTokensTest, AContradictedOptionIsUsedAndWarnedAbout) {
  const std::string trace = Trace("t.jsonl", 300, 512, true);
  auto r = Replay({"--page-tokens", "16", trace});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_NE(r.out.find("16 tokens per page (--page-tokens; 0 of 300 records fit, 300 fit 512)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("kvwatch replay: warning: --page-tokens 16 does not fit the records"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--page-tokens 512"), std::string::npos) << r.err;

  auto json = Replay({"--format", "json", "--page-tokens", "16", trace});
  ASSERT_TRUE(json.Exited(0)) << json.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json.out).get(doc), simdjson::SUCCESS);
  EXPECT_EQ(uint64_t(doc["settings"]["page_tokens"]), 16u);
  EXPECT_EQ(std::string_view(doc["settings"]["page_tokens_source"]), "option");
  EXPECT_EQ(uint64_t(doc["settings"]["page_tokens_check"]["fitting"]), 0u);
  EXPECT_EQ(uint64_t(doc["settings"]["page_tokens_check"]["inferred_fitting"]), 300u);

  auto right = Replay({"--page-tokens", "512", trace});
  ASSERT_TRUE(right.Exited(0)) << right.Describe();
  EXPECT_EQ(right.err, "");
  EXPECT_NE(right.out.find("512 tokens per page (--page-tokens; 300 of 300 records fit, last page partial)"),
            std::string::npos)
      << right.out;
}

TEST_F(ReplayPageTokensTest, WithoutTokenCountsTheDefaultIsSaid) {
  const std::string trace = Trace("t.jsonl", 50, 512, false);
  auto r = Replay({trace});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("16 tokens per page (the default; no input_length in the records to infer it from)"),
            std::string::npos)
      << r.out;
  auto json = Replay({"--format", "json", trace});
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json.out).get(doc), simdjson::SUCCESS);
  EXPECT_EQ(std::string_view(doc["settings"]["page_tokens_source"]), "default");
  EXPECT_TRUE(doc["settings"]["page_tokens_check"]["inferred_page_tokens"].is_null());
  EXPECT_EQ(uint64_t(doc["settings"]["page_tokens_check"]["records"]), 0u);
}

TEST_F(ReplayPageTokensTest, InferredFromTheFirstRecordsCheckedOnAll) {
  // 1,200 records of 512-token pages, then 2,000 of 16-token pages in a second
  // file: the first batch (1,024 requests) infers 512, the run checks every record.
  const std::string first = Trace("a.jsonl", 1200, 512, true, 11);
  const std::string second = Trace("b.jsonl", 2000, 16, true, 12);
  auto r = Replay({"--format", "json", first, second});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS);
  simdjson::dom::element check = doc["settings"]["page_tokens_check"];
  EXPECT_EQ(uint64_t(doc["settings"]["page_tokens"]), 512u);
  EXPECT_EQ(uint64_t(check["inference_records"]), 1024u);
  EXPECT_EQ(uint64_t(check["records"]), 3200u);
  EXPECT_LT(uint64_t(check["fitting"]), 1600u);
  EXPECT_GE(uint64_t(check["fitting"]), 1200u);
  EXPECT_NE(r.err.find("kvwatch replay: warning: only "), std::string::npos) << r.err;
}

TEST_F(ReplayPageTokensTest, PoliciesCountTokensInTheInferredPages) {
  const std::string trace = Trace("t.jsonl", 200, 512, true);
  auto r = Replay({"--format", "json", "--policy", "lru,vllm", "--capacities", "20", trace});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS);
  simdjson::dom::array runs = doc["policies"]["results"];
  ASSERT_EQ(runs.size(), 2u);
  for (simdjson::dom::element run : runs) {
    EXPECT_DOUBLE_EQ(double(run["reused_tokens"]), double(uint64_t(run["page_hits"])) * 512);
  }
}

TEST(ReplayPageTokensRealTest, MooncakeConversationIs512TokensAPage) {
  const std::string path = std::string(KVWATCH_SHARED_DATA) + "/mooncake/conversation_trace.jsonl";
  if (!fs::exists(path)) GTEST_SKIP() << path << " is absent";
  auto r = RunCommand({KVWATCH_BINARY, "replay", "--progress", "never", "--format", "json", path}, Millis(300000));
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_EQ(r.err, "");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS);
  EXPECT_EQ(uint64_t(doc["settings"]["page_tokens"]), 512u);
  EXPECT_EQ(std::string_view(doc["settings"]["page_tokens_source"]), "inferred");
  const std::uint64_t records = uint64_t(doc["settings"]["page_tokens_check"]["records"]);
  EXPECT_EQ(records, uint64_t(doc["requests"]));
  EXPECT_EQ(uint64_t(doc["settings"]["page_tokens_check"]["fitting"]), records);
}

}  // namespace
}  // namespace kvwatch::agent
