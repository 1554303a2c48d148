// HttpServer (http_server.h): the listening socket, the network thread and the
// handler pool, one Beast session per connection (TLS handshake, reading with
// deadlines, the connection cap, writing, lingering), and the authentication and
// routing of each request. The TLS context is set up by tls_context.cc; responses
// are encoded and compressed by http_response.cc.
#include "agent/web/http_server.h"

#include <httplib.h>
#include <netdb.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <list>
#include <type_traits>
#include <utility>  // before Boost.Asio: g++ 12 in C++20 needs it first (docs/dependencies.md)

#include "agent/web/basic_auth.h"
#include "agent/web/http_response.h"
#include "agent/web/tls_context.h"

namespace kvwatch::agent {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using base::Result;
using base::Status;
using Clock = std::chrono::steady_clock;

// Request headers larger than this get 431 (cpp-httplib's limit too).
constexpr std::uint32_t kHeaderLimit = 8192;
// The read buffer of a connection: the headers must fit in it; a body streams
// through it into the request.
constexpr std::size_t kReadBufferLimit = 2 * kHeaderLimit;

using web_internal::ConfigureTls;
using web_internal::Encode;
using web_internal::OpenSslErrors;
using web_internal::Response;
using web_internal::StatusForReadError;
using web_internal::TextResponse;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// A connection as the network thread sees it, for the connection cap and Stop().
class Connection {
 public:
  virtual ~Connection() = default;
  // Closes the socket; the operations pending on it end with an error and the
  // connection goes away with them. Network thread only.
  virtual void Close() = 0;

  // While the connection waits for a request or its TLS handshake: its place
  // in Network::waiting.
  std::list<Connection*>::iterator waiting_at;
  bool waiting = false;
  bool counted = true;  // in Network::open
};

// Fails when host does not resolve to an address that can be bound.
Status CheckResolvable(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &result);
  if (rc != 0) {
    return Status::Error("cannot listen on " + FormatHostPort(host, port) +
                         ": cannot resolve the address: " + gai_strerror(rc));
  }
  freeaddrinfo(result);
  return Status::Ok();
}

}  // namespace

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoreCase(key, name)) return value;
  }
  return "";
}

std::optional<std::string> HttpRequest::Query(std::string_view name) const {
  for (const auto& [key, value] : query) {
    if (key == name) return value;
  }
  return std::nullopt;
}

// The sockets and the threads. Constant after construction except where noted.
class HttpServer::Network {
 public:
  explicit Network(int handler_threads) : handlers(static_cast<std::size_t>(handler_threads)) {}

  void Accept(const HttpServer& server);
  void Admit(const HttpServer& server, tcp::socket socket);
  void StopOnNetworkThread();

  // Marks c as waiting for its client (evictable) or not. Network thread only.
  void SetWaiting(Connection& c, bool on) {
    if (c.waiting == on) return;
    c.waiting = on;
    if (on) {
      c.waiting_at = waiting.insert(waiting.end(), &c);
    } else {
      waiting.erase(c.waiting_at);
    }
  }

  // Network thread only. Declared before io: sessions still in io's queues
  // when it is destroyed unlink themselves from here.
  std::list<Connection*> waiting;  // longest waiting first
  std::size_t open = 0;            // connections counted against max_connections

  asio::io_context io{1};
  asio::thread_pool handlers;  // runs Answer() and the access log
  std::thread thread;          // runs io; started by Start()
  // Set by Stop(); read by the handler threads.
  std::atomic<bool> stopping{false};

  // Network thread only (and Start() before the thread runs).
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
};

// The web config in force and what was built from it; replaced whole by
// ReloadWebConfig. A connection keeps the one it started with (its TLS context);
// each request is authenticated with the one in force when it is answered.
struct HttpServer::Security {
  std::optional<config::WebConfig> web;
  std::unique_ptr<BasicAuthenticator> auth;  // null when auth is off
  std::shared_ptr<asio::ssl::context> ssl;   // null when TLS is off
};

