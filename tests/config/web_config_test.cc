// Tests of config/web_config.h: the exporter-toolkit web config format, its
// defaults, and errors that name the key and the line.
#include "config/web_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace kvwatch::config {
namespace {

using base::Result;

// A syntactically valid bcrypt hash (Prometheus docs: user "admin", password "test").
constexpr char kHash[] = "$2b$12$hNf2lSsxfm0.i4a.1kVpSOVyBCfIB51VRjgBUyv6kdnyTlgWj81Ay";

WebConfig MustParse(const std::string& yaml, const std::string& base_dir = "") {
  Result<WebConfig> config = ParseWebConfig(yaml, base_dir);
  EXPECT_TRUE(config.ok()) << (config.ok() ? "" : config.error());
  return config.ok() ? config.value() : WebConfig{};
}

std::string MustFail(const std::string& yaml) {
  Result<WebConfig> config = ParseWebConfig(yaml);
  EXPECT_FALSE(config.ok()) << "parsed: " << yaml;
  return config.ok() ? std::string() : config.error();
}

TEST(WebConfigTest, EmptyDocumentTurnsNothingOn) {
  for (const char* text : {"", "\n", "# only a comment\n", "---\n"}) {
    WebConfig config = MustParse(text);
    EXPECT_FALSE(config.tls.has_value()) << text;
    EXPECT_TRUE(config.basic_auth_users.empty());
    EXPECT_TRUE(config.http.headers.empty());
    EXPECT_TRUE(config.http.http2);
  }
}

TEST(WebConfigTest, FullConfigAndDefaults) {
  WebConfig config = MustParse(std::string(R"(
tls_server_config:
  cert_file: server.crt
  key_file: /etc/kvwatch/server.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: ca.crt
  min_version: TLS13
http_server_config:
  http2: false
  headers:
    X-Frame-Options: deny
    X-Content-Type-Options: nosniff
    Strict-Transport-Security: max-age=31536000
basic_auth_users:
  alice: )") + kHash + "\n  bob: '" +
                                   kHash + "'\n",
                               "/etc/kvwatch");
  ASSERT_TRUE(config.tls.has_value());
  const TlsServerConfig& tls = *config.tls;
  EXPECT_EQ(tls.cert_file, "/etc/kvwatch/server.crt");  // relative: joined to base_dir
  EXPECT_EQ(tls.key_file, "/etc/kvwatch/server.key");   // absolute: kept
  EXPECT_EQ(tls.client_ca_file, "/etc/kvwatch/ca.crt");
  EXPECT_EQ(tls.client_auth_type, ClientAuthType::kRequireAndVerifyClientCert);
  EXPECT_EQ(tls.min_version, TlsVersion::kTls13);
  EXPECT_EQ(tls.max_version, TlsVersion::kTls13);
  EXPECT_TRUE(tls.prefer_server_cipher_suites);
  EXPECT_FALSE(config.http.http2);
  ASSERT_EQ(config.http.headers.size(), 3u);
  EXPECT_EQ(config.http.headers[0].first, "X-Frame-Options");  // file order kept
  EXPECT_EQ(config.http.headers[0].second, "deny");
  EXPECT_EQ(config.http.headers[2].second, "max-age=31536000");
  ASSERT_EQ(config.basic_auth_users.size(), 2u);
  EXPECT_EQ(config.basic_auth_users.at("alice"), kHash);
  EXPECT_EQ(config.basic_auth_users.at("bob"), kHash);
}

TEST(WebConfigTest, TlsDefaultsWhenOnlyCertAndKey) {
  WebConfig config = MustParse("tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n");
  ASSERT_TRUE(config.tls.has_value());
  EXPECT_EQ(config.tls->cert_file, "a.crt");  // no base_dir: left as written
  EXPECT_EQ(config.tls->client_auth_type, ClientAuthType::kNoClientCert);
  EXPECT_EQ(config.tls->min_version, TlsVersion::kTls12);
  EXPECT_EQ(config.tls->max_version, TlsVersion::kTls13);
  EXPECT_TRUE(config.tls->client_ca_file.empty());
}

TEST(WebConfigTest, ClientAuthTypesAndAlias) {
  struct Case {
    const char* name;
    ClientAuthType type;
  };
  for (const Case& c : {Case{"NoClientCert", ClientAuthType::kNoClientCert},
                        Case{"RequestClientCert", ClientAuthType::kRequestClientCert},
                        Case{"RequireAnyClientCert", ClientAuthType::kRequireAnyClientCert},
                        Case{"RequireClientCert", ClientAuthType::kRequireAnyClientCert},
                        Case{"VerifyClientCertIfGiven", ClientAuthType::kVerifyClientCertIfGiven},
                        Case{"RequireAndVerifyClientCert", ClientAuthType::kRequireAndVerifyClientCert}}) {
    bool verifies =
        c.type == ClientAuthType::kVerifyClientCertIfGiven || c.type == ClientAuthType::kRequireAndVerifyClientCert;
    std::string yaml = std::string("tls_server_config:\n  cert_file: a\n  key_file: b\n") +
                       "  client_auth_type: " + c.name + "\n" + (verifies ? "  client_ca_file: ca\n" : "");
    WebConfig config = MustParse(yaml);
    ASSERT_TRUE(config.tls.has_value()) << c.name;
    EXPECT_EQ(config.tls->client_auth_type, c.type) << c.name;
  }
  EXPECT_EQ(ClientAuthTypeName(ClientAuthType::kRequireAnyClientCert), "RequireAnyClientCert");
  EXPECT_EQ(TlsVersionName(TlsVersion::kTls11), "TLS11");
}

TEST(WebConfigTest, TlsKeysThatDoNotEnableTlsLeaveItOff) {
  // As exporter-toolkit's IsEnabled(): versions alone do not configure TLS.
  WebConfig config = MustParse("tls_server_config:\n  min_version: TLS13\n");
  EXPECT_FALSE(config.tls.has_value());
  config = MustParse("tls_server_config:\n");  // null section
  EXPECT_FALSE(config.tls.has_value());
}

TEST(WebConfigTest, UnknownKeysNameKeyAndLine) {
  std::string e = MustFail("basic_auth_users: {}\nlisten_address: :9477\n");
  EXPECT_NE(e.find("web config:2: listen_address: unknown key; expected one of: tls_server_config, http_server_config, "
                   "basic_auth_users"),
            std::string::npos)
      << e;

  e = MustFail("tls_server_config:\n  cert_file: a\n  key_file: b\n  cert_flie: c\n");
  EXPECT_NE(e.find("web config:4: tls_server_config.cert_flie: unknown key"), std::string::npos) << e;

  e = MustFail("http_server_config:\n  header:\n    X-Frame-Options: deny\n");
  EXPECT_NE(e.find("web config:2: http_server_config.header: unknown key"), std::string::npos) << e;
}

TEST(WebConfigTest, UnsupportedToolkitKeysSaySo) {
  std::string e =
      MustFail("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n");
  EXPECT_NE(e.find("web config:4: tls_server_config.cipher_suites: "), std::string::npos) << e;
  EXPECT_NE(e.find("does not support"), std::string::npos) << e;

  e = MustFail("rate_limit:\n  interval: 1s\n  burst: 10\n");
  EXPECT_NE(e.find("web config:1: rate_limit: "), std::string::npos) << e;
  EXPECT_NE(e.find("does not support"), std::string::npos) << e;

  e = MustFail("tls_server_config:\n  cert: |\n    -----BEGIN CERTIFICATE-----\n");
  EXPECT_NE(e.find("use cert_file"), std::string::npos) << e;
}

TEST(WebConfigTest, BadValuesNameKeyAndLine) {
  std::string e = MustFail("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireCert\n");
  EXPECT_NE(e.find("web config:4: tls_server_config.client_auth_type: expected one of"), std::string::npos) << e;
  EXPECT_NE(e.find("RequireAndVerifyClientCert"), std::string::npos) << e;  // lists the choices
  EXPECT_NE(e.find("\"RequireCert\""), std::string::npos) << e;

  e = MustFail("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS1.2\n");
  EXPECT_NE(e.find("web config:4: tls_server_config.min_version: "), std::string::npos) << e;
  EXPECT_NE(e.find("TLS12"), std::string::npos) << e;

  e = MustFail("http_server_config:\n  http2: maybe\n");
  EXPECT_NE(e.find("web config:2: http_server_config.http2: expected true or false"), std::string::npos) << e;

  e = MustFail("tls_server_config:\n  cert_file: [a, b]\n  key_file: b\n");
  EXPECT_NE(e.find("web config:2: tls_server_config.cert_file: "), std::string::npos) << e;
  EXPECT_NE(e.find("expected a string"), std::string::npos) << e;

  e = MustFail("tls_server_config: yes\n");
  EXPECT_NE(e.find("web config:1: tls_server_config: expected a map"), std::string::npos) << e;

  e = MustFail("- a\n- b\n");
  EXPECT_NE(e.find("web config:1: (top level): expected a map"), std::string::npos) << e;
}

TEST(WebConfigTest, TlsConsistencyErrors) {
  std::string e = MustFail("tls_server_config:\n  key_file: b\n");
  EXPECT_NE(e.find("web config:1: tls_server_config: "), std::string::npos) << e;
  EXPECT_NE(e.find("missing cert_file"), std::string::npos) << e;

  e = MustFail("tls_server_config:\n  cert_file: a\n");
  EXPECT_NE(e.find("missing key_file"), std::string::npos) << e;

  // client_auth_type alone turns TLS on, as in the toolkit, so the cert is missing.
  e = MustFail("tls_server_config:\n  client_auth_type: RequireAnyClientCert\n");
  EXPECT_NE(e.find("missing cert_file"), std::string::npos) << e;

  e = MustFail(
      "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: "
      "RequireAndVerifyClientCert\n");
  EXPECT_NE(e.find("web config:4: tls_server_config.client_auth_type: "), std::string::npos) << e;
  EXPECT_NE(e.find("needs client_ca_file"), std::string::npos) << e;

  e = MustFail("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: ca\n");
  EXPECT_NE(e.find("web config:4: tls_server_config.client_ca_file: "), std::string::npos) << e;
  EXPECT_NE(e.find("NoClientCert"), std::string::npos) << e;

  e = MustFail(
      "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: "
      "TLS12\n");
  EXPECT_NE(e.find("min_version TLS13 is above max_version TLS12"), std::string::npos) << e;
}

TEST(WebConfigTest, HeadersAreRestrictedLikeTheToolkit) {
  std::string e = MustFail("http_server_config:\n  headers:\n    Server: kvwatch\n");
  EXPECT_NE(e.find("web config:3: http_server_config.headers.Server: "), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key; expected one of: Content-Security-Policy, Strict-Transport-Security"),
            std::string::npos)
      << e;

  e = MustFail("http_server_config:\n  headers:\n    X-Frame-Options: allow\n");
  EXPECT_NE(e.find("web config:3: http_server_config.headers.X-Frame-Options: "), std::string::npos) << e;
  EXPECT_NE(e.find("deny, sameorigin"), std::string::npos) << e;

  e = MustFail("http_server_config:\n  headers:\n    X-Content-Type-Options: sniff\n");
  EXPECT_NE(e.find("nosniff"), std::string::npos) << e;

  e = MustFail("http_server_config:\n  headers:\n    Content-Security-Policy: \"a\\r\\nSet-Cookie: x\"\n");
  EXPECT_NE(e.find("CR, LF"), std::string::npos) << e;
}

TEST(WebConfigTest, UsersNeedBcryptHashes) {
  std::string e = MustFail("basic_auth_users:\n  alice: hunter2\n");
  EXPECT_NE(e.find("web config:2: basic_auth_users.alice: "), std::string::npos) << e;
  EXPECT_NE(e.find("bcrypt"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2"), std::string::npos) << "the value must not be echoed: " << e;

  std::string hash(kHash);
  std::string md5crypt = "$1$abcdefgh$" + std::string(22, 'x');
  EXPECT_FALSE(ParseWebConfig("basic_auth_users:\n  a: '" + md5crypt + "'\n").ok());
  std::string low_cost = hash;
  low_cost.replace(4, 2, "03");  // below bcrypt's minimum cost
  EXPECT_FALSE(ParseWebConfig("basic_auth_users:\n  a: '" + low_cost + "'\n").ok());
  std::string bad_char = hash;
  bad_char[40] = '!';
  EXPECT_FALSE(ParseWebConfig("basic_auth_users:\n  a: '" + bad_char + "'\n").ok());
  EXPECT_FALSE(ParseWebConfig("basic_auth_users:\n  a: '" + hash + "x'\n").ok());
  std::string y = hash;
  y[2] = 'y';
  EXPECT_TRUE(ParseWebConfig("basic_auth_users:\n  a: '" + y + "'\n").ok());

  e = MustFail("basic_auth_users:\n  alice:\n");  // a null value is placed at its key
  EXPECT_NE(e.find("web config:2: basic_auth_users.alice: expected a bcrypt hash string, got no value"),
            std::string::npos)
      << e;

  e = MustFail("basic_auth_users:\n  'a:b': '" + hash + "'\n");
  EXPECT_NE(e.find("may not contain ':'"), std::string::npos) << e;

  e = MustFail("basic_auth_users:\n  alice: '" + hash + "'\n  alice: '" + hash + "'\n");
  EXPECT_NE(e.find("web config:3: basic_auth_users.alice: duplicate key"), std::string::npos) << e;
}

// What the file's own walker accepted is still accepted on the shared one
// (config/field_reader.h): quoted booleans, user names with dots, null values
// left at their defaults, and only the first document read.
TEST(WebConfigTest, SharedWalkerKeepsWhatWasAccepted) {
  WebConfig config = MustParse(
      "tls_server_config:\n  cert_file: a\n  key_file: b\n  prefer_server_cipher_suites: 'false'\n"
      "  client_auth_type:\n  min_version:\nhttp_server_config:\n  http2: \"no\"\n  headers:\n"
      "basic_auth_users:\n  alice.smith: " +
      std::string(kHash) + "\n");
  ASSERT_TRUE(config.tls.has_value());
  EXPECT_FALSE(config.tls->prefer_server_cipher_suites);
  EXPECT_EQ(config.tls->client_auth_type, ClientAuthType::kNoClientCert);
  EXPECT_EQ(config.tls->min_version, TlsVersion::kTls12);
  EXPECT_FALSE(config.http.http2);
  EXPECT_EQ(config.basic_auth_users.count("alice.smith"), 1u);

  config = MustParse("basic_auth_users: {}\n---\nnot: [read\n");
  EXPECT_TRUE(config.basic_auth_users.empty());

  // A null boolean was and is refused (prefer_server_cipher_suites has no null default).
  std::string e = MustFail("tls_server_config:\n  prefer_server_cipher_suites:\n");
  EXPECT_NE(e.find("web config:2: tls_server_config.prefer_server_cipher_suites: expected true or false"),
            std::string::npos)
      << e;
  e = MustFail("{[a]: b}\n");
  EXPECT_NE(e.find("web config:1: (top level): expected a plain key"), std::string::npos) << e;
}

TEST(WebConfigTest, YamlSyntaxErrorsGiveTheLine) {
  std::string e = MustFail("tls_server_config:\n  cert_file: a\n   key_file: [b\n");
  EXPECT_EQ(e.rfind("web config:3: invalid YAML", 0), 0u) << e;
}

TEST(WebConfigTest, ReadFileResolvesRelativeToItsDirectory) {
  std::filesystem::path dir =
      std::filesystem::path(testing::TempDir()) / ("kvwatch_web_config_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::path file = dir / "web.yml";
  {
    std::ofstream out(file);
    out << "tls_server_config:\n  cert_file: tls/server.crt\n  key_file: tls/server.key\n";
  }
  Result<WebConfig> config = ReadWebConfigFile(file.string());
  ASSERT_TRUE(config.ok()) << config.error();
  ASSERT_TRUE(config.value().tls.has_value());
  EXPECT_EQ(config.value().tls->cert_file, (dir / "tls/server.crt").string());

  {
    std::ofstream out(file);
    out << "basic_auth_users:\n  alice: nope\n";
  }
  config = ReadWebConfigFile(file.string());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().rfind(file.string() + ":2: basic_auth_users.alice: ", 0), 0u) << config.error();

  config = ReadWebConfigFile((dir / "missing.yml").string());
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.error().find("missing.yml: cannot open"), std::string::npos) << config.error();
  std::filesystem::remove_all(dir);
}

TEST(WebConfigTest, ReadWebConfigFileRefusesDirectoriesAndEndlessFiles) {
  Result<WebConfig> dir = ReadWebConfigFile(testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.error().find("web config is a directory"), std::string::npos) << dir.error();
  Result<WebConfig> zero = ReadWebConfigFile("/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error(), "/dev/zero: web config is larger than 16 MiB (not a config file?)");
}

// yaml-cpp 0.7 never ends on a ',' where a block node is expected: an error.
TEST(WebConfigTest, YamlThatNeverEndsInYamlCppIsAnError) {
  Result<WebConfig> parsed = ParseWebConfig(",\n");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().find("web config:1: invalid YAML: the parser does not end here"), std::string::npos)
      << parsed.error();
  parsed = ParseWebConfig("http_server_config:\n  headers: {X-Frame-Options: deny}\n");
  EXPECT_TRUE(parsed.ok()) << parsed.error();
}

}  // namespace
}  // namespace kvwatch::config
