// The HTTP server's responses on the wire (http_response.h): a handler's response
// with the server's and the web config's headers, compressed as cpp-httplib would
// (same content types, same choice of encoding), and the statuses for requests
// that could not be read.
#include "agent/web/http_response.h"

#include <httplib.h>

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>  // before Boost.Asio: g++ 12 in C++20 needs it first (docs/dependencies.md)

namespace kvwatch::agent::web_internal {

namespace beast = boost::beast;
namespace http = boost::beast::http;

HttpResponse TextResponse(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

int StatusForReadError(const beast::error_code& ec) {
  if (ec == http::error::header_limit) return 431;
  if (ec == http::error::body_limit) return 413;
  if (ec.category() == http::make_error_code(http::error::bad_method).category() && ec != http::error::end_of_stream &&
      ec != http::error::partial_message) {
    return 400;  // bad_method, bad_target, bad_field, bad_content_length, ...
  }
  return 0;
}

namespace {

// Compresses body as cpp-httplib would for this Accept-Encoding and
// Content-Type (same content types, same choice of encoding). Returns the
// Content-Encoding ("" when left as it is).
std::string Compress(const std::string& accept_encoding, const std::string& content_type, std::string* body) {
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
  bool ok = compressor->compress(body->data(), body->size(), true, [&](const char* data, std::size_t n) {
    compressed.append(data, n);
    return true;
  });
  if (!ok) return "";  // sent as it is
  *body = std::move(compressed);
  return encoding;
}

}  // namespace

Response Encode(const HttpResponse& out, const std::optional<config::WebConfig>& web, bool head,
                const std::string& accept_encoding, bool keep_alive, unsigned version, std::string* content_encoding) {
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

}  // namespace kvwatch::agent::web_internal
