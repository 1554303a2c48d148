#include "collectors/trace_record.h"

#include <simdjson.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "base/json_type_name.h"

namespace kvwatch::collectors {

namespace od = simdjson::ondemand;

const std::size_t TraceRecordParser::kPaddingBytes = simdjson::SIMDJSON_PADDING;

std::optional<TimestampUnit> ParseTimestampUnit(std::string_view text) {
  for (const auto& spelling : base::kTimestampUnitSpellings) {
    if (spelling.name == text) return spelling.value;
  }
  return std::nullopt;
}

std::string_view TimestampUnitName(TimestampUnit unit) {
  for (const auto& spelling : base::kTimestampUnitSpellings) {
    if (spelling.value == unit) return spelling.name;
  }
  return "auto";
}

namespace {

constexpr std::size_t kMaxTokenEcho = 40;  // longest offending token quoted in a message

// "name" with its double quotes, for messages.
std::string Quoted(std::string_view name) {
  std::string text;
  text.reserve(name.size() + 2);
  text.push_back('"');
  text.append(name);
  text.push_back('"');
  return text;
}

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

bool IsBlank(std::string_view line) {
  for (char c : line) {
    if (!IsJsonSpace(c)) return false;
  }
  return true;
}

// Why a JSON number token is not an integer in [0, 2^64): judged from its text,
// which is what the user sees.
std::string_view DescribeBadInteger(std::string_view token) {
  if (!token.empty() && token[0] == '-') return "is negative";
  if (token.find_first_of(".eE") != std::string_view::npos) return "is not an integer";
  const bool digits = !token.empty() && token.find_first_not_of("0123456789") == std::string_view::npos;
  if (!digits || (token.size() > 1 && token[0] == '0')) return "is not a valid number";
  return "is larger than 2^64-1";
}

// Whether a non-object root of `type` really is that JSON value (arrays are taken
// as arrays: they are not worth validating to say "expected an object").
bool IsValidRootScalar(od::document& doc, od::json_type type) {
  switch (type) {
    case od::json_type::null: {
      bool is_null = false;
      return doc.is_null().get(is_null) == simdjson::SUCCESS && is_null;
    }
    case od::json_type::boolean: {
      bool value;
      return doc.get_bool().get(value) == simdjson::SUCCESS;
    }
    case od::json_type::number: {
      od::number value;
      return doc.get_number().get(value) == simdjson::SUCCESS;
    }
    case od::json_type::string: {
      std::string_view value;
      return doc.get_string().get(value) == simdjson::SUCCESS;
    }
    default:
      return true;
  }
}

// The common shape of hash_ids read straight from its text: '[' then
// non-negative integers in JSON's spelling (no sign, fraction, exponent or
// leading zero; below 2^64) separated by commas, JSON whitespace anywhere
// between, then ']'. Appends the ids to *ids and returns the byte after ']';
// nullptr (with *ids in any state) when the text at p, up to end, is anything
// else: the caller then reads the array through simdjson, which gives the error
// or reads what this does not (it never accepts what simdjson refuses). Per id
// this is a few compares and a multiply, against simdjson's walk of two
// structural tokens and its number parser: the id lists are most of a trace's
// bytes (weka: 96 MB of JSON for 11.8 M ids).
const char* ReadIdList(const char* p, const char* end, std::vector<curve::PageId>* ids) {
  if (p == end || *p != '[') return nullptr;
  ++p;
  auto skip_space = [&] {
    while (p != end && IsJsonSpace(*p)) ++p;
  };
  skip_space();
  if (p != end && *p == ']') return p + 1;
  for (;;) {
    if (p == end || *p < '0' || *p > '9') return nullptr;
    const char* const first = p;
    std::uint64_t id = 0;
    while (p != end && *p >= '0' && *p <= '9') {
      const auto digit = static_cast<std::uint64_t>(*p - '0');
      // 19 digits never reach 2^64 (10^19 - 1 < 2^64): only from the 20th on can
      // an id overflow, so the common id pays no division.
      if (p - first >= 19 && id > (UINT64_MAX - digit) / 10) return nullptr;  // 2^64 or more
      id = id * 10 + digit;
      ++p;
    }
    if (*first == '0' && p - first > 1) return nullptr;  // a leading zero
    ids->push_back(id);
    skip_space();
    if (p == end) return nullptr;
    if (*p == ']') return p + 1;
    if (*p != ',') return nullptr;
    ++p;
    skip_space();
  }
}

// NaN, Infinity, inf (any case, any sign): what Python's json module writes
// for non-finite floats, and no JSON number.
bool IsNanOrInfinity(std::string_view token) {
  if (!token.empty() && (token.front() == '-' || token.front() == '+')) token.remove_prefix(1);
  if (token.size() < 3) return false;
  std::string head(token.substr(0, 3));
  for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return head == "nan" || head == "inf";
}

// A number as written: integral (no fraction, exponent-free integer literal) or not.
struct NumberValue {
  bool integral = false;
  bool negative = false;
  std::int64_t int_value = 0;  // meaningful when integral and it fits
  double double_value = 0;     // always meaningful
};

// The facts of one record that the parser needs after the fields are read.
struct RecordFacts {
  bool has_hash_ids = false;
  bool bailian_shape = false;  // has chat_id or parent_chat_id
  std::optional<NumberValue> timestamp;
  std::optional<NumberValue> end_timestamp;
};

// Reads the fields of one document. Every error message carries the 1-based byte
// column when simdjson gives a position.
class RecordReader {
 public:
  RecordReader(od::document& doc, const char* begin, std::size_t size, const TraceRecordOptions& options,
               curve::Request* request)
      : doc_(doc), begin_(begin), size_(size), options_(options), request_(request) {}

