#include "serve/playground/assets.h"

#include <array>
#include <utility>

namespace omnirt::serve::playground {

std::string_view content_type(std::string_view path) {
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 8> kTypes{{
        {".html", "text/html; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".json", "application/json"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
    }};
    for (const auto& [extension, type] : kTypes) {
        if (path.ends_with(extension)) return type;
    }
    return "application/octet-stream";
}

}  // namespace omnirt::serve::playground
