#include "core/error.h"

#include <cstdio>
#include <cstdlib>

namespace omnirt {

std::string_view to_string(ErrorCode code) {
    switch (code) {
        case ErrorCode::invalid_argument:
            return "invalid_argument";
        case ErrorCode::not_found:
            return "not_found";
        case ErrorCode::already_exists:
            return "already_exists";
        case ErrorCode::out_of_range:
            return "out_of_range";
        case ErrorCode::resource_exhausted:
            return "resource_exhausted";
        case ErrorCode::failed_precondition:
            return "failed_precondition";
        case ErrorCode::unavailable:
            return "unavailable";
        case ErrorCode::deadline_exceeded:
            return "deadline_exceeded";
        case ErrorCode::aborted:
            return "aborted";
        case ErrorCode::unimplemented:
            return "unimplemented";
        case ErrorCode::data_loss:
            return "data_loss";
        case ErrorCode::internal:
            return "internal";
    }
    return "unknown";
}

std::string Error::to_string() const {
    std::string out(omnirt::to_string(code));
    out += ": ";
    out += message;
    return out;
}

Error Error::with_context(std::string_view context) const {
    Error out = *this;
    out.message = std::string(context) + ": " + message;
    return out;
}

void check_failed(const char* file, int line, const char* condition, std::string_view message) {
    std::fprintf(stderr, "omnirt: check failed at %s:%d: %s: %.*s\n", file, line, condition,
                 static_cast<int>(message.size()), message.data());
    std::fflush(stderr);
    std::abort();
}

}  // namespace omnirt
