// Response serialisation: written by hand so streamed heads and chunks need no Beast serializer.
#include "serve/http/wire.h"

#include <boost/beast/http/status.hpp>
#include <cstdio>

namespace omnirt::serve::http::detail {
namespace {

bool reserved_header(const std::string& name) {
    return name == "content-length" || name == "transfer-encoding" || name == "connection" ||
           name == "content-type";
}

bool safe_header(std::string_view name, std::string_view value) {
    if (name.empty()) return false;
    for (char c : name) {
        if (c <= ' ' || c == ':' || c == 127) return false;
    }
    return value.find_first_of("\r\n", 0) == std::string_view::npos &&
           value.find('\0') == std::string_view::npos;
}

std::string head(int status, std::string_view content_type, const HttpHeaders& extra) {
    if (status < 100 || status > 999) status = 500;  // a handler bug must not break the framing
    auto reason =
        boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(status));
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
    if (!content_type.empty() && safe_header("content-type", content_type)) {
        out += "Content-Type: " + std::string(content_type) + "\r\n";
    }
    for (const auto& [name, value] : extra) {
        if (reserved_header(name) || !safe_header(name, value)) continue;
        out += name + ": " + value + "\r\n";
    }
    return out;
}

}  // namespace

std::string format_response(int status, std::string_view content_type, std::string_view body,
                            const HttpHeaders& extra, bool keep_alive, bool http10) {
    std::string out = head(status, content_type, extra);
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    if (!keep_alive) {
        out += "Connection: close\r\n";
    } else if (http10) {
        out += "Connection: keep-alive\r\n";
    }
    out += "\r\n";
    out += body;
    return out;
}

std::string format_stream_head(int status, std::string_view content_type, const HttpHeaders& extra,
                               bool keep_alive, bool http10) {
    std::string out = head(status, content_type, extra);
    if (http10) {
        out += "Connection: close\r\n";
    } else {
        out += "Transfer-Encoding: chunked\r\n";
        if (!keep_alive) out += "Connection: close\r\n";
    }
    out += "\r\n";
    return out;
}

std::string format_chunk(std::string_view data) {
    char size[32];
    int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
    std::string out(size, static_cast<std::size_t>(n));
    out.reserve(out.size() + data.size() + 2);
    out += data;
    out += "\r\n";
    return out;
}

}  // namespace omnirt::serve::http::detail
