// JsonWriter: a small streaming JSON builder for the replay output and the agent's
// API, and JsonQuote, the one JSON string escaper (also the alert notifiers'
// payloads, alerts/notify.cc). simdjson parses but does not write, and the outputs
// are small and flat, so a writer that escapes strings per RFC 8259 and prints
// numbers in their shortest round-trip form is all that is needed. Pure: base/,
// so that alerts/ (no I/O) may use it.
//
//   JsonWriter w;
//   w.BeginObject(); w.Key("requests"); w.Uint(3); w.EndObject();
//   std::string text = w.Take();
//
// Thread safety: none.
#ifndef KVWATCH_BASE_JSON_WRITER_H_
#define KVWATCH_BASE_JSON_WRITER_H_

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvwatch::base {

// text as a JSON string literal, quotes included (RFC 8259): '"', '\\' and the
// control characters escaped (\b \f \n \r \t short, the others \u00XX); valid
// UTF-8 kept as is; each byte of an invalid, overlong or surrogate sequence
// replaced by U+FFFD, so that the result is always valid JSON.
std::string JsonQuote(std::string_view text);
void AppendJsonQuoted(std::string* out, std::string_view text);

class JsonWriter {
 public:
  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }

  void Key(std::string_view key) {
    Separate();
    Quote(key);
    out_ += ':';
    after_key_ = true;
  }
  void String(std::string_view s) {
    Separate();
    Quote(s);
  }
  void Uint(std::uint64_t v) {
    Separate();
    out_ += std::to_string(v);
  }
  // Finite numbers in shortest round-trip form (integers without a fraction);
  // NaN and infinities, which JSON lacks, as null.
  void Number(double v) {
    Separate();
    if (!std::isfinite(v)) {
      out_ += "null";
      return;
    }
    if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) {
      out_ += std::to_string(static_cast<std::int64_t>(v));
      return;
    }
    char buf[64];
    auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
    out_.append(buf, ptr);
  }
  void Bool(bool v) {
    Separate();
    out_ += v ? "true" : "false";
  }
  void Null() {
    Separate();
    out_ += "null";
  }
  template <class T>
  void Optional(const std::optional<T>& v) {
    if (!v) {
      Null();
    } else if constexpr (std::is_integral_v<T>) {
      Uint(static_cast<std::uint64_t>(*v));
    } else {
      Number(static_cast<double>(*v));
    }
  }

  std::string Take() { return std::move(out_); }

 private:
  void Quote(std::string_view s) { AppendJsonQuoted(&out_, s); }
  void Separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
    }
  }
  void Open(char c) {
    Separate();
    out_ += c;
    first_.push_back(true);
  }
  void Close(char c) {
    out_ += c;
    first_.pop_back();
  }

  std::string out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace kvwatch::base

#endif  // KVWATCH_BASE_JSON_WRITER_H_