  base::Status Read(RecordFacts* facts);

 private:
  base::Status ReadField(od::field& field, RecordFacts* facts);
  base::Status ReadHashIds(od::value value);
  base::Status BadId(od::value& value, std::size_t index);
  base::Status ReadTimestamp(od::value value, std::string_view name, std::optional<NumberValue>* out);
  base::Status ReadCount(od::value value, std::string_view name, std::int64_t* out);
  // Reads a label field (string or integer) into *text; *taken says whether it was one.
  base::Status ReadLabel(od::value value, std::string_view name, std::string_view* text, bool* taken);
  base::Status ReadNumber(od::value& value, std::string_view name, NumberValue* out);

  base::Status ErrorAt(const char* where, std::string_view message) const;
  base::Status SyntaxError(simdjson::error_code error, std::string_view context = {}) const;
  std::string_view Token(od::value& value);

  od::document& doc_;
  const char* begin_;
  std::size_t size_;
  const TraceRecordOptions& options_;
  curve::Request* request_;
  std::size_t tenant_rank_ = SIZE_MAX;  // rank in options_.tenant_fields of the label used
  std::size_t class_rank_ = SIZE_MAX;   // rank in options_.class_fields of the class used
};

base::Status RecordReader::ErrorAt(const char* where, std::string_view message) const {
  std::string text;
  if (where != nullptr && where >= begin_ && where <= begin_ + size_) {
    text = "column " + std::to_string(where - begin_ + 1) + ": ";
  }
  text.append(message);
  return base::Status::Error(std::move(text));
}

base::Status RecordReader::SyntaxError(simdjson::error_code error, std::string_view context) const {
  const char* where = nullptr;
  if (doc_.current_location().get(where) != simdjson::SUCCESS) where = nullptr;
  return ErrorAt(where, std::string(context) + "not valid JSON (" + simdjson::error_message(error) + ")");
}

std::string_view RecordReader::Token(od::value& value) {
  std::string_view token = value.raw_json_token();
  while (!token.empty() && IsJsonSpace(token.back())) token.remove_suffix(1);
  if (token.size() > kMaxTokenEcho) token = token.substr(0, kMaxTokenEcho);
  return token;
}

base::Status RecordReader::Read(RecordFacts* facts) {
  od::document& doc = doc_;
  od::json_type root_type;
  if (auto error = doc.type().get(root_type)) return SyntaxError(error);
  if (root_type != od::json_type::object) {
    // type() only peeks at the first byte: "nonsense" would look like null.
    if (!IsValidRootScalar(doc, root_type)) return ErrorAt(begin_, "not valid JSON");
    return ErrorAt(begin_, std::string("expected a JSON object with \"hash_ids\", found ") +
                               std::string(base::JsonTypeName(root_type)));
  }
  od::object object;
  if (auto error = doc.get_object().get(object)) return SyntaxError(error);
  for (auto field_result : object) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return SyntaxError(error);
    base::Status status = ReadField(field, facts);
    if (!status.ok()) return status;
  }
  // current_location() is OUT_OF_BOUNDS exactly when every token was consumed.
  const char* rest = nullptr;
  if (doc.current_location().get(rest) == simdjson::SUCCESS) {
    return ErrorAt(rest, "trailing content after the JSON object");
  }
  if (!facts->has_hash_ids) {
    return base::Status::Error("missing \"hash_ids\" (expected an array of non-negative integers)");
  }
  return base::Status::Ok();
}

base::Status RecordReader::ReadField(od::field& field, RecordFacts* facts) {
  od::raw_json_string key = field.key();
  if (key == "hash_ids") {
    facts->has_hash_ids = true;
    return ReadHashIds(field.value());
  }
  if (key == "timestamp") return ReadTimestamp(field.value(), "timestamp", &facts->timestamp);
  if (key == "end_timestamp") return ReadTimestamp(field.value(), "end_timestamp", &facts->end_timestamp);
  if (key == "input_length") return ReadCount(field.value(), "input_length", &request_->input_tokens);
  if (key == "output_length") {
    return ReadCount(field.value(), "output_length", &request_->output_tokens);
  }
  if (key == "chat_id" || key == "parent_chat_id") {
    facts->bailian_shape = true;
    return base::Status::Ok();
  }
  // A field may be both a tenant and a class candidate: its value is read once.
  std::size_t tenant_rank = SIZE_MAX, class_rank = SIZE_MAX;
  const std::size_t tenant_candidates = std::min(tenant_rank_, options_.tenant_fields.size());
  for (std::size_t rank = 0; rank < tenant_candidates; ++rank) {
    if (key == options_.tenant_fields[rank]) {
      tenant_rank = rank;
      break;
    }
  }
  const std::size_t class_candidates = std::min(class_rank_, options_.class_fields.size());
  for (std::size_t rank = 0; rank < class_candidates; ++rank) {
    if (key == options_.class_fields[rank]) {
      class_rank = rank;
      break;
    }
  }
  if (tenant_rank == SIZE_MAX && class_rank == SIZE_MAX) return base::Status::Ok();  // unknown field: skipped
  std::string_view text;
  bool taken = false;
  base::Status status = ReadLabel(
      field.value(), tenant_rank != SIZE_MAX ? options_.tenant_fields[tenant_rank] : options_.class_fields[class_rank],
      &text, &taken);
  if (!status.ok() || !taken) return status;  // not a label: try the next candidate name
  if (tenant_rank != SIZE_MAX) {
    request_->tenant.assign(text);
    tenant_rank_ = tenant_rank;
  }
  if (class_rank != SIZE_MAX) {
    request_->request_class.assign(text);
    class_rank_ = class_rank;
  }
  return base::Status::Ok();
}

base::Status RecordReader::ReadHashIds(od::value value) {
  std::vector<curve::PageId>& pages = request_->pages;
  pages.clear();
  od::array array;
  if (value.get_array().get(array) != simdjson::SUCCESS) {
    od::json_type type;
    const char* where = Token(value).data();
    if (value.type().get(type) != simdjson::SUCCESS) {
      return ErrorAt(where, "\"hash_ids\" is not valid JSON; expected an array of non-negative integers");
    }
    return ErrorAt(where, std::string("\"hash_ids\" is ") + std::string(base::JsonTypeName(type)) +
                              "; expected an array of non-negative integers");
  }
  // The common shape straight from the text; simdjson then only skips the array.
  const char* open = Token(value).data();
  if (const char* close = ReadIdList(open, begin_ + size_, &pages); close != nullptr) {
    std::string_view raw;
    // Cannot fail on an array ReadIdList read whole; if it did, the error is simdjson's.
    if (auto error = array.raw_json().get(raw)) return SyntaxError(error, "hash_ids: ");
    return base::Status::Ok();
  }
  pages.clear();
  std::size_t index = 0;
  for (auto element : array) {
    od::value item;
    if (auto error = std::move(element).get(item)) {
      return SyntaxError(error, "hash_ids[" + std::to_string(index) + "]: ");
    }
    std::uint64_t id;
    if (item.get_uint64().get(id) != simdjson::SUCCESS) return BadId(item, index);
    pages.push_back(id);
    ++index;
  }
  return base::Status::Ok();
}

base::Status RecordReader::BadId(od::value& value, std::size_t index) {
  const std::string_view token = Token(value);
  const std::string where = "hash_ids[" + std::to_string(index) + "]";
  const std::string expected = "; expected a non-negative integer";
  od::json_type type;
  if (value.type().get(type) != simdjson::SUCCESS) {
    return ErrorAt(token.data(), where + " is not valid JSON" + expected);
  }
  if (type != od::json_type::number) {
    return ErrorAt(token.data(),
                   where + " is " + std::string(base::JsonTypeName(type)) + " (" + std::string(token) + ")" + expected);
  }
  return ErrorAt(token.data(),
                 where + " " + std::string(DescribeBadInteger(token)) + " (" + std::string(token) + ")" + expected);
}

base::Status RecordReader::ReadNumber(od::value& value, std::string_view name, NumberValue* out) {
  const std::string_view token = Token(value);
  od::number number;
  if (value.get_number().get(number) != simdjson::SUCCESS) {
    od::json_type type;
    std::string found = "not a valid number";
    if (IsNanOrInfinity(token)) {
      found = "NaN or Infinity, which JSON has no number for";
    } else if (value.type().get(type) == simdjson::SUCCESS && type != od::json_type::number) {
      found = std::string(base::JsonTypeName(type));
    } else if (token.find_first_of(".eE") == std::string_view::npos) {
      found = "an integer out of range";
    }
    return ErrorAt(token.data(), Quoted(name) + " is " + found + " (" + std::string(token) + "); expected a number");
  }
  out->double_value = number.as_double();
  switch (number.get_number_type()) {
    case od::number_type::signed_integer:
      out->integral = true;
      out->int_value = number.get_int64();
      out->negative = out->int_value < 0;
      break;
    case od::number_type::unsigned_integer:
      out->integral = number.get_uint64() <= static_cast<std::uint64_t>(INT64_MAX);
      out->int_value = static_cast<std::int64_t>(number.get_uint64());
      break;
    default:
      out->integral = false;
      out->negative = out->double_value < 0;
      break;
  }
  return base::Status::Ok();
}

base::Status RecordReader::ReadTimestamp(od::value value, std::string_view name, std::optional<NumberValue>* out) {
  bool is_null = false;
  if (value.is_null().get(is_null) == simdjson::SUCCESS && is_null) {
    out->reset();
    return base::Status::Ok();
  }
  NumberValue number;
  base::Status status = ReadNumber(value, name, &number);
  if (!status.ok()) return status;
  if (!std::isfinite(number.double_value)) {
    return base::Status::Error("\"" + std::string(name) + "\" is not finite; expected a number");
  }
  *out = number;
  return base::Status::Ok();
}

base::Status RecordReader::ReadCount(od::value value, std::string_view name, std::int64_t* out) {
  bool is_null = false;
  if (value.is_null().get(is_null) == simdjson::SUCCESS && is_null) {
    *out = -1;
    return base::Status::Ok();
  }
  const std::string_view token = Token(value);
  NumberValue number;
  base::Status status = ReadNumber(value, name, &number);
  if (!status.ok()) return status;
  const double d = number.double_value;
  if (number.integral && number.int_value >= 0) {
    *out = number.int_value;
  } else if (!number.integral && d >= 0 && d < 9.2e18 && d == std::trunc(d)) {
    *out = static_cast<std::int64_t>(d);
  } else {
    return ErrorAt(token.data(), Quoted(name) + " is " + std::string(token) + "; expected a non-negative integer");
  }
  return base::Status::Ok();
}

base::Status RecordReader::ReadLabel(od::value value, std::string_view name, std::string_view* text, bool* taken) {
  *taken = false;
  od::json_type type;
  if (value.type().get(type) != simdjson::SUCCESS) return base::Status::Ok();
  if (type == od::json_type::string) {
    if (auto error = value.get_string().get(*text)) {
      return ErrorAt(Token(value).data(),
                     Quoted(name) + " is not a valid JSON string (" + simdjson::error_message(error) + ")");
    }
  } else if (type == od::json_type::number) {
    NumberValue number;
    base::Status status = ReadNumber(value, name, &number);
    if (!status.ok()) return status;
    *text = Token(value);
  } else {
    return base::Status::Ok();  // not a label: try the next candidate name
  }
  *taken = true;
  return base::Status::Ok();
}

double ToSeconds(const NumberValue& number, TimestampUnit unit) {
  const double value = number.integral ? static_cast<double>(number.int_value) : number.double_value;
  return unit == TimestampUnit::kMilliseconds ? value / 1000.0 : value;
}

bool HasFraction(const NumberValue& number) {
  return !number.integral && number.double_value != std::trunc(number.double_value);
}

void ResetRequest(curve::Request* request) {
  request->timestamp_s = std::nan("");
  request->tenant.clear();
  request->request_class.clear();
  request->input_tokens = -1;
  request->output_tokens = -1;
  request->end_timestamp_s = std::nan("");
  request->pages.clear();
}

}  // namespace

