#pragma once
// Remote media: the bytes of an http(s) URL, fetched with libcurl under a byte cap, a timeout
// and a redirect limit. Only http and https (redirects too); anything else is refused before a
// connection is made. For `image_url` / `audio_url` / `video_url` parts when the server allows
// remote media (omnirt serve --allow-remote-media).
//
// Thread safety: fetch_url may be called from any thread (each call has its own handle;
// libcurl's global init runs once).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace omnirt::media {

struct FetchOptions {
    std::int64_t max_bytes = std::int64_t{64} << 20;
    std::chrono::milliseconds timeout{10000};  // the whole transfer, connection included
    long max_redirects = 3;
};

// Errors: invalid_argument for a URL that is not http(s); out_of_range when the body exceeds
// max_bytes (declared or received; the transfer stops there); deadline_exceeded on timeout;
// unavailable for a failed connection or an HTTP status other than 2xx (the status named);
// unimplemented in a build without libcurl.
[[nodiscard]] Result<std::vector<std::byte>> fetch_url(const std::string& url,
                                                       const FetchOptions& options = {});

}  // namespace omnirt::media
