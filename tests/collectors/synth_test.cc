#include "collectors/synth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "collectors/trace_reader.h"
#include "collectors/trace_record.h"

namespace kvwatch::collectors {
namespace {

using ::testing::HasSubstr;

std::vector<SynthRequest> GenerateAll(const SynthOptions& options) {
  std::vector<SynthRequest> out;
  auto result = GenerateSynth(options, [&](const SynthRequest& r) { out.push_back(r); });
  EXPECT_TRUE(result.ok()) << result.error();
  if (result.ok()) {
    EXPECT_EQ(result.value(), out.size());
  }
  return out;
}

bool SameRequest(const curve::Request& a, const curve::Request& b) {
  return a.timestamp_s == b.timestamp_s && a.tenant == b.tenant && a.input_tokens == b.input_tokens &&
         a.output_tokens == b.output_tokens && a.pages == b.pages;
}

double MeanPages(const std::vector<const SynthRequest*>& requests) {
  double sum = 0;
  for (const SynthRequest* r : requests) sum += r->request.pages.size();
  return requests.empty() ? 0 : sum / requests.size();
}

TEST(SynthTest, DefaultOptionsAreValid) { EXPECT_TRUE(ValidateSynthOptions(SynthOptions{}).ok()); }

TEST(SynthTest, SameSeedSameStreamOtherSeedOtherStream) {
  SynthOptions options;
  options.max_requests = 3000;
  options.shift = {.start_s = 20, .end_s = 60};
  const std::vector<SynthRequest> a = GenerateAll(options);
  const std::vector<SynthRequest> b = GenerateAll(options);
  ASSERT_EQ(a.size(), 3000u);
  ASSERT_EQ(b.size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(SameRequest(a[i].request, b[i].request)) << "request " << i;
    ASSERT_EQ(a[i].session, b[i].session);
    ASSERT_EQ(a[i].turn, b[i].turn);
  }
  options.seed = 2;
  const std::vector<SynthRequest> c = GenerateAll(options);
  std::size_t differing = 0;
  for (std::size_t i = 0; i < std::min(a.size(), c.size()); ++i) {
    differing += !SameRequest(a[i].request, c[i].request);
  }
  EXPECT_GT(differing, a.size() / 2);
}

// The stream of seed 1 is pinned (values recorded from this generator on Debian 12):
// a change to the draw order or to a distribution silently changes every documented
// workload, so it must show up here and be deliberate.
TEST(SynthTest, FirstRequestsOfSeedOneArePinned) {
  SynthOptions options;
  options.max_requests = 200;
  const std::vector<SynthRequest> all = GenerateAll(options);
  ASSERT_EQ(all.size(), 200u);
  std::uint64_t pages = 0;
  for (const SynthRequest& r : all) pages += r.request.pages.size();
  EXPECT_EQ(pages, 13562u);
  EXPECT_EQ(all.front().request.timestamp_s, 0.101);
  EXPECT_EQ(all.front().request.tenant, "tenant-3");
  EXPECT_EQ(all.front().session, "o50");
  EXPECT_EQ(all.front().request.pages.size(), 25u);
  EXPECT_EQ(all.back().request.timestamp_s, 10.351);
  EXPECT_EQ(all.back().session, "s80");
}

TEST(SynthTest, TimestampsAreNondecreasingWholeMillisecondsAtTheConfiguredRate) {
  SynthOptions options;
  options.duration_s = 300;
  options.rate_per_s = 40;
  const std::vector<SynthRequest> all = GenerateAll(options);
  ASSERT_FALSE(all.empty());
  double last = 0;
  for (const SynthRequest& r : all) {
    const double t = r.request.timestamp_s;
    ASSERT_GE(t, last);
    ASSERT_LT(t, options.duration_s + 0.001);
    EXPECT_EQ(std::llround(t * 1000) / 1000.0, t);
    last = t;
  }
  // Poisson count: mean 12,000, standard deviation ~110.
  EXPECT_NEAR(static_cast<double>(all.size()), 12000.0, 600.0);
}

TEST(SynthTest, SessionChainsGrowByPrefixExtension) {
  SynthOptions options;
  options.duration_s = 200;
  std::map<std::string, const SynthRequest*> last_turn;
  const std::vector<SynthRequest> all = GenerateAll(options);
  std::size_t followups = 0;
  for (const SynthRequest& r : all) {
    ASSERT_FALSE(r.session.empty());
    if (r.session[0] == 'o') {
      EXPECT_EQ(r.turn, 0);
      continue;
    }
    auto it = last_turn.find(r.session);
    if (it == last_turn.end()) {
      EXPECT_EQ(r.turn, 0) << r.session;
    } else {
      const curve::Request& previous = it->second->request;
      ASSERT_EQ(r.turn, it->second->turn + 1) << r.session;
      EXPECT_EQ(r.request.tenant, previous.tenant);
      ASSERT_GT(r.request.pages.size(), previous.pages.size());
      EXPECT_TRUE(std::equal(previous.pages.begin(), previous.pages.end(), r.request.pages.begin()))
          << r.session << " turn " << r.turn << " does not extend turn " << r.turn - 1;
      // The previous answer's pages plus at least one page of the new message.
      const auto answer_pages = previous.output_tokens / options.page_tokens;
      EXPECT_GE(r.request.pages.size(), previous.pages.size() + answer_pages + 1);
      ++followups;
    }
    last_turn[r.session] = &r;
  }
  EXPECT_GT(followups, all.size() / 3);
}

TEST(SynthTest, TokenCountsFollowPageCounts) {
  SynthOptions options;
  options.max_requests = 2000;
  options.page_tokens = 32;
  for (const SynthRequest& r : GenerateAll(options)) {
    EXPECT_EQ(r.request.input_tokens, static_cast<std::int64_t>(r.request.pages.size()) * 32);
    EXPECT_GT(r.request.output_tokens, 0);
    EXPECT_EQ(r.request.output_tokens % 32, 0);
  }
}

TEST(SynthTest, TenantsShareTheirSystemPromptAndNothingElse) {
  SynthOptions options;
  options.duration_s = 120;
  auto generator = SynthGenerator::Create(options);
  ASSERT_TRUE(generator.ok()) << generator.error();
  std::map<std::string, std::vector<curve::PageId>> common;  // common prefix per tenant
  std::map<curve::PageId, std::string> owner;                // tenant of every page id
  SynthRequest r;
  std::size_t one_shots = 0;
  std::size_t total = 0;
  while (generator.value().Next(&r)) {
    ++total;
    one_shots += r.session[0] == 'o';
    const std::vector<curve::PageId>& pages = r.request.pages;
    auto [it, inserted] = common.emplace(r.request.tenant, pages);
    if (!inserted) {
      auto mismatch = std::mismatch(it->second.begin(), it->second.end(), pages.begin(), pages.end());
      it->second.erase(mismatch.first, it->second.end());
    }
    for (curve::PageId page : pages) {
      auto [o, fresh] = owner.emplace(page, r.request.tenant);
      ASSERT_EQ(o->second, r.request.tenant) << "page " << page << " shared across tenants";
    }
  }
  ASSERT_EQ(common.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const std::string name = "tenant-" + std::to_string(i);
    ASSERT_TRUE(common.count(name)) << name;
    const int system_pages = generator.value().system_prompt_pages(i);
    EXPECT_GE(system_pages, options.system_prompt_min_pages);
    EXPECT_LE(system_pages, options.system_prompt_max_pages);
    EXPECT_EQ(common[name].size(), static_cast<std::size_t>(system_pages)) << name;
  }
  EXPECT_NEAR(static_cast<double>(one_shots) / total, options.one_shot_fraction, 0.03);
}

TEST(SynthTest, TenantPopularityFollowsZipf) {
  SynthOptions options;
  options.duration_s = 600;
  options.one_shot_fraction = 1.0;  // every request draws its tenant
  std::map<std::string, double> count;
  const std::vector<SynthRequest> all = GenerateAll(options);
  for (const SynthRequest& r : all) count[r.request.tenant] += 1;
  // Weights 1, 1/2, 1/3, 1/4 over their sum 25/12.
  EXPECT_NEAR(count["tenant-0"] / all.size(), 12.0 / 25, 0.02);
  EXPECT_NEAR(count["tenant-3"] / all.size(), 3.0 / 25, 0.02);
}

TEST(SynthTest, ShiftChangesTheMixOnlyInsideItsInterval) {
  SynthOptions options;
  options.duration_s = 900;
  options.shift = {.start_s = 300, .end_s = 600};
  const std::vector<SynthRequest> all = GenerateAll(options);
  std::vector<const SynthRequest*> before, during, after;
  std::set<std::string> tenants_before, tenants_during, tenants_after;
  for (const SynthRequest& r : all) {
    const double t = r.request.timestamp_s;
    if (t < 300) {
      before.push_back(&r);
      tenants_before.insert(r.request.tenant);
    } else if (t < 600) {
      during.push_back(&r);
      tenants_during.insert(r.request.tenant);
    } else {
      after.push_back(&r);
      tenants_after.insert(r.request.tenant);
    }
  }
  EXPECT_EQ(tenants_before.size(), 4u);
  EXPECT_EQ(tenants_during.size(), 5u);
  EXPECT_TRUE(tenants_during.count("tenant-shift"));
  EXPECT_EQ(tenants_after.size(), 4u);
  EXPECT_FALSE(tenants_after.count("tenant-shift"));
  const double mean_before = MeanPages(before);
  const double mean_during = MeanPages(during);
  const double mean_after = MeanPages(after);
  EXPECT_GT(mean_during, 1.5 * mean_before);
  EXPECT_GT(mean_during, 1.5 * mean_after);
  EXPECT_NEAR(mean_after, mean_before, 0.15 * mean_before);

  // The shift tenant's sessions are longer than the base sessions.
  std::map<std::string, int> turns_shift, turns_base;
  for (const SynthRequest& r : all) {
    if (r.session[0] != 's') continue;
    auto& turns = r.request.tenant == "tenant-shift" ? turns_shift : turns_base;
    turns[r.session] = std::max(turns[r.session], r.turn + 1);
  }
  auto mean_turns = [](const std::map<std::string, int>& turns) {
    double sum = 0;
    for (const auto& [session, n] : turns) sum += n;
    return sum / turns.size();
  };
  EXPECT_GT(mean_turns(turns_shift), 1.4 * mean_turns(turns_base));
}

TEST(SynthTest, NoShiftMeansAStationaryMix) {
  SynthOptions options;
  options.duration_s = 900;
  std::vector<const SynthRequest*> early, late;
  const std::vector<SynthRequest> all = GenerateAll(options);
  for (const SynthRequest& r : all) (r.request.timestamp_s < 450 ? early : late).push_back(&r);
  EXPECT_NEAR(MeanPages(late), MeanPages(early), 0.15 * MeanPages(early));
}

TEST(SynthTest, UnboundedGeneratorKeepsGoing) {
  SynthOptions options;
  options.duration_s = 0;
  options.max_requests = 0;
  auto generator = SynthGenerator::Create(options);
  ASSERT_TRUE(generator.ok()) << generator.error();
  SynthRequest r;
  double last = -1;
  for (int i = 0; i < 30000; ++i) {
    ASSERT_TRUE(generator.value().Next(&r));
    ASSERT_GE(r.request.timestamp_s, last);
    last = r.request.timestamp_s;
  }
  EXPECT_GT(last, 600.0);  // past the default duration: no hidden limit
  EXPECT_EQ(generator.value().generated(), 30000u);
  auto whole = GenerateSynth(options, nullptr);
  ASSERT_FALSE(whole.ok());
  EXPECT_THAT(whole.error(), HasSubstr("duration_s or max_requests"));
}

TEST(SynthTest, LimitsStopTheStreamForGood) {
  SynthOptions options;
  options.max_requests = 10;
  auto generator = SynthGenerator::Create(options);
  ASSERT_TRUE(generator.ok());
  SynthRequest r;
  int n = 0;
  while (generator.value().Next(&r)) ++n;
  EXPECT_EQ(n, 10);
  EXPECT_FALSE(generator.value().Next(&r));

  options.max_requests = 0;
  options.duration_s = 5;
  auto timed = SynthGenerator::Create(options);
  ASSERT_TRUE(timed.ok());
  while (timed.value().Next(&r)) ASSERT_LT(r.request.timestamp_s, 5.0);
  EXPECT_FALSE(timed.value().Next(&r));
}

TEST(SynthTest, InvalidOptionsAreRejectedWithTheFieldName) {
  SynthOptions options;
  options.rate_per_s = 0;
  options.one_shot_fraction = 1.5;
  options.system_prompt_min_pages = 300;
  base::Status status = ValidateSynthOptions(options);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.error(), HasSubstr("rate_per_s"));
  EXPECT_THAT(status.error(), HasSubstr("one_shot_fraction"));
  EXPECT_THAT(status.error(), HasSubstr("system_prompt_min_pages"));
  auto generator = SynthGenerator::Create(options);
  ASSERT_FALSE(generator.ok());
  EXPECT_THAT(generator.error(), HasSubstr("rate_per_s"));

