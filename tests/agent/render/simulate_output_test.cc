// `kvwatch simulate`'s renderings (agent/render/simulate_output.h) on constructed
// results: the SLA scoring, the table, the JSON contract (docs/simulate.md), the
// CSV header and the SVG's well-formedness; and the timeline SVG of `kvwatch
// simulate --timeline` on a `kvwatch synth --shape fixed` trace against the JSON.
#include "agent/render/simulate_output.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "agent/render/text_format.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent {
namespace {

sim::SimSummary Summary(double attainment_gold, double attainment_free, double tokens_per_s) {
  sim::SimSummary s;
  s.simulated_s = 100;
  s.requests = 200;
  s.finished = 190;
  s.rejected = 10;
  s.output_tokens_per_s = tokens_per_s;
  s.requests_per_s = 1.9;
  s.ttft = {0.2, 0.9, 2.5};
  s.itl = {0.02, 0.04, 0.09};
  s.mean_latency = {6.25, 6, 4, 0.5, 4.5, 1.5};
  s.tiers = {{"gold",
              50,
              static_cast<std::uint64_t>(50 * attainment_gold),
              0,
              attainment_gold,
              {0.1, 0.5, 1},
              {0.02, 0.03, 0.05}},
             {"free",
              150,
              static_cast<std::uint64_t>(150 * attainment_free),
              10,
              attainment_free,
              {0.3, 1, 3},
              {0.02, 0.05, 0.1}}};
  s.preemptions = 7;
  s.recomputed_tokens = 12345;
  s.mean_running_blocks = 600;
  s.mean_cached_blocks = 300;
  s.pool_blocks = 1000;
  s.prefix_hit_ratio = 0.4321;
  s.mean_in_system = 12.5;
  s.steps = 4000;
  return s;
}

SimulateResult Result() {
  SimulateResult r;
  SimulateSettings& s = r.settings;
  s.sources = {"trace.jsonl"};
  s.requests = 200;
  s.trace_span_s = 100;
  s.time_model = "coefficients";
  s.time_model_detail = "given with --step-coefficients";
  s.coefficients.fixed_s = 0.01;
  s.coefficients.per_prefill_token_s = 5e-5;
  s.pool_blocks = 1000;
  s.block_tokens = 16;
  s.pool_source = "option";
  s.pool_detail = "given with --pool-blocks";
  s.page_tokens = 16;
  s.page_tokens_source = "inferred";
  s.max_batched_tokens = 8192;
  s.max_running = 256;
  s.queue_timeout_s = std::numeric_limits<double>::infinity();
  s.queue_order = "arrival";
  s.tiers = {{"gold", 1, 0.05}, {"free", 3, 0.1}};
  s.tier_members = {"tenant a", "every other request"};
  s.sla_target = 0.9;
  s.assumptions = {"12 of 200 records have no output_length: 128 output tokens assumed (--output-tokens)"};
  // greedy/lru meets the SLA at 0.5 and 1, not at 2; rate-cap/lru at every load;
  // greedy/vllm at none.
  r.runs = {{"greedy", "lru", 0.5, Summary(1, 0.95, 1000)},   {"greedy", "lru", 1, Summary(0.95, 0.91, 1800)},
            {"greedy", "lru", 2, Summary(0.95, 0.5, 2000)},   {"greedy", "vllm", 0.5, Summary(0.8, 1, 1000)},
            {"greedy", "vllm", 1, Summary(0.99, 0.99, 1800)}, {"greedy", "vllm", 2, Summary(0.5, 0.5, 1900)},
            {"rate-cap", "lru", 2, Summary(0.92, 0.9, 1950)}, {"rate-cap", "lru", 0.5, Summary(1, 1, 1000)},
            {"rate-cap", "lru", 1, Summary(1, 1, 1800)}};
  ScoreSla(&r);
  return r;
}

TEST(SimulateOutputTest, SlaIsMetWhenEveryTierReachesTheTarget) {
  const SimulateResult r = Result();
  EXPECT_TRUE(r.runs[0].meets_sla);
  EXPECT_TRUE(r.runs[1].meets_sla);
  EXPECT_FALSE(r.runs[2].meets_sla);  // free at 0.5
  EXPECT_FALSE(r.runs[3].meets_sla);  // gold at 0.8
  ASSERT_EQ(r.combinations.size(), 3u);
  EXPECT_EQ(r.combinations[0].admission, "greedy");
  EXPECT_EQ(r.combinations[0].policy, "lru");
  EXPECT_EQ(r.combinations[0].max_load_meeting_sla, 1.0);
  EXPECT_EQ(r.combinations[0].first_load_failing_sla, 2.0);
  // Failing at the lowest load: none, even though a higher load meets it.
  EXPECT_FALSE(r.combinations[1].max_load_meeting_sla.has_value());
  EXPECT_EQ(r.combinations[1].first_load_failing_sla, 0.5);
  // Loads given out of order are sorted; the attainment 0.9 exactly meets 0.9.
  EXPECT_EQ(r.combinations[2].max_load_meeting_sla, 2.0);
  EXPECT_FALSE(r.combinations[2].first_load_failing_sla.has_value());
}

TEST(SimulateOutputTest, TableSaysWhatWasAssumedAndTheHighestLoad) {
  const std::string t = FormatSimulateTable(Result());
  EXPECT_NE(t.find("200 requests from trace.jsonl over 100 s at load 1 (2.00 req/s)"), std::string::npos) << t;
  EXPECT_NE(t.find("time model: coefficients: given with --step-coefficients"), std::string::npos) << t;
  EXPECT_NE(t.find("KV pool: 1,000 blocks of 16 tokens per rank (given with --pool-blocks)"), std::string::npos) << t;
  EXPECT_NE(t.find("gold (TTFT <= 1 s, ITL <= 50 ms: tenant a)"), std::string::npos) << t;
  EXPECT_NE(t.find("assumed: 12 of 200 records have no output_length"), std::string::npos) << t;
  EXPECT_NE(t.find("queue timeout none"), std::string::npos) << t;
  EXPECT_NE(t.find("SLA gold"), std::string::npos) << t;
  // KV held: 600 and 300 of 1,000 blocks.
  EXPECT_NE(t.find("60.0%"), std::string::npos) << t;
  EXPECT_NE(t.find("30.0%"), std::string::npos) << t;
  EXPECT_NE(t.find("0.4321"), std::string::npos) << t;
  EXPECT_NE(t.find("  greedy           lru      1 (leaves it at 2)"), std::string::npos) << t;
  EXPECT_NE(t.find("none (fails at 0.5, the lowest load)"), std::string::npos) << t;
  EXPECT_NE(t.find("2 (every load of the sweep meets it)"), std::string::npos) << t;
}

TEST(SimulateOutputTest, JsonCarriesTheContractKeys) {
  const SimulateResult r = Result();
  const std::string text = FormatSimulateJson(r);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(text).get(doc), simdjson::SUCCESS) << text;
  simdjson::dom::element settings = doc["settings"];
  for (const char* key :
       {"sources", "requests", "trace_span_s", "time_model", "pool", "page_tokens", "page_tokens_source",
        "max_batched_tokens", "max_running", "queue_timeout_s", "queue_order", "sla_target", "tiers", "assumptions"}) {
    EXPECT_EQ(settings[key].error(), simdjson::SUCCESS) << key;
  }
  EXPECT_TRUE(settings["queue_timeout_s"].is_null());
  EXPECT_EQ(std::string_view(settings["time_model"]["kind"]), "coefficients");
  EXPECT_DOUBLE_EQ(double(settings["time_model"]["coefficients"]["fixed_s"]), 0.01);
  EXPECT_EQ(uint64_t(settings["pool"]["blocks"]), 1000u);
  EXPECT_EQ(std::string_view(settings["pool"]["source"]), "option");
  EXPECT_TRUE(settings["pool"]["kv_bytes_per_token"].is_null());
  EXPECT_EQ(std::string_view(settings["tiers"].at(0)["name"]), "gold");
  simdjson::dom::array runs = doc["runs"];
  ASSERT_EQ(runs.size(), r.runs.size());
  simdjson::dom::element run = runs.at(0);
  for (const char* key : {"admission",
                          "policy",
                          "load",
                          "requests",
                          "finished",
                          "rejected",
                          "simulated_s",
                          "requests_per_s",
                          "output_tokens_per_s",
                          "ttft_s",
                          "itl_s",
                          "mean_latency_s",
                          "tiers",
                          "meets_sla",
                          "preemptions",
                          "recomputed_tokens",
                          "kv",
                          "prefix_hit_ratio",
                          "mean_in_system",
                          "steps"}) {
    EXPECT_EQ(run[key].error(), simdjson::SUCCESS) << key;
  }
  EXPECT_DOUBLE_EQ(double(run["ttft_s"]["p99"]), 2.5);
  const std::pair<const char*, double> means[] = {{"in_system", 6.25}, {"finished", 6}, {"queue_wait", 4},
                                                  {"prefill", 0.5},    {"ttft", 4.5},   {"decode", 1.5}};
  for (const auto& [key, value] : means) EXPECT_DOUBLE_EQ(double(run["mean_latency_s"][key]), value) << key;
  EXPECT_EQ(uint64_t(run["kv"]["pool_blocks"]), 1000u);
  EXPECT_DOUBLE_EQ(double(run["kv"]["mean_running_blocks"]), 600);
  EXPECT_DOUBLE_EQ(double(run["tiers"].at(1)["attainment"]), 0.95);
  simdjson::dom::array combos = doc["combinations"];
  ASSERT_EQ(combos.size(), 3u);
  EXPECT_DOUBLE_EQ(double(combos.at(0)["max_load_meeting_sla"]), 1);
  EXPECT_TRUE(combos.at(1)["max_load_meeting_sla"].is_null());
  EXPECT_TRUE(combos.at(2)["first_load_failing_sla"].is_null());
}

