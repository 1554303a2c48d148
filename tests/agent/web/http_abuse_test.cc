// Tests of agent/web/http_server.h under abusive clients, over real sockets on
// 127.0.0.1: 1,000 connections that sit idle, trickle request headers
// (slowloris), never start the TLS handshake or stall in the middle of it, while
// a prober checks that /metrics and /healthz keep answering.
// The test prints the figures it saw (probe latencies, the process's RSS, the
// keep-alive median) for the report. What it asserts is what the abusers could
// break, not how fast the machine is:
//   - every probe is answered (the client waits up to 20 s, four times the
//     server's 5 s read deadline): a server that stops accepting at its
//     connection cap, or closes the newest connection instead of the oldest,
//     fails probes;
//   - without a cap, the median probe within 1 s: a server that lets stalled
//     handshakes or slow headers hold it up makes most probes wait for an abuser
//     to be cut off at the 5 s deadline (measured: 8-24 ms median at a load
//     average of 25, where an assertion on the worst probe, 2.2 s, failed);
//   - with the cap, no latency bound: the abusers reconnect as fast as the server
//     closes them, so each probe's latency is the CPU the machine has left for
//     TLS handshakes (2.1 s median beside stress-ng and four builds); instead the
//     cap, not the deadline, must have closed most connections.
// The 1 s per request the server promises on an idle machine is the figure each
// scenario prints. The three load scenarios take a lock shared by every test
// process (LoadLock), so that ctest's parallel slots never run 2,000 or 3,000
// abusers at once on a 2-core machine.
//
// Threads: one abuser thread per test besides the server's own, and the prober
// on the test thread.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/web/http_server.h"
#include "config/web_config.h"

namespace kvwatch::agent {
namespace {

using base::Result;
using base::Status;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// KVWATCH_ABUSE_CONNECTIONS overrides the count (to measure beyond it).
const int kAbusers = [] {
  const char* n = std::getenv("KVWATCH_ABUSE_CONNECTIONS");
  return n != nullptr ? std::atoi(n) : 1000;
}();
// How long each scenario abuses the server: longer than the server's 5 s request
// deadline, so the abusers are cut off and reconnect during the test.
constexpr auto kAbuseFor = std::chrono::seconds(9);
// The median probe's bound without a connection cap (see above).
constexpr auto kMedianBound = milliseconds(1000);

// Held by a load scenario for its whole run: an exclusive flock on a file in the
// system's temp folder, shared by every test process of the machine.
class LoadLock {
 public:
  LoadLock() {
    const std::string path = (std::filesystem::temp_directory_path() / "kvwatch_http_abuse_test.lock").string();
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ >= 0) flock(fd_, LOCK_EX);  // blocks until the other scenario ends
  }
  ~LoadLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  LoadLock(const LoadLock&) = delete;
  LoadLock& operator=(const LoadLock&) = delete;

 private:
  int fd_ = -1;
};

// Raises the soft limit on open files: the test holds both ends of each
// abusive connection in one process.
void RaiseFileLimit(rlim_t wanted) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur >= wanted) return;
  limit.rlim_cur = std::min(wanted, limit.rlim_max);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
  ASSERT_GE(limit.rlim_cur, wanted) << "raise the hard limit: ulimit -Hn " << wanted;
}

// VmRSS of this process, in KiB.
long RssKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// ---------------------------------------------------------------------------
// A throwaway self-signed certificate for 127.0.0.1.

struct Files {
  std::filesystem::path dir;
  std::string cert, key;
};

const Files& TlsFiles() {
  static const Files* files = [] {
    auto* f = new Files;
    f->dir = std::filesystem::path(testing::TempDir()) / ("kvwatch_http_abuse_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(f->dir);
    f->cert = (f->dir / "server.crt").string();
    f->key = (f->dir / "server.key").string();
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
    X509_set_pubkey(x, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
    X509_set_issuer_name(x, X509_get_subject_name(x));
    X509_sign(x, key, EVP_sha256());
    std::FILE* out = std::fopen(f->cert.c_str(), "w");
    PEM_write_X509(out, x);
    std::fclose(out);
    out = std::fopen(f->key.c_str(), "w");
    PEM_write_PrivateKey(out, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(out);
    X509_free(x);
    EVP_PKEY_free(key);
    return f;
  }();
  return *files;
}

class FilesCleanup : public testing::Environment {
 public:
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(TlsFiles().dir, ignored);
  }
};
testing::Environment* const kCleanup = testing::AddGlobalTestEnvironment(new FilesCleanup);

// The bytes of a real TLS ClientHello, as a client would send first.
std::string ClientHello() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);  // ssl owns both
  SSL_set_connect_state(ssl);
  SSL_do_handshake(ssl);  // wants to read the ServerHello
  std::string hello(static_cast<std::size_t>(BIO_ctrl_pending(out)), '\0');
  BIO_read(out, hello.data(), static_cast<int>(hello.size()));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return hello;
}

