// The request table: admission, submit to the entry stage, completions and stream chunks from
// the stages, merging of several terminal results, aborts, and exactly-once terminal delivery.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>

#include "pipeline/client_stream.h"
#include "pipeline/coordinator_internal.h"
#include "pipeline/replica_routing.h"

namespace omnirt::pipeline::detail {
namespace {

std::optional<std::int64_t> unix_ms(const std::optional<std::chrono::system_clock::time_point>& t) {
    if (!t) return std::nullopt;
    return std::chrono::duration_cast<std::chrono::milliseconds>(t->time_since_epoch()).count();
}

// "stage 'x': message", unless the stage already said so.
Error stage_error(const std::string& stage, Error error) {
    std::string prefix = "stage '" + stage + "'";
    if (error.message.starts_with(prefix)) return error;
    return error.with_context(prefix);
}

}  // namespace

Result<std::vector<std::string>> CoordinatorCore::terminals_for(const OmniRequest& request) const {
    if (!terminal_fn_) return options_.terminal_stages;
    const std::string& name = *options_.terminal_stages_fn;
    Result<std::optional<std::vector<std::string>>> chosen;
    try {
        chosen = (*terminal_fn_)(request);
    } catch (const std::exception& e) {
        return fail(ErrorCode::internal, "terminal_stages_fn '" + name + "' threw: " + e.what());
    }
    if (!chosen) return fail(chosen.error().with_context("terminal_stages_fn '" + name + "'"));
    if (!*chosen) {
        if (options_.terminal_stages.empty()) {
            return fail(ErrorCode::invalid_argument,
                        "terminal_stages_fn '" + name +
                            "' chose the static terminal stages, and there are none");
        }
        return options_.terminal_stages;
    }
    std::vector<std::string> stages = std::move(**chosen);
    if (stages.empty()) {
        return fail(ErrorCode::invalid_argument,
                    "terminal_stages_fn '" + name + "' returned no stages");
    }
    std::sort(stages.begin(), stages.end());
    stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
    for (const auto& stage : stages) {
        if (!options_.stage_endpoints.contains(stage)) {
            return fail(ErrorCode::invalid_argument,
                        "terminal_stages_fn '" + name + "' returned unknown stage '" + stage + "'");
        }
    }
    return stages;
}

Status CoordinatorCore::start_entry(const std::shared_ptr<RequestEntry>& entry,
                                    const std::string& request_id, OmniRequest request,
                                    const RequestOptions& options) {
    if (request_id.empty()) {
        return fail(ErrorCode::invalid_argument, "coordinator: empty request id");
    }
    if (options.deadline && *options.deadline <= std::chrono::system_clock::now()) {
        return fail(ErrorCode::deadline_exceeded,
                    "request '" + request_id + "': the deadline has already passed");
    }
    OMNI_TRY(entry->terminals, terminals_for(request));
    entry->id = request_id;
    if (options.deadline) {
        // Enforced on the steady clock, so a wall-clock step does not fire or delay it.
        auto left = *options.deadline - std::chrono::system_clock::now();
        entry->deadline =
            SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(left);
    }
    if (entry->terminals.size() > 1) entry->request = request;
    std::string entry_endpoint = options_.stage_endpoints.at(options_.entry_stage);
    if (!groups_.empty()) {
        // Replicas: one per replica group on the request's path, written into its metadata so
        // that every stage sends it on to the same replicas (replica_routing.h).
        std::optional<std::uint64_t> key = routing_key(request);
        {
            std::lock_guard lock(mutex_);
            OMNI_RETURN_IF_ERROR(admission_locked(SteadyClock::now(), entry->terminals));
            entry->replicas = choose_replicas_locked(SteadyClock::now(), entry->terminals, key);
        }
        std::map<std::string, int> routes;
        for (const auto& [name, replica] : entry->replicas) {
            for (const auto& stage : groups_.at(name).stages) routes[stage] = replica;
        }
        if (auto status = set_replica_routes(request, routes); !status) {
            return fail(status.error().with_context("request '" + request_id + "'"));
        }
        if (auto it = routes.find(options_.entry_stage); it != routes.end()) {
            entry_endpoint = options_.replica_endpoints.at(options_.entry_stage)
                                 .at(static_cast<std::size_t>(it->second));
        }
    }

    // Encoded here so that an unencodable request fails before it is accepted.
    proto::SubmitMessage submit{
        .request_id = request_id,
        .payload = StagePayload{.request_id = request_id, .request = {}, .data = request.inputs},
        .deadline_unix_ms = unix_ms(options.deadline)};
    submit.payload.request = std::move(request);
    auto bytes = proto::encode_message(submit);
    if (!bytes) return fail(bytes.error().with_context("request '" + request_id + "'"));

    {
        std::lock_guard lock(mutex_);
        if (quarantine_.contains(request_id)) {
            return fail(ErrorCode::already_exists,
                        "request '" + request_id +
                            "' was failed by a stage process that died; messages about it may "
                            "still arrive, so its id cannot be used again");
        }
        OMNI_RETURN_IF_ERROR(admission_locked(SteadyClock::now(), entry->terminals));
        for (const auto& [name, replica] : entry->replicas) {
            // A replica that went down since it was chosen has failed its requests already.
            std::vector<int> serving =
                serving_replicas_locked(groups_.at(name), SteadyClock::now());
            if (std::find(serving.begin(), serving.end(), replica) == serving.end()) {
                return fail(ErrorCode::unavailable,
                            "pipeline unavailable: replica " + std::to_string(replica) +
                                " of stage '" + groups_.at(name).stages.front() +
                                "' went down while the request was admitted");
            }
        }
        if (requests_.contains(request_id)) {
            return fail(ErrorCode::already_exists,
                        "request '" + request_id + "' is already running");
        }
        if (requests_.size() >= options_.max_live_requests) {
            return fail(ErrorCode::resource_exhausted,
                        "coordinator: " + std::to_string(requests_.size()) +
                            " live requests (max_live_requests)");
        }
        requests_.emplace(request_id, entry);
        if (entry->deadline) {
            auto [it, inserted] = deadlines_.emplace(*entry->deadline, entry.get());
            if (it == deadlines_.begin()) timer_wake_.notify_one();
        }
    }

    // The stage may answer (on the IO thread) before send_bytes returns: from here on the entry
    // may end at any time, and whoever detaches it delivers its terminal event.
    auto sent = plane_->send_bytes(entry_endpoint, std::move(*bytes));
    std::lock_guard lock(mutex_);
    if (!sent) {
        if (!detach_locked(entry, RequestState::failed)) return {};  // ended meanwhile: reported
        --failed_;                                                   // never accepted: not counted
        return fail(ErrorCode::unavailable,
                    "request '" + request_id +
                        "': cannot send to the entry stage: " + sent.error().message);
    }
    auto it = requests_.find(request_id);
    if (it != requests_.end() && it->second == entry) entry->state = RequestState::running;
    return {};
}

Status CoordinatorCore::end_entry(const std::shared_ptr<RequestEntry>& entry,
                                  RequestEvent::Kind kind, Error error) {
    OMNI_CHECK(kind == RequestEvent::Kind::failed || kind == RequestEvent::Kind::aborted,
               "end_entry ends with failed or aborted");
    {
        std::lock_guard lock(mutex_);
        auto state =
            kind == RequestEvent::Kind::failed ? RequestState::failed : RequestState::aborted;
        if (entry == nullptr || !detach_locked(entry, state)) {
            return fail(ErrorCode::not_found,
                        "request '" + (entry ? entry->id : std::string()) + "' is not live");
        }
    }
    publish_abort(entry->id, error.message);
    deliver_terminal(entry, terminal_event(*entry, kind, std::move(error)));
    return {};
}

Status CoordinatorCore::abort(const std::string& request_id, const std::string& reason) {
    std::shared_ptr<RequestEntry> entry;
    {
        std::lock_guard lock(mutex_);
        auto it = requests_.find(request_id);
        if (it == requests_.end()) {
            return fail(ErrorCode::not_found, "request '" + request_id + "' is not live");
        }
        entry = it->second;
    }
    return end_entry(entry, RequestEvent::Kind::aborted, Error{ErrorCode::aborted, reason});
}

void CoordinatorCore::on_complete(proto::CompleteMessage message) {
    std::shared_ptr<RequestEntry> entry;
    RequestEvent event;
    {
        std::lock_guard lock(mutex_);
        auto it = requests_.find(message.request_id);
        if (it == requests_.end()) {
            ++ignored_;
            spdlog::debug("coordinator: completion of unknown or ended request '{}' from '{}'",
                          message.request_id, message.from_stage);
            return;
        }
        entry = it->second;
        if (!message.ok) {
            detach_locked(entry, RequestState::failed);
            event = terminal_event(*entry, RequestEvent::Kind::failed,
                                   stage_error(message.from_stage, std::move(message.error)));
        } else if (std::find(entry->terminals.begin(), entry->terminals.end(),
                             message.from_stage) == entry->terminals.end()) {
            ++ignored_;
            spdlog::warn(
                "coordinator: request '{}': ignored a result from '{}', not one of its "
                "terminal stages",
                message.request_id, message.from_stage);
            return;
        } else if (entry->results.contains(message.from_stage)) {
            ++ignored_;
            spdlog::warn("coordinator: request '{}': ignored a second result from '{}'",
                         message.request_id, message.from_stage);
            return;
        } else {
            for (const auto& [stage, count] : recorded_client_chunks(message.result.request)) {
                auto& expected = entry->chunks_expected[stage];
                expected = std::max(expected, count);
            }
            entry->results.emplace(message.from_stage, std::move(message.result));
            if (entry->results.size() < entry->terminals.size()) return;
            entry->results_complete = true;
            auto completed = try_complete_locked(entry);
            if (!completed) return;  // chunks still on their way: on_stream finishes it
            event = std::move(*completed);
        }
    }
    if (event.kind == RequestEvent::Kind::failed) {
        spdlog::info("coordinator: request '{}' failed: {}", entry->id, event.error.message);
        publish_abort(entry->id, event.error.message);
    } else {
        forget_pause(entry);
    }
    deliver_terminal(entry, std::move(event));
}

void CoordinatorCore::on_stream(proto::StreamMessage message) {
    std::shared_ptr<RequestEntry> entry;
    {
        std::lock_guard lock(mutex_);
        auto it = requests_.find(message.request_id);
        if (it == requests_.end()) {
            ++ignored_;
            spdlog::debug("coordinator: chunk of unknown or ended request '{}' from '{}'",
                          message.request_id, message.from_stage);
            return;
        }
        entry = it->second;
    }
    RequestEvent event;
    event.kind = RequestEvent::Kind::chunk;
    event.request_id = std::move(message.request_id);
    event.from_stage = std::move(message.from_stage);
    event.chunk_index = message.chunk_index;
    event.chunk = std::move(message.chunk);
    event.metadata = std::move(message.metadata);
    const std::string from_stage = event.from_stage;
    deliver_chunk(entry, std::move(event));
    std::optional<RequestEvent> completed;
    {
        std::lock_guard lock(mutex_);
        ++entry->chunks_received[from_stage];
        if (entry->results_complete) completed = try_complete_locked(entry);
    }
    if (!completed) return;
    forget_pause(entry);
    deliver_terminal(entry, std::move(*completed));
}

std::optional<RequestEvent> CoordinatorCore::try_complete_locked(
    const std::shared_ptr<RequestEntry>& entry) {
    for (const auto& [stage, expected] : entry->chunks_expected) {
        auto received = entry->chunks_received.find(stage);
        if (received == entry->chunks_received.end() || received->second < expected) {
            return std::nullopt;
        }
    }
    if (!detach_locked(entry, RequestState::completed)) return std::nullopt;
    RequestEvent event = terminal_event(*entry, RequestEvent::Kind::completed, Error{});
    if (entry->terminals.size() == 1) {
        event.result = std::move(entry->results.begin()->second);
    } else {
        Map merged;
        for (auto& [stage, payload] : entry->results)
            merged.emplace(stage, std::move(payload.data));
        event.result = StagePayload{.request_id = entry->id,
                                    .request = std::move(*entry->request),
                                    .data = Value(std::move(merged))};
    }
    entry->results.clear();
    return event;
}

bool CoordinatorCore::detach_locked(const std::shared_ptr<RequestEntry>& entry,
                                    RequestState final_state) {
    auto it = requests_.find(entry->id);
    if (it == requests_.end() || it->second != entry) return false;
    requests_.erase(it);
    if (entry->deadline) deadlines_.erase({*entry->deadline, entry.get()});
    entry->state = final_state;
    switch (final_state) {
        case RequestState::completed:
            ++completed_;
            break;
        case RequestState::failed:
            ++failed_;
            break;
        case RequestState::aborted:
            ++aborted_;
            break;
        case RequestState::pending:
        case RequestState::running:
            OMNI_CHECK(false, "detach to a live state");
    }
    return true;
}

std::vector<std::shared_ptr<RequestEntry>> CoordinatorCore::detach_all_locked(
    RequestState final_state) {
    std::vector<std::shared_ptr<RequestEntry>> live;
    live.reserve(requests_.size());
    for (const auto& [id, entry] : requests_) live.push_back(entry);
    for (const auto& entry : live) detach_locked(entry, final_state);
    return live;
}

RequestEvent CoordinatorCore::terminal_event(const RequestEntry& entry, RequestEvent::Kind kind,
                                             Error error) {
    RequestEvent event;
    event.kind = kind;
    event.request_id = entry.id;
    event.error = std::move(error);
    return event;
}

void CoordinatorCore::deliver_chunk(const std::shared_ptr<RequestEntry>& entry,
                                    RequestEvent event) {
    std::lock_guard lock(entry->delivery_mutex);
    if (entry->ended) return;
    // A copy: the callback may end its own request, which releases entry->callback.
    auto callback = entry->callback;
    if (!callback || !*callback) return;
    try {
        (*callback)(std::move(event));
    } catch (const std::exception& e) {
        spdlog::error("coordinator: request '{}': event callback threw: {}", entry->id, e.what());
    }
}

void CoordinatorCore::deliver_terminal(const std::shared_ptr<RequestEntry>& entry,
                                       RequestEvent event) {
    std::lock_guard lock(entry->delivery_mutex);
    if (entry->ended) return;
    entry->ended = true;
    auto callback = std::move(entry->callback);
    entry->callback.reset();
    if (!callback || !*callback) return;
    try {
        (*callback)(std::move(event));
    } catch (const std::exception& e) {
        spdlog::error("coordinator: request '{}': event callback threw: {}", entry->id, e.what());
    }
}

void CoordinatorCore::publish_abort(const std::string& request_id, const std::string& reason) {
    auto published = plane_->publish(proto::AbortMessage{request_id, reason});
    if (!published) {
        spdlog::debug("coordinator: abort of '{}' not published: {}", request_id,
                      published.error().message);
    }
}

}  // namespace omnirt::pipeline::detail
