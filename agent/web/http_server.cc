#include "agent/web/http_server.h"

#include <utility>  // before Boost.Asio: g++ 12 in C++20 needs it first (docs/dependencies.md)

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <httplib.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <list>
#include <type_traits>

#include "agent/web/basic_auth.h"

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

// The OpenSSL error queue as text, emptied.
std::string OpenSslErrors() {
  std::string text;
  while (unsigned long code = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof(buffer));
    text += (text.empty() ? "" : "; ") + std::string(buffer);
  }
  return text.empty() ? "unknown OpenSSL error" : text;
}

int OpenSslVersion(config::TlsVersion version) {
  switch (version) {
    case config::TlsVersion::kTls10:
      return TLS1_VERSION;
    case config::TlsVersion::kTls11:
      return TLS1_1_VERSION;
    case config::TlsVersion::kTls12:
      return TLS1_2_VERSION;
    case config::TlsVersion::kTls13:
      return TLS1_3_VERSION;
  }
  return TLS1_2_VERSION;
}

// For RequestClientCert and RequireAnyClientCert: any certificate will do.
int AcceptAnyCertificate(int /*preverify_ok*/, X509_STORE_CTX* /*ctx*/) { return 1; }

// `tls_server_config.<key> "<path>": <problem>`.
std::string FileError(const char* key, const std::string& path, const std::string& problem) {
  return "tls_server_config." + std::string(key) + " \"" + path + "\": " + problem;
}

// Fails with the system's reason when path cannot be opened for reading.
Status CheckReadable(const char* key, const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return Status::Error(FileError(key, path, std::strerror(errno)));
  std::fclose(file);
  return Status::Ok();
}

Status LoadClientCas(SSL_CTX* ctx, const std::string& ca_file) {
  Status readable = CheckReadable("client_ca_file", ca_file);
  if (!readable.ok()) return readable;
  STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca_file.c_str());
  if (names == nullptr || sk_X509_NAME_num(names) == 0) {
    if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
    ERR_clear_error();
    return Status::Error(FileError("client_ca_file", ca_file, "no PEM certificates in it"));
  }
  if (SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
    sk_X509_NAME_pop_free(names, X509_NAME_free);
    return Status::Error(FileError("client_ca_file", ca_file,
                                   "cannot load the CA certificates: " + OpenSslErrors()));
  }
  SSL_CTX_set_client_CA_list(ctx, names);  // takes ownership; sent in the CertificateRequest
  return Status::Ok();
}

void SetClientAuth(SSL_CTX* ctx, config::ClientAuthType type) {
  using config::ClientAuthType;
  switch (type) {
    case ClientAuthType::kNoClientCert:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
      return;
    case ClientAuthType::kRequestClientCert:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, AcceptAnyCertificate);
      return;
    case ClientAuthType::kRequireAnyClientCert:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                         AcceptAnyCertificate);
      return;
    case ClientAuthType::kVerifyClientCertIfGiven:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
      return;
    case ClientAuthType::kRequireAndVerifyClientCert:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
      return;
  }
}

// Sets up ctx from the web config's tls_server_config.
Status ConfigureTls(SSL_CTX* ctx, const config::TlsServerConfig& tls) {
  ERR_clear_error();
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  // Frees a connection's 34 KiB of record buffers while it is idle: a thousand
  // idle TLS connections then cost little memory.
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  if (tls.prefer_server_cipher_suites) SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_set_min_proto_version(ctx, OpenSslVersion(tls.min_version)) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, OpenSslVersion(tls.max_version)) != 1) {
    return Status::Error("tls_server_config.min_version/max_version: " +
                         std::string(config::TlsVersionName(tls.min_version)) + ".." +
                         std::string(config::TlsVersionName(tls.max_version)) +
                         " is not available: " + OpenSslErrors());
  }
  Status readable = CheckReadable("cert_file", tls.cert_file);
  if (!readable.ok()) return readable;
  if (SSL_CTX_use_certificate_chain_file(ctx, tls.cert_file.c_str()) != 1) {
    return Status::Error(FileError("cert_file", tls.cert_file,
                                   "cannot load a PEM certificate chain: " + OpenSslErrors()));
  }
  readable = CheckReadable("key_file", tls.key_file);
  if (!readable.ok()) return readable;
  // OpenSSL 3 already reports a key that does not belong to the certificate
  // here (X509_R_KEY_VALUES_MISMATCH); older versions only in the check below.
  bool loaded = SSL_CTX_use_PrivateKey_file(ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) == 1;
  if (!loaded && ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
    return Status::Error(FileError("key_file", tls.key_file,
                                   "cannot load a PEM private key: " + OpenSslErrors()));
  }
  if (!loaded || SSL_CTX_check_private_key(ctx) != 1) {
    return Status::Error(FileError("key_file", tls.key_file,
                                   "does not match the certificate in cert_file \"" +
                                       tls.cert_file + "\": " + OpenSslErrors()));
  }
  if (!tls.client_ca_file.empty()) {
    Status cas = LoadClientCas(ctx, tls.client_ca_file);
    if (!cas.ok()) return cas;
  }
  SetClientAuth(ctx, tls.client_auth_type);
  // Needed for session resumption once client certificates are requested.
  static const unsigned char kSessionContext[] = "kvwatch";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof(kSessionContext) - 1);
  return Status::Ok();
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