// ---------------------------------------------------------------------------
// The abuser: keeps n connections open, reconnecting any the server closes, and
// feeds each its script a little at a time.

enum class Abuse {
  kIdle,          // connects and sends nothing (for TLS: never starts the handshake)
  kSlowHeaders,   // a request line, then one header line per tick, forever
  kSlowHello,     // a TLS ClientHello, 16 bytes per tick
  kStalledHello,  // a whole ClientHello, then nothing (the server waits for the client)
};

class Abuser {
 public:
  Abuser(int port, std::vector<Abuse> mix, milliseconds tick) : port_(port), tick_(tick), hello_(ClientHello()) {
    for (Abuse a : mix) conns_.push_back(Conn{a, -1, 0, 0});
    for (Conn& c : conns_) Connect(c);
    thread_ = std::thread([this] { Run(); });
  }
  ~Abuser() {
    stop_ = true;
    thread_.join();
    for (Conn& c : conns_) {
      if (c.fd >= 0) close(c.fd);
    }
  }
  // Connections the server closed (and the abuser reopened).
  int closed_by_server() const { return closed_.load(); }
  // The most connections that were established at once.
  int max_connected() const { return max_connected_.load(); }

 private:
  struct Conn {
    Abuse abuse;
    int fd;
    std::size_t sent;  // bytes of the script sent
    int lines;         // header lines sent (kSlowHeaders)
  };

  void Connect(Conn& c) {
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    c.sent = 0;
    c.lines = 0;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(c.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));  // EINPROGRESS
  }

  // The next bytes c sends; empty when it has nothing more to send now.
  std::string Next(const Conn& c) const {
    switch (c.abuse) {
      case Abuse::kIdle:
        return "";
      case Abuse::kSlowHeaders:
        if (c.lines == 0) return "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
        return "X-Slow-" + std::to_string(c.lines) + ": still coming\r\n";
      case Abuse::kSlowHello:
        return c.sent < hello_.size() ? hello_.substr(c.sent, 16) : "";
      case Abuse::kStalledHello:
        return c.sent == 0 ? hello_ : "";
    }
    return "";
  }

  void Run() {
    std::vector<pollfd> fds(conns_.size());
    char sink[4096];
    while (!stop_) {
      for (std::size_t i = 0; i < conns_.size(); ++i) {
        fds[i] = pollfd{conns_[i].fd, POLLIN | POLLRDHUP | POLLOUT, 0};
      }
      poll(fds.data(), fds.size(), 0);
      int connected = 0;
      for (const pollfd& p : fds) connected += (p.revents & POLLOUT) != 0 ? 1 : 0;
      if (connected > max_connected_.load()) max_connected_ = connected;
      for (std::size_t i = 0; i < conns_.size(); ++i) {
        Conn& c = conns_[i];
        bool closed = (fds[i].revents & (POLLERR | POLLHUP | POLLRDHUP)) != 0;
        if (!closed && (fds[i].revents & POLLIN) != 0) {
          ssize_t n = recv(c.fd, sink, sizeof(sink), 0);  // a ServerHello, or an EOF
          closed = n == 0 || (n < 0 && errno != EAGAIN);
        }
        if (closed) {
          close(c.fd);
          ++closed_;
          Connect(c);
          continue;
        }
        std::string bytes = Next(c);
        if (bytes.empty()) continue;
        ssize_t n = send(c.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n == static_cast<ssize_t>(bytes.size())) {  // else not connected yet: next tick
          c.sent += bytes.size();
          ++c.lines;
        }
      }
      std::this_thread::sleep_for(tick_);
    }
  }

  const int port_;
  const milliseconds tick_;
  const std::string hello_;
  std::vector<Conn> conns_;  // the abuser thread's only
  std::atomic<bool> stop_{false};
  std::atomic<int> closed_{0};
  std::atomic<int> max_connected_{0};
  std::thread thread_;
};

// ---------------------------------------------------------------------------
// The server and the prober

