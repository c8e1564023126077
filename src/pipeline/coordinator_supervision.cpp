// Supervision's side of the coordinator: which requests a dead stage takes down (StagePaths),
// marking stages down and restarted, and the quarantine of the ids of the requests it failed.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "pipeline/coordinator_internal.h"

namespace omnirt::pipeline::detail {
namespace {

using Adjacency = std::map<std::string, std::vector<std::string>>;

std::set<std::string> reachable(const std::string& from, const Adjacency& edges) {
    std::set<std::string> seen{from};
    std::vector<std::string> todo{from};
    while (!todo.empty()) {
        std::string stage = std::move(todo.back());
        todo.pop_back();
        auto it = edges.find(stage);
        if (it == edges.end()) continue;
        for (const auto& next : it->second) {
            if (seen.insert(next).second) todo.push_back(next);
        }
    }
    return seen;
}

}  // namespace

StagePaths::StagePaths(const CoordinatorOptions& options) {
    if (options.stage_targets.empty()) return;
    known_ = true;
    Adjacency reverse;
    for (const auto& [from, targets] : options.stage_targets) {
        for (const auto& to : targets) reverse[to].push_back(from);
    }
    std::set<std::string> from_entry = reachable(options.entry_stage, options.stage_targets);
    for (const auto& [stage, endpoint] : options.stage_endpoints) {
        std::set<std::string> on_path;
        for (const auto& upstream : reachable(stage, reverse)) {
            if (from_entry.contains(upstream)) on_path.insert(upstream);
        }
        upstream_.emplace(stage, std::move(on_path));
    }
}

bool StagePaths::on_path(const std::vector<std::string>& terminals,
                         const std::string& stage) const {
    if (!known_) return true;
    return std::any_of(terminals.begin(), terminals.end(), [&](const std::string& terminal) {
        auto it = upstream_.find(terminal);
        return it == upstream_.end() || it->second.contains(stage);
    });
}

void Quarantine::add(const std::string& id) {
    if (!ids_.insert(id).second) return;
    order_.push_back(id);
    if (order_.size() > capacity_) {
        ids_.erase(order_.front());
        order_.pop_front();
    }
}

void CoordinatorCore::mark_stages_down(const std::vector<std::string>& stages,
                                       const std::string& reason, StageState state) {
    OMNI_CHECK(state != StageState::running, "mark_stages_down to running");
    if (stages.empty()) return;
    std::string names;
    for (const auto& stage : stages) {
        if (!names.empty()) names += ", ";
        names += "'" + stage + "'";
    }
    std::string message =
        (stages.size() == 1 ? "stage " + names + " is down: " : "stages " + names + " are down: ") +
        reason;
    std::vector<std::shared_ptr<RequestEntry>> affected;
    const std::size_t subscriptions = plane_->subscriptions_received();
    {
        std::lock_guard lock(mutex_);
        std::vector<const StageRecord*> known;
        for (const auto& stage : stages) {
            auto it = stages_.find(stage);
            if (it == stages_.end()) {
                spdlog::warn("coordinator: marked down an unknown stage '{}'", stage);
                continue;
            }
            StageRecord& record = it->second;
            if (state == StageState::restarting) ++record.restarts;
            record.state = state;
            record.down_reason = reason;
            record.accepted_pid = 0;  // the dead process's heartbeats no longer count
            record.subscriptions_at_down = subscriptions;
            known.push_back(&record);
        }
        for (const auto& [id, entry] : requests_) {
            // A replica takes down only the requests admitted to it.
            bool touched = std::any_of(known.begin(), known.end(), [&](const StageRecord* down) {
                if (!paths_.on_path(entry->terminals, down->stage)) return false;
                if (down->replica < 0) return true;
                auto chosen = entry->replicas.find(options_.replica_groups.at(down->stage));
                return chosen != entry->replicas.end() && chosen->second == down->replica;
            });
            if (touched) affected.push_back(entry);
        }
        for (const auto& entry : affected) {
            detach_locked(entry, RequestState::failed);
            quarantine_.add(entry->id);
        }
    }
    spdlog::error("coordinator: {} ({}; {} live requests failed)", message, to_string(state),
                  affected.size());
    for (const auto& entry : affected) {
        publish_abort(entry->id, message);
        deliver_terminal(entry, terminal_event(*entry, RequestEvent::Kind::failed,
                                               Error{ErrorCode::unavailable, message}));
    }
}

void CoordinatorCore::mark_stages_restarted(const std::vector<std::string>& stages,
                                            std::int64_t pid) {
    std::lock_guard lock(mutex_);
    for (const auto& stage : stages) {
        auto it = stages_.find(stage);
        if (it == stages_.end() || it->second.state != StageState::restarting) continue;
        // The incarnation it had (a node whose link came back) is subscribed already.
        const bool same_process = it->second.pid == pid;
        it->second.accepted_pid = pid;
        it->second.last_seen.reset();
        // Each stage of the new process subscribes once. Subscriptions of other processes
        // starting meanwhile may count too: the gate can open early, never stay shut.
        it->second.subscriptions_needed =
            same_process ? 0 : it->second.subscriptions_at_down + stages.size();
    }
}

}  // namespace omnirt::pipeline::detail
