// Stage health: heartbeats, the health report, and admission of new requests (supervision's
// side is in coordinator_supervision.cpp).
#include <spdlog/spdlog.h>

#include "pipeline/coordinator_internal.h"

namespace omnirt::pipeline::detail {

void CoordinatorCore::on_heartbeat(const proto::HeartbeatMessage& message) {
    // Read first: the control plane's counter is not under mutex_.
    const std::size_t subscriptions = plane_->subscriptions_received();
    std::lock_guard lock(mutex_);
    auto it = stages_.find(message.stage);
    if (it == stages_.end()) {
        ++ignored_;
        spdlog::warn("coordinator: heartbeat from unknown stage '{}' (pid {})", message.stage,
                     message.pid);
        return;
    }
    StageRecord& record = it->second;
    if (record.accepted_pid && message.pid != *record.accepted_pid) {
        // From a dead incarnation (or before its successor is ready): it must not revive it.
        ++ignored_;
        spdlog::debug("coordinator: ignored a heartbeat of stage '{}' from pid {}", message.stage,
                      message.pid);
        return;
    }
    if (record.state == StageState::failed) {
        ++ignored_;
        return;
    }
    if (record.state == StageState::restarting) {
        if (subscriptions < record.subscriptions_needed) {
            // Its abort subscription has not arrived yet: the next heartbeat checks again.
            spdlog::debug("coordinator: stage '{}' (pid {}) has not subscribed yet", message.stage,
                          message.pid);
            return;
        }
        record.state = StageState::running;
        spdlog::info("coordinator: stage '{}' is running again (pid {}, restart {})", message.stage,
                     message.pid, record.restarts);
        record.down_reason.clear();
    }
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
    return record.state == StageState::running && record.last_seen &&
           now - *record.last_seen <= options_.heartbeat_timeout;
}

Status CoordinatorCore::stage_status_locked(const std::string& stage, const StageRecord& record,
                                            SteadyClock::time_point now) const {
    switch (record.state) {
        case StageState::restarting:
            return fail(ErrorCode::unavailable,
                        "stage '" + stage + "' is restarting: " + record.down_reason);
        case StageState::failed:
            return fail(ErrorCode::unavailable,
                        "stage '" + stage + "' failed: " + record.down_reason);
        case StageState::running:
            break;
    }
    // A stage that has not sent its first heartbeat may still be starting: requests wait for it
    // in its socket. One whose heartbeats stopped is presumed hung.
    if (record.last_seen && !stage_alive_locked(record, now)) {
        auto silent = std::chrono::duration_cast<Duration>(now - *record.last_seen);
        return fail(ErrorCode::unavailable, "stage '" + stage + "' has sent no heartbeat for " +
                                                std::to_string(silent.count()) + " ms");
    }
    return {};
}

Status CoordinatorCore::admission_locked(SteadyClock::time_point now,
                                         const std::vector<std::string>& terminals) const {
    if (stopped_) return fail(ErrorCode::unavailable, "coordinator stopped");
    if (!started_) return fail(ErrorCode::unavailable, "coordinator is not started");
    for (const auto& [stage, record] : stages_) {
        if (!paths_.on_path(terminals, stage)) continue;
        Status status = stage_status_locked(stage, record, now);
        if (!status) return fail(status.error().with_context("pipeline unavailable"));
    }
    return {};
}

HealthReport CoordinatorCore::health() const {
    HealthReport report;
    auto now = SteadyClock::now();
    std::lock_guard lock(mutex_);
    bool all_alive = true;
    bool none_lost = true;  // no stage failed or silent
    for (const auto& [stage, record] : stages_) {
        bool silent = record.state == StageState::running && record.last_seen &&
                      !stage_alive_locked(record, now);
        none_lost = none_lost && record.state != StageState::failed && !silent;
        StageHealth health{.stage = stage,
                           .alive = stage_alive_locked(record, now),
                           .state = record.state,
                           .down_reason = record.down_reason,
                           .restarts = record.restarts,
                           .pid = record.pid,
                           .queue_depth = record.queue_depth,
                           .active_requests = record.active_requests,
                           .processed = record.processed,
                           .compute_ns = record.compute_ns,
                           .edges = record.edges};
        all_alive = all_alive && health.alive;
        report.stages.push_back(std::move(health));
    }
    // The reason names the first stage that is down, else the first silent one.
    for (bool down_only : {true, false}) {
        for (const auto& [stage, record] : stages_) {
            if (!report.reason.empty() || stage_alive_locked(record, now)) continue;
            if (down_only && record.state == StageState::running) continue;
            Status status = stage_status_locked(stage, record, now);
            report.reason =
                status ? "stage '" + stage + "' has not reported yet" : status.error().message;
        }
    }
    report.healthy = started_ && !stopped_ && all_alive;
    report.live = started_ && !stopped_ && none_lost;
    if (stopped_) {
        report.reason = "coordinator stopped";
    } else if (!started_) {
        report.reason = "coordinator is not started";
    } else if (report.healthy) {
        report.reason.clear();
    }
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

}  // namespace omnirt::pipeline::detail
