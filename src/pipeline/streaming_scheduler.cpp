#include "pipeline/streaming_scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <utility>

#include "pipeline/trace.h"

namespace omnirt::pipeline {

// One open request. `cancelled` and `left` are guarded by the scheduler's mutex; the state and the
// chunk counters belong to the worker thread.
struct StreamingScheduler::Entry {
    StreamRequestState state;
    bool cancelled = false;
    bool left = false;  // finished or failed (leave() ran)
    std::map<std::optional<std::string>, std::int64_t> next_chunk_id;
    std::deque<IncomingMessage> held;  // worker thread only: kept while paused
};

class StreamingScheduler::EntryEmitter final : public Emitter {
  public:
    EntryEmitter(StreamingScheduler& scheduler, std::shared_ptr<Entry> entry)
        : scheduler_(scheduler), entry_(std::move(entry)) {}

    const std::string& request_id() const override { return entry_->state.request_id; }
    bool emit(Value chunk, std::optional<std::string> target, Value metadata) override {
        return scheduler_.emit_chunk(*entry_, std::move(chunk), std::move(target),
                                     std::move(metadata));
    }
    bool aborted() const override {
        std::lock_guard lock(scheduler_.mutex_);
        return entry_->cancelled || scheduler_.stopping_;
    }
    bool wait_for_abort(std::chrono::milliseconds timeout) override {
        std::unique_lock lock(scheduler_.mutex_);
        return scheduler_.abort_cv_.wait_for(
            lock, timeout, [&] { return entry_->cancelled || scheduler_.stopping_; });
    }

