#include "pipeline/simple_scheduler.h"

#include <spdlog/spdlog.h>

#include <map>
#include <utility>

#include "pipeline/trace.h"

namespace omnirt::pipeline {

void RecentRequestIds::insert(const std::string& request_id) {
    if (capacity_ == 0 || !ids_.insert(request_id).second) return;
    order_.push_back(request_id);
    if (order_.size() > capacity_) {
        ids_.erase(order_.front());
        order_.pop_front();
    }
}

void RecentRequestIds::erase(const std::string& request_id) {
    if (ids_.erase(request_id) == 0) return;
    std::erase(order_, request_id);
}

bool RecentRequestIds::contains(const std::string& request_id) const {
    return ids_.contains(request_id);
}

// One item being computed. `cancelled` is guarded by the scheduler's mutex; the chunk counters
// belong to the worker running the item.
struct SimpleScheduler::Job {
    std::string request_id;
    std::shared_ptr<const StagePayload> input;
    bool cancelled = false;
    std::map<std::optional<std::string>, std::int64_t> next_chunk_id;
};

class SimpleScheduler::JobEmitter final : public Emitter {
  public:
    JobEmitter(SimpleScheduler& scheduler, std::shared_ptr<Job> job)
        : scheduler_(scheduler), job_(std::move(job)) {}

    const std::string& request_id() const override { return job_->request_id; }
    bool emit(Value chunk, std::optional<std::string> target, Value metadata) override {
        return scheduler_.emit_chunk(*job_, std::move(chunk), std::move(target),
                                     std::move(metadata));
    }
    bool aborted() const override {
        std::lock_guard lock(scheduler_.mutex_);
        return job_->cancelled || scheduler_.stopping_;
    }
    bool wait_for_abort(std::chrono::milliseconds timeout) override {
        std::unique_lock lock(scheduler_.mutex_);
        return scheduler_.abort_cv_.wait_for(
            lock, timeout, [&] { return job_->cancelled || scheduler_.stopping_; });
    }

  private:
    SimpleScheduler& scheduler_;
    std::shared_ptr<Job> job_;
};

Result<std::unique_ptr<SimpleScheduler>> SimpleScheduler::create(SimpleSchedulerOptions options) {
    const std::string who = "scheduler of stage '" + options.stage_name + "': ";
    if (static_cast<bool>(options.compute) == static_cast<bool>(options.batch_compute)) {
        return fail(ErrorCode::invalid_argument,
                    who + "set exactly one of compute and batch_compute");
    }
    if (options.max_batch_size == 0) {
        return fail(ErrorCode::invalid_argument, who + "max_batch_size must be at least 1");
    }
    if (options.worker_threads == 0) {
        return fail(ErrorCode::invalid_argument, who + "worker_threads must be at least 1");
    }
    if (options.max_batch_size > 1 && !options.batch_compute) {
        return fail(ErrorCode::invalid_argument,
                    who + "max_batch_size > 1 needs a batch_compute function");
    }
    if (options.inline_when_idle && options.max_batch_size > 1) {
        return fail(ErrorCode::invalid_argument, who + "inline_when_idle needs max_batch_size 1");
    }
    if (options.max_batch_wait.count() < 0) {
        return fail(ErrorCode::invalid_argument, who + "max_batch_wait must not be negative");
    }
    return std::unique_ptr<SimpleScheduler>(new SimpleScheduler(std::move(options)));
}

SimpleScheduler::SimpleScheduler(SimpleSchedulerOptions options)
    : Scheduler(options.inbox_capacity, options.outbox_capacity), options_(std::move(options)) {}

SimpleScheduler::~SimpleScheduler() { stop(); }

Status SimpleScheduler::start() {
    std::lock_guard lock(mutex_);
    if (started_ || stopping_) {
        return fail(ErrorCode::failed_precondition,
                    "scheduler of stage '" + options_.stage_name + "' was already started");
    }
    started_ = true;
    free_permits_ = options_.worker_threads;
    for (std::size_t i = 0; i < options_.worker_threads; ++i) {
        workers_.emplace_back([this] { worker_loop(); });
    }
    return ok_status();
}

void SimpleScheduler::begin_stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    abort_cv_.notify_all();
}

