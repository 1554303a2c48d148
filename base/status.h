// Status and Result<T>: errors as values, the project's replacement for exceptions
// across library APIs (house style: "errors are values").
//
// A Status is either ok or carries a human-readable error message that says what
// was expected and where (file, line, offset, key) when that is known. A Result<T>
// holds either a value of type T or such a message. Both are [[nodiscard]].
//
//   Result<std::uint64_t> r = Parse(text);
//   if (!r.ok()) return Result<Foo>::Error("config.json: " + r.error());
//   Use(r.value());
//
// Contract: value() REQUIRES ok(); error() REQUIRES !ok(). Violating either is a
// programming error and aborts with a message (it never throws). A Result built
// from a value is ok even when the value is "empty"; only Error() makes an error,
// and an error may not have an empty message (Error("") stores "unknown error").
//
// Thread safety: plain values; const methods may be called concurrently.
#ifndef KVWATCH_BASE_STATUS_H_
#define KVWATCH_BASE_STATUS_H_

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace kvwatch::base {

namespace status_internal {
[[noreturn]] inline void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "kvwatch: %s%s\n", what, detail.c_str());
  std::abort();
}
inline std::string NonEmpty(std::string message) {
  return message.empty() ? std::string("unknown error") : std::move(message);
}
}  // namespace status_internal

class [[nodiscard]] Status {
 public:
  // The default Status is ok.
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) {
    Status s;
    s.error_ = status_internal::NonEmpty(std::move(message));
    return s;
  }

  bool ok() const { return !error_.has_value(); }
  // REQUIRES: !ok().
  const std::string& error() const {
    if (ok()) status_internal::Die("error() called on an ok Status", "");
    return *error_;
  }

 private:
  std::optional<std::string> error_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  // Implicit, so that a function returning Result<T> can `return value;`.
  Result(T value) : value_(std::move(value)) {}  // NOLINT(runtime/explicit)
  static Result Error(std::string message) { return Result(ErrorTag{}, status_internal::NonEmpty(std::move(message))); }

  bool ok() const { return value_.has_value(); }

  // REQUIRES: ok().
  const T& value() const& { return CheckedValue(); }
  T& value() & { return const_cast<T&>(CheckedValue()); }
  T&& value() && { return std::move(const_cast<T&>(CheckedValue())); }

  // REQUIRES: !ok().
  const std::string& error() const {
    if (ok()) status_internal::Die("error() called on an ok Result", "");
    return error_;
  }

  // Ok, or the error message.
  Status status() const { return ok() ? Status::Ok() : Status::Error(error_); }

 private:
  struct ErrorTag {};
  Result(ErrorTag, std::string message) : error_(std::move(message)) {}

  const T& CheckedValue() const {
    if (!ok()) status_internal::Die("value() called on an error Result: ", error_);
    return *value_;
  }

  std::optional<T> value_;
  std::string error_;  // meaningful only when !ok()
};

}  // namespace kvwatch::base

#endif  // KVWATCH_BASE_STATUS_H_
