#pragma once
// WorkPool: a few threads for CPU work that must not run on IO or coordinator threads (output
// chunks and ends of generation requests: audio time-stretching and encoding). Bounded: post()
// blocks while the queue is full.
//
// Thread safety: post() from any thread; the destructor runs what is queued, then joins.
#include <functional>
#include <thread>
#include <vector>

#include "pipeline/queue.h"

namespace omnirt::serve::api {

class WorkPool {
  public:
    explicit WorkPool(int threads, std::size_t capacity = 4096) : queue_(capacity) {
        for (int i = 0; i < (threads < 1 ? 1 : threads); ++i) {
            threads_.emplace_back([this] {
                while (auto task = queue_.pop()) (*task)();
            });
        }
    }
    ~WorkPool() {
        queue_.close();
        for (auto& thread : threads_) thread.join();
    }
    WorkPool(const WorkPool&) = delete;
    WorkPool& operator=(const WorkPool&) = delete;

    // False (task not run) after the pool began shutting down.
    bool post(std::function<void()> task) { return queue_.push(std::move(task)); }

  private:
    pipeline::BlockingQueue<std::function<void()>> queue_;
    std::vector<std::thread> threads_;
};

}  // namespace omnirt::serve::api