HttpResponse TextResponse(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

// Status for a request that could not be read; 0 when the connection is just
// gone (closed by the client, past its deadline, evicted, the server stopping).
int StatusForReadError(const beast::error_code& ec) {
  if (ec == http::error::header_limit) return 431;
  if (ec == http::error::body_limit) return 413;
  if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message) {
    return 400;  // bad_method, bad_target, bad_field, bad_content_length, ...
  }
  return 0;
}

// Compresses body as cpp-httplib would for this Accept-Encoding and
// Content-Type (same content types, same choice of encoding). Returns the
// Content-Encoding ("" when left as it is).
std::string Compress(const std::string& accept_encoding, const std::string& content_type,
                     std::string* body) {
  if (body->empty() || accept_encoding.empty()) return "";
  httplib::Request req;
  req.set_header("Accept-Encoding", accept_encoding);
  httplib::Response res;
  res.set_header("Content-Type", content_type);
  std::unique_ptr<httplib::detail::compressor> compressor;
  std::string encoding;
  switch (httplib::detail::encoding_type(req, res)) {
    case httplib::detail::EncodingType::Gzip:
      compressor = std::make_unique<httplib::detail::gzip_compressor>();
      encoding = "gzip";
      break;
    case httplib::detail::EncodingType::Brotli:
      compressor = std::make_unique<httplib::detail::brotli_compressor>();
      encoding = "br";
      break;
    case httplib::detail::EncodingType::None:
      return "";
  }
  std::string compressed;
  bool ok = compressor->compress(body->data(), body->size(), true,
                                 [&](const char* data, std::size_t n) {
                                   compressed.append(data, n);
                                   return true;
                                 });
  if (!ok) return "";  // sent as it is
  *body = std::move(compressed);
  return encoding;
}

using Response = http::response<http::string_body>;

// The response on the wire for out: the handler's headers, Content-Type, Vary,
// the web config's headers, compression, Content-Length; no body for HEAD.
Response Encode(const HttpResponse& out, const std::optional<config::WebConfig>& web, bool head,
                const std::string& accept_encoding, bool keep_alive, unsigned version,
                std::string* content_encoding) {
  Response res;
  res.version(version);
  res.result(static_cast<unsigned>(out.status));
  for (const auto& [name, value] : out.headers) res.insert(name, value);
  if (!out.content_type.empty()) res.set(http::field::content_type, out.content_type);
  if (res.find(http::field::vary) == res.end()) res.set(http::field::vary, "Accept-Encoding");
  if (web.has_value()) {
    for (const auto& [name, value] : web->http.headers) {
      if (res.find(name) == res.end()) res.set(name, value);
    }
  }
  std::string body = out.body;
  *content_encoding = Compress(accept_encoding, std::string(res[http::field::content_type]), &body);
  if (!content_encoding->empty()) res.set(http::field::content_encoding, *content_encoding);
  res.keep_alive(keep_alive);
  res.content_length(body.size());
  if (!head) res.body() = std::move(body);  // HEAD: the same Content-Length, no body
  return res;
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
  std::optional<asio::ssl::context> ssl;  // set by Create() when TLS is on
  asio::thread_pool handlers;             // runs Answer() and the access log
  std::thread thread;                     // runs io; started by Start()
  // Set by Stop(); read by the handler threads.
  std::atomic<bool> stopping{false};

  // Network thread only (and Start() before the thread runs).
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
};

