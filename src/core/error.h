#pragma once
// The one error model of omnirt: Result<T> holds a value or an Error a user can act on.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "core/expected.h"

namespace omnirt {

enum class ErrorCode : std::uint8_t {
    invalid_argument,     // the caller passed something malformed
    not_found,            // a named thing does not exist
    already_exists,       // a unique name or id was used twice
    out_of_range,         // a value is outside its allowed range or limit
    resource_exhausted,   // a pool, queue or budget is full
    failed_precondition,  // the system is not in a state that allows the call
    unavailable,          // a peer or service cannot be reached (retrying may help)
    deadline_exceeded,    // a timeout expired
    aborted,              // the operation was cancelled by an abort
    unimplemented,        // the feature is not available in this build or on this machine
    data_loss,            // bytes were corrupted or truncated
    internal,             // a bug: an invariant did not hold
};

[[nodiscard]] std::string_view to_string(ErrorCode code);

struct Error {
    ErrorCode code = ErrorCode::internal;
    std::string message;

    // "invalid_argument: message".
    [[nodiscard]] std::string to_string() const;
    // The same error with "context: " put before the message.
    [[nodiscard]] Error with_context(std::string_view context) const;
    friend bool operator==(const Error&, const Error&) = default;
};

template <class T>
using Result = expected<T, Error>;
using Status = Result<void>;

[[nodiscard]] inline unexpected<Error> fail(ErrorCode code, std::string message) {
    return unexpected<Error>(Error{code, std::move(message)});
}
[[nodiscard]] inline unexpected<Error> fail(Error error) {
    return unexpected<Error>(std::move(error));
}
[[nodiscard]] inline Status ok_status() { return {}; }

// Aborts the process with file, line and message: for broken invariants (bugs), never for
// conditions an input can cause.
[[noreturn]] void check_failed(const char* file, int line, const char* condition,
                               std::string_view message);

}  // namespace omnirt

#define OMNI_CHECK(condition, message)                                                       \
    do {                                                                                     \
        if (!(condition)) ::omnirt::check_failed(__FILE__, __LINE__, #condition, (message)); \
    } while (0)

#define OMNI_CONCAT_INNER(a, b) a##b
#define OMNI_CONCAT(a, b) OMNI_CONCAT_INNER(a, b)

// OMNI_TRY(auto x, expr): evaluates a Result; on error returns the error from the enclosing
// function, otherwise binds the value.
#define OMNI_TRY(declaration, expression) \
    OMNI_TRY_IMPL(OMNI_CONCAT(omni_try_result_, __LINE__), declaration, expression)
#define OMNI_TRY_IMPL(tmp, declaration, expression)                      \
    auto tmp = (expression);                                             \
    if (!tmp.has_value()) return ::omnirt::fail(std::move(tmp).error()); \
    declaration = std::move(tmp).value()

// OMNI_RETURN_IF_ERROR(expr): for Status-returning expressions.
#define OMNI_RETURN_IF_ERROR(expression)                                                       \
    do {                                                                                       \
        auto omni_status_ = (expression);                                                      \
        if (!omni_status_.has_value()) return ::omnirt::fail(std::move(omni_status_).error()); \
    } while (0)