TEST(SimulateOutputTest, CsvHasOneRowPerRunAndATierColumnEach) {
  const SimulateResult r = Result();
  const std::string csv = FormatSimulateCsv(r);
  std::istringstream in(csv);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header,
            "admission,policy,load,requests,finished,rejected,simulated_s,requests_per_s,output_tokens_per_s,"
            "ttft_p50_s,ttft_p90_s,ttft_p99_s,itl_p50_s,itl_p90_s,itl_p99_s,mean_latency_in_system_s,"
            "mean_latency_finished_s,mean_latency_queue_wait_s,mean_latency_prefill_s,mean_latency_ttft_s,"
            "mean_latency_decode_s,meets_sla,preemptions,recomputed_tokens,pool_blocks,mean_running_blocks,mean_cached_"
            "blocks,prefix_hit_ratio,mean_in_system,steps,"
            "attainment_gold,attainment_free");
  const auto columns = std::count(header.begin(), header.end(), ',');
  std::size_t rows = 0;
  for (std::string line; std::getline(in, line); ++rows) {
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), columns) << line;
  }
  EXPECT_EQ(rows, r.runs.size());
  EXPECT_NE(csv.find("\ngreedy,lru,0.5,200,190,10,100,1.9,1000,0.2,0.9,2.5,0.02,0.04,0.09,6.25,6,4,0.5,4.5,1.5,true,7,"
                     "12345,1000,600,300,0.4321,12.5,4000,1,0.95\n"),
            std::string::npos)
      << csv;
}

