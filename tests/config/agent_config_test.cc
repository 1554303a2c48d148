// Tests of config/agent_config.h: defaults (and that the key table documents them
// truthfully), value syntax, every kind of error naming its key and line, a full
// realistic config, and the reference in docs/configuration.md generated from the key table.
#include "config/agent_config.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/config/testing_config_documents.h"

namespace kvwatch::config {
namespace {

using base::Result;
using testing_support::DocumentFor;

constexpr char kSource[] = "agent.yaml";

AgentConfig MustParse(const std::string& yaml) {
  Result<AgentConfig> config = ParseAgentConfig(yaml, kSource);
  EXPECT_TRUE(config.ok()) << (config.ok() ? "" : config.error()) << "\n--- in:\n" << yaml;
  return config.ok() ? config.value() : AgentConfig{};
}

std::string MustFail(const std::string& yaml) {
  Result<AgentConfig> config = ParseAgentConfig(yaml, kSource);
  EXPECT_FALSE(config.ok()) << "parsed:\n" << yaml;
  return config.ok() ? std::string() : config.error();
}

// Expects an error "agent.yaml:LINE: KEY: ..." whose message contains `what`.
void ExpectError(const std::string& yaml, int line, const std::string& key, const std::string& what) {
  std::string error = MustFail(yaml);
  std::string prefix = std::string(kSource) + ":" + std::to_string(line) + ": " + key + ": ";
  EXPECT_EQ(error.substr(0, prefix.size()), prefix) << error;
  EXPECT_NE(error.find(what), std::string::npos) << "missing \"" << what << "\" in: " << error;
}

// ------------------------------------------------------------------ Defaults

TEST(AgentConfigTest, EmptyDocumentsGiveTheDefaults) {
  for (const char* text : {"", "\n", "# only a comment\n", "---\n", "{}\n"}) {
    EXPECT_EQ(MustParse(text), DefaultAgentConfig()) << "text: " << text;
  }
}

TEST(AgentConfigTest, DefaultsAreTheDocumentedOnes) {
  AgentConfig c = DefaultAgentConfig();
  EXPECT_EQ(c.replica, "");
  EXPECT_EQ(c.model, "");
  EXPECT_FALSE(c.bytes_per_token.has_value());
  EXPECT_EQ(c.tensor_parallel, 1);
  EXPECT_EQ(c.page_tokens, 16);
  EXPECT_EQ(c.engine.max_pages, 1048576u);
  EXPECT_EQ(c.engine.touch_order, curve::TouchOrder::kTailFirst);
  EXPECT_EQ(c.engine.coverage_share, 1.0);
  EXPECT_EQ(c.engine.remembered_evictions, c.engine.max_pages);
  EXPECT_EQ(c.engine.sample_rate, 1.0);
  EXPECT_EQ(c.engine.sample_max_pages, 0u);
  curve::WindowSet windows = {{"5m", 300}, {"1h", 3600}, {"24h", 86400}};
  EXPECT_EQ(c.curve.windows, windows);
  EXPECT_EQ(c.curve.buckets_per_octave, 8u);
  EXPECT_EQ(c.curve.page_hit_targets, (std::vector<double>{0.5, 0.9, 0.95, 0.99}));
  EXPECT_EQ(c.curve.coverage_targets, (std::vector<double>{0.5, 0.9, 0.95, 0.99}));
  EXPECT_TRUE(c.curve.capacities.empty());
  EXPECT_EQ(c.curve.knee_window_min_requests, 100u);
  EXPECT_EQ(c.curve.max_clock_skew_s, 300);
  EXPECT_EQ(c.curve.prefill_seconds, 0);
  EXPECT_EQ(c.web.listen_address, "127.0.0.1");
  EXPECT_EQ(c.web.port, 8477);
  EXPECT_EQ(c.web.refresh_seconds, 5);
  EXPECT_EQ(c.web.max_connections, 1024);
  EXPECT_EQ(c.state.path, "");
  EXPECT_EQ(c.state.interval_seconds, 60);
  EXPECT_FALSE(c.collectors.HasAnyCollector());
  EXPECT_TRUE(c.alerts.enabled);
  EXPECT_EQ(c.alerts.alerter, alerts::AlerterOptions{});  // alerts/'s own defaults

  curve::EngineOptions options = ToEngineOptions(c.engine);
  EXPECT_EQ(options.max_pages, 1048576u);
  EXPECT_EQ(options.remembered_evictions, 1048576u);
  EXPECT_EQ(options.touch_order, curve::TouchOrder::kTailFirst);
}

// The key table is the documentation: every literal default it states must be
// what the parser fills in when the key is absent.
TEST(AgentConfigTest, EveryLiteralDefaultInTheTableIsTheRealDefault) {
  int checked = 0;
  for (const ConfigKey& key : ConfigKeys()) {
    if (!key.default_is_literal) continue;
    // The collectors' defaults are theirs: tests/config/collectors_section_test.cc.
    if (key.path.substr(0, 11) == "collectors.") continue;
    SCOPED_TRACE(std::string(key.path));
    std::string without = DocumentFor(std::string(key.path), std::nullopt);
    std::string with = DocumentFor(std::string(key.path), YAML::Load(std::string(key.default_text)));
    EXPECT_EQ(MustParse(with), MustParse(without)) << "with:\n" << with << "without:\n" << without;
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

TEST(AgentConfigTest, KeyTableIsWellFormed) {
  std::set<std::string> paths;
  for (const ConfigKey& key : ConfigKeys()) {
    std::string path(key.path);
    EXPECT_TRUE(paths.insert(path).second) << "duplicate " << path;
    EXPECT_FALSE(key.description.empty()) << path;
    EXPECT_FALSE(key.default_text.empty()) << path;
    EXPECT_EQ(FindConfigKey(path), &key);
    std::size_t dot = path.rfind('.');
    if (dot == std::string::npos) continue;
    std::string parent = path.substr(0, dot);
    bool item = parent.size() > 2 && parent.substr(parent.size() - 2) == "[]";
    if (item) parent.resize(parent.size() - 2);
    ASSERT_TRUE(paths.count(parent)) << path << ": parent " << parent << " missing or later";
    EXPECT_EQ(FindConfigKey(parent)->type, item ? ConfigType::kMapList : ConfigType::kMap) << path;
  }
  EXPECT_EQ(FindConfigKey("nope"), nullptr);
}

// ------------------------------------------------------------------ Value syntax

TEST(AgentConfigTest, DurationsAcceptUnitsAndCompounds) {
  struct Case {
    const char* text;
    double seconds;
  };
  for (Case c :
       {Case{"30s", 30}, Case{"5m", 300}, Case{"1h", 3600}, Case{"24h", 86400}, Case{"1h30m", 5400},
        Case{"250ms", 0.25}, Case{"1.5h", 5400}, Case{"2d", 172800}, Case{"1m30s500ms", 90.5}, Case{"'90s'", 90}}) {
    AgentConfig config = MustParse(std::string("state:\n  interval: ") + c.text + "\n");
    EXPECT_DOUBLE_EQ(config.state.interval_seconds, c.seconds) << c.text;
  }
}

TEST(AgentConfigTest, BadDurationsNameTheKey) {
  for (const char* text : {"5", "5x", "m5", "''", "-5m", "5 m", "1h30", "h", "1..5s", "[5m]"}) {
    SCOPED_TRACE(text);
    ExpectError(std::string("state:\n  interval: ") + text + "\n", 2, "state.interval",
                "expected a duration such as 250ms, 30s or 1h30m");
  }
  ExpectError("state:\n  interval: 0s\n", 2, "state.interval", "expected a duration > 0");
}

TEST(AgentConfigTest, SizesAcceptBinaryAndDecimalUnits) {
  struct Case {
    const char* text;
    std::uint64_t bytes;
  };
  for (Case c :
       {Case{"1048576", 1048576}, Case{"64KiB", 65536}, Case{"1MiB", 1048576}, Case{"1 MiB", 1048576},
        Case{"2KB", 2000}, Case{"1GiB", 1u << 30}, Case{"100B", 100}, Case{"1.5MiB", 1572864}, Case{"2e3", 2000}}) {
    AgentConfig config = MustParse(std::string("bytes_per_token: ") + c.text + "\n");
    EXPECT_EQ(config.bytes_per_token, std::optional<std::uint64_t>(c.bytes)) << c.text;
  }
  AgentConfig big = MustParse("bytes_per_token: 320KiB\n");
  EXPECT_EQ(big.bytes_per_token, std::optional<std::uint64_t>(327680));
}

TEST(AgentConfigTest, BadSizesNameTheKey) {
  // Ranges: tests/config/collectors_section_test.cc (collectors.trace_files[].max_line_bytes).
  for (const char* text : {"0.5B", "1Mi", "-1", "MiB", "99999999999999999999", "16EiB"}) {
    SCOPED_TRACE(text);
    ExpectError(std::string("bytes_per_token: ") + text + "\n", 1, "bytes_per_token", "expected a size");
  }
  ExpectError("bytes_per_token: 0\n", 1, "bytes_per_token", "expected a size from 1");
}

TEST(AgentConfigTest, WindowsAreSortedAndKeepTheirNames) {
  AgentConfig config = MustParse("curve:\n  windows: [24h, 5m, 1h30m, 90s]\n");
  std::vector<curve::Window> expected = {{"90s", 90}, {"5m", 300}, {"1h30m", 5400}, {"24h", 86400}};
  EXPECT_EQ(std::vector<curve::Window>(config.curve.windows.begin(), config.curve.windows.end()), expected);
  EXPECT_EQ(config.curve.windows.Seconds(), (std::vector<double>{90, 300, 5400, 86400}));
  EXPECT_EQ(config.curve.windows.Find("1h30m"), 2u);
  EXPECT_EQ(config.curve.windows.FindSeconds(300), 1u);
  EXPECT_FALSE(config.curve.windows.Find("1h"));
}

TEST(AgentConfigTest, TargetsAndCapacitiesAreSorted) {
  AgentConfig config = MustParse(
      "curve:\n  page_hit_targets: [0.99, 0.5, 1]\n  coverage_targets: []\n"
      "  capacities: [5000, 100, 2000]\n");
  EXPECT_EQ(config.curve.page_hit_targets, (std::vector<double>{0.5, 0.99, 1}));
  EXPECT_TRUE(config.curve.coverage_targets.empty());
  EXPECT_EQ(config.curve.capacities, (std::vector<std::uint64_t>{100, 2000, 5000}));
}

TEST(AgentConfigTest, RememberedEvictionsFollowsMaxPagesUnlessSet) {
  AgentConfig follows = MustParse("engine:\n  max_pages: 5000\n");
  EXPECT_EQ(follows.engine.remembered_evictions, 5000u);
  AgentConfig unlimited = MustParse("engine:\n  max_pages: 5000\n  remembered_evictions: 0\n");
  EXPECT_EQ(unlimited.engine.remembered_evictions, 0u);
  EXPECT_EQ(ToEngineOptions(unlimited.engine).remembered_evictions, 0u);
  AgentConfig before = MustParse("engine:\n  remembered_evictions: 7\n  max_pages: 5000\n");
  EXPECT_EQ(before.engine.remembered_evictions, 7u);
}

TEST(AgentConfigTest, EmptyValuesMeanEmptyStringsListsAndMaps) {
  AgentConfig config = MustParse("replica:\nstate:\ncurve:\n  capacities: ~\nalerts:\n  webhooks:\n");
  EXPECT_EQ(config, DefaultAgentConfig());
  AgentConfig synth = MustParse("collectors:\n  synth:\n");
  EXPECT_TRUE(synth.collectors.HasAnyCollector());
  ExpectError("web:\n  port:\n", 2, "web.port", "got no value");
}

// ------------------------------------------------------------------ Errors

TEST(AgentConfigTest, UnknownTopLevelKeyNamesKeyAndLine) {
  ExpectError("replica: r1\n\nwebb:\n  port: 1\n", 3, "webb",
              "unknown key; expected one of: replica, model_label, model");
}

TEST(AgentConfigTest, UnknownKeyInsideAListItemGivesItsFullPath) {
  ExpectError(
      "collectors:\n"
      "  trace_files:\n"
      "    - name: a\n"
      "      paths: [x]\n"
      "    - name: b\n"
      "      paths: [y]\n"
      "      path: z\n",
      7, "collectors.trace_files[1].path", "unknown key; expected one of: name, paths, start_at");
  ExpectError("engine:\n  max_page: 10\n", 2, "engine.max_page", "unknown key");
}

TEST(AgentConfigTest, WrongTypesNameKeyAndLine) {
  ExpectError("web:\n  port: \"8477\"\n", 2, "web.port",
              "expected an integer 0 to 65535, got the quoted string \"8477\"");
  ExpectError("web:\n  port: http\n", 2, "web.port", "got \"http\"");
  ExpectError("page_tokens: 1.5\n", 1, "page_tokens", "expected an integer 1 to 2147483647");
  ExpectError("curve:\n  windows: 5m\n", 2, "curve.windows", "expected a list of durations");
  ExpectError("engine: 5\n", 1, "engine", "expected a map, got \"5\"");
  ExpectError("replica: [a, b]\n", 1, "replica", "expected a string, got a list");
  ExpectError("alerts:\n  enabled: maybe\n", 2, "alerts.enabled", "expected true or false");
  ExpectError("collectors:\n  trace_files:\n    - just-a-string\n", 3, "collectors.trace_files[0]", "expected a map");
  ExpectError("collectors:\n  trace_files:\n    name: a\n", 3, "collectors.trace_files", "expected a list of maps");
  ExpectError("- a\n- b\n", 1, "(top level)", "expected a map of keys");
}

TEST(AgentConfigTest, OutOfRangeValuesNameKeyAndLine) {
  ExpectError("web:\n  port: 70000\n", 2, "web.port", "0 to 65535");
  ExpectError("web:\n  port: -1\n", 2, "web.port", "0 to 65535");
  ExpectError("web:\n  refresh_seconds: 0\n", 2, "web.refresh_seconds", "1 to 2147483647");
  ExpectError("web:\n  max_connections: 0\n", 2, "web.max_connections", "1 to 1048576");
  ExpectError("web:\n  max_connections: 2000000\n", 2, "web.max_connections", "1 to 1048576");
  ExpectError("web:\n  listen_address: ''\n", 2, "web.listen_address", "expected an address");
  ExpectError("page_tokens: 0\n", 1, "page_tokens", "1 to 2147483647");
  ExpectError("tensor_parallel: 0\n", 1, "tensor_parallel", "1 to 2147483647");
  ExpectError("engine:\n  max_pages: 0\n", 2, "engine.max_pages", "1 to 2147483648");
  ExpectError("engine:\n  max_pages: 2147483649\n", 2, "engine.max_pages", "1 to 2147483648");
  ExpectError("engine:\n  coverage_share: 0\n", 2, "engine.coverage_share", "in (0, 1]");
  ExpectError("engine:\n  coverage_share: 1.01\n", 2, "engine.coverage_share", "in (0, 1]");
  ExpectError("engine:\n  touch_order: tail_first\n", 2, "engine.touch_order", "one of tail-first, head-first");
  ExpectError("engine:\n  remembered_evictions: -1\n", 2, "engine.remembered_evictions", ">= 0");
  ExpectError("engine:\n  sample_rate: 0\n", 2, "engine.sample_rate", "in (0, 1]");
  ExpectError("engine:\n  sample_rate: 1.5\n", 2, "engine.sample_rate", "in (0, 1]");
  ExpectError("engine:\n  sample_rate: -0.1\n", 2, "engine.sample_rate", "in (0, 1]");
  ExpectError("engine:\n  sample_rate: .nan\n", 2, "engine.sample_rate", "in (0, 1]");
  ExpectError("engine:\n  sample_rate: often\n", 2, "engine.sample_rate", "in (0, 1]");
  ExpectError("engine:\n  sample_max_pages: -1\n", 2, "engine.sample_max_pages", "0 to 2147483648");
  ExpectError("engine:\n  sample_max_pages: 1.5\n", 2, "engine.sample_max_pages", "0 to 2147483648");
  ExpectError("engine:\n  sample_max_pages: 2147483649\n", 2, "engine.sample_max_pages", "0 to 2147483648");
  ExpectError("curve:\n  buckets_per_octave: 3\n", 2, "curve.buckets_per_octave", "4 to 64");
  ExpectError("curve:\n  buckets_per_octave: 65\n", 2, "curve.buckets_per_octave", "4 to 64");
  ExpectError("curve:\n  knee_sensitivity: 0\n", 2, "curve.knee_sensitivity", "> 0");
  ExpectError("curve:\n  knee_sensitivity: .nan\n", 2, "curve.knee_sensitivity", "> 0");
  ExpectError("curve:\n  prefill_seconds: -0.1\n", 2, "curve.prefill_seconds", ">= 0");
  ExpectError("curve:\n  prefill_seconds: .nan\n", 2, "curve.prefill_seconds", ">= 0");
  ExpectError("curve:\n  prefill_seconds: .inf\n", 2, "curve.prefill_seconds", ">= 0");
  ExpectError("curve:\n  prefill_seconds: 1e400\n", 2, "curve.prefill_seconds", ">= 0");
  ExpectError("curve:\n  prefill_seconds: 2s\n", 2, "curve.prefill_seconds", ">= 0");
  ExpectError("curve:\n  max_clock_skew: 0s\n", 2, "curve.max_clock_skew", "a duration > 0");
  ExpectError("curve:\n  max_clock_skew: -5m\n", 2, "curve.max_clock_skew", "a duration");
  ExpectError("curve:\n  max_clock_skew: 300\n", 2, "curve.max_clock_skew", "a duration");
  ExpectError("curve:\n  s3fifo_promotion_hits: 4\n", 2, "curve.s3fifo_promotion_hits", "1 to 3");
  ExpectError("curve:\n  page_hit_targets:\n    - 0.5\n    - 1.5\n", 4, "curve.page_hit_targets[1]", "in (0, 1]");
  ExpectError("curve:\n  coverage_targets: [0.9, 0.9]\n", 2, "curve.coverage_targets[1]",
              "duplicate of curve.coverage_targets[0]");
  ExpectError("curve:\n  windows: []\n", 2, "curve.windows", "at least one window, got an empty list");
  ExpectError("curve:\n  windows: [5m, 1h, 60m]\n", 2, "curve.windows[2]", "the same duration as curve.windows[1]");
  ExpectError("curve:\n  capacities: [0]\n", 2, "curve.capacities[0]", ">= 1");
  ExpectError("curve:\n  capacities: [10, 10]\n", 2, "curve.capacities[1]", "duplicate");
  ExpectError("curve:\n  capacities:\n    - 100\n    - 2000\nengine:\n  max_pages: 1000\n", 4, "curve.capacities[1]",
              "beyond engine.max_pages (1000)");
}

// collectors.* values: tests/config/collectors_section_test.cc. Here, the
// section's shape.
TEST(AgentConfigTest, CollectorsSectionShapeIsChecked) {
  ExpectError("collectors:\n  synth: 5\n", 2, "collectors.synth", "expected a map");
  ExpectError("collectors:\n  kv_events:\n    - name: k\n      name: j\n", 4, "collectors.kv_events[0].name",
              "duplicate key");
  ExpectError("collectors:\n  synth:\n    rates: 5\n", 3, "collectors.synth.rates", "unknown key");
  ExpectError("collectors:\n  kv_events: [5]\n", 2, "collectors.kv_events[0]", "expected a map");
  AgentConfig c = MustParse("collectors:\n  trace_files: []\n");
  EXPECT_FALSE(c.collectors.HasAnyCollector());
  c = MustParse(
      "collectors:\n  trace_files: [{name: a, paths: [x]}]\n  kv_events: [{name: b, endpoints: [tcp://h:1]}]\n");
  EXPECT_EQ(c.collectors.configured, 2u);
  EXPECT_EQ(
      c,
      MustParse(
          "collectors:\n  trace_files: [{name: a, paths: [x]}]\n  kv_events: [{name: b, endpoints: [tcp://h:1]}]\n"));
  EXPECT_NE(
      c,
      MustParse(
          "collectors:\n  trace_files: [{name: c, paths: [x]}]\n  kv_events: [{name: b, endpoints: [tcp://h:1]}]\n"));
}

TEST(AgentConfigTest, UrlListsAreChecked) {
  ExpectError("alerts:\n  alertmanagers: [alertmanager:9093]\n", 2, "alerts.alertmanagers[0]", "http:// or https://");
  ExpectError("alerts:\n  webhooks: ['https://a b']\n", 2, "alerts.webhooks[0]", "URL");
}

TEST(AgentConfigTest, KvLoadAlertSettingsNameTheKey) {
  ExpectError("alerts:\n  kv_load:\n    fire_threshold: 0\n", 3, "alerts.kv_load.fire_threshold",
              "expected a number > 0");
  ExpectError("alerts:\n  kv_load:\n    fire_threshold: 0.9\n    clear_threshold: 0.95\n", 4,
              "alerts.kv_load.clear_threshold", "at most fire_threshold (0.9)");
  ExpectError("alerts:\n  kv_load:\n    for: soon\n", 3, "alerts.kv_load.for", "");
  ExpectError("alerts:\n  kv_load:\n    min_requests: -1\n", 3, "alerts.kv_load.min_requests", "");
  ExpectError("alerts:\n  kv_load:\n    window: 10m\n", 3, "alerts.kv_load.window",
              "expected one of curve.windows (5m, 1h, 24h)");
  ExpectError("alerts:\n  kv_load:\n    hold: 10m\n", 3, "alerts.kv_load.hold", "");
  EXPECT_EQ(MustParse("curve:\n  windows: [1m, 1h]\nalerts:\n  kv_load:\n    window: 1m\n")
                .alerts.alerter.kv_load.window.count(),
            60);
}

TEST(AgentConfigTest, AlertSettingsAreCheckedWhereWritten) {
  ExpectError("alerts:\n  knee_shift:\n    fire_threshold: 0.2\n    clear_threshold: 0.3\n", 4,
              "alerts.knee_shift.clear_threshold", "at most fire_threshold (0.2)");
  ExpectError("alerts:\n  over_capacity:\n    fire_threshold: 0\n", 3, "alerts.over_capacity.fire_threshold",
              "expected a number > 0");
  ExpectError("alerts:\n  drift:\n    clear_threshold: -1\n", 3, "alerts.drift.clear_threshold",
              "expected a number >= 0");
  ExpectError("alerts:\n  over_capacity:\n    target: hits\n", 3, "alerts.over_capacity.target",
              "one of page_hit, request_coverage");
  ExpectError("alerts:\n  rate_shift:\n    for: 1.5s\n", 3, "alerts.rate_shift.for", "a whole number of seconds >= 0");
  ExpectError("alerts:\n  short_window: 0s\n", 2, "alerts.short_window", "a whole number of seconds >= 1");
  ExpectError("alerts:\n  short_window: 2h\n", 2, "alerts.short_window", "expected one of curve.windows (5m, 1h, 24h)");
  ExpectError("alerts:\n  baseline_window: 1h\n", 2, "alerts.baseline_window",
              "must be longer than alerts.short_window (3600s)");
  ExpectError("curve:\n  windows: [1m, 10m]\nalerts:\n  short_window: 1m\n  baseline_window: 1h\n", 5,
              "alerts.baseline_window", "expected one of curve.windows (1m, 10m)");
  // The default windows need not be curves: those detectors then have no data.
  AgentConfig c = MustParse("curve:\n  windows: [1m, 10m]\n");
  EXPECT_EQ(c.alerts.alerter.short_window, std::chrono::seconds(3600));
  AgentConfig short_ones = MustParse(
      "curve:\n  windows: [20s, 2m]\nalerts:\n  short_window: 20s\n  baseline_window: 2m\n"
      "  knee_shift: {for: 2s}\n");
  EXPECT_EQ(short_ones.alerts.alerter.short_window, std::chrono::seconds(20));
  EXPECT_EQ(short_ones.alerts.alerter.baseline_window, std::chrono::seconds(120));
  EXPECT_EQ(short_ones.alerts.alerter.knee_shift.rule.for_duration, std::chrono::seconds(2));
  EXPECT_EQ(WorkingSetTargetName(WorkingSetTarget::kRequestCoverage), "request_coverage");
}

// yaml-cpp 0.7 never ends on a ',' where a block node is expected (it builds
// nodes until memory runs out; found by agent_config_fuzz): an error naming the
// line instead.
TEST(AgentConfigTest, YamlThatNeverEndsInYamlCppIsAnError) {
  const std::pair<const char*, int> cases[] = {
      {",\n", 1}, {"replica: a\n---\n,\n", 3}, {"# kvwatch\n    ,in_requests: 1000\n", 2}, {"\"x\" ,\n", 1}};
  for (const auto& [text, line] : cases) {
    EXPECT_EQ(MustFail(text), "agent.yaml:" + std::to_string(line) +
                                  ": invalid YAML: the parser does not end here (a ',' outside [ ] or { }?)");
  }
  EXPECT_EQ(MustParse("replica: \"a, b\"\ncurve: {windows: [5m, 1h]}\n").replica, "a, b");
}

TEST(AgentConfigTest, DuplicateKeysAreErrors) {
  ExpectError("web:\n  port: 1\n  port: 2\n", 3, "web.port", "duplicate key");
}

TEST(AgentConfigTest, AtMostOneModelSourceAndTheSecondIsNamed) {
  ExpectError("model: llama-3-70b\npage_tokens: 16\nbytes_per_token: 1000\n", 3, "bytes_per_token",
              "at most one of model, model_config and bytes_per_token may be set; model is "
              "already set");
  ExpectError("model_config: /m/config.json\nmodel: llama-3-8b\n", 2, "model", "model_config is already set");
  // The empty default is not a source.
  AgentConfig config = MustParse("model: ''\nmodel_config: /m/config.json\n");
  EXPECT_EQ(config.model_config, "/m/config.json");
}

TEST(AgentConfigTest, ModelKeysAreValidated) {
  ExpectError("model: llama-9\n", 1, "model", "llama-3-70b");  // the error lists the presets
  ExpectError("model: llama-3-70b\nkv_dtype: int3\n", 2, "kv_dtype", "int3");
  ExpectError("model: llama-3-70b\ntensor_parallel: 3\n", 2, "tensor_parallel", "3");
  ExpectError("kv_dtype: fp8\n", 1, "kv_dtype", "applies to model or model_config");
  ExpectError("bytes_per_token: 1000\ntensor_parallel: 2\n", 2, "tensor_parallel", "does not apply to bytes_per_token");
  AgentConfig config = MustParse("model: Llama-3-70B\nkv_dtype: fp8\ntensor_parallel: 16\n");
  EXPECT_EQ(config.model, "Llama-3-70B");
  EXPECT_EQ(config.kv_dtype, "fp8");
  EXPECT_EQ(config.tensor_parallel, 16);
  EXPECT_EQ(MustParse("model_config: c.json\ntensor_parallel: 3\n").tensor_parallel, 3);
}

TEST(AgentConfigTest, YamlSyntaxErrorsAndExtraDocumentsGiveTheLine) {
  std::string error = MustFail("replica: r\ncurve:\n  windows: [5m, 1h\n");
  EXPECT_EQ(error.rfind("agent.yaml:", 0), 0u) << error;
  EXPECT_NE(error.find("invalid YAML"), std::string::npos) << error;
  ExpectError("replica: a\n---\nreplica: b\n", 3, "(top level)", "one YAML document");
}

// ------------------------------------------------------------------ A full config

const std::string kFullConfig = R"(# kvwatch beside replica 3 of the chat deployment
replica: chat-3
model_label: llama-3-70b-instruct
model: llama-3-70b
kv_dtype: fp8
tensor_parallel: 4
page_tokens: 16

engine:
  max_pages: 2000000
  touch_order: head-first
  coverage_share: 0.9
  remembered_evictions: 0
  sample_rate: 0.1
  sample_max_pages: 100000

curve:
  windows: [24h, 5m, 1h30m]
  buckets_per_octave: 16
  page_hit_targets: [0.99, 0.5, 0.8]
  coverage_targets: [0.9]
  capacities: [400000, 120000]
  knee_sensitivity: 1.5
  knee_window_min_requests: 500
  policies: [sglang, priority, workload-aware, arc, s3fifo]
  engine_policy: vllm
  decode_tokens_per_second: 30
  prefill_seconds: 0.25
  policy_priorities: "tenant:gold=2,class:turn2=1"
  s3fifo_promotion_hits: 2
  max_clock_skew: 90s

web:
  listen_address: 0.0.0.0
  port: 18477
  config_file: /etc/kvwatch/web.yml
  refresh_seconds: 10
  max_connections: 64

state:
  path: /var/lib/kvwatch
  interval: 5m

collectors:
)" + std::string(testing_support::kCollectorListsExample) +
                                R"(  synth:
    rate: 20
    seed: 7
    tenants: 8
    sessions: 100
    one_shot_fraction: 0.5
    shift_start: 10m
    shift_end: 20m

alerts:
  enabled: false
  alertmanagers: [http://alertmanager:9093]
  webhooks: ["https://hooks.example.com/kvwatch"]
  resend_interval: 2m
  evaluation_interval: 30s
  timeout: 3s
  short_window: 5m
  baseline_window: 1h30m
  knee_shift:
    enabled: false
    fire_threshold: 0.4
    clear_threshold: 0.2
    min_shift_pages: 64
    min_requests: 1000
    min_baseline_requests: 20000
    for: 30m
  over_capacity:
    enabled: true
    target: request_coverage
    fraction: 0.9
    fire_threshold: 1.1
    clear_threshold: 0.8
    min_requests: 200
    for: 10m
  rate_shift:
    enabled: false
    fire_threshold: 3
    clear_threshold: 2
    min_requests: 100
    for: 20m
  drift:
    enabled: true
    fire_threshold: 12
    clear_threshold: 6
    relearn_after: 2h
    min_requests: 50
    for: 10m
  capacity_miss_share:
    enabled: true
    fire_threshold: 3
    clear_threshold: 2
    share_floor: 0.02
    every_capacity: true
    min_requests: 100
    for: 5m
  kv_load:
    enabled: true
    window: 1h30m
    fire_threshold: 1.2
    clear_threshold: 1.0
    min_requests: 20
    for: 3m

tenants:
  enabled: false
  top_k: 12
  class_top_k: 6
  isolated: true
)";

TEST(AgentConfigTest, FullRealisticConfig) {
  AgentConfig c = MustParse(kFullConfig);
  EXPECT_EQ(c.replica, "chat-3");
  EXPECT_EQ(c.model_label, "llama-3-70b-instruct");
  EXPECT_EQ(c.model, "llama-3-70b");
  EXPECT_EQ(c.model_config, "");
  EXPECT_FALSE(c.bytes_per_token.has_value());
  EXPECT_EQ(c.kv_dtype, "fp8");
  EXPECT_EQ(c.tensor_parallel, 4);
  EXPECT_EQ(c.page_tokens, 16);

  EXPECT_EQ(c.engine.max_pages, 2000000u);
  EXPECT_EQ(c.engine.touch_order, curve::TouchOrder::kHeadFirst);
  EXPECT_EQ(c.engine.coverage_share, 0.9);
  EXPECT_EQ(c.engine.remembered_evictions, 0u);
  EXPECT_EQ(c.engine.sample_rate, 0.1);
  EXPECT_EQ(c.engine.sample_max_pages, 100000u);

  curve::WindowSet windows = {{"5m", 300}, {"1h30m", 5400}, {"24h", 86400}};
  EXPECT_EQ(c.curve.windows, windows);
  EXPECT_EQ(c.curve.buckets_per_octave, 16u);
  EXPECT_EQ(c.curve.page_hit_targets, (std::vector<double>{0.5, 0.8, 0.99}));
  EXPECT_EQ(c.curve.coverage_targets, (std::vector<double>{0.9}));
  EXPECT_EQ(c.curve.capacities, (std::vector<std::uint64_t>{120000, 400000}));
  EXPECT_EQ(c.curve.knee_sensitivity, 1.5);
  EXPECT_EQ(c.curve.knee_window_min_requests, 500u);
  using curve::PolicyKind;
  EXPECT_EQ(c.curve.policies,
            (std::vector<PolicyKind>{PolicyKind::kSglang, PolicyKind::kPriority, PolicyKind::kWorkloadAware,
                                     PolicyKind::kArc, PolicyKind::kS3Fifo}));
  EXPECT_EQ(c.curve.engine_policy, PolicyKind::kVllm);
  EXPECT_EQ(c.curve.CanaryPolicies(),
            (std::vector<PolicyKind>{PolicyKind::kVllm, PolicyKind::kSglang, PolicyKind::kPriority,
                                     PolicyKind::kWorkloadAware, PolicyKind::kArc, PolicyKind::kS3Fifo}));
  EXPECT_EQ(c.curve.decode_tokens_per_second, 30);
  EXPECT_EQ(c.curve.prefill_seconds, 0.25);
  EXPECT_EQ(c.curve.policy_priorities, curve::ParsePriorityRules("tenant:gold=2,class:turn2=1").value());
  EXPECT_EQ(c.curve.s3fifo_promotion_hits, 2u);
  EXPECT_EQ(c.curve.max_clock_skew_s, 90);

  EXPECT_EQ(c.web.listen_address, "0.0.0.0");
  EXPECT_EQ(c.web.port, 18477);
  EXPECT_EQ(c.web.config_file, "/etc/kvwatch/web.yml");
  EXPECT_EQ(c.web.refresh_seconds, 10);
  EXPECT_EQ(c.web.max_connections, 64);
  EXPECT_EQ(c.state.path, "/var/lib/kvwatch");
  EXPECT_EQ(c.state.interval_seconds, 300);

  // collectors.*: tests/config/collectors_section_test.cc reads the same items.
  EXPECT_EQ(c.collectors.configured, 6u);

  EXPECT_FALSE(c.alerts.enabled);
  EXPECT_EQ(c.alerts.alertmanagers, (std::vector<std::string>{"http://alertmanager:9093"}));
  EXPECT_EQ(c.alerts.webhooks, (std::vector<std::string>{"https://hooks.example.com/kvwatch"}));
  // The detectors, straight in the alerter's options.
  using std::chrono::seconds;
  alerts::AlerterOptions a;
  a.short_window = seconds(300);
  a.baseline_window = seconds(5400);
  a.notify.resend_interval = seconds(120);
  a.evaluation_interval = std::chrono::milliseconds(30000);
  a.notify.request_timeout = std::chrono::milliseconds(3000);
  a.capacity_shortfall.working_set = {WorkingSetTarget::kRequestCoverage, 0.9};
  a.knee_shift.enabled = false;
  a.knee_shift.fire_threshold = 0.4;
  a.knee_shift.clear_threshold = 0.2;
  a.knee_shift.min_shift_pages = 64;
  a.knee_shift.min_short_window_requests = 1000;
  a.knee_shift.min_baseline_window_requests = 20000;
  a.knee_shift.rule.for_duration = seconds(1800);
  a.capacity_shortfall.fire_threshold = 1.1;
  a.capacity_shortfall.clear_threshold = 0.8;
  a.capacity_shortfall.min_short_window_requests = 200;
  a.capacity_shortfall.rule.for_duration = seconds(600);
  for (alerts::RateShiftOptions* r : {&a.eviction_rate_shift, &a.rejection_rate_shift, &a.preemption_rate_shift}) {
    r->enabled = false;
    r->fire_threshold = 3;
    r->clear_threshold = 2;
    r->min_short_window_requests = 100;
    r->rule.for_duration = seconds(1200);
  }
  alerts::ChangeTestOptions& drift = a.change_tests.at(0);
  drift.fire_threshold = 12;
  drift.clear_threshold = 6;
  drift.relearn_after = seconds(7200);
  drift.min_short_window_requests = 50;
  drift.rule.for_duration = seconds(600);
  alerts::CapacityMissShareOptions& miss = a.capacity_miss_share;
  miss.fire_threshold = 3;
  miss.clear_threshold = 2;
  miss.share_floor = 0.02;
  miss.every_capacity = true;
  miss.min_short_window_requests = 100;
  miss.rule.for_duration = seconds(300);
  alerts::KvLoadOptions& load = a.kv_load;
  load.window = seconds(5400);
  load.fire_threshold = 1.2;
  load.clear_threshold = 1.0;
  load.min_short_window_requests = 20;
  load.rule.for_duration = seconds(180);
  EXPECT_EQ(c.alerts.alerter, a);
  EXPECT_EQ(c.alerts.alerter.rejection_rate_shift.rate_floor_per_second, 0.05);  // its own floor
  curve::TenantOptions t;
  t.enabled = false;
  t.top_k = 12;
  t.class_top_k = 6;
  t.isolated = true;
  EXPECT_EQ(c.tenants, t);
}

TEST(AgentConfigTest, TenantsNeedTheExactEngine) {
  // Not written: off with a sampled engine, on with the exact one.
  EXPECT_FALSE(MustParse("engine: {sample_rate: 0.5}\n").tenants.enabled);
  EXPECT_FALSE(MustParse("engine: {sample_max_pages: 1000}\n").tenants.enabled);
  EXPECT_TRUE(MustParse("").tenants.enabled);
  // Written: an error naming the key.
  ExpectError("engine: {sample_rate: 0.5}\ntenants:\n  enabled: true\n", 3, "tenants.enabled",
              "tenants need the exact engine");
  ExpectError("tenants:\n  top_k: 0\n", 2, "tenants.top_k", "");
  ExpectError("tenants:\n  class_top_k: 255\n", 2, "tenants.class_top_k", "");
  ExpectError("alerts:\n  capacity_miss_share:\n    share_floor: 2\n", 3, "alerts.capacity_miss_share.share_floor",
              "in [0, 1]");
  ExpectError("alerts:\n  capacity_miss_share:\n    fire_threshold: 1\n    clear_threshold: 1.5\n", 4,
              "alerts.capacity_miss_share.clear_threshold", "at most fire_threshold");
}

// The full example exercises every key of the table, so no described key is left
// without a parser (that would be an "internal error" above).
void CollectPaths(const YAML::Node& node, const std::string& pattern, std::set<std::string>* out) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      std::string child = pattern.empty() ? kv.first.Scalar() : pattern + "." + kv.first.Scalar();
      out->insert(child);
      CollectPaths(kv.second, child, out);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) {
      if (item.IsMap()) CollectPaths(item, pattern + "[]", out);
    }
  }
}

