// The three ways to run a request: start_request (callback), submit (blocks for the result) and
// stream (a pull-side RequestStream over a bounded per-request event queue).
#include <condition_variable>
#include <deque>
#include <mutex>

#include "pipeline/coordinator.h"
#include "pipeline/coordinator_internal.h"

namespace omnirt::pipeline {
namespace {

using detail::CoordinatorCore;
using detail::RequestEntry;

// The events of one streamed request. push() never blocks (it runs on the IO thread): a chunk
// above capacity is refused; the terminal event is always accepted.
class EventQueue {
  public:
    explicit EventQueue(std::size_t capacity) : capacity_(capacity) {}

    bool push(RequestEvent event) {
        std::lock_guard lock(mutex_);
        if (event.terminal()) {
            terminal_received_ = true;
        } else if (events_.size() >= capacity_) {
            return false;
        }
        events_.push_back(std::move(event));
        changed_.notify_all();
        return true;
    }

    // nullopt when nothing arrived within `timeout` (Duration::max() waits for ever).
    std::optional<RequestEvent> pop(Duration timeout) {
        using Clock = std::chrono::steady_clock;
        auto now = Clock::now();
        // Saturating: now + a huge timeout would overflow the clock.
        auto deadline =
            timeout >= std::chrono::duration_cast<Duration>(Clock::time_point::max() - now)
                ? Clock::time_point::max()
                : now + timeout;
        std::unique_lock lock(mutex_);
        auto ready = [&] { return !events_.empty(); };
        if (deadline == Clock::time_point::max()) {
            changed_.wait(lock, ready);
        } else if (!changed_.wait_until(lock, deadline, ready)) {
            return std::nullopt;
        }
        RequestEvent event = std::move(events_.front());
        events_.pop_front();
        return event;
    }

    bool terminal_received() const {
        std::lock_guard lock(mutex_);
        return terminal_received_;
    }

  private:
    const std::size_t capacity_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<RequestEvent> events_;
    bool terminal_received_ = false;
};

class CoordinatorRequestStream final : public RequestStream {
  public:
    CoordinatorRequestStream(CoordinatorCore* core, std::shared_ptr<RequestEntry> entry,
                             std::shared_ptr<EventQueue> queue, std::string request_id)
        : core_(core),
          entry_(std::move(entry)),
          queue_(std::move(queue)),
          request_id_(std::move(request_id)) {}

    // A stream dropped before its terminal event aborts the request (the client went away).
    // Streams outlive their coordinator only after it stopped, which ended their requests.
    ~CoordinatorRequestStream() override {
        if (queue_->terminal_received()) return;
        (void)core_->end_entry(entry_, RequestEvent::Kind::aborted,
                               Error{ErrorCode::aborted, "the request stream was closed"});
    }

    Result<std::optional<RequestEvent>> next(Duration timeout) override {
        if (terminal_returned_) return std::optional<RequestEvent>();
        auto event = queue_->pop(timeout);
        if (!event) {
            return fail(ErrorCode::deadline_exceeded, "request '" + request_id_ +
                                                          "': no event within " +
                                                          std::to_string(timeout.count()) + " ms");
        }
        if (event->terminal()) terminal_returned_ = true;
        return std::optional<RequestEvent>(std::move(*event));
    }

    const std::string& request_id() const override { return request_id_; }

  private:
    CoordinatorCore* core_;
    std::shared_ptr<RequestEntry> entry_;
    std::shared_ptr<EventQueue> queue_;
    std::string request_id_;
    bool terminal_returned_ = false;
};

// The single result of submit(), set on whichever thread ends the request.
struct ResultSlot {
    std::mutex mutex;
    std::condition_variable done;
    std::optional<Result<StagePayload>> result;
};

}  // namespace

Status Coordinator::start_request(const std::string& request_id, OmniRequest request,
                                  RequestOptions options, EventCallback on_event) {
    auto entry = std::make_shared<RequestEntry>();
    entry->callback = std::make_shared<const EventCallback>(std::move(on_event));
    return state_->core->start_entry(entry, request_id, std::move(request), options);
}

Result<StagePayload> Coordinator::submit(const std::string& request_id, OmniRequest request,
                                         RequestOptions options) {
    auto slot = std::make_shared<ResultSlot>();
    auto on_event = [slot](RequestEvent event) {
        if (!event.terminal()) return;
        std::lock_guard lock(slot->mutex);
        if (event.kind == RequestEvent::Kind::completed) {
            slot->result = std::move(event.result);
        } else {
            slot->result = fail(std::move(event.error));
        }
        slot->done.notify_all();
    };
    OMNI_RETURN_IF_ERROR(
        start_request(request_id, std::move(request), options, std::move(on_event)));
    std::unique_lock lock(slot->mutex);
    slot->done.wait(lock, [&] { return slot->result.has_value(); });
    return std::move(*slot->result);
}

Result<std::unique_ptr<RequestStream>> Coordinator::stream(const std::string& request_id,
                                                           OmniRequest request,
                                                           RequestOptions options) {
    CoordinatorCore* core = state_->core.get();
    std::size_t capacity = core->options().stream_queue_capacity;
    auto queue = std::make_shared<EventQueue>(capacity);
    auto entry = std::make_shared<RequestEntry>();
    std::weak_ptr<RequestEntry> weak_entry = entry;
    auto on_event = [core, queue, weak_entry, capacity](RequestEvent event) {
        if (queue->push(std::move(event))) return;
        // A consumer that falls this far behind would make the IO thread wait: end the request.
        (void)core->end_entry(weak_entry.lock(), RequestEvent::Kind::failed,
                              Error{ErrorCode::resource_exhausted,
                                    "request stream queue full (" + std::to_string(capacity) +
                                        " events): the consumer fell behind"});
    };
    entry->callback = std::make_shared<const EventCallback>(std::move(on_event));
    OMNI_RETURN_IF_ERROR(core->start_entry(entry, request_id, std::move(request), options));
    return std::unique_ptr<RequestStream>(
        new CoordinatorRequestStream(core, std::move(entry), std::move(queue), request_id));
}

}  // namespace omnirt::pipeline
