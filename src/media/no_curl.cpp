// A build without libcurl (-DOMNIRT_CURL=OFF): remote media URLs are not fetched.
#include "media/fetch.h"

namespace omnirt::media {

Result<std::vector<std::byte>> fetch_url(const std::string&, const FetchOptions&) {
    return fail(ErrorCode::unimplemented,
                "remote media URLs need libcurl, which this build lacks (OMNIRT_CURL=OFF)");
}

}  // namespace omnirt::media
