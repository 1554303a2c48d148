// The bodies of tests/agent/testing_agent.h (see there).
#include "tests/agent/testing_agent.h"

#include <simdjson.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "collectors/synth.h"
#include "collectors/trace_record.h"

namespace kvwatch::agent::testing_support {

// ------------------------------------------------------------------ Records

// n records of the `kvwatch synth` generator (its defaults, the given seed).
std::vector<Record> SynthRecords(std::size_t n, std::uint64_t seed) {
  collectors::SynthOptions options;
  options.seed = seed;
  options.duration_s = 0;
  options.max_requests = n;
  std::vector<Record> out;
  auto generator = collectors::SynthGenerator::Create(options);
  if (!generator.ok()) return out;
  collectors::SynthRequest r;
  while (out.size() < n && generator.value().Next(&r)) {
    Record rec;
    collectors::AppendSynthJsonLine(r, &rec.json);
    while (!rec.json.empty() && rec.json.back() == '\n') rec.json.pop_back();
    rec.pages = r.request.pages.size();
    out.push_back(std::move(rec));
  }
  return out;
}

// Parses JSON Lines text into records (blank lines skipped); nullopt when a
// line is not a request record.
std::optional<std::vector<Record>> ParseRecords(const std::string& text) {
  std::vector<Record> out;
  collectors::TraceRecordParser parser;
  curve::Request request;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    auto parsed = parser.Parse(line, &request);
    if (!parsed.ok()) return std::nullopt;
    if (parsed.value() == collectors::ParseOutcome::kBlank) continue;
    out.push_back(Record{line, request.pages.size()});
  }
  return out;
}

std::int64_t WallNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The record with its top-level "timestamp" value replaced by ms (added when
// absent). Records are flat objects whose string values hold no quotes.
std::string Stamped(const std::string& json, std::int64_t ms) {
  const std::string value = std::to_string(ms);
  const std::size_t key = json.find("\"timestamp\"");
  if (key != std::string::npos) {
    std::size_t begin = json.find(':', key);
    if (begin == std::string::npos) return json;
    begin = json.find_first_not_of(" \t", begin + 1);
    if (begin == std::string::npos) return json;
    std::size_t end = json.find_first_of(",}", begin);
    if (end == std::string::npos) return json;
    while (end > begin && (json[end - 1] == ' ' || json[end - 1] == '\t')) --end;
    return json.substr(0, begin) + value + json.substr(end);
  }
  const std::size_t brace = json.find('{');
  if (brace == std::string::npos) return json;
  const bool empty_object = json.find_first_not_of(" \t", brace + 1) == json.find('}', brace);
  return json.substr(0, brace + 1) + "\"timestamp\": " + value + (empty_object ? "" : ", ") + json.substr(brace + 1);
}

// Records [begin, end) as JSON Lines stamped with ms, each ending in '\n'.
std::string JsonLines(const std::vector<Record>& records, std::size_t begin, std::size_t end, std::int64_t ms) {
  std::string out;
  for (std::size_t i = begin; i < end && i < records.size(); ++i) out += Stamped(records[i].json, ms) + "\n";
  return out;
}

std::uint64_t TotalPages(const std::vector<Record>& records, std::size_t begin, std::size_t end) {
  std::uint64_t n = 0;
  for (std::size_t i = begin; i < end && i < records.size(); ++i) n += records[i].pages;
  return n;
}

// ------------------------------------------------------------------ Exposition

// The value of the sample with exactly these labels, or nullopt.
std::optional<double> SampleValue(const collectors::Exposition& e, std::string_view name, const LabelMap& labels) {
  for (const collectors::Sample& s : e.samples) {
    if (s.name != name || s.labels.size() != labels.size()) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      const auto got = s.Label(k);
      if (!got || *got != v) {
        match = false;
        break;
      }
    }
    if (match) return s.value;
  }
  return std::nullopt;
}

// name{k="v",...} with labels sorted: a key for comparing expositions.
std::string SeriesKey(const std::string& name, const LabelMap& labels) {
  std::string key = name + "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    key += (first ? "" : ",") + k + "=\"" + v + "\"";
    first = false;
  }
  return key + "}";
}

// Every sample whose name starts with one of the prefixes, by SeriesKey.
std::map<std::string, double> SeriesWithPrefixes(const collectors::Exposition& e,
                                                 const std::vector<std::string>& prefixes) {
  std::map<std::string, double> out;
  for (const collectors::Sample& s : e.samples) {
    bool wanted = false;
    for (const std::string& p : prefixes) wanted = wanted || s.name.rfind(p, 0) == 0;
    if (!wanted) continue;
    LabelMap labels(s.labels.begin(), s.labels.end());
    out[SeriesKey(s.name, labels)] = s.value;
  }
  return out;
}

