// HttpServer: the agent's one HTTP(S) server (/metrics, landing page, health),
// a thin wrapper over cpp-httplib 0.11.4's httplib::Server / httplib::SSLServer
// that applies the exporter-toolkit web config (config/web_config.h):
//
//   - TLS with OpenSSL when tls_server_config is set: certificate chain, key,
//     min/max version, and the client certificate policy (client_auth_type,
//     client_ca_file). Certificates are loaded once, by Create() (the toolkit
//     re-reads them per connection; kvwatch needs a restart to pick up new ones).
//   - Basic auth on every path, including unknown ones, when basic_auth_users is
//     set: 401 with `WWW-Authenticate: Basic realm="kvwatch"` otherwise
//     (agent/basic_auth.h).
//   - http_server_config.headers on every response (a header the handler set
//     itself wins, as in the toolkit).
//   - Compression: cpp-httplib compresses a response whose Content-Type is
//     text/*, application/json, application/xml, application/javascript,
//     application/xhtml+xml or image/svg+xml when Accept-Encoding names gzip,
//     or brotli when it names br (brotli wins when both are named). Debian's
//     build has CPPHTTPLIB_ZLIB_SUPPORT and CPPHTTPLIB_BROTLI_SUPPORT (see
//     `pkg-config --cflags cpp-httplib`). Handlers return plain bodies; every
//     response carries `Vary: Accept-Encoding`. httplib matches the names as
//     substrings, so "gzip;q=0" still gets gzip.
//
// Routing is by exact path. GET and HEAD reach the handler (HEAD gets the same
// headers without the body); other methods get 405 with `Allow: GET, HEAD`;
// unknown paths get 404. A handler that throws gets a 500 (and nothing about the
// exception is sent).
//
// The server logs nothing itself; set HttpServerOptions::access_log for an
// access log. Start() binds the socket before returning, so port() is the real
// port at once (also for port 0, which picks a free one) and connections made
// after Start() returns are queued even before the accept thread runs. The
// listening socket does not set SO_REUSEPORT (cpp-httplib 0.11.4 does by
// default, which lets two servers share a port silently): a port in use is an
// error naming the address.
//
// Thread safety: Handle() may be called at any time from any thread. Handlers
// run on cpp-httplib's worker threads (several at once) and must be
// thread-safe. Start() and Stop() must not race each other; the destructor
// stops the server.
#ifndef KVWATCH_AGENT_HTTP_SERVER_H_
#define KVWATCH_AGENT_HTTP_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "config/web_config.h"
#include "base/status.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace kvwatch::agent {

class BasicAuthenticator;

// What a handler sees of a request.
struct HttpRequest {
  std::string method;  // "GET" or "HEAD"
  std::string path;    // percent-decoded, without the query string
  std::vector<std::pair<std::string, std::string>> query;    // decoded; sorted by name
  std::vector<std::pair<std::string, std::string>> headers;  // as received
  std::string remote_address;
  std::string user;  // the basic-auth user; empty when auth is off

  // The first value of a header, name matched case-insensitively; "" if absent.
  std::string Header(std::string_view name) const;
  // The first value of a query parameter; nullopt if absent.
  std::optional<std::string> Query(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // added as given
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// One line of an access log, given after the response was written.
struct AccessLogEntry {
  std::string method;
  std::string path;
  std::string remote_address;
  std::string user;  // authenticated user; empty when none
  int status = 0;
  std::size_t body_bytes = 0;      // as sent (after compression)
  std::string content_encoding;    // "gzip", "br" or ""
  std::chrono::microseconds duration{0};  // from routing to the end of writing
};
using AccessLogger = std::function<void(const AccessLogEntry&)>;

struct HttpServerOptions {
  // Host to bind: an IPv4/IPv6 literal or a name; "0.0.0.0" for every IPv4
  // interface, "::" for IPv6 (dual-stack where the kernel allows).
  // Defaults: config/web_config.h's, shared with the agent config's web.* keys.
  std::string listen_address{config::kDefaultListenAddress};
  int port = config::kDefaultPort;  // 0: pick a free port (tests)
  std::optional<config::WebConfig> web;  // nullopt: plain HTTP, no auth
  std::size_t max_request_body_bytes = 64 * 1024;
  std::chrono::seconds read_timeout{5};
  std::chrono::seconds write_timeout{10};
  // How long an idle keep-alive connection is kept. Each open connection holds
  // one of cpp-httplib's worker threads, and Stop() waits this long for idle
  // ones (cpp-httplib 0.11.4 does not interrupt them). Prometheus scrapes every
  // 15 s or more, so it reconnects anyway.
  std::chrono::seconds keep_alive_timeout{2};
  AccessLogger access_log;  // may be empty; called on worker threads
};

class HttpServer {
 public:
  // Loads and checks the TLS files and the users' hashes. Errors name the
  // setting and the file, e.g. `tls_server_config.key_file "/x/k.pem": ...`.
  static base::Result<std::unique_ptr<HttpServer>> Create(HttpServerOptions options);

  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves path (exact match, e.g. "/metrics") with handler, replacing any
  // earlier handler for it.
  void Handle(const std::string& path, HttpHandler handler);

  // Binds and starts accepting on a thread of its own. Errors: "cannot listen on
  // 127.0.0.1:9477: Address already in use", or when already started.
  base::Status Start();

  // Stops accepting, lets requests in flight finish, joins the thread. May take
  // up to keep_alive_timeout when a client holds an idle connection. Idempotent.
  void Stop();

  // Started, not stopped, and the accept loop has not ended.
  bool is_running() const;
  // The bound port after Start(); options.port before.
  int port() const { return port_.load(); }
  bool tls() const { return tls_; }
  // "http://127.0.0.1:9477" or "https://[::1]:9477".
  std::string url() const;

 private:
  HttpServer(HttpServerOptions options, std::unique_ptr<httplib::Server> server, bool tls,
             std::unique_ptr<BasicAuthenticator> auth);
  void Configure();
  bool Route(const httplib::Request& req, httplib::Response& res);
  HttpResponse Dispatch(const HttpRequest& request);
  void AddConfiguredHeaders(httplib::Response& res) const;
  void LogAccess(const httplib::Request& req, const httplib::Response& res) const;

  // Constant after construction.
  const HttpServerOptions options_;
  const std::unique_ptr<httplib::Server> server_;
  const bool tls_;
  const std::unique_ptr<BasicAuthenticator> auth_;  // null when auth is off

  base::Mutex handlers_mutex_;
  std::map<std::string, HttpHandler> handlers_ GUARDED_BY(handlers_mutex_);

  std::atomic<int> port_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<bool> listen_returned_{false};
  std::thread thread_;
};

// Parses a --web.listen-address value: "host:port", "[v6]:port" or ":port" (":port"
// means every IPv4 interface, "0.0.0.0"). The port must be 0 to 65535.
base::Result<std::pair<std::string, int>> ParseListenAddress(std::string_view address);

// "host:port", with brackets around an IPv6 host.
std::string FormatHostPort(const std::string& host, int port);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_HTTP_SERVER_H_
