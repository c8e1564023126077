#include "torch_bridge/torch_errors.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <exception>

namespace omnirt::torch_bridge {

std::string current_exception_text() {
    std::string what;
    try {
        throw;
    } catch (const c10::Error& error) {
        what = error.what_without_backtrace();
    } catch (const std::exception& error) {
        what = error.what();
    } catch (...) {
        what = "unknown exception";
    }
    if (const auto newline = what.find('\n'); newline != std::string::npos) what.resize(newline);
    return what;
}

bool mentions_timeout(const std::string& text) {
    std::string lower = text;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return lower.find("timeout") != std::string::npos ||
           lower.find("timed out") != std::string::npos;
}

}  // namespace omnirt::torch_bridge