// ------------------------------------------------------------------ The agent

std::unique_ptr<AgentProcess> AgentProcess::Start(const std::string& dir, const std::string& name,
                                                  const std::string& config_yaml, std::string* error) {
  const std::string base = (std::filesystem::path(dir) / name).string();
  const std::string config = base + ".yaml";
  if (!WriteFile(config, config_yaml)) {
    *error = "cannot write " + config;
    return nullptr;
  }
  std::unique_ptr<AgentProcess> agent(new AgentProcess());
  agent->process_ =
      ChildProcess::Start({KVWATCH_BINARY, "agent", "--config", config}, base + ".stdout", base + ".stderr", error);
  if (!agent->process_) return nullptr;
  static const std::regex kListening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
  const bool up = PollUntil(
      [&] {
        std::smatch m;
        const std::string err = agent->process_->Stderr();
        if (std::regex_search(err, m, kListening)) {
          agent->port_ = std::stoi(m[1].str());
          return true;
        }
        return !agent->process_->Running();
      },
      kStartTimeout, Millis(20));
  if (!up || agent->port_ == 0) {
    *error = "the agent did not log \"listening on http://127.0.0.1:PORT\" within " +
             std::to_string(kStartTimeout.count()) + " ms (" + DescribeWaitStatus(agent->process_->status()) +
             "); stderr:\n" + Tail(agent->process_->Stderr());
    return nullptr;
  }
  return agent;
}

std::optional<collectors::Exposition> AgentProcess::Metrics(std::string* error) const {
  HttpResult r = Get("/metrics");
  if (r.status != 200) {
    if (error) *error = "GET /metrics: " + (r.status ? std::to_string(r.status) : r.error);
    return std::nullopt;
  }
  return collectors::ParseExposition(r.body);
}

double AgentProcess::Value(std::string_view name, const LabelMap& labels) const {
  auto e = Metrics();
  if (!e) return std::nan("");
  return SampleValue(*e, name, labels).value_or(std::nan(""));
}

bool AgentProcess::WaitForRequests(double n, Millis timeout) const {
  return PollUntil([&] { return Value("kvwatch_requests_total") == n; }, timeout);
}

// A trace_files collector reading `path` from the beginning, polled often.
std::string TraceFileCollectorYaml(const std::string& name, const std::string& path) {
  return "    - name: " + name + "\n      paths: [\"" + path +
         "\"]\n      start_at: beginning\n      timestamp_unit: ms\n      poll_interval: 50ms\n";
}

// ------------------------------------------------------------------ kvwatch replay

// `kvwatch replay --format json` over trace at the given capacities.
base::Result<ReplayCurve> RunReplay(const std::string& trace, const std::vector<std::uint64_t>& capacities,
                                    std::uint64_t page_tokens, std::uint64_t max_pages,
                                    const std::string& touch_order) {
  std::string caps;
  for (std::uint64_t c : capacities) {
    if (!caps.empty()) caps += ',';
    caps += std::to_string(c);
  }
  CommandResult run = RunCommand(
      {KVWATCH_BINARY, "replay", "--format", "json", "--capacities", caps, "--page-tokens", std::to_string(page_tokens),
       "--max-pages", std::to_string(max_pages), "--touch-order", touch_order, "--progress", "never", trace},
      Millis(120000));
  if (!run.Exited(0)) return base::Result<ReplayCurve>::Error("kvwatch replay: " + run.Describe());
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(run.out).get(doc) != simdjson::SUCCESS) {
    return base::Result<ReplayCurve>::Error("kvwatch replay: output is not JSON: " + Tail(run.out, 400));
  }
  ReplayCurve c;
  simdjson::dom::array points;
  if (doc["requests"].get(c.requests) || doc["page_refs"].get(c.page_refs) || doc["cold_misses"].get(c.cold_misses) ||
      doc["beyond_tracked"].get(c.beyond_tracked) || doc["points"].get(points)) {
    return base::Result<ReplayCurve>::Error("kvwatch replay: missing fields in " + Tail(run.out, 400));
  }
  for (simdjson::dom::element p : points) {
    std::uint64_t cap = 0, hits = 0;
    double coverage = 0, ratio = 0;
    if (p["capacity_pages"].get(cap) || p["page_hits"].get(hits) || p["request_coverage"].get(coverage) ||
        p["page_hit_ratio"].get(ratio)) {
      return base::Result<ReplayCurve>::Error("kvwatch replay: bad point in " + Tail(run.out, 400));
    }
    c.page_hits[cap] = hits;
    c.request_coverage[cap] = coverage;
    c.page_hit_ratio[cap] = ratio;
  }
  return c;
}