  SynthOptions shift;
  shift.shift = {.start_s = 10, .end_s = 20, .share = -1};
  EXPECT_FALSE(ValidateSynthOptions(shift).ok());
  SynthOptions pages;
  pages.max_session_pages = 1 << 20;
  EXPECT_FALSE(ValidateSynthOptions(pages).ok());
}

TEST(SynthTest, LongSessionsStayWithinMaxSessionPages) {
  SynthOptions options;
  options.max_requests = 5000;
  options.max_session_pages = 300;
  options.mean_session_turns = 100;
  options.active_sessions = 5;
  for (const SynthRequest& r : GenerateAll(options)) {
    ASSERT_LE(r.request.pages.size(), 300u);
  }
}

TEST(SynthTest, JsonLinesReadBackIdentically) {
  SynthOptions options;
  options.max_requests = 3000;
  options.shift = {.start_s = 30, .end_s = 90, .tenant = "odd \"name\"\\\x01"};
  const std::vector<SynthRequest> all = GenerateAll(options);
  std::string text;
  for (const SynthRequest& r : all) AppendSynthJsonLine(r, &text);

  TraceRecordParser parser;
  curve::Request back;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::size_t newline = text.find('\n', line_start);
    ASSERT_NE(newline, std::string::npos);
    const std::string_view line(text.data() + line_start, newline - line_start);
    auto result = parser.Parse(line, &back);
    ASSERT_TRUE(result.ok()) << line << ": " << result.error();
    ASSERT_TRUE(SameRequest(back, all[i].request)) << "line " << i + 1 << ": " << line;
    line_start = newline + 1;
  }
  EXPECT_EQ(line_start, text.size());
  EXPECT_EQ(parser.resolved_unit(), TimestampUnit::kMilliseconds);

