// Load test of the live agent: the real `kvwatch agent` process tails a trace
// file that this program writes at a sustained rate of page references, and the
// run reports what the agent costs:
//   - CPU: utime+stime of the agent from /proc/PID/stat, sampled every second,
//     as a percentage of one core (mean over the load, and the worst second);
//   - memory: VmRSS sampled every second and VmHWM (peak) from /proc/PID/status,
//     beside the engine's tracked pages, their limit (engine.max_pages) and the
//     engine's own bytes (kvwatch_engine_memory_bytes);
//   - /metrics render latency: 100 GETs spread over the load, and 100
//     back-to-back GETs once the agent is idle (median and p99), each on a new
//     connection; then 200 GETs on one kept-alive connection, as Prometheus
//     scrapes (median and p99);
//   - the replay engine's own cost for the same references: CPU seconds of
//     `kvwatch replay --format json` over the file written (getrusage of the
//     child via wait4).
// Records come from the `kvwatch synth` generator (unbounded stream), each
// stamped with the wall time it is written at, in batches every 10 ms.
// The targets: under 10% of one core, memory bounded by the configured
// tracked pages, /metrics under 10 ms.
//
// A plain program with its own main(): it times a process, not a function
// (bench/CMakeLists.txt links every *_bench.cc with benchmark::benchmark, which
// is harmless here; the kvwatch binary is found beside it, see --kvwatch).
//
//   build/bench/agent_load_bench [--duration 30] [--refs-per-second 100000]
//       [--max-pages 1048576] [--kvwatch build/agent/kvwatch]
//       [--baseline-kvwatch OTHER --runs N]
// With --baseline-kvwatch, the same load is run N times (default 3) with each
// binary in turn (baseline first) and the CPU and /metrics figures are printed
// side by side with their ratios: a before/after measured in one run, each pair
// under the same machine load (the 1-minute load average is printed per run).
// With --hybrid-compare MODEL, the same pairs compare the agent without a model
// (the dense curve only) and with `model: MODEL` (a hybrid preset: the hybrid
// curve runs beside the dense one, agent/runtime/hybrid_analysis.h). --model
// MODEL sets the model of a single run. --state-interval SECONDS keeps the
// agent's state (state.path in the run's folder) and saves it that often under
// the load; the run then prints the saves and the last one's duration.
#include <httplib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/process_stats.h"
#include "collectors/exposition_parser.h"
#include "collectors/synth.h"
#include "tests/agent/testing_process.h"

