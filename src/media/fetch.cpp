#include "media/fetch.h"

#include <curl/curl.h>

#include <cstring>
#include <memory>
#include <mutex>

namespace omnirt::media {
namespace {

struct Sink {
    std::vector<std::byte> bytes;
    std::int64_t max_bytes = 0;
    bool over = false;
};

size_t write_body(char* data, size_t size, size_t count, void* user) {
    auto& sink = *static_cast<Sink*>(user);
    const size_t n = size * count;
    if (static_cast<std::int64_t>(sink.bytes.size() + n) > sink.max_bytes) {
        sink.over = true;
        return 0;  // stops the transfer
    }
    const size_t at = sink.bytes.size();
    sink.bytes.resize(at + n);
    std::memcpy(sink.bytes.data() + at, data, n);
    return n;
}

bool http_url(const std::string& url) {
    return url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
}

}  // namespace

Result<std::vector<std::byte>> fetch_url(const std::string& url, const FetchOptions& options) {
    if (!http_url(url)) {
        return fail(ErrorCode::invalid_argument, "only http and https URLs are fetched");
    }
    static std::once_flag init;
    std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    std::unique_ptr<CURL, void (*)(CURL*)> handle(curl_easy_init(), curl_easy_cleanup);
    if (!handle) return fail(ErrorCode::internal, "curl_easy_init failed");
    Sink sink{.bytes = {}, .max_bytes = options.max_bytes, .over = false};
    char message[CURL_ERROR_SIZE] = {0};
    CURL* curl = handle.get();
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, message);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout.count()));
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, options.max_redirects > 0 ? 1L : 0L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, options.max_redirects);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(options.max_bytes));
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "omnirt");
    const CURLcode code = curl_easy_perform(curl);
    if (sink.over || code == CURLE_FILESIZE_EXCEEDED) {
        return fail(ErrorCode::out_of_range,
                    url + ": the body exceeds " + std::to_string(options.max_bytes) + " bytes");
    }
    if (code == CURLE_OPERATION_TIMEDOUT) {
        return fail(
            ErrorCode::deadline_exceeded,
            url + ": no complete answer within " + std::to_string(options.timeout.count()) + " ms");
    }
    if (code != CURLE_OK) {
        return fail(ErrorCode::unavailable,
                    url + ": " + (message[0] != 0 ? message : curl_easy_strerror(code)));
    }
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status >= 300) {
        return fail(ErrorCode::unavailable, url + ": HTTP status " + std::to_string(status));
    }
    return std::move(sink.bytes);
}

}  // namespace omnirt::media