  private:
    StreamingScheduler& scheduler_;
    std::shared_ptr<Entry> entry_;
};

Result<std::unique_ptr<StreamingScheduler>> StreamingScheduler::create(
    StreamingSchedulerOptions options) {
    if (!options.handler.on_chunk || !options.handler.on_done) {
        return fail(ErrorCode::invalid_argument, "streaming scheduler of stage '" +
                                                     options.stage_name +
                                                     "': the handler needs on_chunk and on_done");
    }
    return std::unique_ptr<StreamingScheduler>(new StreamingScheduler(std::move(options)));
}

StreamingScheduler::StreamingScheduler(StreamingSchedulerOptions options)
    : Scheduler(options.inbox_capacity, options.outbox_capacity), options_(std::move(options)) {}

StreamingScheduler::~StreamingScheduler() { stop(); }

Status StreamingScheduler::start() {
    std::lock_guard lock(mutex_);
    if (started_ || stopping_) {
        return fail(ErrorCode::failed_precondition,
                    "scheduler of stage '" + options_.stage_name + "' was already started");
    }
    started_ = true;
    worker_ = std::thread([this] { worker_loop(); });
    return ok_status();
}

void StreamingScheduler::stop() {
    std::lock_guard stop_lock(stop_mutex_);
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    abort_cv_.notify_all();
    inbox_.remove_if([](const IncomingMessage&) { return true; });
    inbox_.close();
    if (worker_.joinable()) worker_.join();
    pending_.clear();
    {
        std::lock_guard lock(mutex_);
        states_.clear();
    }
    outbox_.close();
}

void StreamingScheduler::abort(const std::string& request_id) {
    {
        std::lock_guard lock(mutex_);
        finished_.insert(request_id);
        if (auto it = states_.find(request_id); it != states_.end()) {
            it->second->cancelled = true;
            states_.erase(it);
        }
    }
    abort_cv_.notify_all();
    paused_.erase(request_id);
    inbox_.remove_if(
        [&](const IncomingMessage& message) { return message.request_id == request_id; });
    inbox_.interrupt();  // the worker drops the messages it kept for the request
}

void StreamingScheduler::pause(const std::string& request_id, bool paused) {
    if (paused) {
        std::lock_guard lock(mutex_);
        if (finished_.contains(request_id)) return;
    }
    if (paused_.set(request_id, paused) && !paused) inbox_.interrupt();
}

std::size_t StreamingScheduler::active_requests() const {
    std::lock_guard lock(mutex_);
    return states_.size();
}

SchedulerLoad StreamingScheduler::load() const {
    return SchedulerLoad{.paused_requests = static_cast<std::int64_t>(paused_.size())};
}

bool StreamingScheduler::has_runnable_pending() const {
    return std::any_of(pending_.begin(), pending_.end(), [&](const std::shared_ptr<Entry>& entry) {
        return !paused_.contains(entry->state.request_id);
    });
}

void StreamingScheduler::release_resumed() {
    std::vector<std::shared_ptr<Entry>> holding = std::move(holding_);
    holding_.clear();
    for (const std::shared_ptr<Entry>& entry : holding) {
        {
            std::lock_guard lock(mutex_);
            if (entry->cancelled || entry->left || stopping_) continue;  // dropped with it
        }
        // Replayed in order until the request is paused again (or leaves).
        while (!entry->held.empty() && !entry->left && !paused_.contains(entry->state.request_id)) {
            IncomingMessage message = std::move(entry->held.front());
            entry->held.pop_front();
            process(entry, std::move(message));
        }
        if (!entry->held.empty() && !entry->left) holding_.push_back(entry);
    }
}

void StreamingScheduler::worker_loop() {
    while (true) {
        release_resumed();
        std::optional<IncomingMessage> message;
        if (!has_runnable_pending()) {
            // An interrupt (a resume, an abort) ends the wait without a message.
            message = inbox_.pop_interruptible();
            if (!message) {
                if (inbox_.closed()) return;
                continue;
            }
        } else {
            message = inbox_.try_pop();
            if (!message) {
                {
                    std::lock_guard lock(mutex_);
                    if (stopping_) return;
                }
                run_step();
                continue;
            }
        }
        handle(std::move(*message));
    }
}

void StreamingScheduler::run_step() {
    std::vector<std::shared_ptr<Entry>> entries;
    std::vector<std::shared_ptr<Entry>> paused;  // wait for their resume
    {
        std::lock_guard lock(mutex_);
        for (std::shared_ptr<Entry>& entry : pending_) {
            // Aborted or already failed: dropped (and freed) here.
            if (entry->cancelled || entry->left) continue;
            if (paused_.contains(entry->state.request_id)) {
                paused.push_back(std::move(entry));
            } else {
                entries.push_back(std::move(entry));
            }
        }
    }
    pending_ = std::move(paused);
    if (entries.empty()) return;
    std::vector<std::unique_ptr<EntryEmitter>> emitters;
    std::vector<StreamStepItem> items;
    items.reserve(entries.size());
    for (const std::shared_ptr<Entry>& entry : entries) {
        emitters.push_back(std::make_unique<EntryEmitter>(*this, entry));
        items.push_back(StreamStepItem{.state = &entry->state,
                                       .emit = emitters.back().get(),
                                       .finishing = ready_to_finish(entry->state)});
    }
    {
        Tracer* tracer = options_.tracer;
        const Clock::time_point start = Clock::now();
        {
            ComputeTimer timer(*this);
            options_.handler.on_step(items);
        }
        if (tracer != nullptr && tracer->enabled()) {
            // Every request of the step is charged the step's time (the work was shared).
            const Clock::time_point end = Clock::now();
            for (const std::shared_ptr<Entry>& entry : entries) {
                tracer->record(TraceSpan{.name = "compute",
                                         .category = "scheduler",
                                         .request_id = entry->state.request_id,
                                         .start = start,
                                         .end = end});
            }
        }
    }
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const std::shared_ptr<Entry>& entry = entries[i];
        StreamRequestState& state = entry->state;
        if (!items[i].status) {
            state.pending = false;
            leave(entry, OutgoingMessage{.request_id = state.request_id,
                                         .kind = OutgoingKind::error,
                                         .error = std::move(items[i].status).error()});
        } else if (state.pending) {
            pending_.push_back(entry);
        } else if (ready_to_finish(state)) {
            finish(entry, *emitters[i]);
        }
    }
}

bool StreamingScheduler::ready_to_finish(const StreamRequestState& state) const {
    if (state.payload == nullptr) return false;
    if (!std::ranges::includes(state.done_sources, state.sources)) return false;
    if (options_.require_stream_done && !options_.stream_sources.empty() &&
        state.done_sources.empty()) {
        return false;
    }
    return true;
}

void StreamingScheduler::handle(IncomingMessage message) {
    if ((message.kind == IncomingKind::new_request && message.payload == nullptr) ||
        (message.kind == IncomingKind::stream_chunk && message.chunk == nullptr)) {
        spdlog::warn("stage '{}': dropping a malformed message for request '{}'",
                     options_.stage_name, message.request_id);
        return;
    }
    std::shared_ptr<Entry> entry;
    {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
        if (finished_.contains(message.request_id)) {
            spdlog::debug("stage '{}': dropping a late message for finished request '{}'",
                          options_.stage_name, message.request_id);
            return;
        }
        auto [it, inserted] = states_.try_emplace(message.request_id);
        if (inserted) {
            it->second = std::make_shared<Entry>();
            it->second->state.request_id = message.request_id;
        }
        entry = it->second;
    }
    if (!entry->held.empty() || paused_.contains(message.request_id)) {
        if (entry->held.empty()) holding_.push_back(entry);
        entry->held.push_back(std::move(message));
        return;
    }
    process(entry, std::move(message));
}

