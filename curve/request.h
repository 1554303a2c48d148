// A request as the curve engine sees it: an ordered list of prefix-page ids plus
// the optional facts a trace or engine gives about it. See
// docs/semantics.md section 1.
#ifndef KVWATCH_CURVE_REQUEST_H_
#define KVWATCH_CURVE_REQUEST_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace kvwatch::curve {

// A 64-bit page identity that already includes its scope (model, block size,
// LoRA, cache salt, ...). Equal ids mean equal prefixes.
using PageId = std::uint64_t;

struct Request {
  // Arrival time in seconds since an arbitrary epoch; NaN when the source has none.
  double timestamp_s = std::nan("");
  // Tenant or class label; empty when the source has none.
  std::string tenant;
  // Request class label (a record's `class` or `type` field); empty when the
  // source has none (curve/tenants.h then derives one from the stream).
  std::string request_class;
  // Token counts; -1 when the source has none.
  std::int64_t input_tokens = -1;
  std::int64_t output_tokens = -1;
  // When the request finished, on the same clock as timestamp_s; NaN when the
  // source has none (request lifetimes then come from output_tokens).
  double end_timestamp_s = std::nan("");
  // The full KV pages of the prompt, in prefix order.
  std::vector<PageId> pages;

  bool has_timestamp() const { return !std::isnan(timestamp_s); }
  // Copies every fact but the pages (keeping this request's page storage).
  void CopyFactsFrom(const Request& other) {
    timestamp_s = other.timestamp_s;
    tenant.assign(other.tenant);
    request_class.assign(other.request_class);
    input_tokens = other.input_tokens;
    output_tokens = other.output_tokens;
    end_timestamp_s = other.end_timestamp_s;
  }
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_REQUEST_H_