// What goes to a handler thread and back for one request.
struct HttpServer::Exchange {
  http::request<http::string_body> request;
  std::string remote_address;
  Response response;   // set by Answer()
  AccessLogEntry log;  // set by Answer(), but the duration
  Clock::time_point start;
};

// One connection over Stream (beast::tcp_stream or an ssl_stream over one).
// Lives as long as an operation on it is pending; every member is used on the
// network thread only, except while the request is with a handler thread, when
// the network thread does not touch it (it is not waiting, so neither the cap
// nor Stop() closes it).
template <class Stream>
class HttpServer::Session : public Connection, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  template <class... StreamArgs>
  Session(const HttpServer& server, Network& network, std::string remote_address,
          std::shared_ptr<const Security> security, StreamArgs&&... stream_args)
      : server_(server),
        network_(network),
        security_(std::move(security)),
        stream_(std::forward<StreamArgs>(stream_args)...),
        remote_address_(std::move(remote_address)) {
    ++network_.open;
  }
  ~Session() override {
    network_.SetWaiting(*this, false);
    if (counted) --network_.open;
  }

  void Start() {
    if constexpr (kTls) {
      network_.SetWaiting(*this, true);
      Lowest().expires_after(server_.options_.read_timeout);  // the whole handshake
      stream_.async_handshake(asio::ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
        self->network_.SetWaiting(*self, false);
        if (!ec) self->ReadRequest(/*fresh=*/true);
      });
    } else {
      ReadRequest(/*fresh=*/true);
    }
  }

  void Close() override {
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  // Waits for the next request. On a fresh connection the deadline runs from
  // now; on a kept-alive one the client has keep_alive_timeout to start it and
  // then read_timeout for all of it.
  void ReadRequest(bool fresh) {
    if (network_.stopping.load()) return;  // the connection ends here
    network_.SetWaiting(*this, true);
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(server_.options_.max_request_body_bytes);
    if (fresh || buffer_.size() > 0) {  // (pipelined bytes: the request has begun)
      ReadRest();
      return;
    }
    Lowest().expires_after(server_.options_.keep_alive_timeout);
    stream_.async_read_some(buffer_.prepare(512),
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->buffer_.commit(n);
                              if (ec) return;  // closed, idle too long, evicted or stopping
                              self->ReadRest();
                            });
  }

  void ReadRest() {
    Lowest().expires_after(server_.options_.read_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->OnRequest(ec); });
  }

  void OnRequest(beast::error_code ec) {
    network_.SetWaiting(*this, false);
    if (ec) {
      int status = StatusForReadError(ec);
      if (status != 0) WriteError(status);
      return;
    }
    Lowest().expires_never();  // while a handler thread has the request
    auto exchange = std::make_shared<Exchange>();
    exchange->request = parser_->release();
    exchange->remote_address = remote_address_;
    asio::post(network_.handlers,
               [self = this->shared_from_this(), exchange, work = asio::make_work_guard(network_.io)]() mutable {
                 self->server_.Answer(*exchange);
                 // Back to the network thread, with the last references: the session
                 // never ends on a handler thread.
                 asio::io_context& io = self->network_.io;
                 asio::post(io, [self = std::move(self), exchange = std::move(exchange)] { self->Write(*exchange); });
               });
  }

  // 400, 413 or 431 for a request that could not be read, then the connection ends.
  void WriteError(int status) {
    const char* text = status == 413   ? "Request Entity Too Large\n"
                       : status == 431 ? "Request Header Fields Too Large\n"
                                       : "Bad Request\n";
    Exchange exchange;
    std::string encoding;
    exchange.response = Encode(TextResponse(status, text), server_.CurrentSecurity()->web, false, "",
                               /*keep_alive=*/false, 11, &encoding);
    exchange.log.status = status;
    exchange.log.remote_address = remote_address_;
    exchange.log.body_bytes = exchange.response.body().size();
    exchange.start = Clock::now();
    Write(exchange);
  }

  void Write(Exchange& exchange) {
    response_ = std::move(exchange.response);
    log_ = std::move(exchange.log);
    start_ = exchange.start;
    Lowest().expires_after(server_.options_.write_timeout);
    http::async_write(stream_, response_,
                      [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->OnWritten(ec); });
  }

  void OnWritten(beast::error_code ec) {
    if (server_.options_.access_log) {
      log_.duration = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_);
      asio::post(network_.handlers, [log = server_.options_.access_log, entry = std::move(log_)] { log(entry); });
    }
    if (ec) return;
    if (!response_.keep_alive()) {
      Linger();
      return;
    }
    response_ = {};
    ReadRequest(/*fresh=*/false);
  }

  // Ends the connection after a response that said `Connection: close`: sends
  // the FIN, then reads and drops what the client still sends (for up to 1 s)
  // until it closes too. Closing at once with unread bytes (say, the body of a
  // request answered 413) would send an RST, which can destroy the response
  // before the client has read it.
  void Linger() {
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    Lowest().expires_after(std::chrono::seconds(1));
    Drain();
  }
  void Drain() {
    buffer_.clear();
    Lowest().async_read_some(buffer_.prepare(512),
                             [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                               if (ec) {
                                 self->Close();
                                 return;
                               }
                               self->Drain();
                             });
  }

  const HttpServer& server_;
  Network& network_;
  const std::shared_ptr<const Security> security_;  // keeps the TLS context alive; before stream_
  Stream stream_;
  const std::string remote_address_;
  beast::flat_buffer buffer_{kReadBufferLimit};
  std::optional<http::request_parser<http::string_body>> parser_;
  Response response_;  // being written
  AccessLogEntry log_;
  Clock::time_point start_;
};

