// TraceRecordParser: parses ONE JSON Lines record of a request trace into a
// curve::Request (docs/semantics.md sections 1 and 7).
//
// Accepted shapes (unknown fields are ignored, field order does not matter):
//   Mooncake:      {"timestamp": 27482, "input_length": 6955, "output_length": 52,
//                   "hash_ids": [46, 47, ...]}                    timestamp in ms
//   Qwen-Bailian:  {"chat_id": 159, "parent_chat_id": 55, "timestamp": 61.114,
//                   "input_length": 521, "output_length": 132, "type": "text",
//                   "turn": 2, "hash_ids": [...]}                  timestamp in s
// `hash_ids` is required: an array of integers in [0, 2^64). `timestamp`,
// `input_length` and `output_length` are optional numbers (null counts as absent);
// the token counts must be non-negative integers (6758.0 is accepted as 6758).
// An optional `end_timestamp` (same unit as `timestamp`, read only with one) says
// when the request finished; the policy simulations' lifetimes use it.
// The tenant or class label is the first of TraceRecordOptions::tenant_fields that
// the record has as a string or an integer (integers become their decimal text);
// a candidate field with any other JSON type (object, bool, ...) is passed over.
// The request class (Request::request_class) is read the same way from
// TraceRecordOptions::class_fields; one field may give both labels.
//
// Timestamp unit (TimestampUnit). kMilliseconds and kSeconds force the unit. kAuto
// decides ONCE PER TRACE (per parser, until Reset()) and then keeps the decision,
// so one trace never mixes units. The decision is taken at the first record that
// either has a "chat_id" or "parent_chat_id" field (the Qwen-Bailian shape) or has
// a non-zero timestamp; on that record:
//   - seconds if the record has "chat_id" or "parent_chat_id", or its timestamp has
//     a non-zero fractional part (61.114);
//   - milliseconds otherwise (Mooncake, and `kvwatch synth` output: integer ms;
//     14000.0 written by a float-happy exporter is still ms).
// Records before that point have a timestamp of 0 (or none), which is 0 s in
// either unit, so nothing already returned is ever reinterpreted. Traces this rule
// misreads (integer seconds without chat_id; sub-millisecond fractional ms) need an
// explicit unit (`--timestamp-unit s|ms`).
//
// Errors are returned, never thrown; the message says what was expected and gives
// the 1-based byte column within the line when it is known ("column 40: hash_ids[2]
// is negative (-7); expected a non-negative integer"). A line that is empty or only
// JSON whitespace is ParseOutcome::kBlank, which callers skip silently.
//
// Speed: one simdjson On Demand parser is reused for every line, and the Request
// passed in is overwritten in place (its pages vector and tenant string keep their
// capacity), so a record costs no allocation once the buffers have grown.
//
// Thread safety: none. A parser holds per-trace state (the timestamp decision) and
// scratch buffers; use one parser per thread and per trace.
#ifndef KVWATCH_COLLECTORS_TRACE_RECORD_H_
#define KVWATCH_COLLECTORS_TRACE_RECORD_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/source_kinds.h"
#include "base/status.h"
#include "collectors/collector_options.h"  // TraceRecordOptions
#include "curve/request.h"

namespace kvwatch::collectors {

using TimestampUnit = base::TimestampUnit;  // base/source_kinds.h, shared with config/

// "auto", "ms" or "s" (also "milliseconds", "seconds"); nullopt for anything else.
std::optional<TimestampUnit> ParseTimestampUnit(std::string_view text);
// "auto", "ms" or "s".
std::string_view TimestampUnitName(TimestampUnit unit);

enum class ParseOutcome {
  kRecord,  // *request holds the parsed record
  kBlank,   // empty or whitespace-only line: skip it silently
};

class TraceRecordParser {
 public:
  explicit TraceRecordParser(TraceRecordOptions options = {});
  ~TraceRecordParser();
  TraceRecordParser(const TraceRecordParser&) = delete;
  TraceRecordParser& operator=(const TraceRecordParser&) = delete;

  // Parses `line` (without its line terminator; a trailing '\r' is tolerated) into
  // *request, overwriting every field. The line is copied into an internal padded
  // buffer first. On error *request holds unspecified partial content.
  // REQUIRES: request != nullptr.
  [[nodiscard]] base::Result<ParseOutcome> Parse(std::string_view line, curve::Request* request);

  // As Parse(), without the copy: REQUIRES that the `readable_after` bytes following
  // line.data() + line.size() are allocated and readable (their content does not
  // matter). Falls back to copying when readable_after < kPaddingBytes.
  [[nodiscard]] base::Result<ParseOutcome> ParseInPlace(std::string_view line, std::size_t readable_after,
                                                        curve::Request* request);

  // Forgets the per-trace timestamp-unit decision (call between traces).
  void Reset();

  // The unit the parser uses for this trace: the forced unit, or kAuto's decision,
  // or kAuto while it is still undecided.
  TimestampUnit resolved_unit() const { return resolved_unit_; }

  // Readable bytes ParseInPlace needs after a line to avoid copying it.
  static const std::size_t kPaddingBytes;

 private:
  class Impl;

  base::Result<ParseOutcome> ParseBuffer(const char* data, std::size_t size, std::size_t capacity,
                                         curve::Request* request);

  TraceRecordOptions options_;
  TimestampUnit resolved_unit_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_TRACE_RECORD_H_
