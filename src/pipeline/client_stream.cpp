#include "pipeline/client_stream.h"

#include <algorithm>

namespace omnirt::pipeline {

std::map<std::string, std::int64_t> recorded_client_chunks(const OmniRequest& request) {
    std::map<std::string, std::int64_t> out;
    const Value* counts = request.metadata.find(kClientChunksKey);
    if (counts == nullptr || !counts->is_map()) return out;
    for (const auto& [stage, count] : counts->as_map()) {
        if (const std::int64_t* value = count.if_int(); value != nullptr && *value > 0) {
            out[stage] = *value;
        }
    }
    return out;
}

void record_client_chunks(OmniRequest& request, const std::string& stage, std::int64_t count) {
    if (!request.metadata.is_map()) request.metadata = Map{};
    Value& counts = request.metadata[kClientChunksKey];
    if (!counts.is_map()) counts = Map{};
    Value& slot = counts[stage];
    const std::int64_t* existing = slot.if_int();
    slot = std::max<std::int64_t>(count, existing ? *existing : 0);
}

}  // namespace omnirt::pipeline