namespace {

namespace ts = kvwatch::agent::testing_support;
using kvwatch::bench::CpuSeconds;
using kvwatch::bench::Mib;
using kvwatch::bench::Percentile;
using kvwatch::bench::StatusBytes;
using Clock = std::chrono::steady_clock;

struct Options {
  double duration_s = 30;
  double refs_per_s = 100000;
  std::uint64_t max_pages = 1u << 20;
  std::string kvwatch;
  double tick_ms = 10;
  // Live policy canaries (curve.policies at curve.capacities); empty: none.
  std::string policies;
  std::string capacities = "20000,100000";
  // The tenant and class accounting: "" (the agent's default, no capacities
  // written unless --policies), "off", "on", "isolated" (each with curve.capacities
  // = --capacities), or "compare" (off, on and isolated one after the other in
  // this run, and the CPU ratios against off).
  std::string tenants;
  // Another kvwatch binary (e.g. the previous build) run alternately with
  // --kvwatch, --runs times each; empty: one run.
  std::string baseline_kvwatch;
  int runs = 3;
  // The config's `model` (page_tokens 16); empty: none.
  std::string model;
  // A model to run in pairs against no model (see the file comment); empty: none.
  std::string hybrid_compare;
  // state.interval in seconds (state.path in the run's folder): the agent saves
  // its state while under load; 0: no state kept.
  double state_interval_s = 0;
};

void Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--duration SECONDS] [--refs-per-second N] [--max-pages N] [--kvwatch PATH]\n"
               "          [--policies LIST] [--capacities LIST] [--tenants off|on|isolated|compare]\n"
               "          [--baseline-kvwatch PATH [--runs N]] [--model NAME] [--hybrid-compare NAME [--runs N]]\n"
               "          [--state-interval SECONDS]\n"
               "  defaults: 30 s, 100000 page references per second, 1048576 tracked pages,\n"
               "  kvwatch from ../agent/kvwatch beside this program, no policy canaries\n"
               "  (--policies sglang,vllm,s3fifo runs them at --capacities, default 20000,100000;\n"
               "  --tenants sets tenants.enabled / tenants.isolated with curve.capacities = --capacities,\n"
               "  compare runs off, on and isolated in turn and prints the CPU ratios against off;\n"
               "  --baseline-kvwatch runs that binary and --kvwatch alternately, N times each (default 3),\n"
               "  and prints each pair's ratios; --hybrid-compare runs without a model and with that model\n"
               "  alternately, N times each, and prints the same ratios; --state-interval keeps the agent's\n"
               "  state in the run's folder and saves it that often, under the load)\n",
               argv0);
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (a == "--duration") {
      o->duration_s = std::atof(v);
    } else if (a == "--refs-per-second") {
      o->refs_per_s = std::atof(v);
    } else if (a == "--max-pages") {
      o->max_pages = std::strtoull(v, nullptr, 10);
    } else if (a == "--kvwatch") {
      o->kvwatch = v;
    } else if (a == "--policies") {
      o->policies = v;
    } else if (a == "--capacities") {
      o->capacities = v;
    } else if (a == "--baseline-kvwatch") {
      o->baseline_kvwatch = v;
    } else if (a == "--runs") {
      o->runs = std::atoi(v);
    } else if (a == "--model") {
      o->model = v;
    } else if (a == "--hybrid-compare") {
      o->hybrid_compare = v;
    } else if (a == "--state-interval") {
      o->state_interval_s = std::atof(v);
    } else if (a == "--tenants") {
      o->tenants = v;
      if (o->tenants != "off" && o->tenants != "on" && o->tenants != "isolated" && o->tenants != "compare") {
        return false;
      }
    } else {
      return false;
    }
  }
  if (o->kvwatch.empty()) {
    o->kvwatch = (std::filesystem::read_symlink("/proc/self/exe").parent_path() / ".." / "agent" / "kvwatch")
                     .lexically_normal()
                     .string();
  }
  return o->duration_s > 0 && o->refs_per_s > 0 && o->max_pages > 0 && o->runs > 0 && o->state_interval_s >= 0;
}

double TimedMetricsGet(int port, double* ms, std::string* body) {
  const auto t0 = Clock::now();
  ts::HttpResult r = ts::HttpGet(port, "/metrics");
  *ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (body) *body = r.body;
  return r.status;
}

double Metric(const std::string& body, const std::string& name) {
  const kvwatch::collectors::Exposition e = kvwatch::collectors::ParseExposition(body);
  for (const auto& s : e.samples) {
    if (s.name == name && s.labels.empty()) return s.value;
  }
  return NAN;
}

// What one run measured, for the comparison of --tenants compare.
struct RunResult {
  bool ok = false;
  double cpu_pct = NAN;  // mean, % of one core
  double worst_second_pct = NAN;
  double us_per_ref = NAN;  // agent CPU per page reference counted, microseconds
  double peak_rss = NAN;
  double scrape_p50_ms = NAN;
  double scrape_p99_ms = NAN;
  double keepalive_p50_ms = NAN;
  double keepalive_p99_ms = NAN;
  double drain_s = NAN;
  std::size_t metrics_bytes = 0;
  std::string load_before, load_after;  // 1-minute load averages
};

// `n` GETs of /metrics on one kept-alive connection (as Prometheus scrapes):
// their times in ms; fewer when a GET fails.
std::vector<double> KeepAliveGets(int port, int n) {
  httplib::Client client("127.0.0.1", port);
  client.set_keep_alive(true);
  client.set_read_timeout(10, 0);
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    httplib::Result r = client.Get("/metrics");
    if (!r || r->status != 200) break;
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return ms;
}