void SimpleScheduler::stop() {
    std::lock_guard stop_lock(stop_mutex_);
    begin_stop();
    inbox_.remove_if([](const IncomingMessage&) { return true; });
    inbox_.close();
    for (std::thread& worker : workers_) worker.join();
    workers_.clear();
    {
        // A computation in try_run_here (another thread) still holds its permit.
        std::unique_lock lock(mutex_);
        permit_cv_.wait(lock,
                        [&] { return !started_ || free_permits_ == options_.worker_threads; });
    }
    outbox_.close();
}

bool SimpleScheduler::try_run_here(IncomingMessage& message) {
    if (!options_.inline_when_idle || message.kind != IncomingKind::new_request ||
        message.payload == nullptr) {
        return false;
    }
    {
        std::lock_guard lock(mutex_);
        if (!started_ || stopping_ || free_permits_ == 0 || !running_.empty() ||
            inbox_.size() != 0 || outbox_.size() != 0) {
            return false;
        }
        --free_permits_;
    }
    std::vector<IncomingMessage> batch;
    batch.push_back(std::move(message));
    run_batch(std::move(batch));
    return_permit();
    return true;
}

void SimpleScheduler::take_permit() {
    std::unique_lock lock(mutex_);
    permit_cv_.wait(lock, [&] { return free_permits_ > 0; });
    --free_permits_;
}

void SimpleScheduler::return_permit() {
    // Notified under the lock: stop() may return, and the scheduler go, once the count is back.
    std::lock_guard lock(mutex_);
    ++free_permits_;
    permit_cv_.notify_all();
}

void SimpleScheduler::abort(const std::string& request_id) {
    {
        std::lock_guard lock(mutex_);
        aborted_.insert(request_id);
        auto [begin, end] = running_.equal_range(request_id);
        for (auto it = begin; it != end; ++it) it->second->cancelled = true;
    }
    abort_cv_.notify_all();
    inbox_.remove_if(
        [&](const IncomingMessage& message) { return message.request_id == request_id; });
}

std::size_t SimpleScheduler::active_requests() const {
    std::size_t running = 0;
    {
        std::lock_guard lock(mutex_);
        running = running_.size();
    }
    return running + inbox_.size();
}

bool SimpleScheduler::accept(const IncomingMessage& message) {
    if (message.kind != IncomingKind::new_request) {
        spdlog::warn(
            "stage '{}': dropping a stream {} for request '{}' from '{}' (a simple "
            "scheduler takes no streams)",
            options_.stage_name,
            message.kind == IncomingKind::stream_chunk ? "chunk" : "done signal",
            message.request_id, message.from_stage);
        return false;
    }
    if (message.payload == nullptr) {
        spdlog::warn("stage '{}': dropping request '{}' without a payload", options_.stage_name,
                     message.request_id);
        return false;
    }
    return true;
}

std::vector<IncomingMessage> SimpleScheduler::collect_batch(IncomingMessage first) {
    std::vector<IncomingMessage> batch;
    batch.push_back(std::move(first));
    const auto deadline = Clock::now() + options_.max_batch_wait;
    while (batch.size() < options_.max_batch_size) {
        std::optional<IncomingMessage> next =
            options_.max_batch_wait.count() > 0 ? inbox_.pop_until(deadline) : inbox_.try_pop();
        if (!next) break;
        if (accept(*next)) batch.push_back(std::move(*next));
    }
    return batch;
}

void SimpleScheduler::worker_loop() {
    while (std::optional<IncomingMessage> message = inbox_.pop()) {
        if (!accept(*message)) continue;
        take_permit();
        run_batch(collect_batch(std::move(*message)));
        return_permit();
    }
}

