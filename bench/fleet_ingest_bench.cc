// Fleet ingestion load test: one real `kvwatch agent` subscribed to N engines'
// KV-event streams (default 16), real ZeroMQ sockets on 127.0.0.1, at an
// aggregate rate of block events (default 2,000,000 per second), once with the
// exact engine and once with `engine: {sample_rate: 0.01}`. Reports per mode:
//   - block events sent (hashes in BlockStored/BlockRemoved, reuse reports
//     included) and the rate reached, events seen by the agent (the sum of its
//     kvwatch_engine_{stored,evicted,reused}_blocks_total), batches lost
//     (kvwatch_kv_events_lost_total, kvwatch_collector_dropped_total) and
//     recovered from the replay sockets (kvwatch_kv_events_replayed_total);
//   - agent CPU (utime+stime from /proc/PID/stat every second, % of one core:
//     mean over the load and the worst second), peak RSS (VmHWM);
//   - /metrics latency under load (100 GETs spread over the run, p50/p99).
//
// The publishers run in a child process (this program re-executed with
// --publish), so their CPU is not the measuring code's: per engine an XPUB
// bound on tcp://127.0.0.1:* (sndhwm 100000, vLLM's default, so a slow agent
// makes ZeroMQ drop and the agent must see the gap) and a ROUTER replay socket
// (vLLM's replay protocol, the last 10000 batches), all driven by one thread
// that paces each engine at rate/N block events per second. Each engine
// replays a pre-encoded cycle of batches (vLLM >= v0.26 map form, 16 token ids
// per block), made by the tests' EngineCacheModel (vLLM V1's prefix cache with
// kv_cache_report_mode "full") from a `kvwatch synth` stream; the cycle ends by
// evicting every resident copy, so that it repeats consistently. The agent has
// one collectors.kv_events entry per engine (endpoint + replay_endpoint).
//
// A plain program with its own main(), like agent_load_bench.
//
//   build/bench/fleet_ingest_bench [--duration 60] [--publishers 16] [--rate 2000000]
//       [--modes exact,sampled] [--tokens-per-block 16] [--kvwatch build/agent/kvwatch]
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
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
#include <zmq.hpp>

#include "bench/process_stats.h"
#include "collectors/exposition_parser.h"
#include "collectors/kv_event_decoder.h"
#include "collectors/synth.h"
#include "collectors/testing/kv_event_encoder.h"
#include "tests/agent/testing_process.h"
#include "tests/collectors/kv_events_test_publisher.h"

namespace {

namespace ts = kvwatch::agent::testing_support;
namespace kc = kvwatch::collectors;
using Clock = std::chrono::steady_clock;

struct Options {
  double duration_s = 60;
  int publishers = 16;
  double rate = 2e6;  // aggregate block events per second
  std::string modes = "exact,sampled";
  int tokens_per_block = 16;
  std::uint64_t cycle_events = 100000;  // block events per engine before its stream repeats
  double max_agent_rss_mib = 4096;      // stop sending beyond this agent RSS (a backlog)
  std::string stop_file;                // child: stop sending once this file exists
  std::string kvwatch;
  std::string self;
  bool publish = false;  // child mode
};

void Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--duration SECONDS] [--publishers N] [--rate EVENTS_PER_S] [--modes exact,sampled]\n"
               "          [--tokens-per-block N] [--cycle-events N] [--max-agent-rss-mib N] [--kvwatch PATH]\n"
               "  defaults: 60 s, 16 publishers, 2000000 block events/s in all, both modes,\n"
               "  16 token ids per block, kvwatch from ../agent/kvwatch beside this program;\n"
               "  sending stops early if the agent's RSS passes --max-agent-rss-mib (default 4096: a backlog)\n",
               argv0);
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--publish") {
      o->publish = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (a == "--duration") {
      o->duration_s = std::atof(v);
    } else if (a == "--publishers") {
      o->publishers = std::atoi(v);
    } else if (a == "--rate") {
      o->rate = std::atof(v);
    } else if (a == "--modes") {
      o->modes = v;
    } else if (a == "--tokens-per-block") {
      o->tokens_per_block = std::atoi(v);
    } else if (a == "--cycle-events") {
      o->cycle_events = std::strtoull(v, nullptr, 10);
    } else if (a == "--max-agent-rss-mib") {
      o->max_agent_rss_mib = std::atof(v);
    } else if (a == "--stop-file") {
      o->stop_file = v;
    } else if (a == "--kvwatch") {
      o->kvwatch = v;
    } else {
      return false;
    }
  }
  o->self = std::filesystem::read_symlink("/proc/self/exe").string();
  if (o->kvwatch.empty()) {
    o->kvwatch =
        (std::filesystem::path(o->self).parent_path() / ".." / "agent" / "kvwatch").lexically_normal().string();
  }
  return o->duration_s > 0 && o->publishers > 0 && o->rate > 0 && o->tokens_per_block >= 0 && o->cycle_events > 0;
}

