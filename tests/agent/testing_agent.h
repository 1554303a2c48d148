// Test support for the agent's acceptance tests: the real `kvwatch agent`,
// `kvwatch replay` and Prometheus as child processes, and the trace records the
// tests write.
//
// AgentProcess writes a config, starts `kvwatch agent --config FILE` (config
// normally with `web: {port: 0}`) and learns its port from the stderr line
// "kvwatch agent: listening on http://127.0.0.1:PORT". Stop() is SIGTERM and a
// bounded wait; the destructor kills what is still running.
//
// PrometheusProcess runs a real Prometheus on 127.0.0.1 (a port picked at run
// time) scraping the given targets every second, with its TSDB in the test's
// directory, and waits for /-/ready. Query() is an instant query through the HTTP
// API.
//
// Records: SynthRecords() draws from the same generator as `kvwatch synth`;
// Stamped() sets a record's "timestamp" to a given wall time in ms, because a
// live trace carries the time it was written (the agent's windows run on record
// time).
//
// The bodies are in testing_agent.cc, compiled once into the agent's test
// executable: this header keeps only light includes (no simdjson, <regex> or
// cpp-httplib), since many agent test files include it.
//
// Thread safety: none; everything belongs to the test's thread.
#ifndef KVWATCH_TESTS_AGENT_TESTING_AGENT_H_
#define KVWATCH_TESTS_AGENT_TESTING_AGENT_H_

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "collectors/collector.h"
#include "collectors/exposition_parser.h"
#include "tests/agent/testing_process.h"

namespace kvwatch::agent::testing_support {

inline constexpr Millis kStartTimeout{20000};
inline constexpr Millis kStopTimeout{20000};
inline constexpr Millis kIngestTimeout{30000};

// ------------------------------------------------------------------ Records

struct Record {
  std::string json;       // one JSON Lines record, without '\n'
  std::size_t pages = 0;  // its hash_ids
};

// n records of the `kvwatch synth` generator (its defaults, the given seed).
std::vector<Record> SynthRecords(std::size_t n, std::uint64_t seed = 1);

// Parses JSON Lines text into records (blank lines skipped); nullopt when a
// line is not a request record.
std::optional<std::vector<Record>> ParseRecords(const std::string& text);

std::int64_t WallNowMs();

// The record with its top-level "timestamp" value replaced by ms (added when
// absent). Records are flat objects whose string values hold no quotes.
std::string Stamped(const std::string& json, std::int64_t ms);

// Records [begin, end) as JSON Lines stamped with ms, each ending in '\n'.
std::string JsonLines(const std::vector<Record>& records, std::size_t begin, std::size_t end, std::int64_t ms);

std::uint64_t TotalPages(const std::vector<Record>& records, std::size_t begin, std::size_t end);

// ------------------------------------------------------------------ Exposition

using LabelMap = std::map<std::string, std::string>;

// The value of the sample with exactly these labels, or nullopt.
std::optional<double> SampleValue(const collectors::Exposition& e, std::string_view name, const LabelMap& labels = {});

// name{k="v",...} with labels sorted: a key for comparing expositions.
std::string SeriesKey(const std::string& name, const LabelMap& labels);

// Every sample whose name starts with one of the prefixes, by SeriesKey.
std::map<std::string, double> SeriesWithPrefixes(const collectors::Exposition& e,
                                                 const std::vector<std::string>& prefixes);

// ------------------------------------------------------------------ The agent

class AgentProcess {
 public:
  // Writes config_yaml to DIR/NAME.yaml, starts the agent with stderr in
  // DIR/NAME.stderr and waits for its "listening on" line. nullptr on failure,
  // with *error saying why (and the agent's stderr).
  static std::unique_ptr<AgentProcess> Start(const std::string& dir, const std::string& name,
                                             const std::string& config_yaml, std::string* error);

