#include "pipeline/tp_group.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "control/control_plane.h"

namespace omnirt::pipeline {
namespace {

Result<proto::ControlMessage> to_follower_message(const std::string& stage,
                                                  const IncomingMessage& message) {
    switch (message.kind) {
        case IncomingKind::new_request:
            if (!message.payload) break;
            return proto::ControlMessage(proto::SubmitMessage{.request_id = message.request_id,
                                                              .payload = *message.payload});
        case IncomingKind::stream_chunk:
            if (!message.chunk) break;
            return proto::ControlMessage(
                proto::StreamMessage{.request_id = message.request_id,
                                     .from_stage = message.from_stage,
                                     .chunk_index = message.chunk->chunk_id,
                                     .chunk = message.chunk->chunk,
                                     .metadata = message.chunk->metadata});
        case IncomingKind::stream_done:
            return proto::ControlMessage(proto::DataReadyMessage{.request_id = message.request_id,
                                                                 .from_stage = message.from_stage,
                                                                 .to_stage = stage,
                                                                 .is_done = true});
    }
    return fail(ErrorCode::internal, "inbox message without its payload or chunk");
}

// The inverse, on the follower; nullopt for messages that are not work.
std::optional<IncomingMessage> from_leader_message(proto::ControlMessage& message) {
    if (auto* submit = std::get_if<proto::SubmitMessage>(&message)) {
        return IncomingMessage{
            .request_id = submit->request_id,
            .kind = IncomingKind::new_request,
            .payload = std::make_shared<const StagePayload>(std::move(submit->payload))};
    }
    if (auto* stream = std::get_if<proto::StreamMessage>(&message)) {
        return IncomingMessage{.request_id = stream->request_id,
                               .kind = IncomingKind::stream_chunk,
                               .chunk = std::make_shared<const StreamChunk>(
                                   StreamChunk{.chunk_id = stream->chunk_index,
                                               .chunk = std::move(stream->chunk),
                                               .metadata = std::move(stream->metadata)}),
                               .from_stage = stream->from_stage};
    }
    if (auto* ready = std::get_if<proto::DataReadyMessage>(&message); ready && ready->is_done) {
        return IncomingMessage{.request_id = ready->request_id,
                               .kind = IncomingKind::stream_done,
                               .from_stage = ready->from_stage};
    }
    return std::nullopt;
}

}  // namespace

// ---- leader ----

struct TpLeaderScheduler::State {
    std::string stage;
    std::unique_ptr<Scheduler> inner;
    std::vector<std::string> followers;
    std::unique_ptr<control::ControlPlane> control;
    std::thread forward_thread;
    std::thread outbox_thread;
    std::mutex stop_mutex;
    bool started = false;
    bool stopped = false;

