#pragma once
// Client-stream accounting. A stage's client stream chunks (StreamMessage to the coordinator)
// and a terminal stage's completion travel on different connections, so the completion can
// reach the coordinator first. To keep "every chunk, then the end" for the client, each stage
// that streamed to the client records how many chunks it sent in the payload it routes on
// (request.metadata[kClientChunksKey][stage] = count); the map travels with the request to the
// terminal stages, and the coordinator holds a completion until it has received that many
// chunks from each stage (a request that never gets them ends at its deadline).
//
// Thread safety: pure functions.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/request.h"

namespace omnirt::pipeline {

inline constexpr std::string_view kClientChunksKey = "omnirt.client_chunks";

// The counts recorded in `request.metadata` (malformed entries are ignored).
[[nodiscard]] std::map<std::string, std::int64_t> recorded_client_chunks(
    const OmniRequest& request);

// `request` with `count` recorded for `stage` (the larger of an existing and the new count).
void record_client_chunks(OmniRequest& request, const std::string& stage, std::int64_t count);

}  // namespace omnirt::pipeline