// What goes to a handler thread and back for one request.
struct HttpServer::Exchange {
  http::request<http::string_body> request;
  std::string remote_address;
  Response response;  // set by Answer()
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
          StreamArgs&&... stream_args)
      : server_(server),
        network_(network),
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
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
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
    stream_.async_read_some(buffer_.prepare(512), [self = this->shared_from_this()](
                                                      beast::error_code ec, std::size_t n) {
      self->buffer_.commit(n);
      if (ec) return;  // closed, idle too long, evicted or stopping
      self->ReadRest();
    });
  }

  void ReadRest() {
    Lowest().expires_after(server_.options_.read_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                       self->OnRequest(ec);
                     });
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
    asio::post(network_.handlers, [self = this->shared_from_this(), exchange,
                                   work = asio::make_work_guard(network_.io)]() mutable {
      self->server_.Answer(*exchange);
      // Back to the network thread, with the last references: the session
      // never ends on a handler thread.
      asio::io_context& io = self->network_.io;
      asio::post(io, [self = std::move(self), exchange = std::move(exchange)] {
        self->Write(*exchange);
      });
    });
  }

  // 400, 413 or 431 for a request that could not be read, then the connection ends.
  void WriteError(int status) {
    const char* text = status == 413   ? "Request Entity Too Large\n"
                       : status == 431 ? "Request Header Fields Too Large\n"
                                       : "Bad Request\n";
    Exchange exchange;
    std::string encoding;
    exchange.response = Encode(TextResponse(status, text), server_.options_.web, false, "",
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
    http::async_write(stream_, response_, [self = this->shared_from_this()](
                                              beast::error_code ec, std::size_t) {
      self->OnWritten(ec);
    });
  }

  void OnWritten(beast::error_code ec) {
    if (server_.options_.access_log) {
      log_.duration = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_);
      asio::post(network_.handlers,
                 [log = server_.options_.access_log, entry = std::move(log_)] { log(entry); });
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
    Lowest().async_read_some(buffer_.prepare(512), [self = this->shared_from_this()](
                                                       beast::error_code ec, std::size_t) {
      if (ec) {
        self->Close();
        return;
      }
      self->Drain();
    });
  }

  const HttpServer& server_;
  Network& network_;
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
  if (ssl.has_value()) {
    std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(server, *this, address,
                                                                     std::move(socket), *ssl)
        ->Start();
  } else {
    std::make_shared<Session<beast::tcp_stream>>(server, *this, address, std::move(socket))
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
  std::unique_ptr<BasicAuthenticator> auth;
  if (options.web.has_value() && !options.web->basic_auth_users.empty()) {
    Result<std::unique_ptr<BasicAuthenticator>> created =
        BasicAuthenticator::Create(options.web->basic_auth_users);
    if (!created.ok()) return R::Error(created.error());
    auth = std::move(created).value();
  }
  bool tls = options.web.has_value() && options.web->tls.has_value();
  std::unique_ptr<HttpServer> http(new HttpServer(std::move(options), tls, std::move(auth)));
  if (tls) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == nullptr) return R::Error("cannot create the TLS context: " + OpenSslErrors());
    http->network_->ssl.emplace(ctx);  // takes ownership
    Status status = ConfigureTls(ctx, *http->options_.web->tls);
    if (!status.ok()) return R::Error(status.error());
  }
  return http;
}

HttpServer::HttpServer(HttpServerOptions options, bool tls, std::unique_ptr<BasicAuthenticator> auth)
    : options_(std::move(options)),
      tls_(tls),
      auth_(std::move(auth)),
      network_(std::make_unique<Network>(options_.handler_threads)),
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

  HttpResponse out;
  bool authorized = true;
  if (auth_ != nullptr) {
    std::optional<std::string> user =
        auth_->Authenticate(std::string(req[http::field::authorization]));
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
  exchange.response = Encode(out, options_.web, head, std::string(req[http::field::accept_encoding]),
                             keep_alive, req.version(), &encoding);
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
                         (stopped_.load() ? " was stopped" : " is already started") +
                         "; create a new one");
  }
  Status resolvable = CheckResolvable(host, options_.port);
  if (!resolvable.ok()) return resolvable;
  auto fail = [&](const beast::error_code& ec) {
    beast::error_code ignored;
    network_->acceptor.close(ignored);
    return Status::Error("cannot listen on " + FormatHostPort(host, options_.port) + ": " +
                         ec.message());
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

bool HttpServer::is_running() const {
  return started_.load() && !stopped_.load() && !network_returned_.load();
}

std::string HttpServer::url() const {
  return std::string(tls_ ? "https://" : "http://") +
         FormatHostPort(options_.listen_address, port());
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
