// Test support for the agent's acceptance tests: real processes, real sockets.
//
// TempDir is a fresh directory removed (recursively) when it goes out of scope.
// ChildProcess runs a program (fork + execv, no shell) with its standard streams
// redirected to files; its destructor SIGKILLs and reaps a child that is still
// running, so a failed ASSERT never leaves a process behind, and the child gets
// PR_SET_PDEATHSIG so that even a crashed test binary takes it down. RunCommand
// runs a short-lived program to completion with its output captured through
// pipes, bounded by a deadline. HttpGet is one GET on 127.0.0.1 (cpp-httplib).
// PollUntil is the only way these tests wait: a predicate polled until it holds
// or a deadline passes (never a fixed sleep where a poll works).
//
// Deadlines bound how long a broken build can hang a test; they are never
// assertions about speed.
//
// The bodies are in testing_process.cc, compiled once into the agent's test
// executable (and the benchmarks that start the agent): this header keeps only
// light includes (no cpp-httplib), since most agent test files include it.
//
// Thread safety: none; every object belongs to the test's thread.
#ifndef KVWATCH_TESTS_AGENT_TESTING_PROCESS_H_
#define KVWATCH_TESTS_AGENT_TESTING_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace kvwatch::agent::testing_support {

using Millis = std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// ------------------------------------------------------------------ Files

// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "kvwatch_agent_test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path);

// Writes (or appends) bytes and flushes them to the file before returning.
bool WriteFile(const std::string& path, const std::string& bytes, bool append = false);
inline bool AppendFile(const std::string& path, const std::string& bytes) { return WriteFile(path, bytes, true); }

// The last max_bytes of text, for failure messages.
std::string Tail(const std::string& text, std::size_t max_bytes = 4000);

// The absolute path of an executable found on $PATH, or "" when there is none.
std::string FindProgram(const std::string& name);

// ------------------------------------------------------------------ Waiting

// Calls pred every interval until it returns true (true) or timeout passes (false).
bool PollUntil(const std::function<bool()>& pred, Millis timeout, Millis interval = Millis(50));

// ------------------------------------------------------------------ Processes

// How a process ended: "exit 0", "killed by signal 9", "still running".
std::string DescribeWaitStatus(std::optional<int> status);

// One child process with stdin from a file (or /dev/null) and stdout and stderr to files.
class ChildProcess {
 public:
  // argv[0] is the program's path (no $PATH lookup). Empty stdin_path: /dev/null.
  // Returns nullptr (with *error set) when fork fails; an exec failure shows as
  // exit status 127 with a message in the stderr file.
  static std::unique_ptr<ChildProcess> Start(const std::vector<std::string>& argv, const std::string& stdout_path,
                                             const std::string& stderr_path, std::string* error,
                                             const std::string& stdin_path = "");

  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& stdout_path() const { return stdout_path_; }
  const std::string& stderr_path() const { return stderr_path_; }
  std::string Stdout() const { return ReadFile(stdout_path_); }
  std::string Stderr() const { return ReadFile(stderr_path_); }

  bool Running();
  // The wait status once the process has ended.
  std::optional<int> status() const { return status_; }
  // Resource use of the ended process (wait4), zero while it runs.
  const struct rusage& usage() const { return usage_; }

  bool Signal(int signal);

  // Waits up to timeout for the process to end; its wait status, or nullopt.
  std::optional<int> Wait(Millis timeout);

  // SIGTERM, then up to timeout for the exit; SIGKILL after that. The wait status
  // of the SIGTERM exit, or nullopt when it had to be killed.
  std::optional<int> Terminate(Millis timeout);

 private:
  ChildProcess(pid_t pid, std::string out, std::string err);
  void Reap(int flags);

  pid_t pid_;
  std::string stdout_path_;
  std::string stderr_path_;
  std::optional<int> status_;
  struct rusage usage_;
};

struct CommandResult {
  std::optional<int> status;  // nullopt: timed out (and killed)
  std::string out;
  std::string err;

  bool Exited(int code) const { return status && WIFEXITED(*status) && WEXITSTATUS(*status) == code; }
  std::string Describe() const;
};

// Runs argv (argv[0] a path) to completion with stdout and stderr read through
// pipes; stdin from stdin_path (empty: /dev/null). Killed after timeout.
CommandResult RunCommand(const std::vector<std::string>& argv, Millis timeout, const std::string& stdin_path = "");

// ------------------------------------------------------------------ Network

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then
// closed), for programs that must be told their port. 0 on failure.
int PickFreePort();

struct HttpResult {
  int status = 0;  // 0: no response (the error says why)
  std::string body;
  std::string content_type;
  std::string error;
};

HttpResult HttpGet(int port, const std::string& path, Millis timeout = Millis(10000));

// Form fields of a POST: the same type as httplib::Params.
using FormParams = std::multimap<std::string, std::string>;

// A form POST (application/x-www-form-urlencoded), as Prometheus' query API takes.
HttpResult HttpPostForm(int port, const std::string& path, const FormParams& params, Millis timeout = Millis(10000));

}  // namespace kvwatch::agent::testing_support

#endif  // KVWATCH_TESTS_AGENT_TESTING_PROCESS_H_
