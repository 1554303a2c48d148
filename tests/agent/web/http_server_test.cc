// Tests of agent/http_server.h and agent/basic_auth.h over real sockets on
// 127.0.0.1 (port 0 only). Certificates and bcrypt hashes are made at run time:
// a CA, a server certificate and client certificates with the OpenSSL C API,
// hashes with libcrypt.
#include "agent/web/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/web/basic_auth.h"
#include "config/web_config.h"

namespace kvwatch::agent {
namespace {

using base::Result;
using base::Status;

// ---------------------------------------------------------------------------
// Certificates

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Cert = std::unique_ptr<X509, X509Free>;

struct Identity {
  Pkey key;
  Cert cert;
};

enum class Role { kCa, kServer, kClient };

bool AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A P-256 key and a certificate for it, signed by issuer (self-signed when null).
Identity MakeIdentity(const std::string& common_name, Role role, const Identity* issuer) {
  static long serial = 1;
  Identity id;
  id.key.reset(EVP_EC_gen("P-256"));
  id.cert.reset(X509_new());
  X509* x = id.cert.get();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
  X509_set_pubkey(x, id.key.get());
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                             -1, 0);
  X509* issuer_cert = issuer != nullptr ? issuer->cert.get() : x;
  X509_set_issuer_name(x, X509_get_subject_name(issuer_cert));
  bool ok = true;
  if (role == Role::kCa) {
    ok = ok && AddExtension(x, issuer_cert, NID_basic_constraints, "critical,CA:TRUE");
    ok = ok && AddExtension(x, issuer_cert, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    ok = ok && AddExtension(x, issuer_cert, NID_basic_constraints, "critical,CA:FALSE");
    ok = ok && AddExtension(x, issuer_cert, NID_key_usage, "critical,digitalSignature");
    ok = ok && AddExtension(x, issuer_cert, NID_ext_key_usage, role == Role::kServer ? "serverAuth" : "clientAuth");
  }
  if (role == Role::kServer) {
    ok = ok && AddExtension(x, issuer_cert, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
  }
  EVP_PKEY* signer = issuer != nullptr ? issuer->key.get() : id.key.get();
  ok = ok && X509_sign(x, signer, EVP_sha256()) > 0;
  EXPECT_TRUE(ok) << "could not build the certificate for " << common_name;
  return id;
}

void WritePem(const Identity& id, const std::string& cert_path, const std::string& key_path) {
  std::FILE* f = std::fopen(cert_path.c_str(), "w");
  ASSERT_NE(f, nullptr) << cert_path;
  EXPECT_EQ(PEM_write_X509(f, id.cert.get()), 1);
  std::fclose(f);
  f = std::fopen(key_path.c_str(), "w");
  ASSERT_NE(f, nullptr) << key_path;
  EXPECT_EQ(PEM_write_PrivateKey(f, id.key.get(), nullptr, nullptr, 0, nullptr, nullptr), 1);
  std::fclose(f);
}

// One set of throwaway certificates for the whole test program.
class Pki {
 public:
  static const Pki& Get() {
    static const Pki* pki = new Pki();
    return *pki;
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  static std::filesystem::path Dir() {
    return std::filesystem::path(testing::TempDir()) / ("kvwatch_http_server_test_" + std::to_string(getpid()));
  }

 private:
  Pki() {
    // Per process: ctest may run the tests of this file in parallel processes.
    dir_ = Dir();
    std::filesystem::create_directories(dir_);
    Identity ca = MakeIdentity("kvwatch test CA", Role::kCa, nullptr);
    Identity other_ca = MakeIdentity("some other CA", Role::kCa, nullptr);
    WritePem(ca, Path("ca.crt"), Path("ca.key"));
    WritePem(MakeIdentity("127.0.0.1", Role::kServer, &ca), Path("server.crt"), Path("server.key"));
    WritePem(MakeIdentity("prometheus", Role::kClient, &ca), Path("client.crt"), Path("client.key"));
    WritePem(MakeIdentity("intruder", Role::kClient, &other_ca), Path("rogue.crt"), Path("rogue.key"));
    // A second server identity, from the other CA: what a reload swaps in.
    WritePem(other_ca, Path("other_ca.crt"), Path("other_ca.key"));
    WritePem(MakeIdentity("127.0.0.1", Role::kServer, &other_ca), Path("other_server.crt"), Path("other_server.key"));
    std::FILE* f = std::fopen(Path("empty.pem").c_str(), "w");
    if (f != nullptr) std::fclose(f);
  }
  std::filesystem::path dir_;
};

// Removes the certificates when the test program ends.
class PkiCleanup : public testing::Environment {
 public:
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(Pki::Dir(), ignored);
  }
};
testing::Environment* const kPkiCleanup = testing::AddGlobalTestEnvironment(new PkiCleanup);

// ---------------------------------------------------------------------------
// Helpers

config::WebConfig TlsConfig(config::ClientAuthType type = config::ClientAuthType::kNoClientCert) {
  const Pki& pki = Pki::Get();
  config::WebConfig web;
  config::TlsServerConfig tls;
  tls.cert_file = pki.Path("server.crt");
  tls.key_file = pki.Path("server.key");
  tls.client_auth_type = type;
  if (type != config::ClientAuthType::kNoClientCert) tls.client_ca_file = pki.Path("ca.crt");
  web.tls = tls;
  return web;
}

HttpResponse Hello(const HttpRequest&) {
  HttpResponse response;
  response.body = "hello\n";
  return response;
}

// A started server with /hello, or a test failure.
std::unique_ptr<HttpServer> StartServer(HttpServerOptions options = {}) {
  options.port = 0;
  Result<std::unique_ptr<HttpServer>> created = HttpServer::Create(std::move(options));
  EXPECT_TRUE(created.ok()) << (created.ok() ? "" : created.error());
  if (!created.ok()) return nullptr;
  std::unique_ptr<HttpServer> server = std::move(created).value();
  server->Handle("/hello", Hello);
  Status started = server->Start();
  EXPECT_TRUE(started.ok()) << (started.ok() ? "" : started.error());
  EXPECT_NE(server->port(), 0);
  return started.ok() ? std::move(server) : nullptr;
}

std::unique_ptr<httplib::Client> PlainClient(const HttpServer& server) {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", server.port());
  client->set_connection_timeout(5, 0);
  client->set_read_timeout(5, 0);
  return client;
}

// An HTTPS client that verifies the server against the test CA, optionally with
// a client certificate ("client" or "rogue").
std::unique_ptr<httplib::SSLClient> TlsClient(const HttpServer& server, const std::string& identity = "") {
  const Pki& pki = Pki::Get();
  std::unique_ptr<httplib::SSLClient> client =
      identity.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", server.port())
                       : std::make_unique<httplib::SSLClient>("127.0.0.1", server.port(), pki.Path(identity + ".crt"),
                                                              pki.Path(identity + ".key"));
  client->set_ca_cert_path(pki.Path("ca.crt"));
  client->enable_server_certificate_verification(true);
  client->set_connection_timeout(5, 0);
  client->set_read_timeout(5, 0);
  return client;
}

std::string Basic(const std::string& user, const std::string& password) {
  std::string plain = user + ":" + password;
  std::string out(4 * ((plain.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(plain.data()), static_cast<int>(plain.size()));
  out.resize(n);
  return "Basic " + out;
}

std::string Gunzip(const std::string& data) {
  z_stream stream{};
  EXPECT_EQ(inflateInit2(&stream, 16 + MAX_WBITS), Z_OK);  // 16: gzip wrapper only
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buffer[16384];
  int rc = Z_OK;
  while (rc == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    rc = inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - stream.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END) << "not a complete gzip stream";
  inflateEnd(&stream);
  return out;
}

// ---------------------------------------------------------------------------
// Plain HTTP

TEST(HttpServerTest, ServesGetHeadAnd404And405) {
  std::unique_ptr<HttpServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->is_running());
  EXPECT_FALSE(server->tls());
  EXPECT_EQ(server->url(), "http://127.0.0.1:" + std::to_string(server->port()));
  auto client = PlainClient(*server);

  httplib::Result r = client->Get("/hello");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello\n");
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(r->get_header_value("Vary"), "Accept-Encoding");

  r = client->Head("/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "");
  EXPECT_EQ(r->get_header_value("Content-Length"), "6");

  r = client->Get("/nothing-here");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);

  r = client->Post("/hello", "x=1", "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "GET, HEAD");
}

TEST(HttpServerTest, HandlerSeesQueryHeadersAndMethod) {
  std::unique_ptr<HttpServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  server->Handle("/echo", [](const HttpRequest& request) {
    HttpResponse response;
    response.status = 202;
    response.content_type = "application/json";
    response.body = request.method + " " + request.path + " x=" + request.Query("x").value_or("-") +
                    " missing=" + request.Query("missing").value_or("-") +
                    " header=" + request.Header("x-kvwatch-test") + " from=" + request.remote_address +
                    " user=" + request.user;
    response.headers.emplace_back("X-Handler", "yes");
    return response;
  });
  auto client = PlainClient(*server);
  httplib::Result r = client->Get("/echo?x=a%20b", {{"X-Kvwatch-Test", "42"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(r->get_header_value("X-Handler"), "yes");
  EXPECT_EQ(r->body, "GET /echo x=a b missing=- header=42 from=127.0.0.1 user=");
}

TEST(HttpServerTest, ThrowingHandlerGives500) {
  std::unique_ptr<HttpServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  server->Handle("/boom", [](const HttpRequest&) -> HttpResponse { throw std::runtime_error("secret detail"); });
  httplib::Result r = PlainClient(*server)->Get("/boom");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->body.find("secret"), std::string::npos);
  for (const auto& [name, value] : r->headers) EXPECT_EQ(value.find("secret"), std::string::npos);
}

TEST(HttpServerTest, GzipWhenTheClientAcceptsIt) {
  std::unique_ptr<HttpServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  std::string exposition;
  for (int i = 0; i < 500; ++i) {
    exposition += "kvwatch_test_series{shard=\"" + std::to_string(i) + "\"} " + std::to_string(i * 7) + "\n";
  }
  server->Handle("/metrics", [&exposition](const HttpRequest&) {
    HttpResponse response;
    response.content_type = "text/plain; version=0.0.4; charset=utf-8";
    response.body = exposition;
    return response;
  });
  auto client = PlainClient(*server);
  client->set_decompress(false);  // look at the bytes on the wire

  httplib::Result r = client->Get("/metrics", {{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Encoding"), "gzip");
  EXPECT_LT(r->body.size(), exposition.size() / 2);
  EXPECT_EQ(Gunzip(r->body), exposition);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");

  r = client->Get("/metrics");  // no Accept-Encoding: identity
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_header("Content-Encoding"));
  EXPECT_EQ(r->body, exposition);
}

TEST(HttpServerTest, PortInUseNamesTheAddress) {
  std::unique_ptr<HttpServer> first = StartServer();
  ASSERT_NE(first, nullptr);
  HttpServerOptions options;
  options.port = first->port();
  Result<std::unique_ptr<HttpServer>> second = HttpServer::Create(options);
  ASSERT_TRUE(second.ok()) << second.error();
  Status started = second.value()->Start();
  ASSERT_FALSE(started.ok()) << "two servers share port " << first->port();
  EXPECT_EQ(started.error(),
            "cannot listen on 127.0.0.1:" + std::to_string(first->port()) + ": Address already in use");
  EXPECT_FALSE(second.value()->is_running());
  // The first one still answers.
  httplib::Result r = PlainClient(*first)->Get("/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(HttpServerTest, BadListenSettings) {
  HttpServerOptions options;
  options.port = 70000;
  Result<std::unique_ptr<HttpServer>> created = HttpServer::Create(options);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.error().find("70000"), std::string::npos) << created.error();

  options.port = 0;
  options.listen_address = "no-such-host.invalid";
  created = HttpServer::Create(options);
  ASSERT_TRUE(created.ok()) << created.error();
  Status started = created.value()->Start();
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.error().rfind("cannot listen on no-such-host.invalid:0: ", 0), 0u) << started.error();
}

TEST(HttpServerTest, StartStopLifecycle) {
  for (int i = 0; i < 20; ++i) {  // Stop right after Start must not hang
    std::unique_ptr<HttpServer> server = StartServer();
    ASSERT_NE(server, nullptr);
    server->Stop();
    EXPECT_FALSE(server->is_running());
    server->Stop();  // idempotent
  }
  std::unique_ptr<HttpServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  int port = server->port();
  Status again = server->Start();
  EXPECT_FALSE(again.ok());
  server->Stop();
  EXPECT_FALSE(server->Start().ok());
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2, 0);
  EXPECT_FALSE(client.Get("/hello")) << "still serving after Stop()";
  server.reset();  // destructor after Stop

  // Destructor alone stops and joins.
  server = StartServer();
  ASSERT_NE(server, nullptr);
  server.reset();
}

TEST(HttpServerTest, StopLetsARequestInFlightFinish) {
  std::unique_ptr<HttpServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false;
  server->Handle("/slow", [&](const HttpRequest&) {
    std::unique_lock<std::mutex> lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    HttpResponse response;
    response.body = "done";
    return response;
  });
  int status = 0;
  std::thread client([&] {
    httplib::Client c("127.0.0.1", server->port());
    c.set_read_timeout(60, 0);
    httplib::Result r = c.Get("/slow");
    status = r ? r->status : -1;
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return entered; }));
  }
  std::thread stopper([&] { server->Stop(); });
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  stopper.join();
  client.join();
  EXPECT_EQ(status, 200);
  EXPECT_FALSE(server->is_running());
}

TEST(HttpServerTest, AccessLogGetsEveryResponse) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<AccessLogEntry> entries;
  HttpServerOptions options;
  options.web = config::WebConfig{};
  Result<std::string> hash = HashPassword("pw", 4);
  ASSERT_TRUE(hash.ok()) << hash.error();
  options.web->basic_auth_users["alice"] = hash.value();
  options.access_log = [&](const AccessLogEntry& entry) {
    std::lock_guard<std::mutex> lock(mu);
    entries.push_back(entry);
    cv.notify_all();
  };
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto client = PlainClient(*server);
  // The log entry comes after the response is written, possibly after the next
  // request's: wait for each one (bounded) to keep the order known.
  auto wait_for_entries = [&](std::size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), [&] { return entries.size() >= n; });
  };
  ASSERT_TRUE(client->Get("/hello", {{"Authorization", Basic("alice", "pw")}}));
  ASSERT_TRUE(wait_for_entries(1));
  ASSERT_TRUE(client->Get("/hello"));
  ASSERT_TRUE(wait_for_entries(2));
  ASSERT_TRUE(client->Get("/missing", {{"Authorization", Basic("alice", "pw")}}));
  ASSERT_TRUE(wait_for_entries(3));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].status, 200);
  EXPECT_EQ(entries[0].path, "/hello");
  EXPECT_EQ(entries[0].method, "GET");
  EXPECT_EQ(entries[0].user, "alice");
  EXPECT_EQ(entries[0].body_bytes, 6u);
  EXPECT_EQ(entries[0].remote_address, "127.0.0.1");
  EXPECT_EQ(entries[1].status, 401);
  EXPECT_EQ(entries[1].user, "");
  EXPECT_EQ(entries[2].status, 404);
  EXPECT_EQ(entries[2].user, "alice");
}

