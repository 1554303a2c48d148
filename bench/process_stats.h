// What the timed benches read about a running process (bench/agent_load_bench.cc,
// bench/fleet_ingest_bench.cc): its CPU time and memory from /proc, the machine's
// load, and small formatting helpers. Linux only, like the benches.
#ifndef KVWATCH_BENCH_PROCESS_STATS_H_
#define KVWATCH_BENCH_PROCESS_STATS_H_

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tests/agent/testing_process.h"

namespace kvwatch::bench {

// The port a started `kvwatch agent` listens on, from its stderr line
// "listening on http://127.0.0.1:PORT"; 0 when it exited or said nothing in 20 s.
inline int WaitForAgentPort(agent::testing_support::ChildProcess& agent) {
  int port = 0;
  agent::testing_support::PollUntil(
      [&] {
        const std::string err = agent.Stderr();
        const std::string key = "listening on http://127.0.0.1:";
        const std::size_t at = err.find(key);
        if (at != std::string::npos) port = std::atoi(err.c_str() + at + key.size());
        return port != 0 || !agent.Running();
      },
      std::chrono::milliseconds(20000));
  return port;
}

// Starts `kvwatch agent --config CONFIG` with its stdout and stderr in `dir`
// (agent.out, agent.err) and waits for its port; on failure says why on stderr,
// prefixed with `bench`, and returns null.
inline std::unique_ptr<agent::testing_support::ChildProcess> StartAgent(const std::string& bench,
                                                                        const std::string& kvwatch,
                                                                        const std::string& config,
                                                                        const agent::testing_support::TempDir& dir,
                                                                        int* port) {
  std::string error;
  auto agent = agent::testing_support::ChildProcess::Start({kvwatch, "agent", "--config", config}, dir.Sub("agent.out"),
                                                           dir.Sub("agent.err"), &error);
  if (!agent) {
    std::fprintf(stderr, "%s: %s\n", bench.c_str(), error.c_str());
    return nullptr;
  }
  *port = WaitForAgentPort(*agent);
  if (*port == 0) {
    std::fprintf(stderr, "%s: the agent did not start:\n%s\n", bench.c_str(), agent->Stderr().c_str());
    return nullptr;
  }
  return agent;
}

// utime + stime of pid in seconds; -1 when it cannot be read.
inline double CpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::size_t paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream rest(text.substr(paren + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  // Fields after "(comm)": state(3) ... utime(14) stime(15).
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A "VmXXX:   123 kB" field of /proc/PID/status in bytes; -1 when absent.
inline double StatusBytes(pid_t pid, const std::string& key) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::atof(line.c_str() + key.size() + 1) * 1024.0;
  }
  return -1;
}

// The 1-minute load average, from /proc/loadavg.
inline std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string one;
  f >> one;
  return one;
}

// The nearest-rank p-quantile of v (NaN when empty).
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const std::size_t i = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

inline std::string Mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

}  // namespace kvwatch::bench

#endif  // KVWATCH_BENCH_PROCESS_STATS_H_
