// HttpServer: the agent's one HTTP(S) server (/metrics, landing page, health),
// event-driven on Boost.Asio with Boost.Beast's HTTP/1.1 parser, applying the
// exporter-toolkit web config (config/web_config.h):
//
//   - TLS with OpenSSL when tls_server_config is set: certificate chain, key,
//     min/max version, and the client certificate policy (client_auth_type,
//     client_ca_file). Certificates are loaded by Create() and again by
//     ReloadWebConfig() (the agent calls it on SIGHUP; the toolkit re-reads them
//     per connection): connections opened after a reload use the new ones, open
//     connections keep theirs.
//   - Basic auth on every path, including unknown ones, when basic_auth_users is
//     set: 401 with `WWW-Authenticate: Basic realm="kvwatch"` otherwise
//     (agent/basic_auth.h).
//   - http_server_config.headers on every response (a header the handler set
//     itself wins, as in the toolkit).
//   - Compression, with cpp-httplib's compressors and its choice of encoding: a
//     response whose Content-Type is text/*, application/json, application/xml,
//     application/javascript, application/xhtml+xml or image/svg+xml is
//     compressed when Accept-Encoding names gzip, or brotli when it names br
//     (brotli wins when both are named; the names are matched as substrings, so
//     "gzip;q=0" still gets gzip). Handlers return plain bodies; every response
//     carries `Vary: Accept-Encoding`.
//   - Range headers are ignored: every answer is the whole body (a Range with
//     many ranges cannot multiply a response).
//
// Abusive clients (slowloris, idle connections, stalled TLS handshakes) cost a
// socket and a few KiB each, no thread, and are bounded three ways:
//   - read_timeout is a deadline for the whole TLS handshake and for the whole
//     request (headers and body), however slowly the bytes arrive;
//   - an idle keep-alive connection is closed after keep_alive_timeout;
//   - at most max_connections are open; a new one closes the connection that has
//     waited longest for its request (or handshake), or is itself closed when all
//     are busy answering.
// Every accepted connection sets TCP_NODELAY (a keep-alive response does not
// wait for the client's delayed ACK).
//
// Routing is by exact path. GET and HEAD reach the handler (HEAD gets the same
// headers without the body); other methods get 405 with `Allow: GET, HEAD`;
// unknown paths get 404. A handler that throws gets a 500 (and nothing about the
// exception is sent). A request whose headers pass 8 KiB gets 431, whose body
// passes max_request_body_bytes 413, one that cannot be parsed 400; each closes
// the connection.
//
// The server logs nothing itself; set HttpServerOptions::access_log for an
// access log. Start() binds the socket before returning, so port() is the real
// port at once (also for port 0, which picks a free one) and connections made
// after Start() returns are queued even before the network thread runs. The
// listening socket does not set SO_REUSEPORT: a port in use is an error naming
// the address.
//
// Threads: one network thread runs every socket (accepting, TLS, parsing,
// writing); handlers, the basic-auth check (bcrypt) and compression run on a
// small pool of handler threads, so a slow handler does not stall the sockets.
//
// Thread safety: Handle() and ReloadWebConfig() may be called at any time from any thread. Handlers
// run on the handler threads (several at once) and must be thread-safe. Start()
// and Stop() must not race each other; the destructor stops the server.
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
#include "base/status.h"
#include "base/thread_annotations.h"
#include "config/web_config.h"

namespace kvwatch::agent {

class BasicAuthenticator;

// What a handler sees of a request.
struct HttpRequest {
  std::string method;                                        // "GET" or "HEAD"
  std::string path;                                          // percent-decoded, without the query string
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
  std::size_t body_bytes = 0;             // as sent (after compression)
  std::string content_encoding;           // "gzip", "br" or ""
  std::chrono::microseconds duration{0};  // from routing to the end of writing
};
using AccessLogger = std::function<void(const AccessLogEntry&)>;

struct HttpServerOptions {
  // Host to bind: an IPv4/IPv6 literal or a name; "0.0.0.0" for every IPv4
  // interface, "::" for IPv6 (dual-stack where the kernel allows).
  // Defaults: config/web_config.h's, shared with the agent config's web.* keys.
  std::string listen_address{config::kDefaultListenAddress};
  int port = config::kDefaultPort;       // 0: pick a free port (tests)
  std::optional<config::WebConfig> web;  // nullopt: plain HTTP, no auth
  std::size_t max_request_body_bytes = 64 * 1024;
  // Deadline for the whole TLS handshake, and for a whole request from the time
  // the server starts waiting for it on a new connection or from its first byte
  // on a kept-alive one. Not per byte: a client that trickles is cut off.
  std::chrono::milliseconds read_timeout{5000};
  // Deadline for writing a whole response.
  std::chrono::milliseconds write_timeout{10000};
  // How long a kept-alive connection may wait for the next request's first byte.
  // Prometheus keeps its connection between scrapes and reconnects when it was
  // closed, so a short one costs it a TCP (and TLS) handshake per scrape.
  std::chrono::milliseconds keep_alive_timeout{2000};
  // Open connections at most (>= 1). Default: config/web_config.h's, the agent
  // config's web.max_connections.
  std::size_t max_connections = config::kDefaultMaxConnections;
  // Threads that run handlers, the basic-auth check and compression (>= 1).
  int handler_threads = 4;
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

  // Stops accepting, closes the connections that wait for a request, lets
  // requests in flight finish (their responses say `Connection: close`), joins
  // the threads. Idempotent.
  void Stop();

  // Replaces the web config in force (tls_server_config, basic_auth_users,
  // http_server_config.headers), built and checked as Create() does; on error the
  // previous one stays and nothing changes. TLS cannot be turned on or off (the
  // URL would change): that is an error naming tls_server_config. Any thread.
  base::Status ReloadWebConfig(const std::optional<config::WebConfig>& web);

  // Started, not stopped, and the network thread has not ended.
  bool is_running() const;
  // The bound port after Start(); options.port before.
  int port() const { return port_.load(); }
  bool tls() const { return tls_; }
  // "http://127.0.0.1:9477" or "https://[::1]:9477".
  std::string url() const;

 private:
  class Network;
  template <class Stream>
  class Session;
  struct Exchange;
  struct Security;

  HttpServer(HttpServerOptions options, bool tls, std::shared_ptr<const Security> security);
  static base::Result<std::shared_ptr<const Security>> MakeSecurity(const std::optional<config::WebConfig>& web);
  std::shared_ptr<const Security> CurrentSecurity() const;
  // Runs on a handler thread: authenticates, routes and encodes one request.
  void Answer(Exchange& exchange) const;
  HttpResponse Dispatch(const HttpRequest& request) const;

  // Constant after construction (options_.web: the web config Create() was given;
  // what is in force is security_'s).
  const HttpServerOptions options_;
  const bool tls_;
  const std::unique_ptr<Network> network_;  // sockets, threads

  mutable base::Mutex security_mutex_;
  std::shared_ptr<const Security> security_ GUARDED_BY(security_mutex_);  // never null

  mutable base::Mutex handlers_mutex_;
  std::map<std::string, HttpHandler> handlers_ GUARDED_BY(handlers_mutex_);

  std::atomic<int> port_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<bool> network_returned_{false};
};

// Parses a --web.listen-address value: "host:port", "[v6]:port" or ":port" (":port"
// means every IPv4 interface, "0.0.0.0"). The port must be 0 to 65535.
base::Result<std::pair<std::string, int>> ParseListenAddress(std::string_view address);

// "host:port", with brackets around an IPv6 host.
std::string FormatHostPort(const std::string& host, int port);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_HTTP_SERVER_H_
