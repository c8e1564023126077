#pragma once
// ProtocolError: an OpenAI-shaped request error ({"error": {message, type, param, code}}), with
// the HTTP status the server answers with. `param` is the JSON path of the offending field
// ("messages[1].content[0].image_url.url"), empty when the error is not about one field.
//
// Thread safety: plain values.
#include <string>

#include "core/error.h"
#include "core/expected.h"

namespace omnirt::serve::openai {

struct ProtocolError {
    int http_status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;  // empty -> JSON null
    std::string code;   // empty -> JSON null
    friend bool operator==(const ProtocolError&, const ProtocolError&) = default;
};

template <class T>
using ProtocolResult = expected<T, ProtocolError>;

// A 400 invalid_request_error naming `param`.
[[nodiscard]] inline unexpected<ProtocolError> invalid_request(std::string param,
                                                               std::string message) {
    return unexpected<ProtocolError>(
        ProtocolError{400, std::move(message), "invalid_request_error", std::move(param), {}});
}

using ProtocolStatus = expected<void, ProtocolError>;

}  // namespace omnirt::serve::openai

// OMNI_TRY_P / OMNI_RETURN_IF_ERROR_P: OMNI_TRY / OMNI_RETURN_IF_ERROR for ProtocolResult.
#define OMNI_TRY_P(declaration, expression) \
    OMNI_TRY_P_IMPL(OMNI_CONCAT(omni_try_p_, __LINE__), declaration, expression)
#define OMNI_TRY_P_IMPL(tmp, declaration, expression)                        \
    auto tmp = (expression);                                                 \
    if (!tmp.has_value())                                                    \
        return ::omnirt::unexpected<::omnirt::serve::openai::ProtocolError>( \
            std::move(tmp).error());                                         \
    declaration = std::move(tmp).value()
#define OMNI_RETURN_IF_ERROR_P(expression)                                       \
    do {                                                                         \
        auto omni_status_p_ = (expression);                                      \
        if (!omni_status_p_.has_value())                                         \
            return ::omnirt::unexpected<::omnirt::serve::openai::ProtocolError>( \
                std::move(omni_status_p_).error());                              \
    } while (false)