std::unique_ptr<HttpServer> StartServer(bool tls, HttpServerOptions options = {}) {
  options.listen_address = "127.0.0.1";
  options.port = 0;
  if (tls) {
    config::WebConfig web;
    config::TlsServerConfig tls_config;
    tls_config.cert_file = TlsFiles().cert;
    tls_config.key_file = TlsFiles().key;
    web.tls = tls_config;
    options.web = web;
  }
  Result<std::unique_ptr<HttpServer>> created = HttpServer::Create(std::move(options));
  EXPECT_TRUE(created.ok()) << (created.ok() ? "" : created.error());
  if (!created.ok()) return nullptr;
  std::unique_ptr<HttpServer> server = std::move(created).value();
  std::string exposition;
  for (int i = 0; i < 40; ++i) exposition += "kvwatch_test_series{i=\"" + std::to_string(i) + "\"} 1\n";
  server->Handle("/metrics", [exposition](const HttpRequest&) {
    HttpResponse response;
    response.content_type = "text/plain; version=0.0.4; charset=utf-8";
    response.body = exposition;
    return response;
  });
  server->Handle("/healthz", [](const HttpRequest&) {
    HttpResponse response;
    response.body = "ok\n";
    return response;
  });
  Status started = server->Start();
  EXPECT_TRUE(started.ok()) << (started.ok() ? "" : started.error());
  return started.ok() ? std::move(server) : nullptr;
}

std::unique_ptr<httplib::Client> NewClient(const HttpServer& server) {
  auto client = std::make_unique<httplib::Client>(server.url());
  // tests/agent/http_server_test.cc verifies the certificate; here it is throwaway.
  client->enable_server_certificate_verification(false);
  // Four times the server's 5 s read deadline (see the file comment).
  client->set_connection_timeout(20, 0);
  client->set_read_timeout(20, 0);
  return client;
}

struct Probes {
  std::vector<double> ms;  // per request, -1 when it failed
  long max_rss_kib = 0;
};

// Alternates GET /metrics and GET /healthz on fresh connections (the way
// Prometheus starts after the server dropped its connection) for `duration`.
Probes Probe(const HttpServer& server, Clock::duration duration) {
  Probes probes;
  Clock::time_point end = Clock::now() + duration;
  for (int i = 0; Clock::now() < end; ++i) {
    const char* path = i % 2 == 0 ? "/metrics" : "/healthz";
    Clock::time_point start = Clock::now();
    httplib::Result r = NewClient(server)->Get(path);
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    bool ok = r && r->status == 200;
    probes.ms.push_back(ok ? ms : -1);
    EXPECT_TRUE(ok) << path << " #" << i << ": " << (r ? std::to_string(r->status) : httplib::to_string(r.error()));
    probes.max_rss_kib = std::max(probes.max_rss_kib, RssKib());
    std::this_thread::sleep_for(milliseconds(200));
  }
  return probes;
}

void Report(const char* what, const Probes& probes, long rss_before, const Abuser& abuser) {
  std::vector<double> ms = probes.ms;
  std::sort(ms.begin(), ms.end());
  std::printf(
      "[ figures  ] %s: %zu probes, median %.1f ms, max %.1f ms; RSS %ld KiB before, "
      "max %ld KiB during (+%ld KiB); up to %d abusive connections at once, %d closed by the "
      "server; %d probes failed\n",
      what, ms.size(), ms.empty() ? 0.0 : ms[ms.size() / 2], ms.empty() ? 0.0 : ms.back(), rss_before,
      probes.max_rss_kib, probes.max_rss_kib - rss_before, abuser.max_connected(), abuser.closed_by_server(),
      static_cast<int>(std::count(ms.begin(), ms.end(), -1.0)));
}