TEST(AgentConfigTest, FullConfigCoversEveryKeyOfTheTable) {
  std::set<std::string> written;
  CollectPaths(YAML::Load(kFullConfig), "", &written);
  for (const ConfigKey& key : ConfigKeys()) {
    std::string path(key.path);
    if (path == "model_config" || path == "bytes_per_token") continue;  // exclusive with model
    EXPECT_TRUE(written.count(path)) << path << " is not in the full example";
  }
  AgentConfig other = MustParse("model_config: /m/config.json\n");
  EXPECT_EQ(other.model_config, "/m/config.json");
  EXPECT_EQ(MustParse("bytes_per_token: 4096\n").bytes_per_token, std::optional<std::uint64_t>(4096));
}

// ------------------------------------------------------------------ Files

TEST(AgentConfigTest, LoadAgentConfigFileUsesThePathAsSource) {
  std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "agent_config_test";
  std::filesystem::create_directories(dir);
  std::string path = (dir / "agent.yaml").string();
  {
    std::ofstream out(path);
    out << "replica: r7\nweb:\n  port: 99999\n";
  }
  Result<AgentConfig> bad = LoadAgentConfigFile(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().rfind(path + ":3: web.port: ", 0), 0u) << bad.error();
  {
    std::ofstream out(path);
    out << "replica: r7\n";
  }
  Result<AgentConfig> good = LoadAgentConfigFile(path);
  ASSERT_TRUE(good.ok()) << good.error();
  EXPECT_EQ(good.value().replica, "r7");
  Result<AgentConfig> missing = LoadAgentConfigFile((dir / "absent.yaml").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("absent.yaml: cannot open"), std::string::npos) << missing.error();
  std::filesystem::remove_all(dir);
}