void StreamingScheduler::process(const std::shared_ptr<Entry>& entry, IncomingMessage message) {
    StreamRequestState& state = entry->state;
    if (message.kind == IncomingKind::new_request && state.payload != nullptr) {
        spdlog::warn("stage '{}': dropping a second payload for request '{}'", options_.stage_name,
                     message.request_id);
        return;
    }

    Tracer* tracer = options_.tracer;
    if (message.kind == IncomingKind::new_request && tracer != nullptr && tracer->enabled()) {
        tracer->record(TraceSpan{.name = "queue_wait",
                                 .category = "scheduler",
                                 .request_id = message.request_id,
                                 .start = message.enqueued_at,
                                 .end = Clock::now()});
    }

    EntryEmitter emitter(*this, entry);
    const StreamingHandler& handler = options_.handler;
    Status status;
    {
        ScopedSpan span(tracer, "compute", "scheduler", message.request_id);
        ComputeTimer timer(*this);
        switch (message.kind) {
            case IncomingKind::new_request:
                state.payload = std::move(message.payload);
                if (handler.on_new_request) status = handler.on_new_request(state, emitter);
                break;
            case IncomingKind::stream_chunk:
                state.sources.insert(message.from_stage);
                ++state.chunks_received;
                status = handler.on_chunk(state, message.from_stage, *message.chunk, emitter);
                break;
            case IncomingKind::stream_done:
                state.sources.insert(message.from_stage);
                state.done_sources.insert(message.from_stage);
                break;
        }
    }
    if (!status) {
        leave(entry, OutgoingMessage{.request_id = state.request_id,
                                     .kind = OutgoingKind::error,
                                     .error = std::move(status).error()});
        return;
    }
    if (handler.on_step && (state.pending || ready_to_finish(state))) {
        state.pending = true;  // a finishing request gets one step to flush before on_done
        if (std::find(pending_.begin(), pending_.end(), entry) == pending_.end()) {
            pending_.push_back(entry);
        }
        return;  // finished after the step that clears `pending`
    }
    if (!ready_to_finish(state)) return;
    finish(entry, emitter);
}

void StreamingScheduler::finish(const std::shared_ptr<Entry>& entry, Emitter& emitter) {
    StreamRequestState& state = entry->state;
    Tracer* tracer = options_.tracer;
    const StreamingHandler& handler = options_.handler;
    Result<StagePayload> result = [&]() -> Result<StagePayload> {
        ScopedSpan span(tracer, "compute", "scheduler", state.request_id);
        ComputeTimer timer(*this);
        return handler.on_done(state, emitter);
    }();
    if (!result) {
        leave(entry, OutgoingMessage{.request_id = state.request_id,
                                     .kind = OutgoingKind::error,
                                     .error = std::move(result).error()});
        return;
    }
    leave(entry,
          OutgoingMessage{.request_id = state.request_id,
                          .kind = OutgoingKind::result,
                          .result = std::make_shared<const StagePayload>(std::move(*result))});
}

void StreamingScheduler::leave(const std::shared_ptr<Entry>& entry,
                               std::optional<OutgoingMessage> out) {
    bool drop = false;
    {
        std::lock_guard lock(mutex_);
        const std::string& request_id = entry->state.request_id;
        finished_.insert(request_id);
        paused_.erase(request_id);
        entry->left = true;
        if (auto it = states_.find(request_id); it != states_.end() && it->second == entry) {
            states_.erase(it);
        }
        drop = entry->cancelled || stopping_;
    }
    if (!drop && out) deliver(std::move(*out));
}

bool StreamingScheduler::emit_chunk(Entry& entry, Value chunk, std::optional<std::string> target,
                                    Value metadata) {
    {
        std::lock_guard lock(mutex_);
        if (entry.cancelled || stopping_) return false;
    }
    std::int64_t& next_id = entry.next_chunk_id[target];
    auto stream_chunk = std::make_shared<const StreamChunk>(StreamChunk{
        .chunk_id = next_id++, .chunk = std::move(chunk), .metadata = std::move(metadata)});
    return deliver(OutgoingMessage{.request_id = entry.state.request_id,
                                   .kind = OutgoingKind::stream,
                                   .chunk = std::move(stream_chunk),
                                   .target = std::move(target)});
}

}  // namespace omnirt::pipeline