// Every element closed in order, every attribute quoted: a small XML check.
bool WellFormed(const std::string& xml, std::string* why) {
  std::vector<std::string> open;
  for (std::size_t at = xml.find('<'); at != std::string::npos; at = xml.find('<', at + 1)) {
    const std::size_t end = xml.find('>', at);
    if (end == std::string::npos) return *why = "unterminated tag", false;
    std::string tag = xml.substr(at + 1, end - at - 1);
    if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) return *why = "odd quotes in <" + tag + ">", false;
    if (tag.find('<') != std::string::npos) return *why = "'<' inside <" + tag + ">", false;
    if (!tag.empty() && tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return *why = "mismatched </" + tag.substr(1) + ">", false;
      open.pop_back();
    } else if (!tag.empty() && tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find(' ')));
    }
  }
  if (!open.empty()) return *why = "unclosed <" + open.back() + ">", false;
  return true;
}

TEST(SimulateOutputTest, SvgIsWellFormedWithALinePerCombinationAndPanel) {
  SimulateResult r = Result();
  r.runs[0].admission = "greedy<&>";  // names are escaped
  ScoreSla(&r);
  const std::string svg = RenderSimulateSvg(r);
  std::string why;
  EXPECT_TRUE(WellFormed(svg, &why)) << why;
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  std::size_t lines = 0;
  for (std::size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++lines;
  EXPECT_EQ(lines, 2 * r.combinations.size());
  EXPECT_NE(svg.find("greedy&lt;&amp;&gt; / lru"), std::string::npos);
  EXPECT_NE(svg.find("target 0.9"), std::string::npos);
}

// The value of attribute `name` in the tag that starts at `at`.
std::string Attribute(const std::string& xml, std::size_t at, const std::string& name) {
  const std::size_t end = xml.find('>', at);
  const std::size_t key = xml.find(" " + name + "=\"", at);
  if (key == std::string::npos || key > end) return "";
  const std::size_t value = key + name.size() + 3;
  return xml.substr(value, xml.find('"', value) - value);
}

TEST(SimulateOutputTest, TimelineSvgCarriesTheSeriesAndMatchesTheJson) {
  using testing_support::Millis;
  using testing_support::RunCommand;
  testing_support::TempDir dir;
  // The paper's homogeneous workload, shorter: 600 requests every 0.1 s.
  auto synth =
      RunCommand({KVWATCH_BINARY, "synth", "--shape", "fixed", "--arrivals", "even", "--rate", "10", "--requests",
                  "600", "--prompt-tokens", "512", "--output-tokens", "512", "-o", dir.Sub("t.jsonl")},
                 Millis(60000));
  ASSERT_TRUE(synth.Exited(0)) << synth.Describe();
  // The fixed shape's flags without --shape fixed, or a shape that does not exist: refused, naming the flag.
  auto chat_even = RunCommand({KVWATCH_BINARY, "synth", "--arrivals", "even", "--requests", "5"}, Millis(60000));
  EXPECT_TRUE(chat_even.Exited(2)) << chat_even.Describe();
  EXPECT_NE(chat_even.err.find("--shape fixed"), std::string::npos) << chat_even.err;
  auto bad_shape = RunCommand({KVWATCH_BINARY, "synth", "--shape", "square", "--requests", "5"}, Millis(60000));
  EXPECT_TRUE(bad_shape.Exited(2)) << bad_shape.Describe();
  EXPECT_NE(bad_shape.err.find("--shape"), std::string::npos) << bad_shape.err;
  std::vector<std::string> argv = {KVWATCH_BINARY,
                                   "simulate",
                                   "--progress",
                                   "never",
                                   dir.Sub("t.jsonl"),
                                   "--step-coefficients",
                                   "fixed=20ms,prefill_token=0.5ms,decode_sequence=0.2ms",
                                   "--pool-blocks",
                                   "2000",
                                   "--admission",
                                   "greedy,rate-cap",
                                   "--policy",
                                   "lru",
                                   "--json",
                                   "--load",
                                   "1",
                                   "--timeline",
                                   dir.Sub("timeline.svg")};
  auto r = RunCommand(argv, Millis(120000));
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS) << r.out;
  const std::string svg = testing_support::ReadFile(dir.Sub("timeline.svg"));
  std::string why;
  ASSERT_TRUE(WellFormed(svg, &why)) << why;
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);

  // One row per run, in the JSON's order, whose sums are the JSON's.
  std::size_t row = 0;
  std::uint64_t greedy_preemptions = 0;
  for (simdjson::dom::element run : doc["runs"].get_array()) {
    std::size_t at = 0;
    for (std::size_t k = 0; k <= row; ++k) at = svg.find("<g data-admission=", k == 0 ? 0 : at + 1);
    ASSERT_NE(at, std::string::npos) << "no row " << row;
    const std::string admission(run["admission"].get_string().value());
    EXPECT_EQ(Attribute(svg, at, "data-admission"), admission);
    EXPECT_EQ(Attribute(svg, at, "data-policy"), "lru");
    EXPECT_EQ(Attribute(svg, at, "data-load"), "1");
    EXPECT_EQ(Attribute(svg, at, "data-steps"), std::to_string(run["steps"].get_uint64().value()));
    EXPECT_EQ(Attribute(svg, at, "data-finished"), std::to_string(run["finished"].get_uint64().value()));
    const std::uint64_t preemptions = run["preemptions"].get_uint64().value();
    EXPECT_EQ(Attribute(svg, at, "data-preemptions"), std::to_string(preemptions));
    if (admission == "greedy") greedy_preemptions = preemptions;
    // The row's series: held and cached blocks, throughput, and preemption bars
    // whose counts add up to the run's preemptions.
    const std::size_t end = svg.find("</g>", at);
    const std::string body = svg.substr(at, end - at);
    for (const char* series : {"class=\"held\"", "class=\"cached\"", "class=\"throughput\""}) {
      EXPECT_NE(body.find(std::string("<polyline ") + series), std::string::npos) << admission << " " << series;
    }
    std::uint64_t bars = 0;
    for (std::size_t b = body.find("<rect class=\"preemptions\""); b != std::string::npos;
         b = body.find("<rect class=\"preemptions\"", b + 1)) {
      bars += std::stoull(Attribute(body, b, "data-count"));
    }
    EXPECT_EQ(bars, preemptions) << admission;
    EXPECT_NE(body.find(Grouped(static_cast<double>(preemptions)) + " preemptions"), std::string::npos)
        << body.substr(0, 400);
    ++row;
  }
  EXPECT_EQ(row, 2u);
  EXPECT_EQ(svg.find("<g data-admission=", svg.rfind("<g data-admission=") + 1), std::string::npos);
  // The workload is far past saturation: greedy preempts, rate-cap does not.
  EXPECT_GT(greedy_preemptions, 0u);
  EXPECT_NE(svg.find("data-admission=\"rate-cap\" data-policy=\"lru\""), std::string::npos);

  // Two loads: the timeline is refused, naming the flag.
  argv.back() = dir.Sub("two.svg");
  argv[argv.size() - 3] = "1,2";
  auto two = RunCommand(argv, Millis(60000));
  EXPECT_TRUE(two.Exited(2)) << two.Describe();
  EXPECT_NE(two.err.find("--timeline"), std::string::npos) << two.err;
}

}  // namespace
}  // namespace kvwatch::agent