void HttpServer::Network::Accept(const HttpServer& server) {
  acceptor.async_accept([this, &server](beast::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;  // stopped
    if (ec) {
      // Out of file descriptors, say: try again shortly rather than spin.
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this, &server](beast::error_code wait_ec) {
        if (!wait_ec && acceptor.is_open()) Accept(server);
      });
      return;
    }
    Admit(server, std::move(socket));
    Accept(server);
  });
}

void HttpServer::Network::Admit(const HttpServer& server, tcp::socket socket) {
  beast::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);  // no delayed-ACK wait on kept-alive connections
  if (open >= server.options_.max_connections) {
    if (waiting.empty()) {  // every connection is being answered: this one waits its turn
      socket.close(ec);
      return;
    }
    Connection* oldest = waiting.front();
    SetWaiting(*oldest, false);
    oldest->counted = false;
    --open;
    oldest->Close();
  }
  tcp::endpoint remote = socket.remote_endpoint(ec);
  std::string address = ec ? "" : remote.address().to_string();
  std::shared_ptr<const Security> security = server.CurrentSecurity();
  if (security->ssl != nullptr) {
    asio::ssl::context& ssl = *security->ssl;
    std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(server, *this, address, std::move(security),
                                                                    std::move(socket), ssl)
        ->Start();
  } else {
    std::make_shared<Session<beast::tcp_stream>>(server, *this, address, std::move(security), std::move(socket))
        ->Start();
  }
}

void HttpServer::Network::StopOnNetworkThread() {
  beast::error_code ignored;
  acceptor.close(ignored);
  accept_retry.cancel();
  while (!waiting.empty()) {
    Connection* c = waiting.front();
    SetWaiting(*c, false);
    c->Close();
  }
}

Result<std::unique_ptr<HttpServer>> HttpServer::Create(HttpServerOptions options) {
  using R = Result<std::unique_ptr<HttpServer>>;
  if (options.listen_address.empty()) {
    return R::Error("empty listen address (use 0.0.0.0 for every IPv4 interface)");
  }
  if (options.port < 0 || options.port > 65535) {
    return R::Error("listen port must be 0 to 65535, got " + std::to_string(options.port));
  }
  if (options.max_connections < 1) return R::Error("max_connections must be at least 1");
  if (options.handler_threads < 1) return R::Error("handler_threads must be at least 1");
  Result<std::shared_ptr<const Security>> security = MakeSecurity(options.web);
  if (!security.ok()) return R::Error(security.error());
  const bool tls = security.value()->ssl != nullptr;
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(options), tls, std::move(security).value()));
}