  // And through the file reader.
  std::string dir = ::testing::TempDir() + "synth_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string path = dir + "/synth.jsonl";
  std::ofstream(path, std::ios::binary) << text;
  std::size_t index = 0;
  bool all_same = true;
  TraceCallbacks callbacks;
  callbacks.on_request = [&](curve::Request& r) {
    all_same = all_same && index < all.size() && SameRequest(r, all[index].request);
    ++index;
  };
  TraceReaderOptions strict;
  strict.strict = true;
  auto summary = ReadTrace(path, strict, callbacks);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(summary.ok()) << summary.error();
  EXPECT_EQ(index, all.size());
  EXPECT_TRUE(all_same);
}

TEST(SynthTest, JsonLineFormat) {
  SynthRequest r;
  r.request.timestamp_s = 1.234;
  r.request.tenant = "acme";
  r.request.input_tokens = 32;
  r.request.output_tokens = 16;
  r.request.pages = {65537, 65538};
  r.session = "s7";
  r.turn = 2;
  std::string line;
  AppendSynthJsonLine(r, &line);
  EXPECT_EQ(line,
            "{\"timestamp\": 1234, \"input_length\": 32, \"output_length\": 16, \"hash_ids\": [65537, 65538], "
            "\"tenant\": \"acme\", \"session\": \"s7\", \"turn\": 2}\n");
}

