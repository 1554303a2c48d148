#include "config/web_config.h"

#include <yaml-cpp/yaml.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "config/text_file.h"
#include "config/yaml_guard.h"

namespace kvwatch::config {
namespace {

using base::Result;
using base::Status;

constexpr std::array<std::pair<std::string_view, ClientAuthType>, 6> kClientAuthTypes = {{
    {"NoClientCert", ClientAuthType::kNoClientCert},
    {"RequestClientCert", ClientAuthType::kRequestClientCert},
    {"RequireAnyClientCert", ClientAuthType::kRequireAnyClientCert},
    {"RequireClientCert", ClientAuthType::kRequireAnyClientCert},  // toolkit's old name
    {"VerifyClientCertIfGiven", ClientAuthType::kVerifyClientCertIfGiven},
    {"RequireAndVerifyClientCert", ClientAuthType::kRequireAndVerifyClientCert},
}};

constexpr std::array<std::pair<std::string_view, TlsVersion>, 4> kTlsVersions = {{
    {"TLS10", TlsVersion::kTls10},
    {"TLS11", TlsVersion::kTls11},
    {"TLS12", TlsVersion::kTls12},
    {"TLS13", TlsVersion::kTls13},
}};

// exporter-toolkit's extraHTTPHeaders: the only headers that may be configured,
// with the allowed values where they form a closed set (empty: any value).
struct AllowedHeader {
  std::string_view name;
  std::vector<std::string_view> values;
};
const std::vector<AllowedHeader>& AllowedHeaders() {
  static const std::vector<AllowedHeader> kAllowed = {
      {"Content-Security-Policy", {}},
      {"Strict-Transport-Security", {}},
      {"X-Content-Type-Options", {"nosniff"}},
      {"X-Frame-Options", {"deny", "sameorigin"}},
      {"X-XSS-Protection", {}},
  };
  return kAllowed;
}

// Where a node is in the text: "(line L, column C)", 1-based; empty when unknown.
std::string Where(const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return "";
  return "(line " + std::to_string(mark.line + 1) + ", column " +
         std::to_string(mark.column + 1) + ")";
}

// "<key> (line L, column C): <what>".
std::string FormatError(const std::string& key, const YAML::Mark& mark, const std::string& what) {
  std::string where = Where(mark);
  return key + (where.empty() ? "" : " " + where) + ": " + what;
}

// The mark of value, or of its key when the value is null (an empty value has
// no position of its own: yaml-cpp reports where the next token starts).
YAML::Mark MarkOf(const YAML::Node& value, const YAML::Node& key) {
  YAML::Mark mark = value.Mark();
  return value.IsNull() || mark.is_null() || mark.line < 0 ? key.Mark() : mark;
}

std::string Join(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// One entry of a mapping being walked: its full key path and both nodes.
struct Entry {
  std::string key;   // the key as written
  std::string path;  // dotted path from the top, e.g. "tls_server_config.cert_file"
  YAML::Node key_node;
  YAML::Node value;
  YAML::Mark value_mark() const { return MarkOf(value, key_node); }
  std::string Error(const std::string& what) const { return FormatError(path, value_mark(), what); }
  std::string KeyError(const std::string& what) const {
    return FormatError(path, key_node.Mark(), what);
  }
};

// Calls visit on each entry of map in order, after checking that keys are
// scalars and unique. Stops at the first error.
Status ForEachEntry(const YAML::Node& map, const std::string& path,
                    const std::function<Status(const Entry&)>& visit) {
  std::set<std::string> seen;
  for (const auto& key_value : map) {
    YAML::Node key_node = key_value.first;
    if (!key_node.IsScalar()) {
      return Status::Error(FormatError(path.empty() ? "top level" : path, key_node.Mark(),
                                    "expected a plain key, got a structured one"));
    }
    Entry entry{key_node.Scalar(), Join(path, key_node.Scalar()), key_node, key_value.second};
    if (!seen.insert(entry.key).second) return Status::Error(entry.KeyError("duplicate key"));
    Status status = visit(entry);
    if (!status.ok()) return status;
  }
  return Status::Ok();
}

// A string value; a null value gives an empty string.
Result<std::string> ReadString(const Entry& entry) {
  if (entry.value.IsNull()) return std::string();
  if (!entry.value.IsScalar()) return Result<std::string>::Error(entry.Error("expected a string"));
  return entry.value.Scalar();
}

Result<bool> ReadBool(const Entry& entry) {
  bool value = false;
  if (!entry.value.IsScalar() || !YAML::convert<bool>::decode(entry.value, value)) {
    return Result<bool>::Error(entry.Error("expected true or false"));
  }
  return value;
}

// A value that must be one of names (the first column of table).
template <class T, std::size_t N>
Result<T> ReadEnum(const Entry& entry,
                   const std::array<std::pair<std::string_view, T>, N>& table) {
  Result<std::string> text = ReadString(entry);
  if (text.ok()) {
    for (const auto& [name, value] : table) {
      if (name == text.value()) return value;
    }
  }
  std::string names;
  for (const auto& [name, value] : table) names += (names.empty() ? "" : ", ") + std::string(name);
  std::string got = text.ok() ? " got \"" + text.value() + "\"" : " got a non-string value";
  return Result<T>::Error(entry.Error("expected one of " + names + ";" + got));
}

// Exporter-toolkit keys kvwatch does not implement, with a hint.
const char* UnsupportedHint(const std::string& path) {
  if (path == "tls_server_config.cert") return "use cert_file";
  if (path == "tls_server_config.key") return "use key_file";
  if (path == "tls_server_config.client_ca") return "use client_ca_file";
  if (path == "tls_server_config.cipher_suites") return "OpenSSL's defaults are used";
  if (path == "tls_server_config.curve_preferences") return "OpenSSL's defaults are used";
  if (path == "tls_server_config.client_allowed_sans") {
    return "restrict clients with client_ca_file instead";
  }
  if (path == "rate_limit") return "put a proxy in front if you need one";
  return nullptr;
}

Status UnknownKey(const Entry& entry) {
  if (const char* hint = UnsupportedHint(entry.path)) {
    return Status::Error(entry.KeyError(
        std::string("is an exporter-toolkit setting that kvwatch does not support (") + hint +
        ")"));
  }
  return Status::Error(entry.KeyError("unknown key"));
}

std::string ResolvePath(const std::string& path, const std::string& base_dir) {
  if (path.empty() || base_dir.empty()) return path;
  std::filesystem::path p(path);
  if (p.is_absolute()) return path;
  return (std::filesystem::path(base_dir) / p).string();
}

bool IsBcryptAlphabet(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '/';
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

// Parses tls_server_config; sets *out when TLS is on.
Status ParseTls(const YAML::Node& node, const Entry& section, const std::string& base_dir,
                std::optional<TlsServerConfig>* out) {
  TlsServerConfig tls;
  bool enabled = false;                   // toolkit's TLSConfig.IsEnabled()
  std::optional<Entry> ca_entry, auth_entry;  // for errors that involve two keys
  Status status = ForEachEntry(node, section.path, [&](const Entry& e) -> Status {
    if (e.key == "cert_file" || e.key == "key_file" || e.key == "client_ca_file") {
      Result<std::string> path = ReadString(e);
      if (!path.ok()) return path.status();
      std::string& target = e.key == "cert_file"  ? tls.cert_file
                            : e.key == "key_file" ? tls.key_file
                                                  : tls.client_ca_file;
      target = ResolvePath(path.value(), base_dir);
      enabled = enabled || !target.empty();
      if (e.key == "client_ca_file" && !target.empty()) ca_entry = e;
      return Status::Ok();
    }
    if (e.key == "client_auth_type") {
      if (e.value.IsNull()) return Status::Ok();
      Result<ClientAuthType> type = ReadEnum(e, kClientAuthTypes);
      if (!type.ok()) return type.status();
      tls.client_auth_type = type.value();
      enabled = true;
      auth_entry = e;
      return Status::Ok();
    }
    if (e.key == "min_version" || e.key == "max_version") {
      if (e.value.IsNull()) return Status::Ok();
      Result<TlsVersion> version = ReadEnum(e, kTlsVersions);
      if (!version.ok()) return version.status();
      (e.key == "min_version" ? tls.min_version : tls.max_version) = version.value();
      return Status::Ok();
    }
    if (e.key == "prefer_server_cipher_suites") {
      Result<bool> prefer = ReadBool(e);
      if (!prefer.ok()) return prefer.status();
      tls.prefer_server_cipher_suites = prefer.value();
      return Status::Ok();
    }
    return UnknownKey(e);
  });
  if (!status.ok()) return status;
  if (!enabled) return Status::Ok();  // e.g. only min_version: TLS stays off, as in the toolkit

  if (tls.cert_file.empty()) {
    return Status::Error(section.KeyError("missing cert_file (required when TLS is configured)"));
  }
  if (tls.key_file.empty()) {
    return Status::Error(section.KeyError("missing key_file (required when TLS is configured)"));
  }
  if (tls.min_version > tls.max_version) {
    return Status::Error(section.KeyError("min_version " +
                                          std::string(TlsVersionName(tls.min_version)) +
                                          " is above max_version " +
                                          std::string(TlsVersionName(tls.max_version))));
  }
  bool verifies = tls.client_auth_type == ClientAuthType::kVerifyClientCertIfGiven ||
                  tls.client_auth_type == ClientAuthType::kRequireAndVerifyClientCert;
  if (verifies && tls.client_ca_file.empty()) {
    return Status::Error(auth_entry->Error(std::string(ClientAuthTypeName(tls.client_auth_type)) +
                                           " needs client_ca_file to verify certificates"));
  }
  if (ca_entry && tls.client_auth_type == ClientAuthType::kNoClientCert) {
    return Status::Error(ca_entry->Error(
        "client_ca_file is set but client_auth_type is NoClientCert; set client_auth_type "
        "(RequireAndVerifyClientCert to require verified client certificates)"));
  }
  *out = std::move(tls);
  return Status::Ok();
}

Status ParseHeaders(const Entry& section, HttpServerConfig* http) {
  if (section.value.IsNull()) return Status::Ok();
  if (!section.value.IsMap()) return Status::Error(section.Error("expected a mapping of header: value"));
  return ForEachEntry(section.value, section.path, [&](const Entry& e) -> Status {
    const AllowedHeader* allowed = nullptr;
    std::string names;
    for (const AllowedHeader& header : AllowedHeaders()) {
      if (header.name == e.key) allowed = &header;
      names += (names.empty() ? "" : ", ") + std::string(header.name);
    }
    if (allowed == nullptr) {
      return Status::Error(e.KeyError("HTTP header \"" + e.key +
                                      "\" can not be configured; allowed: " + names));
    }
    Result<std::string> value = ReadString(e);
    if (!value.ok()) return value.status();
    for (char c : value.value()) {
      if (c == '\r' || c == '\n' || c == '\0') {
        return Status::Error(e.Error("header values may not contain CR, LF or NUL"));
      }
    }
    if (!allowed->values.empty()) {
      bool ok = false;
      std::string choices;
      for (std::string_view v : allowed->values) {
        ok = ok || v == value.value();
        choices += (choices.empty() ? "" : ", ") + std::string(v);
      }
      if (!ok) {
        return Status::Error(e.Error("expected one of " + choices + "; got \"" + value.value() + "\""));
      }
    }
    http->headers.emplace_back(e.key, value.value());
    return Status::Ok();
  });
}

Status ParseHttp(const Entry& section, HttpServerConfig* http) {
  return ForEachEntry(section.value, section.path, [&](const Entry& e) -> Status {
    if (e.key == "http2") {
      if (e.value.IsNull()) return Status::Ok();
      Result<bool> on = ReadBool(e);
      if (!on.ok()) return on.status();
      http->http2 = on.value();
      return Status::Ok();
    }
    if (e.key == "headers") return ParseHeaders(e, http);
    return UnknownKey(e);
  });
}

Status ParseUsers(const Entry& section, std::map<std::string, std::string>* users) {
  return ForEachEntry(section.value, section.path, [&](const Entry& e) -> Status {
    if (e.key.find(':') != std::string::npos) {
      return Status::Error(e.KeyError("a user name may not contain ':' (basic auth splits there)"));
    }
    if (!e.value.IsScalar()) return Status::Error(e.Error("expected a bcrypt hash string"));
    const std::string& hash = e.value.Scalar();
    if (!IsBcryptHash(hash)) {
      // The value is a secret's hash: say what is wrong without echoing it.
      return Status::Error(e.Error(
          "expected a bcrypt hash: $2a$, $2b$ or $2y$, a cost of 04 to 31, '$', then 53 "
          "characters of [./A-Za-z0-9] (e.g. from htpasswd -nBC 10 \"\" | tr -d ':\\n'); got " +
          std::to_string(hash.size()) + " characters"));
    }
    (*users)[e.key] = hash;
    return Status::Ok();
  });
}

// Checks that a section is a mapping (or null, meaning absent).
Status ExpectMapOrNull(const Entry& e) {
  if (e.value.IsNull() || e.value.IsMap()) return Status::Ok();
  return Status::Error(e.Error("expected a mapping"));
}

Result<WebConfig> ParseDocument(const YAML::Node& root, const std::string& base_dir) {
  WebConfig config;
  if (root.IsNull()) return config;
  if (!root.IsMap()) {
    return Result<WebConfig>::Error(
        FormatError("top level", root.Mark(),
                 "expected a mapping with tls_server_config, http_server_config or "
                 "basic_auth_users"));
  }
  Status status = ForEachEntry(root, "", [&](const Entry& e) -> Status {
    if (e.key != "tls_server_config" && e.key != "http_server_config" &&
        e.key != "basic_auth_users") {
      return UnknownKey(e);
    }
    Status shape = ExpectMapOrNull(e);
    if (!shape.ok() || e.value.IsNull()) return shape;
    if (e.key == "tls_server_config") return ParseTls(e.value, e, base_dir, &config.tls);
    if (e.key == "http_server_config") return ParseHttp(e, &config.http);
    return ParseUsers(e, &config.basic_auth_users);
  });
  if (!status.ok()) return Result<WebConfig>::Error(status.error());
  return config;
}

}  // namespace

std::string_view ClientAuthTypeName(ClientAuthType type) {
  for (const auto& [name, value] : kClientAuthTypes) {
    if (value == type) return name;  // the first spelling is the canonical one
  }
  return "?";
}

std::string_view TlsVersionName(TlsVersion version) {
  for (const auto& [name, value] : kTlsVersions) {
    if (value == version) return name;
  }
  return "?";
}

Result<WebConfig> ParseWebConfig(std::string_view yaml_text, const std::string& base_dir) {
  if (std::optional<YAML::Mark> mark = internal::RunawayYamlMark(std::string(yaml_text))) {
    return Result<WebConfig>::Error("line " + std::to_string(mark->line + 1) + ", column " +
                                    std::to_string(mark->column + 1) +
                                    ": invalid YAML: the parser does not end here (a ',' outside [ ] or { }?)");
  }
  try {
    YAML::Node root = YAML::Load(std::string(yaml_text));
    return ParseDocument(root, base_dir);
  } catch (const YAML::Exception& e) {
    std::string where = e.mark.is_null() ? std::string("web config")
                                         : "line " + std::to_string(e.mark.line + 1) +
                                               ", column " + std::to_string(e.mark.column + 1);
    return Result<WebConfig>::Error(where + ": invalid YAML: " + e.msg);
  }
}

Result<WebConfig> ReadWebConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Result<WebConfig>::Error(path + ": cannot open web config: " + std::strerror(errno));
  }
  std::string text;
  if (std::string problem = internal::ReadConfigText(path, in, &text); !problem.empty()) {
    return Result<WebConfig>::Error(path + ": web config " + problem);
  }
  Result<WebConfig> config = ParseWebConfig(text, std::filesystem::path(path).parent_path().string());
  if (!config.ok()) return Result<WebConfig>::Error(path + ": " + config.error());
  return config;
}

}  // namespace kvwatch::config
