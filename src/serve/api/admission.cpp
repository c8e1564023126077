// Generation slots (--max-concurrency) and the bounded queue in front of them (--max-queue).
#include <algorithm>
#include <cmath>

#include "serve/api/api_internal.h"

namespace omnirt::serve::api {
namespace {

// How long a client should wait before retrying: the queue ahead of it drained at the pace of
// recent generations over the slots, 1..60 s.
int retry_after_seconds(const ApiState& state, std::size_t waiting) {
    const double slots =
        static_cast<double>(std::max<std::size_t>(state.options.max_concurrency, 1));
    const double seconds = state.mean_generation_seconds * static_cast<double>(waiting + 1) / slots;
    return static_cast<int>(std::clamp(std::ceil(seconds), 1.0, 60.0));
}

}  // namespace

bool try_acquire_slot(ApiState& state) {
    const std::size_t limit = state.options.max_concurrency;
    std::lock_guard lock(state.admission_mutex);
    if (limit != 0 && state.generating.load() >= limit) return false;
    state.generating.fetch_add(1);
    return true;
}

void release_slot(ApiState& state, double seconds) {
    ApiState::Waiting next;
    {
        std::lock_guard lock(state.admission_mutex);
        if (seconds >= 0) {
            state.mean_generation_seconds = 0.8 * state.mean_generation_seconds + 0.2 * seconds;
        }
        if (state.waiting.empty()) {
            state.generating.fetch_sub(1);
            return;
        }
        // The slot passes to the first in line (generating stays the same).
        next = std::move(state.waiting.front());
        state.waiting.pop_front();
        state.metrics.set_queued(static_cast<std::int64_t>(state.waiting.size()));
    }
    next.exchange->hold_slot();
    // Starting a request from here could be inside a pipeline callback: the pool runs it. A
    // closed pool (shutdown) drops it, and the exchange is answered 500 by the HTTP layer.
    auto shared = std::make_shared<ApiState::Waiting>(std::move(next));
    (void)state.pool->post([shared] { shared->proceed(std::move(shared->exchange)); });
}

void admit(std::unique_ptr<Exchange> exchange,
           std::function<void(std::unique_ptr<Exchange>)> proceed) {
    ApiState& state = exchange->state();
    const std::size_t limit = state.options.max_concurrency;
    {
        std::unique_lock lock(state.admission_mutex);
        if (limit != 0 && state.generating.load() >= limit) {
            if (state.waiting.size() >= state.options.max_queue) {
                const int retry = retry_after_seconds(state, state.waiting.size());
                lock.unlock();
                exchange->respond(
                    429, "application/json",
                    openai::error_json(
                        {429,
                         "too many concurrent requests: the server takes at most " +
                             std::to_string(limit) + " at once (--max-concurrency)" +
                             (state.options.max_queue != 0
                                  ? " and " + std::to_string(state.options.max_queue) +
                                        " waiting (--max-queue)"
                                  : std::string()),
                         "rate_limit_error", "", "rate_limit_exceeded"}),
                    {{"retry-after", std::to_string(retry)}});
                return;
            }
            Exchange* raw = exchange.get();
            state.waiting.push_back({std::move(exchange), std::move(proceed)});
            state.metrics.set_queued(static_cast<std::int64_t>(state.waiting.size()));
            lock.unlock();
            // A client that leaves while waiting gives up its place.
            ApiState* s = &state;
            raw->http().on_disconnect([s, raw] {
                std::unique_ptr<Exchange> gone;
                std::lock_guard guard(s->admission_mutex);
                auto it = std::find_if(s->waiting.begin(), s->waiting.end(),
                                       [raw](const auto& w) { return w.exchange.get() == raw; });
                if (it == s->waiting.end()) return;  // admitted meanwhile
                gone = std::move(it->exchange);
                s->waiting.erase(it);
                s->metrics.set_queued(static_cast<std::int64_t>(s->waiting.size()));
            });
            return;
        }
        state.generating.fetch_add(1);
    }
    exchange->hold_slot();
    proceed(std::move(exchange));
}

}  // namespace omnirt::serve::api
