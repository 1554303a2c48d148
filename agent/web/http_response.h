// Internal to agent/web (http_server.cc); not a public API. A handler's HttpResponse
// turned into the response on the wire (Boost.Beast's): the headers the server adds,
// compression with cpp-httplib's compressors and its choice of encoding, and the
// status for a request that could not be read.
//
// Thread safety: pure functions; any thread (the handler threads call Encode).
#ifndef KVWATCH_AGENT_WEB_HTTP_RESPONSE_H_
#define KVWATCH_AGENT_WEB_HTTP_RESPONSE_H_

#include <boost/beast/core/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <optional>
#include <string>
#include <utility>  // before Boost.Asio: g++ 12 in C++20 needs it first (docs/dependencies.md)

#include "agent/web/http_server.h"
#include "config/web_config.h"

namespace kvwatch::agent::web_internal {

using Response = boost::beast::http::response<boost::beast::http::string_body>;

HttpResponse TextResponse(int status, std::string body);

// Status for a request that could not be read; 0 when the connection is just
// gone (closed by the client, past its deadline, evicted, the server stopping).
int StatusForReadError(const boost::beast::error_code& ec);

// The response on the wire for out: the handler's headers, Content-Type, Vary,
// the web config's headers, compression, Content-Length; no body for HEAD.
// *content_encoding is the encoding used ("gzip", "br" or "").
Response Encode(const HttpResponse& out, const std::optional<config::WebConfig>& web, bool head,
                const std::string& accept_encoding, bool keep_alive, unsigned version, std::string* content_encoding);

}  // namespace kvwatch::agent::web_internal

#endif  // KVWATCH_AGENT_WEB_HTTP_RESPONSE_H_