// ---------------------------------------------------------------------------
// Web config: basic auth and headers

TEST(HttpServerTest, BasicAuthOnEveryPath) {
  Result<std::string> alice = HashPassword("correct horse", 4);
  Result<std::string> bob = HashPassword("battery staple", 5);
  ASSERT_TRUE(alice.ok() && bob.ok());
  HttpServerOptions options;
  options.web = config::WebConfig{};
  options.web->basic_auth_users = {{"alice", alice.value()}, {"bob", bob.value()}};
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  server->Handle("/whoami", [](const HttpRequest& request) {
    HttpResponse response;
    response.body = request.user;
    return response;
  });
  auto client = PlainClient(*server);

  httplib::Result r = client->Get("/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Basic realm=\"kvwatch\"");
  EXPECT_EQ(r->body, "Unauthorized\n");

  r = client->Get("/hello", {{"Authorization", Basic("alice", "wrong")}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = client->Get("/hello", {{"Authorization", Basic("mallory", "correct horse")}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = client->Get("/hello", {{"Authorization", Basic("alice", "battery staple")}});  // bob's
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = client->Get("/hello", {{"Authorization", "Bearer abc"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  // Unknown paths do not answer 404 before authentication.
  r = client->Get("/secret-path");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = client->Post("/hello", "", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);

  r = client->Get("/whoami", {{"Authorization", Basic("alice", "correct horse")}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "alice");
  client->set_basic_auth("bob", "battery staple");  // httplib's own encoding
  r = client->Get("/whoami");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "bob");
}

// ReloadWebConfig (what the agent does on SIGHUP): new connections get the new
// certificate, requests the new users; a config that fails, or one that would
// turn TLS on or off, changes nothing.
TEST(HttpServerTest, ReloadSwapsTheCertificateAndKeepsTheOldOneOnError) {
  const Pki& pki = Pki::Get();
  HttpServerOptions options;
  options.web = TlsConfig();
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto trusting = [&](const std::string& ca) {
    auto client = TlsClient(*server);
    client->set_ca_cert_path(pki.Path(ca));
    httplib::Result r = client->Get("/hello");
    return r && r->status == 200;
  };
  EXPECT_TRUE(trusting("ca.crt"));
  EXPECT_FALSE(trusting("other_ca.crt"));

  config::WebConfig other = TlsConfig();
  other.tls->cert_file = pki.Path("other_server.crt");
  other.tls->key_file = pki.Path("other_server.key");
  Status reloaded = server->ReloadWebConfig(other);
  ASSERT_TRUE(reloaded.ok()) << reloaded.error();
  EXPECT_FALSE(trusting("ca.crt"));
  EXPECT_TRUE(trusting("other_ca.crt"));

  config::WebConfig broken = other;
  broken.tls->key_file = pki.Path("missing.key");
  reloaded = server->ReloadWebConfig(broken);
  ASSERT_FALSE(reloaded.ok());
  EXPECT_NE(reloaded.error().find("missing.key"), std::string::npos) << reloaded.error();
  reloaded = server->ReloadWebConfig(std::nullopt);
  ASSERT_FALSE(reloaded.ok());
  EXPECT_NE(reloaded.error().find("TLS cannot be turned off"), std::string::npos) << reloaded.error();
  EXPECT_TRUE(trusting("other_ca.crt")) << "a failed reload keeps the config in force";
}

TEST(HttpServerTest, ReloadTurnsBasicAuthOnForTheNextRequest) {
  std::unique_ptr<HttpServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = PlainClient(*server);  // one kept-alive connection across the reload
  httplib::Result r = client->Get("/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  config::WebConfig web;
  web.basic_auth_users = {{"alice", HashPassword("pw", 4).value()}};
  web.http.headers = {{"X-Frame-Options", "deny"}};
  ASSERT_TRUE(server->ReloadWebConfig(web).ok());
  r = client->Get("/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(r->get_header_value("X-Frame-Options"), "deny");
  r = client->Get("/hello", {{"Authorization", Basic("alice", "pw")}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // TLS cannot be turned on by a reload: the URL would change.
  Status on = server->ReloadWebConfig(TlsConfig());
  ASSERT_FALSE(on.ok());
  EXPECT_NE(on.error().find("TLS cannot be turned on"), std::string::npos) << on.error();
}

TEST(HttpServerTest, ConfiguredHeadersOnEveryResponse) {
  HttpServerOptions options;
  Result<config::WebConfig> web = config::ParseWebConfig(
      "http_server_config:\n  headers:\n    X-Frame-Options: deny\n"
      "    X-Content-Type-Options: nosniff\n"
      "basic_auth_users:\n  alice: " +
      HashPassword("pw", 4).value() + "\n");
  ASSERT_TRUE(web.ok()) << web.error();
  options.web = web.value();
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  server->Handle("/framed", [](const HttpRequest&) {
    HttpResponse response;
    response.headers.emplace_back("X-Frame-Options", "sameorigin");  // the handler wins
    return response;
  });
  auto client = PlainClient(*server);
  httplib::Headers auth = {{"Authorization", Basic("alice", "pw")}};
  for (const char* path : {"/hello", "/missing"}) {
    for (bool authenticated : {true, false}) {
      httplib::Result r = authenticated ? client->Get(path, auth) : client->Get(path);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->get_header_value("X-Frame-Options"), "deny") << path << " " << r->status;
      EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff") << path;
    }
  }
  httplib::Result r = client->Get("/framed", auth);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("X-Frame-Options"), "sameorigin");
  EXPECT_EQ(r->get_header_value_count("X-Frame-Options"), 1u);
}

// ---------------------------------------------------------------------------
// TLS

TEST(HttpServerTest, HttpsServesAndPlainHttpFails) {
  HttpServerOptions options;
  options.web = TlsConfig();
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->tls());
  EXPECT_EQ(server->url(), "https://127.0.0.1:" + std::to_string(server->port()));

  httplib::Result r = TlsClient(*server)->Get("/hello");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello\n");

  r = PlainClient(*server)->Get("/hello");
  EXPECT_FALSE(r) << "plain HTTP got a response from the TLS port: " << r->status;

  // Still serving TLS after the failed plain request.
  r = TlsClient(*server)->Get("/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(HttpServerTest, HttpsWithBasicAuth) {
  HttpServerOptions options;
  options.web = TlsConfig();
  options.web->basic_auth_users["alice"] = HashPassword("pw", 4).value();
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto client = TlsClient(*server);
  httplib::Result r = client->Get("/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = client->Get("/hello", {{"Authorization", Basic("alice", "pw")}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// Which client identities each client_auth_type admits: "" (no certificate),
// "client" (signed by client_ca_file) and "rogue" (signed by another CA).
TEST(HttpServerTest, ClientCertificatePolicies) {
  using config::ClientAuthType;
  struct Case {
    ClientAuthType type;
    bool none, signed_by_ca, rogue;
  };
  const Case cases[] = {
      {ClientAuthType::kRequestClientCert, true, true, true},
      {ClientAuthType::kRequireAnyClientCert, false, true, true},
      {ClientAuthType::kVerifyClientCertIfGiven, true, true, false},
      {ClientAuthType::kRequireAndVerifyClientCert, false, true, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(config::ClientAuthTypeName(c.type)));
    HttpServerOptions options;
    options.web = TlsConfig(c.type);
    std::unique_ptr<HttpServer> server = StartServer(options);
    ASSERT_NE(server, nullptr);
    const std::pair<std::string, bool> attempts[] = {{"", c.none}, {"client", c.signed_by_ca}, {"rogue", c.rogue}};
    for (const auto& [identity, admitted] : attempts) {
      httplib::Result r = TlsClient(*server, identity)->Get("/hello");
      if (admitted) {
        ASSERT_TRUE(r) << "identity '" << identity << "': " << httplib::to_string(r.error());
        EXPECT_EQ(r->status, 200);
      } else {
        EXPECT_FALSE(r) << "identity '" << identity << "' was admitted";
      }
    }
  }
}

TEST(HttpServerTest, CreateErrorsNameTheFile) {
  const Pki& pki = Pki::Get();
  auto create_error = [](const config::WebConfig& web) {
    HttpServerOptions options;
    options.port = 0;
    options.web = web;
    Result<std::unique_ptr<HttpServer>> created = HttpServer::Create(options);
    return created.ok() ? std::string("(created)") : created.error();
  };
  config::WebConfig web = TlsConfig();
  web.tls->cert_file = pki.Path("missing.crt");
  EXPECT_EQ(create_error(web),
            "tls_server_config.cert_file \"" + pki.Path("missing.crt") + "\": No such file or directory");

  web = TlsConfig();
  web.tls->cert_file = pki.Path("empty.pem");
  std::string e = create_error(web);
  EXPECT_EQ(e.rfind("tls_server_config.cert_file \"" + pki.Path("empty.pem") + "\": cannot load", 0), 0u) << e;

  web = TlsConfig();
  web.tls->key_file = pki.Path("client.key");  // someone else's key
  e = create_error(web);
  EXPECT_NE(e.find("tls_server_config.key_file \"" + pki.Path("client.key") +
                   "\": does not match the certificate in cert_file"),
            std::string::npos)
      << e;

  web = TlsConfig(config::ClientAuthType::kRequireAndVerifyClientCert);
  web.tls->client_ca_file = pki.Path("empty.pem");
  e = create_error(web);
  EXPECT_EQ(e, "tls_server_config.client_ca_file \"" + pki.Path("empty.pem") + "\": no PEM certificates in it");

  web = config::WebConfig{};
  web.basic_auth_users["carol"] = "$2b$10$tooshort";
  e = create_error(web);
  EXPECT_NE(e.find("basic_auth_users.carol"), std::string::npos) << e;
  EXPECT_EQ(e.find("tooshort"), std::string::npos) << "the hash is not echoed: " << e;
}

// ---------------------------------------------------------------------------
// Abusive clients (tests/agent/http_abuse_test.cc has the 1,000-connection ones)

// A raw TCP connection to the server, closed on destruction.
class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  ~RawConnection() { close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  // False once the server has closed the connection.
  bool Send(const std::string& bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // Waits up to wait_ms for bytes and returns the first that arrive ("" if none);
  // sets *closed when the server closed the connection.
  std::string Read(int wait_ms, bool* closed) {
    *closed = false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0) return "";
    char buffer[16384];
    ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      *closed = true;
      return "";
    }
    return std::string(buffer, static_cast<std::size_t>(n));
  }
  // Whether the server closed it within wait_ms (whatever it sent first).
  bool ClosedWithin(int wait_ms) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    bool closed = false;
    do {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      Read(static_cast<int>(std::max<std::int64_t>(0, left.count())), &closed);
    } while (!closed && std::chrono::steady_clock::now() < end);
    return closed;
  }

 private:
  int fd_;
};

TEST(HttpServerTest, RangeHeadersAreIgnored) {
  std::unique_ptr<HttpServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::string body = "kvwatch_test_series 1\nkvwatch_test_series 2\n";
  server->Handle("/metrics", [&body](const HttpRequest&) {
    HttpResponse response;
    response.content_type = "text/plain; version=0.0.4; charset=utf-8";
    response.body = body;
    return response;
  });
  auto client = PlainClient(*server);
  for (const char* range : {"bytes=0-,0-,0-,0-,0-,0-", "bytes=2-4", "bytes=-3"}) {
    for (const char* path : {"/metrics", "/hello"}) {
      httplib::Result r = client->Get(path, {{"Range", range}});
      ASSERT_TRUE(r) << range;
      EXPECT_EQ(r->status, 200) << path << " " << range;
      EXPECT_EQ(r->body, std::string(path) == "/hello" ? "hello\n" : body) << path << " " << range;
      EXPECT_FALSE(r->has_header("Content-Range")) << path << " " << range;
    }
  }
}

// read_timeout bounds the whole request, not the wait for each byte.
TEST(HttpServerTest, TricklingRequestIsCutOffAtTheDeadline) {
  HttpServerOptions options;
  options.read_timeout = std::chrono::milliseconds(300);
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  RawConnection slow(server->port());
  ASSERT_TRUE(slow.Send("GET /hello HTTP/1.1\r\nHost: x\r\n"));
  bool closed = false;
  for (int line = 0; line < 200 && !closed; ++line) {  // 50 ms apart: 10 s at most
    slow.Send("X-Slow-" + std::to_string(line) + ": y\r\n");
    closed = slow.ClosedWithin(50);
  }
  EXPECT_TRUE(closed) << "a header line every 50 ms kept the connection open for 10 s";
  // The server still answers.
  httplib::Result r = PlainClient(*server)->Get("/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(HttpServerTest, TlsHandshakeHasADeadline) {
  HttpServerOptions options;
  options.web = TlsConfig();
  options.read_timeout = std::chrono::milliseconds(300);
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  RawConnection silent(server->port());  // never starts the handshake
  RawConnection partial(server->port());
  ASSERT_TRUE(partial.Send(std::string("\x16\x03\x01\x02\x00\x01", 6)));  // a ClientHello's start
  EXPECT_TRUE(silent.ClosedWithin(10000));
  EXPECT_TRUE(partial.ClosedWithin(10000));
}

TEST(HttpServerTest, IdleKeptAliveConnectionIsClosed) {
  HttpServerOptions options;
  options.keep_alive_timeout = std::chrono::milliseconds(200);
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  RawConnection c(server->port());
  ASSERT_TRUE(c.Send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  bool closed = false;
  std::string got;
  while (!closed && got.find("hello\n") == std::string::npos) got += c.Read(10000, &closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("hello\n"), std::string::npos) << got;
  EXPECT_TRUE(closed || c.ClosedWithin(10000));
}

TEST(HttpServerTest, ConnectionCapClosesTheLongestWaiting) {
  HttpServerOptions options;
  options.max_connections = 4;
  options.read_timeout = std::chrono::seconds(60);  // only the cap closes them here
  options.keep_alive_timeout = std::chrono::seconds(60);
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<RawConnection>(server->port()));
    // Accepted in order: the server answers each connection's request, so the
    // order of arrival is the order of acceptance.
    ASSERT_TRUE(idle.back()->Send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
    bool closed = false;
    std::string got;
    while (got.find("hello\n") == std::string::npos && !closed) {
      got += idle.back()->Read(10000, &closed);
    }
    ASSERT_FALSE(closed);
  }
  // A fifth connection is served; the first (longest idle) is closed for it.
  httplib::Result r = PlainClient(*server)->Get("/hello");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(idle[0]->ClosedWithin(10000));
  for (int i = 1; i < 4; ++i) EXPECT_FALSE(idle[i]->ClosedWithin(0)) << i;
}

TEST(HttpServerTest, UnreadableRequestsGetAnErrorAndClose) {
  HttpServerOptions options;
  options.max_request_body_bytes = 1024;
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  const std::pair<std::string, std::string> cases[] = {
      {"GET /hello HTTP/1.1\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n", "431"},
      {"POST /hello HTTP/1.1\r\nContent-Length: 5000\r\n\r\n" + std::string(5000, 'b'), "413"},
      {"GET /hello HTTP/1.1\r\nContent-Length: x\r\n\r\n", "400"},
  };
  for (const auto& [request, status] : cases) {
    RawConnection c(server->port());
    c.Send(request);
    bool closed = false;
    std::string got;
    while (!closed && got.find("\r\n") == std::string::npos) got += c.Read(10000, &closed);
    EXPECT_EQ(got.rfind("HTTP/1.1 " + status + " ", 0), 0u) << status << ": " << got.substr(0, 80);
    EXPECT_TRUE(closed || c.ClosedWithin(10000)) << status;
  }
}

TEST(HttpServerTest, StopClosesWaitingConnectionsAtOnce) {
  HttpServerOptions options;
  options.read_timeout = std::chrono::seconds(60);
  std::unique_ptr<HttpServer> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  RawConnection idle(server->port());
  RawConnection partial(server->port());
  ASSERT_TRUE(partial.Send("GET /hello HTTP/1.1\r\n"));
  ASSERT_TRUE(PlainClient(*server)->Get("/hello"));  // both have been accepted by now
  server->Stop();                                    // would wait 60 s if it waited for them
  EXPECT_TRUE(idle.ClosedWithin(10000));
  EXPECT_TRUE(partial.ClosedWithin(10000));
}

// ---------------------------------------------------------------------------
// basic_auth.h

TEST(BasicAuthTest, ParsesAuthorizationHeaders) {
  std::optional<BasicCredentials> c = ParseBasicAuthorization("Basic YWxpY2U6cGE6c3M=");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->user, "alice");
  EXPECT_EQ(c->password, "pa:ss");  // split at the first ':'
  c = ParseBasicAuthorization("bAsIc   Ym9iOg==");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->user, "bob");
  EXPECT_EQ(c->password, "");
  EXPECT_FALSE(ParseBasicAuthorization(""));
  EXPECT_FALSE(ParseBasicAuthorization("Basic"));
  EXPECT_FALSE(ParseBasicAuthorization("Bearer YWxpY2U6cHc="));
  EXPECT_FALSE(ParseBasicAuthorization("BasicYWxpY2U6cHc="));
  EXPECT_FALSE(ParseBasicAuthorization("Basic YWxpY2U6cHc"));   // padding required
  EXPECT_FALSE(ParseBasicAuthorization("Basic YWxp*2U6cHc="));  // not base64
  EXPECT_FALSE(ParseBasicAuthorization("Basic YWxpY2U="));      // "alice": no ':'
}

TEST(BasicAuthTest, LibcryptVerifiesBcryptVariants) {
  // From the Prometheus docs (basic-auth guide): password "test", cost 12.
  const std::string docs = "$2b$12$hNf2lSsxfm0.i4a.1kVpSOVyBCfIB51VRjgBUyv6kdnyTlgWj81Ay";
  EXPECT_TRUE(CheckPassword("test", docs));
  EXPECT_FALSE(CheckPassword("Test", docs));

  Result<std::string> made = HashPassword("s3cret", 4);
  ASSERT_TRUE(made.ok()) << made.error();
  const std::string& hash = made.value();
  EXPECT_EQ(hash.rfind("$2b$04$", 0), 0u) << hash;
  EXPECT_EQ(hash.size(), 60u);
  EXPECT_TRUE(CheckPassword("s3cret", hash));
  EXPECT_FALSE(CheckPassword("s3cre", hash));
  EXPECT_FALSE(CheckPassword(std::string("s3cret\0x", 8), hash));
  // $2y$ (htpasswd -B) and $2b$ are the same algorithm: same hash, other prefix.
  std::string y = hash;
  y[2] = 'y';
  EXPECT_TRUE(CheckPassword("s3cret", y));
  EXPECT_FALSE(CheckPassword("s3cret", "*0"));
  EXPECT_FALSE(CheckPassword("s3cret", ""));
  EXPECT_NE(HashPassword("s3cret", 4).value(), hash) << "salts must differ";
  EXPECT_FALSE(HashPassword("x", 3).ok());
}

TEST(BasicAuthTest, DecoyCacheAndCacheKey) {
  Result<std::string> low = HashPassword("alice-pw", 4);
  Result<std::string> high = HashPassword("bob-pw", 6);
  ASSERT_TRUE(low.ok() && high.ok());
  Result<std::unique_ptr<BasicAuthenticator>> created =
      BasicAuthenticator::Create({{"alice", low.value()}, {"bob", high.value()}});
  ASSERT_TRUE(created.ok()) << created.error();
  BasicAuthenticator& auth = *created.value();
  EXPECT_EQ(auth.decoy_cost(), 6);  // the highest configured cost

  EXPECT_TRUE(auth.Verify("alice", "alice-pw"));
  EXPECT_EQ(auth.bcrypt_runs(), 1u);
  EXPECT_TRUE(auth.Verify("alice", "alice-pw"));  // cached
  EXPECT_EQ(auth.bcrypt_runs(), 1u);

  // An unknown user still costs a bcrypt run (against the decoy), then is cached.
  EXPECT_FALSE(auth.Verify("mallory", "alice-pw"));
  EXPECT_EQ(auth.bcrypt_runs(), 2u);
  EXPECT_FALSE(auth.Verify("mallory", "alice-pw"));
  EXPECT_EQ(auth.bcrypt_runs(), 2u);

  // A cached success answers only for the same user and password.
  EXPECT_FALSE(auth.Verify("bob", "alice-pw"));
  EXPECT_FALSE(auth.Verify("alice", "alice-pw "));
  EXPECT_FALSE(auth.Verify("alice", low.value()));  // the hash is not a password
  EXPECT_FALSE(auth.Verify("", ""));
  EXPECT_TRUE(auth.Verify("bob", "bob-pw"));

  EXPECT_EQ(auth.Authenticate(Basic("bob", "bob-pw")), std::optional<std::string>("bob"));
  EXPECT_EQ(auth.Authenticate(Basic("bob", "alice-pw")), std::nullopt);
  EXPECT_EQ(auth.Authenticate(""), std::nullopt);

  EXPECT_FALSE(BasicAuthenticator::Create({}).ok());
  Result<std::unique_ptr<BasicAuthenticator>> bad =
      BasicAuthenticator::Create({{"dave", "$1$abc$" + std::string(54, 'x')}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("basic_auth_users.dave"), std::string::npos) << bad.error();
}

TEST(BasicAuthTest, CacheStaysBounded) {
  Result<std::unique_ptr<BasicAuthenticator>> created =
      BasicAuthenticator::Create({{"alice", HashPassword("pw", 4).value()}});
  ASSERT_TRUE(created.ok());
  BasicAuthenticator& auth = *created.value();
  for (std::size_t i = 0; i < BasicAuthenticator::kCacheCapacity + 10; ++i) {
    EXPECT_FALSE(auth.Verify("alice", "guess" + std::to_string(i)));
  }
  std::uint64_t runs = auth.bcrypt_runs();
  EXPECT_EQ(runs, BasicAuthenticator::kCacheCapacity + 10);
  // The oldest guesses were dropped when the cache filled: checking one again costs a run.
  EXPECT_FALSE(auth.Verify("alice", "guess0"));
  EXPECT_EQ(auth.bcrypt_runs(), runs + 1);
  EXPECT_TRUE(auth.Verify("alice", "pw"));
}

TEST(ListenAddressTest, Parses) {
  auto parsed = ParseListenAddress("127.0.0.1:9477");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed.value(), std::make_pair(std::string("127.0.0.1"), 9477));
  parsed = ParseListenAddress(":10049");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed.value(), std::make_pair(std::string("0.0.0.0"), 10049));
  parsed = ParseListenAddress("[::1]:0");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed.value(), std::make_pair(std::string("::1"), 0));
  parsed = ParseListenAddress("localhost:65535");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed.value().first, "localhost");
  for (const char* bad : {"9477", "host:", "host:65536", "host:12a", "::1:9477", "[::1:9477", "host:-1"}) {
    Result<std::pair<std::string, int>> r = ParseListenAddress(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().find(std::string("\"") + bad + "\""), std::string::npos) << r.error();
  }
  EXPECT_EQ(FormatHostPort("::1", 80), "[::1]:80");
  EXPECT_EQ(FormatHostPort("10.0.0.1", 80), "10.0.0.1:80");
}

}  // namespace
}  // namespace kvwatch::agent
