// Internal to agent/web (http_server.cc); not a public API. The server's OpenSSL
// context set up from the exporter-toolkit web config's tls_server_config: protocol
// versions, the certificate chain and key (checked to match), the client CAs and
// the client certificate policy.
//
// Thread safety: call before the context is used by any connection.
#ifndef KVWATCH_AGENT_WEB_TLS_CONTEXT_H_
#define KVWATCH_AGENT_WEB_TLS_CONTEXT_H_

#include <openssl/ssl.h>

#include <string>

#include "base/status.h"
#include "config/web_config.h"

namespace kvwatch::agent::web_internal {

// The OpenSSL error queue as text, emptied.
std::string OpenSslErrors();

// Sets up ctx from the web config's tls_server_config. An error names the setting
// and the file, e.g. `tls_server_config.key_file "/x/k.pem": ...`.
base::Status ConfigureTls(SSL_CTX* ctx, const config::TlsServerConfig& tls);

}  // namespace kvwatch::agent::web_internal

#endif  // KVWATCH_AGENT_WEB_TLS_CONTEXT_H_
