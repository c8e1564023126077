// Outputs (scheduler -> routing, relay writes, control messages) on the output thread or, when
// nothing blocks, on the scheduler thread that emits them; the put waiter.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>

#include "pipeline/client_stream.h"
#include "pipeline/local_dispatch.h"
#include "pipeline/relay_io.h"
#include "pipeline/stage_internal.h"

namespace omnirt::pipeline {
namespace {

std::string join(const std::set<std::string>& names) {
    std::string out;
    for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
    return out;
}

// Calls a registry function, turning exceptions into errors (user code must not crash us).
template <class Fn, class... Args>
auto call_user_function(const Fn& fn, const char* what, Args&&... args)
    -> decltype(fn(std::forward<Args>(args)...)) {
    try {
        return fn(std::forward<Args>(args)...);
    } catch (const std::exception& e) {
        return fail(ErrorCode::internal, std::string(what) + " threw: " + e.what());
    } catch (...) {
        return fail(ErrorCode::internal, std::string(what) + " threw");
    }
}

// Whether `value` holds tensor data (bytes the relay would move or a control message carry).
bool holds_tensor_bytes(const Value& value) {
    if (const Tensor* tensor = value.if_tensor()) return tensor->defined() && tensor->nbytes() > 0;
    if (const List* list = value.if_list()) {
        for (const auto& item : *list) {
            if (holds_tensor_bytes(item)) return true;
        }
    } else if (const Map* map = value.if_map()) {
        for (const auto& [key, item] : *map) {
            if (holds_tensor_bytes(item)) return true;
        }
    }
    return false;
}

bool holds_tensor_bytes(const StagePayload& payload) {
    return holds_tensor_bytes(payload.data) || holds_tensor_bytes(payload.request.inputs) ||
           holds_tensor_bytes(payload.request.params) ||
           holds_tensor_bytes(payload.request.metadata);
}

// `targets` deduplicated, checked to be a non-empty subset of `allowed`.
Result<std::vector<std::string>> checked_targets(std::vector<std::string> targets,
                                                 const std::set<std::string>& allowed,
                                                 const char* what, const char* field) {
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (auto& target : targets) {
        if (!allowed.contains(target)) {
            return fail(ErrorCode::invalid_argument, std::string(what) + " returned '" + target +
                                                         "', which is not among " + field + " (" +
                                                         join(allowed) + ")");
        }
        if (seen.insert(target).second) out.push_back(std::move(target));
    }
    return out;
}

}  // namespace

bool Stage::State::is_local_target(const std::string& target) const {
    return options.local != nullptr && options.local->has(target);
}

// Cheap: nothing waits for relay credits or copies tensor data on the scheduler's thread.
// Route and projection functions are user code the output thread would run as well.
bool Stage::State::can_handle_output_inline(const OutgoingMessage& message) const {
    switch (message.kind) {
        case OutgoingKind::error:
            return true;
        case OutgoingKind::stream:
            if (!message.chunk) return true;
            if (message.target && is_local_target(*message.target)) return true;
            return !holds_tensor_bytes(message.chunk->chunk) &&
                   !holds_tensor_bytes(message.chunk->metadata);
        case OutgoingKind::result:
            if (!message.result) return true;
            if (!plan->terminal && functions.projections.empty() &&
                std::all_of(next.begin(), next.end(),
                            [&](const std::string& target) { return is_local_target(target); })) {
                return true;
            }
            // A projection may add tensors; a terminal result travels in the complete message.
            return (plan->terminal || functions.projections.empty()) &&
                   !holds_tensor_bytes(*message.result);
    }
    return false;
}

bool Stage::State::deliver_output(OutgoingMessage message) {
    // Only while no work waits in the inbox: otherwise the scheduler's thread goes back to
    // compute and the output thread routes in parallel.
    if (!stopping.load() && scheduler->inbox().size() == 0 && can_handle_output_inline(message)) {
        std::unique_lock lock(output_mutex, std::try_to_lock);
        if (lock.owns_lock() && scheduler->outbox().size() == 0) {
            handle_output(std::move(message));
            return true;
        }
    }
    return scheduler->outbox().push(std::move(message));
}

void Stage::State::run_output_thread() {
    BlockingQueue<OutgoingMessage>& outbox = scheduler->outbox();
    while (outbox.wait_not_empty()) {
        // Popped under the lock: see stage_internal.h.
        std::lock_guard lock(output_mutex);
        while (std::optional<OutgoingMessage> message = outbox.try_pop()) {
            handle_output(std::move(*message));
        }
    }
}

void Stage::State::handle_output(OutgoingMessage message) {
    if (is_closed(message.request_id)) {
        // Aborted, failed, or already finished (a second result): its outputs go nowhere.
        dropped_messages.fetch_add(1);
        return;
    }
    switch (message.kind) {
        case OutgoingKind::result:
            on_result(message.request_id, std::move(message.result));
            break;
        case OutgoingKind::stream:
            on_stream_output(message.request_id, std::move(message.chunk), message.target);
            break;
        case OutgoingKind::error:
            fail_request(message.request_id, message.error);
            break;
    }
}

Result<std::vector<std::string>> Stage::State::stream_done_targets(const std::string& request_id,
                                                                   const StagePayload& result) {
    if (!functions.stream_done) return plan->stream_to;
    OMNI_TRY(auto targets,
             call_user_function(*functions.stream_done, "stream_done_to_fn", request_id, result));
    return checked_targets(std::move(targets), stream_to, "stream_done_to_fn", "stream_to");
}

Result<std::vector<std::string>> Stage::State::route_targets(const std::string& request_id,
                                                             const StagePayload& result) {
    if (!functions.route) return plan->next;
    OMNI_TRY(auto targets, call_user_function(*functions.route, "route_fn", request_id, result));
    if (targets.empty()) {
        return fail(ErrorCode::invalid_argument, "route_fn returned no targets");
    }
    return checked_targets(std::move(targets), next, "route_fn", "next");
}

void Stage::State::on_result(const std::string& request_id,
                             std::shared_ptr<const StagePayload> result) {
    if (!result) {
        fail_request(request_id, Error{ErrorCode::internal, "the scheduler emitted no payload"});
        return;
    }
    if (result->request_id != request_id) {
        StagePayload fixed = *result;
        fixed.request_id = request_id;
        result = std::make_shared<const StagePayload>(std::move(fixed));
    }
    auto done_targets = stream_done_targets(request_id, *result);
    if (!done_targets) {
        fail_request(request_id, done_targets.error());
        return;
    }
    Result<std::vector<std::string>> targets = std::vector<std::string>{};
    if (!plan->terminal) {
        targets = route_targets(request_id, *result);
        if (!targets) {
            fail_request(request_id, targets.error());
            return;
        }
    }
    std::int64_t client_chunks = 0;
    {
        // Finished before anything leaves, so late inputs for it are released from now on.
        std::lock_guard lock(book_mutex);
        if (auto counters = book.counters.find(request_id); counters != book.counters.end()) {
            client_chunks = counters->second.client_chunks;
        }
        book.finished.insert(request_id);
        book.forget(request_id);
    }
    if (client_chunks > 0) {
        // The coordinator holds the completion until these chunks arrived (client_stream.h).
        StagePayload counted = *result;
        record_client_chunks(counted.request, name, client_chunks);
        result = std::make_shared<const StagePayload>(std::move(counted));
    }
    processed.fetch_add(1);
    // Done signals before the payload: a receiver sees chunks, done, then the payload.
    for (const auto& target : *done_targets) {
        send_stream_signal(target, request_id, true, std::nullopt);
    }
    if (plan->terminal) {
        send_to_coordinator(proto::CompleteMessage{
            .request_id = request_id, .from_stage = name, .ok = true, .result = *result});
    } else {
        for (const auto& target : *targets) {
            std::shared_ptr<const StagePayload> out = result;
            if (auto projection = functions.projections.find(target);
                projection != functions.projections.end()) {
                auto projected =
                    call_user_function(projection->second, "projection", target, *result);
                if (!projected) {
                    fail_request(request_id, projected.error().with_context(
                                                 "project_payload for stage '" + target + "'"));
                    return;
                }
                projected->request_id = request_id;
                out = std::make_shared<const StagePayload>(std::move(*projected));
            }
            if (!send_payload(target, std::move(out))) return;
        }
    }
    forget_routes(request_id);
    release_relay_state(request_id);
}

bool Stage::State::send_payload(const std::string& target,
                                std::shared_ptr<const StagePayload> payload) {
    const std::string request_id = payload->request_id;
    payload = with_routes(std::move(payload));
    // Counted before the hand-off: the target may finish the request inside send_payload, and
    // whoever sees it finished must see it counted.
    if (options.local != nullptr) {
        local_dispatches.fetch_add(1);
        if (options.local->send_payload(target, name, payload)) return true;
        local_dispatches.fetch_sub(1);
    }
    auto destination = destination_of(target, request_id);
    if (!destination) {
        fail_request(request_id, destination.error().with_context("sending the payload to stage '" +
                                                                  target + "'"));
        return false;
    }
    Result<RelayWrite> write = fail(ErrorCode::internal, "unwritten");
    const auto write_start = Clock::now();
    {
        ScopedSpan span(tracer.get(), "relay_put", "relay", request_id);
        write = write_payload(*relay, *payload, destination->rank);
    }
    if (!write) {
        fail_request(request_id,
                     write.error().with_context("sending the payload to stage '" + target + "'"));
        return false;
    }
    if (write->put) relay_puts.fetch_add(1);
    edge_traffic.record_write(target, static_cast<std::int64_t>(write->header.buffer_bytes),
                              Clock::now() - write_start);
    // Control before wait (communication.md): the receiver's read is what completes the put.
    auto sent = control->send(destination->endpoint,
                              proto::DataReadyMessage{.request_id = request_id,
                                                      .from_stage = name,
                                                      .to_stage = target,
                                                      .relay_metadata = write->relay_metadata,
                                                      .header = std::move(write->header)});
    if (!sent) {
        fail_request(request_id,
                     sent.error().with_context("sending data_ready to stage '" + target + "'"));
        return false;
    }
    if (write->put) {
        wait_for_put(
            PutWait{.request_id = request_id, .target = target, .put = std::move(write->put)});
    }
    return true;
}

void Stage::State::on_stream_output(const std::string& request_id,
                                    std::shared_ptr<const StreamChunk> chunk,
                                    const std::optional<std::string>& target) {
    if (!chunk) {
        fail_request(request_id, Error{ErrorCode::internal, "the scheduler emitted no chunk"});
        return;
    }
    if (target && !stream_to.contains(*target)) {
        fail_request(request_id, Error{ErrorCode::invalid_argument,
                                       "stream target '" + *target + "' is not among stream_to (" +
                                           join(stream_to) + ")"});
        return;
    }
    std::int64_t index = 0;
    {
        std::lock_guard lock(book_mutex);
        if (book.closed(request_id)) {
            dropped_messages.fetch_add(1);  // a chunk after the result
            return;
        }
        OutputCounters& counters = book.counters[request_id];
        index = target ? counters.chunk_ids[*target]++ : counters.client_chunks++;
    }
    if (!target) {
        send_to_coordinator(proto::StreamMessage{.request_id = request_id,
                                                 .from_stage = name,
                                                 .chunk_index = index,
                                                 .chunk = chunk->chunk,
                                                 .metadata = chunk->metadata});
        return;
    }
    if (chunk->chunk_id != index) {
        chunk = std::make_shared<const StreamChunk>(
            StreamChunk{.chunk_id = index, .chunk = chunk->chunk, .metadata = chunk->metadata});
    }
    if (options.local != nullptr) {  // counted first, as in send_payload
        local_dispatches.fetch_add(1);
        if (options.local->send_stream_chunk(*target, name, request_id, chunk)) return;
        local_dispatches.fetch_sub(1);
    }
    auto destination = destination_of(*target, request_id);
    if (!destination) {
        fail_request(request_id,
                     destination.error().with_context("streaming to stage '" + *target + "'"));
        return;
    }
    Result<RelayWrite> write = fail(ErrorCode::internal, "unwritten");
    const auto write_start = Clock::now();
    {
        ScopedSpan span(tracer.get(), "relay_put", "relay", request_id);
        write = write_stream_chunk(*relay, request_id, chunk->chunk, chunk->metadata,
                                   destination->rank);
    }
    if (!write) {
        fail_request(request_id,
                     write.error().with_context("streaming to stage '" + *target + "'"));
        return;
    }
    if (write->put) relay_puts.fetch_add(1);
    edge_traffic.record_write(*target, static_cast<std::int64_t>(write->header.buffer_bytes),
                              Clock::now() - write_start);
    auto sent = control->send(destination->endpoint,
                              proto::DataReadyMessage{.request_id = request_id,
                                                      .from_stage = name,
                                                      .to_stage = *target,
                                                      .relay_metadata = write->relay_metadata,
                                                      .header = std::move(write->header),
                                                      .chunk_id = index});
    if (!sent) {
        fail_request(request_id,
                     sent.error().with_context("sending a chunk to stage '" + *target + "'"));
        return;
    }
    if (write->put) {
        wait_for_put(
            PutWait{.request_id = request_id, .target = *target, .put = std::move(write->put)});
    }
}

void Stage::State::wait_for_put(PutWait wait) {
    puts_in_flight.fetch_add(1);
    if (!puts.push(std::move(wait))) puts_in_flight.fetch_sub(1);
}

void Stage::State::release_relay_state(const std::string& request_id) {
    // With no put in flight nothing of the request can still be moving: release it now rather
    // than wake the put waiter. Puts of this request were queued before (its outputs are
    // handled in order), so a non-zero count covers them.
    if (puts_in_flight.load() == 0) {
        relay->cleanup(request_id);
        return;
    }
    puts.push(PutWait{.request_id = request_id});  // a marker: after the puts before it
}

void Stage::State::run_put_waiter() {
    while (std::optional<PutWait> wait = puts.pop()) {
        if (!wait->put) {
            relay->cleanup(wait->request_id);
            continue;
        }
        // Delivery, not completion: a zero-copy receiver may keep its view of the data for as
        // long as its computation needs (an AR stage holding input embeddings); the relay
        // reuses the memory when the view goes, and cleanup no longer affects the receiver.
        Status status = wait->put->wait_for_delivery(options.relay_timeout);
        puts_in_flight.fetch_sub(1);
        if (status) edge_traffic.record_delivery(wait->target, Clock::now() - wait->started);
        if (!status && status.error().code != ErrorCode::aborted) {
            fail_request(wait->request_id,
                         status.error().with_context("relay put to stage '" + wait->target + "'"));
        }
    }
}

}  // namespace omnirt::pipeline