std::vector<SynthRequest> GenerateFixed(const SynthOptions& options, const FixedShapeOptions& shape) {
  std::vector<SynthRequest> out;
  auto result = GenerateFixedShape(options, shape, [&](const SynthRequest& r) { out.push_back(r); });
  EXPECT_TRUE(result.ok()) << result.error();
  if (result.ok()) {
    EXPECT_EQ(result.value(), out.size());
  }
  return out;
}

TEST(SynthFixedShapeTest, EvenArrivalsAlternatingOutputsAndOwnPages) {
  SynthOptions options;
  options.rate_per_s = 10;
  options.max_requests = 3000;
  FixedShapeOptions shape;
  shape.prompt_tokens = 500;  // 32 pages, the last partial
  shape.output_tokens = {383, 641};
  shape.even_arrivals = true;
  const std::vector<SynthRequest> all = GenerateFixed(options, shape);
  ASSERT_EQ(all.size(), 3000u);
  std::set<curve::PageId> pages;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const curve::Request& r = all[i].request;
    EXPECT_DOUBLE_EQ(r.timestamp_s, std::round(static_cast<double>(i) * 100.0) / 1000.0) << i;
    EXPECT_EQ(r.input_tokens, 500);
    EXPECT_EQ(r.output_tokens, i % 2 == 0 ? 383 : 641);
    EXPECT_EQ(r.request_class, i % 2 == 0 ? "out383" : "out641");
    EXPECT_EQ(r.tenant, r.request_class);
    ASSERT_EQ(r.pages.size(), 32u);
    for (curve::PageId p : r.pages) EXPECT_TRUE(pages.insert(p).second) << "page " << p << " shared";
    EXPECT_LT(r.pages.back(), std::uint64_t{1} << 53);
  }
  // The lines read back identically, class included.
  std::string text;
  for (const SynthRequest& r : all) AppendSynthJsonLine(r, &text);
  TraceRecordParser parser;
  curve::Request back;
  const std::string first = text.substr(0, text.find('\n'));
  ASSERT_TRUE(parser.Parse(first, &back).ok());
  EXPECT_TRUE(SameRequest(back, all[0].request));
  EXPECT_EQ(back.request_class, "out383");
  EXPECT_THAT(first, HasSubstr("\"class\": \"out383\""));
}

