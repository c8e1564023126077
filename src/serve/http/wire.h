#pragma once
// Internal: response bytes on the wire (status line, headers, chunk framing).
#include <string>
#include <string_view>

#include "serve/http/http_server.h"

namespace omnirt::serve::http::detail {

// A complete response with Content-Length.
std::string format_response(int status, std::string_view content_type, std::string_view body,
                            const HttpHeaders& extra, bool keep_alive, bool http10);
// The head of a streamed response: chunked for HTTP/1.1, unframed (closing) for HTTP/1.0.
std::string format_stream_head(int status, std::string_view content_type, const HttpHeaders& extra,
                               bool keep_alive, bool http10);
// One chunk of a chunked body ("<hex size>\r\n<data>\r\n"); `data` must not be empty.
std::string format_chunk(std::string_view data);

}  // namespace omnirt::serve::http::detail