// One agent under load (see the file comment); prints its table.
RunResult Run(const Options& o) {
  RunResult result;
  result.load_before = kvwatch::bench::LoadAverage();
  ts::TempDir dir("kvwatch_agent_load");
  if (!dir.ok()) return result;
  const std::string trace = dir.Sub("trace.jsonl");
  if (!ts::WriteFile(trace, "")) return result;
  const std::string config = dir.Sub("agent.yaml");
  std::string curve;
  if (!o.policies.empty() || !o.tenants.empty()) {
    curve = "curve: {capacities: [" + o.capacities + "]" +
            (o.policies.empty() ? "" : ", policies: [" + o.policies + "]") + "}\n";
  }
  if (o.tenants == "off") curve += "tenants: {enabled: false}\n";
  if (o.tenants == "isolated") curve += "tenants: {isolated: true}\n";
  if (!o.model.empty()) curve += "model: " + o.model + "\n";
  if (!o.model.empty() || !o.hybrid_compare.empty()) curve += "page_tokens: 16\n";  // the same in both runs of a pair
  if (o.state_interval_s > 0) {
    std::filesystem::create_directories(dir.Sub("state"));
    curve += "state: {path: \"" + dir.Sub("state") + "\", interval: " + std::to_string(o.state_interval_s) + "s}\n";
  }
  ts::WriteFile(config, "web: {port: 0}\nengine: {max_pages: " + std::to_string(o.max_pages) + "}\n" + curve +
                            "collectors:\n  trace_files:\n    - name: load\n      paths: [\"" + trace +
                            "\"]\n      start_at: beginning\n      timestamp_unit: ms\n");

  std::string error;
  int port = 0;
  auto agent = kvwatch::bench::StartAgent("agent_load_bench", o.kvwatch, config, dir, &port);
  if (!agent) return result;
  const pid_t pid = agent->pid();

  // The writer: every tick, records until the cumulative references reach
  // rate x elapsed.
  kvwatch::collectors::SynthOptions synth;
  synth.duration_s = 0;
  synth.max_requests = 0;
  auto generator = kvwatch::collectors::SynthGenerator::Create(synth);
  if (!generator.ok()) {
    std::fprintf(stderr, "agent_load_bench: %s\n", generator.error().c_str());
    return result;
  }
  std::FILE* out = std::fopen(trace.c_str(), "ab");
  if (!out) return result;

  std::atomic<bool> loading{true};
  std::mutex mu;
  std::vector<double> cpu_pct, rss;
  std::vector<double> load_ms;
  // Sampler: CPU and RSS every second.
  std::thread sampler([&] {
    double last_cpu = CpuSeconds(pid);
    auto last = Clock::now();
    while (loading) {
      std::this_thread::sleep_until(last + std::chrono::seconds(1));
      const auto now = Clock::now();
      const double cpu = CpuSeconds(pid);
      const double wall = std::chrono::duration<double>(now - last).count();
      std::lock_guard<std::mutex> lock(mu);
      cpu_pct.push_back(100.0 * (cpu - last_cpu) / wall);
      rss.push_back(StatusBytes(pid, "VmRSS"));
      last_cpu = cpu;
      last = now;
    }
  });
  // Scraper: 100 GETs of /metrics spread over the load.
  std::thread scraper([&] {
    const auto every = std::chrono::duration<double>(o.duration_s / 100.0);
    auto next = Clock::now() + std::chrono::duration_cast<Clock::duration>(every / 2);
    for (int i = 0; i < 100 && loading; ++i) {
      std::this_thread::sleep_until(next);
      double ms = 0;
      if (TimedMetricsGet(port, &ms, nullptr) == 200) {
        std::lock_guard<std::mutex> lock(mu);
        load_ms.push_back(ms);
      }
      next += std::chrono::duration_cast<Clock::duration>(every);
    }
  });

  kvwatch::collectors::SynthRequest r;
  std::string batch;
  std::uint64_t refs = 0, requests = 0, late_ticks = 0;
  const double cpu_start = CpuSeconds(pid);
  const auto start = Clock::now();
  const auto tick = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(o.tick_ms));
  auto next = start;
  while (true) {
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start).count();
    if (elapsed >= o.duration_s) break;
    const double target = o.refs_per_s * elapsed;
    const double wall_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    batch.clear();
    while (static_cast<double>(refs) < target && generator.value().Next(&r)) {
      r.request.timestamp_s = wall_s;
      kvwatch::collectors::AppendSynthJsonLine(r, &batch);
      refs += r.request.pages.size();
      ++requests;
    }
    if (!batch.empty()) {
      std::fwrite(batch.data(), 1, batch.size(), out);
      std::fflush(out);
    }
    next += tick;
    if (Clock::now() > next) ++late_ticks;
    std::this_thread::sleep_until(next);
  }
  std::fclose(out);
  const double load_wall = std::chrono::duration<double>(Clock::now() - start).count();
  // Let the agent finish what was written (bounded), then stop the sampling.
  const auto drain_start = Clock::now();
  std::string body;
  double ms = 0;
  const bool drained = ts::PollUntil(
      [&] {
        TimedMetricsGet(port, &ms, &body);
        return Metric(body, "kvwatch_requests_total") == static_cast<double>(requests);
      },
      std::chrono::milliseconds(120000), std::chrono::milliseconds(20));
  const double drain_s = std::chrono::duration<double>(Clock::now() - drain_start).count();
  const double cpu_load = CpuSeconds(pid) - cpu_start;
  // The references the agent had counted when its CPU was read: CPU per reference
  // holds even when a loaded machine leaves the agent behind (not drained).
  const double counted_refs = Metric(body, "kvwatch_page_references_total");
  const double us_per_ref = 1e6 * cpu_load / counted_refs;
  loading = false;
  sampler.join();
  scraper.join();

  // Idle: 100 back-to-back GETs.
  std::vector<double> idle_ms;
  for (int i = 0; i < 100; ++i) {
    if (TimedMetricsGet(port, &ms, &body) == 200) idle_ms.push_back(ms);
  }
  const double tracked = Metric(body, "kvwatch_tracked_pages");
  const double tracked_limit = Metric(body, "kvwatch_tracked_pages_limit");
  const double engine_bytes = Metric(body, "kvwatch_engine_memory_bytes");
  const double hybrid_bytes = Metric(body, "kvwatch_hybrid_engine_memory_bytes");  // NaN without a hybrid model
  const double hybrid_tracked = Metric(body, "kvwatch_hybrid_tracked_bytes");
  const double agent_refs = Metric(body, "kvwatch_page_references_total");
  const double saves = Metric(body, "kvwatch_state_saves_total");
  const double last_save_s = Metric(body, "kvwatch_state_last_save_duration_seconds");
  const double peak_rss = StatusBytes(pid, "VmHWM");
  const std::size_t metrics_bytes = body.size();
  const std::vector<double> keepalive_ms = KeepAliveGets(port, 200);
  const auto agent_exit = agent->Terminate(std::chrono::milliseconds(20000));

  // The replay engine over the same file.
  auto replay = ts::ChildProcess::Start({o.kvwatch, "replay", "--format", "json", "--progress", "never", "--max-pages",
                                         std::to_string(o.max_pages), trace},
                                        dir.Sub("replay.json"), dir.Sub("replay.err"), &error);
  const auto replay_start = Clock::now();
  const auto replay_status = replay ? replay->Wait(std::chrono::milliseconds(600000)) : std::nullopt;
  const double replay_wall = std::chrono::duration<double>(Clock::now() - replay_start).count();
  double replay_cpu = NAN;
  if (replay_status && WIFEXITED(*replay_status) && WEXITSTATUS(*replay_status) == 0) {
    const struct rusage& u = replay->usage();
    replay_cpu = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                 static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  }
  const double trace_bytes = static_cast<double>(std::filesystem::file_size(trace));

  double max_cpu = 0, max_rss = 0;
  for (double c : cpu_pct) max_cpu = std::max(max_cpu, c);
  for (double b : rss) max_rss = std::max(max_rss, b);
  result.load_after = kvwatch::bench::LoadAverage();
  std::printf("agent load: %.0f s at %.0f page references/s in batches every %.0f ms (%" PRIu64
              " late ticks), tenants %s, %s\n",
              o.duration_s, o.refs_per_s, o.tick_ms, late_ticks, o.tenants.empty() ? "default" : o.tenants.c_str(),
              o.kvwatch.c_str());
  std::printf("  load average       %s before, %s after\n", result.load_before.c_str(), result.load_after.c_str());
  std::printf("  written            %" PRIu64 " requests, %" PRIu64 " page references (%.0f/s), %s of JSON Lines\n",
              requests, refs, static_cast<double>(refs) / load_wall, Mib(trace_bytes).c_str());
  std::printf("  agent counted      %.0f page references; caught up %.2f s after the last write%s\n", agent_refs,
              drain_s, drained ? "" : " (NOT drained: timed out)");
  std::printf("%-34s %s\n", "metric", "value");
  std::printf("%-34s %.2f %% (worst second %.2f %%)\n", "agent CPU, % of one core", 100.0 * cpu_load / load_wall,
              max_cpu);
  std::printf("%-34s %.3f us (%.0f references counted): %.1f%% of one core at %.0f refs/s\n",
              "agent CPU per page reference", us_per_ref, counted_refs, us_per_ref * o.refs_per_s / 1e4, o.refs_per_s);
  std::printf("%-34s %s (sampled VmRSS max %s)\n", "agent peak RSS (VmHWM)", Mib(peak_rss).c_str(),
              Mib(max_rss).c_str());
  std::printf("%-34s %.0f of %.0f (engine %s)\n", "engine tracked pages", tracked, tracked_limit,
              Mib(engine_bytes).c_str());
  if (!std::isnan(hybrid_bytes)) {
    std::printf("%-34s %.1f GiB of KV per rank tracked (engine %s)\n", "hybrid engine",
                hybrid_tracked / (1024.0 * 1024 * 1024), Mib(hybrid_bytes).c_str());
  }
  std::printf("%-34s p50 %.2f ms, p99 %.2f ms (%zu GETs, %zu-byte body)\n", "/metrics under load",
              Percentile(load_ms, 0.5), Percentile(load_ms, 0.99), load_ms.size(), metrics_bytes);
  std::printf("%-34s p50 %.2f ms, p99 %.2f ms (%zu GETs)\n", "/metrics idle", Percentile(idle_ms, 0.5),
              Percentile(idle_ms, 0.99), idle_ms.size());
  std::printf("%-34s p50 %.2f ms, p99 %.2f ms (%zu GETs on one connection)\n", "/metrics idle, kept alive",
              Percentile(keepalive_ms, 0.5), Percentile(keepalive_ms, 0.99), keepalive_ms.size());
  std::printf("%-34s %.2f s CPU (%.2f s wall) for %" PRIu64 " references: %.1f%% of one core at %.0f refs/s\n",
              "kvwatch replay, same file", replay_cpu, replay_wall, refs,
              100.0 * replay_cpu / (static_cast<double>(refs) / o.refs_per_s), o.refs_per_s);
  if (o.state_interval_s > 0) {
    std::printf("%-34s %.0f, the last one %.1f ms\n", "state saves", saves, 1e3 * last_save_s);
  }
  std::printf("%-34s %s\n", "agent exit on SIGTERM", ts::DescribeWaitStatus(agent_exit).c_str());
  const bool ok =
      drained && agent_exit && WIFEXITED(*agent_exit) && WEXITSTATUS(*agent_exit) == 0 && !std::isnan(replay_cpu);
  if (!ok) std::fprintf(stderr, "agent stderr:\n%s\n", ts::Tail(ts::ReadFile(dir.Sub("agent.err"))).c_str());
  result.ok = ok;
  result.cpu_pct = 100.0 * cpu_load / load_wall;
  result.worst_second_pct = max_cpu;
  result.us_per_ref = us_per_ref;
  result.peak_rss = peak_rss;
  result.scrape_p50_ms = Percentile(load_ms, 0.5);
  result.scrape_p99_ms = Percentile(load_ms, 0.99);
  result.keepalive_p50_ms = Percentile(keepalive_ms, 0.5);
  result.keepalive_p99_ms = Percentile(keepalive_ms, 0.99);
  result.drain_s = drain_s;
  result.metrics_bytes = metrics_bytes;
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it is printed, also into a file
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    Usage(argv[0]);
    return 2;
  }
  if (::access(o.kvwatch.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "agent_load_bench: no kvwatch binary at %s (use --kvwatch)\n", o.kvwatch.c_str());
    return 2;
  }
  if (!o.baseline_kvwatch.empty() || !o.hybrid_compare.empty()) {
    if (o.tenants == "compare" || (!o.baseline_kvwatch.empty() && !o.hybrid_compare.empty())) {
      Usage(argv[0]);
      return 2;
    }
    // The baseline (binary, or no model) and this one in turn, under the same load each pair.
    std::vector<std::pair<RunResult, RunResult>> pairs;
    for (int i = 0; i < o.runs; ++i) {
      Options base = o;
      Options mine = o;
      if (!o.hybrid_compare.empty()) {
        base.model.clear();
        mine.model = o.hybrid_compare;
      } else {
        base.kvwatch = o.baseline_kvwatch;
      }
      RunResult b = Run(base);
      std::printf("\n");
      RunResult n = Run(mine);
      std::printf("\n");
      pairs.emplace_back(b, n);
    }
    const std::string baseline = o.hybrid_compare.empty() ? o.baseline_kvwatch + " against " + o.kvwatch
                                                          : "no model against model " + o.hybrid_compare;
    std::printf(
        "baseline %s, %.0f refs/s, %d pairs (each: baseline, then this); ratio: CPU per\n"
        "reference against the pair's baseline\n",
        baseline.c_str(), o.refs_per_s, o.runs);
    std::printf("%-5s %-13s %21s %9s %7s %21s %21s %19s\n", "pair", "load avg", "CPU %core (worst s)", "us/ref",
                "ratio", "/metrics load p50/p99", "kept alive p50/p99", "caught up after");
    bool ok = true;
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const auto& [b, n] = pairs[i];
      ok = ok && b.ok && n.ok;
      for (const RunResult* r : {&b, &n}) {
        std::printf("%-5s %5s-%-7s %10.1f (%7.1f) %9.3f %7s %9.2f/%8.2f ms %8.2f/%8.2f ms %17.2f s\n",
                    r == &b ? (std::to_string(i + 1) + "b").c_str() : (std::to_string(i + 1) + "n").c_str(),
                    r->load_before.c_str(), r->load_after.c_str(), r->cpu_pct, r->worst_second_pct, r->us_per_ref,
                    r == &b ? "1" : std::to_string(n.us_per_ref / b.us_per_ref).substr(0, 5).c_str(), r->scrape_p50_ms,
                    r->scrape_p99_ms, r->keepalive_p50_ms, r->keepalive_p99_ms, r->drain_s);
      }
    }
    return ok ? 0 : 1;
  }
  if (o.tenants != "compare") return Run(o).ok ? 0 : 1;
  // Tenants off, on and isolated in turn, each against the off run of this process.
  std::vector<std::pair<std::string, RunResult>> runs;
  for (const char* mode : {"off", "on", "isolated"}) {
    Options one = o;
    one.tenants = mode;
    runs.emplace_back(mode, Run(one));
    std::printf("\n");
  }
  const RunResult& off = runs.front().second;
  std::printf("tenants compare (K = 8, capacities %s): CPU and memory against tenants off\n", o.capacities.c_str());
  std::printf("%-10s %12s %8s %12s %8s %14s %12s\n", "tenants", "CPU %core", "ratio", "peak RSS", "ratio",
              "/metrics p50", "body bytes");
  bool ok = true;
  for (const auto& [mode, r] : runs) {
    ok = ok && r.ok;
    std::printf("%-10s %12.2f %8.2f %12s %8.2f %11.2f ms %12zu\n", mode.c_str(), r.cpu_pct, r.cpu_pct / off.cpu_pct,
                Mib(r.peak_rss).c_str(), r.peak_rss / off.peak_rss, r.scrape_p50_ms, r.metrics_bytes);
  }
  return ok ? 0 : 1;
}