void SimpleScheduler::run_batch(std::vector<IncomingMessage> batch) {
    Tracer* tracer = options_.tracer;
    const bool tracing = tracer != nullptr && tracer->enabled();
    const auto now = Clock::now();
    std::vector<std::shared_ptr<Job>> jobs;
    {
        std::lock_guard lock(mutex_);
        for (IncomingMessage& message : batch) {
            // Popped before an abort of its request reached remove_if: the tombstone drops it.
            if (stopping_ || aborted_.contains(message.request_id)) continue;
            auto job = std::make_shared<Job>();
            job->request_id = message.request_id;
            job->input = std::move(message.payload);
            running_.emplace(job->request_id, job);
            jobs.push_back(std::move(job));
            if (tracing) {
                tracer->record(TraceSpan{.name = "queue_wait",
                                         .category = "scheduler",
                                         .request_id = message.request_id,
                                         .start = message.enqueued_at,
                                         .end = now});
            }
        }
    }
    if (jobs.empty()) return;

    std::vector<JobEmitter> emitters;
    emitters.reserve(jobs.size());
    for (const auto& job : jobs) emitters.emplace_back(*this, job);

    if (options_.compute) {
        for (std::size_t i = 0; i < jobs.size(); ++i) {
            Result<StagePayload> result = [&]() -> Result<StagePayload> {
                ScopedSpan span(tracer, "compute", "scheduler", jobs[i]->request_id);
                ComputeTimer timer(*this);
                return options_.compute(*jobs[i]->input, emitters[i]);
            }();
            finish(jobs[i], std::move(result));
        }
        return;
    }

    std::vector<BatchItem> items;
    items.reserve(jobs.size());
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        items.push_back(BatchItem{.input = jobs[i]->input, .emitter = &emitters[i]});
    }
    std::vector<Result<StagePayload>> results;
    {
        ScopedSpan span(tracer, "compute", "scheduler",
                        jobs.size() == 1 ? jobs[0]->request_id : std::string("batch"));
        ComputeTimer timer(*this);
        results = options_.batch_compute(items);
    }
    if (results.size() != jobs.size()) {
        const std::string message = "batch compute returned " + std::to_string(results.size()) +
                                    " results for " + std::to_string(jobs.size()) + " items";
        for (const auto& job : jobs) finish(job, fail(ErrorCode::internal, message));
        return;
    }
    for (std::size_t i = 0; i < jobs.size(); ++i) finish(jobs[i], std::move(results[i]));
}

void SimpleScheduler::finish(const std::shared_ptr<Job>& job, Result<StagePayload> result) {
    bool drop = false;
    {
        // Deregistered before the push, so active_requests() no longer counts a request whose
        // result a consumer already holds.
        std::lock_guard lock(mutex_);
        auto [begin, end] = running_.equal_range(job->request_id);
        for (auto it = begin; it != end; ++it) {
            if (it->second == job) {
                running_.erase(it);
                break;
            }
        }
        drop = job->cancelled || stopping_;
    }
    if (drop) return;
    OutgoingMessage out{.request_id = job->request_id};
    if (result) {
        out.kind = OutgoingKind::result;
        out.result = std::make_shared<const StagePayload>(std::move(*result));
    } else {
        out.kind = OutgoingKind::error;
        out.error = std::move(result).error();
    }
    deliver(std::move(out));
}

bool SimpleScheduler::emit_chunk(Job& job, Value chunk, std::optional<std::string> target,
                                 Value metadata) {
    {
        std::lock_guard lock(mutex_);
        if (job.cancelled || stopping_) return false;
    }
    std::int64_t& next_id = job.next_chunk_id[target];
    auto stream_chunk = std::make_shared<const StreamChunk>(StreamChunk{
        .chunk_id = next_id++, .chunk = std::move(chunk), .metadata = std::move(metadata)});
    return deliver(OutgoingMessage{.request_id = job.request_id,
                                   .kind = OutgoingKind::stream,
                                   .chunk = std::move(stream_chunk),
                                   .target = std::move(target)});
}

}  // namespace omnirt::pipeline