// ---- Publisher side (child process) -------------------------------------------

std::uint64_t BlockEvents(const kc::KvEventBatch& b) {
  std::uint64_t n = 0;
  for (const kc::KvEvent& e : b.events) {
    if (const auto* s = std::get_if<kc::BlockStored>(&e)) n += s->block_hashes.size();
    if (const auto* r = std::get_if<kc::BlockRemoved>(&e)) n += r->block_hashes.size();
  }
  return n;
}

struct Engine {
  std::vector<std::vector<std::uint8_t>> payloads;  // the cycle
  std::vector<std::uint32_t> events;                // block events per payload
  zmq::socket_t pub;
  zmq::socket_t router;
  std::uint64_t seq = 0;
  std::uint64_t sent_events = 0;
  std::uint64_t replay_requests = 0;
};

// The cycle of engine i: synth requests through vLLM's prefix cache, then every
// resident copy evicted.
void BuildCycle(int index, const Options& o, Engine* e) {
  kc::SynthOptions so;
  so.seed = static_cast<std::uint64_t>(index) + 1;
  so.duration_s = 0;
  so.max_requests = 0;
  auto gen = kc::SynthGenerator::Create(so);
  kc::testing::EngineCacheModel model(kc::testing::EngineModelOptions{.capacity_blocks = 8192,
                                                                      .report_reuse = true,
                                                                      .requests_per_batch = 1,
                                                                      .tokens_per_block = o.tokens_per_block,
                                                                      .start_ts = 1.79e9,
                                                                      .ts_step = 0.01});
  kc::SynthRequest r;
  std::vector<std::uint64_t> pages;
  const std::uint64_t salt = 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(index + 1);
  std::uint64_t total = 0;
  std::vector<kc::KvEventBatch> batches;
  while (total < o.cycle_events && gen.value().Next(&r)) {
    pages.clear();
    for (auto p : r.request.pages) pages.push_back((p ^ salt) * 0xff51afd7ed558ccdull);  // distinct per engine
    model.Run(pages);
    for (kc::KvEventBatch& b : model.TakeBatches()) {
      total += BlockEvents(b);
      batches.push_back(std::move(b));
    }
  }
  kc::KvEventBatch flush;
  flush.ts = batches.empty() ? 1.79e9 : batches.back().ts;
  flush.dp_rank = 0;
  kc::BlockRemoved removed;
  removed.medium = std::string("GPU");
  removed.group_idx = 0;
  for (const auto& [hash, copies] : model.Resident()) {
    for (std::uint32_t c = 0; c < copies; ++c) removed.block_hashes.push_back(hash);
    if (removed.block_hashes.size() >= 512) {
      flush.events.emplace_back(removed);
      removed.block_hashes.clear();
    }
  }
  if (!removed.block_hashes.empty()) flush.events.emplace_back(removed);
  if (!flush.events.empty()) batches.push_back(std::move(flush));
  for (const kc::KvEventBatch& b : batches) {
    e->payloads.push_back(kc::EncodeKvEventBatch(b, kc::KvEncoding::kMap));
    e->events.push_back(static_cast<std::uint32_t>(BlockEvents(b)));
  }
}

void Send(Engine& e, std::uint64_t seq) {
  const auto seq_bytes = kc::EncodeSeqFrame(seq);
  auto& payload = e.payloads[seq % e.payloads.size()];
  e.pub.send(zmq::message_t(), zmq::send_flags::sndmore);  // topic "" (vLLM's default)
  e.pub.send(zmq::buffer(seq_bytes), zmq::send_flags::sndmore);
  // Zero copy: the cycle's payloads live as long as this process.
  e.pub.send(zmq::message_t(payload.data(), payload.size(), nullptr, nullptr), zmq::send_flags::none);
}

