#include "serve/api/generation_call.h"

#include "core/log.h"
#include "serve/openai/responses.h"

namespace omnirt::serve::api {

using pipeline::RequestEvent;

GenerationCall::GenerationCall(std::unique_ptr<Exchange> exchange, std::string request_id,
                               bool stream)
    : exchange_(std::move(exchange)), request_id_(std::move(request_id)), stream_(stream) {}

GenerationCall::~GenerationCall() {
    if (paused_.load()) exchange_->state().metrics.stream_unpaused();
}

void GenerationCall::run(OmniRequest request) {
    ApiState& state = exchange_->state();
    auto self = shared_from_this();
    Status started = state.client.start(request_id_, std::move(request), request_options(state),
                                        [self](RequestEvent event) { self->on_event(event); });
    if (!started) {
        exchange_->respond_error(pipeline_error(started.error()));
        return;
    }
    client::Client* client = &state.client;
    exchange_->http().on_disconnect(
        [client, id = request_id_] { (void)client->abort(id, "the client disconnected"); });
    if (stream_) {
        std::weak_ptr<GenerationCall> weak = self;
        exchange_->http().on_flow([weak](http::StreamFlow flow) {
            if (auto call = weak.lock()) call->on_flow(flow);
        });
        std::lock_guard lock(mutex_);
        ensure_head();
    }
}

void GenerationCall::on_event(RequestEvent& event) {
    // Chunks and the end run on the pool in the order they came; no chunk follows the end. A
    // closed pool (shutdown) drops them; the HTTP layer then answers the exchange 500.
    GenerationCall* self = this;
    if (!event.terminal()) {
        post_in_order([self, chunk = std::move(event.chunk)] {
            if (self->failed_) return;
            auto delta = client::parse_chunk(chunk);
            if (!delta) {
                self->fail(delta.error());
                return;
            }
            self->on_chunk(*delta);
        });
        return;
    }
    post_in_order([self, event = std::move(event)] { self->on_end(event); });
}

void GenerationCall::post_in_order(std::function<void()> task) {
    {
        std::lock_guard lock(order_mutex_);
        in_order_.push_back(std::move(task));
        if (draining_) return;
        draining_ = true;
    }
    // The pool task keeps the call alive until the queue is empty.
    (void)exchange_->state().pool->post([self = shared_from_this()] { self->run_in_order(); });
}

void GenerationCall::run_in_order() {
    for (;;) {
        std::function<void()> task;
        {
            std::lock_guard lock(order_mutex_);
            if (in_order_.empty()) {
                draining_ = false;
                return;
            }
            task = std::move(in_order_.front());
            in_order_.pop_front();
        }
        std::lock_guard lock(mutex_);
        task();
    }
}

void GenerationCall::on_end(const RequestEvent& event) {
    if (failed_) return;
    if (event.kind != RequestEvent::Kind::completed) {
        if (event.kind == RequestEvent::Kind::aborted && exchange_->http().disconnected()) {
            return;  // the client left; nobody to tell
        }
        openai::ProtocolError error = pipeline_error(event.error);
        if (error.http_status == 400 && error.param.empty()) error.param = param_of(event.error);
        send_error(error);
        return;
    }
    auto result = client::parse_result(event.result.data);
    if (!result) {
        send_error(output_error(result.error()));
        return;
    }
    on_result(*result);
}

void GenerationCall::on_flow(http::StreamFlow flow) {
    ApiState& state = exchange_->state();
    switch (flow) {
        case http::StreamFlow::paused:
            if (!paused_.exchange(true)) state.metrics.stream_paused();
            log::debug("request '" + request_id_ +
                       "': the client reads slower than the stream; pausing it");
            (void)state.client.pause(request_id_, true);
            return;
        case http::StreamFlow::resumed:
            if (paused_.exchange(false)) state.metrics.stream_unpaused();
            log::debug("request '" + request_id_ + "': the client caught up; resuming it");
            (void)state.client.pause(request_id_, false);
            return;
        case http::StreamFlow::stalled: {
            if (paused_.exchange(false)) state.metrics.stream_unpaused();
            state.metrics.stream_stalled();
            const auto timeout = state.options.http.stream_stall_timeout.count();
            const std::string reason = "the stream stalled: its client read too little of it for " +
                                       (timeout % 1000 == 0 ? std::to_string(timeout / 1000) + " s"
                                                            : std::to_string(timeout) + " ms");
            log::warn("request '" + request_id_ + "': " + reason + "; aborting it");
            (void)state.client.abort(request_id_, reason);
            return;
        }
    }
}

void GenerationCall::ensure_head() {
    if (head_sent_) return;
    head_sent_ = true;
    open_stream();
    after_head();
}

void GenerationCall::fail(const Error& error) {
    if (failed_) return;
    failed_ = true;
    (void)exchange_->state().client.abort(request_id_, error.message);
    send_error(output_error(error));
}

void GenerationCall::write_stream_error(const openai::ProtocolError& error) {
    exchange_->write(openai::error_event(error));
}

void GenerationCall::send_error(const openai::ProtocolError& error) {
    if (stream_ && head_sent_) {
        write_stream_error(error);
        exchange_->finish();
    } else {
        exchange_->respond_error(error);
    }
}

}  // namespace omnirt::serve::api