class TraceRecordParser::Impl {
 public:
  od::parser parser;
  std::unique_ptr<char[]> scratch;
  std::size_t scratch_capacity = 0;

  // Copies `line` into the padded scratch buffer and returns its start.
  const char* CopyPadded(std::string_view line) {
    const std::size_t needed = line.size() + simdjson::SIMDJSON_PADDING;
    if (needed > scratch_capacity) {
      scratch_capacity = std::max(needed, 2 * scratch_capacity);
      scratch = std::make_unique<char[]>(scratch_capacity);
    }
    std::memcpy(scratch.get(), line.data(), line.size());
    std::memset(scratch.get() + line.size(), ' ', simdjson::SIMDJSON_PADDING);
    return scratch.get();
  }
};

TraceRecordParser::TraceRecordParser(TraceRecordOptions options)
    : options_(std::move(options)), resolved_unit_(options_.timestamp_unit), impl_(std::make_unique<Impl>()) {}

TraceRecordParser::~TraceRecordParser() = default;

void TraceRecordParser::Reset() { resolved_unit_ = options_.timestamp_unit; }

base::Result<ParseOutcome> TraceRecordParser::Parse(std::string_view line, curve::Request* request) {
  if (IsBlank(line)) return ParseOutcome::kBlank;
  const char* copy = impl_->CopyPadded(line);
  return ParseBuffer(copy, line.size(), line.size() + simdjson::SIMDJSON_PADDING, request);
}