// vLLM's replay protocol (>= v0.26 framing): [id, "", start] -> per buffered
// batch [id, "", topic, seq, payload], then [id, "", "", END, ""]. The buffer
// is the last 10000 seqs, served from the cycle.
void ServeReplay(Engine& e) {
  for (;;) {
    std::vector<zmq::message_t> frames;
    zmq::message_t m;
    if (!e.router.recv(m, zmq::recv_flags::dontwait).has_value()) return;
    frames.push_back(std::move(m));
    while (frames.back().more()) {
      frames.emplace_back();
      (void)e.router.recv(frames.back(), zmq::recv_flags::none);
    }
    if (frames.size() != 3 || frames[2].size() != 8) continue;
    ++e.replay_requests;
    const std::uint64_t start = kc::ParseSeqFrame(kc::Frame(frames[2].data<std::uint8_t>(), 8)).value();
    const std::uint64_t first = std::max(start, e.seq > 10000 ? e.seq - 10000 : 0);
    auto reply = [&](std::uint64_t seq, const std::vector<std::uint8_t>* payload) {
      const auto seq_bytes = kc::EncodeSeqFrame(seq);
      e.router.send(zmq::buffer(frames[0].data(), frames[0].size()), zmq::send_flags::sndmore);
      e.router.send(zmq::message_t(), zmq::send_flags::sndmore);
      e.router.send(zmq::message_t(), zmq::send_flags::sndmore);
      e.router.send(zmq::buffer(seq_bytes), zmq::send_flags::sndmore);
      if (payload) {
        e.router.send(zmq::buffer(*payload), zmq::send_flags::none);
      } else {
        e.router.send(zmq::message_t(), zmq::send_flags::none);
      }
    };
    for (std::uint64_t s = first; s < e.seq; ++s) reply(s, &e.payloads[s % e.payloads.size()]);
    reply(kc::kReplayEndSeq, nullptr);
  }
}

