// Status and Result<T>: the error channel for expected failures (bad input, bad files,
// environment). No exceptions cross module boundaries; a failure carries a code and a
// message that names the field and the limit.
//
// Thread-safety: value types, no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace lifeline {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,    // caller passed something malformed (request field, flag)
  kNotFound,           // missing file, key, tensor, model
  kOutOfRange,         // a value outside its documented limits
  kDataLoss,           // a file is corrupt / hostile (GGUF)
  kUnimplemented,      // valid but unsupported (architecture, type)
  kResourceExhausted,  // a cap or budget hit (memory cap, queue full)
  kIo,                 // OS-level I/O failure
  kInternal,           // our bug
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "data_loss: tensor 'x': offset 123 + size 456 exceeds file size 500"
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIo, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Result<T>: either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}   // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace lifeline

#define LL_CONCAT_INNER(a, b) a##b
#define LL_CONCAT(a, b) LL_CONCAT_INNER(a, b)

#define LL_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    ::lifeline::Status ll_status_ = (expr);      \
    if (!ll_status_.ok()) return ll_status_;     \
  } while (0)

#define LL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#define LL_ASSIGN_OR_RETURN(lhs, expr) \
  LL_ASSIGN_OR_RETURN_IMPL(LL_CONCAT(ll_result_, __LINE__), lhs, expr)