// A path naming a directory or a device is an error that says so: not an empty
// (all defaults) document, and not a read without end.
TEST(AgentConfigTest, LoadAgentConfigFileRefusesDirectoriesAndEndlessFiles) {
  Result<AgentConfig> dir = LoadAgentConfigFile(testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.error().find("the agent config is a directory"), std::string::npos) << dir.error();
  Result<AgentConfig> zero = LoadAgentConfigFile("/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error(), "/dev/zero: the agent config is larger than 16 MiB (not a config file?)");
}

// ------------------------------------------------------------------ The reference

TEST(AgentConfigTest, ReferenceRendersEveryKeyOnce) {
  std::string markdown = ConfigReferenceMarkdown();
  ASSERT_FALSE(markdown.empty());
  EXPECT_EQ(markdown.back(), '\n');
  EXPECT_EQ(markdown.rfind("| key | type | default | meaning |\n", 0), 0u);
  for (const ConfigKey& key : ConfigKeys()) {
    std::string row = "| `" + std::string(key.path) + "` | " + std::string(ConfigTypeName(key.type)) + " | ";
    std::size_t at = markdown.find(row);
    EXPECT_NE(at, std::string::npos) << row;
    EXPECT_EQ(markdown.find(row, at + 1), std::string::npos) << row;
  }
  EXPECT_NE(markdown.find("| `web.port` | integer | `8477` |"), std::string::npos);
  EXPECT_NE(markdown.find("| `curve.windows` | list of durations | `[\"5m\", \"1h\", \"24h\"]` |"), std::string::npos);
}

constexpr char kBegin[] = "<!-- config-reference:begin -->";
constexpr char kEnd[] = "<!-- config-reference:end -->";

// docs/configuration.md holds ConfigReferenceMarkdown() between the marker
// lines. Run with KVWATCH_UPDATE_CONFIG_REFERENCE=1 to rewrite that section in place.
TEST(AgentConfigTest, DocsHoldTheGeneratedReference) {
  const std::string readme_path = std::string(KVWATCH_SOURCE_DIR) + "/docs/configuration.md";
  std::ifstream in(readme_path, std::ios::binary);
  ASSERT_TRUE(in) << "cannot open " << readme_path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string readme = buffer.str();
  const std::string how =
      "Regenerate it: run this test with KVWATCH_UPDATE_CONFIG_REFERENCE=1 (it rewrites the "
      "text between the marker lines of docs/configuration.md), or paste the output of "
      "`kvwatch config-reference` (config::ConfigReferenceMarkdown()) between the lines\n  " +
      std::string(kBegin) + "\n  " + kEnd + "\n";

  const std::size_t begin = readme.find(std::string(kBegin) + "\n");
  ASSERT_NE(begin, std::string::npos) << readme_path << " has no line " << kBegin << " (nor " << kEnd
                                      << "): add both lines where the agent's config reference belongs. " << how;
  const std::size_t start = begin + std::string(kBegin).size() + 1;
  const std::size_t end = readme.find(kEnd, start);
  ASSERT_NE(end, std::string::npos) << readme_path << " has " << kBegin << " but no " << kEnd << " after it. " << how;
  ASSERT_TRUE(end == start || readme[end - 1] == '\n') << kEnd << " must start a line in " << readme_path;

  const std::string expected = ConfigReferenceMarkdown();
  const std::string actual = readme.substr(start, end - start);
  if (actual != expected && std::getenv("KVWATCH_UPDATE_CONFIG_REFERENCE") != nullptr) {
    std::ofstream out(readme_path, std::ios::binary | std::ios::trunc);
    out << readme.substr(0, start) << expected << readme.substr(end);
    ASSERT_TRUE(out.good()) << "cannot write " << readme_path;
    GTEST_SKIP() << "rewrote the config reference in " << readme_path;
  }
  EXPECT_EQ(actual, expected) << "The config reference in " << readme_path << " is not what the code generates. "
                              << how;
}

}  // namespace
}  // namespace kvwatch::config
