// GET / and GET /playground/<file>: the browser playground (docs/playground.md), built into the
// binary. Public like /health: the page holds no secret, and the API calls it makes send the key
// the user types into it.
#include <string>

#include "serve/api/api_internal.h"
#include "serve/playground/assets.h"

namespace omnirt::serve::api {
namespace {

// The page loads only its own files and talks only to this server (fetch and the realtime
// WebSocket); media the user attaches or hears are blob: / data: URLs.
constexpr std::string_view kPageSecurityPolicy =
    "default-src 'self'; img-src 'self' data: blob:; media-src 'self' data: blob:; "
    "connect-src 'self' ws: wss:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

void serve_file(ApiState& state, std::shared_ptr<http::HttpExchange> http,
                const playground::EmbeddedFile& file, const std::string& endpoint) {
    Exchange exchange(state, std::move(http), endpoint);
    // no-cache: the browser revalidates, so a rebuilt binary's page is never mixed with old
    // scripts; the files are small and the server is local.
    http::HttpHeaders headers{{"cache-control", "no-cache"}, {"x-content-type-options", "nosniff"}};
    std::string_view type = playground::content_type(file.path);
    if (type.starts_with("text/html")) {
        headers.emplace("content-security-policy", std::string(kPageSecurityPolicy));
    }
    exchange.respond(200, type, std::string(file.bytes), std::move(headers));
}

}  // namespace

Status add_playground_routes(ApiState& state) {
    ApiState* s = &state;
    for (const playground::EmbeddedFile& file : playground::embedded_files()) {
        const playground::EmbeddedFile* f = &file;
        if (file.path == "index.html") {
            OMNI_RETURN_IF_ERROR(state.http->add_route(
                "GET", "/", [s, f](auto http) { serve_file(*s, std::move(http), *f, "/"); }));
        }
        std::string path = "/playground/" + std::string(file.path);
        OMNI_RETURN_IF_ERROR(state.http->add_route(
            "GET", path, [s, f, path](auto http) { serve_file(*s, std::move(http), *f, path); }));
    }
    return {};
}

}  // namespace omnirt::serve::api