    void send_all(const proto::ControlMessage& message) {
        for (const auto& endpoint : followers) {
            if (auto sent = control->send(endpoint, message); !sent) {
                spdlog::error("stage '{}': TP fan-out to {}: {}", stage, endpoint,
                              sent.error().message);
            }
        }
    }
};

Result<std::unique_ptr<TpLeaderScheduler>> TpLeaderScheduler::create(
    std::string stage_name, std::unique_ptr<Scheduler> inner,
    std::vector<std::string> follower_endpoints) {
    if (!inner) return fail(ErrorCode::invalid_argument, "TP leader: no scheduler");
    auto state = std::make_unique<State>();
    state->stage = std::move(stage_name);
    state->inner = std::move(inner);
    state->followers = std::move(follower_endpoints);
    OMNI_TRY(state->control, control::ControlPlane::create());
    return std::unique_ptr<TpLeaderScheduler>(new TpLeaderScheduler(std::move(state)));
}

TpLeaderScheduler::TpLeaderScheduler(std::unique_ptr<State> state)
    : Scheduler(state->inner->inbox().capacity(), state->inner->outbox().capacity()),
      state_(std::move(state)) {}

TpLeaderScheduler::~TpLeaderScheduler() { stop(); }

Status TpLeaderScheduler::start() {
    OMNI_RETURN_IF_ERROR(state_->control->start());
    OMNI_RETURN_IF_ERROR(state_->inner->start());
    state_->forward_thread = std::thread([this] {
        while (auto message = inbox_.pop()) {
            auto wire = to_follower_message(state_->stage, *message);
            if (wire) {
                state_->send_all(*wire);
            } else {
                spdlog::error("stage '{}': {}", state_->stage, wire.error().message);
            }
            if (!state_->inner->inbox().push(std::move(*message))) break;
        }
    });
    state_->outbox_thread = std::thread([this] {
        while (auto message = state_->inner->outbox().pop()) {
            if (!outbox_.push(std::move(*message))) break;
        }
        outbox_.close();
    });
    std::lock_guard lock(state_->stop_mutex);
    state_->started = true;
    return {};
}

void TpLeaderScheduler::stop() {
    std::lock_guard lock(state_->stop_mutex);
    if (state_->stopped) return;
    state_->stopped = true;
    inbox_.close();
    if (state_->forward_thread.joinable()) state_->forward_thread.join();
    state_->inner->stop();  // closes the inner outbox: the outbox thread ends
    if (state_->outbox_thread.joinable()) state_->outbox_thread.join();
    outbox_.close();
    if (state_->started) state_->send_all(proto::ShutdownMessage{.reason = "rank 0 stopped"});
    state_->control->stop();
}

void TpLeaderScheduler::abort(const std::string& request_id) {
    inbox_.remove_if(
        [&](const IncomingMessage& message) { return message.request_id == request_id; });
    state_->inner->abort(request_id);
    state_->send_all(proto::AbortMessage{.request_id = request_id, .reason = "aborted"});
}

std::size_t TpLeaderScheduler::active_requests() const { return state_->inner->active_requests(); }

SchedulerLoad TpLeaderScheduler::load() const { return state_->inner->load(); }

// ---- follower ----

struct TpFollower::State {
    std::string stage;
    int rank = 0;
    std::string endpoint;
    std::unique_ptr<Scheduler> scheduler;
    std::function<void()> on_shutdown;
    std::unique_ptr<control::ControlPlane> control;
    std::thread drain_thread;
    std::atomic<std::size_t> received{0};
    std::atomic<bool> shutdown_seen{false};
    std::mutex stop_mutex;
    bool stopped = false;

    void handle(proto::ControlMessage message) {
        received.fetch_add(1, std::memory_order_relaxed);
        if (auto incoming = from_leader_message(message)) {
            // Blocks the IO thread when the scheduler is full: backpressure reaches rank 0
            // through ZMQ's high-water mark.
            (void)scheduler->inbox().push(std::move(*incoming));
        } else if (auto* abort = std::get_if<proto::AbortMessage>(&message)) {
            scheduler->abort(abort->request_id);
        } else if (std::holds_alternative<proto::ShutdownMessage>(message)) {
            if (!shutdown_seen.exchange(true) && on_shutdown) on_shutdown();
        } else {
            spdlog::warn("stage '{}' rank {}: ignoring a {} message", stage, rank,
                         proto::message_type_name(message));
        }
    }
};

Result<std::unique_ptr<TpFollower>> TpFollower::create(std::string stage_name, int rank,
                                                       std::string endpoint,
                                                       std::unique_ptr<Scheduler> scheduler,
                                                       std::function<void()> on_shutdown) {
    if (!scheduler) return fail(ErrorCode::invalid_argument, "TP follower: no scheduler");
    auto state = std::make_unique<State>();
    state->stage = std::move(stage_name);
    state->rank = rank;
    state->endpoint = std::move(endpoint);
    state->scheduler = std::move(scheduler);
    state->on_shutdown = std::move(on_shutdown);
    OMNI_TRY(state->control, control::ControlPlane::create());
    return std::unique_ptr<TpFollower>(new TpFollower(std::move(state)));
}

TpFollower::TpFollower(std::unique_ptr<State> state) : state_(std::move(state)) {}

TpFollower::~TpFollower() { stop(); }

Status TpFollower::start() {
    State* state = state_.get();
    OMNI_TRY(std::string bound,
             state->control->bind_pull(state->endpoint, [state](proto::ControlMessage message) {
                 state->handle(std::move(message));
             }));
    (void)bound;
    OMNI_RETURN_IF_ERROR(state->scheduler->start());
    OMNI_RETURN_IF_ERROR(state->control->start());
    state->drain_thread = std::thread([state] {
        // Followers compute in lockstep with rank 0 but never emit.
        while (state->scheduler->outbox().pop()) {
        }
    });
    return {};
}

void TpFollower::stop() {
    std::lock_guard lock(state_->stop_mutex);
    if (state_->stopped) return;
    state_->stopped = true;
    state_->control->stop();
    state_->scheduler->stop();
    if (state_->drain_thread.joinable()) state_->drain_thread.join();
}

std::size_t TpFollower::received() const { return state_->received.load(); }

}  // namespace omnirt::pipeline
