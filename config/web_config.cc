#include "config/web_config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "base/text_file.h"
#include "config/field_reader.h"

namespace kvwatch::config {
namespace {

using base::Result;
using base::Status;
using internal::Choice;
using internal::Entry;
using internal::FieldReader;
using internal::KeyTable;
using internal::RefusedKey;
using Type = ConfigType;

constexpr Choice<ClientAuthType> kClientAuthTypes[] = {
    {"NoClientCert", ClientAuthType::kNoClientCert},
    {"RequestClientCert", ClientAuthType::kRequestClientCert},
    {"RequireAnyClientCert", ClientAuthType::kRequireAnyClientCert},
    {"RequireClientCert", ClientAuthType::kRequireAnyClientCert},  // toolkit's old name
    {"VerifyClientCertIfGiven", ClientAuthType::kVerifyClientCertIfGiven},
    {"RequireAndVerifyClientCert", ClientAuthType::kRequireAndVerifyClientCert},
};

constexpr Choice<TlsVersion> kTlsVersions[] = {
    {"TLS10", TlsVersion::kTls10},
    {"TLS11", TlsVersion::kTls11},
    {"TLS12", TlsVersion::kTls12},
    {"TLS13", TlsVersion::kTls13},
};

// The web config file's key table, read by the agent config's walker
// (field_reader.h): every key accepted, with its type. The header names are
// exporter-toolkit's extraHTTPHeaders, the only headers that may be configured.
constexpr ConfigKey kWebConfigKeys[] = {
    {"tls_server_config", Type::kMap, "unset", false, "TLS; on when a file or client_auth_type is set."},
    {"tls_server_config.cert_file", Type::kString, "unset", false, "PEM certificate chain."},
    {"tls_server_config.key_file", Type::kString, "unset", false, "PEM private key."},
    {"tls_server_config.client_auth_type", Type::kString, "NoClientCert", false, "Client certificate policy."},
    {"tls_server_config.client_ca_file", Type::kString, "unset", false, "PEM CA bundle for client certificates."},
    {"tls_server_config.min_version", Type::kString, "TLS12", false, "Lowest TLS version."},
    {"tls_server_config.max_version", Type::kString, "TLS13", false, "Highest TLS version."},
    {"tls_server_config.prefer_server_cipher_suites", Type::kBool, "true", true, "Server's cipher order."},
    {"http_server_config", Type::kMap, "{}", true, "HTTP settings."},
    {"http_server_config.http2", Type::kBool, "true", true, "Accepted; no effect (HTTP/1.1 only)."},
    {"http_server_config.headers", Type::kMap, "{}", true, "Headers added to every response."},
    {"http_server_config.headers.Content-Security-Policy", Type::kString, "unset", false, "Any value."},
    {"http_server_config.headers.Strict-Transport-Security", Type::kString, "unset", false, "Any value."},
    {"http_server_config.headers.X-Content-Type-Options", Type::kString, "unset", false, "nosniff."},
    {"http_server_config.headers.X-Frame-Options", Type::kString, "unset", false, "deny or sameorigin."},
    {"http_server_config.headers.X-XSS-Protection", Type::kString, "unset", false, "Any value."},
    {"basic_auth_users", Type::kStringMap, "{}", true, "User name -> bcrypt hash."},
};

// Exporter-toolkit keys kvwatch does not implement, with a hint: each of them
// would change who may connect, so they are refused rather than ignored.
constexpr RefusedKey kUnsupportedKeys[] = {
    {"tls_server_config.cert", "is an exporter-toolkit setting that kvwatch does not support (use cert_file)"},
    {"tls_server_config.key", "is an exporter-toolkit setting that kvwatch does not support (use key_file)"},
    {"tls_server_config.client_ca",
     "is an exporter-toolkit setting that kvwatch does not support (use client_ca_file)"},
    {"tls_server_config.cipher_suites",
     "is an exporter-toolkit setting that kvwatch does not support (OpenSSL's defaults are used)"},
    {"tls_server_config.curve_preferences",
     "is an exporter-toolkit setting that kvwatch does not support (OpenSSL's defaults are used)"},
    {"tls_server_config.client_allowed_sans",
     "is an exporter-toolkit setting that kvwatch does not support (restrict clients with client_ca_file instead)"},
    {"rate_limit",
     "is an exporter-toolkit setting that kvwatch does not support (put a proxy in front if you need one)"},
};

// The values allowed for a header where they form a closed set (empty: any value).
std::vector<std::string_view> AllowedHeaderValues(const std::string& name) {
  if (name == "X-Content-Type-Options") return {"nosniff"};
  if (name == "X-Frame-Options") return {"deny", "sameorigin"};
  return {};
}

std::string ResolvePath(const std::string& path, const std::string& base_dir) {
  if (path.empty() || base_dir.empty()) return path;
  std::filesystem::path p(path);
  if (p.is_absolute()) return path;
  return (std::filesystem::path(base_dir) / p).string();
}

bool IsBcryptAlphabet(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '/';
}

// "$2b$10$" + 22 characters of salt + 31 of hash.
bool IsBcryptHash(const std::string& hash) {
  if (hash.size() != 60) return false;
  if (hash[0] != '$' || hash[1] != '2' || hash[3] != '$' || hash[6] != '$') return false;
  if (hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') return false;
  if (hash[4] < '0' || hash[4] > '9' || hash[5] < '0' || hash[5] > '9') return false;
  int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  if (cost < 4 || cost > 31) return false;
  for (std::size_t i = 7; i < hash.size(); ++i) {
    if (!IsBcryptAlphabet(hash[i])) return false;
  }
  return true;
}

// The last key of an entry's table path ("cert_file" of "tls_server_config.cert_file").
std::string_view KeyName(const Entry& e) {
  std::string_view pattern = e.pattern;
  std::size_t dot = pattern.rfind('.');
  return dot == std::string_view::npos ? pattern : pattern.substr(dot + 1);
}

class WebConfigParser {
 public:
  WebConfigParser(std::string_view source, const std::string& base_dir)
      : r_(source, KeyTable{kWebConfigKeys, kUnsupportedKeys}), base_dir_(base_dir) {}

  Result<WebConfig> Parse(const YAML::Node& document) {
    WebConfig config;
    Entry root{"", "", Type::kMap, document, document.Mark(), document.Mark()};
    if (root.node.IsNull()) return config;
    if (!root.node.IsMap()) {
      return Result<WebConfig>::Error(
          r_.Fail("(top level)", root.mark,
                  "expected a map with tls_server_config, http_server_config or basic_auth_users, got " +
                      internal::Got(root.node))
              .error());
    }
    Status status = r_.ForEachKey(root, [&](const Entry& e) -> Status {
      if (e.pattern == "tls_server_config") return ParseTls(e, &config.tls);
      if (e.pattern == "http_server_config") return ParseHttp(e, &config.http);
      if (e.pattern == "basic_auth_users") return ParseUsers(e, &config.basic_auth_users);
      return r_.Unhandled(e);
    });
    if (!status.ok()) return Result<WebConfig>::Error(status.error());
    return config;
  }

 private:
  // Parses tls_server_config; sets *out when TLS is on.
  Status ParseTls(const Entry& section, std::optional<TlsServerConfig>* out) {
    TlsServerConfig tls;
    bool enabled = false;                       // toolkit's TLSConfig.IsEnabled()
    std::optional<Entry> ca_entry, auth_entry;  // for errors that involve two keys
    Status status = r_.ForEachKey(section, [&](const Entry& e) -> Status {
      std::string_view key = KeyName(e);
      if (key == "cert_file" || key == "key_file" || key == "client_ca_file") {
        std::string path;
        if (Status s = r_.ReadString(e, &path); !s.ok()) return s;
        std::string& target = key == "cert_file"  ? tls.cert_file
                              : key == "key_file" ? tls.key_file
                                                  : tls.client_ca_file;
        target = ResolvePath(path, base_dir_);
        enabled = enabled || !target.empty();
        if (key == "client_ca_file" && !target.empty()) ca_entry = e;
        return Status::Ok();
      }
      if (key == "client_auth_type") {
        if (e.node.IsNull()) return Status::Ok();
        if (Status s = r_.ReadChoice(e, kClientAuthTypes, &tls.client_auth_type); !s.ok()) return s;
        enabled = true;
        auth_entry = e;
        return Status::Ok();
      }
      if (key == "min_version" || key == "max_version") {
        if (e.node.IsNull()) return Status::Ok();
        return r_.ReadChoice(e, kTlsVersions, key == "min_version" ? &tls.min_version : &tls.max_version);
      }
      if (key == "prefer_server_cipher_suites") {
        return r_.ReadBool(e, &tls.prefer_server_cipher_suites, /*allow_quoted=*/true);
      }
      return r_.Unhandled(e);
    });
    if (!status.ok()) return status;
    if (!enabled) return Status::Ok();  // e.g. only min_version: TLS stays off, as in the toolkit

    if (tls.cert_file.empty()) {
      return r_.FailAtKey(section, "missing cert_file (required when TLS is configured)");
    }
    if (tls.key_file.empty()) {
      return r_.FailAtKey(section, "missing key_file (required when TLS is configured)");
    }
    if (tls.min_version > tls.max_version) {
      return r_.FailAtKey(section, "min_version " + std::string(TlsVersionName(tls.min_version)) +
                                       " is above max_version " + std::string(TlsVersionName(tls.max_version)));
    }
    bool verifies = tls.client_auth_type == ClientAuthType::kVerifyClientCertIfGiven ||
                    tls.client_auth_type == ClientAuthType::kRequireAndVerifyClientCert;
    if (verifies && tls.client_ca_file.empty()) {
      return r_.Fail(*auth_entry, std::string(ClientAuthTypeName(tls.client_auth_type)) +
                                      " needs client_ca_file to verify certificates");
    }
    if (ca_entry && tls.client_auth_type == ClientAuthType::kNoClientCert) {
      return r_.Fail(*ca_entry,
                     "client_ca_file is set but client_auth_type is NoClientCert; set client_auth_type "
                     "(RequireAndVerifyClientCert to require verified client certificates)");
    }
    *out = std::move(tls);
    return Status::Ok();
  }

  Status ParseHeaders(const Entry& section, HttpServerConfig* http) {
    return r_.ForEachKey(section, [&](const Entry& e) -> Status {
      std::string name(KeyName(e));
      std::string value;
      if (Status s = r_.ReadString(e, &value); !s.ok()) return s;
      for (char c : value) {
        if (c == '\r' || c == '\n' || c == '\0') return r_.Fail(e, "header values may not contain CR, LF or NUL");
      }
      std::vector<std::string_view> allowed = AllowedHeaderValues(name);
      if (!allowed.empty()) {
        bool ok = false;
        std::string choices;
        for (std::string_view v : allowed) {
          ok = ok || v == value;
          choices += (choices.empty() ? "" : ", ") + std::string(v);
        }
        if (!ok) return r_.Expected(e, "one of " + choices);
      }
      http->headers.emplace_back(name, value);
      return Status::Ok();
    });
  }

  Status ParseHttp(const Entry& section, HttpServerConfig* http) {
    return r_.ForEachKey(section, [&](const Entry& e) -> Status {
      if (e.pattern == "http_server_config.http2") {
        if (e.node.IsNull()) return Status::Ok();
        return r_.ReadBool(e, &http->http2, /*allow_quoted=*/true);
      }
      if (e.pattern == "http_server_config.headers") return ParseHeaders(e, http);
      return r_.Unhandled(e);
    });
  }

  Status ParseUsers(const Entry& section, std::map<std::string, std::string>* users) {
    return r_.ForEachNamedKey(section, [&](const Entry& e) -> Status {
      std::string user(e.path.substr(section.path.size() + 1));
      if (user.find(':') != std::string::npos) {
        return r_.FailAtKey(e, "a user name may not contain ':' (basic auth splits there)");
      }
      if (!e.node.IsScalar()) return r_.Expected(e, "a bcrypt hash string");
      const std::string& hash = e.node.Scalar();
      if (!IsBcryptHash(hash)) {
        // The value is a secret's hash: say what is wrong without echoing it.
        return r_.Fail(e,
                       "expected a bcrypt hash: $2a$, $2b$ or $2y$, a cost of 04 to 31, '$', then 53 "
                       "characters of [./A-Za-z0-9] (e.g. from htpasswd -nBC 10 \"\" | tr -d ':\\n'); got " +
                           std::to_string(hash.size()) + " characters");
      }
      (*users)[user] = hash;
      return Status::Ok();
    });
  }

  FieldReader r_;
  std::string base_dir_;
};

}  // namespace

std::string_view ClientAuthTypeName(ClientAuthType type) {
  return internal::ChoiceName(kClientAuthTypes, type);  // the first spelling is the canonical one
}

std::string_view TlsVersionName(TlsVersion version) { return internal::ChoiceName(kTlsVersions, version); }

Result<WebConfig> ParseWebConfig(std::string_view yaml_text, const std::string& base_dir, std::string_view source) {
  // Only the first document is read (as the toolkit's yaml.Unmarshal does).
  Result<std::vector<YAML::Node>> documents = internal::LoadYaml(source, yaml_text, /*only_first=*/true);
  if (!documents.ok()) return Result<WebConfig>::Error(documents.error());
  WebConfigParser parser(source, base_dir);
  try {
    return parser.Parse(documents.value().front());
  } catch (const YAML::Exception& ex) {  // not expected: every access is checked first
    internal::FieldReader at(source);
    return Result<WebConfig>::Error(at.Fail("(top level)", ex.mark, "unexpected YAML error: " + ex.msg).error());
  }
}

Result<WebConfig> ReadWebConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Result<WebConfig>::Error(path + ": cannot open web config: " + std::strerror(errno));
  }
  std::string text;
  if (std::string problem = base::ReadBoundedText(path, in, &text); !problem.empty()) {
    return Result<WebConfig>::Error(path + ": web config " + problem);
  }
  return ParseWebConfig(text, std::filesystem::path(path).parent_path().string(), path);
}

}  // namespace kvwatch::config