TEST(SynthFixedShapeTest, PoissonArrivalsAtTheRateAndDurationStops) {
  SynthOptions options;
  options.rate_per_s = 20;
  options.duration_s = 500;
  options.max_requests = 0;
  FixedShapeOptions shape;
  const std::vector<SynthRequest> all = GenerateFixed(options, shape);
  // About 10,000 arrivals (sd 100), none at or past the duration, gaps not all equal.
  EXPECT_NEAR(static_cast<double>(all.size()), 10000, 400);
  std::set<double> gaps;
  for (std::size_t i = 1; i < all.size(); ++i) {
    EXPECT_GE(all[i].request.timestamp_s, all[i - 1].request.timestamp_s);
    gaps.insert(all[i].request.timestamp_s - all[i - 1].request.timestamp_s);
  }
  EXPECT_GT(gaps.size(), 50u);
  EXPECT_LT(all.back().request.timestamp_s, 500);
  EXPECT_EQ(all[0].request.output_tokens, 512);
  EXPECT_EQ(all[0].request.pages.size(), 32u);
  // Deterministic: the same seed gives the same stream, another seed another.
  const std::vector<SynthRequest> again = GenerateFixed(options, shape);
  ASSERT_EQ(again.size(), all.size());
  EXPECT_TRUE(SameRequest(again[77].request, all[77].request));
  options.seed = 2;
  const std::vector<SynthRequest> other = GenerateFixed(options, shape);
  EXPECT_FALSE(other.size() == all.size() && SameRequest(other[77].request, all[77].request));
}

TEST(SynthFixedShapeTest, InvalidShapesAreRejectedWithTheFieldName) {
  SynthOptions options;
  options.max_requests = 10;
  FixedShapeOptions shape;
  shape.output_tokens.clear();
  EXPECT_THAT(ValidateFixedShape(options, shape).error(), HasSubstr("output_tokens"));
  shape.output_tokens = {0};
  EXPECT_THAT(ValidateFixedShape(options, shape).error(), HasSubstr("output_tokens"));
  shape.output_tokens = {5};
  shape.prompt_tokens = 0;
  EXPECT_THAT(ValidateFixedShape(options, shape).error(), HasSubstr("prompt_tokens"));
  shape.prompt_tokens = 5;
  options.max_requests = 0;
  options.duration_s = 0;
  auto r = GenerateFixedShape(options, shape, {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error(), HasSubstr("finite"));
}

}  // namespace
}  // namespace kvwatch::collectors