Result<std::shared_ptr<const HttpServer::Security>> HttpServer::MakeSecurity(
    const std::optional<config::WebConfig>& web) {
  using R = Result<std::shared_ptr<const Security>>;
  auto security = std::make_shared<Security>();
  security->web = web;
  if (web.has_value() && !web->basic_auth_users.empty()) {
    Result<std::unique_ptr<BasicAuthenticator>> created = BasicAuthenticator::Create(web->basic_auth_users);
    if (!created.ok()) return R::Error(created.error());
    security->auth = std::move(created).value();
  }
  if (web.has_value() && web->tls.has_value()) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == nullptr) return R::Error("cannot create the TLS context: " + OpenSslErrors());
    security->ssl = std::make_shared<asio::ssl::context>(ctx);  // takes ownership
    Status status = ConfigureTls(ctx, *web->tls);
    if (!status.ok()) return R::Error(status.error());
  }
  return std::shared_ptr<const Security>(std::move(security));
}

Status HttpServer::ReloadWebConfig(const std::optional<config::WebConfig>& web) {
  const bool tls = web.has_value() && web->tls.has_value();
  if (tls != tls_) {
    return Status::Error(std::string("tls_server_config: TLS cannot be turned ") + (tls ? "on" : "off") +
                         " by a reload (the listening URL would change); restart the agent");
  }
  Result<std::shared_ptr<const Security>> security = MakeSecurity(web);
  if (!security.ok()) return Status::Error(security.error());
  base::MutexLock lock(security_mutex_);
  security_ = std::move(security).value();
  return Status::Ok();
}

std::shared_ptr<const HttpServer::Security> HttpServer::CurrentSecurity() const {
  base::MutexLock lock(security_mutex_);
  return security_;
}

