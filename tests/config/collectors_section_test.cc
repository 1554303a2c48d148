// collectors.*: read straight into each collector's options
// (config/collectors_section.cc, collectors/collector_options.h). The key table's
// literal defaults for collectors.* must be the collectors' own, and errors must
// read "SOURCE:LINE: KEY: message" like the rest of the config.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "collectors/collector_options.h"
#include "config/agent_config.h"
#include "tests/config/testing_config_documents.h"

namespace kvwatch::config {
namespace {

using base::Result;
using collectors::CollectorSpec;
using collectors::EngineLogCollectorOptions;
using collectors::EngineMetricsCollectorOptions;
using collectors::KvEventsCollectorOptions;
using collectors::SynthOptions;
using collectors::TraceFileCollectorOptions;
using testing_support::DocumentFor;

constexpr char kSource[] = "agent.yaml";

Result<std::vector<CollectorSpec>> Parse(const std::string& yaml) {
  Result<AgentConfig> config = ParseAgentConfig(yaml, kSource);
  if (!config.ok()) return Result<std::vector<CollectorSpec>>::Error(config.error());
  return config.value().collectors.specs;
}

AgentConfig MustParseConfig(const std::string& yaml) {
  Result<AgentConfig> config = ParseAgentConfig(yaml, kSource);
  EXPECT_TRUE(config.ok()) << (config.ok() ? "" : config.error());
  return config.ok() ? config.value() : AgentConfig{};
}

std::vector<CollectorSpec> MustParse(const std::string& yaml) {
  Result<std::vector<CollectorSpec>> specs = Parse(yaml);
  EXPECT_TRUE(specs.ok()) << (specs.ok() ? "" : specs.error()) << "\n--- in:\n" << yaml;
  return specs.ok() ? specs.value() : std::vector<CollectorSpec>{};
}

// Expects an error "agent.yaml:LINE: KEY: ..." whose message contains `what`.
void ExpectError(const std::string& yaml, int line, const std::string& key, const std::string& what) {
  Result<std::vector<CollectorSpec>> specs = Parse(yaml);
  ASSERT_FALSE(specs.ok()) << "parsed:\n" << yaml;
  const std::string& error = specs.error();
  std::string prefix = std::string(kSource) + ":" + std::to_string(line) + ": " + key + ": ";
  EXPECT_EQ(error.substr(0, prefix.size()), prefix) << error;
  EXPECT_NE(error.find(what), std::string::npos) << "missing \"" << what << "\" in: " << error;
}

template <class T>
const T& Only(const std::vector<CollectorSpec>& specs) {
  static const T kNone{};
  EXPECT_EQ(specs.size(), 1u);
  if (specs.size() != 1 || !std::holds_alternative<T>(specs[0].options)) {
    ADD_FAILURE() << "not one collector of the expected kind";
    return kNone;
  }
  return std::get<T>(specs[0].options);
}

// Every option a collectors.* key can set, as text, so two parses can be compared.
std::string Describe(const CollectorSpec& spec) {
  std::ostringstream out;
  auto list = [&](const std::vector<std::string>& items) {
    for (const std::string& item : items) out << item << ",";
    out << ";";
  };
  out << spec.where << ":";
  if (const auto* o = std::get_if<TraceFileCollectorOptions>(&spec.options)) {
    out << o->name << ";";
    list(o->tailer.patterns);
    out << static_cast<int>(o->tailer.start_position) << ";" << o->tailer.checkpoint_path << ";"
        << static_cast<int>(o->record.timestamp_unit) << ";";
    list(o->record.tenant_fields);
    out << o->tailer.max_line_bytes << ";" << o->poll_interval.count();
  } else if (const auto* o = std::get_if<KvEventsCollectorOptions>(&spec.options)) {
    out << o->name << ";";
    list(o->endpoints);
    out << o->topic << ";" << o->replay_endpoint << ";" << o->bind << ";" << static_cast<int>(o->tracker.tenant_source)
        << ";" << o->tracker.request_group.value_or(-1) << ";" << o->tracker.scope << ";"
        << o->tracker.parent_map_max_entries;
  } else if (const auto* o = std::get_if<EngineLogCollectorOptions>(&spec.options)) {
    out << o->name << ";";
    list(o->tailer.patterns);
    out << static_cast<int>(o->engine) << ";" << static_cast<int>(o->tailer.start_position);
  } else if (const auto* o = std::get_if<EngineMetricsCollectorOptions>(&spec.options)) {
    out << o->name << ";" << o->url << ";" << o->interval.count() << ";" << o->timeout.count() << ";" << o->page_tokens;
  } else if (const auto* o = std::get_if<SynthOptions>(&spec.options)) {
    out << o->rate_per_s << ";" << o->seed << ";" << o->tenants << ";" << o->active_sessions << ";"
        << o->one_shot_fraction << ";" << o->shift.start_s << ";" << o->shift.end_s << ";" << o->duration_s << ";"
        << o->max_requests << ";" << o->page_tokens;
  }
  return out.str();
}

std::string DescribeAll(const std::vector<CollectorSpec>& specs) {
  std::string out;
  for (const CollectorSpec& spec : specs) out += Describe(spec) + "\n";
  return out;
}

// ------------------------------------------------------------------ Defaults

// The key table documents the collectors' defaults, which are the collectors'
// own options' (and AgentSynthOptions' for synth): writing the default must
// change nothing.
TEST(CollectorsSectionTest, EveryLiteralDefaultInTheTableIsTheCollectorsDefault) {
  int checked = 0;
  for (const ConfigKey& key : ConfigKeys()) {
    if (!key.default_is_literal || key.path.substr(0, 11) != "collectors.") continue;
    SCOPED_TRACE(std::string(key.path));
    std::string without = DocumentFor(std::string(key.path), std::nullopt);
    std::string with = DocumentFor(std::string(key.path), YAML::Load(std::string(key.default_text)));
    EXPECT_EQ(DescribeAll(MustParse(with)), DescribeAll(MustParse(without))) << "with:\n"
                                                                             << with << "without:\n"
                                                                             << without;
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

TEST(CollectorsSectionTest, NoCollectorRunsTheAgentsSynth) {
  for (const char* text : {"", "collectors:\n", "collectors:\n  trace_files: []\n", "collectors:\n  synth:\n"}) {
    SCOPED_TRACE(text);
    std::vector<CollectorSpec> specs = MustParse(text);
    const SynthOptions& o = Only<SynthOptions>(specs);
    EXPECT_EQ(specs[0].where, "collectors.synth");
    EXPECT_EQ(o.rate_per_s, 5);
    EXPECT_EQ(o.duration_s, 0);
    EXPECT_EQ(o.max_requests, 0u);
    EXPECT_EQ(o.seed, SynthOptions{}.seed);
    EXPECT_EQ(o.tenants, SynthOptions{}.tenants);
    EXPECT_EQ(o.active_sessions, SynthOptions{}.active_sessions);
    EXPECT_EQ(o.page_tokens, 16);
  }
  EXPECT_TRUE(MustParse("collectors:\n  kv_events: [{name: k, endpoints: ['tcp://h:1']}]\n").size() == 1);
}

// ------------------------------------------------------------------ Values

const std::string kCollectors = R"(model: llama-3-70b
engine:
  max_pages: 1000
state:
  path: /var/lib/kvwatch
collectors:
  synth:
    rate: 20
    seed: 7
    tenants: 8
    sessions: 100
    one_shot_fraction: 0.5
    shift_start: 10m
    shift_end: 20m
)" + std::string(testing_support::kCollectorListsExample) +
                                R"()";

TEST(CollectorsSectionTest, EveryKeyReachesItsCollectorsOptions) {
  std::vector<CollectorSpec> specs = MustParse(kCollectors);
  ASSERT_EQ(specs.size(), 6u);
  std::vector<std::string> where;
  for (const CollectorSpec& spec : specs) where.push_back(spec.where);
  EXPECT_EQ(where, (std::vector<std::string>{"collectors.trace_files[0]", "collectors.trace_files[1]",
                                             "collectors.kv_events[0]", "collectors.engine_log[0]",
                                             "collectors.engine_metrics[0]", "collectors.synth"}));

  const auto& mooncake = std::get<TraceFileCollectorOptions>(specs[0].options);
  EXPECT_EQ(mooncake.name, "mooncake");
  EXPECT_EQ(mooncake.tailer.patterns, (std::vector<std::string>{"/var/log/vllm/requests-*.jsonl"}));
  EXPECT_EQ(mooncake.tailer.start_position, base::TailStartPosition::kBeginning);
  // Positions are kept in the agent's state file, never in a tailer checkpoint file.
  EXPECT_EQ(mooncake.tailer.checkpoint_path, "");
  EXPECT_EQ(mooncake.record.timestamp_unit, base::TimestampUnit::kMilliseconds);
  EXPECT_EQ(mooncake.record.tenant_fields, (std::vector<std::string>{"tenant"}));
  EXPECT_EQ(mooncake.tailer.max_line_bytes, 4u << 20);
  EXPECT_EQ(mooncake.poll_interval, std::chrono::milliseconds(1000));
  // Everything else defaulted.
  const auto& bailian = std::get<TraceFileCollectorOptions>(specs[1].options);
  TraceFileCollectorOptions defaults;
  EXPECT_EQ(bailian.tailer.patterns, (std::vector<std::string>{"/data/a.jsonl", "/data/b.jsonl"}));
  EXPECT_EQ(bailian.tailer.checkpoint_path, "");
  EXPECT_EQ(bailian.tailer.start_position, defaults.tailer.start_position);
  EXPECT_EQ(bailian.record.tenant_fields, defaults.record.tenant_fields);
  EXPECT_EQ(bailian.poll_interval, defaults.poll_interval);

  const auto& kv = std::get<KvEventsCollectorOptions>(specs[2].options);
  EXPECT_EQ(kv.name, "vllm-events");
  EXPECT_EQ(kv.endpoints, (std::vector<std::string>{"tcp://127.0.0.1:5557"}));
  EXPECT_EQ(kv.topic, "kv");
  EXPECT_EQ(kv.replay_endpoint, "tcp://127.0.0.1:5558");
  EXPECT_EQ(kv.replay_timeout, std::chrono::milliseconds(250));
  EXPECT_EQ(kv.replay_give_up, std::chrono::milliseconds(10000));
  EXPECT_TRUE(kv.bind);
  EXPECT_EQ(kv.tracker.tenant_source, collectors::KvTenantSource::kLoraOrSalt);
  EXPECT_EQ(kv.tracker.request_group, std::optional<std::int64_t>(1));
  EXPECT_EQ(kv.tracker.scope, "llama-3-70b");
  EXPECT_EQ(kv.tracker.parent_map_max_entries, 4000u);

  const auto& log = std::get<EngineLogCollectorOptions>(specs[3].options);
  EXPECT_EQ(log.name, "vllm-log");
  EXPECT_EQ(log.tailer.patterns, (std::vector<std::string>{"/var/log/vllm/engine.log"}));
  EXPECT_EQ(log.engine, base::EngineLogKind::kVllm);

  const auto& metrics = std::get<EngineMetricsCollectorOptions>(specs[4].options);
  EXPECT_EQ(metrics.name, "vllm-metrics");
  EXPECT_EQ(metrics.url, "http://127.0.0.1:8000/metrics");
  EXPECT_EQ(metrics.interval, std::chrono::milliseconds(30000));
  EXPECT_EQ(metrics.timeout, std::chrono::milliseconds(10000));

  const auto& synth = std::get<SynthOptions>(specs[5].options);
  EXPECT_EQ(synth.rate_per_s, 20);
  EXPECT_EQ(synth.seed, 7u);
  EXPECT_EQ(synth.tenants, 8);
  EXPECT_EQ(synth.active_sessions, 100);
  EXPECT_EQ(synth.one_shot_fraction, 0.5);
  EXPECT_EQ(synth.shift.start_s, 600);
  EXPECT_EQ(synth.shift.end_s, 1200);
}

// Every collectors.* key of the table is in the example above, so none is left
// without a parser (that would be an "internal error").
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

TEST(CollectorsSectionTest, TheExampleCoversEveryCollectorsKey) {
  std::set<std::string> written;
  CollectPaths(YAML::Load(kCollectors), "", &written);
  for (const ConfigKey& key : ConfigKeys()) {
    if (key.path.substr(0, 10) != "collectors") continue;
    EXPECT_TRUE(written.count(std::string(key.path))) << key.path << " is not in the example";
  }
}

TEST(CollectorsSectionTest, TenantSourceTakesTheTrackersSpellings) {
  const std::string kv = "collectors:\n  kv_events:\n    - name: k\n      endpoints: [tcp://h:1]\n";
  for (const auto& spelling : collectors::kKvTenantSourceSpellings) {
    SCOPED_TRACE(std::string(spelling.name));
    std::vector<CollectorSpec> specs = MustParse(kv + "      tenant_source: " + std::string(spelling.name) + "\n");
    EXPECT_EQ(Only<KvEventsCollectorOptions>(specs).tracker.tenant_source, spelling.value);
  }
  EXPECT_EQ(Only<KvEventsCollectorOptions>(MustParse(kv)).tracker.tenant_source, collectors::KvTenantSource::kNone);
  ExpectError(kv + "      tenant_source: salt\n", 5, "collectors.kv_events[0].tenant_source",
              "expected one of none, lora, cache_salt, lora_or_salt, session_id, got \"salt\"");
  ExpectError(kv + "      tenant_source: [lora]\n", 5, "collectors.kv_events[0].tenant_source", "expected a string");
}

// request_group: unset by default (the group announcing full attention), 0 to
// 255 when set; anything else stops start-up naming the key.
TEST(CollectorsSectionTest, RequestGroupIsUnsetOrAGroupIndex) {
  const std::string kv = "collectors:\n  kv_events:\n    - name: k\n      endpoints: [tcp://h:1]\n";
  EXPECT_EQ(Only<KvEventsCollectorOptions>(MustParse(kv)).tracker.request_group, std::nullopt);
  EXPECT_EQ(Only<KvEventsCollectorOptions>(MustParse(kv + "      request_group: 0\n")).tracker.request_group,
            std::optional<std::int64_t>(0));
  EXPECT_EQ(Only<KvEventsCollectorOptions>(MustParse(kv + "      request_group: 255\n")).tracker.request_group,
            std::optional<std::int64_t>(255));
  for (const char* bad : {"-1", "256", "1.5", "full", "[1]", "\"1\""}) {
    SCOPED_TRACE(bad);
    ExpectError(kv + "      request_group: " + bad + "\n", 5, "collectors.kv_events[0].request_group", "expected");
  }
  ExpectError(kv + "      request_group: 300\n", 5, "collectors.kv_events[0].request_group", "an integer 0 to 255");
}

// curve.max_clock_skew reaches every collector that checks timestamps, wherever
// it is written.
TEST(CollectorsSectionTest, MaxClockSkewReachesTheTimestampCheckingCollectors) {
  const std::string trace = "collectors:\n  trace_files:\n    - name: t\n      paths: [x]\n";
  const std::string kv = "collectors:\n  kv_events:\n    - name: k\n      endpoints: [tcp://h:1]\n";
  EXPECT_EQ(Only<TraceFileCollectorOptions>(MustParse(trace)).max_clock_skew_s, collectors::kDefaultMaxClockSkewS);
  EXPECT_EQ(Only<KvEventsCollectorOptions>(MustParse(kv)).max_clock_skew_s, collectors::kDefaultMaxClockSkewS);
  EXPECT_EQ(Only<TraceFileCollectorOptions>(MustParse("curve: {max_clock_skew: 1m30s}\n" + trace)).max_clock_skew_s,
            90);
  EXPECT_EQ(Only<KvEventsCollectorOptions>(MustParse("curve: {max_clock_skew: 2s}\n" + kv)).max_clock_skew_s, 2);
}

// ------------------------------------------------------------------ Errors

TEST(CollectorsSectionTest, DurationsAndSizesNameTheKey) {
  const std::string head = "collectors:\n  trace_files:\n    - name: a\n      paths: [x]\n";
  ExpectError(head + "      poll_interval: fast\n", 5, "collectors.trace_files[0].poll_interval", "got \"fast\"");
  for (const char* text : {"1.5B", "1Mi", "-1", "MiB", "99999999999999999999", "16EiB"}) {
    SCOPED_TRACE(text);
    ExpectError(head + "      max_line_bytes: " + text + "\n", 5, "collectors.trace_files[0].max_line_bytes",
                "expected a size");
  }
  ExpectError(head + "      max_line_bytes: 2GiB\n", 5, "collectors.trace_files[0].max_line_bytes",
              "from 1 to 1073741824 bytes");
  ExpectError(head + "      max_line_bytes: 0\n", 5, "collectors.trace_files[0].max_line_bytes", "from 1 to");
  struct Case {
    const char* text;
    std::uint64_t bytes;
  };
  for (Case c : {Case{"1048576", 1048576}, Case{"64KiB", 65536}, Case{"1MiB", 1048576}, Case{"1 MiB", 1048576},
                 Case{"2KB", 2000}, Case{"1GiB", 1u << 30}, Case{"100B", 100}}) {
    std::vector<CollectorSpec> specs = MustParse(head + "      max_line_bytes: " + c.text + "\n");
    EXPECT_EQ(Only<TraceFileCollectorOptions>(specs).tailer.max_line_bytes, c.bytes) << c.text;
  }
}

TEST(CollectorsSectionTest, SynthValuesAreChecked) {
  ExpectError("collectors:\n  synth:\n    rate: 0\n", 3, "collectors.synth.rate", "at least 0.000001");
  // Slower than the generator takes (its millisecond timestamps would overflow): refused here, not at start.
  ExpectError("collectors:\n  synth:\n    rate: 1e-9\n", 3, "collectors.synth.rate", "at least 0.000001");
  ExpectError("collectors:\n  synth:\n    one_shot_fraction: 2\n", 3, "collectors.synth.one_shot_fraction",
              "in [0, 1]");
  ExpectError("collectors:\n  synth:\n    tenants: 60001\n", 3, "collectors.synth.tenants", "1 to 60000");
  ExpectError("collectors:\n  synth:\n    shift_start: 5m\n", 3, "collectors.synth.shift_start",
              "set together with collectors.synth.shift_end");
  ExpectError("collectors:\n  synth:\n    shift_start: 5m\n    shift_end: 5m\n", 4, "collectors.synth.shift_end",
              "must be after shift_start");
}

TEST(CollectorsSectionTest, CollectorValuesAreChecked) {
  const std::string kv = "collectors:\n  kv_events:\n    - name: k\n";
  ExpectError(kv + "      endpoints: [tcp://127.0.0.1:1, 'http://x']\n", 4, "collectors.kv_events[0].endpoints[1]",
              "tcp://, ipc:// or inproc://");
  ExpectError(kv + "      endpoints: []\n", 4, "collectors.kv_events[0].endpoints", "at least one item");
  ExpectError(kv + "      endpoints: [ipc:///tmp/kv]\n      replay_endpoint: 'localhost:1'\n", 5,
              "collectors.kv_events[0].replay_endpoint", "ZeroMQ endpoint");
  ExpectError(kv + "      endpoints: [tcp://h:1]\n      bind: 'true'\n", 5, "collectors.kv_events[0].bind",
              "expected true or false");
  ExpectError(kv + "      endpoints: [tcp://h:1]\n      replay_timeout: 0s\n", 5,
              "collectors.kv_events[0].replay_timeout", "a duration > 0");
  ExpectError(kv + "      endpoints: [tcp://h:1]\n      replay_timeout: 0.1ms\n", 5,
              "collectors.kv_events[0].replay_timeout", "at least 1ms");
  ExpectError(kv + "      endpoints: [tcp://h:1]\n      replay_give_up: 50ms\n", 5,
              "collectors.kv_events[0].replay_give_up", "0.05s is shorter than replay_timeout (0.1s)");
  // The index of the item at fault.
  ExpectError(
      "collectors:\n  kv_events:\n    - name: k\n      endpoints: [tcp://h:1]\n"
      "    - name: j\n      endpoints: []\n",
      6, "collectors.kv_events[1].endpoints", "at least one item");
  const std::string metrics = "collectors:\n  engine_metrics:\n    - name: m\n";
  ExpectError(metrics + "      url: 127.0.0.1:8000/metrics\n", 4, "collectors.engine_metrics[0].url",
              "http:// or https://");
  ExpectError(metrics + "      url: http://h/metrics\n      timeout: 20s\n", 5, "collectors.engine_metrics[0].timeout",
              "20s is longer than interval (15s)");
  ExpectError("collectors:\n  engine_log:\n    - name: l\n      paths: [a]\n      engine: tgi\n", 5,
              "collectors.engine_log[0].engine", "one of auto, vllm, sglang");
  ExpectError("collectors:\n  trace_files:\n    - name: a\n      paths: ['']\n", 4,
              "collectors.trace_files[0].paths[0]", "empty string");
  ExpectError("collectors:\n  trace_files:\n    - name: 'a b'\n      paths: [x]\n", 3, "collectors.trace_files[0].name",
              "A-Z a-z 0-9 _ . -");
  ExpectError("collectors:\n  trace_files:\n    - name: synth\n      paths: [x]\n", 3, "collectors.trace_files[0].name",
              "reserved");
  ExpectError("collectors:\n  trace_files:\n    - name: a\n      paths: [x]\n      timestamp_unit: us\n", 5,
              "collectors.trace_files[0].timestamp_unit", "one of auto, ms, s");
  ExpectError("collectors:\n  trace_files:\n    - name: a\n      paths: [x]\n      tenant_fields: ['a\"b']\n", 5,
              "collectors.trace_files[0].tenant_fields[0]", "without '\"'");
}

TEST(CollectorsSectionTest, MissingRequiredKeysNameTheItem) {
  ExpectError("collectors:\n  trace_files:\n    - name: a\n", 3, "collectors.trace_files[0].paths",
              "required key missing");
  ExpectError("collectors:\n  engine_metrics:\n    - url: http://h/m\n", 3, "collectors.engine_metrics[0].name",
              "required key missing");
  ExpectError("collectors:\n  kv_events:\n    - name: k\n", 3, "collectors.kv_events[0].endpoints",
              "required key missing");
}

TEST(CollectorsSectionTest, DuplicateCollectorNamesAreErrors) {
  ExpectError(
      "collectors:\n"
      "  trace_files:\n"
      "    - name: a\n"
      "      paths: [x]\n"
      "  engine_log:\n"
      "    - name: a\n"
      "      paths: [y]\n",
      6, "collectors.engine_log[0].name", "already used by collectors.trace_files[0].name");
  ExpectError(
      "collectors:\n"
      "  trace_files:\n"
      "    - {name: a, paths: [x], checkpoint: /s/c}\n",
      3, "collectors.trace_files[0].checkpoint", "committed with the agent's state file (state.path)");
}

// The specs are what the agent runs: the default config has the agent's replica.
TEST(CollectorsSectionTest, TheDefaultConfigRunsTheAgentsSynth) {
  const AgentConfig c = DefaultAgentConfig();
  ASSERT_EQ(c.collectors.specs.size(), 1u);
  EXPECT_EQ(c.collectors.specs[0].where, "collectors.synth");
  EXPECT_FALSE(c.collectors.HasAnyCollector());
  SynthOptions expected = AgentSynthOptions();
  expected.page_tokens = c.page_tokens;
  EXPECT_EQ(std::get<SynthOptions>(c.collectors.specs[0].options), expected);
  // page_tokens reaches the synth and the engine scraper, wherever it is written.
  const AgentConfig later = MustParseConfig(
      "collectors:\n  engine_metrics: [{name: m, url: 'http://h/metrics'}]\n  synth: {}\npage_tokens: 32\n");
  ASSERT_EQ(later.collectors.specs.size(), 2u);
  EXPECT_EQ(std::get<EngineMetricsCollectorOptions>(later.collectors.specs[0].options).page_tokens, 32u);
  EXPECT_EQ(std::get<SynthOptions>(later.collectors.specs[1].options).page_tokens, 32);
}

}  // namespace
}  // namespace kvwatch::config
