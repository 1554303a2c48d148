// Web config: the security settings of the agent's HTTP server, read from the
// YAML "web config file" of the Prometheus exporter-toolkit
// (docs/web-configuration.md), so that `promtool check web-config` and existing
// operations knowledge apply unchanged (github.com/prometheus/exporter-toolkit:
// docs/web-configuration.md for the keys and defaults, web/tls_config_test.go's
// testdata/*.good.yml and *.bad.yml for what is accepted).
//
// Keys accepted (everything else is an error that names the file, the line and
// the key). The file is read by the agent config's walker (field_reader.h) against
// this format's own key table (web_config.cc):
//
//   tls_server_config:            TLS is on when any of cert_file, key_file,
//     cert_file: <path>           client_auth_type or client_ca_file is set; then
//     key_file: <path>            cert_file and key_file are both required.
//     client_auth_type: <type>    NoClientCert (default), RequestClientCert,
//                                 RequireAnyClientCert (alias RequireClientCert),
//                                 VerifyClientCertIfGiven, RequireAndVerifyClientCert
//     client_ca_file: <path>      required by the two Verify* types; an error with
//                                 NoClientCert (as in exporter-toolkit)
//     min_version: TLS12          TLS10 | TLS11 | TLS12 (default) | TLS13
//     max_version: TLS13          default TLS13; must not be below min_version
//     prefer_server_cipher_suites: true   (default true)
//   http_server_config:
//     http2: <bool>               accepted for compatibility; kvwatch serves
//                                 HTTP/1.1 only, so it has no effect
//     headers: {name: value}      only the toolkit's five names:
//                                 Content-Security-Policy, Strict-Transport-Security,
//                                 X-Content-Type-Options (value nosniff),
//                                 X-Frame-Options (deny | sameorigin),
//                                 X-XSS-Protection. No CR/LF in values.
//   basic_auth_users: {user: <bcrypt hash>}   $2a$/$2b$/$2y$, cost 04-31, 60
//                                 characters; a user name may not contain ':'
//
// Toolkit keys kvwatch does not implement (cert, key, client_ca inline PEM,
// cipher_suites, curve_preferences, client_allowed_sans, rate_limit) are
// rejected with an error saying so, rather than being ignored silently: each of
// them would change who may connect.
//
// A null value (`tls_server_config:` with nothing under it) counts as absent.
// Duplicate keys are errors. An empty document is a valid config that turns
// nothing on. Relative file paths are resolved against base_dir, like the
// toolkit resolves them against the config file's directory. Parsing only
// checks the text: whether the files exist and hold certificates is checked when
// the server is created (agent/http_server.h).
//
// Errors read as the agent config's, "<source>:<line>: <key path>: <what was
// expected>", e.g. "/etc/kvwatch/web.yml:4: tls_server_config.client_auth_type:
// expected one of ...". YAML syntax errors read "<source>:<line>: invalid YAML: ...".
//
// Thread safety: pure functions; ReadWebConfigFile reads the file system.
#ifndef KVWATCH_CONFIG_WEB_CONFIG_H_
#define KVWATCH_CONFIG_WEB_CONFIG_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace kvwatch::config {

// Where the agent's HTTP server listens unless told otherwise: the defaults of
// web.listen_address and web.port (agent_config.h's WebSettings) and of
// HttpServerOptions (agent/web/http_server.h), written once here.
inline constexpr std::string_view kDefaultListenAddress = "127.0.0.1";
inline constexpr int kDefaultPort = 8477;
// Open connections the HTTP server keeps at most (web.max_connections): enough
// for Prometheus, browsers and the API; each costs a socket and a few KiB.
inline constexpr int kDefaultMaxConnections = 1024;

// The client certificate policy, with Go's crypto/tls meaning.
enum class ClientAuthType {
  kNoClientCert,                // no certificate is requested
  kRequestClientCert,           // requested, not required, not verified
  kRequireAnyClientCert,        // required, not verified
  kVerifyClientCertIfGiven,     // requested; verified against client_ca_file if sent
  kRequireAndVerifyClientCert,  // required and verified: the only secure mTLS choice
};

enum class TlsVersion { kTls10, kTls11, kTls12, kTls13 };

struct TlsServerConfig {
  std::string cert_file;  // PEM certificate chain (leaf first); path resolved
  std::string key_file;   // PEM private key; path resolved
  ClientAuthType client_auth_type = ClientAuthType::kNoClientCert;
  std::string client_ca_file;  // PEM CA bundle; empty when not set
  TlsVersion min_version = TlsVersion::kTls12;
  TlsVersion max_version = TlsVersion::kTls13;
  bool prefer_server_cipher_suites = true;
};

struct HttpServerConfig {
  bool http2 = true;  // parsed for compatibility; has no effect (HTTP/1.1 only)
  // Added to every response, in the order written in the file.
  std::vector<std::pair<std::string, std::string>> headers;
};

struct WebConfig {
  std::optional<TlsServerConfig> tls;  // set when TLS is on (see above)
  HttpServerConfig http;
  std::map<std::string, std::string> basic_auth_users;  // user -> bcrypt hash
};

// Parses the text of a web config file. Relative paths are joined to base_dir
// (left as they are when base_dir is empty); errors start with source.
base::Result<WebConfig> ParseWebConfig(std::string_view yaml_text, const std::string& base_dir = "",
                                       std::string_view source = "web config");

// Reads and parses the file at path; relative paths in it are resolved against
// the file's directory. Errors start with the path (the source above).
base::Result<WebConfig> ReadWebConfigFile(const std::string& path);

// The spelling used in the file ("RequireAndVerifyClientCert", "TLS12").
std::string_view ClientAuthTypeName(ClientAuthType type);
std::string_view TlsVersionName(TlsVersion version);

}  // namespace kvwatch::config

#endif  // KVWATCH_CONFIG_WEB_CONFIG_H_