HttpServer::HttpServer(HttpServerOptions options, bool tls, std::shared_ptr<const Security> security)
    : options_(std::move(options)),
      tls_(tls),
      network_(std::make_unique<Network>(options_.handler_threads)),
      security_(std::move(security)),
      port_(options_.port) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Answer(Exchange& exchange) const {
  exchange.start = Clock::now();
  const http::request<http::string_body>& req = exchange.request;
  std::string target(req.target());
  std::size_t question = target.find('?');
  HttpRequest request;
  request.method = std::string(req.method_string());
  request.path = httplib::detail::decode_url(target.substr(0, question), false);
  request.remote_address = exchange.remote_address;
  bool head = req.method() == http::verb::head;

  // The web config in force now (a reload may have replaced it since the
  // connection was opened).
  const std::shared_ptr<const Security> security = CurrentSecurity();
  HttpResponse out;
  bool authorized = true;
  if (security->auth != nullptr) {
    std::optional<std::string> user = security->auth->Authenticate(std::string(req[http::field::authorization]));
    authorized = user.has_value();
    if (authorized) request.user = *user;
  }
  if (!authorized) {
    out = TextResponse(401, "Unauthorized\n");
    out.headers.emplace_back("WWW-Authenticate", kBasicAuthChallenge);
  } else if (req.method() != http::verb::get && !head) {
    out = TextResponse(405, "Method Not Allowed\n");
    out.headers.emplace_back("Allow", "GET, HEAD");
  } else {
    if (question != std::string::npos) {
      httplib::Params params;  // decoded, sorted by name
      httplib::detail::parse_query_text(target.substr(question + 1), params);
      request.query.assign(params.begin(), params.end());
    }
    for (const auto& field : req) {
      request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    out = Dispatch(request);
  }
  bool keep_alive = req.keep_alive() && !network_->stopping.load();
  std::string encoding;
  exchange.response = Encode(out, security->web, head, std::string(req[http::field::accept_encoding]), keep_alive,
                             req.version(), &encoding);
  AccessLogEntry& log = exchange.log;
  log.method = request.method;
  log.path = request.path;
  log.remote_address = request.remote_address;
  log.user = request.user;
  log.status = out.status;
  log.body_bytes = exchange.response.body().size();
  log.content_encoding = encoding;
}

HttpResponse HttpServer::Dispatch(const HttpRequest& request) const {
  HttpHandler handler;
  {
    base::MutexLock lock(handlers_mutex_);
    auto it = handlers_.find(request.path);
    if (it != handlers_.end()) handler = it->second;
  }
  if (!handler) return TextResponse(404, "404 page not found\n");
  try {
    return handler(request);
  } catch (...) {
    return TextResponse(500, "Internal Server Error\n");
  }
}

void HttpServer::Handle(const std::string& path, HttpHandler handler) {
  base::MutexLock lock(handlers_mutex_);
  handlers_[path] = std::move(handler);
}

Status HttpServer::Start() {
  const std::string& host = options_.listen_address;
  if (started_.load() || stopped_.load()) {
    return Status::Error("the HTTP server on " + FormatHostPort(host, port()) +
                         (stopped_.load() ? " was stopped" : " is already started") + "; create a new one");
  }
  Status resolvable = CheckResolvable(host, options_.port);
  if (!resolvable.ok()) return resolvable;
  auto fail = [&](const beast::error_code& ec) {
    beast::error_code ignored;
    network_->acceptor.close(ignored);
    return Status::Error("cannot listen on " + FormatHostPort(host, options_.port) + ": " + ec.message());
  };
  beast::error_code ec;
  tcp::resolver resolver(network_->io);
  tcp::resolver::results_type endpoints =
      resolver.resolve(host, std::to_string(options_.port), tcp::resolver::passive, ec);
  if (ec || endpoints.empty()) return fail(ec);
  tcp::endpoint endpoint = endpoints.begin()->endpoint();
  tcp::acceptor& acceptor = network_->acceptor;
  // Only SO_REUSEADDR (restarts while old connections linger in TIME_WAIT); no
  // SO_REUSEPORT, with which a second server would bind a busy port silently.
  if (acceptor.open(endpoint.protocol(), ec)) return fail(ec);
  if (acceptor.set_option(tcp::acceptor::reuse_address(true), ec)) return fail(ec);
  if (acceptor.bind(endpoint, ec)) return fail(ec);
  if (acceptor.listen(asio::socket_base::max_listen_connections, ec)) return fail(ec);
  port_ = acceptor.local_endpoint(ec).port();
  started_ = true;
  network_->Accept(*this);
  network_->thread = std::thread([this] {
    network_->io.run();
    network_returned_ = true;
  });
  return Status::Ok();
}

void HttpServer::Stop() {
  stopped_ = true;
  if (!network_->thread.joinable()) return;
  network_->stopping = true;
  asio::post(network_->io, [network = network_.get()] { network->StopOnNetworkThread(); });
  network_->thread.join();    // after requests in flight have been answered
  network_->handlers.join();  // the last access-log lines
}

bool HttpServer::is_running() const { return started_.load() && !stopped_.load() && !network_returned_.load(); }

std::string HttpServer::url() const {
  return std::string(tls_ ? "https://" : "http://") + FormatHostPort(options_.listen_address, port());
}

std::string FormatHostPort(const std::string& host, int port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<std::pair<std::string, int>> ParseListenAddress(std::string_view address) {
  using R = Result<std::pair<std::string, int>>;
  auto fail = [&](const std::string& what) {
    return R::Error("listen address \"" + std::string(address) + "\": " + what);
  };
  std::size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return fail("expected host:port, [ipv6]:port or :port");
  std::string_view host = address.substr(0, colon);
  std::string_view port_text = address.substr(colon + 1);
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return fail("unbalanced [ ] around an IPv6 host");
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return fail("an IPv6 host must be written in brackets, e.g. [::1]:9477");
  }
  if (port_text.empty() || port_text.size() > 5) return fail("expected a port of 0 to 65535");
  int port = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9') return fail("expected a port of 0 to 65535");
    port = port * 10 + (c - '0');
  }
  if (port > 65535) return fail("expected a port of 0 to 65535");
  return std::make_pair(host.empty() ? std::string("0.0.0.0") : std::string(host), port);
}

}  // namespace kvwatch::agent
