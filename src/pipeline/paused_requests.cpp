#include "pipeline/paused_requests.h"

#include <spdlog/spdlog.h>

namespace omnirt::pipeline {

bool PausedRequests::set(const std::string& request_id, bool paused) {
    std::lock_guard lock(mutex_);
    if (!paused) return ids_.erase(request_id) != 0;
    if (ids_.size() >= capacity_ && !ids_.contains(request_id)) {
        spdlog::warn("pause of request '{}' not kept: {} requests are paused already", request_id,
                     ids_.size());
        return false;
    }
    return ids_.insert(request_id).second;
}

bool PausedRequests::contains(const std::string& request_id) const {
    std::lock_guard lock(mutex_);
    return ids_.contains(request_id);
}

std::size_t PausedRequests::size() const {
    std::lock_guard lock(mutex_);
    return ids_.size();
}

}  // namespace omnirt::pipeline