// Prints "ENGINE i pub replay" lines and "READY", waits for every engine's
// subscriber, prints "SENDING", paces for duration, prints the totals and
// "DONE", then keeps serving replay until killed.
int RunPublishers(const Options& o) {
  zmq::context_t context(1);
  std::vector<Engine> engines(static_cast<std::size_t>(o.publishers));
  for (int i = 0; i < o.publishers; ++i) {
    Engine& e = engines[static_cast<std::size_t>(i)];
    BuildCycle(i, o, &e);
    e.pub = zmq::socket_t(context, zmq::socket_type::xpub);
    e.pub.set(zmq::sockopt::linger, 0);
    e.pub.set(zmq::sockopt::sndhwm, 100000);
    e.pub.bind("tcp://127.0.0.1:*");
    e.router = zmq::socket_t(context, zmq::socket_type::router);
    e.router.set(zmq::sockopt::linger, 0);
    e.router.bind("tcp://127.0.0.1:*");
    std::uint64_t bytes = 0, events = 0;
    for (std::size_t b = 0; b < e.payloads.size(); ++b) {
      bytes += e.payloads[b].size();
      events += e.events[b];
    }
    std::printf("ENGINE %d %s %s %zu %" PRIu64 " %" PRIu64 "\n", i, e.pub.get(zmq::sockopt::last_endpoint).c_str(),
                e.router.get(zmq::sockopt::last_endpoint).c_str(), e.payloads.size(), bytes, events);
  }
  std::printf("READY\n");
  std::fflush(stdout);
  for (Engine& e : engines) {
    zmq::message_t m;
    e.pub.set(zmq::sockopt::rcvtimeo, 120000);
    if (!e.pub.recv(m, zmq::recv_flags::none).has_value()) {
      std::printf("NO SUBSCRIBER\n");
      return 1;
    }
  }
  std::printf("SENDING\n");
  std::fflush(stdout);
  const double per_engine = o.rate / o.publishers;
  const auto start = Clock::now();
  const auto tick = std::chrono::milliseconds(2);
  auto next = start;
  std::uint64_t late = 0, ticks = 0;
  for (;;) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (elapsed >= o.duration_s) break;
    if (ticks % 100 == 0 && !o.stop_file.empty() && std::filesystem::exists(o.stop_file)) break;
    const double target = per_engine * elapsed;
    for (Engine& e : engines) {
      while (static_cast<double>(e.sent_events) < target) {
        e.sent_events += e.events[e.seq % e.payloads.size()];
        Send(e, e.seq++);
      }
      ServeReplay(e);
    }
    ++ticks;
    next += tick;
    if (Clock::now() > next) {
      ++late;
      next = Clock::now();
    }
    std::this_thread::sleep_until(next);
  }
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  std::uint64_t events = 0, batches = 0, replays = 0;
  for (Engine& e : engines) {
    events += e.sent_events;
    batches += e.seq;
    replays += e.replay_requests;
  }
  std::printf("SENT %" PRIu64 " %" PRIu64 " %.3f %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", events, batches, wall, late,
              ticks, replays);
  std::printf("DONE\n");
  std::fflush(stdout);
  for (;;) {  // serve late replay requests until the parent stops this process
    for (Engine& e : engines) ServeReplay(e);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// ---- Measuring side -----------------------------------------------------------

using kvwatch::bench::CpuSeconds;
using kvwatch::bench::LoadAverage;
using kvwatch::bench::Mib;
using kvwatch::bench::Percentile;
using kvwatch::bench::StatusBytes;

// The sum of every sample of a family, whatever its labels.
double Sum(const std::string& body, const std::string& name) {
  const kc::Exposition e = kc::ParseExposition(body);
  double sum = 0;
  for (const auto& s : e.samples) {
    if (s.name == name) sum += s.value;
  }
  return sum;
}

double SeenEvents(const std::string& body) {
  return Sum(body, "kvwatch_engine_stored_blocks_total") + Sum(body, "kvwatch_engine_evicted_blocks_total") +
         Sum(body, "kvwatch_engine_reused_blocks_total");
}

bool RunMode(const Options& o, const std::string& mode) {
  ts::TempDir dir("kvwatch_fleet_ingest");
  if (!dir.ok()) return false;
  std::string error;
  std::vector<std::string> argv = {o.self,
                                   "--publish",
                                   "--duration",
                                   std::to_string(o.duration_s),
                                   "--publishers",
                                   std::to_string(o.publishers),
                                   "--rate",
                                   std::to_string(o.rate),
                                   "--tokens-per-block",
                                   std::to_string(o.tokens_per_block),
                                   "--cycle-events",
                                   std::to_string(o.cycle_events),
                                   "--stop-file",
                                   dir.Sub("stop"),
                                   "--kvwatch",
                                   o.kvwatch};
  auto publishers = ts::ChildProcess::Start(argv, dir.Sub("pub.out"), dir.Sub("pub.err"), &error);
  if (!publishers) {
    std::fprintf(stderr, "fleet_ingest_bench: %s\n", error.c_str());
    return false;
  }
  if (!ts::PollUntil(
          [&] { return publishers->Stdout().find("READY\n") != std::string::npos || !publishers->Running(); },
          std::chrono::milliseconds(300000))) {
    std::fprintf(stderr, "fleet_ingest_bench: the publishers did not start\n");
    return false;
  }
  std::string config = "web: {port: 0}\n";
  if (mode == "sampled") config += "engine: {sample_rate: 0.01}\n";
  config += "collectors:\n  kv_events:\n";
  std::uint64_t cycle_batches = 0, cycle_bytes = 0, cycle_events = 0;
  {
    std::istringstream lines(publishers->Stdout());
    std::string tag, pub, replay;
    int index = 0;
    std::uint64_t batches = 0, bytes = 0, events = 0;
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream l(line);
      if (!(l >> tag) || tag != "ENGINE") continue;
      l >> index >> pub >> replay >> batches >> bytes >> events;
      cycle_batches += batches;
      cycle_bytes += bytes;
      cycle_events += events;
      config += "    - name: replica-" + std::to_string(index) + "\n      endpoints: [\"" + pub +
                "\"]\n      replay_endpoint: \"" + replay + "\"\n";
    }
  }
  ts::WriteFile(dir.Sub("agent.yaml"), config);
  int port = 0;
  auto agent = kvwatch::bench::StartAgent("fleet_ingest_bench", o.kvwatch, dir.Sub("agent.yaml"), dir, &port);
  if (!agent) return false;
  const pid_t pid = agent->pid();
  if (!ts::PollUntil(
          [&] { return publishers->Stdout().find("SENDING\n") != std::string::npos || !publishers->Running(); },
          std::chrono::milliseconds(60000)) ||
      !publishers->Running()) {
    std::fprintf(stderr, "fleet_ingest_bench: the publishers did not see the agent subscribe:\n%s\n",
                 publishers->Stdout().c_str());
    return false;
  }

  std::atomic<bool> loading{true};
  std::mutex mu;
  std::vector<double> cpu_pct, load_ms;
  std::atomic<bool> over_rss{false};
  const pid_t publisher_pid = publishers->pid();
  const double publisher_cpu_start = CpuSeconds(publisher_pid);
  const std::string loadavg_start = LoadAverage();
  std::thread sampler([&] {
    double last_cpu = CpuSeconds(pid);
    auto last = Clock::now();
    while (loading) {
      std::this_thread::sleep_until(last + std::chrono::seconds(1));
      const auto now = Clock::now();
      const double cpu = CpuSeconds(pid);
      std::lock_guard<std::mutex> lock(mu);
      cpu_pct.push_back(100.0 * (cpu - last_cpu) / std::chrono::duration<double>(now - last).count());
      if (!over_rss && StatusBytes(pid, "VmRSS") > o.max_agent_rss_mib * 1024 * 1024) {
        over_rss = true;
        ts::WriteFile(dir.Sub("stop"), "");
      }
      last_cpu = cpu;
      last = now;
    }
  });
  std::thread scraper([&] {
    const auto every = std::chrono::duration<double>(o.duration_s / 100.0);
    auto next = Clock::now() + std::chrono::duration_cast<Clock::duration>(every / 2);
    for (int i = 0; i < 100 && loading; ++i) {
      std::this_thread::sleep_until(next);
      const auto t0 = Clock::now();
      const ts::HttpResult r = ts::HttpGet(port, "/metrics");
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (r.status == 200) {
        std::lock_guard<std::mutex> lock(mu);
        load_ms.push_back(ms);
      }
      next += std::chrono::duration_cast<Clock::duration>(every);
    }
  });
  const double cpu_start = CpuSeconds(pid);
  const auto start = Clock::now();
  ts::PollUntil([&] { return publishers->Stdout().find("DONE\n") != std::string::npos || !publishers->Running(); },
                std::chrono::milliseconds(static_cast<std::int64_t>(o.duration_s * 1000) + 120000),
                std::chrono::milliseconds(100));
  const double load_wall = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu_load = CpuSeconds(pid) - cpu_start;
  const double publisher_cpu = CpuSeconds(publisher_pid) - publisher_cpu_start;
  const std::string loadavg_end = LoadAverage();
  std::uint64_t sent = 0, sent_batches = 0, late = 0, ticks = 0, replay_requests = 0;
  double send_wall = 0;
  {
    const std::string out = publishers->Stdout();
    const std::size_t at = out.find("SENT ");
    if (at != std::string::npos) {
      std::sscanf(out.c_str() + at, "SENT %" SCNu64 " %" SCNu64 " %lf %" SCNu64 " %" SCNu64 " %" SCNu64, &sent,
                  &sent_batches, &send_wall, &late, &ticks, &replay_requests);
    }
  }
  // Let the agent finish what was sent (bounded: until it stops moving for 5 s).
  std::string body;
  double seen = -1, last_seen = -2;
  auto last_change = Clock::now();
  const auto drain_start = Clock::now();
  while (Clock::now() - last_change < std::chrono::seconds(5)) {
    body = ts::HttpGet(port, "/metrics").body;
    seen = SeenEvents(body);
    if (seen >= static_cast<double>(sent)) break;
    if (seen != last_seen) {
      last_seen = seen;
      last_change = Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double drain_s = std::chrono::duration<double>(Clock::now() - drain_start).count();
  loading = false;
  sampler.join();
  scraper.join();
  const double peak_rss = StatusBytes(pid, "VmHWM");
  const auto agent_exit = agent->Terminate(std::chrono::milliseconds(20000));
  publishers->Terminate(std::chrono::milliseconds(5000));

  double max_cpu = 0;
  for (double c : cpu_pct) max_cpu = std::max(max_cpu, c);
  std::printf("\n== %s engine%s: %d publishers, target %.0f block events/s for %.0f s, %d token ids per block\n",
              mode.c_str(), mode == "sampled" ? " (sample_rate 0.01)" : "", o.publishers, o.rate, o.duration_s,
              o.tokens_per_block);
  std::printf("%-40s %" PRIu64 " in %" PRIu64 " batches (%.0f/s reached; %" PRIu64 " of %" PRIu64
              " 2-ms ticks late; cycle %" PRIu64 " batches)\n",
              "block events sent", sent, sent_batches, static_cast<double>(sent) / send_wall, late, ticks,
              cycle_batches);
  std::printf("%-40s %.1f block events, %.0f bytes of msgpack (%.1f bytes per block event)\n", "per batch, on average",
              static_cast<double>(cycle_events) / static_cast<double>(cycle_batches),
              static_cast<double>(cycle_bytes) / static_cast<double>(cycle_batches),
              static_cast<double>(cycle_bytes) / static_cast<double>(cycle_events));
  std::printf("%-40s %.0f (%.6f of sent; caught up %.2f s after the last send)\n", "block events seen by the agent",
              seen, seen / static_cast<double>(sent), drain_s);
  std::printf("%-40s lost %.0f, collector dropped %.0f, replayed %.0f (%" PRIu64 " replay requests served)\n",
              "batches (kv_events counters)", Sum(body, "kvwatch_kv_events_lost_total"),
              Sum(body, "kvwatch_collector_dropped_total"), Sum(body, "kvwatch_kv_events_replayed_total"),
              replay_requests);
  std::printf("%-40s %.0f requests, %.0f page references\n", "reconstructed by the agent",
              Sum(body, "kvwatch_requests_total"), Sum(body, "kvwatch_page_references_total"));
  std::printf("%-40s %.1f %% (worst second %.1f %%)\n", "agent CPU, % of one core", 100.0 * cpu_load / load_wall,
              max_cpu);
  std::printf("%-40s %.1f %% (the publishers' process, for scale)\n", "publishers CPU, % of one core",
              100.0 * publisher_cpu / load_wall);
  std::printf("%-40s %s at the start, %s at the end (other work on this machine included)\n", "load average",
              loadavg_start.c_str(), loadavg_end.c_str());
  if (over_rss) {
    std::printf("%-40s the agent's RSS passed %.0f MiB: sending stopped early (it was not keeping up)\n", "STOPPED",
                o.max_agent_rss_mib);
  }
  std::printf("%-40s %s (engine %s, %.0f tracked pages)\n", "agent peak RSS (VmHWM)", Mib(peak_rss).c_str(),
              Mib(Sum(body, "kvwatch_engine_memory_bytes")).c_str(), Sum(body, "kvwatch_tracked_pages"));
  std::printf("%-40s p50 %.2f ms, p99 %.2f ms (%zu GETs, %zu-byte body)\n", "/metrics under load",
              Percentile(load_ms, 0.5), Percentile(load_ms, 0.99), load_ms.size(), body.size());
  std::printf("%-40s %s\n", "agent exit on SIGTERM", ts::DescribeWaitStatus(agent_exit).c_str());
  std::fflush(stdout);
  const bool ok = agent_exit && WIFEXITED(*agent_exit) && WEXITSTATUS(*agent_exit) == 0 && sent > 0;
  if (!ok) std::fprintf(stderr, "agent stderr:\n%s\n", ts::Tail(ts::ReadFile(dir.Sub("agent.err"))).c_str());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    Usage(argv[0]);
    return 2;
  }
  if (o.publish) return RunPublishers(o);
  if (::access(o.kvwatch.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "fleet_ingest_bench: no kvwatch binary at %s (use --kvwatch)\n", o.kvwatch.c_str());
    return 2;
  }
  bool ok = true;
  std::istringstream modes(o.modes);
  std::string mode;
  while (std::getline(modes, mode, ',')) {
    if (mode != "exact" && mode != "sampled") {
      Usage(argv[0]);
      return 2;
    }
    ok = RunMode(o, mode) && ok;
  }
  return ok ? 0 : 1;
}
