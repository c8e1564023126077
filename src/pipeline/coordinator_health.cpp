// Stage health: heartbeats, the health report, admission of new requests, and supervision
// (stages marked down by the runner fail every live request).
#include <spdlog/spdlog.h>

#include "pipeline/coordinator_internal.h"

namespace omnirt::pipeline::detail {

void CoordinatorCore::on_heartbeat(const proto::HeartbeatMessage& message) {
    std::lock_guard lock(mutex_);
    auto it = stages_.find(message.stage);
    if (it == stages_.end()) {
        ++ignored_;
        spdlog::warn("coordinator: heartbeat from unknown stage '{}' (pid {})", message.stage,
                     message.pid);
        return;
    }
    StageRecord& record = it->second;
    if (!record.last_seen) heartbeat_seen_.notify_all();
    record.last_seen = SteadyClock::now();
    record.pid = message.pid;
    record.queue_depth = message.queue_depth;
    record.active_requests = message.active_requests;
    record.processed = message.processed;
    record.compute_ns = message.compute_ns;
    record.edges = message.edges;
}

bool CoordinatorCore::stage_alive_locked(const StageRecord& record,
                                         SteadyClock::time_point now) const {
    return !record.down && record.last_seen &&
           now - *record.last_seen <= options_.heartbeat_timeout;
}

Status CoordinatorCore::admission_locked(SteadyClock::time_point now) const {
    if (stopped_) return fail(ErrorCode::unavailable, "coordinator stopped");
    if (!started_) return fail(ErrorCode::unavailable, "coordinator is not started");
    if (down_) return fail(ErrorCode::unavailable, "pipeline unavailable: " + down_message_);
    // A stage that has not sent its first heartbeat may still be starting: requests wait for it
    // in its socket. One whose heartbeats stopped is presumed hung.
    for (const auto& [stage, record] : stages_) {
        if (record.last_seen && !stage_alive_locked(record, now)) {
            auto silent = std::chrono::duration_cast<Duration>(now - *record.last_seen);
            return fail(ErrorCode::unavailable, "pipeline unavailable: stage '" + stage +
                                                    "' has sent no heartbeat for " +
                                                    std::to_string(silent.count()) + " ms");
        }
    }
    return {};
}

HealthReport CoordinatorCore::health() const {
    HealthReport report;
    auto now = SteadyClock::now();
    std::lock_guard lock(mutex_);
    bool all_alive = true;
    for (const auto& [stage, record] : stages_) {
        StageHealth health{.stage = stage,
                           .alive = stage_alive_locked(record, now),
                           .down_reason = record.down_reason,
                           .pid = record.pid,
                           .queue_depth = record.queue_depth,
                           .active_requests = record.active_requests,
                           .processed = record.processed,
                           .compute_ns = record.compute_ns,
                           .edges = record.edges};
        all_alive = all_alive && health.alive;
        report.stages.push_back(std::move(health));
    }
    report.healthy = started_ && !stopped_ && !down_ && all_alive;
    std::int64_t pending = 0;
    std::int64_t running = 0;
    for (const auto& [id, entry] : requests_) {
        (entry->state == RequestState::pending ? pending : running)++;
    }
    report.requests_by_state = {{"pending", pending},
                                {"running", running},
                                {"completed", static_cast<std::int64_t>(completed_)},
                                {"failed", static_cast<std::int64_t>(failed_)},
                                {"aborted", static_cast<std::int64_t>(aborted_)}};
    report.ignored_messages = ignored_;
    return report;
}

std::size_t CoordinatorCore::live_requests() const {
    std::lock_guard lock(mutex_);
    return requests_.size();
}

void CoordinatorCore::mark_stages_down(const std::vector<std::string>& stages,
                                       const std::string& reason) {
    if (stages.empty()) return;
    std::string names;
    for (const auto& stage : stages) {
        if (!names.empty()) names += ", ";
        names += "'" + stage + "'";
    }
    std::string message =
        (stages.size() == 1 ? "stage " + names + " is down: " : "stages " + names + " are down: ") +
        reason;
    std::vector<std::shared_ptr<RequestEntry>> live;
    {
        std::lock_guard lock(mutex_);
        for (const auto& stage : stages) {
            auto it = stages_.find(stage);
            if (it == stages_.end()) {
                spdlog::warn("coordinator: marked down an unknown stage '{}'", stage);
                continue;
            }
            it->second.down = true;
            it->second.down_reason = reason;
        }
        down_ = true;
        down_message_ = message;
        live = detach_all_locked(RequestState::failed);
    }
    spdlog::error("coordinator: {} ({} live requests failed)", message, live.size());
    for (const auto& entry : live) {
        publish_abort(entry->id, message);
        deliver_terminal(entry, terminal_event(*entry, RequestEvent::Kind::failed,
                                               Error{ErrorCode::unavailable, message}));
    }
}

}  // namespace omnirt::pipeline::detail
