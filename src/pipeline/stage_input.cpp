// Events: control messages and same-process deliveries, handled on the stage thread (relay
// reads, fan-in) or, when nothing blocks, on the thread that delivers them; scheduler inbox
// pushes.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "pipeline/relay_io.h"
#include "pipeline/stage_internal.h"

namespace omnirt::pipeline {
namespace {

template <class... Ts>
struct Overloaded : Ts... {
    using Ts::operator()...;
};

}  // namespace

bool Stage::State::can_handle_inline(const StageEvent& event) const {
    if (!inline_input) return false;
    const auto* message = std::get_if<proto::ControlMessage>(&event);
    if (message == nullptr) return true;  // same-process payloads, chunks and signals
    if (const auto* data_ready = std::get_if<proto::DataReadyMessage>(message)) {
        return data_ready->relay_metadata.is_null();  // no relay read to wait for
    }
    // Shutdown and profiler messages take the stage thread (host callback, file writes).
    return std::holds_alternative<proto::SubmitMessage>(*message) ||
           std::holds_alternative<proto::AbortMessage>(*message) ||
           std::holds_alternative<proto::PauseMessage>(*message);
}

void Stage::State::deliver_event(StageEvent event) {
    // Only while the scheduler's inbox is empty: an idle stage gains a hand-off, a busy one
    // keeps the stage thread working in parallel with this one (measured: handling every event
    // here costs a fifth of the throughput with 200 requests in flight).
    BlockingQueue<IncomingMessage>& inbox = scheduler->inbox();
    if (can_handle_inline(event) && inbox.size() == 0) {
        std::unique_lock lock(input_mutex, std::try_to_lock);
        // One event pushes at most two messages into the inbox (a chunk and its done signal);
        // with room for them the push cannot block (only event handlers push).
        if (lock.owns_lock() && !stopping.load() && events.size() == 0 &&
            inbox.size() + 2 <= inbox.capacity()) {
            handle_event(std::move(event));
            return;
        }
    }
    if (!events.push(std::move(event))) dropped_messages.fetch_add(1);
}

void Stage::State::run_stage_thread() {
    Clock::time_point next_heartbeat = Clock::now() + options.heartbeat_interval;
    while (!stopping.load()) {
        Clock::time_point deadline = next_heartbeat;
        {
            std::lock_guard lock(input_mutex);
            if (auto fan_in = input->next_deadline()) deadline = std::min(deadline, *fan_in);
        }
        if (events.wait_not_empty_until(deadline)) {
            // Popped under the lock: see stage_internal.h.
            std::lock_guard lock(input_mutex);
            if (std::optional<StageEvent> event = events.try_pop()) handle_event(std::move(*event));
        } else if (events.closed()) {
            break;
        }
        Clock::time_point now = Clock::now();
        {
            std::lock_guard lock(input_mutex);
            expire_fan_in(now);
        }
        if (now >= next_heartbeat) {
            send_heartbeat();
            next_heartbeat = now + options.heartbeat_interval;
        }
    }
}

void Stage::State::handle_event(StageEvent event) {
    std::visit(Overloaded{
                   [&](proto::ControlMessage& message) { on_control(std::move(message)); },
                   [&](LocalPayloadEvent& local) {
                       const std::string request_id = local.payload->request_id;
                       on_payload(request_id, local.from_stage, std::move(local.payload));
                   },
                   [&](LocalChunkEvent& local) {
                       on_stream_chunk(local.request_id, local.from_stage, std::move(local.chunk));
                   },
                   [&](LocalSignalEvent& local) {
                       on_stream_signal(local.request_id, local.from_stage, local.done,
                                        local.error);
                   },
               },
               event);
}

void Stage::State::on_control(proto::ControlMessage message) {
    std::visit(
        Overloaded{
            [&](proto::SubmitMessage& submit) {
                {
                    // A submit starts a request: an id the coordinator reuses is live again.
                    std::lock_guard lock(book_mutex);
                    book.finished.erase(submit.request_id);
                    book.dropped.erase(submit.request_id);
                }
                if (submit.payload.request_id != submit.request_id) {
                    fail_input(submit.request_id, Error{ErrorCode::invalid_argument,
                                                        "submit carries a payload of request '" +
                                                            submit.payload.request_id + "'"});
                    return;
                }
                on_payload(submit.request_id, "",
                           std::make_shared<const StagePayload>(std::move(submit.payload)));
            },
            [&](proto::DataReadyMessage& data_ready) { on_data_ready(std::move(data_ready)); },
            [&](proto::AbortMessage& abort) { on_abort(abort.request_id); },
            [&](proto::PauseMessage& pause) { on_pause(pause.request_id, pause.paused); },
            [&](proto::ShutdownMessage& shutdown) {
                spdlog::info("stage '{}': shutdown requested ({})", name, shutdown.reason);
                if (!shutdown_requested.exchange(true) && options.on_shutdown) {
                    options.on_shutdown();
                }
            },
            [&](proto::ProfilerStartMessage& start) { tracer->start(start.trace_path_template); },
            [&](proto::ProfilerStopMessage&) {
                auto written = tracer->stop();
                if (written) {
                    spdlog::info("stage '{}': trace written to {}", name, *written);
                } else {
                    spdlog::warn("stage '{}': profiler stop: {}", name,
                                 written.error().to_string());
                }
            },
            [&](auto& other) {
                dropped_messages.fetch_add(1);
                spdlog::warn("stage '{}': ignoring a '{}' message (not for stages)", name,
                             proto::message_type_name(proto::ControlMessage(other)));
            },
        },
        message);
}

void Stage::State::on_data_ready(proto::DataReadyMessage message) {
    const std::string& request_id = message.request_id;
    if (is_closed(request_id)) {
        release(message);
        return;
    }
    if (message.to_stage != name) {
        release(message);
        fail_input(request_id, Error{ErrorCode::invalid_argument,
                                     "data_ready from stage '" + message.from_stage +
                                         "' is addressed to stage '" + message.to_stage + "'"});
        return;
    }
    if (!message.header) {
        if (message.error || message.is_done) {
            on_stream_signal(request_id, message.from_stage, message.is_done, message.error);
            return;
        }
        release(message);
        fail_input(request_id, Error{ErrorCode::invalid_argument,
                                     "data_ready from stage '" + message.from_stage +
                                         "' has no header and is no stream signal"});
        return;
    }
    const bool has_relay_data = !message.relay_metadata.is_null();
    ReadOptions read{.mode = ReadMode::copy, .timeout = options.relay_timeout};
    if (message.chunk_id) {
        // Stream chunks are always copied: a streaming scheduler keeps chunks until the stream
        // ends, and views would pin the sender's credits (a deadlock once they run out).
        Result<proto::StreamBlob> blob = fail(ErrorCode::internal, "unread");
        {
            ScopedSpan span(tracer.get(), "relay_get", "relay", request_id);
            blob = read_stream_chunk(*relay, *message.header, message.relay_metadata, request_id,
                                     read);
        }
        if (has_relay_data) relay_gets.fetch_add(1);
        if (!blob) {
            fail_input(request_id, blob.error().with_context("reading a stream chunk from stage '" +
                                                             message.from_stage + "'"));
            return;
        }
        on_stream_chunk(request_id, message.from_stage,
                        std::make_shared<const StreamChunk>(StreamChunk{
                            .chunk_id = *message.chunk_id,
                            .chunk = std::move(blob->chunk),
                            .metadata = std::move(blob->metadata),
                        }));
        if (message.is_done) on_stream_signal(request_id, message.from_stage, true, std::nullopt);
        return;
    }
    // A stage that holds payloads across arrivals copies them; others keep zero-copy views of
    // large payloads (small ones are copied so the sender's slot returns at once).
    read.mode = input->aggregates() ? ReadMode::copy : ReadMode::view;
    Result<StagePayload> payload = fail(ErrorCode::internal, "unread");
    {
        ScopedSpan span(tracer.get(), "relay_get", "relay", request_id);
        payload = read_payload(*relay, *message.header, message.relay_metadata, request_id, read);
    }
    if (has_relay_data) relay_gets.fetch_add(1);
    if (!payload) {
        fail_input(request_id, payload.error().with_context("reading the payload from stage '" +
                                                            message.from_stage + "'"));
        return;
    }
    if (payload->request_id != request_id) {
        fail_input(request_id,
                   Error{ErrorCode::invalid_argument,
                         "data_ready from stage '" + message.from_stage +
                             "' carries a payload of request '" + payload->request_id + "'"});
        return;
    }
    on_payload(request_id, message.from_stage,
               std::make_shared<const StagePayload>(std::move(*payload)));
}

void Stage::State::on_payload(const std::string& request_id, const std::string& from_stage,
                              std::shared_ptr<const StagePayload> payload) {
    if (is_closed(request_id)) {
        dropped_messages.fetch_add(1);
        return;
    }
    record_routes(request_id, *payload);
    auto ready = input->receive(request_id, from_stage, std::move(payload), Clock::now());
    pending_fan_in.store(static_cast<std::int64_t>(input->pending()));
    if (!ready) {
        fail_input(request_id, ready.error());
        return;
    }
    if (*ready == nullptr) return;  // waiting for more fan-in sources
    push_to_scheduler(IncomingMessage{.request_id = request_id,
                                      .kind = IncomingKind::new_request,
                                      .payload = std::move(*ready),
                                      .from_stage = from_stage});
}

void Stage::State::on_stream_chunk(const std::string& request_id, const std::string& from_stage,
                                   std::shared_ptr<const StreamChunk> chunk) {
    push_to_scheduler(IncomingMessage{.request_id = request_id,
                                      .kind = IncomingKind::stream_chunk,
                                      .chunk = std::move(chunk),
                                      .from_stage = from_stage});
}

void Stage::State::on_stream_signal(const std::string& request_id, const std::string& from_stage,
                                    bool done, const std::optional<std::string>& error) {
    if (error) {
        // The sender reports the failure to the coordinator; here the request just ends.
        spdlog::info("stage '{}': request '{}' dropped: stream from '{}' failed: {}", name,
                     request_id, from_stage, *error);
        input->drop(request_id);
        pending_fan_in.store(static_cast<std::int64_t>(input->pending()));
        drop_request(request_id);
        return;
    }
    if (!done) return;
    push_to_scheduler(IncomingMessage{
        .request_id = request_id, .kind = IncomingKind::stream_done, .from_stage = from_stage});
}

void Stage::State::on_abort(const std::string& request_id) {
    input->drop(request_id);
    pending_fan_in.store(static_cast<std::int64_t>(input->pending()));
    drop_request(request_id);
}

void Stage::State::on_pause(const std::string& request_id, bool paused) {
    {
        // A request that already left this stage has nothing to hold (and must not leave a
        // pause behind).
        std::lock_guard lock(book_mutex);
        if (paused && book.closed(request_id)) return;
    }
    scheduler->pause(request_id, paused);
}

void Stage::State::fail_input(const std::string& request_id, const Error& error) {
    input->drop(request_id);
    pending_fan_in.store(static_cast<std::int64_t>(input->pending()));
    fail_request(request_id, error);
}

void Stage::State::release(const proto::DataReadyMessage& message) {
    dropped_messages.fetch_add(1);
    if (message.relay_metadata.is_null()) return;
    if (auto status = discard_transfer(*relay, message.relay_metadata, message.request_id,
                                       options.relay_timeout);
        !status) {
        spdlog::debug("stage '{}': nothing to release for request '{}': {}", name,
                      message.request_id, status.error().to_string());
    }
}

void Stage::State::push_to_scheduler(IncomingMessage message) {
    {
        // Checked and recorded together, so a request the output thread just finished (or an
        // aborted one) never gets new state here.
        std::lock_guard lock(book_mutex);
        if (book.closed(message.request_id)) {
            dropped_messages.fetch_add(1);
            return;
        }
        book.active.insert(message.request_id);
    }
    message.enqueued_at = Clock::now();
    if (scheduler->try_run_here(message)) return;
    if (!scheduler->inbox().push(std::move(message))) dropped_messages.fetch_add(1);
}

void Stage::State::expire_fan_in(Clock::time_point now) {
    std::vector<ExpiredInput> expired = input->expire(now);
    if (expired.empty()) return;
    pending_fan_in.store(static_cast<std::int64_t>(input->pending()));
    for (const auto& request : expired) fail_request(request.request_id, request.error);
}

}  // namespace omnirt::pipeline