// ------------------------------------------------------------------ Prometheus

// An instant query (vector result) to the Prometheus on 127.0.0.1:port, at
// `time_s` (Unix seconds) when given, else now.
base::Result<std::vector<PromSample>> PromQuery(int port, const std::string& expr, std::optional<double> time_s) {
  using R = base::Result<std::vector<PromSample>>;
  FormParams params = {{"query", expr}};
  if (time_s) {
    char t[64];
    std::snprintf(t, sizeof(t), "%.3f", *time_s);
    params.emplace("time", t);
  }
  HttpResult r = HttpPostForm(port, "/api/v1/query", params);
  if (r.status != 200) {
    return R::Error("query " + expr + ": " + (r.status ? std::to_string(r.status) + " " + r.body : r.error));
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view status, type;
  simdjson::dom::array result;
  if (parser.parse(r.body).get(doc) || doc["status"].get(status) || status != "success" ||
      doc["data"]["resultType"].get(type) || type != "vector" || doc["data"]["result"].get(result)) {
    return R::Error("query " + expr + ": unexpected answer " + Tail(r.body, 400));
  }
  std::vector<PromSample> out;
  for (simdjson::dom::element item : result) {
    PromSample s;
    simdjson::dom::object metric;
    simdjson::dom::array value;
    std::string_view text;
    if (item["metric"].get(metric) || item["value"].get(value) || value.at(1).get(text)) {
      return R::Error("query " + expr + ": bad sample in " + Tail(r.body, 400));
    }
    for (auto field : metric) {
      std::string_view v;
      if (field.value.get(v) == simdjson::SUCCESS) s.labels[std::string(field.key)] = std::string(v);
    }
    s.value = std::strtod(std::string(text).c_str(), nullptr);
    out.push_back(std::move(s));
  }
  return out;
}

bool PrometheusProcess::Available() { return !FindProgram("prometheus").empty(); }

std::unique_ptr<PrometheusProcess> PrometheusProcess::Start(const std::string& dir,
                                                            const std::vector<int>& target_ports, std::string* error) {
  const std::string binary = FindProgram("prometheus");
  if (binary.empty()) {
    *error = "prometheus is not installed";
    return nullptr;
  }
  std::string targets;
  for (int p : target_ports) {
    if (!targets.empty()) targets += ", ";
    targets += "'127.0.0.1:" + std::to_string(p) + "'";
  }
  const std::string config = (std::filesystem::path(dir) / "prometheus.yml").string();
  const std::string yaml =
      "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
      "scrape_configs:\n  - job_name: kvwatch\n    static_configs:\n      - targets: [" +
      targets + "]\n";
  if (!WriteFile(config, yaml)) {
    *error = "cannot write " + config;
    return nullptr;
  }
  std::unique_ptr<PrometheusProcess> prom(new PrometheusProcess());
  // The port was free a moment ago; if another process takes it first,
  // Prometheus exits and the next attempt picks another.
  for (int attempt = 0; attempt < 3; ++attempt) {
    prom->port_ = PickFreePort();
    const std::string log = (std::filesystem::path(dir) / ("prometheus-" + std::to_string(attempt) + ".log")).string();
    prom->process_ =
        ChildProcess::Start({binary, "--config.file=" + config,
                             "--storage.tsdb.path=" + (std::filesystem::path(dir) / "prometheus-data").string(),
                             "--web.listen-address=127.0.0.1:" + std::to_string(prom->port_), "--log.level=warn"},
                            log + ".out", log, error);
    if (!prom->process_) return nullptr;
    const bool ready = PollUntil(
        [&] {
          if (!prom->process_->Running()) return true;
          return HttpGet(prom->port_, "/-/ready", Millis(1000)).status == 200;
        },
        kStartTimeout, Millis(20));
    if (ready && prom->process_->Running()) return prom;
    *error = "prometheus did not become ready on 127.0.0.1:" + std::to_string(prom->port_) + " (" +
             DescribeWaitStatus(prom->process_->Wait(Millis(0))) + "); log:\n" + Tail(prom->process_->Stderr());
    if (prom->process_->Running()) return nullptr;
  }
  return nullptr;
}

}  // namespace kvwatch::agent::testing_support