// Waits (bounded) until at least half the abusers have been connected at once, so
// that the probes start under the abuse.
bool WaitConnected(const Abuser& abuser) {
  const Clock::time_point end = Clock::now() + std::chrono::seconds(60);
  while (abuser.max_connected() < kAbusers / 2) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

// The median of the probes that were answered.
void ExpectMedianWithinBound(const Probes& probes) {
  std::vector<double> ms;
  for (double m : probes.ms) {
    if (m >= 0) ms.push_back(m);
  }
  ASSERT_FALSE(ms.empty()) << "no probe was answered";
  std::sort(ms.begin(), ms.end());
  EXPECT_LT(ms[ms.size() / 2], kMedianBound.count()) << "the median probe";
}

// n connections with the given kinds of abuse, in turn.
std::vector<Abuse> Mix(std::initializer_list<Abuse> kinds, int n) {
  std::vector<Abuse> mix;
  std::vector<Abuse> k(kinds);
  for (int i = 0; i < n; ++i) mix.push_back(k[i % k.size()]);
  return mix;
}

class HttpAbuseTest : public testing::Test {
 protected:
  void SetUp() override { RaiseFileLimit(4 * kAbusers + 256); }
};

// Under ThreadSanitizer one TLS handshake costs many times its normal CPU, and
// the 1 s bound is a property of the normal build; the races are checked by the
// plain scenario and by http_server_test's TLS tests. g++ defines
// __SANITIZE_THREAD__; clang (which builds build-tsan/) does not before clang 17
// and answers __has_feature(thread_sanitizer) instead.
#if defined(__SANITIZE_THREAD__)
#define KVWATCH_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVWATCH_UNDER_TSAN 1
#endif
#endif
#if defined(KVWATCH_UNDER_TSAN)
#define KVWATCH_SKIP_TLS_LOAD_UNDER_TSAN() GTEST_SKIP() << "TLS load under ThreadSanitizer"
#else
#define KVWATCH_SKIP_TLS_LOAD_UNDER_TSAN() (void)0
#endif

TEST_F(HttpAbuseTest, PlainAnswersWithinASecondUnderSlowAndIdleConnections) {
  LoadLock load;
  std::unique_ptr<HttpServer> server = StartServer(false);
  ASSERT_NE(server, nullptr);
  long rss_before = RssKib();
  Abuser abuser(server->port(), Mix({Abuse::kSlowHeaders, Abuse::kIdle}, kAbusers), milliseconds(500));
  ASSERT_TRUE(WaitConnected(abuser));
  Probes probes = Probe(*server, kAbuseFor);
  Report("plain, 500 slowloris + 500 idle", probes, rss_before, abuser);
  ExpectMedianWithinBound(probes);
}

TEST_F(HttpAbuseTest, TlsAnswersWithinASecondUnderStalledHandshakes) {
  KVWATCH_SKIP_TLS_LOAD_UNDER_TSAN();
  LoadLock load;
  std::unique_ptr<HttpServer> server = StartServer(true);
  ASSERT_NE(server, nullptr);
  long rss_before = RssKib();
  Abuser abuser(server->port(), Mix({Abuse::kIdle, Abuse::kSlowHello, Abuse::kStalledHello}, kAbusers),
                milliseconds(500));
  ASSERT_TRUE(WaitConnected(abuser));
  Probes probes = Probe(*server, kAbuseFor);
  Report("TLS, 334 no handshake + 333 slow ClientHello + 333 stalled after it", probes, rss_before, abuser);
  ExpectMedianWithinBound(probes);
}

// The same with a cap below the number of abusers: the server keeps at most 256
// connections (its memory bound) by closing the ones that have waited longest,
// and every probe still gets through (no latency bound: see the file comment).
TEST_F(HttpAbuseTest, TlsCappedAnswersEveryProbeAndClosesTheOldest) {
  KVWATCH_SKIP_TLS_LOAD_UNDER_TSAN();
  HttpServerOptions options;
  options.max_connections = 256;
  LoadLock load;
  std::unique_ptr<HttpServer> server = StartServer(true, options);
  ASSERT_NE(server, nullptr);
  long rss_before = RssKib();
  Abuser abuser(server->port(), Mix({Abuse::kIdle, Abuse::kSlowHello, Abuse::kStalledHello}, kAbusers),
                milliseconds(500));
  ASSERT_TRUE(WaitConnected(abuser));
  Probes probes = Probe(*server, kAbuseFor);
  Report("TLS, max_connections 256, the same 1000", probes, rss_before, abuser);
  // The cap, not the deadline, closed most of them: the 5 s deadline alone closes
  // each abuser's connection about once in the 9 s (each reconnects and is cut
  // again after the test), so more than 1.5 closes per abuser means the cap
  // closed at least 500.
  EXPECT_GT(abuser.closed_by_server(), kAbusers * 3 / 2);
}

// Not a bound (wall time is not asserted): the figure for the report. A
// keep-alive connection must not wait for the delayed ACK (TCP_NODELAY).
TEST_F(HttpAbuseTest, KeepAliveLatency) {
  for (bool tls : {false, true}) {
    std::unique_ptr<HttpServer> server = StartServer(tls);
    ASSERT_NE(server, nullptr);
    std::unique_ptr<httplib::Client> client = NewClient(*server);
    client->set_keep_alive(true);
    std::vector<double> ms;
    for (int i = 0; i < 200; ++i) {
      Clock::time_point start = Clock::now();
      httplib::Result r = client->Get("/metrics");
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      ASSERT_TRUE(r) << httplib::to_string(r.error());
      ASSERT_EQ(r->status, 200);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("[ figures  ] %s keep-alive GET /metrics: median %.2f ms, p90 %.2f ms\n", tls ? "TLS" : "plain",
                ms[ms.size() / 2], ms[ms.size() * 9 / 10]);
  }
}

}  // namespace
}  // namespace kvwatch::agent
