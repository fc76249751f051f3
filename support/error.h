// Errors as values: Expected<T> and Status carry a message that names the
// file, op or pass; an error may also carry what it is about (its location:
// a file and JSON path, a node) and CANN's six-character code for its kind,
// for a reader that wants them apart from the text (a compile report).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace kiln {

class Error {
public:
  explicit Error(std::string message) : message_(std::move(message)) {}
  // An error about `location`; its message reads "<location>: <what>".
  static Error at(std::string location, const std::string &what) {
    Error e(location + ": " + what);
    e.location_ = std::move(location);
    return e;
  }
  // The same error with a code ("E40001": E, the module, four digits).
  Error withCode(std::string code) const {
    Error e = *this;
    e.code_ = std::move(code);
    return e;
  }

  const std::string &message() const { return message_; }
  const std::string &code() const { return code_; }         // empty: uncoded
  const std::string &location() const { return location_; } // empty: none given

  // Returns a copy with "context: " in front, for rewrapping at a boundary;
  // the code and location stay.
  Error withContext(const std::string &context) const {
    Error e = *this;
    e.message_ = context + ": " + message_;
    return e;
  }

private:
  std::string message_, code_, location_;
};

class [[nodiscard]] Status {
public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}
  static Status ok() { return Status(); }

  bool isOk() const { return !error_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Error &error() const {
    assert(error_);
    return *error_;
  }
  const std::string &message() const { return error().message(); }

private:
  std::optional<Error> error_;
};

template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : storage_(std::in_place_index<0>, std::move(value)) {}
  Expected(Error error) : storage_(std::in_place_index<1>, std::move(error)) {}
  Expected(const Status &status) : storage_(std::in_place_index<1>, status.error()) {}

  bool isOk() const { return storage_.index() == 0; }
  explicit operator bool() const { return isOk(); }

  T &value() & {
    assert(isOk());
    return std::get<0>(storage_);
  }
  const T &value() const & {
    assert(isOk());
    return std::get<0>(storage_);
  }
  T &&value() && {
    assert(isOk());
    return std::get<0>(std::move(storage_));
  }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

  const Error &error() const {
    assert(!isOk());
    return std::get<1>(storage_);
  }
  const std::string &message() const { return error().message(); }
  Status status() const { return isOk() ? Status::ok() : Status(error()); }

private:
  std::variant<T, Error> storage_;
};

} // namespace kiln

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)

// Returns the error of a Status or Expected from the enclosing function.
#define KILN_RETURN_IF_ERROR(expr)                                                                 \
  do {                                                                                             \
    auto &&kiln_status_ = (expr);                                                                  \
    if (!kiln_status_)                                                                             \
      return kiln_status_.error();                                                                 \
  } while (0)

// `KILN_ASSIGN_OR_RETURN(auto x, f());` binds the value or returns the error.
#define KILN_ASSIGN_OR_RETURN(lhs, expr)                                                           \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kiln_expected_, __LINE__), lhs, expr)
#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                                                 \
  auto tmp = (expr);                                                                               \
  if (!tmp)                                                                                        \
    return tmp.error();                                                                            \
  lhs = std::move(tmp).value()