  int port() const { return port_; }
  pid_t pid() const { return process_->pid(); }
  bool Running() { return process_->Running(); }
  std::string Stderr() const { return process_->Stderr(); }
  bool Signal(int signal) { return process_->Signal(signal); }
  HttpResult Get(const std::string& path) const { return HttpGet(port_, path); }

  // The parsed /metrics, or nullopt when the scrape failed (*error says why).
  std::optional<collectors::Exposition> Metrics(std::string* error = nullptr) const;

  // One sample of /metrics; NaN when absent or the scrape failed.
  double Value(std::string_view name, const LabelMap& labels = {}) const;

  // Polls /metrics until kvwatch_requests_total == n.
  bool WaitForRequests(double n, Millis timeout = kIngestTimeout) const;

  // SIGTERM and a bounded wait: the wait status, nullopt when it had to be killed.
  std::optional<int> Stop(Millis timeout = kStopTimeout) { return process_->Terminate(timeout); }

 private:
  AgentProcess() = default;
  std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
};

// A trace_files collector reading `path` from the beginning, polled often.
std::string TraceFileCollectorYaml(const std::string& name, const std::string& path);

// ------------------------------------------------------------------ kvwatch replay

struct ReplayCurve {
  std::uint64_t requests = 0;
  std::uint64_t page_refs = 0;
  std::uint64_t cold_misses = 0;
  std::uint64_t beyond_tracked = 0;
  std::map<std::uint64_t, std::uint64_t> page_hits;  // by capacity in pages
  std::map<std::uint64_t, double> request_coverage;
  std::map<std::uint64_t, double> page_hit_ratio;
};

// `kvwatch replay --format json` over trace at the given capacities.
base::Result<ReplayCurve> RunReplay(const std::string& trace, const std::vector<std::uint64_t>& capacities,
                                    std::uint64_t page_tokens, std::uint64_t max_pages,
                                    const std::string& touch_order = "tail-first");

// ------------------------------------------------------------------ Prometheus

struct PromSample {
  LabelMap labels;
  double value = 0;
};

// An instant query (vector result) to the Prometheus on 127.0.0.1:port, at
// `time_s` (Unix seconds) when given, else now.
base::Result<std::vector<PromSample>> PromQuery(int port, const std::string& expr,
                                                std::optional<double> time_s = std::nullopt);

class PrometheusProcess {
 public:
  // Whether the prometheus binary is installed.
  static bool Available();

  // Starts Prometheus in dir (config, TSDB and log there) on a free port of
  // 127.0.0.1, scraping 127.0.0.1:PORT/metrics of each target every second, and
  // waits for /-/ready. nullptr on failure with *error (and its log).
  static std::unique_ptr<PrometheusProcess> Start(const std::string& dir, const std::vector<int>& target_ports,
                                                  std::string* error);

  int port() const { return port_; }
  std::string Log() const { return process_->Stderr(); }

  // An instant query (vector result).
  base::Result<std::vector<PromSample>> Query(const std::string& expr) const { return PromQuery(port_, expr); }

  std::optional<int> Stop(Millis timeout = kStopTimeout) { return process_->Terminate(timeout); }

 private:
  PrometheusProcess() = default;
  std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
};

// A collector that reads nothing and reports fixed engine signals: what an engine
// /metrics collector would have learned, for the agent's readers of EngineSignals.
class FixedSignalsCollector : public collectors::Collector {
 public:
  explicit FixedSignalsCollector(collectors::EngineSignals signals, std::string name = "vllm")
      : signals_(std::move(signals)), name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  std::string_view kind() const override { return "fake"; }
  std::chrono::milliseconds poll_interval() const override { return std::chrono::milliseconds(1000); }
  void Poll(collectors::RequestSink&, double) override {}
  collectors::CollectorStats stats() const override { return {}; }
  collectors::EngineSignals engine_signals() const override { return signals_; }

 private:
  collectors::EngineSignals signals_;
  std::string name_;
};

}  // namespace kvwatch::agent::testing_support

#endif  // KVWATCH_TESTS_AGENT_TESTING_AGENT_H_
