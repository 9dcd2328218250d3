#ifndef PROTOCOL_RUNNER_BASE_STATUS_H_
#define PROTOCOL_RUNNER_BASE_STATUS_H_

// Errors are values (after leveldb's Status): functions that can fail return a
// Status or a Result<T>; exceptions from third-party libraries are caught where
// the library is wrapped and turned into one of these.

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace protocol {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // bad input from the user: plan, import file, flag
    kNotFound,         // a named thing (run, file, case) does not exist
    kIoError,          // the file system or the database failed
    kCorruption,       // stored data is not what we wrote
    kInternal,         // a bug in protocol
  };

  Status() = default;  // OK
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status IoError(std::string msg) { return Status(Code::kIoError, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: <message>" style text for logs.
  std::string ToString() const;
  // The same code with `prefix` before the message (where the error happened: "FILE: row group 2: ").
  Status WithPrefix(const std::string& prefix) const { return ok() ? *this : Status(code_, prefix + message_); }

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status explaining why there is none.
// REQUIRES: value() only when ok(); status() is OK when ok().
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}           // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}   // NOLINT: REQUIRES !status.ok()
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  // By value, so `for (auto& x : F().value())` keeps the vector alive for the loop.
  T value() && { return std::move(*value_); }
  // The value, or `fallback` when there is none.
  T value_or(T fallback) const { return ok() ? *value_ : std::move(fallback); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_BASE_STATUS_H_
