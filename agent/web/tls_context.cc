// The HTTP server's TLS context (tls_context.h): OpenSSL set up from
// tls_server_config, with errors that name the setting, the file and OpenSSL's reason.
#include "agent/web/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace kvwatch::agent::web_internal {

using base::Status;

std::string OpenSslErrors() {
  std::string text;
  while (unsigned long code = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof(buffer));
    text += (text.empty() ? "" : "; ") + std::string(buffer);
  }
  return text.empty() ? "unknown OpenSSL error" : text;
}

namespace {

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
    return Status::Error(FileError("client_ca_file", ca_file, "cannot load the CA certificates: " + OpenSslErrors()));
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
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, AcceptAnyCertificate);
      return;
    case ClientAuthType::kVerifyClientCertIfGiven:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
      return;
    case ClientAuthType::kRequireAndVerifyClientCert:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
      return;
  }
}

}  // namespace

Status ConfigureTls(SSL_CTX* ctx, const config::TlsServerConfig& tls) {
  ERR_clear_error();
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  // Frees a connection's 34 KiB of record buffers while it is idle: a thousand
  // idle TLS connections then cost little memory.
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  if (tls.prefer_server_cipher_suites) SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_set_min_proto_version(ctx, OpenSslVersion(tls.min_version)) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, OpenSslVersion(tls.max_version)) != 1) {
    return Status::Error(
        "tls_server_config.min_version/max_version: " + std::string(config::TlsVersionName(tls.min_version)) + ".." +
        std::string(config::TlsVersionName(tls.max_version)) + " is not available: " + OpenSslErrors());
  }
  Status readable = CheckReadable("cert_file", tls.cert_file);
  if (!readable.ok()) return readable;
  if (SSL_CTX_use_certificate_chain_file(ctx, tls.cert_file.c_str()) != 1) {
    return Status::Error(
        FileError("cert_file", tls.cert_file, "cannot load a PEM certificate chain: " + OpenSslErrors()));
  }
  readable = CheckReadable("key_file", tls.key_file);
  if (!readable.ok()) return readable;
  // OpenSSL 3 already reports a key that does not belong to the certificate
  // here (X509_R_KEY_VALUES_MISMATCH); older versions only in the check below.
  bool loaded = SSL_CTX_use_PrivateKey_file(ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) == 1;
  if (!loaded && ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
    return Status::Error(FileError("key_file", tls.key_file, "cannot load a PEM private key: " + OpenSslErrors()));
  }
  if (!loaded || SSL_CTX_check_private_key(ctx) != 1) {
    return Status::Error(
        FileError("key_file", tls.key_file,
                  "does not match the certificate in cert_file \"" + tls.cert_file + "\": " + OpenSslErrors()));
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

}  // namespace kvwatch::agent::web_internal
