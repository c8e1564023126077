// Stage health: heartbeats, the health report, and admission of new requests (supervision's
// side is in coordinator_supervision.cpp).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "config/runtime_plan.h"
#include "pipeline/coordinator_internal.h"
#include "pipeline/replica_routing.h"

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
    record.kv_blocks_used = message.kv_blocks_used;
    record.kv_blocks_total = message.kv_blocks_total;
    record.paused_requests = message.paused_requests;
    record.generated_tokens = message.generated_tokens;
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
        if (record.replica >= 0 || !paths_.on_path(terminals, stage)) continue;
        Status status = stage_status_locked(stage, record, now);
        if (!status) return fail(status.error().with_context("pipeline unavailable"));
    }
    for (const auto& [name, group] : groups_) {
        if (!group_on_path(terminals, group) || !serving_replicas_locked(group, now).empty()) {
            continue;
        }
        std::string why;
        for (int k = 0; k < group.replicas; ++k) {
            for (const auto& stage : group.stages) {
                std::string instance = config::replica_name(stage, k);
                Status status = stage_status_locked(instance, stages_.at(instance), now);
                if (status) continue;
                why += (why.empty() ? "" : "; ") + status.error().message;
                break;
            }
        }
        return fail(ErrorCode::unavailable, "pipeline unavailable: no replica of stage '" +
                                                group.stages.front() + "' is serving (" + why +
                                                ")");
    }
    return {};
}

std::vector<int> CoordinatorCore::serving_replicas_locked(const ReplicaGroup& group,
                                                          SteadyClock::time_point now) const {
    std::vector<int> out;
    for (int k = 0; k < group.replicas; ++k) {
        bool serving = std::all_of(group.stages.begin(), group.stages.end(), [&](const auto& s) {
            std::string instance = config::replica_name(s, k);
            return static_cast<bool>(stage_status_locked(instance, stages_.at(instance), now));
        });
        if (serving) out.push_back(k);
    }
    return out;
}

bool CoordinatorCore::group_on_path(const std::vector<std::string>& terminals,
                                    const ReplicaGroup& group) const {
    return std::any_of(group.stages.begin(), group.stages.end(),
                       [&](const std::string& stage) { return paths_.on_path(terminals, stage); });
}

std::map<std::string, int> CoordinatorCore::choose_replicas_locked(
    SteadyClock::time_point now, const std::vector<std::string>& terminals,
    std::optional<std::uint64_t> key) {
    std::map<std::string, int> out;
    for (auto& [name, group] : groups_) {
        if (!group_on_path(terminals, group)) continue;
        std::vector<int> serving = serving_replicas_locked(group, now);
        if (serving.empty()) continue;  // admission refuses the request
        if (key) {
            out[name] = sticky_replica(*key, name, serving);
            continue;
        }
        // Round-robin over every replica, skipping those that do not serve.
        for (int tries = 0; tries < group.replicas; ++tries) {
            int k = static_cast<int>(group.next++ % static_cast<std::uint64_t>(group.replicas));
            if (std::find(serving.begin(), serving.end(), k) != serving.end()) {
                out[name] = k;
                break;
            }
        }
    }
    return out;
}

HealthReport CoordinatorCore::health() const {
    HealthReport report;
    auto now = SteadyClock::now();
    std::lock_guard lock(mutex_);
    bool all_alive = true;
    // Per stage (its replicas together): whether one is not lost (failed or silent) / alive.
    std::map<std::string, bool> kept;
    std::map<std::string, bool> serving;
    for (const auto& [stage, record] : stages_) {
        bool silent = record.state == StageState::running && record.last_seen &&
                      !stage_alive_locked(record, now);
        kept[record.stage] = kept[record.stage] || (record.state != StageState::failed && !silent);
        serving[record.stage] = serving[record.stage] || stage_alive_locked(record, now);
        StageHealth health{.stage = stage,
                           .replica_of = record.replica >= 0 ? record.stage : std::string(),
                           .replica = record.replica,
                           .alive = stage_alive_locked(record, now),
                           .state = record.state,
                           .down_reason = record.down_reason,
                           .restarts = record.restarts,
                           .pid = record.pid,
                           .queue_depth = record.queue_depth,
                           .active_requests = record.active_requests,
                           .processed = record.processed,
                           .compute_ns = record.compute_ns,
                           .edges = record.edges,
                           .kv_blocks_used = record.kv_blocks_used,
                           .kv_blocks_total = record.kv_blocks_total,
                           .paused_requests = record.paused_requests,
                           .generated_tokens = record.generated_tokens};
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
    auto all_of = [](const std::map<std::string, bool>& stages) {
        return std::all_of(stages.begin(), stages.end(), [](const auto& s) { return s.second; });
    };
    report.healthy = started_ && !stopped_ && all_alive;
    report.live = started_ && !stopped_ && all_of(kept);
    report.degraded = started_ && !stopped_ && !all_alive && all_of(serving);
    if (report.degraded) report.reason = "degraded: " + report.reason;
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
