#pragma once
// The browser playground's files (src/serve/playground/web/), built into the binary
// (docs/playground.md). Immutable static data: every function is thread-safe and never blocks.
#include <span>
#include <string_view>

namespace omnirt::serve::playground {

struct EmbeddedFile {
    std::string_view path;   // relative to web/, '/'-separated, e.g. "app.js"
    std::string_view bytes;  // the file as it was at build time
};

// Every file under web/, sorted by path (defined in the generated embedded_web_files.cpp).
[[nodiscard]] std::span<const EmbeddedFile> embedded_files();

// The Content-Type a browser needs for `path`, by its extension ("application/octet-stream" for
// an unknown one). Module scripts must come as JavaScript or the browser refuses them.
[[nodiscard]] std::string_view content_type(std::string_view path);

}  // namespace omnirt::serve::playground
