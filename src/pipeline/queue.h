#pragma once
// BlockingQueue: a bounded multi-producer multi-consumer queue with close(). It is the hand-off
// between a stage's threads and its scheduler (inbox / outbox of pipeline.md).
//
// Thread safety: every method may be called from any thread. push() blocks while the queue is
// full (backpressure); pop() blocks while it is empty. close() wakes every waiter: pushes then
// fail, pops drain what is left and then return nullopt.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

namespace omnirt::pipeline {

template <class T>
class BlockingQueue {
  public:
    using Clock = std::chrono::steady_clock;

    explicit BlockingQueue(std::size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}
    BlockingQueue(const BlockingQueue&) = delete;
    BlockingQueue& operator=(const BlockingQueue&) = delete;

    // Blocks while full. False (and `item` dropped) when the queue is closed.
    bool push(T item) {
        std::unique_lock lock(mutex_);
        not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
        if (closed_) return false;
        items_.push_back(std::move(item));
        lock.unlock();
        not_empty_.notify_one();
        return true;
    }

    // Blocks until an item arrives; nullopt once the queue is closed and empty.
    std::optional<T> pop() {
        std::unique_lock lock(mutex_);
        not_empty_.wait(lock, [&] { return closed_ || !items_.empty(); });
        return take(lock);
    }

    // Like pop(), but gives up at `deadline` (nullopt; check closed() to tell the two apart).
    std::optional<T> pop_until(Clock::time_point deadline) {
        std::unique_lock lock(mutex_);
        not_empty_.wait_until(lock, deadline, [&] { return closed_ || !items_.empty(); });
        return take(lock);
    }

    // Like pop(), but interrupt() also ends the wait (nullopt while the queue is open): for a
    // consumer that has more than this queue to watch (the AR engine's aborts). An interrupt()
    // is never lost: it ends the next pop_interruptible() that finds no item.
    std::optional<T> pop_interruptible() {
        std::unique_lock lock(mutex_);
        not_empty_.wait(lock, [&] { return closed_ || !items_.empty() || interrupted_; });
        if (items_.empty()) interrupted_ = false;
        return take(lock);
    }
    void interrupt() {
        {
            std::lock_guard lock(mutex_);
            interrupted_ = true;
        }
        not_empty_.notify_all();
    }

    // Blocks until an item is queued (true) or the queue is closed and empty (false); removes
    // nothing. For a consumer that pops with try_pop() under a lock of its own, so that another
    // thread holding that lock can tell "nothing queued, nothing being handled" (stage.h).
    bool wait_not_empty() {
        std::unique_lock lock(mutex_);
        not_empty_.wait(lock, [&] { return closed_ || !items_.empty(); });
        return !items_.empty();
    }

    // Like wait_not_empty(), but gives up at `deadline` (false; check closed() to tell apart).
    bool wait_not_empty_until(Clock::time_point deadline) {
        std::unique_lock lock(mutex_);
        not_empty_.wait_until(lock, deadline, [&] { return closed_ || !items_.empty(); });
        return !items_.empty();
    }

    // Never blocks.
    std::optional<T> try_pop() {
        std::unique_lock lock(mutex_);
        return take(lock);
    }

    // Removes every queued item for which `predicate` is true; returns how many.
    template <class Predicate>
    std::size_t remove_if(Predicate predicate) {
        std::unique_lock lock(mutex_);
        std::size_t before = items_.size();
        std::erase_if(items_, predicate);
        std::size_t removed = before - items_.size();
        lock.unlock();
        if (removed > 0) not_full_.notify_all();
        return removed;
    }

    void close() {
        {
            std::lock_guard lock(mutex_);
            closed_ = true;
        }
        not_empty_.notify_all();
        not_full_.notify_all();
    }

    [[nodiscard]] bool closed() const {
        std::lock_guard lock(mutex_);
        return closed_;
    }
    [[nodiscard]] std::size_t size() const {
        std::lock_guard lock(mutex_);
        return items_.size();
    }
    [[nodiscard]] std::size_t capacity() const { return capacity_; }

  private:
    std::optional<T> take(std::unique_lock<std::mutex>& lock) {
        if (items_.empty()) return std::nullopt;
        std::optional<T> item(std::move(items_.front()));
        items_.pop_front();
        lock.unlock();
        not_full_.notify_one();
        return item;
    }

    const std::size_t capacity_;
    mutable std::mutex mutex_;
    std::condition_variable not_empty_;
    std::condition_variable not_full_;
    std::deque<T> items_;
    bool closed_ = false;
    bool interrupted_ = false;
};

}  // namespace omnirt::pipeline
