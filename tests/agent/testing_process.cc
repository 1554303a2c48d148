// The bodies of tests/agent/testing_process.h (see there).
#include "tests/agent/testing_process.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <type_traits>

namespace kvwatch::agent::testing_support {

static_assert(std::is_same_v<FormParams, httplib::Params>, "FormParams is passed as httplib::Params");

namespace {

// argv as execv wants it (NUL-terminated copies and a null-ended pointer array),
// built before fork so that the child makes only async-signal-safe calls.
class ExecArgs {
 public:
  explicit ExecArgs(const std::vector<std::string>& argv) {
    for (const std::string& a : argv) {
      storage_.emplace_back(a.begin(), a.end());
      storage_.back().push_back('\0');
    }
    for (auto& s : storage_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
  }
  char* const* data() { return pointers_.data(); }
  char* operator[](std::size_t i) const { return pointers_[i]; }

 private:
  std::vector<std::vector<char>> storage_;
  std::vector<char*> pointers_;
};

}  // namespace

// ------------------------------------------------------------------ Files

TempDir::TempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) != nullptr) path_ = buf.data();
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

bool WriteFile(const std::string& path, const std::string& bytes, bool append) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd < 0) return false;
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return ::close(fd) == 0;
}

std::string Tail(const std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::string out = "...";
  out.append(text, text.size() - max_bytes, max_bytes);
  return out;
}

std::string FindProgram(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = (std::filesystem::path(dir) / name).string();
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// ------------------------------------------------------------------ Waiting

bool PollUntil(const std::function<bool()>& pred, Millis timeout, Millis interval) {
  const auto deadline = SteadyClock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(interval);
  }
}

// ------------------------------------------------------------------ Processes

std::string DescribeWaitStatus(std::optional<int> status) {
  if (!status) return "still running";
  if (WIFEXITED(*status)) return "exit " + std::to_string(WEXITSTATUS(*status));
  if (WIFSIGNALED(*status)) return "killed by signal " + std::to_string(WTERMSIG(*status));
  return "wait status " + std::to_string(*status);
}

std::unique_ptr<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv, const std::string& stdout_path,
                                                  const std::string& stderr_path, std::string* error,
                                                  const std::string& stdin_path) {
  // Everything the child needs is prepared before fork: after it only
  // async-signal-safe calls are made.
  ExecArgs args(argv);
  const std::string in = stdin_path.empty() ? "/dev/null" : stdin_path;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return nullptr;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    const int in_fd = ::open(in.c_str(), O_RDONLY);
    const int out_fd = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in_fd < 0 || out_fd < 0 || err_fd < 0) ::_exit(125);
    ::dup2(in_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    ::execv(args[0], args.data());
    const char msg[] = "exec failed\n";
    (void)!::write(2, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, stdout_path, stderr_path));
}

ChildProcess::~ChildProcess() {
  if (!status_) {
    ::kill(pid_, SIGKILL);
    Reap(0);
  }
}

bool ChildProcess::Running() {
  if (!status_) Reap(WNOHANG);
  return !status_;
}

bool ChildProcess::Signal(int signal) { return Running() && ::kill(pid_, signal) == 0; }

std::optional<int> ChildProcess::Wait(Millis timeout) {
  PollUntil([&] { return !Running(); }, timeout, Millis(10));
  return status_;
}

std::optional<int> ChildProcess::Terminate(Millis timeout) {
  if (!Running()) return status_;
  Signal(SIGTERM);
  if (Wait(timeout)) return status_;
  ::kill(pid_, SIGKILL);
  Reap(0);
  return std::nullopt;
}

ChildProcess::ChildProcess(pid_t pid, std::string out, std::string err)
    : pid_(pid), stdout_path_(std::move(out)), stderr_path_(std::move(err)) {
  std::memset(&usage_, 0, sizeof(usage_));
}

void ChildProcess::Reap(int flags) {
  int status = 0;
  pid_t r;
  do {
    r = ::wait4(pid_, &status, flags, &usage_);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) status_ = status;
  if (r < 0 && errno == ECHILD) status_ = status_.value_or(-1);
}

std::string CommandResult::Describe() const {
  return DescribeWaitStatus(status) + "\nstdout:\n" + Tail(out) + "\nstderr:\n" + Tail(err);
}

CommandResult RunCommand(const std::vector<std::string>& argv, Millis timeout, const std::string& stdin_path) {
  CommandResult result;
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return result;
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return result;
  }
  ExecArgs args(argv);
  const std::string in = stdin_path.empty() ? "/dev/null" : stdin_path;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int in_fd = ::open(in.c_str(), O_RDONLY);
    if (in_fd < 0) ::_exit(125);
    ::dup2(in_fd, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::execv(args[0], args.data());
    const char msg[] = "exec failed\n";
    (void)!::write(2, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (pid < 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    result.err = std::string("fork: ") + std::strerror(errno);
    return result;
  }
  const auto deadline = SteadyClock::now() + timeout;
  struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  bool timed_out = false;
  char buf[65536];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<Millis>(deadline - SteadyClock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    const int n = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t r = ::read(fds[i].fd, buf, sizeof(buf));
      if (r > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(r));
      } else if (r == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!timed_out) result.status = status;
  return result;
}

// ------------------------------------------------------------------ Network

int PickFreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

HttpResult HttpGet(int port, const std::string& path, Millis timeout) {
  httplib::Client client("127.0.0.1", port);
  const auto secs = static_cast<time_t>(timeout.count() / 1000);
  const auto usecs = static_cast<time_t>((timeout.count() % 1000) * 1000);
  client.set_connection_timeout(secs, usecs);
  client.set_read_timeout(secs, usecs);
  HttpResult out;
  auto res = client.Get(path.c_str());
  if (!res) {
    out.error = httplib::to_string(res.error());
    return out;
  }
  out.status = res->status;
  out.body = res->body;
  out.content_type = res->get_header_value("Content-Type");
  return out;
}

HttpResult HttpPostForm(int port, const std::string& path, const FormParams& params, Millis timeout) {
  httplib::Client client("127.0.0.1", port);
  const auto secs = static_cast<time_t>(timeout.count() / 1000);
  const auto usecs = static_cast<time_t>((timeout.count() % 1000) * 1000);
  client.set_connection_timeout(secs, usecs);
  client.set_read_timeout(secs, usecs);
  HttpResult out;
  auto res = client.Post(path.c_str(), params);
  if (!res) {
    out.error = httplib::to_string(res.error());
    return out;
  }
  out.status = res->status;
  out.body = res->body;
  out.content_type = res->get_header_value("Content-Type");
  return out;
}

}  // namespace kvwatch::agent::testing_support
