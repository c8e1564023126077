// Coordinator: pausing and resuming requests for slow clients (flow control).
#include <spdlog/spdlog.h>

#include "pipeline/coordinator_internal.h"

namespace omnirt::pipeline::detail {

Status CoordinatorCore::pause(const std::string& request_id, bool paused) {
    {
        std::lock_guard lock(mutex_);
        auto it = requests_.find(request_id);
        if (it == requests_.end()) {
            return fail(ErrorCode::not_found, "request '" + request_id + "' is not live");
        }
        if (it->second->paused == paused) return {};
        it->second->paused = paused;
    }
    // Outside mutex_ (the publish may wait for the send queue). Two calls racing for one
    // request may publish in either order; the caller serialises its calls per request.
    publish_pause(request_id, paused);
    return {};
}

void CoordinatorCore::forget_pause(const std::shared_ptr<RequestEntry>& entry) {
    bool paused = false;
    {
        std::lock_guard lock(mutex_);
        paused = entry->paused;
        entry->paused = false;
    }
    if (paused) publish_pause(entry->id, false);
}

void CoordinatorCore::publish_pause(const std::string& request_id, bool paused) {
    auto published = plane_->publish(proto::PauseMessage{request_id, paused});
    if (!published) {
        spdlog::debug("coordinator: {} of '{}' not published: {}", paused ? "pause" : "resume",
                      request_id, published.error().message);
    }
}

}  // namespace omnirt::pipeline::detail
