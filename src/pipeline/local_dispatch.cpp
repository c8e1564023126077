#include "pipeline/local_dispatch.h"

#include "pipeline/stage.h"

namespace omnirt::pipeline {

void LocalDispatcher::add(Stage* stage) {
    std::lock_guard lock(mutex_);
    stages_[stage->name()] = stage;
}

void LocalDispatcher::remove(const std::string& stage_name) {
    std::lock_guard lock(mutex_);
    stages_.erase(stage_name);
}

bool LocalDispatcher::has(const std::string& stage_name) const {
    return find(stage_name) != nullptr;
}

// The receiving call runs outside the lock: it may wait for room in the receiver's queue
// (backpressure), and holding the lock then would stall every other local sender.
bool LocalDispatcher::send_payload(const std::string& target, const std::string& from_stage,
                                   std::shared_ptr<const StagePayload> payload) {
    Stage* stage = find(target);
    if (stage == nullptr) return false;
    stage->receive_local_payload(from_stage, std::move(payload));
    return true;
}

bool LocalDispatcher::send_stream_chunk(const std::string& target, const std::string& from_stage,
                                        const std::string& request_id,
                                        std::shared_ptr<const StreamChunk> chunk) {
    Stage* stage = find(target);
    if (stage == nullptr) return false;
    stage->receive_local_stream(from_stage, request_id, std::move(chunk));
    return true;
}

bool LocalDispatcher::send_stream_signal(const std::string& target, const std::string& from_stage,
                                         const std::string& request_id, bool done,
                                         std::optional<std::string> error) {
    Stage* stage = find(target);
    if (stage == nullptr) return false;
    stage->receive_local_stream_signal(from_stage, request_id, done, std::move(error));
    return true;
}

Stage* LocalDispatcher::find(const std::string& stage_name) const {
    std::lock_guard lock(mutex_);
    auto it = stages_.find(stage_name);
    return it == stages_.end() ? nullptr : it->second;
}

}  // namespace omnirt::pipeline