base::Result<ParseOutcome> TraceRecordParser::ParseInPlace(std::string_view line, std::size_t readable_after,
                                                           curve::Request* request) {
  if (readable_after < simdjson::SIMDJSON_PADDING) return Parse(line, request);
  if (IsBlank(line)) return ParseOutcome::kBlank;
  return ParseBuffer(line.data(), line.size(), line.size() + readable_after, request);
}

base::Result<ParseOutcome> TraceRecordParser::ParseBuffer(const char* data, std::size_t size, std::size_t capacity,
                                                          curve::Request* request) {
  ResetRequest(request);
  od::document doc;
  if (auto error = impl_->parser.iterate(data, size, capacity).get(doc)) {
    return base::Result<ParseOutcome>::Error(std::string("not valid JSON (") + simdjson::error_message(error) + ")");
  }
  RecordFacts facts;
  RecordReader reader(doc, data, size, options_, request);
  base::Status status = reader.Read(&facts);
  if (!status.ok()) return base::Result<ParseOutcome>::Error(status.error());
  if (facts.timestamp.has_value()) {
    if (resolved_unit_ == TimestampUnit::kAuto && (facts.bailian_shape || facts.timestamp->double_value != 0)) {
      resolved_unit_ = (facts.bailian_shape || HasFraction(*facts.timestamp)) ? TimestampUnit::kSeconds
                                                                              : TimestampUnit::kMilliseconds;
    }
    request->timestamp_s = ToSeconds(*facts.timestamp, resolved_unit_);
  } else if (resolved_unit_ == TimestampUnit::kAuto && facts.bailian_shape) {
    resolved_unit_ = TimestampUnit::kSeconds;
  }
  // The end, in the unit decided for the timestamp (only with one to measure from).
  if (facts.end_timestamp.has_value() && facts.timestamp.has_value()) {
    request->end_timestamp_s = ToSeconds(*facts.end_timestamp, resolved_unit_);
  }
  return ParseOutcome::kRecord;
}

}  // namespace kvwatch::collectors
