#include "agent/web/http_server.h"

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

#include "agent/web/basic_auth.h"

namespace kvwatch::agent {
namespace {

using base::Result;
using base::Status;
using Clock = std::chrono::steady_clock;

// Per-request state kept between the routing hook and the access logger, which
// cpp-httplib runs on the same worker thread for one request.
struct RequestScratch {
  bool routed = false;
  Clock::time_point start;
  std::string user;
};
thread_local RequestScratch scratch;

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

void WriteResponse(const HttpResponse& out, httplib::Response& res) {
  res.status = out.status;
  for (const auto& [name, value] : out.headers) res.set_header(name, value);
  if (!out.content_type.empty()) {
    res.set_content(out.body, out.content_type);
  } else {
    res.body = out.body;
  }
  if (!res.has_header("Vary")) res.set_header("Vary", "Accept-Encoding");
}

HttpRequest MakeRequest(const httplib::Request& req, const std::string& user) {
  HttpRequest request;
  request.method = req.method;
  request.path = req.path;
  request.query.assign(req.params.begin(), req.params.end());
  request.headers.assign(req.headers.begin(), req.headers.end());
  request.remote_address = req.remote_addr;
  request.user = user;
  return request;
}

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

Result<std::unique_ptr<HttpServer>> HttpServer::Create(HttpServerOptions options) {
  using R = Result<std::unique_ptr<HttpServer>>;
  if (options.listen_address.empty()) {
    return R::Error("empty listen address (use 0.0.0.0 for every IPv4 interface)");
  }
  if (options.port < 0 || options.port > 65535) {
    return R::Error("listen port must be 0 to 65535, got " + std::to_string(options.port));
  }
  std::unique_ptr<httplib::Server> server;
  bool tls = options.web.has_value() && options.web->tls.has_value();
  if (tls) {
    const config::TlsServerConfig& tls_config = *options.web->tls;
    std::string error;
    auto ssl_server = std::make_unique<httplib::SSLServer>([&](SSL_CTX& ctx) {
      Status status = ConfigureTls(&ctx, tls_config);
      if (!status.ok()) error = status.error();
      return status.ok();
    });
    if (!ssl_server->is_valid()) {
      return R::Error(error.empty() ? "cannot create the TLS context: " + OpenSslErrors() : error);
    }
    server = std::move(ssl_server);
  } else {
    server = std::make_unique<httplib::Server>();
  }
  std::unique_ptr<BasicAuthenticator> auth;
  if (options.web.has_value() && !options.web->basic_auth_users.empty()) {
    Result<std::unique_ptr<BasicAuthenticator>> created =
        BasicAuthenticator::Create(options.web->basic_auth_users);
    if (!created.ok()) return R::Error(created.error());
    auth = std::move(created).value();
  }
  std::unique_ptr<HttpServer> http(
      new HttpServer(std::move(options), std::move(server), tls, std::move(auth)));
  http->Configure();
  return http;
}

HttpServer::HttpServer(HttpServerOptions options, std::unique_ptr<httplib::Server> server,
                       bool tls, std::unique_ptr<BasicAuthenticator> auth)
    : options_(std::move(options)),
      server_(std::move(server)),
      tls_(tls),
      auth_(std::move(auth)),
      port_(options_.port) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Configure() {
  using httplib::Server;
  // Only SO_REUSEADDR: cpp-httplib 0.11.4's default also sets SO_REUSEPORT, with
  // which a second server binds a busy port without error.
  server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server_->set_read_timeout(options_.read_timeout.count(), 0);
  server_->set_write_timeout(options_.write_timeout.count(), 0);
  server_->set_keep_alive_timeout(options_.keep_alive_timeout.count());
  server_->set_payload_max_length(options_.max_request_body_bytes);
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return Route(req, res) ? Server::HandlerResponse::Handled : Server::HandlerResponse::Unhandled;
  });
  server_->set_post_routing_handler(
      [this](const httplib::Request&, httplib::Response& res) { AddConfiguredHeaders(res); });
  if (options_.access_log) {
    server_->set_logger(
        [this](const httplib::Request& req, const httplib::Response& res) { LogAccess(req, res); });
  }
  // Methods other than GET and HEAD are left unhandled by Route so that httplib
  // reads (and bounds) their bodies; they all end here.
  Server::Handler not_allowed = [](const httplib::Request&, httplib::Response& res) {
    WriteResponse(TextResponse(405, "Method Not Allowed\n"), res);
    res.set_header("Allow", "GET, HEAD");
  };
  server_->Post(".*", not_allowed);
  server_->Put(".*", not_allowed);
  server_->Patch(".*", not_allowed);
  server_->Delete(".*", not_allowed);
  server_->Options(".*", not_allowed);
}

bool HttpServer::Route(const httplib::Request& req, httplib::Response& res) {
  scratch = RequestScratch{true, Clock::now(), ""};
  if (auth_ != nullptr) {
    std::optional<std::string> user = auth_->Authenticate(req.get_header_value("Authorization"));
    if (!user) {
      WriteResponse(TextResponse(401, "Unauthorized\n"), res);
      res.set_header("WWW-Authenticate", kBasicAuthChallenge);
      return true;
    }
    scratch.user = *user;
  }
  if (req.method != "GET" && req.method != "HEAD") return false;
  WriteResponse(Dispatch(MakeRequest(req, scratch.user)), res);
  return true;
}

HttpResponse HttpServer::Dispatch(const HttpRequest& request) {
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

void HttpServer::AddConfiguredHeaders(httplib::Response& res) const {
  if (!options_.web.has_value()) return;
  for (const auto& [name, value] : options_.web->http.headers) {
    if (!res.has_header(name)) res.set_header(name, value);
  }
}

void HttpServer::LogAccess(const httplib::Request& req, const httplib::Response& res) const {
  AccessLogEntry entry;
  entry.method = req.method;
  entry.path = req.path;
  entry.remote_address = req.remote_addr;
  entry.status = res.status;
  entry.body_bytes = req.method == "HEAD" ? 0 : res.body.size();
  entry.content_encoding = res.get_header_value("Content-Encoding");
  if (scratch.routed) {
    entry.user = scratch.user;
    entry.duration =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - scratch.start);
  }
  scratch = RequestScratch{};
  options_.access_log(entry);
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
  errno = 0;
  int bound = options_.port == 0 ? server_->bind_to_any_port(host)
                                 : (server_->bind_to_port(host, options_.port) ? options_.port : -1);
  int bind_errno = errno;
  if (bound < 0) {
    return Status::Error("cannot listen on " + FormatHostPort(host, options_.port) + ": " +
                         (bind_errno != 0 ? std::strerror(bind_errno) : "bind failed"));
  }
  port_ = bound;
  started_ = true;
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    listen_returned_ = true;
  });
  return Status::Ok();
}

void HttpServer::Stop() {
  stopped_ = true;
  if (!thread_.joinable()) return;
  // httplib's stop() does nothing until the accept loop has marked itself
  // running, which the thread may not have done yet: wait for that first.
  while (!server_->is_running() && !listen_returned_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!listen_returned_.load()) server_->stop();
  thread_.join();  // after requests in flight have been answered
}

bool HttpServer::is_running() const {
  return started_.load() && !stopped_.load() && !listen_returned_.load();
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
